package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// histChunk starts a history value that holds the entries of one commit
// (schema version 3): the byte, then each entry's JSON after its length
// (uvarint). The key is the instance and the first entry's seq; the
// entries' seqs follow it one by one. A value that starts with '{' is one
// entry, as every value was before (and as a commit of one entry still
// writes). A commit of a seq3 workflow writes seven or eight entries: one
// key instead of each costs Pebble a memtable insert, a key in its WAL,
// its flushes and its compactions.
const histChunk = 0x02

// putHistory writes entries, in one value, under instance id and the
// first's seq. The entries are numbered from after, their times default
// to now and are written in UTC; it returns the last seq.
func putHistory(tx kvTx, id string, after uint64, entries []weft.HistoryEntry, now time.Time) (uint64, error) {
	if len(entries) == 0 {
		return after, nil
	}
	// One allocation a commit, mostly: each entry is encoded after room
	// for a two-byte length, and moved when its length takes another.
	size := 1
	for _, e := range entries {
		size += 2 + 200 + len(e.Data)
	}
	val := make([]byte, 0, size)
	chunk := len(entries) > 1
	if chunk {
		val = append(val, histChunk)
	}
	seq := after
	for _, e := range entries {
		seq++
		e.Seq = seq
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Time = e.Time.UTC()
		at := len(val)
		if chunk {
			val = append(val, 0, 0)
		}
		var err error
		if val, err = store.AppendHistory(val, e); err != nil {
			return 0, err
		}
		if chunk {
			var n [binary.MaxVarintLen64]byte
			l := binary.PutUvarint(n[:], uint64(len(val)-at-2))
			if l != 2 {
				val = slices.Insert(val, at+2, n[:l]...) // room for the length, then
				val = slices.Delete(val, at, at+2)       // the two bytes reserved go
			} else {
				copy(val[at:], n[:2])
			}
		}
	}
	return seq, tx.Bucket(bHist).Put(key(nil).str(id).u64(after+1), val)
}

// histEntries calls fn with the entries of history value v, whose key's
// seq is first: each entry's seq and JSON, in order, until fn returns
// false.
func histEntries(v []byte, first uint64, fn func(seq uint64, raw []byte) bool) error {
	if len(v) == 0 || v[0] != histChunk {
		fn(first, v)
		return nil
	}
	rest := v[1:]
	for seq := first; len(rest) > 0; seq++ {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return fmt.Errorf("history chunk at seq %d: entry %d cut short", first, seq)
		}
		if !fn(seq, rest[k:k+int(n)]) {
			return nil
		}
		rest = rest[k+int(n):]
	}
	return nil
}

// History implements store.Store.
func (s *Store) History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error) {
	limit = weft.ClampLimit(limit)
	var out []weft.HistoryEntry
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		if !tx.Bucket(bInst).Has([]byte(id)) {
			return store.NotFound("instance %q", id)
		}
		prefix := key(nil).str(id)
		var err error
		take := func(seq uint64, raw []byte) bool {
			if seq <= afterSeq {
				return true
			}
			var e weft.HistoryEntry
			if err = json.Unmarshal(raw, &e); err != nil {
				err = fmt.Errorf("instance %q: corrupt history entry %d: %w", id, seq, err)
				return false
			}
			out = append(out, e)
			return len(out) < limit
		}
		each := func(k, v []byte) error {
			first, ok := histSeq(k, prefix)
			if !ok {
				return fmt.Errorf("instance %q: corrupt history key %x", id, k)
			}
			if herr := histEntries(v, first, take); herr != nil {
				return fmt.Errorf("instance %q: %w", id, herr)
			}
			return err
		}
		c := tx.Bucket(bHist).Cursor()
		start := prefix.u64(afterSeq + 1)
		k, _ := c.Seek(start)
		if string(k) != string(start) {
			// The entry after afterSeq may be inside the commit's value
			// before: the key at or before it.
			var v []byte
			if k == nil {
				k, v = c.Last()
			} else {
				k, v = c.Prev()
			}
			if hasPrefix(k, prefix) {
				if err := each(k, v); err != nil {
					return err
				}
			}
		}
		for k, v := c.Seek(start); hasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			if err := each(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// histSeq returns the seq of history key k of the instance whose prefix
// it has.
func histSeq(k []byte, prefix key) (uint64, bool) {
	if len(k) != len(prefix)+8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(prefix):]), true
}
