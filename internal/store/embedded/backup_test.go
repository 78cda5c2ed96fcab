package embedded_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
)

// TestBackup: a backup is the store as it was when it began, whatever
// is written while it is taken; it opens as a store.
func TestBackup(t *testing.T) {
	t.Parallel()
	forEngines(t, testBackup)
}

func testBackup(t *testing.T, e embedded.Engine) {
	dir := t.TempDir()
	s := openE(t, e, storePath(dir, e), nil)
	create := func(id string) error {
		in := &weft.Instance{ID: id, Workflow: "w", Status: weft.StatusPending,
			Input: json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", 500)))}
		_, err := s.Commit(t.Context(), store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}})
		return err
	}
	for i := range 200 {
		if err := create(fmt.Sprintf("before-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := s.Backup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Writes while the backup is taken: creates, and deletes of what the
	// backup holds.
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				if err := create(fmt.Sprintf("during-%d-%02d", w, i)); err != nil {
					t.Errorf("a write during the backup: %v", err)
				}
				if err := s.DeleteInstance(t.Context(), fmt.Sprintf("before-%03d", w*25+i), 0); err != nil {
					t.Errorf("a delete during the backup: %v", err)
				}
			}
		})
	}
	copyPath := filepath.Join(dir, "backup.db")
	f, err := os.Create(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteTo(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n != b.Size() {
		t.Errorf("WriteTo wrote %d bytes, Size said %d", n, b.Size())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	wg.Wait()

	if err := embedded.CheckFile(copyPath); err != nil {
		t.Fatal(err)
	}
	c := openBoltFile(t, copyPath, nil)
	items, _, err := c.ListInstances(t.Context(), weft.InstanceFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 200 {
		t.Errorf("the backup holds %d instances, want the 200 written before it began", len(items))
	}
	for _, in := range items {
		if !strings.HasPrefix(in.ID, "before-") {
			t.Errorf("the backup holds %s, written after it began", in.ID)
		}
	}
	if h, err := c.History(t.Context(), "before-000", 0, 10); err != nil || len(h) != 1 {
		t.Errorf("History of before-000 in the backup: %v, %v", h, err)
	}
	if left, _ := filepath.Glob(storePath(dir, e) + ".backup-*"); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(t.Context()); !errors.Is(err, weft.ErrClosed) {
		t.Errorf("Backup after Close: %v, want ErrClosed", err)
	}
}

// TestCheckFile: CheckFile refuses, naming the file, what Open would not
// open as a store.
func TestCheckFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a bbolt file ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{garbage, other, filepath.Join(dir, "missing.db")} {
		err := embedded.CheckFile(path)
		t.Logf("%s: %v", filepath.Base(path), err)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("CheckFile(%s) = %v, want an error naming it", path, err)
		}
	}
}

// TestSpooledBackupHoldsNoWrites: once spooled, a backup that nobody reads
// yet does not hold back writes that grow the file past its memory map,
// which wait for a backup's read transaction; it is still the store as it
// was, and closing it removes the copy. Open removes a copy a crash left.
func TestSpooledBackupHoldsNoWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "weft.db")
	s := openBoltFile(t, path, nil)
	big := json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", 1<<20)))
	create := func(id string) error {
		_, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: id, Workflow: "w", Status: weft.StatusPending, Input: big}})
		return err
	}
	if err := create("before"); err != nil {
		t.Fatal(err)
	}
	b, err := s.Backup(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Spool(); err != nil {
		t.Fatal(err)
	}
	// 48 MiB more: the memory map (at least twice the file, doubling) must
	// grow, which waits for every read transaction to end.
	done := make(chan error, 1)
	go func() {
		for i := range 48 {
			if err := create(fmt.Sprintf("during-%02d", i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		_ = b.Close() // let the writes through, so that the store closes
		t.Fatalf("writes were held back by a spooled backup (then: %v)", <-done)
	}
	var buf bytes.Buffer
	if n, err := b.WriteTo(&buf); err != nil || n != b.Size() {
		t.Fatalf("WriteTo: %d of %d bytes, %v", n, b.Size(), err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(path + ".backup-*"); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	c := openBoltFile(t, copyPath, nil)
	items, _, err := c.ListInstances(t.Context(), weft.InstanceFilter{Limit: 100})
	if err != nil || len(items) != 1 || items[0].ID != "before" {
		t.Fatalf("the backup holds %v, %v; want only the instance written before it", items, err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	stray := path + ".backup-1234"
	if err := os.WriteFile(stray, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	openBoltFile(t, path, nil)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("Open left the crash's copy %s: %v", stray, err)
	}
}
