package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// stimRecord is a stimulus as stored in bStim, with its queue sequence
// number (the order of PendingStimuli).
type stimRecord struct {
	weft.Stimulus
	Seq uint64 `json:"seq"`
}

func getStim(tx kvTx, id string) (*stimRecord, error) {
	raw := tx.Bucket(bStim).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	var r stimRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("stimulus %q: corrupt record: %w", id, err)
	}
	return &r, nil
}

func queueKey(r *stimRecord) key  { return key(nil).str(r.Name).str(r.Key).u64(r.Seq) }
func expiryKey(r *stimRecord) key { return key(nil).time(r.ExpiresAt).str(r.ID) }
func deadKey(r *stimRecord) key   { return key(nil).time(r.SettledAt).str(r.ID) }

// forgetKey is when the record of a settled stimulus may go: for a
// delivered one, DeliveredRetention after delivery and not before its
// ExpiresAt; for a dead one, DeadLetterRetention after it died.
func (s *Store) forgetKey(r *stimRecord) key {
	var at time.Time
	switch r.State {
	case weft.StimulusDelivered:
		at = r.SettledAt.Add(s.cfg.DeliveredRetention)
		if r.ExpiresAt.After(at) {
			at = r.ExpiresAt
		}
	default:
		at = r.SettledAt.Add(s.cfg.DeadLetterRetention)
	}
	return key(nil).time(at).str(r.ID)
}

// unqueue removes a queued stimulus from the queue and expiry indexes.
func unqueue(tx kvTx, r *stimRecord) error {
	if err := tx.Bucket(bStimQueue).Delete(queueKey(r)); err != nil {
		return err
	}
	return tx.Bucket(bStimExp).Delete(expiryKey(r))
}

// deliver records a queued stimulus as delivered to instance id.
func (s *Store) deliver(tx kvTx, r *stimRecord, id string, outcome json.RawMessage, now time.Time) error {
	if err := unqueue(tx, r); err != nil {
		return err
	}
	return s.recordDelivered(tx, r, id, outcome, now)
}

// recordDelivered stores r as delivered to instance id (which may be
// empty) at now, to be forgotten when its retention ends. r is not queued.
func (s *Store) recordDelivered(tx kvTx, r *stimRecord, id string, outcome json.RawMessage, now time.Time) error {
	r.State = weft.StimulusDelivered
	r.SettledAt = now
	r.DeliveredTo = id
	r.Outcome = outcome
	if err := tx.Bucket(bStimForget).Put(s.forgetKey(r), []byte{}); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bStim), []byte(r.ID), r)
}

// EnqueueStimulus implements store.Store.
func (s *Store) EnqueueStimulus(ctx context.Context, st weft.Stimulus) (*weft.Stimulus, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateStimulus(st); err != nil {
		return nil, err
	}
	var existing *weft.Stimulus
	err := s.write(ctx, func(tx kvTx) error {
		existing = nil
		old, err := getStim(tx, st.ID)
		if err != nil {
			return err
		}
		if old != nil {
			existing = &old.Stimulus
			return nil
		}
		b := tx.Bucket(bStim)
		seq, err := b.NextSequence()
		if err != nil {
			return err
		}
		r := &stimRecord{Stimulus: st, Seq: seq}
		r.CreatedAt = s.now()
		r.ExpiresAt = st.ExpiresAt.UTC()
		r.State = weft.StimulusQueued
		r.SettledAt, r.DeliveredTo, r.Outcome = time.Time{}, "", nil
		if err := tx.Bucket(bStimQueue).Put(queueKey(r), []byte(r.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bStimExp).Put(expiryKey(r), []byte{}); err != nil {
			return err
		}
		return putJSON(b, []byte(r.ID), r)
	})
	if err != nil {
		return nil, err
	}
	return existing, nil
}

// GetStimulus implements store.Store.
func (s *Store) GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error) {
	var out *weft.Stimulus
	err := s.read(ctx, func(tx kvTx) error {
		r, err := getStim(tx, id)
		if err != nil {
			return err
		}
		if r == nil {
			return store.NotFound("stimulus %q", id)
		}
		out = &r.Stimulus
		return nil
	})
	return out, err
}

// PendingStimuli implements store.Store.
func (s *Store) PendingStimuli(ctx context.Context, name, k string) ([]weft.Stimulus, error) {
	var out []weft.Stimulus
	err := s.read(ctx, func(tx kvTx) error {
		now := s.now()
		prefix := key(nil).str(name).str(k)
		c := tx.Bucket(bStimQueue).Cursor()
		for qk, id := c.Seek(prefix); hasPrefix(qk, prefix); qk, id = c.Next() {
			r, err := getStim(tx, string(id))
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("queue names missing stimulus %q", id)
			}
			if r.ExpiresAt.After(now) {
				out = append(out, r.Stimulus)
			}
		}
		return nil
	})
	return out, err
}

// ExpireStimuli implements store.Store.
func (s *Store) ExpireStimuli(ctx context.Context, now time.Time, limit int) ([]weft.Stimulus, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	now = now.UTC()
	var dead []weft.Stimulus
	err := s.write(ctx, func(tx kvTx) error {
		dead = nil
		var ids []string
		c := tx.Bucket(bStimExp).Cursor()
		for k, _ := c.First(); k != nil && len(ids) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt stimulus expiry key %x", k)
			}
			ids = append(ids, id)
		}
		for _, id := range ids {
			r, err := getStim(tx, id)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("expiry index names missing stimulus %q", id)
			}
			if err := unqueue(tx, r); err != nil {
				return err
			}
			r.State = weft.StimulusDead
			r.SettledAt = now
			if err := tx.Bucket(bStimDead).Put(deadKey(r), []byte{}); err != nil {
				return err
			}
			if err := tx.Bucket(bStimForget).Put(s.forgetKey(r), []byte{}); err != nil {
				return err
			}
			if err := putJSON(tx.Bucket(bStim), []byte(id), r); err != nil {
				return err
			}
			dead = append(dead, r.Stimulus)
		}
		return s.forget(tx, end, limit)
	})
	if err != nil {
		return nil, err
	}
	return dead, nil
}

// forget removes up to limit settled stimuli whose retention ended by end.
func (s *Store) forget(tx kvTx, end []byte, limit int) error {
	fb := tx.Bucket(bStimForget)
	var ks [][]byte
	c := fb.Cursor()
	for k, _ := c.First(); k != nil && len(ks) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
		ks = append(ks, bytes.Clone(k))
	}
	for _, k := range ks {
		id, _, ok := readStr(k[8:])
		if !ok {
			return fmt.Errorf("corrupt stimulus forget key %x", k)
		}
		r, err := getStim(tx, id)
		if err != nil {
			return err
		}
		if r != nil {
			if r.State == weft.StimulusDead {
				if err := tx.Bucket(bStimDead).Delete(deadKey(r)); err != nil {
					return err
				}
			}
			if err := tx.Bucket(bStim).Delete([]byte(id)); err != nil {
				return err
			}
		}
		if err := fb.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// DeadLetters implements store.Store.
func (s *Store) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return s.stimulusPage(ctx, bStimDead, "dead letters", cursor, limit)
}

// QueuedStimuli implements store.Store.
func (s *Store) QueuedStimuli(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return s.stimulusPage(ctx, bStimExp, "the stimulus expiry index", cursor, limit)
}

// stimulusPage reads a page of the stimuli an index of (time, id) keys
// names, in key order.
func (s *Store) stimulusPage(ctx context.Context, bucket []byte, index, cursor string, limit int) ([]weft.Stimulus, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	var after []byte
	if cursor != "" {
		var err error
		if after, err = decodeCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	limit = weft.ClampLimit(limit)
	var out []weft.Stimulus
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out, next = nil, ""
		c := tx.Bucket(bucket).Cursor()
		k, _ := c.First()
		if after != nil {
			if k, _ = c.Seek(after); bytes.Equal(k, after) {
				k, _ = c.Next()
			}
		}
		var last []byte
		for ; k != nil; k, _ = c.Next() {
			if len(out) == limit {
				next = encodeCursor(last)
				return nil
			}
			if len(k) < 8 {
				return fmt.Errorf("corrupt key %x in %s", k, index)
			}
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt key %x in %s", k, index)
			}
			r, err := getStim(tx, id)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("%s names missing stimulus %q", index, id)
			}
			out = append(out, r.Stimulus)
			last = bytes.Clone(k)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}
