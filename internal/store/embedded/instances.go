package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/store"
)

// instRecord is an instance as stored in bInst: the instance without its
// State (kept in bState) plus the last history sequence number.
type instRecord struct {
	weft.Instance
	HistSeq uint64 `json:"hist_seq,omitempty"`
	// Stateless is set when the instance has no state record, which its
	// reads then skip (a new instance has none until its first step's
	// commit). A record written before the flag existed lacks it, and may
	// have one.
	Stateless bool `json:"stateless,omitempty"`
}

func getInst(tx kvTx, id string) (*instRecord, error) {
	return getInstRecord(tx, id, true)
}

// getInstRecord is getInst; without clone the record's documents share
// the transaction's memory (decodeInst).
func getInstRecord(tx kvTx, id string, clone bool) (*instRecord, error) {
	raw := tx.Bucket(bInst).Get([]byte(id))
	if raw == nil {
		return nil, nil
	}
	r, err := decodeInst(id, raw, clone)
	if err != nil {
		return nil, err
	}
	if r.Lease.IsZero() {
		// No lease record either: one exists only while the instance
		// record holds a lease (putInst writes and deletes them together;
		// a renewal changes only an existing one).
		return r, nil
	}
	l, ok, err := getLease(tx, id)
	if err != nil {
		return nil, err
	}
	if ok {
		r.Lease = l.Lease
	}
	return r, nil
}

// putInst writes an instance record and its lease record. hadLease is
// whether the record it replaces holds a lease (and so has a lease record
// to delete when r holds none).
func putInst(tx kvTx, r *instRecord, hadLease bool) error {
	raw, err := encodeInst(r)
	if err != nil {
		return err
	}
	if err := tx.Bucket(bInst).Put([]byte(r.ID), raw); err != nil {
		return err
	}
	if r.Lease.IsZero() {
		if !hadLease {
			return nil // a delete of nothing would still write a tombstone
		}
		return tx.Bucket(bLease).Delete([]byte(r.ID))
	}
	return tx.Bucket(bLease).Put([]byte(r.ID), encodeLease(leaseRecord{Lease: r.Lease, Terminal: r.Status.Terminal()}))
}

// leaseRecord is an instance's lease, kept apart from the instance record
// (where the lease is also written, but may be stale) so that a renewal —
// 50,000 a second at 100,000 running instances — reads and writes a few
// bytes instead of decoding and encoding the whole instance.
type leaseRecord struct {
	weft.Lease
	// Terminal mirrors the instance's status: a terminal instance's lease
	// is never renewed.
	Terminal bool
}

// encodeLease: expiry (8 bytes, Unix nanoseconds), terminal (1 byte),
// node and boot as str keys.
func encodeLease(l leaseRecord) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 16+len(l.Node)+len(l.Boot)), uint64(l.Expiry.UnixNano()))
	var t byte
	if l.Terminal {
		t = 1
	}
	return key(append(b, t)).str(l.Node).str(l.Boot)
}

// getLease returns an instance's lease record; ok is false when it has
// none (no lease, or a record written before lease records existed).
func getLease(tx kvTx, id string) (l leaseRecord, ok bool, err error) {
	raw := tx.Bucket(bLease).Get([]byte(id))
	if raw == nil {
		return l, false, nil
	}
	if len(raw) < 9 {
		return l, false, fmt.Errorf("instance %q: corrupt lease record %x", id, raw)
	}
	l.Expiry = time.Unix(0, int64(binary.BigEndian.Uint64(raw))).UTC()
	l.Terminal = raw[8] == 1
	var ok1, ok2 bool
	rest := raw[9:]
	l.Node, rest, ok1 = readStr(rest)
	l.Boot, _, ok2 = readStr(rest)
	if !ok1 || !ok2 {
		return l, false, fmt.Errorf("instance %q: corrupt lease record %x", id, raw)
	}
	return l, true, nil
}

// indexEntry is one key of a secondary index that an instance record
// implies.
type indexEntry struct {
	bucket []byte
	key    key
	val    []byte
}

// instIndexes lists the index entries of r: the four list indexes, the
// delete-after index once it is terminal with a DeleteAfter, the lease
// index while it holds a lease and is not terminal, and a pin per plugin
// while it is not terminal. nil for a nil r.
func instIndexes(r *weft.Instance) []indexEntry {
	if r == nil {
		return nil
	}
	// The keys are cut from one buffer (each capped, so that the next
	// append cannot overwrite it): every commit computes them twice.
	buf := make(key, 0, 4*(len(r.Workflow)+len(r.Status)+len(r.ID)+32)+len(r.Plugins)*(len(r.ID)+32))
	cut := func(start int) key {
		return buf[start:len(buf):len(buf)]
	}
	start := len(buf)
	buf = buf.time(r.CreatedAt).str(r.ID)
	suffix := cut(start)
	st := string(r.Status)
	start = len(buf)
	buf = buf.str(r.Workflow).append(suffix)
	wf := cut(start)
	start = len(buf)
	buf = buf.str(st).append(suffix)
	status := cut(start)
	start = len(buf)
	buf = buf.str(r.Workflow).str(st).append(suffix)
	wfStatus := cut(start)
	es := make([]indexEntry, 0, 5+len(r.Plugins))
	es = append(es,
		indexEntry{bIxAll, suffix, nil},
		indexEntry{bIxWf, wf, nil},
		indexEntry{bIxStatus, status, nil},
		indexEntry{bIxWfStatus, wfStatus, nil},
	)
	if r.Status.Terminal() {
		if !r.DeleteAfter.IsZero() {
			es = append(es, indexEntry{bExpiry, key(nil).time(r.DeleteAfter).str(r.ID), nil})
		}
		return es
	}
	if !r.Lease.IsZero() {
		es = append(es, indexEntry{bLeases, key(nil).time(r.Lease.Expiry).str(r.ID), nil})
	}
	for name, version := range r.Plugins {
		start = len(buf)
		buf = buf.str(name).str(r.ID)
		es = append(es, indexEntry{bPins, cut(start), []byte(version)})
	}
	return es
}

func (k key) append(b []byte) key { return append(k, b...) }

// syncIndexes turns the index entries of old into those of new: it deletes
// the entries only old has and puts those new has that differ.
func syncIndexes(tx kvTx, old, new []indexEntry) error {
	same := func(a, b indexEntry) bool {
		return bytes.Equal(a.bucket, b.bucket) && bytes.Equal(a.key, b.key)
	}
	for _, o := range old {
		if !slices.ContainsFunc(new, func(n indexEntry) bool { return same(o, n) }) {
			if err := tx.Bucket(o.bucket).Delete(o.key); err != nil {
				return err
			}
		}
	}
	for _, n := range new {
		i := slices.IndexFunc(old, func(o indexEntry) bool { return same(o, n) })
		if i >= 0 && bytes.Equal(old[i].val, n.val) {
			continue
		}
		val := n.val
		if val == nil {
			val = []byte{}
		}
		if err := tx.Bucket(n.bucket).Put(n.key, val); err != nil {
			return err
		}
	}
	return nil
}

func instOf(r *instRecord) *weft.Instance {
	if r == nil {
		return nil
	}
	return &r.Instance
}

func putJSON(b kvBucket, k []byte, v any) error {
	raw, err := jsonv.Marshal(v) // documents in v keep their bytes
	if err != nil {
		return err
	}
	return b.Put(k, raw)
}

// Commit implements store.Store.
func (s *Store) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if err := checkSearch(c.Instance.ID, c.Instance.Search); err != nil {
		return 0, err
	}
	in := *c.Instance
	id := in.ID
	state := in.State
	in.State = nil
	in.Plugins = cloneMap(in.Plugins)
	in.Search = normSearch(in.Search)
	in.Lease.Expiry = in.Lease.Expiry.UTC()
	in.DeleteAfter = in.DeleteAfter.UTC()
	if !in.CreatedAt.IsZero() {
		in.CreatedAt = in.CreatedAt.UTC()
	}
	var rev uint64
	err := s.write(ctx, func(tx kvTx) error {
		rev = 0
		now := s.now()
		old, err := getInstRecord(tx, id, false) // used in this transaction only
		if err != nil {
			return err
		}
		// Checks first: a refusal must come before any write.
		if in.Rev == 0 {
			if old != nil {
				return refuse(&store.CommitError{InstanceID: id, Err: weft.ErrExists, Rev: old.Rev, Fence: old.Fence})
			}
			if c.Catalog != "" {
				// ResolveStart hands out no generation: its answers are
				// current, from a cache this process's writes invalidate.
				return refuse(&store.CommitError{InstanceID: id, Err: store.ErrCatalogChanged})
			}
		} else {
			switch {
			case old == nil:
				return refuse(&store.CommitError{InstanceID: id, Err: weft.ErrNotFound})
			case c.Fence < old.Fence:
				return refuse(&store.CommitError{InstanceID: id, Err: weft.ErrFenced, Rev: old.Rev, Fence: old.Fence})
			case in.Rev != old.Rev:
				return refuse(&store.CommitError{InstanceID: id, Err: weft.ErrConflict, Rev: old.Rev, Fence: old.Fence})
			}
		}
		var stim *stimRecord
		if c.DeliveredStimulus != "" {
			stim, err = getStim(tx, c.DeliveredStimulus)
			if err != nil {
				return err
			}
			if stim == nil || stim.State != weft.StimulusQueued || !stim.ExpiresAt.After(now) {
				return refuse(&store.CommitError{InstanceID: id, Err: store.ErrNotQueued, Stimulus: c.DeliveredStimulus})
			}
		}
		if c.Drains && old != nil && undrained(tx, id, c.Consumed) {
			return refuse(&store.CommitError{InstanceID: id, Err: store.ErrInboxNotEmpty, Rev: old.Rev, Fence: old.Fence})
		}
		if !in.Status.Terminal() {
			for name, version := range in.Plugins {
				if old != nil && !old.Status.Terminal() && old.Plugins[name] == version {
					continue // pinned already
				}
				ok, err := s.pluginHasVersion(tx, name, version)
				if err != nil {
					return err
				}
				if !ok {
					return refuse(store.NotFound("instance %q pins plugin %q version %s", id, name, version))
				}
			}
		}

		at := now
		if !c.At.IsZero() {
			at = c.At.UTC()
		}
		rec := instRecord{Instance: in, Stateless: len(state) == 0}
		rec.Rev = 1
		rec.Fence = c.Fence
		rec.UpdatedAt = at
		if old != nil {
			rec.Rev = old.Rev + 1
			rec.CreatedAt = old.CreatedAt
			rec.HistSeq = old.HistSeq
			// A commit by the lease's owner never shortens a renewal
			// that happened after the owner read the instance.
			if rec.Lease.Held(old.Lease.Node, old.Lease.Boot) && old.Lease.Expiry.After(rec.Lease.Expiry) {
				rec.Lease.Expiry = old.Lease.Expiry
			}
		} else if rec.CreatedAt.IsZero() {
			rec.CreatedAt = at
		}
		if rec.Lease.IsZero() {
			rec.Lease = weft.Lease{}
		}

		if err := syncIndexes(tx, instIndexes(instOf(old)), instIndexes(&rec.Instance)); err != nil {
			return err
		}
		if err := syncSearch(tx, instOf(old), &rec.Instance); err != nil {
			return err
		}
		if len(state) > 0 {
			if err := tx.Bucket(bState).Put([]byte(id), state); err != nil {
				return err
			}
		} else if old != nil && !old.Stateless {
			// A new instance has no state record to delete (a deleted
			// one's went with it), nor has a stateless one, and a delete
			// of nothing would still write a tombstone.
			if err := tx.Bucket(bState).Delete([]byte(id)); err != nil {
				return err
			}
		}
		if rec.HistSeq, err = putHistory(tx, id, rec.HistSeq, c.History, now); err != nil {
			return err
		}
		if err := putInst(tx, &rec, old != nil && !old.Lease.IsZero()); err != nil {
			return err
		}
		if old == nil {
			// A new instance's inbox has no wait: a message for an
			// instance that does not exist is dropped, and a delete
			// clears the inbox. (Its own Send, below, may add one.)
			knownAbsent(tx.Bucket(bInboxWait), []byte(id))
			knownAbsent(tx.Bucket(bBeatsOf), []byte(id)) // nor heartbeats
		}
		if c.Bookmarks != nil {
			if err := replaceBookmarks(tx, id, c.Bookmarks); err != nil {
				return err
			}
		}
		if c.Timers != nil {
			if err := replaceTimers(tx, id, c.Timers); err != nil {
				return err
			}
		}
		if stim != nil {
			if err := s.deliver(tx, stim, id, c.DeliveredOutcome, now); err != nil {
				return err
			}
		}
		if err := consumeMessages(tx, id, c.Consumed, now); err != nil {
			return err
		}
		if rec.Status.Terminal() {
			if err := clearHeartbeats(tx, id); err != nil {
				return err
			}
		}
		if _, err := putMessages(tx, c.Send, now); err != nil {
			return err
		}
		if sc := c.Slot; sc != nil {
			v, err := readSlotView(tx, sc.Key, sc.ID, sc.Params)
			if err != nil {
				return err
			}
			ch, err := v.apply(sc.Op, sc.ID, sc.Params, sc.Now)
			if err != nil {
				return refuse(err)
			}
			if ch.changed {
				if err := v.write(tx, sc.Key, ch); err != nil {
					return err
				}
			}
			sc.Decision = ch.d
		}
		rev = rec.Rev
		return nil
	})
	if err != nil {
		return 0, err
	}
	return rev, nil
}

func cloneMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// prefixKeys returns the keys of b that start with prefix.
func prefixKeys(b kvBucket, prefix []byte) [][]byte {
	var ks [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); hasPrefix(k, prefix); k, _ = c.Next() {
		ks = append(ks, bytes.Clone(k))
	}
	return ks
}

func deleteKeys(b kvBucket, ks [][]byte) error {
	for _, k := range ks {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func bookmarkIndexKey(b weft.Bookmark) key {
	return key(nil).str(b.Event).str(b.Key).str(b.InstanceID).str(b.StepPath)
}

// replaceBookmarks removes the bookmarks of instance id (and their index
// entries) and stores bms (nil: remove only).
func replaceBookmarks(tx kvTx, id string, bms []weft.Bookmark) error {
	own, idx := tx.Bucket(bBookmarks), tx.Bucket(bBmIndex)
	prefix := key(nil).str(id)
	c := own.Cursor()
	var ks [][]byte
	for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
		var b weft.Bookmark
		if err := json.Unmarshal(v, &b); err != nil {
			return fmt.Errorf("instance %q: corrupt bookmark: %w", id, err)
		}
		ks = append(ks, bytes.Clone(k))
		if err := idx.Delete(bookmarkIndexKey(b)); err != nil {
			return err
		}
	}
	if err := deleteKeys(own, ks); err != nil {
		return err
	}
	for _, b := range bms {
		b.InstanceID = id
		raw, err := json.Marshal(b)
		if err != nil {
			return err
		}
		if err := own.Put(key(nil).str(id).str(b.StepPath).str(b.Event).str(b.Key), raw); err != nil {
			return err
		}
		if err := idx.Put(bookmarkIndexKey(b), raw); err != nil {
			return err
		}
	}
	return nil
}

func timerDueKey(t weft.Timer) key { return key(nil).time(t.Due).str(t.InstanceID).str(t.ID) }

// replaceTimers removes the timers of instance id (and their index
// entries) and stores ts (nil: remove only).
func replaceTimers(tx kvTx, id string, ts []weft.Timer) error {
	own, due := tx.Bucket(bTimers), tx.Bucket(bTimersDue)
	prefix := key(nil).str(id)
	c := own.Cursor()
	var ks [][]byte
	for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
		var t weft.Timer
		if err := json.Unmarshal(v, &t); err != nil {
			return fmt.Errorf("instance %q: corrupt timer: %w", id, err)
		}
		ks = append(ks, bytes.Clone(k))
		if err := due.Delete(timerDueKey(t)); err != nil {
			return err
		}
	}
	if err := deleteKeys(own, ks); err != nil {
		return err
	}
	for _, t := range ts {
		t.InstanceID = id
		t.Due = t.Due.UTC()
		raw, err := json.Marshal(t)
		if err != nil {
			return err
		}
		if err := own.Put(key(nil).str(id).str(t.ID), raw); err != nil {
			return err
		}
		if err := due.Put(timerDueKey(t), raw); err != nil {
			return err
		}
	}
	return nil
}

// GetInstance implements store.Store.
func (s *Store) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	var out *weft.Instance
	// Lazily: a run's first read of an instance its start has just
	// written is answered from the engine's memory whole (recent).
	err := s.readLazily(ctx, func(tx kvTx) error {
		out = nil
		r, err := getInst(tx, id)
		if err != nil {
			return err
		}
		if r == nil {
			return store.NotFound("instance %q", id)
		}
		out = &r.Instance
		if !r.Stateless {
			if st := tx.Bucket(bState).Get([]byte(id)); st != nil {
				out.State = bytes.Clone(st)
			}
		}
		out.InboxWaiting = undrained(tx, id, nil)
		return nil
	})
	return out, err
}

// InstanceStatuses implements store.Store: one read transaction, and of
// each record only its status is decoded.
func (s *Store) InstanceStatuses(ctx context.Context, ids []string) (map[string]weft.Status, error) {
	out := make(map[string]weft.Status, len(ids))
	err := s.read(ctx, func(tx kvTx) error {
		clear(out)
		b := tx.Bucket(bInst)
		for _, id := range ids {
			raw := b.Get([]byte(id))
			if raw == nil {
				continue
			}
			var r struct {
				Status weft.Status `json:"status"`
			}
			meta, _, err := splitInst(raw)
			if err == nil {
				err = json.Unmarshal(meta, &r)
			}
			if err != nil {
				return fmt.Errorf("instance %q: corrupt record: %w", id, err)
			}
			out[id] = r.Status
		}
		return nil
	})
	return out, err
}

// ListInstances implements store.Store.
//
// Without f.Search it walks an index by creation: of the workflow and the
// status when f names both, of one of them, or of every instance. With
// f.Search it walks the search index (bSearch) over the keys of the range
// (searchSpans), by (value, created, id), and filters every instance it
// reads by the other fields; a keywords attribute's instance is listed at
// the first of its keywords in the range, in the walk's order
// (listedEarlier). f.Match filters either walk.
//
// A cursor is the key suffix where a page stopped, a position in the
// walked index, not a snapshot: the next page lists what that index holds
// after it then. So an instance whose indexed value does not change
// between pages is listed at most once (exactly once when it matches
// throughout); one whose value changed is listed again when its new key is
// ahead of the cursor, and not at all when it moved behind it.
//
// When f.Search or f.Match filters, one call reads at most f.Examine
// index entries (weft.MaxExamine for 0), every entry counting, whether
// its instance is kept or not: a page may stop short of the limit, or
// empty, with the cursor of the last entry read.
func (s *Store) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, "", store.Invalid("unknown status %q", f.Status)
	}
	if f.Examine < 0 {
		return nil, "", store.Invalid("examine must not be negative, got %d", f.Examine)
	}
	limit, examine := weft.ClampLimit(f.Limit), -1
	if f.Search != nil || f.Match != nil {
		examine = f.Examine
		if examine == 0 {
			examine = weft.MaxExamine
		}
	}
	if f.Search != nil {
		return s.listBySearch(ctx, f, limit, examine)
	}
	var after []byte
	if f.Cursor != "" {
		var err error
		if after, err = decodeCursor(f.Cursor); err != nil {
			return nil, "", err
		}
	}
	var bucket []byte
	var prefix key
	switch {
	case f.Workflow != "" && f.Status != "":
		bucket, prefix = bIxWfStatus, key(nil).str(f.Workflow).str(string(f.Status))
	case f.Workflow != "":
		bucket, prefix = bIxWf, key(nil).str(f.Workflow)
	case f.Status != "":
		bucket, prefix = bIxStatus, key(nil).str(string(f.Status))
	default:
		bucket, prefix = bIxAll, key{}
	}
	// The page runs from lo (inclusive) up, or from hi (exclusive) down;
	// the cursor is the last key suffix listed, which the next page starts
	// after.
	lo := append(bytes.Clone(prefix), key(nil).time(f.CreatedFrom)...)
	if f.CreatedFrom.IsZero() {
		lo = prefix
	}
	var hi []byte
	if !f.CreatedBefore.IsZero() {
		hi = append(bytes.Clone(prefix), key(nil).time(f.CreatedBefore)...)
	}
	if after != nil {
		if f.NewestFirst {
			hi = append(bytes.Clone(prefix), after...)
		} else {
			lo = append(append(bytes.Clone(prefix), after...), 0)
		}
	}
	var items []weft.Instance
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		c := tx.Bucket(bucket).Cursor()
		var k []byte
		step := c.Next
		if f.NewestFirst {
			step = c.Prev
			k = seekBefore(c, hi, prefix)
		} else {
			k, _ = c.Seek(lo)
		}
		examined := 0
		var last []byte
		for ; hasPrefix(k, prefix); k, _ = step() {
			if f.NewestFirst && bytes.Compare(k, lo) < 0 || !f.NewestFirst && hi != nil && bytes.Compare(k, hi) >= 0 {
				return nil
			}
			if len(items) == limit || examined == examine {
				next = encodeCursor(last[len(prefix):])
				return nil
			}
			examined++
			last = k
			_, rest, ok := readTime(k[len(prefix):])
			id, _, ok2 := readStr(rest)
			if !ok || !ok2 {
				return fmt.Errorf("corrupt index key %x in %s", k, bucket)
			}
			r, err := getInst(tx, id)
			if err != nil {
				return err
			}
			if r == nil {
				return fmt.Errorf("index %s names missing instance %q", bucket, id)
			}
			if f.Match != nil && !f.Match(&r.Instance) {
				continue
			}
			items = append(items, r.Instance)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return items, next, nil
}

// CountInstances implements store.Store. It counts index keys: a read of
// every instance's key in the status indexes, not of the instances.
func (s *Store) CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error) {
	counts := map[weft.Status]int{}
	err := s.read(ctx, func(tx kvTx) error {
		for _, st := range weft.Statuses() {
			bucket, prefix := bIxStatus, key(nil).str(string(st))
			if workflow != "" {
				bucket, prefix = bIxWfStatus, key(nil).str(workflow).str(string(st))
			}
			c := tx.Bucket(bucket).Cursor()
			n := 0
			for k, _ := c.Seek(prefix); hasPrefix(k, prefix); k, _ = c.Next() {
				n++
			}
			if n > 0 {
				counts[st] = n
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// seekBefore places c on the last key below hi (below the end of prefix's
// keys when hi is nil) and returns it.
func seekBefore(c kvCursor, hi, prefix []byte) []byte {
	if hi == nil {
		hi = prefixEnd(prefix)
	}
	var k []byte
	if hi == nil {
		k, _ = c.Last()
		return k
	}
	if k, _ = c.Seek(hi); k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ = c.Prev()
	return k
}

// prefixEnd returns the smallest key above every key with prefix p, or
// nil when there is none (p empty or all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// DeleteInstance implements store.Store.
func (s *Store) DeleteInstance(ctx context.Context, id string, fence uint64) error {
	return s.write(ctx, func(tx kvTx) error {
		old, err := getInst(tx, id)
		if err != nil {
			return err
		}
		if old == nil {
			return refuse(store.NotFound("instance %q", id))
		}
		if fence < old.Fence {
			return refuse(&store.CommitError{InstanceID: id, Err: weft.ErrFenced, Rev: old.Rev, Fence: old.Fence})
		}
		if err := syncIndexes(tx, instIndexes(&old.Instance), nil); err != nil {
			return err
		}
		if err := syncSearch(tx, &old.Instance, nil); err != nil {
			return err
		}
		if err := tx.Bucket(bInst).Delete([]byte(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bLease).Delete([]byte(id)); err != nil {
			return err
		}
		if err := tx.Bucket(bState).Delete([]byte(id)); err != nil {
			return err
		}
		hist := tx.Bucket(bHist)
		if err := deleteKeys(hist, prefixKeys(hist, key(nil).str(id))); err != nil {
			return err
		}
		if err := replaceBookmarks(tx, id, nil); err != nil {
			return err
		}
		if err := clearInbox(tx, id); err != nil {
			return err
		}
		if err := clearHeartbeats(tx, id); err != nil {
			return err
		}
		if err := clearTapes(tx, id); err != nil {
			return err
		}
		return replaceTimers(tx, id, nil)
	})
}

// Bookmarks implements store.Store.
func (s *Store) Bookmarks(ctx context.Context, id string) ([]weft.Bookmark, error) {
	var out []weft.Bookmark
	err := s.read(ctx, func(tx kvTx) error {
		if !tx.Bucket(bInst).Has([]byte(id)) {
			return store.NotFound("instance %q", id)
		}
		return scanJSON(tx.Bucket(bBookmarks), key(nil).str(id), 0, func(b weft.Bookmark) { out = append(out, b) })
	})
	return out, err
}

// FindBookmarks implements store.Store.
func (s *Store) FindBookmarks(ctx context.Context, event, k string) ([]weft.Bookmark, error) {
	var out []weft.Bookmark
	err := s.read(ctx, func(tx kvTx) error {
		return scanJSON(tx.Bucket(bBmIndex), key(nil).str(event).str(k), 0, func(b weft.Bookmark) { out = append(out, b) })
	})
	return out, err
}

// Timers implements store.Store.
func (s *Store) Timers(ctx context.Context, id string) ([]weft.Timer, error) {
	var out []weft.Timer
	err := s.read(ctx, func(tx kvTx) error {
		if !tx.Bucket(bInst).Has([]byte(id)) {
			return store.NotFound("instance %q", id)
		}
		return scanJSON(tx.Bucket(bTimers), key(nil).str(id), 0, func(t weft.Timer) { out = append(out, t) })
	})
	slices.SortFunc(out, func(a, b weft.Timer) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return cmpStr(a.ID, b.ID)
	})
	return out, err
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// scanJSON decodes the values under prefix in key order, at most limit of
// them (0: all).
func scanJSON[T any](b kvBucket, prefix []byte, limit int, each func(T)) error {
	c := b.Cursor()
	n := 0
	for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
		if limit > 0 && n == limit {
			return nil
		}
		var x T
		if err := json.Unmarshal(v, &x); err != nil {
			return fmt.Errorf("corrupt record %x: %w", k, err)
		}
		each(x)
		n++
	}
	return nil
}

// DueTimers implements store.Store.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	var out []weft.Timer
	err := s.read(ctx, func(tx kvTx) error {
		c := tx.Bucket(bTimersDue).Cursor()
		for k, v := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) <= 0; k, v = c.Next() {
			var t weft.Timer
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("corrupt timer %x: %w", k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// RenewLeases implements store.Store.
func (s *Store) RenewLeases(ctx context.Context, r store.LeaseRenewal) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if len(r.IDs) == 0 && len(r.Heartbeats) == 0 {
		return nil, nil
	}
	expiry := r.Expiry.UTC()
	var renewed []string
	err := s.write(ctx, func(tx kvTx) error {
		renewed = nil
		now := s.now()
		// The lease record alone decides, and alone changes: the instance
		// record is not read or written (see leaseRecord).
		lease := func(id string) (leaseRecord, bool, error) {
			l, ok, err := getLease(tx, id)
			if err != nil || ok {
				return l, ok && !l.Terminal && l.Held(r.Node, r.Boot) && l.Expiry.After(now), err
			}
			// A record from before lease records: migrate it.
			in, err := getInst(tx, id)
			if err != nil || in == nil || in.Lease.IsZero() {
				return l, false, err
			}
			if err := putInst(tx, in, true); err != nil {
				return l, false, err
			}
			l = leaseRecord{Lease: in.Lease, Terminal: in.Status.Terminal()}
			return l, !l.Terminal && l.Held(r.Node, r.Boot) && l.Expiry.After(now), nil
		}
		// Heartbeats first: the test must see the lease as it was before
		// this renewal, like the renewals themselves do.
		beats, marks := tx.Bucket(bBeats), tx.Bucket(bBeatsOf)
		for _, h := range r.Heartbeats {
			_, held, err := lease(h.InstanceID)
			if err != nil {
				return err
			}
			if !held {
				continue
			}
			if err := beats.Put(key(nil).str(h.InstanceID).str(h.Token), encodeBeat(h)); err != nil {
				return err
			}
			if !marks.Has([]byte(h.InstanceID)) {
				if err := marks.Put([]byte(h.InstanceID), nil); err != nil {
					return err
				}
			}
		}
		idx, leases := tx.Bucket(bLeases), tx.Bucket(bLease)
		for _, id := range r.IDs {
			l, held, err := lease(id)
			if err != nil {
				return err
			}
			if !held {
				continue
			}
			if err := idx.Delete(key(nil).time(l.Expiry).str(id)); err != nil {
				return err
			}
			l.Expiry = expiry
			if err := idx.Put(key(nil).time(expiry).str(id), nil); err != nil {
				return err
			}
			if err := leases.Put([]byte(id), encodeLease(l)); err != nil {
				return err
			}
			renewed = append(renewed, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return renewed, nil
}

// Heartbeats implements store.Store.
func (s *Store) Heartbeats(ctx context.Context, id string) ([]store.Heartbeat, error) {
	var out []store.Heartbeat
	err := s.read(ctx, func(tx kvTx) error {
		if !tx.Bucket(bInst).Has([]byte(id)) {
			return store.NotFound("instance %q", id)
		}
		prefix := key(nil).str(id)
		c := tx.Bucket(bBeats).Cursor()
		for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
			token, _, ok := readStr(k[len(prefix):])
			h, ok2 := decodeBeat(v)
			if !ok || !ok2 {
				return fmt.Errorf("instance %q: corrupt heartbeat %x", id, k)
			}
			h.InstanceID, h.Token = id, token
			out = append(out, h)
		}
		return nil
	})
	return out, err
}

// encodeBeat: time (8 bytes, Unix nanoseconds), attempt (uvarint), then
// the details as they are; the key holds the instance and the token. Not
// JSON: a node with 100,000 running attempts writes up to 50,000 of these a
// second.
func encodeBeat(h store.Heartbeat) []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 12+len(h.Details)), uint64(h.Time.UnixNano()))
	b = binary.AppendUvarint(b, uint64(h.Attempt))
	return append(b, h.Details...)
}

func decodeBeat(b []byte) (h store.Heartbeat, ok bool) {
	if len(b) < 9 {
		return h, false
	}
	h.Time = time.Unix(0, int64(binary.BigEndian.Uint64(b))).UTC()
	attempt, n := binary.Uvarint(b[8:])
	if n <= 0 {
		return h, false
	}
	h.Attempt = int(attempt)
	if d := b[8+n:]; len(d) > 0 {
		h.Details = bytes.Clone(d)
	}
	return h, true
}

// clearHeartbeats removes an instance's stored heartbeats.
func clearHeartbeats(tx kvTx, id string) error {
	// An instance with heartbeats is marked (RenewLeases, initSchema):
	// one point read, mostly answered from memory, spares the walk.
	marks := tx.Bucket(bBeatsOf)
	if !marks.Has([]byte(id)) {
		return nil
	}
	b := tx.Bucket(bBeats)
	if err := deleteKeys(b, prefixKeys(b, key(nil).str(id))); err != nil {
		return err
	}
	return marks.Delete([]byte(id))
}

// markAllHeartbeats marks every instance that has heartbeats.
func markAllHeartbeats(tx kvTx) error {
	ids, err := keyIDs(tx.Bucket(bBeats))
	if err != nil {
		return err
	}
	marks := tx.Bucket(bBeatsOf)
	for _, id := range ids {
		if err := marks.Put([]byte(id), nil); err != nil {
			return err
		}
	}
	return nil
}

// ExpiredLeases implements store.Store.
func (s *Store) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	var out []string
	err := s.read(ctx, func(tx kvTx) error {
		c := tx.Bucket(bLeases).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt lease key %x", k)
			}
			out = append(out, id)
		}
		return nil
	})
	return out, err
}

// ExpiredInstances implements store.Store.
func (s *Store) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	limit = weft.ClampLimit(limit)
	end := key(nil).time(now)
	var out []string
	err := s.read(ctx, func(tx kvTx) error {
		c := tx.Bucket(bExpiry).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit && bytes.Compare(k[:8], end) <= 0; k, _ = c.Next() {
			id, _, ok := readStr(k[8:])
			if !ok {
				return fmt.Errorf("corrupt delete-after key %x", k)
			}
			out = append(out, id)
		}
		return nil
	})
	return out, err
}
