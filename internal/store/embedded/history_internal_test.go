package embedded

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// TestHistoryChunks: a commit's entries share one value, and History
// reads them from any point with any limit, across values of one entry
// (as every value was before schema 3, and as a commit of one entry still
// writes) and of several, on both engines.
func TestHistoryChunks(t *testing.T) {
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e Engine) {
		s := engineStore(t, e)
		ctx := t.Context()
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		in := &weft.Instance{ID: "i1", Workflow: "w", Version: 1, Status: weft.StatusRunning}
		// Seqs 1-2 as an earlier build wrote them, one per key.
		if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
		if err := s.db.update(func(tx kvTx) error {
			for seq := uint64(1); seq <= 2; seq++ {
				raw, err := store.EncodeHistory(weft.HistoryEntry{Seq: seq, Time: at, Type: weft.HistoryType(fmt.Sprint("t", seq))})
				if err != nil {
					return err
				}
				if err := tx.Bucket(bHist).Put(key(nil).str("i1").u64(seq), raw); err != nil {
					return err
				}
			}
			r, err := getInst(tx, "i1")
			if err != nil {
				return err
			}
			r.HistSeq = 2
			return putInst(tx, r, false)
		}); err != nil {
			t.Fatal(err)
		}
		// Then commits of 4, 1 and 3 entries: seqs 3-6, 7, 8-10, of
		// lengths that take one, two and three bytes.
		data := map[uint64]string{}
		seq := uint64(2)
		for _, n := range []int{4, 1, 3} {
			var hist []weft.HistoryEntry
			for i := range n {
				seq++
				d := `{"a":"\u2028<"}`
				switch i {
				case 1:
					d = `{"a":"` + strings.Repeat("b", 200) + `"}`
				case 2:
					d = `{"a":"` + strings.Repeat("c", 20000) + `"}`
				}
				data[seq] = d
				hist = append(hist, weft.HistoryEntry{Time: at, Type: "x", Data: []byte(d)})
			}
			cur, err := s.GetInstance(ctx, "i1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Commit(ctx, store.Commit{Instance: cur, History: hist}); err != nil {
				t.Fatal(err)
			}
		}
		var keys int
		if err := s.db.view(func(tx kvTx) error { keys = countKeys(tx.Bucket(bHist)); return nil }); err != nil || keys != 5 {
			t.Fatalf("the history bucket holds %d keys (%v), want 5: two single entries, then one per commit", keys, err)
		}
		for after := uint64(0); after <= 11; after++ {
			for limit := 1; limit <= 11; limit++ {
				got, err := s.History(ctx, "i1", after, limit)
				if err != nil {
					t.Fatalf("History(after %d, limit %d): %v", after, limit, err)
				}
				var want []uint64
				for seq := after + 1; seq <= 10 && len(want) < limit; seq++ {
					want = append(want, seq)
				}
				var seqs []uint64
				for _, e := range got {
					seqs = append(seqs, e.Seq)
				}
				if !slices.Equal(seqs, want) {
					t.Fatalf("History(after %d, limit %d) = seqs %v, want %v", after, limit, seqs, want)
				}
				for _, e := range got {
					if e.Seq > 2 && (string(e.Data) != data[e.Seq] || !e.Time.Equal(at)) {
						t.Fatalf("entry %d: %+v", e.Seq, e)
					}
				}
			}
		}
		if _, err := s.History(ctx, "nope", 0, 10); err == nil {
			t.Error("History of a missing instance succeeded")
		}
		if err := s.DeleteInstance(ctx, "i1", 0); err != nil {
			t.Fatal(err)
		}
		if err := s.db.view(func(tx kvTx) error { keys = countKeys(tx.Bucket(bHist)); return nil }); err != nil || keys != 0 {
			t.Errorf("after the delete, the history bucket holds %d keys (%v)", keys, err)
		}
	})
}

// FuzzHistEntries: a history value of any bytes is read without a panic,
// each entry inside it, in order, with consecutive seqs, and a chunk made
// of entries reads back as them.
func FuzzHistEntries(f *testing.F) {
	f.Add([]byte(`{"seq":1}`), uint64(1))
	f.Add([]byte{histChunk, 2, '{', '}', 3, '[', '1', ']'}, uint64(7))
	f.Add([]byte{histChunk, 9, '{'}, uint64(1))
	f.Add([]byte{histChunk}, uint64(0))
	f.Fuzz(func(t *testing.T, v []byte, first uint64) {
		var got [][]byte
		next := first
		err := histEntries(v, first, func(seq uint64, raw []byte) bool {
			if seq != next {
				t.Fatalf("entry seq %d, want %d", seq, next)
			}
			next++
			got = append(got, raw)
			return true
		})
		if err != nil {
			return
		}
		if len(v) > 0 && v[0] == histChunk {
			// Rebuilt from what was read, the value is the same bytes.
			re := []byte{histChunk}
			for _, raw := range got {
				re = binary.AppendUvarint(re, uint64(len(raw)))
				re = append(re, raw...)
			}
			if !bytes.Equal(re, v) && canonicalUvarints(v) {
				t.Fatalf("read %q from %q, which rebuilds as %q", got, v, re)
			}
		}
	})
}

// canonicalUvarints reports whether chunk v writes its lengths in the
// fewest bytes (binary.Uvarint also reads padded ones).
func canonicalUvarints(v []byte) bool {
	rest := v[1:]
	for len(rest) > 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || k != len(binary.AppendUvarint(nil, n)) || n > uint64(len(rest)-k) {
			return false
		}
		rest = rest[k+int(n):]
	}
	return true
}
