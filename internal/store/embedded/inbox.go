package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func inboxKey(id string, seq uint64) key     { return key(nil).str(id).u64(seq) }
func inboxIDKey(id, msgID string) key        { return key(nil).str(id).str(msgID) }
func inboxPrefix(id string) key              { return key(nil).str(id) }
func instanceExists(tx kvTx, id string) bool { return tx.Bucket(bInst).Has([]byte(id)) }

// putMessages writes msgs to their instances' inboxes, in order. A message
// for an instance that does not exist is dropped, and so is one whose ID
// its inbox holds (written earlier, or earlier in msgs). It returns the
// instance of the first message written ("" when none was).
func putMessages(tx kvTx, msgs []weft.Message, now time.Time) (first string, err error) {
	inbox, ids := tx.Bucket(bInbox), tx.Bucket(bInboxIDs)
	for _, m := range msgs {
		if !instanceExists(tx, m.InstanceID) {
			continue
		}
		ik := inboxIDKey(m.InstanceID, m.ID)
		if ids.Get(ik) != nil {
			continue
		}
		seq, err := inbox.NextSequence()
		if err != nil {
			return "", err
		}
		m.Seq = seq
		m.CreatedAt = now
		if err := putJSON(inbox, inboxKey(m.InstanceID, seq), m); err != nil {
			return "", err
		}
		if err := putU64(ids, ik, seq); err != nil {
			return "", err
		}
		if err := startWaiting(tx, m.InstanceID, now, false); err != nil {
			return "", err
		}
		if first == "" {
			first = m.InstanceID
		}
	}
	return first, nil
}

// startWaiting records that instance id's inbox waits since now: when it
// was empty, or always with restart (its messages were just consumed).
func startWaiting(tx kvTx, id string, now time.Time, restart bool) error {
	since, idx := tx.Bucket(bInboxWait), tx.Bucket(bInboxWaitX)
	if old := since.Get([]byte(id)); old != nil {
		if !restart {
			return nil
		}
		if err := idx.Delete(key(bytes.Clone(old)).str(id)); err != nil {
			return err
		}
	}
	t := key(nil).time(now)
	if err := since.Put([]byte(id), t); err != nil {
		return err
	}
	return idx.Put(t.str(id), nil)
}

// stopWaiting forgets instance id's inbox wait.
func stopWaiting(tx kvTx, id string) error {
	since, idx := tx.Bucket(bInboxWait), tx.Bucket(bInboxWaitX)
	old := since.Get([]byte(id))
	if old == nil {
		return nil
	}
	if err := idx.Delete(key(bytes.Clone(old)).str(id)); err != nil {
		return err
	}
	return since.Delete([]byte(id))
}

// WaitingInboxes implements store.Store.
func (s *Store) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(before)
	var out []string
	err := s.read(ctx, func(tx kvTx) error {
		c := tx.Bucket(bInboxWaitX).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) < 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt inbox-wait key %x", k)
			}
			out = append(out, id)
		}
		return nil
	})
	return out, err
}

// undrained reports whether instance id's inbox holds a message not among
// consumed (Commit.Drains). An inbox that holds a message has a wait
// (putMessages, consumeMessages, initSchema), so one point read answers
// for an empty inbox, most instances' at most reads, without a walk.
func undrained(tx kvTx, id string, consumed []string) bool {
	if !tx.Bucket(bInboxWait).Has([]byte(id)) {
		return false
	}
	prefix := inboxPrefix(id)
	c := tx.Bucket(bInboxIDs).Cursor()
	for k, _ := c.Seek(prefix); hasPrefix(k, prefix); k, _ = c.Next() {
		msgID, _, ok := readStr(k[len(prefix):])
		if !ok || !slices.Contains(consumed, msgID) {
			return true
		}
	}
	return false
}

// consumeMessages removes the messages msgIDs from instance id's inbox;
// ids it does not hold are ignored. The inbox's wait restarts at now, or
// ends with its last message.
func consumeMessages(tx kvTx, id string, msgIDs []string, now time.Time) error {
	inbox, ids := tx.Bucket(bInbox), tx.Bucket(bInboxIDs)
	for _, msgID := range msgIDs {
		ik := inboxIDKey(id, msgID)
		v := ids.Get(ik)
		if v == nil {
			continue
		}
		if len(v) != 8 {
			return fmt.Errorf("instance %q: corrupt inbox index of message %q", id, msgID)
		}
		if err := inbox.Delete(inboxKey(id, binary.BigEndian.Uint64(v))); err != nil {
			return err
		}
		if err := ids.Delete(ik); err != nil {
			return err
		}
	}
	if len(msgIDs) == 0 {
		return nil
	}
	if k, _ := ids.Cursor().Seek(inboxPrefix(id)); hasPrefix(k, inboxPrefix(id)) {
		return startWaiting(tx, id, now, true)
	}
	return stopWaiting(tx, id)
}

// waitAllInboxes gives every inbox that holds a message a wait since now,
// when it has none.
func waitAllInboxes(tx kvTx, now time.Time) error {
	ids, err := keyIDs(tx.Bucket(bInboxIDs))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := startWaiting(tx, id, now, false); err != nil {
			return err
		}
	}
	return nil
}

// clearInbox removes instance id's inbox.
func clearInbox(tx kvTx, id string) error {
	if err := stopWaiting(tx, id); err != nil {
		return err
	}
	for _, name := range [][]byte{bInbox, bInboxIDs} {
		b := tx.Bucket(name)
		if err := deleteKeys(b, prefixKeys(b, inboxPrefix(id))); err != nil {
			return err
		}
	}
	return nil
}

// Deliver implements store.Store. The stimulus is recorded with
// DeliveredTo set to the instance of the first message written, or empty
// when no message was.
func (s *Store) Deliver(ctx context.Context, st *weft.Stimulus, msgs []weft.Message) (*weft.Stimulus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateDeliver(st, msgs); err != nil {
		return nil, err
	}
	if st == nil && len(msgs) == 0 {
		return nil, nil
	}
	var existing *weft.Stimulus
	err := s.write(ctx, func(tx kvTx) error {
		existing = nil
		if st != nil {
			old, err := getStim(tx, st.ID)
			if err != nil {
				return err
			}
			if old != nil {
				existing = &old.Stimulus
				return nil
			}
		}
		now := s.now()
		first, err := putMessages(tx, msgs, now)
		if err != nil {
			return err
		}
		if st == nil {
			return nil
		}
		r := &stimRecord{Stimulus: *st}
		r.CreatedAt = now
		r.ExpiresAt = st.ExpiresAt.UTC()
		return s.recordDelivered(tx, r, first, st.Outcome, now)
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// Inbox implements store.Store.
func (s *Store) Inbox(ctx context.Context, id string) ([]weft.Message, error) {
	var out []weft.Message
	err := s.read(ctx, func(tx kvTx) error {
		if !instanceExists(tx, id) {
			return store.NotFound("instance %q", id)
		}
		return scanJSON(tx.Bucket(bInbox), inboxPrefix(id), 0, func(m weft.Message) { out = append(out, m) })
	})
	return out, err
}
