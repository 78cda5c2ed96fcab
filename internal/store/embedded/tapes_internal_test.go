package embedded

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// TestTapeIndexOfOlderFile: a file written before the index of tapes by
// plugin (the bucket missing) has its tapes indexed as Open adds the
// bucket; deleting the instances empties the index.
func TestTapeIndexOfOlderFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "weft.db")
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	open := func() *Store {
		t.Helper()
		s, err := Open(path, Config{Engine: EngineBolt, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	s := open()
	var want []string // newest first
	for i, id := range []string{"a", "b", "c"} {
		in := &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusRunning}
		if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
		rec := weft.TapeRecord{Key: weft.TapeKey{InstanceID: id, StepPath: "steps[0]", Exec: "e1", Attempt: 1},
			Outcome: weft.TapeFailed, Plugin: []string{"kit", "other", "kit"}[i], Workflow: "w"}
		if err := s.PutTape(ctx, rec, []byte{1}); err != nil {
			t.Fatal(err)
		}
		if rec.Plugin == "kit" {
			want = append([]string{rec.Key.String()}, want...)
		}
		now = now.Add(time.Second)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bTapesByPlugin) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s = open()
	found, err := s.FindTapes(ctx, weft.TapeQuery{Plugin: "kit", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range found {
		got = append(got, rec.Key.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("FindTapes(kit) on a file of an older build = %q, want %q", got, want)
	}

	for _, id := range []string{"a", "b", "c"} {
		if err := s.DeleteInstance(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	err = s.db.view(func(tx kvTx) error {
		if n := countKeys(tx.Bucket(bTapesByPlugin)); n != 0 {
			t.Errorf("the index of tapes by plugin holds %d entries after every instance was deleted", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
