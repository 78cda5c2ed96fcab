package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// schedRecord is a schedule as stored in bSched, with the Seq of its last
// event: the next event's Seq follows it, even once the oldest events are
// trimmed.
type schedRecord struct {
	weft.Schedule
	EventSeq uint64 `json:"event_seq,omitempty"`
}

func schedWakeKey(id string, wake time.Time) key { return key(nil).time(wake).str(id) }
func schedEventKey(id string, seq uint64) key    { return key(nil).str(id).u64(seq) }
func schedEventPrefix(id string) key             { return key(nil).str(id) }

// getSched reads a schedule's record; nil when there is none.
func getSched(tx kvTx, id string) (*schedRecord, error) {
	raw := tx.Bucket(bSched).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	return decodeSched(id, raw)
}

// getSchedHead reads what a write of a schedule needs of its stored
// record (revision, wake, creation, last event), skipping the document and
// the state: a write transaction is the store's one writer's time.
func getSchedHead(tx kvTx, id string) (*schedRecord, error) {
	raw := tx.Bucket(bSched).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	var h struct {
		Wake      time.Time `json:"wake,omitzero"`
		Revision  uint64    `json:"revision"`
		CreatedAt time.Time `json:"created_at"`
		EventSeq  uint64    `json:"event_seq,omitempty"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("schedule %q: corrupt record: %w", id, err)
	}
	r := &schedRecord{EventSeq: h.EventSeq}
	r.ID, r.Wake, r.Revision, r.CreatedAt = id, h.Wake, h.Revision, h.CreatedAt
	return r, nil
}

func decodeSched(id string, raw []byte) (*schedRecord, error) {
	var r schedRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("schedule %q: corrupt record: %w", id, err)
	}
	return &r, nil
}

// checkSchedule validates what CreateSchedule and UpdateSchedule write.
// The store does not read the document, state or event data, but keeps
// them inside JSON records, so each must be JSON.
func checkSchedule(sc *weft.Schedule, events []weft.ScheduleEvent) error {
	if sc == nil {
		return store.Invalid("schedule must not be nil")
	}
	if err := weft.CheckID("schedule id", sc.ID); err != nil {
		return err
	}
	if len(sc.Document) == 0 {
		return store.Invalid("schedule %q: document must not be empty", sc.ID)
	}
	if !json.Valid(sc.Document) {
		return store.Invalid("schedule %q: document is not JSON", sc.ID)
	}
	if len(sc.State) > 0 && !json.Valid(sc.State) {
		return store.Invalid("schedule %q: state is not JSON", sc.ID)
	}
	for i, e := range events {
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return store.Invalid("schedule %q: data of event %d (%s) is not JSON", sc.ID, i, e.Type)
		}
	}
	return nil
}

// schedWritten is the part of a schedule a write sets from the caller's:
// the store sets the rest.
func schedWritten(sc *weft.Schedule) weft.Schedule {
	return weft.Schedule{
		ID:       sc.ID,
		Document: bytes.Clone(sc.Document),
		State:    bytes.Clone(sc.State),
		Note:     sc.Note,
		Wake:     sc.Wake.UTC(),
	}
}

// putSched writes r and moves its entry in bSchedWake from old's wake
// (nil: a new schedule) to its own.
func putSched(tx kvTx, old, r *schedRecord) error {
	wakes := tx.Bucket(bSchedWake)
	if old != nil && !old.Wake.IsZero() {
		if err := wakes.Delete(schedWakeKey(old.ID, old.Wake)); err != nil {
			return err
		}
	}
	if !r.Wake.IsZero() {
		if err := wakes.Put(schedWakeKey(r.ID, r.Wake), nil); err != nil {
			return err
		}
	}
	return putJSON(tx.Bucket(bSched), []byte(r.ID), r)
}

// appendEvents writes events after r's last one, with the Seq and Time
// the store gives them, and removes the oldest of r's events beyond
// weft.MaxScheduleEvents; events that would be removed at once (a write of
// more than the bound) are not written. It advances r.EventSeq, which the
// caller writes.
func appendEvents(tx kvTx, r *schedRecord, events []weft.ScheduleEvent, now time.Time) error {
	if len(events) == 0 {
		return nil
	}
	b := tx.Bucket(bSchedEvts)
	first := r.EventSeq + 1
	r.EventSeq += uint64(len(events))
	keep := uint64(1) // the first Seq kept
	if r.EventSeq > weft.MaxScheduleEvents {
		keep = r.EventSeq - weft.MaxScheduleEvents + 1
	}
	for i, e := range events {
		e.Seq = first + uint64(i)
		if e.Seq < keep {
			continue
		}
		e.Time = now
		if err := putJSON(b, schedEventKey(r.ID, e.Seq), e); err != nil {
			return err
		}
	}
	if keep == 1 {
		return nil // nothing to trim
	}
	prefix, end := schedEventPrefix(r.ID), schedEventKey(r.ID, keep)
	var trimmed [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); hasPrefix(k, prefix) && bytes.Compare(k, end) < 0; k, _ = c.Next() {
		trimmed = append(trimmed, bytes.Clone(k))
	}
	return deleteKeys(b, trimmed)
}

// CreateSchedule implements store.Store.
func (s *Store) CreateSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSchedule(sc, events); err != nil {
		return nil, err
	}
	base := schedWritten(sc)
	var out *weft.Schedule
	err := s.write(ctx, func(tx kvTx) error {
		out = nil
		if tx.Bucket(bSched).Get([]byte(base.ID)) != nil {
			return refuse(fmt.Errorf("store: schedule %q: %w", base.ID, weft.ErrExists))
		}
		now := s.now()
		r := schedRecord{Schedule: base}
		r.Revision = 1
		r.CreatedAt, r.UpdatedAt = now, now
		if err := appendEvents(tx, &r, events, now); err != nil {
			return err
		}
		if err := putSched(tx, nil, &r); err != nil {
			return err
		}
		out = &r.Schedule
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetSchedule implements store.Store.
func (s *Store) GetSchedule(ctx context.Context, id string) (*weft.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return nil, err
	}
	var out *weft.Schedule
	err := s.read(ctx, func(tx kvTx) error {
		r, err := getSched(tx, id)
		if err != nil {
			return err
		}
		if r == nil {
			return store.NotFound("schedule %q", id)
		}
		out = &r.Schedule
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListSchedules implements store.Store.
func (s *Store) ListSchedules(ctx context.Context, cursor string, limit int) ([]weft.Schedule, string, error) {
	limit = weft.ClampLimit(limit)
	var out []weft.Schedule
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		var err error
		next, err = pageByName(tx.Bucket(bSched), cursor, limit, func(id, v []byte) error {
			r, err := decodeSched(string(id), v)
			if err != nil {
				return err
			}
			out = append(out, r.Schedule)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// UpdateSchedule implements store.Store.
func (s *Store) UpdateSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkSchedule(sc, events); err != nil {
		return nil, err
	}
	base, want := schedWritten(sc), sc.Revision
	var out *weft.Schedule
	err := s.write(ctx, func(tx kvTx) error {
		out = nil
		old, err := getSchedHead(tx, base.ID)
		if err != nil {
			return err
		}
		// Checks first: a refusal must come before any write.
		if old == nil {
			return refuse(store.NotFound("schedule %q", base.ID))
		}
		if old.Revision != want {
			return refuse(fmt.Errorf("store: schedule %q: revision %d is stored, not %d: %w", base.ID, old.Revision, want, weft.ErrConflict))
		}
		now := s.now()
		r := schedRecord{Schedule: base, EventSeq: old.EventSeq}
		r.Revision = old.Revision + 1
		r.CreatedAt, r.UpdatedAt = old.CreatedAt, now
		if err := appendEvents(tx, &r, events, now); err != nil {
			return err
		}
		if err := putSched(tx, old, &r); err != nil {
			return err
		}
		out = &r.Schedule
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteSchedule implements store.Store.
func (s *Store) DeleteSchedule(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return err
	}
	return s.write(ctx, func(tx kvTx) error {
		old, err := getSched(tx, id)
		if err != nil {
			return err
		}
		if old == nil {
			return refuse(store.NotFound("schedule %q", id))
		}
		if !old.Wake.IsZero() {
			if err := tx.Bucket(bSchedWake).Delete(schedWakeKey(id, old.Wake)); err != nil {
				return err
			}
		}
		evs := tx.Bucket(bSchedEvts)
		if err := deleteKeys(evs, prefixKeys(evs, schedEventPrefix(id))); err != nil {
			return err
		}
		return tx.Bucket(bSched).Delete([]byte(id))
	})
}

// DueSchedules implements store.Store.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]weft.Schedule, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	var out []weft.Schedule
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		c := tx.Bucket(bSchedWake).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt schedule wake key %x", k)
			}
			r, err := getSched(tx, id)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("schedule %q: a wake entry without its record", id)
			}
			out = append(out, r.Schedule)
		}
		return nil
	})
	return out, err
}

// ScheduleEvents implements store.Store.
func (s *Store) ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := weft.CheckID("schedule id", id); err != nil {
		return nil, err
	}
	limit = weft.ClampLimit(limit)
	var out []weft.ScheduleEvent
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		if tx.Bucket(bSched).Get([]byte(id)) == nil {
			return store.NotFound("schedule %q", id)
		}
		if afterSeq == math.MaxUint64 {
			return nil // no Seq is greater
		}
		prefix := schedEventPrefix(id)
		c := tx.Bucket(bSchedEvts).Cursor()
		for k, v := c.Seek(schedEventKey(id, afterSeq+1)); hasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			var e weft.ScheduleEvent
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("schedule %q: corrupt event under key %x: %w", id, k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
