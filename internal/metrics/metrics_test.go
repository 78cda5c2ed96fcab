package metrics_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

func newMetrics(t *testing.T) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// value returns the value of the one series of family with labels (all
// of them, as name=value pairs), or fails.
func value(t *testing.T, reg *prometheus.Registry, family string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", family, labels)
	return 0
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	t.Parallel()
	_, reg := newMetrics(t)
	if _, err := metrics.New(reg); err == nil || !strings.Contains(err.Error(), "metrics: registering") {
		t.Fatalf("second New: %v", err)
	}
	if _, err := metrics.New(nil); err != nil {
		t.Fatalf("New(nil): %v", err)
	}
}

// TestObserver: the engine's Observer calls become transitions and step
// latencies.
func TestObserver(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	var obs engine.Observer = m
	obs.InstanceStatus("greet", weft.StatusRunning)
	obs.InstanceStatus("greet", weft.StatusCompleted)
	obs.InstanceStatus("greet", weft.StatusCompleted)
	obs.StepFinished("greet", "up", "completed", 3*time.Millisecond)
	obs.InstancesDeleted(engine.DeletedByRetention, 500)
	obs.InstancesDeleted(engine.DeletedByRetention, 2)
	obs.InstancesDeleted(engine.DeletedOnRequest, 1)
	if v := value(t, reg, "weft_instance_transitions_total", "workflow", "greet", "status", "completed"); v != 2 {
		t.Fatalf("completed transitions = %v", v)
	}
	if v := value(t, reg, "weft_step_duration_seconds", "workflow", "greet", "step", "up", "outcome", "completed"); v != 1 {
		t.Fatalf("step samples = %v", v)
	}
	if v := value(t, reg, "weft_instances_deleted_total", "reason", "retention"); v != 502 {
		t.Fatalf("instances deleted by retention = %v, want 502", v)
	}
	if v := value(t, reg, "weft_instances_deleted_total", "reason", "request"); v != 1 {
		t.Fatalf("instances deleted on request = %v, want 1", v)
	}
	obs.ScheduleFired("scheduled", true, 30*time.Millisecond)
	obs.ScheduleFired("scheduled", true, 2*time.Second)
	obs.ScheduleFired("trigger", true, 0)
	obs.ScheduleFired("scheduled", false, 0)
	obs.SchedulesSkipped("missed", 1000)
	obs.SchedulesSkipped("overlap", 1)
	if v := value(t, reg, "weft_schedule_fires_total", "kind", "scheduled", "outcome", "started"); v != 2 {
		t.Fatalf("scheduled fires started = %v, want 2", v)
	}
	if v := value(t, reg, "weft_schedule_fires_total", "kind", "scheduled", "outcome", "start_failed"); v != 1 {
		t.Fatalf("scheduled fires that failed to start = %v, want 1", v)
	}
	if v := value(t, reg, "weft_schedule_fire_lateness_seconds"); v != 2 {
		t.Fatalf("lateness samples = %v, want 2 (triggers have none)", v)
	}
	if v := value(t, reg, "weft_schedule_fires_skipped_total", "reason", "missed"); v != 1000 {
		t.Fatalf("missed fires = %v, want 1000", v)
	}
	obs.BatchApplied("cancel", "done", 200)
	obs.BatchApplied("cancel", "done", 3)
	obs.BatchApplied("cancel", "skipped", 1)
	if v := value(t, reg, "weft_batch_items_total", "op", "cancel", "outcome", "done"); v != 203 {
		t.Fatalf("batch items done = %v, want 203", v)
	}
	if v := value(t, reg, "weft_batch_items_total", "op", "cancel", "outcome", "skipped"); v != 1 {
		t.Fatalf("batch items skipped = %v, want 1", v)
	}
}

// TestPlugins: calls through a real runtime are counted by outcome, with
// the plugin's tracked name, and the pool collector reports the version.
func TestPlugins(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	rt := testplugins.Runtime(t, plugins.Config{})
	version := testplugins.Load(t, rt, "kit")
	m.TrackPlugin("kit", version)
	if err := m.WatchPools(rt); err != nil {
		t.Fatal(err)
	}
	inv := metrics.Plugins(m, rt)
	ctx := context.Background()
	for _, tc := range []struct {
		activity, input, outcome string
	}{
		{"echo", `{"a":1}`, "ok"},
		{"fail", `{"code":"nope"}`, "activity"},
		{"spin", `null`, "timeout"},
		{"missing", `null`, "unknown_activity"},
	} {
		// A short deadline stops spin; the others get time to spare on a
		// loaded machine.
		limit := time.Minute
		if tc.activity == "spin" {
			limit = 200 * time.Millisecond
		}
		cctx, cancel := context.WithTimeout(ctx, limit)
		_, err := inv.Invoke(cctx, version, call.Call{Activity: tc.activity, Input: []byte(tc.input)})
		cancel()
		if (err == nil) != (tc.outcome == "ok") {
			t.Fatalf("%s: err = %v", tc.activity, err)
		}
		if err != nil && string(classify.Cause(err).Kind) != tc.outcome {
			t.Fatalf("%s: %v classifies as %s", tc.activity, err, classify.Cause(err).Kind)
		}
		if v := value(t, reg, "weft_activity_attempts_total", "plugin", "kit", "activity", tc.activity, "outcome", tc.outcome); v != 1 {
			t.Fatalf("%s: attempts{outcome=%s} = %v", tc.activity, tc.outcome, v)
		}
		if v := value(t, reg, "weft_activity_duration_seconds", "plugin", "kit", "activity", tc.activity, "outcome", tc.outcome); v != 1 {
			t.Fatalf("%s: duration samples = %v", tc.activity, v)
		}
	}
	if v := value(t, reg, "weft_plugin_invocations_total", "plugin", "kit"); v != 4 {
		t.Fatalf("invocations = %v", v)
	}
	if v := value(t, reg, "weft_plugin_invocations_in_flight", "plugin", "kit"); v != 0 {
		t.Fatalf("in flight = %v", v)
	}
	if v := value(t, reg, "weft_plugin_pool_instances_discarded_total", "plugin", "kit", "version", version[:12]); v != 1 {
		t.Fatalf("discarded after the timeout = %v", v)
	}
	if v := value(t, reg, "weft_plugin_pool_instances", "plugin", "kit", "state", "busy"); v != 0 {
		t.Fatalf("busy = %v", v)
	}
	// An untracked version is labelled unknown; untracking by another name
	// keeps the version.
	m.UntrackPlugin("other", version)
	if n := testutil.CollectAndCount(reg, "weft_plugin_pool_instances"); n != 2 {
		t.Fatalf("pool series after untracking another name = %d", n)
	}
	m.UntrackPlugin("kit", version)
	if _, err := inv.Invoke(ctx, version, call.Call{Activity: "echo", Input: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
	if v := value(t, reg, "weft_plugin_invocations_total", "plugin", "unknown"); v != 1 {
		t.Fatalf("untracked invocations = %v", v)
	}
	if n := testutil.CollectAndCount(reg, "weft_plugin_pool_instances"); n != 0 {
		t.Fatalf("pool series after untracking = %d", n)
	}
}

// TestLocker: acquisitions by result, waits timed, extensions by result.
func TestLocker(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	l := metrics.Locker(m, local.New(local.Config{}))
	ctx := context.Background()
	lease, err := l.Acquire(ctx, "workflow-instance:a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.TryAcquire(ctx, "workflow-instance:a", time.Minute); ok || err != nil {
		t.Fatalf("TryAcquire of a held key: %v, %v", ok, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(cctx, "workflow-instance:a", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key: %v", err)
	}
	if err := lease.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	lease.Release(ctx)
	if err := lease.Extend(ctx, time.Minute); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Extend after Release: %v", err)
	}
	if _, ok, err := l.TryAcquire(ctx, "workflow-definitions-refresh:all", time.Minute); !ok || err != nil {
		t.Fatalf("TryAcquire: %v, %v", ok, err)
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"weft_lock_acquisitions_total", []string{"key", "workflow-instance", "mode", "acquire", "result", "acquired"}, 1},
		{"weft_lock_acquisitions_total", []string{"key", "workflow-instance", "mode", "try", "result", "busy"}, 1},
		{"weft_lock_acquisitions_total", []string{"key", "workflow-instance", "mode", "acquire", "result", "cancelled"}, 1},
		{"weft_lock_acquisitions_total", []string{"key", "workflow-definitions-refresh", "mode", "try", "result", "acquired"}, 1},
		{"weft_lock_acquire_duration_seconds", []string{"key", "workflow-instance", "mode", "acquire"}, 2},
		{"weft_lock_extensions_total", []string{"key", "workflow-instance", "result", "extended"}, 1},
		{"weft_lock_extensions_total", []string{"key", "workflow-instance", "result", "lost"}, 1},
	} {
		if v := value(t, reg, c.family, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, v, c.want)
		}
	}
}

// TestLockerBatch: the decorated locker extends batches through the inner
// locker's leases and counts each extension.
func TestLockerBatch(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	l := metrics.Locker(m, local.New(local.Config{}))
	be, ok := l.(lock.BatchExtender)
	if !ok {
		t.Fatal("the decorated locker is not a lock.BatchExtender")
	}
	ctx := context.Background()
	var leases []lock.Lease
	for _, id := range []string{"a", "b", "c"} {
		le, err := l.Acquire(ctx, "workflow-instance:"+id, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, le)
	}
	leases[2].Release(ctx)
	errs := be.ExtendLeases(ctx, leases, time.Minute)
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], lock.ErrLost) {
		t.Fatalf("ExtendLeases = %v; want a and b extended, c lost", errs)
	}
	if v := value(t, reg, "weft_lock_extensions_total", "key", "workflow-instance", "result", "extended"); v != 2 {
		t.Errorf("extended = %v, want 2", v)
	}
	if v := value(t, reg, "weft_lock_extensions_total", "key", "workflow-instance", "result", "lost"); v != 1 {
		t.Errorf("lost = %v, want 1", v)
	}
}

// TestQueueAndHTTP: the queue's depth is read at scrape time; HTTP
// requests are counted by route and status.
func TestQueueAndHTTP(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	q := memqueue.New(10)
	if err := m.WatchQueue(q); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b", "a"} {
		if err := q.Push(ctx, queue.Item{InstanceID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if v := value(t, reg, "weft_queue_depth"); v != 2 {
		t.Fatalf("depth = %v", v)
	}
	m.HTTPRequest("GET", "/v1/instances/:id", 404, time.Millisecond)
	if v := value(t, reg, "weft_http_requests_total", "method", "GET", "route", "/v1/instances/:id", "status", "404"); v != 1 {
		t.Fatalf("requests = %v", v)
	}
	if v := value(t, reg, "weft_http_request_duration_seconds", "route", "/v1/instances/:id"); v != 1 {
		t.Fatalf("duration samples = %v", v)
	}
}

// TestHeartbeats: the scheduler's statistics are read at scrape time.
func TestHeartbeats(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	st := heartbeat.Stats{
		Tracked: 5, Capacity: 100, Main: 3, Backup: 1, InFlight: 1,
		Renewals: map[heartbeat.Outcome]uint64{heartbeat.OK: 7, heartbeat.Throttled: 2},
		Ticks:    9, Overruns: 1, Timeouts: 4, Cycles: 2, CycleTime: 1500 * time.Millisecond, Backlog: 3,
		Warnings: []heartbeat.Warning{{Code: heartbeat.ShortTimeout, ID: "x"}},
	}
	if err := m.WatchHeartbeats(func() heartbeat.Stats { return st }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"weft_heartbeat_items", []string{"queue", "main"}, 3},
		{"weft_heartbeat_items", []string{"queue", "in_flight"}, 1},
		{"weft_heartbeat_capacity", nil, 100},
		{"weft_heartbeat_renewals_total", []string{"outcome", heartbeat.OK.String()}, 7},
		{"weft_heartbeat_renewals_total", []string{"outcome", heartbeat.Throttled.String()}, 2},
		{"weft_heartbeat_timeouts_total", nil, 4},
		{"weft_heartbeat_cycle_seconds", nil, 1.5},
		{"weft_heartbeat_backlog", nil, 3},
		{"weft_heartbeat_warnings", []string{"code", "short_timeout"}, 1},
		{"weft_heartbeat_warnings", []string{"code", "over_capacity"}, 0},
	} {
		if v := value(t, reg, c.family, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, v, c.want)
		}
	}
}

// sum returns the sum of the one histogram series of family with labels.
func sum(t *testing.T, reg *prometheus.Registry, family string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			return m.GetHistogram().GetSampleSum()
		}
	}
	t.Fatalf("no histogram %s%v", family, labels)
	return 0
}

// TestObserverInstanceLife: instance durations by workflow and terminal
// status, timer lateness, takeovers and abandoned attempts by reason;
// negative durations (two nodes' clocks) are clamped to 0.
func TestObserverInstanceLife(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	var obs engine.Observer = m
	obs.InstanceFinished("greet", weft.StatusCompleted, 2*time.Second)
	obs.InstanceFinished("greet", weft.StatusCompleted, 3*time.Second)
	obs.InstanceFinished("greet", weft.StatusFailed, -time.Second)
	obs.TimerFired(250 * time.Millisecond)
	obs.TimerFired(-5 * time.Millisecond)
	obs.InstanceTakenOver()
	obs.InstanceTakenOver()
	obs.AttemptAbandoned(engine.AbandonedNodeLost)
	obs.AttemptAbandoned(engine.AbandonedSuperseded)
	obs.AttemptAbandoned(engine.AbandonedSuperseded)
	// The engine asks its Observer for this one (engine.TapeObserver).
	tapes, ok := obs.(engine.TapeObserver)
	if !ok {
		t.Fatal("Metrics does not count the engine's tapes (engine.TapeObserver)")
	}
	tapes.TapeWritten(weft.TapeFailed, nil)
	tapes.TapeWritten(weft.TapeFailed, nil)
	tapes.TapeWritten(weft.TapeTimedOut, errors.New("store down"))
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"weft_instance_duration_seconds", []string{"workflow", "greet", "status", "completed"}, 2},
		{"weft_instance_duration_seconds", []string{"workflow", "greet", "status", "failed"}, 1},
		{"weft_timer_lateness_seconds", nil, 2},
		{"weft_instance_takeovers_total", nil, 2},
		{"weft_attempts_abandoned_total", []string{"reason", "node_lost"}, 1},
		{"weft_attempts_abandoned_total", []string{"reason", "superseded"}, 2},
		{"weft_tapes_written_total", []string{"outcome", "failed", "result", "stored"}, 2},
		{"weft_tapes_written_total", []string{"outcome", "timed_out", "result", "lost"}, 1},
	} {
		if v := value(t, reg, c.family, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, v, c.want)
		}
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"weft_instance_duration_seconds", []string{"workflow", "greet", "status", "completed"}, 5},
		{"weft_instance_duration_seconds", []string{"workflow", "greet", "status", "failed"}, 0},
		{"weft_timer_lateness_seconds", nil, 0.25},
	} {
		if v := sum(t, reg, c.family, c.labels...); v != c.want {
			t.Errorf("sum of %s%v = %v, want %v", c.family, c.labels, v, c.want)
		}
	}
}

// TestBuildInfo: weft_build_info is 1, labelled with the binary's build.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	_, reg := newMetrics(t)
	bi := metrics.ReadBuildInfo()
	if bi.GoVersion != runtime.Version() {
		t.Errorf("go_version = %q, want %q", bi.GoVersion, runtime.Version())
	}
	if bi.Version == "" || bi.Revision == "" {
		t.Errorf("build info with empty labels: %+v", bi)
	}
	if v := value(t, reg, "weft_build_info", "version", bi.Version, "go_version", bi.GoVersion, "revision", bi.Revision); v != 1 {
		t.Fatalf("weft_build_info = %v, want 1", v)
	}
}
