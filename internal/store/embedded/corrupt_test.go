package embedded_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/embedded/embeddedtest"
)

// Page layout of a bbolt file (go.etcd.io/bbolt/internal/common): a header
// of id (8 bytes), flags (2), count (2) and overflow (4), then the
// elements; a branch element is pos (4), ksize (4) and the child's page id
// (8).
const (
	pageHeaderSize    = 16
	branchElementSize = 16
	branchPageFlag    = 0x01
)

// instancesTree writes n instances to a new store at path, closes it and
// returns the file's page size and the pages of the instances bucket's
// first two leaves with the ids the first one holds. It fails the test
// unless the bucket's root is a branch of at least two leaves.
func instancesTree(t *testing.T, path string, n int) (pageSize int, first, second uint64, firstIDs []string) {
	t.Helper()
	s, err := embedded.Open(path, embedded.Config{Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		in := &weft.Instance{ID: fmt.Sprintf("instance-%04d", i), Workflow: "w", Status: weft.StatusCompleted,
			Input: json.RawMessage(fmt.Sprintf(`{"pad": %q}`, strings.Repeat("x", 200)))}
		if _, err := s.Commit(t.Context(), store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pageSize = db.Info().PageSize
	var root uint64
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("instances"))
		root = uint64(b.Root())
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		p := data[int(root)*pageSize:]
		if flags, count := binary.LittleEndian.Uint16(p[8:]), binary.LittleEndian.Uint16(p[10:]); flags != branchPageFlag || count < 2 {
			return fmt.Errorf("the instances bucket's root (page %d) is not a branch of two or more: flags %#x, count %d", root, flags, count)
		}
		first = binary.LittleEndian.Uint64(p[pageHeaderSize+8:])
		second = binary.LittleEndian.Uint64(p[pageHeaderSize+branchElementSize+8:])
		count := int(binary.LittleEndian.Uint16(data[int(first)*pageSize+10:]))
		c := b.Cursor()
		for k, _ := c.First(); k != nil && len(firstIDs) < count; k, _ = c.Next() {
			firstIDs = append(firstIDs, string(k))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pageSize, first, second, firstIDs
}

// corruptPageID overwrites the id in the header of page pg, which bbolt
// checks whenever it reads the page (it panics: "Page expected to be").
func corruptPageID(t *testing.T, path string, pageSize int, pg uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], pg+1000)
	if _, err := f.WriteAt(b[:], int64(pg)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptPageOnWrite: a corrupt page met by a write, in the write's
// own reads or only in bbolt's commit (which runs outside the functions
// the store gives bbolt), fails that write with an error naming the file,
// and every later write fast; the process lives, reads still answer, and
// every write acknowledged before stays in the file.
func TestCorruptPageOnWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// page picks the leaf to corrupt.
		page func(first, second uint64) uint64
		// reread: the first leaf is intact, and can be read back.
		reread bool
	}{
		// Deleting from the first leaf empties it below a quarter page:
		// the commit's rebalance merges it with the second, reading that
		// one only then, in bbolt's commit.
		{"met in the commit", func(_, second uint64) uint64 { return second }, true},
		// The write's own lookup of the instance reads the corrupt leaf.
		{"met by the write's reads", func(first, _ uint64) uint64 { return first }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "weft.db")
			pageSize, first, second, ids := instancesTree(t, path, 120)
			corruptPageID(t, path, pageSize, tt.page(first, second))

			s, err := embedded.Open(path, embedded.Config{Engine: embedded.EngineBolt, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var (
				deleted []string
				failed  error
			)
			for _, id := range ids {
				if err := s.DeleteInstance(t.Context(), id, 0); err != nil {
					failed = err
					break
				}
				deleted = append(deleted, id)
			}
			if failed == nil {
				t.Fatalf("deleting the %d instances of the first leaf met no corruption", len(ids))
			}
			t.Logf("%d deletes, then: %v", len(deleted), failed)
			if tt.reread && len(deleted) == 0 {
				t.Error("the first delete failed: no acknowledged write to look for in the file")
			}
			if !strings.Contains(failed.Error(), path) {
				t.Errorf("the error %q does not name the file", failed)
			}
			if s.Err() == nil {
				t.Error("Err() is nil after a write met a corrupt page")
			}

			// Later writes, concurrent ones too, fail at once with the
			// same cause; reads of intact pages still answer.
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() {
					_, _, err := s.PutDefinition(t.Context(), fmt.Sprintf("wf-%d", i), "h", []byte("x"))
					if !errors.Is(err, embedded.ErrBroken) || !strings.Contains(err.Error(), path) {
						t.Errorf("a later write: %v, want ErrBroken naming the file", err)
					}
				})
			}
			wg.Wait()
			if _, _, err := s.ListDefinitions(t.Context(), "", 10); err != nil {
				t.Errorf("a read after the failure: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}

			// What was acknowledged is in the file; what failed is not
			// half done.
			db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.View(func(tx *bolt.Tx) error {
				b := tx.Bucket([]byte("instances"))
				for _, id := range deleted {
					if b.Get([]byte(id)) != nil {
						t.Errorf("instance %s: deleted (acknowledged), but in the file", id)
					}
				}
				if tt.reread && b.Get([]byte(ids[len(deleted)])) == nil {
					t.Errorf("instance %s: its delete failed, but it is gone", ids[len(deleted)])
				}
				if tx.Bucket([]byte("definitions_latest")).Get([]byte("wf-0")) != nil {
					t.Error("a write refused as broken is in the file")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCorruptBlockOnPebbleWrite: on Pebble, a write that reads a block
// whose checksum fails breaks the store as a corrupt page does on bbolt:
// it fails naming the store, every later write fails with ErrBroken, and
// reads of sound blocks go on.
func TestCorruptBlockOnPebbleWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "weft")
	ids := pebbleInstances(t, path, 120, 60)
	victim := ids[60]
	embeddedtest.CorruptTable(t, path, []byte(pebbleMarker))

	s, err := embedded.Open(path, embedded.Config{Engine: embedded.EnginePebble, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Err(); err != nil {
		t.Fatalf("Err before any write: %v", err)
	}
	err = s.DeleteInstance(t.Context(), victim, 0)
	if !errors.Is(err, embedded.ErrBroken) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a delete through a corrupt block: %v, want ErrBroken naming %s", err, path)
	}
	if err := s.Err(); !errors.Is(err, embedded.ErrBroken) {
		t.Errorf("Err() = %v after a write met a corrupt block", err)
	}
	later := &weft.Instance{ID: "later", Workflow: "w", Status: weft.StatusPending}
	if _, err := s.Commit(t.Context(), store.Commit{Instance: later}); !errors.Is(err, embedded.ErrBroken) {
		t.Errorf("a later write: %v, want ErrBroken", err)
	}
	if in, err := s.GetInstance(t.Context(), ids[0]); err != nil || in.ID != ids[0] {
		t.Errorf("a read of a sound block: %v, %v", in, err)
	}
}

// pebbleMarker is the text that pebbleInstances writes in the input of
// one instance: no four bytes of it are found elsewhere in the store, so
// that Pebble's compression (Snappy, which copies repeats of four bytes or
// more) keeps it as it is.
const pebbleMarker = "ABCDEFGHIJKLMNOPQRSUVWXY"

// pebbleInstances makes a Pebble store at path holding n instances, their
// inputs padded with hex digits (so that they fill several blocks), the
// input of the one numbered marked holding pebbleMarker, written to a
// table (a bbolt store migrated: Migrate flushes), and returns their ids.
func pebbleInstances(t *testing.T, path string, n, marked int) []string {
	t.Helper()
	from := path + ".db"
	s, err := embedded.Open(from, embedded.Config{Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		id := fmt.Sprintf("instance-%04d", i)
		pad := make([]byte, 150)
		for j := range pad {
			pad[j] = "0123456789abcdef"[(i*7919+j*104729+j*j)%16]
		}
		m := ""
		if i == marked {
			m = pebbleMarker
		}
		in := &weft.Instance{ID: id, Workflow: "w", Status: weft.StatusCompleted,
			Input: json.RawMessage(fmt.Sprintf(`{"m": %q, "pad": %q}`, m, pad))}
		if _, err := s.Commit(t.Context(), store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := embedded.Migrate(from, path, embedded.Config{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	return ids
}
