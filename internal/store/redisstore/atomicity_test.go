package redisstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// snapshot returns every key under the store's prefix with its DUMP: the
// exact content, so that any write shows as a difference. SCAN is fine in
// a test.
func snapshot(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := c.Scan(ctx, 0, "{"+prefix+"}*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		d, err := c.Dump(ctx, k).Result()
		if err != nil {
			t.Fatalf("DUMP %q: %v", k, err)
		}
		out[k] = d
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	if len(out) == 0 {
		t.Fatal("snapshot found no keys: wrong prefix?")
	}
	return out
}

// wantSame fails unless the two snapshots are equal, naming the keys that
// differ.
func wantSame(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var diff []string
	for k, v := range after {
		if before[k] != v {
			diff = append(diff, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diff = append(diff, k+" (deleted)")
		}
	}
	if len(diff) > 0 {
		slices.Sort(diff)
		t.Errorf("%s changed keys %q", what, diff)
	}
}

// fixture writes an instance with everything a Commit touches, a queued
// and a delivered stimulus, and a pinned plugin.
func fixture(t *testing.T, s store.Store) *weft.Instance {
	t.Helper()
	ctx := t.Context()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v1"})
	must("PutPlugin", err)
	for _, id := range []string{"queued", "taken"} {
		_, err = s.EnqueueStimulus(ctx, weft.Stimulus{ID: id, Name: "paid", Key: "o1", ExpiresAt: storetest.Epoch.Add(time.Hour)})
		must("EnqueueStimulus", err)
	}
	in := &weft.Instance{ID: "i", Workflow: "order", Status: weft.StatusRunning, State: []byte("state"),
		Plugins: map[string]string{"pay": "v1"},
		Lease:   weft.Lease{Node: "n1", Boot: "b1", Expiry: storetest.Epoch.Add(time.Minute)}}
	_, err = s.Commit(ctx, store.Commit{Instance: in, Fence: 5,
		History:   []weft.HistoryEntry{{Type: "created"}},
		Bookmarks: []weft.Bookmark{{StepPath: "wait", Event: "paid", Key: "o1"}},
		Timers:    []weft.Timer{{ID: "t", Due: storetest.Epoch.Add(time.Hour)}},
	})
	must("Commit", err)
	_, err = s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: "other", Workflow: "order", Status: weft.StatusPending}, DeliveredStimulus: "taken"})
	must("Commit other", err)
	_, err = s.Deliver(ctx, nil, []weft.Message{{InstanceID: "i", ID: "m1", Kind: "child"}})
	must("Deliver", err)
	_, err = s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", Heartbeats: []store.Heartbeat{{InstanceID: "i", Token: "a1", Details: json.RawMessage(`{}`)}}})
	must("RenewLeases", err)
	got, err := s.GetInstance(ctx, "i")
	must("GetInstance", err)
	return got
}

// TestRefusedWritesChangeNothing: a Commit refused at each of its checks —
// including the last ones, after the earlier checks passed — and the other
// refusing scripts leave every key of the store byte for byte as it was.
func TestRefusedWritesChangeNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := open(t, c, "refused:", clock.Now)
	in := fixture(t, s)
	before := snapshot(t, c, "refused:")

	// change returns a commit that writes everything it can.
	change := func(rev, fence uint64, stim string, plugins map[string]string) store.Commit {
		n := *in
		n.Rev, n.Status, n.State, n.Plugins = rev, weft.StatusSuspended, []byte("changed"), plugins
		return store.Commit{
			Instance: &n, Fence: fence,
			History:           []weft.HistoryEntry{{Type: "x"}},
			Bookmarks:         []weft.Bookmark{},
			Timers:            []weft.Timer{{ID: "t2", Due: storetest.Epoch}},
			DeliveredStimulus: stim,
			Consumed:          []string{"m1"},
			Send:              []weft.Message{{InstanceID: "other", ID: "m2", Kind: "child"}, {InstanceID: "i", ID: "m3", Kind: "child"}},
		}
	}
	pins := map[string]string{"pay": "v1"}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"create existing", func() error { _, err := s.Commit(t.Context(), change(0, 5, "", pins)); return err }, weft.ErrExists},
		{"update missing", func() error {
			c := change(1, 5, "", pins)
			c.Instance.ID = "missing"
			_, err := s.Commit(t.Context(), c)
			return err
		}, weft.ErrNotFound},
		{"lower fence", func() error { _, err := s.Commit(t.Context(), change(1, 4, "", pins)); return err }, weft.ErrFenced},
		{"stale rev", func() error { _, err := s.Commit(t.Context(), change(9, 5, "", pins)); return err }, weft.ErrConflict},
		{"stimulus delivered already", func() error { _, err := s.Commit(t.Context(), change(1, 5, "taken", pins)); return err }, store.ErrNotQueued},
		// Rev, fence and the stimulus pass; the last check, the pins, refuses.
		{"unknown plugin version, after every other check passed", func() error {
			_, err := s.Commit(t.Context(), change(1, 6, "queued", map[string]string{"pay": "v1", "ship": "v9"}))
			return err
		}, weft.ErrNotFound},
		{"delete with a lower fence", func() error { return s.DeleteInstance(t.Context(), "i", 4) }, weft.ErrFenced},
		{"delete a pinned plugin", func() error { return s.DeletePlugin(t.Context(), "pay") }, weft.ErrInUse},
		{"delete a missing definition", func() error { return s.DeleteDefinition(t.Context(), "nope") }, weft.ErrNotFound},
		{"invalid commit", func() error {
			c := change(1, 5, "", pins)
			c.Instance.Input = json.RawMessage(`{`)
			_, err := s.Commit(t.Context(), c)
			return err
		}, weft.ErrInvalid},
	}
	for _, tt := range tests {
		err := tt.call()
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		wantSame(t, tt.name, before, snapshot(t, c, "refused:"))
	}

	// The same commit, allowed, writes: the snapshot can see a change.
	if _, err := s.Commit(t.Context(), change(1, 6, "queued", pins)); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, c, "refused:")
	if maps.Equal(before, after) {
		t.Error("an accepted commit changed no key")
	}
}

// TestScriptOutOfMemoryWritesNothing injects the one failure that can stop
// a script after it started: Redis over maxmemory. The commit fails whole
// (Redis refuses a script's first write), and succeeds once memory is
// back.
func TestScriptOutOfMemoryWritesNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t) // its own server: maxmemory is server-wide
	c := srv.Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := open(t, c, "oom:", clock.Now)
	in := fixture(t, s)
	before := snapshot(t, c, "oom:")

	in.Status = weft.StatusSuspended
	commit := store.Commit{Instance: in, Fence: 5, History: []weft.HistoryEntry{{Type: "suspended"}}, DeliveredStimulus: "queued",
		Bookmarks: []weft.Bookmark{}, Timers: []weft.Timer{}, Consumed: []string{"m1"}}
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Commit(t.Context(), commit)
	if resetErr := c.ConfigSet(ctx, "maxmemory", "0").Err(); resetErr != nil {
		t.Fatal(resetErr)
	}
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("Commit over maxmemory: %v, want Redis's OOM error", err)
	}
	var ce *store.CommitError
	if errors.As(err, &ce) {
		t.Errorf("an OOM failure is a *CommitError: %v", err)
	}
	if !strings.Contains(err.Error(), `"i"`) || !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("error %q does not name the instance and the address", err)
	}
	wantSame(t, "commit over maxmemory", before, snapshot(t, c, "oom:"))

	rev, err := s.Commit(t.Context(), commit)
	if err != nil || rev != 2 {
		t.Fatalf("Commit after memory came back: rev %d, %v", rev, err)
	}
}
