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
	// As the earlier build left it: no waits.
	closeWithout(t, s, bInboxWait, bInboxWaitX)
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

// TestOpenMarksOldHeartbeats: a file of a build before the heartbeat marks
// holds heartbeats of unmarked instances, which a terminal commit would
// keep: Open marks each such instance, and the commit removes them.
func TestOpenMarksOldHeartbeats(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cfg := Config{Engine: EngineBolt, Now: func() time.Time { return now }}
	path := filepath.Join(t.TempDir(), "weft.db")
	s, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	in := &weft.Instance{ID: "i1", Workflow: "w", Version: 1, Status: weft.StatusRunning,
		Lease: weft.Lease{Node: "n1", Boot: "b1", Expiry: now.Add(time.Minute)}}
	if in.Rev, err = s.Commit(ctx, store.Commit{Instance: in}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", Heartbeats: []store.Heartbeat{
		{InstanceID: "i1", Token: "a1", Attempt: 1, Time: now, Details: []byte(`{}`)},
	}}); err != nil {
		t.Fatal(err)
	}
	closeWithout(t, s, bBeatsOf)
	if s, err = Open(path, cfg); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if beats, err := s.Heartbeats(ctx, "i1"); err != nil || len(beats) != 1 {
		t.Fatalf("after Open: Heartbeats = %+v, %v; want one", beats, err)
	}
	in.Status, in.Lease = weft.StatusCompleted, weft.Lease{}
	if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
		t.Fatal(err)
	}
	if beats, err := s.Heartbeats(ctx, "i1"); err != nil || len(beats) != 0 {
		t.Errorf("after the terminal commit: Heartbeats = %+v, %v; want none", beats, err)
	}
}

// closeWithout closes s, a bbolt store, and deletes buckets from its file,
// as a build before them left it.
func closeWithout(t *testing.T, s *Store, buckets ...[]byte) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(s.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range buckets {
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
}
