// Package metrics is the host's Prometheus instrumentation: instance
// transitions, deletions and step latency (*Metrics is an
// engine.Observer), activity
// latency and attempts by outcome (a decorator around the engine's plugin
// runner), plugin pool occupancy, heartbeat scheduler statistics, lock
// acquisitions, queue depth and HTTP requests; store operations (a
// decorator around the store: InstrumentStore), instances by status and
// stimuli queued and dead (gauges refreshed from the store at most every
// few seconds: WatchStore), and the binary's build (weft_build_info).
// docs/grafana-dashboard.json graphs them and docs/prometheus-alerts.yml
// alerts on them; dashboard_test.go checks both against what New and the
// Watch methods register.
//
// # Decisions
//
//   - Decorators and collectors, not calls sprinkled through the engine:
//     what the host measures is at its boundaries (a plugin call, a lock
//     acquisition, a queue), so the engine stays free of Prometheus, and a
//     node without a registry runs undecorated parts.
//   - Collectors read state at scrape time (pool statistics, queue depth)
//     instead of being updated on every change: a scrape every 15s costs
//     less than an update per call, and the numbers cannot drift.
//   - Label values are bounded: workflow and step names come from saved
//     definitions, plugin and activity names from uploaded manifests, lock
//     keys are reduced to their kind (the part before the first ':'), HTTP
//     routes are the registered patterns, never raw paths.
//
// # Label cardinality
//
// Every label has a bounded set of values, and none is an instance, a
// stimulus, a schedule or a concurrency key id, whose number has no
// bound. The largest sets are workflow (the saved definitions), step (a
// definition's steps), plugin and activity (the uploaded manifests),
// route (the API's patterns), rule (the operators' grant rules) and
// operation (the store's methods, about 65). The others are enumerations:
// status (7), outcome, reason, kind, result, mode, state, code (HTTP
// statuses and a fixed list of causes), key (lock key kinds, a handful).
// The costliest families are the histograms by workflow and step
// (weft_step_duration_seconds) and by plugin and activity
// (weft_activity_duration_seconds): their series grow with the product
// of those names.
//
// # Gauges of the store
//
// weft_instances, weft_stimuli, weft_concurrency_running and
// weft_concurrency_waiting, and in a cluster weft_queue_depth, are read
// from the shared store or queue: every node reports the same global
// values. Aggregate them across nodes with max(), never sum(); the
// dashboard and the alert rules do.
package metrics

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/weft"
)

// Namespace prefixes every metric name.
const Namespace = "weft"

// Metrics holds the host's metrics. Its methods are safe for concurrent
// use. Build it with New.
type Metrics struct {
	reg prometheus.Registerer

	transitions *prometheus.CounterVec
	steps       *prometheus.HistogramVec
	deleted     *prometheus.CounterVec
	fires       *prometheus.CounterVec
	lateness    prometheus.Histogram
	skipped     *prometheus.CounterVec
	slotWait    *prometheus.HistogramVec
	slotCancels *prometheus.CounterVec
	batchItems  *prometheus.CounterVec
	// instanceDuration, timerLateness, takeovers and abandoned are the
	// engine's instance life: how long instances take end to end, how
	// late timers fire, how often nodes take instances over and lose
	// attempts.
	instanceDuration *prometheus.HistogramVec
	timerLateness    prometheus.Histogram
	takeovers        prometheus.Counter
	abandoned        *prometheus.CounterVec
	// tapes counts the recorded attempts the engine kept, and lost.
	tapes *prometheus.CounterVec
	// replays counts the replays of recorded attempts, by kind and
	// outcome.
	replays   *prometheus.CounterVec
	rateTurns *prometheus.CounterVec
	rateWait  *prometheus.HistogramVec
	// storeDuration and storeErrors are the store's operations, timed and
	// counted by InstrumentStore's decorator.
	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	// gaugeRefreshErrors counts the failed refreshes of the store gauges
	// (WatchStore).
	gaugeRefreshErrors prometheus.Counter

	activity    *prometheus.HistogramVec
	attempts    *prometheus.CounterVec
	invocations *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec

	lockAcquire *prometheus.CounterVec
	lockWait    *prometheus.HistogramVec
	lockExtend  *prometheus.CounterVec

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	// outbound and outboundDuration count the plugins' own HTTP requests.
	outbound         *prometheus.CounterVec
	outboundDuration *prometheus.HistogramVec

	mu      sync.Mutex
	plugins map[string]string // plugin name by version
}

// latencyBuckets cover a fast plugin call (100µs) to a long activity (10m).
var latencyBuckets = []float64{.0001, .0005, .001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600}

// instanceBuckets cover a workflow of fast steps (1ms) to one that waits
// for a signal or a sleep for a week.
var instanceBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 86400, 7 * 86400}

// storeBuckets cover an embedded store's read (50µs) to a commit stalled
// by a Redis failover (10s).
var storeBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}

// latenessBuckets cover a timer fired by the next sweep (a few ms) to one
// fired after a long outage.
var latenessBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// New returns Metrics registered with reg. A nil reg keeps the metrics
// unregistered: they are counted but exported nowhere.
//
// # Errors
//
// The registry's error when a metric of the same name is registered
// already (New called twice with one registry).
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		reg: reg,
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "instance_transitions_total",
			Help: "Instances that reached a status, by workflow and status.",
		}, []string{"workflow", "status"}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "step_duration_seconds",
			Help:    "Time from a step's start to its end, by workflow, step and outcome (completed, failed).",
			Buckets: latencyBuckets,
		}, []string{"workflow", "step", "outcome"}),
		fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "schedule_fires_total",
			Help: "Schedules' fires, by kind (scheduled, trigger, backfill) and outcome: started (a run started) or start_failed (its workflow is gone, its input did not evaluate).",
		}, []string{"kind", "outcome"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "schedule_fire_lateness_seconds",
			Help:    "How long after it was due (its nominal time and its jitter) a scheduled fire started its run.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "schedule_fires_skipped_total",
			Help: "Schedules' fires that started nothing, by reason: overlap, buffer_full, replaced, missed, paused, duplicate.",
		}, []string{"reason"}),
		slotWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "concurrency_slot_wait_seconds",
			Help:    "How long instances that found every slot of their concurrency key taken waited for one, by workflow (observed when they get it).",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600},
		}, []string{"workflow"}),
		slotCancels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "concurrency_cancellations_total",
			Help: "Instances cancelled by their workflow's concurrency policy, by workflow and policy (cancel_newest, cancel_oldest).",
		}, []string{"workflow", "policy"}),
		batchItems: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "batch_items_total",
			Help: "Items of batch jobs applied, by operation (cancel, retry, pause, resume, delete, signal, migrate, reset) and outcome (done, skipped, failed; can, cannot for a dry run).",
		}, []string{"op", "outcome"}),
		instanceDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "instance_duration_seconds",
			Help:    "Time from an instance's creation to its end, by workflow and terminal status (completed, failed, cancelled).",
			Buckets: instanceBuckets,
		}, []string{"workflow", "status"}),
		timerLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "timer_lateness_seconds",
			Help:    "How long after it was due a timer (a sleep, a wait's timeout, a retry's backoff) fired.",
			Buckets: latenessBuckets,
		}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "instance_takeovers_total",
			Help: "Instances this node took over after their lease expired (their node died or stalled).",
		}),
		abandoned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "attempts_abandoned_total",
			Help: "Attempts that ended without their result applied, by reason (node_lost, superseded).",
		}, []string{"reason"}),
		tapes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "tapes_written_total",
			Help: "Recorded attempts the engine kept (docs/replay.md), by the attempt's outcome (completed, failed, timed_out, cancelled) and result (stored, or lost: the store refused the write, which never fails the attempt).",
		}, []string{"outcome", "result"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "replays_total",
			Help: "Recorded attempts replayed (docs/replay.md), by kind (replay: one asked for; shadow: a candidate's in a shadow run; baseline: the recorded version's in a shadow run) and outcome against the recording (same, different_output, failed, diverged, truncated, ended_early, not_run).",
		}, []string{"kind", "outcome"}),
		rateTurns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "rate_limit_turns_total",
			Help: "Turns asked of the rate limits, by kind of key (step: an activity step's rate_limit; host: a grant's host rule) and result: granted, refused (further ahead than the caller would wait), error (the limiter failed).",
		}, []string{"kind", "result"}),
		rateWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "rate_limit_wait_seconds",
			Help:    "How far ahead the granted turns of the rate limits were (0: at once), by kind of key (step, host).",
			Buckets: []float64{0, .01, .05, .1, .25, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"kind"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "store_operation_duration_seconds",
			Help:    "Duration of the store's operations, refusals and errors included, by operation (the Store method in snake case: commit, get_instance, due_timers...).",
			Buckets: storeBuckets,
		}, []string{"operation"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_operation_errors_total",
			Help: "Store operations that failed, by operation: refusals that are answers (not found, conflict, fenced, exists, in use, invalid) and cancellations by the caller are not counted.",
		}, []string{"operation"}),
		gaugeRefreshErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "store_gauges_refresh_errors_total",
			Help: "Refreshes of the store gauges (weft_instances, weft_stimuli) that failed; the gauges keep their last values.",
		}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "instances_deleted_total",
			Help: "Instances deleted, by reason: request (DELETE /v1/instances/{id}) or retention (finished, past their delete_after).",
		}, []string{"reason"}),
		activity: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "activity_duration_seconds",
			Help:    "Duration of activity attempts (one plugin call each), by plugin, activity and outcome.",
			Buckets: latencyBuckets,
		}, []string{"plugin", "activity", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "activity_attempts_total",
			Help: "Activity attempts by plugin, activity and outcome: ok, or the failure kind of internal/retry (activity, timeout, trap, limit, protocol, unknown_activity, cancelled, host).",
		}, []string{"plugin", "activity", "outcome"}),
		invocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "plugin_invocations_total",
			Help: "Plugin calls started, by plugin.",
		}, []string{"plugin"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "plugin_invocations_in_flight",
			Help: "Plugin calls running now, by plugin.",
		}, []string{"plugin"}),
		lockAcquire: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lock_acquisitions_total",
			Help: "Lock acquisitions by key kind, mode (acquire, try) and result (acquired, busy, cancelled, error).",
		}, []string{"key", "mode", "result"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "lock_acquire_duration_seconds",
			Help:    "Time spent acquiring locks (waiting included), by key kind and mode.",
			Buckets: latencyBuckets,
		}, []string{"key", "mode"}),
		lockExtend: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lock_extensions_total",
			Help: "Lease extensions by key kind and result (extended, lost, error).",
		}, []string{"key", "result"}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "http_requests_total",
			Help: "HTTP requests by method, route pattern and status code.",
		}, []string{"method", "route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "http_request_duration_seconds",
			Help:    "HTTP request duration by method and route pattern.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		outbound: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "plugin_http_requests_total",
			Help: "Outbound HTTP requests of plugins, by plugin, the grant rule that allowed them (as the operator wrote it; none when no rule did) and code: the response status, or why none was used (timeout, unreachable, tls, bad_response, not_granted, limit, cancelled, rate_limited, rate_limiter_failed, dropped).",
		}, []string{"plugin", "rule", "code"}),
		outboundDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "plugin_http_request_duration_seconds",
			Help:    "Duration of plugins' outbound HTTP requests, to the end of the response body, by plugin and the grant rule that allowed them (none when no rule did).",
			Buckets: latencyBuckets,
		}, []string{"plugin", "rule"}),
		plugins: map[string]string{},
	}
	for _, c := range []prometheus.Collector{
		m.transitions, m.steps, m.deleted, m.fires, m.lateness, m.skipped, m.slotWait, m.slotCancels, m.batchItems, m.rateTurns, m.rateWait, m.activity, m.attempts, m.invocations, m.inFlight,
		m.lockAcquire, m.lockWait, m.lockExtend, m.httpRequests, m.httpDuration,
		m.outbound, m.outboundDuration, m.instanceDuration, m.timerLateness, m.takeovers, m.abandoned, m.tapes, m.replays,
		m.storeDuration, m.storeErrors, m.gaugeRefreshErrors, newBuildInfo(),
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: registering: %w", err)
		}
	}
	return m, nil
}

// InstanceStatus counts an instance reaching status; it implements the
// engine's Observer.
func (m *Metrics) InstanceStatus(workflow string, status weft.Status) {
	m.transitions.WithLabelValues(workflow, string(status)).Inc()
}

// StepFinished records a step's duration; it implements the engine's
// Observer. outcome is completed or failed.
func (m *Metrics) StepFinished(workflow, step, outcome string, d time.Duration) {
	m.steps.WithLabelValues(workflow, step, outcome).Observe(d.Seconds())
}

// InstancesDeleted counts n instances deleted for reason (request or
// retention); it implements the engine's Observer.
func (m *Metrics) InstancesDeleted(reason string, n int) {
	m.deleted.WithLabelValues(reason).Add(float64(n))
}

// ScheduleFired counts a schedule's fire and records a scheduled fire's
// lateness; it implements the engine's Observer.
func (m *Metrics) ScheduleFired(kind string, started bool, late time.Duration) {
	outcome := "started"
	if !started {
		outcome = "start_failed"
	}
	m.fires.WithLabelValues(kind, outcome).Inc()
	if started && kind == string(weft.FireScheduled) {
		m.lateness.Observe(late.Seconds())
	}
}

// SchedulesSkipped counts n skipped fires for reason; it implements the
// engine's Observer.
func (m *Metrics) SchedulesSkipped(reason string, n int) {
	m.skipped.WithLabelValues(reason).Add(float64(n))
}

// SlotWaited records how long an instance of workflow waited for a slot
// of its concurrency key; it implements the engine's Observer.
func (m *Metrics) SlotWaited(workflow string, d time.Duration) {
	m.slotWait.WithLabelValues(workflow).Observe(d.Seconds())
}

// SlotCancelled counts an instance of workflow cancelled by its
// concurrency policy; it implements the engine's Observer.
func (m *Metrics) SlotCancelled(workflow, policy string) {
	m.slotCancels.WithLabelValues(workflow, policy).Inc()
}

// BatchApplied counts n items of batch jobs of op applied with outcome;
// it implements the engine's Observer.
func (m *Metrics) BatchApplied(op, outcome string, n int) {
	m.batchItems.WithLabelValues(op, outcome).Add(float64(n))
}

// InstanceFinished records how long an instance of workflow took, from
// its creation to its terminal status; it implements the engine's
// Observer.
func (m *Metrics) InstanceFinished(workflow string, status weft.Status, d time.Duration) {
	// Clamped: the creation and the end may be stamped by two nodes
	// whose clocks differ.
	m.instanceDuration.WithLabelValues(workflow, string(status)).Observe(max(d, 0).Seconds())
}

// TimerFired records how late a timer fired; it implements the engine's
// Observer.
func (m *Metrics) TimerFired(late time.Duration) {
	m.timerLateness.Observe(max(late, 0).Seconds())
}

// InstanceTakenOver counts a takeover; it implements the engine's
// Observer.
func (m *Metrics) InstanceTakenOver() { m.takeovers.Inc() }

// AttemptAbandoned counts an attempt whose result was not applied, by
// reason; it implements the engine's Observer.
func (m *Metrics) AttemptAbandoned(reason string) { m.abandoned.WithLabelValues(reason).Inc() }

// TapeWritten counts a recorded attempt the engine kept: stored when err
// is nil, lost otherwise; it implements the engine's TapeObserver.
func (m *Metrics) TapeWritten(outcome weft.TapeOutcome, err error) {
	result := "stored"
	if err != nil {
		result = "lost"
	}
	m.tapes.WithLabelValues(string(outcome), result).Inc()
}

// The kinds of replay Replayed counts.
const (
	ReplayAsked    = "replay"
	ReplayShadow   = "shadow"
	ReplayBaseline = "baseline"
)

// Replayed counts a replay of a recorded attempt of kind (ReplayAsked,
// ReplayShadow, ReplayBaseline) that ended with outcome.
func (m *Metrics) Replayed(kind string, outcome weft.ReplayOutcome) {
	m.replays.WithLabelValues(kind, string(outcome)).Inc()
}

// HTTPRequest records one answered HTTP request. route is the registered
// pattern (such as /v1/instances/:id), or "unmatched" for requests that
// matched no route, so that scanners cannot grow the label set.
func (m *Metrics) HTTPRequest(method, route string, status int, d time.Duration) {
	m.httpRequests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(method, route).Observe(d.Seconds())
}

// TrackPlugin names a plugin version, so that calls and pool statistics of
// that version are labelled with the plugin's name. The pool collector
// (WatchPools) reports the tracked versions.
func (m *Metrics) TrackPlugin(name, version string) {
	m.mu.Lock()
	m.plugins[version] = name
	m.mu.Unlock()
}

// UntrackPlugin forgets a version of the plugin name (the plugin was
// deleted). A version that TrackPlugin gave another name since is kept.
func (m *Metrics) UntrackPlugin(name, version string) {
	m.mu.Lock()
	if m.plugins[version] == name {
		delete(m.plugins, version)
	}
	m.mu.Unlock()
}

// pluginName returns the tracked name of version, or "unknown".
func (m *Metrics) pluginName(version string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.plugins[version]; ok {
		return n
	}
	return "unknown"
}

// tracked returns a copy of the tracked versions.
func (m *Metrics) tracked() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.plugins))
	for v, n := range m.plugins {
		out[v] = n
	}
	return out
}

// shortVersion is the label form of a version hash: 12 hex digits identify
// it among a plugin's versions, as git's short hashes do.
func shortVersion(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}

func nan() float64 { return math.NaN() }
