package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// Concurrency slots (internal/slots) are kept in three buckets:
//
//	slots         key → slotRecord: the terms of the last call, the holders, the length of the line
//	slot_line     (key, seq) → waiter: the line, in order of seq
//	slot_waiters  (key, id) → seq: where each waiter stands in slot_line
//
// A waiter's seq comes from one sequence of the whole store (slot_line's),
// so it grows along every line and is never reused, even by a key deleted
// and used again: a cursor of SlotLine stays exact. An operation reads
// the record, the first slots.WindowFront waiters (one seek) and, for a
// caller waiting further back, its own entry (two lookups): O(limit +
// log n), whatever the length of the line.

// slotRecord is a key's record in bSlots.
type slotRecord struct {
	Limit   int            `json:"limit"`
	Policy  slots.Policy   `json:"policy,omitempty"`
	Holders []slots.Holder `json:"holders,omitempty"`
	// Waiting is the length of the key's line in bSlotLine.
	Waiting int `json:"waiting,omitempty"`
}

func slotLinePrefix(k string) key          { return key(nil).str(k) }
func slotLineKey(k string, seq uint64) key { return key(nil).str(k).u64(seq) }
func slotWaiterKey(k, id string) key       { return key(nil).str(k).str(id) }
func seqBytes(seq uint64) []byte           { return binary.BigEndian.AppendUint64(nil, seq) }

// seqOf reads a seq stored as 8 big-endian bytes.
func seqOf(v []byte) (uint64, bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// utcHolder and utcWaiter put the times of what is stored in UTC: what is
// stored is what a read returns.
func utcHolder(h slots.Holder) slots.Holder {
	h.Since, h.Expiry = h.Since.UTC(), h.Expiry.UTC()
	return h
}

func utcWaiter(w slots.Waiter) slots.Waiter {
	w.Since = w.Since.UTC()
	return w
}

// sameTerms reports whether r keeps p's limit and policy.
func sameTerms(r *slotRecord, p slots.Params) bool { return r.Limit == p.Limit && r.Policy == p.Policy }

// checkSlotKey refuses a key that is empty or longer than
// store.MaxSlotKeyLen.
func checkSlotKey(k string) error {
	if k == "" {
		return store.Invalid("slot key must not be empty")
	}
	if len(k) > store.MaxSlotKeyLen {
		return store.Invalid("slot key is %d bytes, more than %d", len(k), store.MaxSlotKeyLen)
	}
	return nil
}

// getSlotRecord reads key's record; nil when it has none.
func getSlotRecord(tx kvTx, k string) (*slotRecord, error) {
	raw := tx.Bucket(bSlots).Get([]byte(k))
	if raw == nil {
		return nil, nil
	}
	var r slotRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("slot key %q: corrupt record: %w", k, err)
	}
	return &r, nil
}

// decodeWaiter reads a waiter of bSlotLine stored under lk.
func decodeWaiter(k string, lk, v []byte) (slots.Waiter, error) {
	var w slots.Waiter
	if err := json.Unmarshal(v, &w); err != nil {
		return w, fmt.Errorf("slot key %q: corrupt waiter under %x: %w", k, lk, err)
	}
	return w, nil
}

// slotView is what UpdateSlots read of a key: its record and the
// window of its State that the operation is handed.
type slotView struct {
	rec    *slotRecord // nil: the key has no record
	window slots.State
	// seqs are the window's waiters' places in bSlotLine.
	seqs map[string]uint64
}

// readSlotView reads key's window for id under p (Store.UpdateSlots): the
// holders, the first slots.WindowFront(p) waiters, and id's own entry
// when it waits further back.
func readSlotView(tx kvTx, k, id string, p slots.Params) (*slotView, error) {
	rec, err := getSlotRecord(tx, k)
	if err != nil {
		return nil, err
	}
	v := &slotView{rec: rec, window: slots.State{Key: k}, seqs: map[string]uint64{}}
	if rec == nil {
		return v, nil
	}
	v.window.Holders = slices.Clone(rec.Holders)
	if rec.Waiting == 0 {
		return v, nil
	}
	front := slots.WindowFront(p)
	if front < 0 && p.Policy != slots.CancelOldest {
		front = 0 // a limit the operation refuses: no reason to read the line
	}
	prefix := slotLinePrefix(k)
	c := tx.Bucket(bSlotLine).Cursor()
	for lk, val := c.Seek(prefix); hasPrefix(lk, prefix) && (front < 0 || len(v.window.Waiters) < front); lk, val = c.Next() {
		if err := v.add(k, lk, val); err != nil {
			return nil, err
		}
	}
	if _, seen := v.seqs[id]; seen || front < 0 {
		return v, nil
	}
	raw := tx.Bucket(bSlotWaiters).Get(slotWaiterKey(k, id))
	if raw == nil {
		return v, nil
	}
	seq, ok := seqOf(raw)
	if !ok {
		return nil, fmt.Errorf("slot key %q: corrupt place of waiter %q: %x", k, id, raw)
	}
	lk := slotLineKey(k, seq)
	val := tx.Bucket(bSlotLine).Get(lk)
	if val == nil {
		return nil, fmt.Errorf("slot key %q: waiter %q has a place (%d) but no entry in the line", k, id, seq)
	}
	return v, v.add(k, lk, val)
}

// add appends the waiter stored under lk to the window.
func (v *slotView) add(k string, lk, val []byte) error {
	w, err := decodeWaiter(k, lk, val)
	if err != nil {
		return err
	}
	if len(lk) < 8 {
		return fmt.Errorf("slot key %q: corrupt line key %x", k, lk)
	}
	seq, _ := seqOf(lk[len(lk)-8:])
	v.window.Waiters = append(v.window.Waiters, w)
	v.seqs[w.ID] = seq
	return nil
}

// slotChange is what an operation did to a key's stored State.
type slotChange struct {
	d slots.Decision
	// rec is the key's new record; nil when the key is left Empty.
	rec *slotRecord
	// left are the waiters of the window that left the line; joined the
	// waiters to append at its end.
	left   []string
	joined []slots.Waiter
	// changed is false when nothing is to be written: the same holders,
	// the same line, the same terms.
	changed bool
}

// apply runs op on v's window and works out what changes.
func (v *slotView) apply(op store.SlotOp, id string, p slots.Params, now time.Time) (slotChange, error) {
	next, d, err := op(v.window, id, p, now)
	if err != nil {
		return slotChange{}, err
	}
	ch := slotChange{d: d}
	ch.left, ch.joined = slots.LineChanges(v.window.Waiters, next.Waiters)
	holders := make([]slots.Holder, len(next.Holders))
	for i, h := range next.Holders {
		holders[i] = utcHolder(h)
	}
	for i, w := range ch.joined {
		ch.joined[i] = utcWaiter(w)
	}
	waiting := len(ch.joined) - len(ch.left)
	if v.rec != nil {
		waiting += v.rec.Waiting
	}
	if len(holders) > 0 || waiting > 0 {
		ch.rec = &slotRecord{Limit: p.Limit, Policy: p.Policy, Holders: holders, Waiting: waiting}
	}
	switch {
	case v.rec == nil:
		ch.changed = ch.rec != nil
	case ch.rec == nil:
		ch.changed = true
	default:
		ch.changed = len(ch.left) > 0 || len(ch.joined) > 0 || !sameTerms(v.rec, p) ||
			!slices.EqualFunc(v.rec.Holders, holders, func(a, b slots.Holder) bool {
				return a.ID == b.ID && a.Since.Equal(b.Since) && a.Expiry.Equal(b.Expiry) && a.Cancelling == b.Cancelling
			})
	}
	return ch, nil
}

// write stores ch for key k, read as v.
func (v *slotView) write(tx kvTx, k string, ch slotChange) error {
	line, places := tx.Bucket(bSlotLine), tx.Bucket(bSlotWaiters)
	for _, id := range ch.left {
		if err := line.Delete(slotLineKey(k, v.seqs[id])); err != nil {
			return err
		}
		if err := places.Delete(slotWaiterKey(k, id)); err != nil {
			return err
		}
	}
	for _, w := range ch.joined {
		pk := slotWaiterKey(k, w.ID)
		if places.Get(pk) != nil {
			return fmt.Errorf("slot key %q: the operation put %q at the end of the line, where it waits already", k, w.ID)
		}
		seq, err := line.NextSequence()
		if err != nil {
			return err
		}
		if err := putJSON(line, slotLineKey(k, seq), w); err != nil {
			return err
		}
		if err := places.Put(pk, seqBytes(seq)); err != nil {
			return err
		}
	}
	if ch.rec == nil {
		return tx.Bucket(bSlots).Delete([]byte(k))
	}
	return putJSON(tx.Bucket(bSlots), []byte(k), ch.rec)
}

// UpdateSlots implements store.Store. It first reads the key and runs op
// in a read transaction: when op changes nothing (an Acquire of a waiter,
// a Release of an id the key does not know), that is the answer, and
// nothing is written. Otherwise op runs again on what the write
// transaction reads, which is what it commits.
func (s *Store) UpdateSlots(ctx context.Context, k, id string, p slots.Params, now time.Time, op store.SlotOp) (slots.Decision, error) {
	if err := ctx.Err(); err != nil {
		return slots.Decision{}, err
	}
	if err := checkSlotKey(k); err != nil {
		return slots.Decision{}, err
	}
	if err := weft.CheckID("slot holder id", id); err != nil {
		return slots.Decision{}, err
	}
	var ch slotChange
	err := s.read(ctx, func(tx kvTx) error {
		v, err := readSlotView(tx, k, id, p)
		if err != nil {
			return err
		}
		if ch, err = v.apply(op, id, p, now); err != nil {
			return refuse(err)
		}
		return nil
	})
	if err != nil {
		return slots.Decision{}, err
	}
	if !ch.changed {
		return ch.d, nil
	}
	err = s.write(ctx, func(tx kvTx) error {
		v, err := readSlotView(tx, k, id, p)
		if err != nil {
			return err
		}
		if ch, err = v.apply(op, id, p, now); err != nil {
			return refuse(err)
		}
		if !ch.changed {
			return nil
		}
		return v.write(tx, k, ch)
	})
	if err != nil {
		return slots.Decision{}, err
	}
	return ch.d, nil
}

// SlotKeys implements store.Store.
func (s *Store) SlotKeys(ctx context.Context, prefix, cursor string, limit int) ([]store.SlotKey, string, error) {
	limit = weft.ClampLimit(limit)
	var after []byte
	if cursor != "" {
		var err error
		if after, err = decodeCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	var out []store.SlotKey
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out, next = nil, ""
		pre := []byte(prefix)
		c := tx.Bucket(bSlots).Cursor()
		k, raw := c.Seek(pre)
		if after != nil && bytes.Compare(after, pre) >= 0 {
			if k, raw = c.Seek(after); bytes.Equal(k, after) {
				k, raw = c.Next()
			}
		}
		for ; hasPrefix(k, pre); k, raw = c.Next() {
			if len(out) == limit {
				next = encodeCursor([]byte(out[len(out)-1].Key))
				return nil
			}
			var r slotRecord
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("slot key %q: corrupt record: %w", k, err)
			}
			sk := store.SlotKey{Key: string(k), Limit: r.Limit, Policy: r.Policy, Holders: r.Holders, Waiting: r.Waiting}
			if r.Waiting > 0 {
				lp := slotLinePrefix(sk.Key)
				lk, v := tx.Bucket(bSlotLine).Cursor().Seek(lp)
				if !hasPrefix(lk, lp) {
					return fmt.Errorf("slot key %q: %d waiting, but its line is empty", sk.Key, r.Waiting)
				}
				w, err := decodeWaiter(sk.Key, lk, v)
				if err != nil {
					return err
				}
				sk.OldestWait = w.Since
			}
			out = append(out, sk)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// SlotLine implements store.Store. Its cursor is the seq of the last
// waiter of the page: the next page goes on after it, though it left the
// line since.
func (s *Store) SlotLine(ctx context.Context, k, cursor string, limit int) ([]slots.Waiter, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkSlotKey(k); err != nil {
		return nil, "", err
	}
	limit = weft.ClampLimit(limit)
	prefix := slotLinePrefix(k)
	from := prefix
	if cursor != "" {
		b, err := decodeCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		seq, ok := seqOf(b)
		if !ok {
			return nil, "", store.Invalid("bad cursor %q", cursor)
		}
		if seq == math.MaxUint64 {
			return nil, "", nil // no seq follows
		}
		from = slotLineKey(k, seq+1)
	}
	var out []slots.Waiter
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out, next = nil, ""
		c := tx.Bucket(bSlotLine).Cursor()
		var last []byte
		for lk, v := c.Seek(from); hasPrefix(lk, prefix); lk, v = c.Next() {
			if len(out) == limit {
				next = encodeCursor(last)
				return nil
			}
			w, err := decodeWaiter(k, lk, v)
			if err != nil {
				return err
			}
			out = append(out, w)
			last = lk[len(lk)-8:]
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}
