package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// TestBatchRefusedWritesChangeNothing: each batch script refused at its
// checks leaves every key of the store byte for byte as it was, and so
// does an ApplyBatchItems that Redis refuses for memory: an item's outcome
// and its messages are written together or not at all.
func TestBatchRefusedWritesChangeNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its own server: maxmemory is server-wide
	c := srv.Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := open(t, c, "batches:", clock.Now)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "w", Status: weft.StatusSuspended}}); err != nil {
			t.Fatal(err)
		}
	}
	doc := json.RawMessage(`{"op":"cancel"}`)
	b, err := s.CreateBatch(ctx, &weft.Batch{ID: "b-1", Document: doc, Wake: storetest.Epoch}, []string{"a", "b", "gone"})
	if err != nil {
		t.Fatal(err)
	}
	if b, err = s.UpdateBatch(ctx, b); err != nil {
		t.Fatal(err)
	}
	stale := *b
	stale.Revision = 1
	changes := []weft.BatchChange{
		{InstanceID: "a", Outcome: weft.BatchDone, Messages: []weft.Message{{ID: "op:b-1", Kind: "cancel"}}},
		{InstanceID: "gone", Outcome: weft.BatchDone, Messages: []weft.Message{{ID: "op:b-1", Kind: "cancel"}}},
	}
	before := snapshot(t, c, "batches:")
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"create a taken id", func() error {
			_, err := s.CreateBatch(ctx, &weft.Batch{ID: "b-1", Document: doc}, []string{"c"})
			return err
		}, weft.ErrExists},
		{"update from a stale revision", func() error { _, err := s.UpdateBatch(ctx, &stale); return err }, weft.ErrConflict},
		{"add from a stale revision", func() error { _, _, err := s.AddBatchItems(ctx, &stale, []string{"c"}); return err }, weft.ErrConflict},
		{"apply from a stale revision", func() error { _, err := s.ApplyBatchItems(ctx, &stale, changes); return err }, weft.ErrConflict},
		{"apply to no batch", func() error {
			_, err := s.ApplyBatchItems(ctx, &weft.Batch{ID: "b-none", Revision: 1}, changes)
			return err
		}, weft.ErrNotFound},
		{"delete no batch", func() error { return s.DeleteBatch(ctx, "b-none") }, weft.ErrNotFound},
	}
	for _, tt := range tests {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		wantSame(t, tt.name, before, snapshot(t, c, "batches:"))
	}

	if err := c.ConfigSet(context.Background(), "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.ApplyBatchItems(ctx, b, changes)
	if resetErr := c.ConfigSet(context.Background(), "maxmemory", "0").Err(); resetErr != nil {
		t.Fatal(resetErr)
	}
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("ApplyBatchItems over maxmemory: %v, want Redis's OOM error", err)
	}
	wantSame(t, "apply over maxmemory", before, snapshot(t, c, "batches:"))

	// The same apply, allowed, writes the items and the message.
	got, err := s.ApplyBatchItems(ctx, b, changes)
	if err != nil {
		t.Fatal(err)
	}
	want := weft.BatchCounts{weft.BatchDone: 1, weft.BatchSkipped: 1, weft.BatchPending: 1}
	if !maps.Equal(got.Counts, want) {
		t.Errorf("counts after the apply = %v, want %v", got.Counts, want)
	}
	msgs, err := s.Inbox(ctx, "a")
	if err != nil || len(msgs) != 1 {
		t.Errorf("inbox of a after the apply: %v, %v", msgs, err)
	}
	if maps.Equal(before, snapshot(t, c, "batches:")) {
		t.Error("an accepted apply changed no key")
	}
}
