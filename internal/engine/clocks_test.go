package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
)

// slowBlobs is a blob store whose reads take delay: the version's first
// call waits that long for it to load, as it waits for a compile on a node
// that has not compiled it yet.
type slowBlobs struct {
	plugins.Blobs
	delay time.Duration
}

func (s slowBlobs) Get(ctx context.Context, hash string) ([]byte, error) {
	t := time.NewTimer(s.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Blobs.Get(ctx, hash)
}

// recorded is what the engine handed the runtime for one call.
type recorded struct {
	activity string
	timeout  time.Duration
	deadline time.Time // the context's; zero when it has none
	err      error     // what the runtime returned
}

// recorder is the engine's Plugins: it records each call and passes it on.
type recorder struct {
	inner  engine.Plugins
	mu     sync.Mutex
	calls  []recorded
	called chan struct{} // closed when the first call starts
	ended  chan struct{} // and when it returns
}

func (r *recorder) Invoke(ctx context.Context, version string, call call.Call) ([]byte, error) {
	c := recorded{activity: call.Activity, timeout: call.Timeout}
	c.deadline, _ = ctx.Deadline()
	r.mu.Lock()
	i := len(r.calls)
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if i == 0 {
		close(r.called)
	}
	out, err := r.inner.Invoke(ctx, version, call)
	r.mu.Lock()
	r.calls[i].err = err
	r.mu.Unlock()
	if i == 0 {
		close(r.ended)
	}
	return out, err
}

func (r *recorder) recorded() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.calls...)
}

// slowHost is an engine whose plugin runtime takes load to load the kit
// plugin at its first call, with a heartbeat scheduler that visits every
// attempt every 50ms: whatever it counts while the version loads, it sees.
type slowHost struct {
	*host
	calls *recorder
}

func newSlowHost(t *testing.T, load time.Duration) *slowHost {
	t.Helper()
	ctx := context.Background()
	st := openStore(t)
	files, err := blobfile.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kit := testplugins.Bytes(t, "kit")
	version := plugins.Hash(kit)
	if err := files.Put(ctx, version, kit); err != nil {
		t.Fatal(err)
	}
	rt, err := plugins.New(ctx, plugins.Config{CacheDir: testplugins.CacheDir(t), CancelGrace: 100 * time.Millisecond},
		slowBlobs{Blobs: files, delay: load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	acts := []string{"echo", "work", "spin"}
	if _, err := st.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: version, Size: int64(len(kit)), Activities: acts}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{inner: rt, called: make(chan struct{}), ended: make(chan struct{})}
	e, err := engine.New(engine.Config{
		NodeID: "n1", TimerInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 50 * time.Millisecond},
	}, st, local.New(local.Config{}), memqueue.New(10), rec)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	return &slowHost{host: &host{t: t, e: e, store: st}, calls: rec}
}

// failure returns the kind and code of an instance's activity_failed
// events.
func failures(t *testing.T, evs []weft.HistoryEntry) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		if ev.Type != "activity_failed" {
			continue
		}
		var d struct{ Kind, Code string }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Kind+"/"+d.Code)
	}
	return out
}

// An attempt's start-to-close timeout and heartbeat timeout count from
// when its guest starts running: a first call that waits two seconds for
// the version to load still has its whole 1.5s, and a second between
// heartbeats. Before, both ran from the call, and the load alone timed the
// attempt out. (The margins are wide: a race-detector build on a loaded
// machine can starve a guest for hundreds of milliseconds.)
func TestAttemptClocksStartWhenTheGuestRuns(t *testing.T) {
	t.Parallel()
	h := newSlowHost(t, 6*time.Second)
	h.save(`
name: loaded
steps:
  - id: work
    activity: kit.work
    input: { ms: 300, beat_ms: 50 }
    timeout: 5s
    heartbeat_timeout: 4s
    retry: { max_attempts: 1 }
    output: work
output: "${ vars.work.done_ms }"
`)
	inst := h.finish("loaded", nil)
	if inst.Status != weft.StatusCompleted || string(inst.Output) != "300" {
		t.Fatalf("instance %s output %s error %+v, failures %v", inst.Status, inst.Output, inst.Error, failures(t, h.history(inst.ID)))
	}
	calls := h.calls.recorded()
	if len(calls) != 1 || calls[0].timeout != 5*time.Second || !calls[0].deadline.IsZero() {
		t.Fatalf("calls %+v: want one, with Timeout 5s and no context deadline", calls)
	}
}

// A guest that runs past its start-to-close timeout is still stopped and
// its attempt failed as a timeout: counted from when it started, after
// the load.
func TestAttemptThatRunsTooLongTimesOut(t *testing.T) {
	t.Parallel()
	const load, timeout = 500 * time.Millisecond, 300 * time.Millisecond
	h := newSlowHost(t, load)
	h.save(`
name: stuck
steps:
  - { id: forever, activity: kit.spin, timeout: 300ms, retry: { max_attempts: 1 } }
`)
	start := time.Now()
	inst := h.finish("stuck", nil)
	took := time.Since(start)
	if inst.Status != weft.StatusFailed || inst.Error == nil || inst.Error.Code != "timeout" {
		t.Fatalf("instance %s error %+v, want failed with timeout", inst.Status, inst.Error)
	}
	if got := failures(t, h.history(inst.ID)); len(got) != 1 || got[0] != "timeout/timeout" {
		t.Fatalf("failures %v, want one timeout", got)
	}
	if took < load+timeout {
		t.Errorf("the attempt timed out %s after the start; its guest was not given its %s after the %s load", took, timeout, load)
	}
	if calls := h.calls.recorded(); len(calls) != 1 || calls[0].timeout != timeout {
		t.Fatalf("calls %+v: want one with Timeout %s", calls, timeout)
	}
}

// A step without a timeout gets the engine's ActivityTimeout as its
// start-to-close; a schedule_to_close deadline, absolute, is the context's.
func TestScheduleToCloseIsTheCallsDeadline(t *testing.T) {
	t.Parallel()
	h := newSlowHost(t, 0)
	h.save(`
name: bounded
steps:
  - { id: e, activity: kit.echo, input: 1, schedule_to_close: 1m }
`)
	before := time.Now()
	inst := h.finish("bounded", nil)
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", inst.Status, inst.Error)
	}
	calls := h.calls.recorded()
	if len(calls) != 1 || calls[0].timeout != 10*time.Minute {
		t.Fatalf("calls %+v: want one with the default Timeout of 10m", calls)
	}
	if d := calls[0].deadline; d.Before(before) || d.After(time.Now().Add(time.Minute)) {
		t.Fatalf("the call's deadline is %s; want the schedule-to-close deadline, a minute after the start at %s", d, before)
	}
}

// An attempt cancelled while its version loads still ends as cancelled:
// the guest sees the cancellation when it starts.
func TestAttemptCancelledWhileItsVersionLoads(t *testing.T) {
	t.Parallel()
	h := newSlowHost(t, time.Second)
	h.save(`
name: long
steps:
  - { id: w, activity: kit.work, input: { ms: 60000, beat_ms: 20 }, heartbeat_timeout: 2s }
`)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	select {
	case <-h.calls.called:
	case <-wctx.Done():
		t.Fatal("the activity was not called within 30s")
	}
	if _, err := h.e.Cancel(ctx, inst.ID, weft.Operation{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	got, err := h.e.WaitFinished(wctx, inst.ID)
	if err != nil || got.Status != weft.StatusCancelled {
		t.Fatalf("WaitFinished = %+v, %v; want cancelled", got, err)
	}
	select {
	case <-h.calls.ended:
	case <-wctx.Done():
		t.Fatal("the cancelled attempt did not end within 30s")
	}
	if calls := h.calls.recorded(); len(calls) != 1 || classify.Cause(calls[0].err).Kind != retry.KindCancelled {
		t.Fatalf("calls %+v: want one, cancelled", calls)
	}
}

// A guest that goes silent is still timed out by its heartbeat timeout,
// counted from its last beat, after the load.
func TestSilentGuestAfterASlowLoadTimesOut(t *testing.T) {
	t.Parallel()
	const load, silence = time.Second, 300 * time.Millisecond
	h := newSlowHost(t, load)
	h.save(`
name: stalling
steps:
  - id: work
    activity: kit.work
    input: { ms: 60000, beat_ms: 20, stall_at_ms: 100 }
    heartbeat_timeout: 300ms
    retry: { max_attempts: 1 }
`)
	start := time.Now()
	inst := h.finish("stalling", nil)
	took := time.Since(start)
	if got := failures(t, h.history(inst.ID)); inst.Status != weft.StatusFailed || len(got) != 1 || got[0] != "heartbeat_timeout/heartbeat_timeout" {
		t.Fatalf("instance %s, failures %v; want one heartbeat_timeout", inst.Status, got)
	}
	if took < load+silence {
		t.Errorf("the attempt timed out %s after the start, before its guest could have been silent for %s after the %s load", took, silence, load)
	}
}
