package embedded

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// TestOpenWaitsOldInboxes: a file of a build before the inbox waits holds
// messages without a wait, which the reads would take as an empty inbox:
// Open gives each such inbox one (and so does Migrate), so the instance
// reads as having messages waiting and the recovery sweep finds it.
func TestOpenWaitsOldInboxes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cfg := Config{Engine: EngineBolt, Now: func() time.Time { return now }}
	dir := t.TempDir()
	path := filepath.Join(dir, "weft.db")
	s, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"full", "empty"} {
		if _, err := s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusRunning}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.update(func(tx kvTx) error {
		_, err := putMessages(tx, []weft.Message{
			{InstanceID: "full", ID: "m1", Kind: weft.MessageNote},
			{InstanceID: "full", ID: "m2", Kind: weft.MessageNote},
		}, now)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// As the earlier build left it: no waits.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bInboxWait, bInboxWaitX} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	pebblePath := filepath.Join(dir, "store")
	if err := Migrate(path, pebblePath, Config{Engine: EnginePebble, Now: cfg.Now}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		engine Engine
		path   string
	}{{EngineBolt, path}, {EnginePebble, pebblePath}} {
		s, err := Open(c.path, Config{Engine: c.engine, Now: cfg.Now})
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]bool{"full": true, "empty": false} {
			got, err := s.GetInstance(ctx, id)
			if err != nil || got.InboxWaiting != want {
				t.Errorf("%s: instance %s: InboxWaiting %v (%v), want %v", c.engine, id, got != nil && got.InboxWaiting, err, want)
			}
		}
		if ids, err := s.WaitingInboxes(ctx, now.Add(time.Second), 10); err != nil || !slices.Equal(ids, []string{"full"}) {
			t.Errorf("%s: WaitingInboxes = %v, %v; want full", c.engine, ids, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
