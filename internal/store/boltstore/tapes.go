package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Recorded attempts: a tape's summary in tapes, its bytes in tape_data,
// both under (instance, step path, exec, attempt). The summaries are small
// and the bytes up to weft.MaxTapeData, so ListTapes reads only the
// first bucket.

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
	return s.write(ctx, func(tx *bolt.Tx) error {
		if tx.Bucket(bInst).Get([]byte(rec.Key.InstanceID)) == nil {
			return refuse(store.NotFound("instance %q of tape %s", rec.Key.InstanceID, rec.Key))
		}
		if tx.Bucket(bTapes).Get(k) != nil {
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
		return tx.Bucket(bTapeData).Put(k, data)
	})
}

// GetTape implements store.Store.
func (s *Store) GetTape(ctx context.Context, k weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	var (
		rec  weft.TapeRecord
		data []byte
	)
	err := s.read(ctx, func(tx *bolt.Tx) error {
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
	err := s.read(ctx, func(tx *bolt.Tx) error {
		out = nil
		if tx.Bucket(bInst).Get([]byte(id)) == nil {
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

// clearTapes deletes the tapes of instance id.
func clearTapes(tx *bolt.Tx, id string) error {
	prefix := key(nil).str(id)
	for _, name := range [][]byte{bTapes, bTapeData} {
		b := tx.Bucket(name)
		if err := deleteKeys(b, prefixKeys(b, prefix)); err != nil {
			return err
		}
	}
	return nil
}
