package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins/call"
)

// jumpClock is the real clock plus an offset that a test moves forward:
// time passes as usual (leases, locks), and a test can jump past a
// retention.
type jumpClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *jumpClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *jumpClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// deletions is an engine.Observer that passes on what is deleted.
type deletions struct {
	ch chan string // reason, once per instance
}

func (deletions) InstanceStatus(string, weft.Status)                  {}
func (deletions) StepFinished(string, string, string, time.Duration)  {}
func (deletions) ScheduleFired(string, bool, time.Duration)           {}
func (deletions) SchedulesSkipped(string, int)                        {}
func (deletions) SlotWaited(string, time.Duration)                    {}
func (deletions) SlotCancelled(string, string)                        {}
func (deletions) BatchApplied(string, string, int)                    {}
func (deletions) InstanceFinished(string, weft.Status, time.Duration) {}
func (deletions) TimerFired(time.Duration)                            {}
func (deletions) InstanceTakenOver()                                  {}
func (deletions) AttemptAbandoned(string)                             {}
func (d deletions) InstancesDeleted(reason string, n int) {
	for range n {
		d.ch <- reason
	}
}

// next waits for the next deletion and returns its reason.
func (d deletions) next(t *testing.T) string {
	t.Helper()
	select {
	case r := <-d.ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("no instance deleted within 30s")
		return ""
	}
}

// retentionWorkflows are one workflow per way of setting a retention.
var retentionWorkflows = map[string]string{
	"plain":   "name: plain\nsteps: [{id: a, set: {x: 1}}]",
	"short":   "name: short\nretention: 1m\nsteps: [{id: a, set: {x: 1}}]",
	"long":    "name: long\nretention: 30d\nsteps: [{id: a, activity: kit.fail, input: {code: nope}, retry: {max_attempts: 1}}]",
	"forever": "name: forever\nretention: 0\nsteps: [{id: a, set: {x: 1}}]",
}

// finishAll saves the retention workflows, finishes an instance of each,
// and checks that each was stamped with its finish time plus want[name]
// (0: not stamped, kept forever).
func finishAll(t *testing.T, h *host, clock *jumpClock, want map[string]time.Duration) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for name, src := range retentionWorkflows {
		h.save(src)
		before := clock.Now()
		inst := h.finish(name, nil)
		after := clock.Now()
		ids[name] = inst.ID
		r := want[name]
		switch {
		case r == 0 && !inst.DeleteAfter.IsZero():
			t.Errorf("%s: delete_after %s, want none (kept forever)", name, inst.DeleteAfter)
		case r != 0 && (inst.DeleteAfter.Before(before.Add(r)) || inst.DeleteAfter.After(after.Add(r))):
			t.Errorf("%s: delete_after %s, want its finish time plus %s, between %s and %s", name, inst.DeleteAfter, r, before.Add(r), after.Add(r))
		}
	}
	return ids
}

// wantKept fails unless each named instance is still stored; wantGone
// unless each is gone, with its history.
func wantKept(t *testing.T, h *host, ids map[string]string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := h.store.GetInstance(context.Background(), ids[name]); err != nil {
			t.Errorf("%s: %v, want it kept", name, err)
		}
	}
}

func wantGone(t *testing.T, h *host, ids map[string]string, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := h.store.GetInstance(context.Background(), ids[name]); !errors.Is(err, weft.ErrNotFound) {
			t.Errorf("%s: GetInstance = %v, want ErrNotFound", name, err)
		}
		if _, err := h.store.History(context.Background(), ids[name], 0, 10); !errors.Is(err, weft.ErrNotFound) {
			t.Errorf("%s: History = %v, want ErrNotFound", name, err)
		}
	}
}

// TestRetentionDeletesFinishedInstancesPastTheirTime: a finished instance
// is deleted once its workflow's retention, or the engine's, has passed
// since it finished, and not before; a workflow's retention overrides the
// engine's, both ways, and 0 keeps instances forever.
func TestRetentionDeletesFinishedInstancesPastTheirTime(t *testing.T) {
	t.Parallel()
	clock := &jumpClock{}
	obs := deletions{ch: make(chan string, 10)}
	h := newHost(t, withConfig(engine.Config{
		NodeID: "n1", Now: clock.Now, Observer: obs,
		Retention: time.Hour, RetentionInterval: 5 * time.Millisecond,
	}))
	ids := finishAll(t, h, clock, map[string]time.Duration{
		"plain": time.Hour, "short": time.Minute, "long": 30 * 24 * time.Hour,
	})

	clock.Advance(2 * time.Minute)
	if r := obs.next(t); r != engine.DeletedByRetention {
		t.Errorf("deleted for %q, want %q", r, engine.DeletedByRetention)
	}
	wantGone(t, h, ids, "short")
	wantKept(t, h, ids, "plain", "long", "forever")

	clock.Advance(time.Hour)
	obs.next(t)
	wantGone(t, h, ids, "plain")
	wantKept(t, h, ids, "long", "forever")

	clock.Advance(30 * 24 * time.Hour)
	obs.next(t)
	wantGone(t, h, ids, "long")
	// Each sweep deleted what was due: forever, never stamped, was never
	// due.
	clock.Advance(200 * 365 * 24 * time.Hour)
	h.save("name: later\nretention: 1s\nsteps: [{id: a, set: {x: 1}}]")
	later := h.finish("later", nil)
	clock.Advance(time.Minute)
	obs.next(t)
	wantGone(t, h, map[string]string{"later": later.ID}, "later")
	wantKept(t, h, ids, "forever")
}

// TestRetentionZeroKeepsForever: with the engine's retention 0 (the zero
// Config's), finished instances are kept unless their workflow sets a
// retention.
func TestRetentionZeroKeepsForever(t *testing.T) {
	t.Parallel()
	clock := &jumpClock{}
	obs := deletions{ch: make(chan string, 10)}
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", Now: clock.Now, Observer: obs, RetentionInterval: 5 * time.Millisecond}))
	ids := finishAll(t, h, clock, map[string]time.Duration{"short": time.Minute, "long": 30 * 24 * time.Hour})
	clock.Advance(31 * 24 * time.Hour)
	obs.next(t)
	obs.next(t)
	wantGone(t, h, ids, "short", "long")
	wantKept(t, h, ids, "plain", "forever")
}

// TestDeleteIsObserved: a deletion on request is counted as such.
func TestDeleteIsObserved(t *testing.T) {
	t.Parallel()
	obs := deletions{ch: make(chan string, 10)}
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", Observer: obs}))
	h.save(retentionWorkflows["plain"])
	inst := h.finish("plain", nil)
	if err := h.e.Delete(context.Background(), inst.ID, weft.Operation{}); err != nil {
		t.Fatal(err)
	}
	if r := obs.next(t); r != engine.DeletedOnRequest {
		t.Errorf("deleted for %q, want %q", r, engine.DeletedOnRequest)
	}
}

// TestRetentionConfig: a negative retention, one over the definition's
// limit, and a batch the store cannot answer in one page are refused.
func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []engine.Config{
		{Retention: -time.Second},
		{Retention: 101 * 365 * 24 * time.Hour},
		{RetentionBatch: weft.MaxListLimit + 1},
		{RetentionBatch: -1},
		{RetentionInterval: -time.Second},
	} {
		if _, err := engine.New(cfg, nil, nil, nil, nil); err == nil {
			t.Errorf("New(%+v) accepted it", cfg)
		}
	}
}

// TestImportOfAFinishedInstance: a finished instance imported with a
// delete_after keeps it; one exported without (by a host that kept
// instances forever) gets this host's retention from the import.
func TestImportOfAFinishedInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", Retention: time.Hour}))
	h.save(retentionWorkflows["plain"])
	ctx := context.Background()
	inst := h.finish("plain", nil)
	exported, err := h.e.Export(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	kept := inst.DeleteAfter.Add(time.Minute)
	exported.Instance.DeleteAfter = kept
	got, _, err := h.e.Import(ctx, exported, engine.ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if !got.DeleteAfter.Equal(kept) {
		t.Errorf("imported with delete_after %s, kept %s, want it kept", kept, got.DeleteAfter)
	}

	exported.Instance.DeleteAfter = time.Time{}
	before := time.Now()
	got, _, err = h.e.Import(ctx, exported, engine.ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.DeleteAfter.Before(before.Add(time.Hour)) || got.DeleteAfter.After(time.Now().Add(time.Hour)) {
		t.Errorf("imported without delete_after, got %s, want the import's time plus 1h", got.DeleteAfter)
	}
}

// failingFirst is the engine's Plugins: its first call fails, as a
// service that was down does, and the rest reach the real runtime.
type failingFirst struct {
	inner engine.Plugins
	calls atomic.Int32
}

func (f *failingFirst) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	if f.calls.Add(1) == 1 {
		return nil, &call.GuestError{Code: "down", Message: "the service is down"}
	}
	return f.inner.Invoke(ctx, version, c)
}

// TestRetriedInstanceIsKeptForItsRetentionFromItsNewFinish: an instance
// retried shortly before its retention ran out is kept for the whole
// retention after the retry finishes it, not until the first failure's
// time; the store's index says so too. On both stores.
func TestRetriedInstanceIsKeptForItsRetentionFromItsNewFinish(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"bolt", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			clock := &jumpClock{}
			obs := deletions{ch: make(chan string, 10)}
			opts := []hostOption{
				withConfig(engine.Config{NodeID: "n1", Now: clock.Now, Observer: obs, Retention: time.Hour, RetentionInterval: 5 * time.Millisecond}),
				withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return &failingFirst{inner: p} }),
			}
			if backend == "redis" {
				opts = append(opts, withRedisStore())
			}
			h := newHost(t, opts...)
			h.save("name: again\nsteps: [{id: a, activity: kit.echo, input: 1, retry: {max_attempts: 1}}]")
			ctx := context.Background()
			failed := h.finish("again", nil)
			if failed.Status != weft.StatusFailed || failed.DeleteAfter.IsZero() {
				t.Fatalf("first run: %s, delete_after %s; want failed, with a delete_after", failed.Status, failed.DeleteAfter)
			}

			// A minute before its retention runs out, it is retried.
			clock.Advance(59 * time.Minute)
			retried := clock.Now()
			if err := h.e.Retry(ctx, failed.ID, weft.Operation{Reason: "the service is back"}); err != nil {
				t.Fatal(err)
			}
			done := completedAfterRetry(t, h, failed.ID)
			if done.DeleteAfter.Before(retried.Add(time.Hour)) || done.DeleteAfter.After(clock.Now().Add(time.Hour)) {
				t.Errorf("completed by the retry with delete_after %s, want its finish plus 1h (after %s); the failure's was %s",
					done.DeleteAfter, retried.Add(time.Hour), failed.DeleteAfter)
			}
			// The index agrees: not due when the failure's time has passed,
			// due an hour after the retry.
			if ids, err := h.store.ExpiredInstances(ctx, failed.DeleteAfter.Add(time.Minute), 10); err != nil || len(ids) != 0 {
				t.Errorf("due after the failure's retention: %v, %v; want none", ids, err)
			}
			if ids, err := h.store.ExpiredInstances(ctx, done.DeleteAfter, 10); err != nil || len(ids) != 1 || ids[0] != failed.ID {
				t.Errorf("due at the new delete_after: %v, %v; want [%s]", ids, err, failed.ID)
			}

			// Past the failure's time it is kept; past the new one, deleted.
			clock.Advance(2 * time.Minute)
			h.save("name: marker\nretention: 1s\nsteps: [{id: a, set: {x: 1}}]")
			marker := h.finish("marker", nil)
			clock.Advance(time.Minute)
			obs.next(t) // the marker: every sweep since saw the retried instance too
			wantGone(t, h, map[string]string{"marker": marker.ID}, "marker")
			wantKept(t, h, map[string]string{"again": failed.ID}, "again")
			clock.Advance(time.Hour)
			obs.next(t)
			wantGone(t, h, map[string]string{"again": failed.ID}, "again")
		})
	}
}

// TestStaleRetryIsIgnored: a retry message of an earlier failure (sent
// before a retry that ran, say) that sits in the inbox when a retry is
// applied is recorded as ignored, not applied a second time.
func TestStaleRetryIsIgnored(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return &failingFirst{inner: p} }))
	h.save("name: again\nsteps: [{id: a, activity: kit.echo, input: 1, retry: {max_attempts: 1}}]")
	ctx := context.Background()
	failed := h.finish("again", nil)
	if failed.Status != weft.StatusFailed {
		t.Fatalf("first run: %s, want failed", failed.Status)
	}
	stale := weft.Message{InstanceID: failed.ID, ID: "retry:stale", Kind: weft.MessageRetry, Payload: json.RawMessage(`{"reason":"old","seq":99999}`)}
	if _, err := h.store.Deliver(ctx, nil, []weft.Message{stale}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.Retry(ctx, failed.ID, weft.Operation{Reason: "the service is back"}); err != nil {
		t.Fatal(err)
	}
	done := completedAfterRetry(t, h, failed.ID)
	var types []weft.HistoryType
	for _, e := range h.history(done.ID) {
		types = append(types, e.Type)
	}
	if n := slices.Index(types, weft.HistoryInstanceRetried); n < 0 || slices.Index(types[n+1:], weft.HistoryInstanceRetried) >= 0 {
		t.Errorf("history %v: want one instance_retried", types)
	}
	if !slices.Contains(types, weft.HistoryEventIgnored) {
		t.Errorf("history %v: want the stale retry recorded as event_ignored", types)
	}
}

// completedAfterRetry polls a retried instance until it completes: it is
// still failed until the retry runs, so a wait (which ends at a terminal
// status) would answer at once.
func completedAfterRetry(t *testing.T, h *host, id string) *weft.Instance {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := h.store.GetInstance(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == weft.StatusCompleted {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the retry the instance is %s after 30s", got.Status)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// TestStaleRetryOfAFinishedInstanceIsRecorded: a retry message of an
// earlier failure that reaches a failed instance alone (its run settles
// the inbox of a finished instance) is recorded as ignored, with who
// asked, as a running instance records it.
func TestStaleRetryOfAFinishedInstanceIsRecorded(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return &failingFirst{inner: p} }))
	h.save("name: again\nsteps: [{id: a, activity: kit.echo, input: 1, retry: {max_attempts: 1}}]")
	ctx := context.Background()
	failed := h.finish("again", nil)
	if failed.Status != weft.StatusFailed {
		t.Fatalf("first run: %s, want failed", failed.Status)
	}
	stale := weft.Message{InstanceID: failed.ID, ID: "retry:stale", Kind: weft.MessageRetry,
		Payload: json.RawMessage(`{"reason":"old","seq":99999}`), Op: &weft.Operation{Actor: "alice"}}
	if _, err := h.store.Deliver(ctx, nil, []weft.Message{stale}); err != nil {
		t.Fatal(err)
	}
	// Its run is the recovery sweep's, for an inbox that waits.
	deadline := time.Now().Add(time.Minute)
	for {
		msgs, err := h.store.Inbox(ctx, failed.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stale retry is still in the inbox after a minute: %+v", msgs)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	var ignored []weft.HistoryEntry
	for _, e := range h.history(failed.ID) {
		if e.Type == weft.HistoryEventIgnored {
			ignored = append(ignored, e)
		}
	}
	if len(ignored) != 1 || ignored[0].Actor != "alice" || !strings.Contains(string(ignored[0].Data), "earlier failure") {
		t.Fatalf("event_ignored entries %+v: want one, by alice, saying it retries an earlier failure", ignored)
	}
	if inst, err := h.store.GetInstance(ctx, failed.ID); err != nil || inst.Status != weft.StatusFailed {
		t.Fatalf("the instance after the stale retry: %v, %v; want failed still", inst, err)
	}
}
