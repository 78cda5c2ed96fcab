// Package engine is the shell around the runner: it saves definitions,
// starts instances, and runs them on a node. Workers pull instance ids from
// the ready queue, take the instance's lock, apply the instance's pending
// events (start, due timers, inbox messages, queued stimuli for its
// bookmarks, activity results) to the runner's deterministic core, and
// perform the actions it returns: activity calls through the plugin runtime,
// durable timers, bookmarks, child instances, history, and commits to the
// store, each a compare-and-set on the instance's revision and the lock's
// fencing token.
//
// # Events for busy instances
//
// Nothing waits for an instance's lock but the instance's own run. A
// stimulus, a child's end or a cancellation is written to the instance's
// inbox (durably, with the stimulus's record, or atomically with the child's
// final commit) and the instance is queued; its run applies the inbox and
// commits the applied messages as consumed. So a child resuming its parent,
// or a workflow signalling itself, cannot deadlock on a non-reentrant lock,
// and nothing is lost when a node dies between the two steps. A stimulus
// that finds no bookmark is queued with a TTL and delivered when a bookmark
// for it appears. A wake-up lost between writing a message and queueing
// the instance (its writer died) is found by the recovery sweep once the
// inbox has waited a lease's TTL.
//
// # Recovery
//
// A running instance's store lease and its lock are renewed by the
// heartbeat scheduler (below). A singleton sweep queues instances whose lease expired (their node died), and the
// engine requeues pending instances when it starts; the run that picks one
// up tells the runner (Recover) that the attempts its state shows in flight
// died, and they are rescheduled as their next attempts. The instance lock
// makes sure a live instance is never run twice.
//
// # Heartbeats, leases and locks
//
// The node's heartbeat scheduler (internal/heartbeat) keeps alive everything
// this node holds: every running attempt, every instance lease and every
// instance lock. Each tick's batch is one store transaction (RenewLeases:
// the leases, plus the latest details of the attempts whose guests
// heartbeated since the last renewal) and one batched lock extension. A
// guest that stops heartbeating within its heartbeat_timeout is stopped and
// its attempt fails as heartbeat_timeout with its last details; a lease or
// lock the scheduler finds lost stops the execution (ErrLeaseLost), which
// then writes nothing more.
//
// Under lazy persistence nothing is written while an activity runs, so an
// attempt still running when the scheduler first visits it (within a
// cycle) has its execution commit the instance as running, with a lease:
// from then on another node can recover it after the lease expires, and its
// details are persisted with each renewal. The attempt that recovery starts
// resumes from them (runner.Recover, store.Heartbeats).
//
// # Retention
//
// The commit that finishes an instance stamps it with when it may be
// deleted (its workflow version's retention, or Config.Retention, after
// the finish), and a singleton sweep deletes, under each instance's lock,
// those whose time came (retention.go).
//
// # Cluster
//
// With a Bus, a message for an instance running on another node (a cancel,
// a stimulus) wakes that node's execution at once, and a finished instance
// wakes Wait calls on every node.
package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins/call"
)

// Plugins runs activities; *plugins.Runtime implements it.
type Plugins interface {
	Invoke(ctx context.Context, version string, c call.Call) ([]byte, error)
}

// Observer is told what the engine does, for metrics (internal/metrics
// implements it). Its methods are called on the engine's hot paths: they
// must be fast and safe for concurrent use.
type Observer interface {
	// InstanceStatus says that an instance of workflow reached status:
	// pending when created, then each change its commits make.
	InstanceStatus(workflow string, status weft.Status)
	// StepFinished says that a step of workflow ended, with outcome
	// "completed" or "failed", d after it started.
	StepFinished(workflow, step, outcome string, d time.Duration)
	// InstancesDeleted says that n instances were deleted, for reason
	// DeletedOnRequest or DeletedByRetention.
	InstancesDeleted(reason string, n int)
	// ScheduleFired says that a schedule's fire of kind (weft.FireKind)
	// started its run (started true) or could not (its workflow is gone,
	// its input did not evaluate); a scheduled fire's late is how long
	// after it was due its run started, zero for the others.
	ScheduleFired(kind string, started bool, late time.Duration)
	// SchedulesSkipped says that n fires of schedules were skipped, for
	// reason (overlap, buffer_full, replaced, missed, paused, duplicate).
	SchedulesSkipped(reason string, n int)
	// SlotWaited says that an instance of workflow that waited for a slot
	// of its concurrency key got one after d.
	SlotWaited(workflow string, d time.Duration)
	// SlotCancelled says that an instance of workflow was cancelled by its
	// concurrency policy (cancel_newest or cancel_oldest).
	SlotCancelled(workflow, policy string)
	// BatchApplied says that n items of batch jobs of op were applied
	// with outcome (weft.BatchOutcome).
	BatchApplied(op, outcome string, n int)
	// InstanceFinished says that an instance of workflow reached the
	// terminal status, d after it was created.
	InstanceFinished(workflow string, status weft.Status, d time.Duration)
	// TimerFired says that a timer (a sleep, a wait's timeout, a retry's
	// backoff) fired late after it was due.
	TimerFired(late time.Duration)
	// InstanceTakenOver says that this node took over an instance whose
	// lease had expired (its node died or stalled).
	InstanceTakenOver()
	// AttemptAbandoned says that an attempt ended without its result
	// being applied, for reason AbandonedNodeLost (its node lost the
	// instance: found at a takeover) or AbandonedSuperseded (the
	// instance moved on without it: cancelled, reset, timed out).
	AttemptAbandoned(reason string)
}

// Why attempts were abandoned, as Observer.AttemptAbandoned is told.
const (
	AbandonedNodeLost   = "node_lost"
	AbandonedSuperseded = "superseded"
)

// Why instances were deleted, as Observer.InstancesDeleted is told.
const (
	// DeletedOnRequest: Delete was called (DELETE /v1/instances/{id}).
	DeletedOnRequest = "request"
	// DeletedByRetention: the retention sweep deleted finished instances
	// whose DeleteAfter had passed.
	DeletedByRetention = "retention"
)

// Bus carries notifications between the nodes of a cluster (internal/notify
// implements it on Redis pub/sub). It is at most once: a lost notification
// costs latency, never correctness, because the inbox and the queue hold
// the work and waits poll.
type Bus interface {
	Publish(ctx context.Context, topic string, payload []byte) error
	Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (unsubscribe func(), err error)
}

// Bus topics: an instance's inbox got a message (the node running it wakes
// the execution: a cancel stops a guest on another node at once), and an
// instance was suspended or finished (nodes with Wait calls on it wake
// them).
const (
	topicInbox   = "inbox"
	topicChanged = "changed"
)

// InstanceTopics are the Bus topics whose payload is an instance's id,
// so that a bus may carry each on a channel of the instance's own (Redis
// sharded pub/sub: notify.RedisConfig.Sharded).
func InstanceTopics() []string { return []string{topicInbox, topicChanged} }

type nopObserver struct{}

func (nopObserver) InstanceStatus(string, weft.Status)                  {}
func (nopObserver) StepFinished(string, string, string, time.Duration)  {}
func (nopObserver) InstancesDeleted(string, int)                        {}
func (nopObserver) ScheduleFired(string, bool, time.Duration)           {}
func (nopObserver) SchedulesSkipped(string, int)                        {}
func (nopObserver) SlotWaited(string, time.Duration)                    {}
func (nopObserver) SlotCancelled(string, string)                        {}
func (nopObserver) BatchApplied(string, string, int)                    {}
func (nopObserver) InstanceFinished(string, weft.Status, time.Duration) {}
func (nopObserver) TimerFired(time.Duration)                            {}
func (nopObserver) InstanceTakenOver()                                  {}
func (nopObserver) AttemptAbandoned(string)                             {}

// Config configures an Engine.
type Config struct {
	// NodeID names this node in leases and history: 1 to 128 characters
	// without spaces or control characters. Defaults to a random id.
	NodeID string
	// Workers is how many instances this node runs at once. An instance
	// that runs costs a goroutine while it waits on the store or on its
	// activities, so the default is far above the CPUs: instances whose
	// activities wait (on a remote service, a sleep) run side by side, and
	// more commits share each fsync. The plugins' pool size bounds how
	// many guest calls run at once. Defaults to 256.
	Workers int
	// EagerStarts runs a started instance on this node, handing it to
	// an idle worker, instead of pushing it on the ready queue for any
	// node to pop; only when no worker is idle does the start go through
	// the queue. In a cluster that saves the queue's round trips (push,
	// pop, acknowledge) on every start, as Temporal's eager workflow start
	// does; it also means that starts run where they arrive, so a cluster
	// whose requests all reach one node should turn it off for the queue
	// to spread them. Everything else (resumed, signalled, retried and
	// recovered instances) goes through the queue whatever it is. An
	// eager start is recovered like any other: if this node dies running
	// it, the recovery sweep finds it pending (or its lease expired).
	// The zero Config queues every start; the host turns it on
	// (engine.eager_starts).
	EagerStarts bool
	// LockTTL is the time to live of a running instance's lock and store
	// lease. The heartbeat scheduler extends the lock and renews the lease
	// once every cycle (2s by default), so it must
	// cover several cycles; recovery takes a dead node's instances over
	// once it has passed. Defaults to 8s: with the 1s recovery sweep, a
	// dead node's work moves within about 9s, and a node must miss four
	// renewal cycles before it loses an instance it is still running.
	LockTTL time.Duration
	// AcquireTimeout bounds waiting for an instance's lock. Defaults to 10s.
	AcquireTimeout time.Duration
	// ActivityTimeout is the start-to-close timeout of an activity step
	// that sets none. Defaults to definition.DefaultActivityTimeout (10m).
	// A definition whose heartbeat_timeout exceeds it, on a step without
	// a timeout, is refused when saved.
	ActivityTimeout time.Duration
	// TimerInterval is how often due timers are swept. Defaults to 50ms.
	TimerInterval time.Duration
	// ScheduleInterval is how often due schedules are swept: a fire
	// starts at most this late, and the time its sweep takes. Defaults to
	// 100ms.
	ScheduleInterval time.Duration
	// BatchInterval is how often due batch jobs are stepped. Defaults to
	// 100ms: a batch's rate is kept within each turn.
	BatchInterval time.Duration
	// BatchRetention is how long a finished batch job is kept, with its
	// items, for an operator to read. Defaults to 7 days.
	BatchRetention time.Duration
	// BatchMaxItems bounds the instances one batch job's query may select;
	// a larger selection fails the batch before anything is applied.
	// Defaults to 1,000,000.
	BatchMaxItems int
	// BatchChunk is how many items of a batch job one store transaction
	// applies: short enough that it holds the embedded store's write
	// lock, or runs as one Redis script, for a few milliseconds. Defaults
	// to 200, at most weft.MaxBatchChanges.
	BatchChunk int
	// StimulusTTL is how long a stimulus that found no bookmark waits for
	// one before it moves to the dead letters. Defaults to 24h.
	StimulusTTL time.Duration
	// StimulusInterval is how often expired stimuli are swept. Defaults to
	// 1s.
	StimulusInterval time.Duration
	// RecoveryInterval is how often instances whose lease expired are
	// looked for. Defaults to 1s.
	RecoveryInterval time.Duration
	// Retention is how long a finished instance (completed, failed,
	// cancelled) is kept, with its history, when its workflow's version
	// sets no retention: the commit that finishes it stamps its
	// DeleteAfter, and the retention sweep deletes it after that. 0 keeps
	// finished instances forever, and is what the zero Config does, so
	// that an engine deletes nothing unless told to; the host sets
	// DefaultRetention (engine.retention). At most
	// definition.MaxRetention.
	Retention time.Duration
	// RetentionInterval is how often the retention sweep looks for
	// finished instances past their DeleteAfter. Defaults to 1m: deletion
	// is housekeeping, and a minute late costs nothing.
	RetentionInterval time.Duration
	// RetentionBatch is how many instances the retention sweep asks the
	// store for at a time; a turn asks again while batches come back full.
	// Defaults to 500, at most weft.MaxListLimit.
	RetentionBatch int
	// AttemptDataLimit caps, in bytes of JSON, each activity attempt's
	// input and output as its history entries keep them; a larger one is
	// recorded by its size only (runner.Context.AttemptDataLimit). 0
	// records neither, and is what the zero Config does; the host sets
	// DefaultAttemptDataLimit (history.attempt_data_limit). An attempt's
	// log lines are kept whatever it is: the plugin runtime's log limits
	// bound them.
	AttemptDataLimit int
	// VarsLimit caps, in bytes of JSON, the copy of an instance's
	// variables that a top-level step's step_started entry keeps when
	// they changed, for a Reset to the step (runner.Context.VarsLimit); a
	// larger one is recorded by its size only, and a reset to that step
	// is refused. 0 records none, and is what the zero Config does; the
	// host sets DefaultVarsLimit (history.vars_limit).
	VarsLimit int
	// Tapes says which activity attempts keep the tape of the host's
	// answers (docs/replay.md), for the workflows and steps whose
	// definition does not say. The zero Config keeps none unless a
	// definition's record asks; the host sets weft.DefaultRecordPolicy
	// (tapes.policy) and weft.DefaultTapeBytes (tapes.max_bytes).
	Tapes TapeConfig
	// Heartbeat configures the heartbeat scheduler that times out attempts
	// whose guest stopped heartbeating. Defaults to heartbeat's defaults;
	// its MaxRetries 0 retries none, and the host sets
	// heartbeat.DefaultMaxRetries (heartbeat.max_retries).
	Heartbeat heartbeat.Config
	// Observer is told about status changes and step latencies; nil
	// observes nothing.
	Observer Observer
	// Tracer makes the spans of instances, steps and attempts
	// (docs/observability.md, "Traces"); nil makes none.
	Tracer *tracing.Tracer
	// Bus, in a cluster, tells the other nodes about inbox messages and
	// finished instances; nil on a single node.
	Bus Bus
	// Limiter keeps the budgets of activity steps' rate limits: in
	// process on one node, in Redis for a cluster, so that every node
	// shares them. Defaults to an in-process limiter.
	Limiter RateLimiter
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.NodeID == "" {
		c.NodeID = "node-" + randomHex(4)
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.LockTTL == 0 {
		c.LockTTL = 8 * time.Second
	}
	if c.AcquireTimeout == 0 {
		c.AcquireTimeout = 10 * time.Second
	}
	if c.ActivityTimeout == 0 {
		c.ActivityTimeout = definition.DefaultActivityTimeout
	}
	if c.ScheduleInterval == 0 {
		c.ScheduleInterval = 100 * time.Millisecond
	}
	if c.BatchInterval == 0 {
		c.BatchInterval = 100 * time.Millisecond
	}
	if c.BatchRetention == 0 {
		c.BatchRetention = 7 * 24 * time.Hour
	}
	if c.BatchMaxItems == 0 {
		c.BatchMaxItems = 1_000_000
	}
	if c.BatchChunk == 0 {
		c.BatchChunk = 200
	}
	if c.TimerInterval == 0 {
		c.TimerInterval = 50 * time.Millisecond
	}
	if c.StimulusTTL == 0 {
		c.StimulusTTL = 24 * time.Hour
	}
	if c.StimulusInterval == 0 {
		c.StimulusInterval = time.Second
	}
	if c.RecoveryInterval == 0 {
		c.RecoveryInterval = time.Second
	}
	if c.RetentionInterval == 0 {
		c.RetentionInterval = time.Minute
	}
	if c.RetentionBatch == 0 {
		c.RetentionBatch = 500
	}
	if c.Tapes.MaxBytes == 0 {
		c.Tapes.MaxBytes = weft.DefaultTapeBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Limiter == nil {
		c.Limiter = locallimit.New(locallimit.Config{Now: c.Now})
	}
	return c
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("LockTTL"), so that a caller that fills Config from settings
// of its own can name its setting (the host's configuration does).
type ConfigError struct {
	// Field is the field's name.
	Field string
	// Message says what is wrong, naming fields as Field does.
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "engine: " + e.Message }

// MaxAttemptDataLimit is the largest Config.AttemptDataLimit: every
// attempt's entries may hold the limit twice over, and a page of history
// holds up to 1000 entries, so beyond 16 MiB a page of them could not be
// read in one answer.
const MaxAttemptDataLimit = 16 << 20

// Validate reports every field of c with an impossible value, each as a
// *ConfigError, joined. New calls it on the result of WithDefaults; a
// caller that sets every field itself calls it on c as it is, so that a
// zero it chose is judged rather than replaced by a default. Heartbeat is
// the scheduler's to judge (heartbeat.Config.Validate).
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)})
	}
	// The node's name is in leases, lock values and history.
	if c.NodeID == "" || len(c.NodeID) > 128 || strings.ContainsFunc(c.NodeID, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		bad("NodeID", "must be 1 to 128 characters without spaces or control characters, got %q", c.NodeID)
	}
	if c.Workers < 1 {
		bad("Workers", "must be at least 1, got %d", c.Workers)
	}
	if c.LockTTL < time.Second {
		bad("LockTTL", "must be at least 1s, got %s", c.LockTTL)
	}
	for _, d := range []struct {
		field string
		d     time.Duration
	}{
		{"AcquireTimeout", c.AcquireTimeout}, {"ActivityTimeout", c.ActivityTimeout}, {"TimerInterval", c.TimerInterval}, {"ScheduleInterval", c.ScheduleInterval}, {"BatchInterval", c.BatchInterval}, {"BatchRetention", c.BatchRetention},
		{"StimulusTTL", c.StimulusTTL}, {"StimulusInterval", c.StimulusInterval}, {"RecoveryInterval", c.RecoveryInterval},
		{"RetentionInterval", c.RetentionInterval},
	} {
		if d.d <= 0 {
			bad(d.field, "must be positive, got %s", d.d)
		}
	}
	if c.Retention < 0 || c.Retention > definition.MaxRetention {
		bad("Retention", "must be between 0 (keep finished instances forever) and %s (100 years), got %s", definition.MaxRetention, c.Retention)
	}
	if c.RetentionBatch < 1 || c.RetentionBatch > weft.MaxListLimit {
		bad("RetentionBatch", "must be between 1 and %d, got %d", weft.MaxListLimit, c.RetentionBatch)
	}
	if c.AttemptDataLimit < 0 || c.AttemptDataLimit > MaxAttemptDataLimit {
		bad("AttemptDataLimit", "must be between 0 (record none) and %d (16 MiB), got %d", MaxAttemptDataLimit, c.AttemptDataLimit)
	}
	if c.BatchMaxItems < 1 {
		bad("BatchMaxItems", "must be at least 1, got %d", c.BatchMaxItems)
	}
	if c.BatchChunk < 1 || c.BatchChunk > weft.MaxBatchChanges {
		bad("BatchChunk", "must be between 1 and %d, got %d", weft.MaxBatchChanges, c.BatchChunk)
	}
	if c.VarsLimit < 0 || c.VarsLimit > MaxAttemptDataLimit {
		bad("VarsLimit", "must be between 0 (record none) and %d (16 MiB), got %d", MaxAttemptDataLimit, c.VarsLimit)
	}
	if err := c.Tapes.Policy.Check(); err != nil {
		bad("Tapes.Policy", "%s", strings.TrimPrefix(err.Error(), weft.ErrInvalid.Error()+": "))
	}
	if c.Tapes.MaxBytes < 1 || c.Tapes.MaxBytes > weft.MaxTapeBytes {
		bad("Tapes.MaxBytes", "must be between 1 and %d (64 MiB), got %d", weft.MaxTapeBytes, c.Tapes.MaxBytes)
	}
	return errors.Join(errs...)
}

// DefaultRetention is the host's default Config.Retention
// (engine.retention): a week, long enough to look into what went wrong
// after a weekend, short enough that the store stops growing.
const DefaultRetention = 7 * 24 * time.Hour

// DefaultAttemptDataLimit is the host's default Config.AttemptDataLimit
// (history.attempt_data_limit): 16 KiB keeps the documents a person reads
// whole, while an attempt that moves megabytes does not copy them into
// every history entry.
const DefaultAttemptDataLimit = 16 << 10

// DefaultVarsLimit is the host's default Config.VarsLimit
// (history.vars_limit): the variables of most workflows are a few
// kilobytes, copied only at the top-level steps where they changed.
const DefaultVarsLimit = 256 << 10

// Engine runs workflow instances on one node.
type Engine struct {
	cfg     Config
	log     *slog.Logger
	store   store.Store
	locks   lock.Locker
	queue   queue.Queue
	plugins Plugins
	boot    string

	mu       sync.Mutex
	programs map[programKey]*runner.Program   // compiled definitions
	waiters  map[string][]chan *weft.Instance // by instance id: Wait calls to wake
	running  map[string]chan struct{}         // by instance id: executions on this node
	eager    chan queue.Item                  // starts handed to an idle worker (Config.EagerStarts)
	failing  map[string]*backoff              // by instance id: runs failed in a row on this node

	scheduler  *heartbeat.Service // renews leases and locks, watches attempts' heartbeats
	renewer    *renewer           // what the scheduler calls: renewals and its actions
	grantCache grantCache
	changes    changes      // OnChange's functions
	schedules  scheduleDocs // parsed schedule documents, for the sweep

	// pairCursor is where the recovery sweep's next look at the queued
	// stimuli starts (see pairQueued), pendingCursor its next look at the
	// pending instances (requeueStalePending); only the sweep's goroutine
	// uses them.
	pairCursor    string
	pendingCursor string

	// tapeErrors counts the tapes that could not be written (TapeErrors).
	tapeErrors atomic.Uint64
}

// New returns an Engine.
func New(cfg Config, st store.Store, locks lock.Locker, q queue.Queue, pl Plugins) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), store: st, locks: locks, queue: q, plugins: pl,
		boot: randomHex(8), programs: map[programKey]*runner.Program{}, waiters: map[string][]chan *weft.Instance{},
		running: map[string]chan struct{}{}, failing: map[string]*backoff{},
	}
	if cfg.EagerStarts {
		e.eager = make(chan queue.Item) // unbuffered: a send succeeds only into an idle worker
	}
	e.renewer = &renewer{e: e}
	svc, err := heartbeat.NewService(cfg.Heartbeat, e.renewer, e.renewer, heartbeat.Env{Logger: e.log})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.scheduler = svc
	return e, nil
}

// HeartbeatStats returns the heartbeat scheduler's metrics: tracked items,
// capacity, renewals by outcome, cycle time, overruns, warnings.
func (e *Engine) HeartbeatStats() heartbeat.Stats { return e.scheduler.Stats() }

// Run runs the node's workers and the timer sweeper until ctx ends, then
// waits for them.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel: deferred calls run last-in first-out
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The scheduler and the subscriptions first: an execution that starts
	// must have its lock kept alive and hear the other nodes at once.
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = e.scheduler.Run(ctx)
	}()
	if e.cfg.Bus != nil {
		stop, err := e.subscribe(ctx)
		if err != nil {
			return err // the deferred cancel and Wait stop the scheduler
		}
		defer stop()
	}
	// Leases and locks must outlive two renewal cycles (heartbeat
	// package doc); the scheduler logs and exports what does not.
	e.scheduler.Check(map[string]time.Duration{"lock_ttl": e.cfg.LockTTL})
	// Idle workers take turns to pop the ready queue, a few at a time: a
	// Redis queue holds a connection in every blocking read, and idle
	// workers must not hold one each. A worker runs what it popped itself,
	// with no hand-off, and lives as long as the engine, so that its
	// stack, grown once, stays grown.
	popping := make(chan struct{}, min(e.cfg.Workers, poppers))
	for range e.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.work(ctx, popping)
		}()
	}
	e.requeuePending(ctx)
	for _, w := range e.sweeps() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.singleton(ctx, w.key, w.interval, w.ttl, w.work)
		}()
	}
	<-ctx.Done()
	return nil
}

// poppers is how many workers pop the ready queue at once at most: enough
// to keep the others fed from Redis at a round trip per pop.
const poppers = 4

// DefaultWorkers is Config.Workers' default.
const DefaultWorkers = 256

// work pops an instance, once it has a turn among the poppers, runs it,
// and again, until ctx ends. While it waits for its turn it takes the
// starts handed to it (Config.EagerStarts).
func (e *Engine) work(ctx context.Context, popping chan struct{}) {
	for {
		select {
		case popping <- struct{}{}:
		case it := <-e.eager: // nil without EagerStarts: never ready
			if ctx.Err() != nil {
				// Taken as the engine stops: whoever runs next takes it
				// from the queue (or, in memory, from the store at start).
				pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				e.push(pctx, it)
				cancel()
				return
			}
			e.run(ctx, it)
			continue
		case <-ctx.Done():
			return
		}
		d, err := e.queue.Pop(ctx)
		<-popping
		if err != nil {
			return // ctx ended
		}
		e.runDelivery(ctx, d)
	}
}

// runDelivery runs the instance a queue delivery names, and acknowledges
// the delivery.
func (e *Engine) runDelivery(ctx context.Context, d queue.Delivery) {
	id := d.Item().InstanceID
	logCtx := e.run(ctx, d.Item())
	if err := d.Ack(context.WithoutCancel(ctx)); err != nil {
		// The queue delivers it again after its visibility timeout.
		e.log.WarnContext(logCtx, "acknowledging a run of an instance", "instance", id, "err", err)
	}
}

// run runs the instance of a queue item (its reason reasonSwept: because
// a message reached its inbox) and deals with a failed run. It returns the
// context of the run's log lines: ctx, holding the execution's span when the
// run read the instance (process).
func (e *Engine) run(ctx context.Context, it queue.Item) context.Context {
	id := it.InstanceID
	logCtx := ctx
	err := e.process(ctx, id, it.Reason == reasonSwept, &logCtx)
	switch {
	case errors.Is(err, errBusy), errors.Is(err, errBackingOff):
		// Nothing ran: the run that holds the instance, or the backoff's
		// own run, decides.
	case err == nil:
		e.ranWell(id)
	case ctx.Err() != nil:
	case runAgain(err):
		n, delay := e.ranBadly(id)
		e.log.WarnContext(logCtx, "running instance", "instance", id, "err", err, "failed_runs", n, "next_run_in", delay)
		it.Reason = "retry"
		go e.runAgain(ctx, it, delay)
	default:
		e.ranWell(id) // another node has it, or it is gone
		e.log.WarnContext(logCtx, "running instance", "instance", id, "err", err)
	}
	return logCtx
}

// errBusy is process's answer when it was asked to run an instance only
// if its lock was free, and it was not.
var errBusy = errors.New("engine: the instance's lock is held")

// errBackingOff is process's answer for an instance whose last run on this
// node failed and whose backoff has not run out: whatever woke it (the
// recovery sweep, a message, the queue), it waits for the run the backoff
// queues, so that the attempts of a run that could not commit (a full disk)
// are not invoked again sooner.
var errBackingOff = errors.New("engine: the instance's last run failed and its backoff has not run out")

// backoff is what a node keeps of an instance whose runs fail on it.
type backoff struct {
	// failed counts the runs that failed in a row.
	failed int
	// holding is set from a failed run's end, before it releases the
	// instance's lock, until the backoff queues the next run: meanwhile
	// no run of the instance starts on this node.
	holding bool
}

// holdOff stops instance id from running on this node until the backoff
// of its failed run lets it (letGo); called before the failed run
// releases the lock, so that a run waiting for it finds it held off.
func (e *Engine) holdOff(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.failing[id]
	if b == nil {
		b = &backoff{}
		e.failing[id] = b
	}
	b.holding = true
}

// heldOff reports whether instance id is held off on this node.
func (e *Engine) heldOff(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.failing[id]
	return b != nil && b.holding
}

// letGo lets instance id run again, as its backoff ran out.
func (e *Engine) letGo(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.failing[id]; b != nil {
		b.holding = false
	}
}

// runAgain reports whether a run that failed with err must be queued again:
// unless another node holds the instance now (the store fenced or refused
// its commit, or its lease or lock was lost), nothing else may wake it. A
// suspended instance has no lease for recovery to find, and a stimulus
// queued for its new bookmark waits for a run that reads it.
func runAgain(err error) bool {
	return !errors.Is(err, weft.ErrFenced) && !errors.Is(err, weft.ErrConflict) &&
		!errors.Is(err, ErrLeaseLost) && !errors.Is(err, weft.ErrNotFound)
}

// maxRunAgainDelay bounds the wait before an instance whose runs keep
// failing on this node is run again.
const maxRunAgainDelay = 5 * time.Minute

// ranBadly counts a failed run of instance id and returns how many failed
// in a row on this node, and how long to wait before the next:
// RecoveryInterval, doubling with each failure up to maxRunAgainDelay, so
// that an instance that cannot run (its store record unreadable, say)
// neither loads the node nor floods its log, and runs again by itself
// once the cause is gone.
func (e *Engine) ranBadly(id string) (int, time.Duration) {
	e.mu.Lock()
	b := e.failing[id]
	if b == nil {
		b = &backoff{}
		e.failing[id] = b
	}
	b.failed++
	n := b.failed
	e.mu.Unlock()
	delay := e.cfg.RecoveryInterval
	for i := 1; i < n && delay < maxRunAgainDelay; i++ {
		delay *= 2
	}
	return n, min(delay, maxRunAgainDelay)
}

// ranWell forgets the failed runs of instance id.
func (e *Engine) ranWell(id string) {
	e.mu.Lock()
	delete(e.failing, id)
	e.mu.Unlock()
}

// runAgain queues the item's instance again after a run failed, after
// delay and then doubling up to LockTTL while the queue itself cannot be
// reached, until ctx ends.
func (e *Engine) runAgain(ctx context.Context, it queue.Item, delay time.Duration) {
	id := it.InstanceID
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		e.letGo(id)
		err := e.queue.Push(ctx, it)
		if err == nil || ctx.Err() != nil {
			return
		}
		e.log.InfoContext(ctx, "could not queue a failed run again; retrying", "instance", id, "in", delay, "err", err)
		delay = min(2*delay, e.cfg.LockTTL)
	}
}

// seeded returns a random source for an instance's retry jitter, seeded
// from the instance and its state's sequence, so a replay decides alike.
func seeded(id string, seq uint64) func() float64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seq)
	h.Write(b[:])
	r := mrand.New(mrand.NewPCG(h.Sum64(), seq))
	return r.Float64
}

// sweep is singleton work: run every interval on the one node that holds
// the try-lock key (for ttl at most).
type sweep struct {
	key      string
	interval time.Duration
	ttl      time.Duration
	work     func(context.Context)
}

// sweepStripes is a store divided into partitions (redisstore.Partitioned)
// that hands out views of shares of them: a view answers the sweeps'
// reads of instances (DueTimers, ExpiredLeases, WaitingInboxes,
// ExpiredInstances, ListInstances) from its share, and every other call as
// the store.
type sweepStripes interface {
	SweepStripes() []store.Store
}

// sweeps lists the singleton sweeps. On a store with sweep stripes, the
// heavy sweeps of instances (the recovery of instances, retention) run
// once per stripe, each under a try-lock of its own
// ("weft-recovery-sweep:2/4"), so that the nodes share them; the timers
// sweep, the rest of the recovery sweep (queued stimuli, concurrency
// slots) and the sweeps of the catalog stay one singleton each.
func (e *Engine) sweeps() []sweep {
	out := []sweep{
		{"weft-schedules-sweep", e.cfg.ScheduleInterval, singletonTTL(e.cfg.ScheduleInterval), e.sweepSchedules},
		{"weft-batches-sweep", e.cfg.BatchInterval, batchesTTL(e.cfg.BatchInterval), e.sweepBatches},
		{"weft-stimuli-sweep", e.cfg.StimulusInterval, singletonTTL(e.cfg.StimulusInterval), e.sweepStimuli},
	}
	var stripes []store.Store
	if st, ok := e.store.(sweepStripes); ok {
		stripes = st.SweepStripes()
	}
	// The timers sweep stays one: it runs every few milliseconds, and
	// its turn (one read a partition, a push a due instance) is cheap,
	// while a try-lock per stripe and turn on every node is not
	// (measured: BENCHMARKS.md, "Partitions").
	out = append(out, sweep{"weft-timers-sweep", e.cfg.TimerInterval, singletonTTL(e.cfg.TimerInterval), func(ctx context.Context) { e.sweepTimers(ctx, e.store) }})
	if len(stripes) < 2 {
		return append(out,
			sweep{"weft-recovery-sweep", e.cfg.RecoveryInterval, singletonTTL(e.cfg.RecoveryInterval), e.recoverySweep},
			sweep{"weft-retention-sweep", e.cfg.RetentionInterval, singletonTTL(e.cfg.RetentionInterval), func(ctx context.Context) { e.sweepRetention(ctx, e.store) }},
		)
	}
	out = append(out, sweep{"weft-recovery-sweep", e.cfg.RecoveryInterval, singletonTTL(e.cfg.RecoveryInterval), e.recoverCatalog})
	for i, s := range stripes {
		// The try-lock keys ("weft-recovery-sweep:2/4") keep their form
		// from when stripes were called lanes: running clusters hold them
		// in Redis, and a node with other names would sweep a stripe at
		// the same time as an older node does during a rolling upgrade.
		name := fmt.Sprintf(":%d/%d", i, len(stripes))
		cursor := new(string) // the stripe's walk of pending instances; its singleton's alone
		out = append(out,
			sweep{"weft-recovery-sweep" + name, e.cfg.RecoveryInterval, singletonTTL(e.cfg.RecoveryInterval), func(ctx context.Context) { e.recoverInstances(ctx, s, cursor) }},
			sweep{"weft-retention-sweep" + name, e.cfg.RetentionInterval, singletonTTL(e.cfg.RetentionInterval), func(ctx context.Context) { e.sweepRetention(ctx, s) }},
		)
	}
	return out
}
