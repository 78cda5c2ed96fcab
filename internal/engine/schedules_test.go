package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/schedule"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
)

// fakeClock is a clock the test moves; the engine's sweeps tick on real
// time and read it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// t0 is where the schedule tests' clocks start: a whole hour.
var t0 = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

// holdFlow waits for a release of its run (event release, keyed by the
// run's nominal time), then completes, or fails when the release says so:
// a run outlives the schedule's interval as long as the test wants.
const holdFlow = `
name: hold
steps:
  - id: held
    wait: { event: release, key: "${ input.at }" }
    output: release
  - id: maybe-fail
    if: "${ vars.release.fail == true }"
    then:
      - { id: failing, fail: { code: told, message: "told to fail" } }
output: "${ input.at }"
`

// schedHost is an engine with a fake clock and the hold workflow.
type schedHost struct {
	*host
	clock *fakeClock
}

func newSchedHost(t *testing.T, opts ...hostOption) *schedHost {
	t.Helper()
	clock := &fakeClock{now: t0}
	opts = append([]hostOption{withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, ScheduleInterval: 10 * time.Millisecond, Now: clock.Now})}, opts...)
	h := &schedHost{host: newHost(t, opts...), clock: clock}
	h.save(holdFlow)
	return h
}

// put saves a schedule of hold, every minute, with the policy given as
// YAML flow mapping fields.
func (h *schedHost) put(id, policy string) {
	h.t.Helper()
	doc := fmt.Sprintf("id: %s\nworkflow: hold\ninput: {at: '${ schedule.time }'}\nspec: {every: 1m}\npolicy: {%s}\n", id, policy)
	if _, _, _, err := h.e.SaveSchedule(context.Background(), []byte(doc), "", "test"); err != nil {
		h.t.Fatalf("SaveSchedule: %v", err)
	}
}

// run is the instance id of the run of schedule id at minute m past t0.
func run(id string, m int) string {
	return schedule.InstanceID(id, t0.Add(time.Duration(m)*time.Minute))
}

// minute moves the clock to minute m past t0 and waits until the sweep
// has stepped the schedule at that time (its wake is past the clock).
func (h *schedHost) minute(id string, m int) {
	h.t.Helper()
	h.at(id, t0.Add(time.Duration(m)*time.Minute))
}

// at moves the clock to now and waits until the sweep has stepped the
// schedule at that time.
func (h *schedHost) at(id string, now time.Time) {
	h.t.Helper()
	h.clock.set(now)
	h.eventually(fmt.Sprintf("schedule %s stepped at %s", id, now.Format(time.TimeOnly)), func() bool {
		s, err := h.store.GetSchedule(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		return s.Wake.IsZero() || s.Wake.After(now)
	})
}

// eventually polls cond until it holds, failing the test after a deadline.
func (h *schedHost) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
}

// release ends the run of minute m (failing it when fail is set) and
// waits until it has ended.
func (h *schedHost) release(id string, m int, fail bool) {
	h.t.Helper()
	at := t0.Add(time.Duration(m) * time.Minute).Format(time.RFC3339)
	h.eventually(fmt.Sprintf("run of minute %d waits for its release", m), func() bool {
		in, err := h.store.GetInstance(context.Background(), run(id, m))
		return err == nil && in.Status == weft.StatusSuspended
	})
	if _, err := h.e.Signal(context.Background(), weft.Event{Name: "release", Key: at, Payload: json.RawMessage(fmt.Sprintf(`{"fail": %v}`, fail))}); err != nil {
		h.t.Fatalf("release of minute %d: %v", m, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.e.WaitFinished(ctx, run(id, m)); err != nil {
		h.t.Fatalf("run of minute %d did not end: %v", m, err)
	}
}

// runs lists the minutes whose runs of schedule id exist, with their
// status.
func (h *schedHost) runs(id string) []string {
	h.t.Helper()
	items, _, err := h.store.ListInstances(context.Background(), weft.InstanceFilter{Workflow: "hold", Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, in := range items {
		n, ok := schedule.Nominal(id, in.ID)
		if !ok {
			continue
		}
		status := string(in.Status)
		if !in.Status.Terminal() {
			status = "open" // pending or suspended, as the run's timing has it
		}
		out = append(out, fmt.Sprintf("%d:%s", int(n.Sub(t0)/time.Minute), status))
	}
	slices.Sort(out)
	return out
}

// events lists the types of schedule id's events after the first
// (created), with the reason of skips.
func (h *schedHost) events(id string) []string {
	h.t.Helper()
	evs, err := h.store.ScheduleEvents(context.Background(), id, 1, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		s := string(e.Type)
		if e.Type == weft.ScheduleSkipped {
			var d struct{ Skipped []schedule.Skip }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				h.t.Fatal(err)
			}
			for _, sk := range d.Skipped {
				s += " " + string(sk.Reason)
			}
		}
		out = append(out, s)
	}
	return out
}

// TestSchedulePolicies runs each overlap policy, pause on failure and the
// run limit through the engine with a workflow that outlives the
// schedule's interval.
func TestSchedulePolicies(t *testing.T) {
	t.Parallel()
	type step struct {
		minute  int  // move the clock to this minute and let the sweep run
		release int  // or, when > 0, release the run of this minute
		fail    bool // failing it
	}
	tests := []struct {
		name, policy string
		steps        []step
		runs         []string // minute:status of every run at the end
		events       []string
	}{
		{"skip", "overlap: skip", []step{{minute: 1}, {minute: 2}, {release: 1}, {minute: 3}},
			[]string{"1:completed", "3:open"},
			[]string{"run_started", "skipped overlap", "run_ended", "run_started"}},
		{"buffer one", "overlap: buffer_one", []step{{minute: 1}, {minute: 2}, {minute: 3}, {release: 1}, {minute: 4}},
			[]string{"1:completed", "2:open"},
			[]string{"run_started", "skipped buffer_full", "run_ended", "run_started"}},
		{"buffer all", "overlap: buffer_all", []step{{minute: 1}, {minute: 2}, {minute: 3}, {release: 1}, {minute: 4}},
			[]string{"1:completed", "2:open"},
			[]string{"run_started", "run_ended", "run_started"}},
		{"cancel other", "overlap: cancel_other", []step{{minute: 1}, {minute: 2}},
			[]string{"1:cancelled", "2:open"},
			[]string{"run_started", "run_cancelled", "run_ended", "run_started"}},
		{"allow all", "overlap: allow_all", []step{{minute: 1}, {minute: 2}, {release: 1}},
			[]string{"1:completed", "2:open"},
			[]string{"run_started", "run_started"}},
		{"pause on failure", "pause_on_failure: true", []step{{minute: 1}, {release: 1, fail: true}, {minute: 2}, {minute: 3}},
			[]string{"1:failed"},
			[]string{"run_started", "run_ended", "paused"}},
		{"max runs", "max_runs: 2", []step{{minute: 1}, {release: 1}, {minute: 2}, {release: 2}, {minute: 3}, {minute: 4}},
			[]string{"1:completed", "2:completed"},
			[]string{"run_started", "run_ended", "run_started", "run_ended"}},
	}
	for _, tt := range tests {
		for _, backend := range []string{"embedded", "redis"} {
			t.Run(tt.name+" "+backend, func(t *testing.T) {
				t.Parallel()
				var opts []hostOption
				if backend == "redis" {
					opts = append(opts, withRedisStore())
				}
				h := newSchedHost(t, opts...)
				id := strings.ReplaceAll(tt.name, " ", "-")
				h.put(id, tt.policy)
				for _, s := range tt.steps {
					if s.release > 0 {
						h.release(id, s.release, s.fail)
						continue
					}
					h.minute(id, s.minute)
				}
				// The last releases and cancels end in their own time, and the
				// sweep sees them a run check or a settle later: move the clock
				// on within the minute until it has.
				end := h.clock.Now().Truncate(time.Minute).Add(59 * time.Second)
				var runs, events []string
				for now := h.clock.Now(); !now.After(end); now = now.Add(time.Second) {
					h.clock.set(now)
					h.eventually("the sweep", func() bool {
						s, err := h.store.GetSchedule(context.Background(), id)
						return err == nil && (s.Wake.IsZero() || s.Wake.After(now))
					})
					if runs, events = h.runs(id), h.events(id); slices.Equal(runs, tt.runs) && slices.Equal(events, tt.events) {
						return
					}
				}
				t.Errorf("runs %v, want %v", runs, tt.runs)
				t.Errorf("events %v, want %v", events, tt.events)
			})
		}
	}
}

// TestScheduleCatchUp: after five minutes without a sweep (every node
// down), a schedule with a ten-minute catch-up window runs each missed
// fire once; one with the default window of a minute records the older
// ones as missed.
func TestScheduleCatchUp(t *testing.T) {
	t.Parallel()
	h := newSchedHost(t)
	h.put("wide", "overlap: allow_all, catch_up_window: 10m")
	h.put("narrow", "overlap: allow_all")
	for _, id := range []string{"wide", "narrow"} {
		h.at(id, t0.Add(5*time.Minute+30*time.Second))
	}
	if got, want := h.runs("wide"), []string{"1:open", "2:open", "3:open", "4:open", "5:open"}; !slices.Equal(got, want) {
		t.Errorf("wide window: runs %v, want %v", got, want)
	}
	if got, want := h.runs("narrow"), []string{"5:open"}; !slices.Equal(got, want) {
		t.Errorf("narrow window: runs %v, want %v", got, want)
	}
	if got := h.events("narrow"); !slices.Equal(got, []string{"run_started", "skipped missed"}) {
		t.Errorf("narrow window: events %v", got)
	}
	// Another sweep a little later starts nothing again.
	h.at("wide", t0.Add(5*time.Minute+40*time.Second))
	if got := h.runs("wide"); len(got) != 5 {
		t.Errorf("after a second sweep: runs %v", got)
	}
}

// TestScheduleStartFailsVisibly: a fire whose workflow is gone, or whose
// input does not evaluate, is recorded on the schedule, which goes on
// firing.
func TestScheduleStartFailsVisibly(t *testing.T) {
	t.Parallel()
	h := newSchedHost(t)
	h.save("name: brief\nsteps: [{id: s, set: {x: 1}}]\n")
	for _, doc := range []string{
		"id: orphan\nworkflow: brief\nspec: {every: 1m}\n",
		"id: bad-input\nworkflow: hold\ninput: {at: '${ schedule.time.nope }'}\nspec: {every: 1m}\n",
	} {
		if _, _, _, err := h.e.SaveSchedule(context.Background(), []byte(doc), "", "test"); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.e.DeleteDefinition(context.Background(), "brief"); err != nil {
		t.Fatal(err)
	}
	for m := 1; m <= 2; m++ {
		h.minute("orphan", m)
		h.minute("bad-input", m)
	}
	for _, id := range []string{"orphan", "bad-input"} {
		if got := h.events(id); !slices.Equal(got, []string{"start_failed", "start_failed"}) {
			t.Errorf("%s: events %v, want two failed starts", id, got)
		}
		evs, err := h.store.ScheduleEvents(context.Background(), id, 1, 1)
		if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"error"`) {
			t.Errorf("%s: the failed start does not say why: %v %v", id, evs, err)
		}
	}
}

// TestSaveScheduleRefuses: a schedule of a workflow that does not exist,
// or that never fires again, is refused with the field at fault; saving
// the same document twice changes nothing.
func TestSaveScheduleRefuses(t *testing.T) {
	t.Parallel()
	h := newSchedHost(t)
	for _, tt := range []struct{ doc, path string }{
		{"id: a\nworkflow: nowhere\nspec: {every: 1m}\n", "workflow"},
		{"id: a\nworkflow: hold\nspec: {every: 1m, end: '2020-01-01T00:00:00Z'}\n", "spec"},
		{"id: a\nworkflow: hold\nspec: {every: 1m}\npolicy: {overlap: often}\n", "policy.overlap"},
	} {
		_, _, _, err := h.e.SaveSchedule(context.Background(), []byte(tt.doc), "", "test")
		var e *weft.ScheduleError
		if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) || e.Problems[0].Path != tt.path {
			t.Errorf("SaveSchedule(%q) = %v, want a problem at %s", tt.doc, err, tt.path)
		}
	}
	doc := []byte("id: a\nworkflow: hold\nspec: {every: 1m}\n")
	_, created, changed, err := h.e.SaveSchedule(context.Background(), doc, "", "test")
	if err != nil || !created || !changed {
		t.Fatalf("first save: created %v changed %v, %v", created, changed, err)
	}
	s, created, changed, err := h.e.SaveSchedule(context.Background(), []byte(`{"id":"a","workflow":"hold","spec":{"every":"60s"}}`), "", "test")
	if err != nil || created || changed || s.Revision != 1 {
		t.Errorf("the same schedule again: created %v changed %v revision %d, %v", created, changed, s.Revision, err)
	}
}

// TestScheduleRestartCatchesUp: a host stopped for five minutes, its
// schedule firing every minute with a ten-minute catch-up window, runs
// each missed fire once when it starts again: a new engine on the same
// store, with nothing of the first in memory.
func TestScheduleRestartCatchesUp(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: t0}
	st := openStore(t)
	rt := testplugins.Runtime(t, plugins.Config{})
	start := func() (stop func()) {
		e, err := engine.New(engine.Config{NodeID: "n1", ScheduleInterval: 10 * time.Millisecond, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)},
			st, local.New(local.Config{}), memqueue.New(1000), rt)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = e.Run(ctx); close(done) }()
		h := &schedHost{host: &host{t: t, e: e, store: st}, clock: clock}
		if _, err := st.GetDefinition(context.Background(), "hold", 0); err != nil {
			h.save(holdFlow)
			h.put("nightly", "overlap: allow_all, catch_up_window: 10m")
		}
		return func() { cancel(); <-done }
	}
	stop := start()
	clock.set(t0.Add(time.Minute))
	h := &schedHost{host: &host{t: t, store: st}, clock: clock}
	h.eventually("the first run", func() bool { return slices.Equal(h.runs("nightly"), []string{"1:open"}) })
	stop()

	clock.set(t0.Add(6*time.Minute + 30*time.Second)) // five minutes and a half later
	stop = start()
	defer stop()
	want := []string{"1:open", "2:open", "3:open", "4:open", "5:open", "6:open"}
	// The runs are created before the schedule's record says so.
	h.eventually("the missed runs, recorded", func() bool {
		return slices.Equal(h.runs("nightly"), want) && slices.Equal(h.events("nightly"), slices.Repeat([]string{"run_started"}, len(want)))
	})
}

// TestScheduleNoteBounded: a pause's note is kept with the schedule and in
// every event of its record, so a long one is refused, naming the field.
func TestScheduleNoteBounded(t *testing.T) {
	t.Parallel()
	h := newSchedHost(t)
	h.put("noted", "overlap: skip")
	for _, f := range []func(context.Context, string, string, string) (*weft.Schedule, error){h.e.PauseSchedule, h.e.UnpauseSchedule} {
		_, err := f(context.Background(), "noted", strings.Repeat("x", engine.MaxScheduleNote+1), "test")
		var e *weft.ScheduleError
		if !errors.As(err, &e) || e.Problems[0].Path != "note" {
			t.Errorf("a long note: %v, want a problem at note", err)
		}
	}
	if _, err := h.e.PauseSchedule(context.Background(), "noted", strings.Repeat("x", engine.MaxScheduleNote), "test"); err != nil {
		t.Errorf("a note of the bound: %v", err)
	}
}

// pauseFirst is a store whose first write of a schedule's run_started
// lets an operator's pause of it come first, as one sent at that moment
// would: the write then conflicts, and the step decides again.
type pauseFirst struct {
	store.Store
	mu     sync.Mutex
	pause  func() // set once the engine exists
	paused bool
}

func (s *pauseFirst) UpdateSchedule(ctx context.Context, sc *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	s.mu.Lock()
	first := !s.paused && s.pause != nil && slices.ContainsFunc(events, func(e weft.ScheduleEvent) bool { return e.Type == weft.ScheduleRunStarted })
	if first {
		s.paused = true
	}
	s.mu.Unlock()
	if first {
		s.pause()
	}
	return s.Store.UpdateSchedule(ctx, sc, events)
}

// TestScheduleRunStartedAcrossAPause: a fire's run started by a step whose
// write lost to an operator's pause is still recorded, once, and tracked:
// its end is recorded too, and unpausing does not count it as skipped.
func TestScheduleRunStartedAcrossAPause(t *testing.T) {
	t.Parallel()
	ps := &pauseFirst{}
	h := newSchedHost(t, withStore(func(s store.Store) store.Store { ps.Store = s; return ps }))
	h.put("nightly", "overlap: allow_all")
	ps.mu.Lock()
	ps.pause = func() {
		if _, err := h.e.PauseSchedule(context.Background(), "nightly", "the operator's", "test"); err != nil {
			t.Errorf("PauseSchedule: %v", err)
		}
	}
	ps.mu.Unlock()
	h.minute("nightly", 1)
	h.eventually("the run of minute 1, recorded", func() bool {
		return slices.Equal(h.runs("nightly"), []string{"1:open"}) && slices.Equal(h.events("nightly"), []string{"paused", "run_started"})
	})
	h.release("nightly", 1, false)
	// The step that adopted the run looks again a second later.
	h.at("nightly", t0.Add(61*time.Second))
	h.eventually("its end, recorded", func() bool {
		return slices.Equal(h.events("nightly"), []string{"paused", "run_started", "run_ended"})
	})
	h.clock.set(t0.Add(90 * time.Second))
	if _, err := h.e.UnpauseSchedule(context.Background(), "nightly", "", "test"); err != nil {
		t.Fatal(err)
	}
	if got := h.events("nightly"); !slices.Equal(got, []string{"paused", "run_started", "run_ended", "unpaused"}) {
		t.Errorf("events = %v; the unpause skipped the run's fire again", got)
	}
}
