package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Batch jobs (store.Store's batch methods). Not to be confused with batch.go,
// the group commit of the store's writes.
//
// A batch's record is in bBatch, its document (written once, at create)
// apart in bBatchDoc so that the writes of its state, many per batch, do
// not rewrite it. Its items are in bBatchItems, keyed by (batch, instance)
// so that an instance is an item once; bBatchSeq lists them in Seq order and
// bBatchOutcome by outcome, in Seq order within each, for BatchItems.
var (
	bBatch        = []byte("batches")                // id → batchRecord
	bBatchDoc     = []byte("batch_documents")        // id → document
	bBatchDue     = []byte("batches_by_wake")        // (wake, id), batches with a Wake only
	bBatchAll     = []byte("batches_by_created")     // (created, id)
	bBatchItems   = []byte("batch_items")            // (batch, instance) → batchItemValue
	bBatchSeq     = []byte("batch_items_by_seq")     // (batch, seq) → instance
	bBatchOutcome = []byte("batch_items_by_outcome") // (batch, outcome, seq) → instance
)

// batchDeleteChunk is how many items one transaction of DeleteBatch
// removes: a batch of a million items is removed over a hundred
// transactions, none holding the write lock for long.
const batchDeleteChunk = 10000

// batchRecord is a batch as stored in bBatch: what the batch's writes
// change, its counts, and the Seq of its last item. The id is the key and
// the document is in bBatchDoc.
type batchRecord struct {
	State     json.RawMessage  `json:"state,omitempty"`
	Actor     string           `json:"actor,omitempty"`
	Wake      time.Time        `json:"wake,omitzero"`
	Revision  uint64           `json:"revision"`
	Counts    weft.BatchCounts `json:"counts,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	UpdatedAt time.Time        `json:"updated_at"`
	LastSeq   uint64           `json:"last_seq,omitempty"`
}

func batchDueKey(id string, wake time.Time) key    { return key(nil).time(wake).str(id) }
func batchAllKey(id string, created time.Time) key { return key(nil).time(created).str(id) }
func batchPrefix(id string) key                    { return key(nil).str(id) }
func batchItemKey(id, instance string) key         { return key(nil).str(id).str(instance) }
func batchSeqKey(id string, seq uint64) key        { return key(nil).str(id).u64(seq) }
func batchOutcomePrefix(id string, o weft.BatchOutcome) key {
	return key(nil).str(id).str(string(o))
}
func batchOutcomeKey(id string, o weft.BatchOutcome, seq uint64) key {
	return batchOutcomePrefix(id, o).u64(seq)
}

// batchItemValue encodes an item's value in bBatchItems: its Seq (8
// bytes), then its outcome, time and reason as tuple components.
func batchItemValue(seq uint64, o weft.BatchOutcome, at time.Time, reason string) []byte {
	return key(nil).u64(seq).str(string(o)).time(at).str(reason)
}

// decodeBatchItem reads the value v of instance's item of batch id.
func decodeBatchItem(id, instance string, v []byte) (weft.BatchItem, error) {
	it := weft.BatchItem{Batch: id, InstanceID: instance}
	if len(v) < 8 {
		return it, fmt.Errorf("batch %q: corrupt item of instance %q", id, instance)
	}
	it.Seq = binary.BigEndian.Uint64(v)
	o, rest, ok := readStr(v[8:])
	if ok {
		it.Outcome = weft.BatchOutcome(o)
		it.Time, rest, ok = readTime(rest)
	}
	if ok {
		it.Reason, _, ok = readStr(rest)
	}
	if !ok {
		return it, fmt.Errorf("batch %q: corrupt item of instance %q", id, instance)
	}
	return it, nil
}

// getBatchRecord reads a batch's record; nil when there is none.
func getBatchRecord(tx kvTx, id string) (*batchRecord, error) {
	raw := tx.Bucket(bBatch).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	var r batchRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("batch %q: corrupt record: %w", id, err)
	}
	return &r, nil
}

// batchOf is the batch id as returned: its record, its document and its
// counts without the outcomes no item has.
func batchOf(tx kvTx, id string, r *batchRecord) *weft.Batch {
	counts := weft.BatchCounts{}
	for o, n := range r.Counts {
		if n != 0 {
			counts[o] = n
		}
	}
	return &weft.Batch{
		ID:        id,
		Document:  bytes.Clone(tx.Bucket(bBatchDoc).Get([]byte(id))),
		State:     bytes.Clone(r.State),
		Actor:     r.Actor,
		Wake:      r.Wake,
		Revision:  r.Revision,
		Counts:    counts,
		CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt,
	}
}

// readBatch reads batch id as returned; nil when there is none.
func readBatch(tx kvTx, id string) (*weft.Batch, error) {
	r, err := getBatchRecord(tx, id)
	if err != nil || r == nil {
		return nil, err
	}
	return batchOf(tx, id, r), nil
}

// putBatchRecord writes r and moves its entry in bBatchDue from old's
// wake (nil: a new batch) to its own.
func putBatchRecord(tx kvTx, id string, old, r *batchRecord) error {
	due := tx.Bucket(bBatchDue)
	if old != nil && !old.Wake.IsZero() {
		if err := due.Delete(batchDueKey(id, old.Wake)); err != nil {
			return err
		}
	}
	if !r.Wake.IsZero() {
		if err := due.Put(batchDueKey(id, r.Wake), nil); err != nil {
			return err
		}
	}
	for o, n := range r.Counts {
		if n == 0 {
			delete(r.Counts, o)
		}
	}
	return putJSON(tx.Bucket(bBatch), []byte(id), r)
}

// casBatch reads the record of b for a write that names b.Revision, and
// returns the record to write: the stored one with b's State and Wake,
// Revision + 1 and UpdatedAt now. It refuses (before any write) a batch
// that is not stored, or stored at another revision.
func casBatch(tx kvTx, b *weft.Batch, now time.Time) (old, r *batchRecord, err error) {
	old, err = getBatchRecord(tx, b.ID)
	if err != nil {
		return nil, nil, err
	}
	if old == nil {
		return nil, nil, refuse(store.NotFound("batch %q", b.ID))
	}
	if old.Revision != b.Revision {
		return nil, nil, refuse(fmt.Errorf("store: batch %q: revision %d is stored, not %d: %w", b.ID, old.Revision, b.Revision, weft.ErrConflict))
	}
	n := *old
	n.State = bytes.Clone(b.State)
	n.Wake = b.Wake.UTC()
	n.Revision++
	n.UpdatedAt = now
	n.Counts = weft.BatchCounts{}
	for o, c := range old.Counts {
		n.Counts[o] = c
	}
	return old, &n, nil
}

// appendBatchItems writes the ids that are not items of batch id yet as
// pending items after r's last, at now, and counts them in r. It returns
// how many it wrote.
func appendBatchItems(tx kvTx, id string, r *batchRecord, ids []string, now time.Time) (int, error) {
	items, seqs, outcomes := tx.Bucket(bBatchItems), tx.Bucket(bBatchSeq), tx.Bucket(bBatchOutcome)
	added := 0
	for _, inst := range ids {
		ik := batchItemKey(id, inst)
		if items.Get(ik) != nil {
			continue
		}
		r.LastSeq++
		seq := r.LastSeq
		if err := items.Put(ik, batchItemValue(seq, weft.BatchPending, now, "")); err != nil {
			return 0, err
		}
		if err := seqs.Put(batchSeqKey(id, seq), []byte(inst)); err != nil {
			return 0, err
		}
		if err := outcomes.Put(batchOutcomeKey(id, weft.BatchPending, seq), []byte(inst)); err != nil {
			return 0, err
		}
		added++
	}
	if added > 0 {
		if r.Counts == nil {
			r.Counts = weft.BatchCounts{}
		}
		r.Counts[weft.BatchPending] += added
	}
	return added, nil
}

// CreateBatch implements store.Store.
func (s *Store) CreateBatch(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(b, true); err != nil {
		return nil, err
	}
	ids, err := store.BatchIDs(b.ID, ids)
	if err != nil {
		return nil, err
	}
	id, doc := b.ID, bytes.Clone(b.Document)
	var out *weft.Batch
	err = s.write(ctx, func(tx kvTx) error {
		out = nil
		if tx.Bucket(bBatch).Get([]byte(id)) != nil {
			return refuse(fmt.Errorf("store: batch %q: %w", id, weft.ErrExists))
		}
		now := s.now()
		r := &batchRecord{State: bytes.Clone(b.State), Actor: b.Actor, Wake: b.Wake.UTC(), Revision: 1,
			Counts: weft.BatchCounts{}, CreatedAt: now, UpdatedAt: now}
		if _, err := appendBatchItems(tx, id, r, ids, now); err != nil {
			return err
		}
		if err := tx.Bucket(bBatchDoc).Put([]byte(id), doc); err != nil {
			return err
		}
		if err := tx.Bucket(bBatchAll).Put(batchAllKey(id, now), nil); err != nil {
			return err
		}
		if err := putBatchRecord(tx, id, nil, r); err != nil {
			return err
		}
		out = batchOf(tx, id, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetBatch implements store.Store.
func (s *Store) GetBatch(ctx context.Context, id string) (*weft.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := weft.CheckID("batch id", id); err != nil {
		return nil, err
	}
	var out *weft.Batch
	err := s.read(ctx, func(tx kvTx) error {
		var err error
		if out, err = readBatch(tx, id); err != nil {
			return err
		}
		if out == nil {
			return store.NotFound("batch %q", id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListBatches implements store.Store: bBatchAll read backwards from the
// cursor, the key of the last batch returned.
func (s *Store) ListBatches(ctx context.Context, cursor string, limit int) ([]weft.Batch, string, error) {
	var hi []byte
	if cursor != "" {
		var err error
		if hi, err = decodeCursor(cursor); err != nil {
			return nil, "", err
		}
	}
	limit = weft.ClampLimit(limit)
	var out []weft.Batch
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out, next = nil, ""
		c := tx.Bucket(bBatchAll).Cursor()
		var last []byte
		for k := seekBefore(c, hi, nil); k != nil; k, _ = c.Prev() {
			if len(out) == limit {
				next = encodeCursor(last)
				return nil
			}
			last = k
			if len(k) < 8 {
				return fmt.Errorf("corrupt batch index key %x", k)
			}
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt batch index key %x", k)
			}
			b, err := readBatch(tx, id)
			if err != nil {
				return err
			}
			if b == nil {
				return fmt.Errorf("batch %q: an index entry without its record", id)
			}
			out = append(out, *b)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// UpdateBatch implements store.Store.
func (s *Store) UpdateBatch(ctx context.Context, b *weft.Batch) (*weft.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, err
	}
	var out *weft.Batch
	err := s.write(ctx, func(tx kvTx) error {
		out = nil
		old, r, err := casBatch(tx, b, s.now())
		if err != nil {
			return err
		}
		if err := putBatchRecord(tx, b.ID, old, r); err != nil {
			return err
		}
		out = batchOf(tx, b.ID, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteBatch implements store.Store. It removes the items batchDeleteChunk
// at a time, a transaction each, in Seq order, and the record with the
// last of them: a delete that fails halfway leaves the batch with fewer
// items (its counts as they were), and DeleteBatch again removes the rest.
func (s *Store) DeleteBatch(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := weft.CheckID("batch id", id); err != nil {
		return err
	}
	for first := true; ; first = false {
		var done bool
		err := s.write(ctx, func(tx kvTx) error {
			done = false
			r, err := getBatchRecord(tx, id)
			if err != nil {
				return err
			}
			if r == nil {
				if first {
					return refuse(store.NotFound("batch %q", id))
				}
				done = true // another delete finished it
				return nil
			}
			more, err := deleteBatchItems(tx, id, batchDeleteChunk)
			if err != nil || more {
				return err
			}
			if !r.Wake.IsZero() {
				if err := tx.Bucket(bBatchDue).Delete(batchDueKey(id, r.Wake)); err != nil {
					return err
				}
			}
			if err := tx.Bucket(bBatchAll).Delete(batchAllKey(id, r.CreatedAt)); err != nil {
				return err
			}
			if err := tx.Bucket(bBatchDoc).Delete([]byte(id)); err != nil {
				return err
			}
			done = true
			return tx.Bucket(bBatch).Delete([]byte(id))
		})
		if err != nil || done {
			return err
		}
	}
}

// deleteBatchItems removes up to n items of batch id, the first in Seq
// order, and reports whether more remain.
func deleteBatchItems(tx kvTx, id string, n int) (more bool, err error) {
	items, seqs, outcomes := tx.Bucket(bBatchItems), tx.Bucket(bBatchSeq), tx.Bucket(bBatchOutcome)
	prefix := batchPrefix(id)
	var seqKeys [][]byte
	var insts []string
	c := seqs.Cursor()
	for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
		if len(seqKeys) == n {
			more = true
			break
		}
		seqKeys = append(seqKeys, bytes.Clone(k))
		insts = append(insts, string(v))
	}
	for i, inst := range insts {
		ik := batchItemKey(id, inst)
		if v := items.Get(ik); v != nil {
			it, err := decodeBatchItem(id, inst, v)
			if err != nil {
				return false, err
			}
			if err := outcomes.Delete(batchOutcomeKey(id, it.Outcome, it.Seq)); err != nil {
				return false, err
			}
			if err := items.Delete(ik); err != nil {
				return false, err
			}
		}
		if err := seqs.Delete(seqKeys[i]); err != nil {
			return false, err
		}
	}
	return more, nil
}

// DueBatches implements store.Store.
func (s *Store) DueBatches(ctx context.Context, now time.Time, limit int) ([]weft.Batch, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	var out []weft.Batch
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		c := tx.Bucket(bBatchDue).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt batch wake key %x", k)
			}
			b, err := readBatch(tx, id)
			if err != nil {
				return err
			}
			if b == nil {
				return fmt.Errorf("batch %q: a wake entry without its record", id)
			}
			out = append(out, *b)
		}
		return nil
	})
	return out, err
}

// AddBatchItems implements store.Store.
func (s *Store) AddBatchItems(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, int, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, 0, err
	}
	ids, err := store.BatchIDs(b.ID, ids)
	if err != nil {
		return nil, 0, err
	}
	var out *weft.Batch
	var added int
	err = s.write(ctx, func(tx kvTx) error {
		out, added = nil, 0
		now := s.now()
		old, r, err := casBatch(tx, b, now)
		if err != nil {
			return err
		}
		n, err := appendBatchItems(tx, b.ID, r, ids, now)
		if err != nil {
			return err
		}
		if err := putBatchRecord(tx, b.ID, old, r); err != nil {
			return err
		}
		out, added = batchOf(tx, b.ID, r), n
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return out, added, nil
}

// BatchItems implements store.Store: bBatchSeq, or bBatchOutcome for one
// outcome, from after f.AfterSeq, each item read from bBatchItems.
func (s *Store) BatchItems(ctx context.Context, batch string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := weft.CheckID("batch id", batch); err != nil {
		return nil, err
	}
	limit, err := store.BatchItemLimit(batch, f)
	if err != nil {
		return nil, err
	}
	var out []weft.BatchItem
	err = s.read(ctx, func(tx kvTx) error {
		out = nil
		if tx.Bucket(bBatch).Get([]byte(batch)) == nil {
			return store.NotFound("batch %q", batch)
		}
		if f.AfterSeq == math.MaxUint64 {
			return nil // no Seq is greater
		}
		prefix, from := batchPrefix(batch), batchSeqKey(batch, f.AfterSeq+1)
		c := tx.Bucket(bBatchSeq).Cursor()
		if f.Outcome != "" {
			prefix, from = batchOutcomePrefix(batch, f.Outcome), batchOutcomeKey(batch, f.Outcome, f.AfterSeq+1)
			c = tx.Bucket(bBatchOutcome).Cursor()
		}
		items := tx.Bucket(bBatchItems)
		for k, v := c.Seek(from); hasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			inst := string(v)
			raw := items.Get(batchItemKey(batch, inst))
			if raw == nil {
				return fmt.Errorf("batch %q: index entry %x without its item", batch, k)
			}
			it, err := decodeBatchItem(batch, inst, raw)
			if err != nil {
				return err
			}
			out = append(out, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ApplyBatchItems implements store.Store: one write transaction, so one
// group commit, for the batch's compare-and-set, the items and their
// messages (putMessages, Deliver's own).
func (s *Store) ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateBatch(b, false); err != nil {
		return nil, err
	}
	changes, err := store.BatchChanges(b.ID, changes)
	if err != nil {
		return nil, err
	}
	id := b.ID
	var out *weft.Batch
	err = s.write(ctx, func(tx kvTx) error {
		out = nil
		now := s.now()
		old, r, err := casBatch(tx, b, now)
		if err != nil {
			return err
		}
		items, outcomes := tx.Bucket(bBatchItems), tx.Bucket(bBatchOutcome)
		for _, ch := range changes {
			ik := batchItemKey(id, ch.InstanceID)
			v := items.Get(ik)
			if v == nil {
				continue // not an item of the batch
			}
			it, err := decodeBatchItem(id, ch.InstanceID, v)
			if err != nil {
				return err
			}
			if it.Outcome != weft.BatchPending {
				continue // applied already
			}
			outcome, reason := ch.Outcome, ch.Reason
			if instanceExists(tx, ch.InstanceID) {
				if _, err := putMessages(tx, ch.Messages, now); err != nil {
					return err
				}
			} else {
				outcome, reason = weft.BatchSkipped, weft.BatchNotFound
			}
			if err := items.Put(ik, batchItemValue(it.Seq, outcome, now, reason)); err != nil {
				return err
			}
			if err := outcomes.Delete(batchOutcomeKey(id, weft.BatchPending, it.Seq)); err != nil {
				return err
			}
			if err := outcomes.Put(batchOutcomeKey(id, outcome, it.Seq), []byte(ch.InstanceID)); err != nil {
				return err
			}
			r.Counts[weft.BatchPending]--
			r.Counts[outcome]++
		}
		if err := putBatchRecord(tx, id, old, r); err != nil {
			return err
		}
		out = batchOf(tx, id, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
