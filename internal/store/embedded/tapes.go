package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/tuple"
)

// Recorded attempts: a tape's summary in tapes, its bytes in tape_data,
// both under (instance, step path, exec, attempt). The summaries are small
// and the bytes up to weft.MaxTapeData, so ListTapes reads only the
// first bucket. tapes_by_plugin indexes the tapes of every instance by
// (plugin, recorded at, instance, step path, exec, attempt), its value
// the instance's workflow, so that FindTapes walks one plugin's tapes
// from the newest and filters by workflow without reading a summary.

// tapeKey is the key of k in both buckets.
func tapeKey(k weft.TapeKey) key {
	return key(nil).str(k.InstanceID).str(k.StepPath).str(k.Exec).u64(uint64(k.Attempt))
}

// PutTape implements store.Store.
func (s *Store) PutTape(ctx context.Context, rec weft.TapeRecord, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.ValidateTape(rec, data); err != nil {
		return err
	}
	k := tapeKey(rec.Key)
	return s.write(ctx, func(tx kvTx) error {
		if !tx.Bucket(bInst).Has([]byte(rec.Key.InstanceID)) {
			return refuse(store.NotFound("instance %q of tape %s", rec.Key.InstanceID, rec.Key))
		}
		if tx.Bucket(bTapes).Has(k) {
			return nil // written before: a retry
		}
		r := rec
		r.Size = len(data)
		r.RecordedAt = s.cfg.Now().UTC()
		doc, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("tape %s: %w", rec.Key, err)
		}
		if err := tx.Bucket(bTapes).Put(k, doc); err != nil {
			return err
		}
		if err := indexTape(tx, r); err != nil {
			return err
		}
		return tx.Bucket(bTapeData).Put(k, data)
	})
}

// tapeIndexKey is the key of rec in tapes_by_plugin.
func tapeIndexKey(rec weft.TapeRecord) key {
	k := rec.Key
	return key(nil).str(rec.Plugin).time(rec.RecordedAt).str(k.InstanceID).str(k.StepPath).str(k.Exec).u64(uint64(k.Attempt))
}

// indexTape enters rec into tapes_by_plugin; a tape without a plugin
// (none that the engine writes) is not indexed: no query finds it.
func indexTape(tx kvTx, rec weft.TapeRecord) error {
	if rec.Plugin == "" {
		return nil
	}
	return tx.Bucket(bTapesByPlugin).Put(tapeIndexKey(rec), []byte(rec.Workflow))
}

// indexAllTapes indexes every tape in tapes_by_plugin: Open does, for a
// file of a build before the index.
func indexAllTapes(tx kvTx) error {
	return tx.Bucket(bTapes).ForEach(func(k, v []byte) error {
		var rec weft.TapeRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("corrupt tape summary %x: %w", k, err)
		}
		return indexTape(tx, rec)
	})
}

// FindTapes implements store.Store: a walk of tapes_by_plugin from the
// plugin's newest entry back, to q.Since, reading the summaries of the
// entries of q.Workflow.
func (s *Store) FindTapes(ctx context.Context, q weft.TapeQuery) ([]weft.TapeRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := q.Check(); err != nil {
		return nil, err
	}
	var out []weft.TapeRecord
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		prefix := key(nil).str(q.Plugin)
		tapes := tx.Bucket(bTapes)
		c := tx.Bucket(bTapesByPlugin).Cursor()
		// The plugin's newest entry is the one before the first key past
		// its prefix, or the last of all.
		var v []byte
		k, _ := c.Seek(tuple.PrefixEnd(prefix))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; hasPrefix(k, prefix); k, v = c.Prev() {
			at, rest, ok := readTime(k[len(prefix):])
			if !ok {
				return fmt.Errorf("plugin %q: corrupt tape index key %x", q.Plugin, k)
			}
			if !q.Since.IsZero() && at.Before(q.Since) {
				break
			}
			// Past the Limit-th, only the tapes recorded at its time,
			// which may sort before it.
			if len(out) >= q.Limit && at.Before(out[q.Limit-1].RecordedAt) {
				break
			}
			if q.Workflow != "" && string(v) != q.Workflow {
				continue
			}
			tk, ok := readTapeKey(rest)
			if !ok {
				return fmt.Errorf("plugin %q: corrupt tape index key %x", q.Plugin, k)
			}
			doc := tapes.Get(tapeKey(tk))
			if doc == nil {
				return fmt.Errorf("plugin %q: tape %s indexed without its summary", q.Plugin, tk)
			}
			var rec weft.TapeRecord
			if err := json.Unmarshal(doc, &rec); err != nil {
				return fmt.Errorf("tape %s: corrupt summary: %w", tk, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, compareFound)
	return out[:min(len(out), q.Limit)], nil
}

// readTapeKey decodes the (id, step path, exec, attempt) that tapeKey
// encodes.
func readTapeKey(b []byte) (weft.TapeKey, bool) {
	var k weft.TapeKey
	var ok bool
	if k.InstanceID, b, ok = readStr(b); !ok {
		return k, false
	}
	if k.StepPath, b, ok = readStr(b); !ok {
		return k, false
	}
	if k.Exec, b, ok = readStr(b); !ok {
		return k, false
	}
	if len(b) != 8 {
		return k, false
	}
	k.Attempt = int(binary.BigEndian.Uint64(b))
	return k, true
}

// compareFound is the order of FindTapes: the newest first, then by key.
func compareFound(a, b weft.TapeRecord) int {
	if c := b.RecordedAt.Compare(a.RecordedAt); c != 0 {
		return c
	}
	return a.Key.Compare(b.Key)
}

// GetTape implements store.Store.
func (s *Store) GetTape(ctx context.Context, k weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	var (
		rec  weft.TapeRecord
		data []byte
	)
	err := s.read(ctx, func(tx kvTx) error {
		tk := tapeKey(k)
		doc := tx.Bucket(bTapes).Get(tk)
		if doc == nil {
			return store.NotFound("tape %s", k)
		}
		if err := json.Unmarshal(doc, &rec); err != nil {
			return fmt.Errorf("tape %s: corrupt summary: %w", k, err)
		}
		data = bytes.Clone(tx.Bucket(bTapeData).Get(tk))
		if data == nil {
			return fmt.Errorf("tape %s: summary without data", k)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &rec, data, nil
}

// ListTapes implements store.Store.
func (s *Store) ListTapes(ctx context.Context, id string) ([]weft.TapeRecord, error) {
	var out []weft.TapeRecord
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		if !tx.Bucket(bInst).Has([]byte(id)) {
			return store.NotFound("instance %q", id)
		}
		prefix := key(nil).str(id)
		c := tx.Bucket(bTapes).Cursor()
		for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
			var rec weft.TapeRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("instance %q: corrupt tape summary %x: %w", id, k, err)
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The keys sort by bytes; the list is in TapeKey.Compare's order
	// ("steps[2]" before "steps[10]").
	slices.SortFunc(out, func(a, b weft.TapeRecord) int { return a.Key.Compare(b.Key) })
	return out, nil
}

// clearTapes deletes the tapes of instance id and their entries in
// tapes_by_plugin, whose keys their summaries give.
func clearTapes(tx kvTx, id string) error {
	prefix := key(nil).str(id)
	var index [][]byte
	c := tx.Bucket(bTapes).Cursor()
	for k, v := c.Seek(prefix); hasPrefix(k, prefix); k, v = c.Next() {
		var rec weft.TapeRecord
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("instance %q: corrupt tape summary %x: %w", id, k, err)
		}
		if rec.Plugin != "" {
			index = append(index, tapeIndexKey(rec))
		}
	}
	if err := deleteKeys(tx.Bucket(bTapesByPlugin), index); err != nil {
		return err
	}
	for _, name := range [][]byte{bTapes, bTapeData} {
		b := tx.Bucket(name)
		if err := deleteKeys(b, prefixKeys(b, prefix)); err != nil {
			return err
		}
	}
	return nil
}
