package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// TestRestartKeepsAcknowledgedWrites: writers commit while redis-server
// (appendfsync always) is killed with SIGKILL; after a restart, which
// replays the AOF, every acknowledged commit is there, and no commit is
// there by half: each instance's history has exactly one event per
// revision, and every index entry names an instance that exists.
func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithAppendFsync("always"))
	c := srv.Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := open(t, c, "restart:", clock.Now)
	before := fixture(t, s)

	const writers, wantAcked = 6, 300
	var (
		mu    sync.Mutex
		acked = map[string]uint64{} // id → last acknowledged rev
		wg    sync.WaitGroup
		stop  = make(chan struct{})
	)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in := &weft.Instance{ID: fmt.Sprintf("w%d-%d", w, i), Workflow: "restart", Status: weft.StatusRunning,
					Lease: weft.Lease{Node: "n", Boot: "b", Expiry: storetest.Epoch.Add(time.Hour)}}
				// A create, then an update: each with one event.
				for rev := uint64(0); rev < 2; rev++ {
					in.Rev = rev
					if _, err := s.Commit(t.Context(), store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: weft.HistoryType(fmt.Sprint("rev", rev+1))}},
						Timers: []weft.Timer{{ID: "t", Due: storetest.Epoch.Add(time.Duration(rev+1) * time.Minute)}}}); err != nil {
						return // the server is gone
					}
					mu.Lock()
					acked[in.ID] = rev + 1
					mu.Unlock()
				}
			}
		})
	}
	deadline := time.Now().Add(time.Minute)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= wantAcked {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d commits acknowledged within a minute", n)
		}
		time.Sleep(5 * time.Millisecond) // polling the writers' progress
	}
	srv.Kill(t) // mid-write: the writers are committing
	close(stop)
	wg.Wait()
	srv.Restart(t)

	// A new client, as a restarted process has: the writers' failed dials
	// left the old one's pool answering its last dial error until its
	// once-a-second probe reconnects.
	s = open(t, srv.Client(t), "restart:", clock.Now)
	ctx := t.Context()
	got, err := s.GetInstance(ctx, "i")
	if err != nil || got.Rev != before.Rev || string(got.State) != "state" || got.Fence != 5 {
		t.Fatalf("fixture instance after restart = %+v, %v", got, err)
	}
	for id, rev := range acked {
		in, err := s.GetInstance(ctx, id)
		if err != nil {
			t.Fatalf("acknowledged instance %s lost: %v", id, err)
		}
		if in.Rev < rev {
			t.Errorf("instance %s at rev %d, acknowledged rev %d", id, in.Rev, rev)
		}
	}
	// No half commit: every listed instance is whole.
	listed := 0
	for cursor := ""; ; {
		items, next, err := s.ListInstances(ctx, weft.InstanceFilter{Workflow: "restart", Limit: weft.MaxListLimit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range items {
			listed++
			evs, err := s.History(ctx, in.ID, 0, 10)
			if err != nil {
				t.Fatalf("History(%s): %v", in.ID, err)
			}
			timers, err := s.Timers(ctx, in.ID)
			if err != nil {
				t.Fatalf("Timers(%s): %v", in.ID, err)
			}
			if uint64(len(evs)) != in.Rev || len(timers) != 1 || !timers[0].Due.Equal(storetest.Epoch.Add(time.Duration(in.Rev)*time.Minute)) {
				t.Errorf("instance %s at rev %d has %d events and timers %+v: a commit was half applied", in.ID, in.Rev, len(evs), timers)
			}
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	if listed < len(acked) {
		t.Errorf("%d instances listed after restart, %d acknowledged", listed, len(acked))
	}
	due, err := s.DueTimers(ctx, storetest.Epoch.Add(time.Hour), weft.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range due {
		if _, err := s.GetInstance(ctx, tm.InstanceID); errors.Is(err, weft.ErrNotFound) {
			t.Errorf("due timer %+v of a missing instance", tm)
		}
	}
	t.Logf("%d commits acknowledged before SIGKILL, %d instances found after restart", len(acked), listed)
}
