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
// The node's heartbeat scheduler (host/heartbeat) keeps alive everything
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
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	mrand "math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/weftworks/weft/host/definition"
	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/host/queue"
	"github.com/weftworks/weft/host/runner"
	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins"
)

// Plugins runs activities; *plugins.Runtime implements it.
type Plugins interface {
	Invoke(ctx context.Context, version string, call plugins.Call) ([]byte, error)
}

// Observer is told what the engine does, for metrics (host/metrics
// implements it). Its methods are called on the engine's hot paths: they
// must be fast and safe for concurrent use.
type Observer interface {
	// InstanceStatus says that an instance of workflow reached status:
	// pending when created, then each change its commits make.
	InstanceStatus(workflow string, status store.Status)
	// StepFinished says that a step of workflow ended, with outcome
	// "completed" or "failed", d after it started.
	StepFinished(workflow, step, outcome string, d time.Duration)
	// InstancesDeleted says that n instances were deleted, for reason
	// DeletedOnRequest or DeletedByRetention.
	InstancesDeleted(reason string, n int)
}

// Why instances were deleted, as Observer.InstancesDeleted is told.
const (
	// DeletedOnRequest: Delete was called (DELETE /v1/instances/{id}).
	DeletedOnRequest = "request"
	// DeletedByRetention: the retention sweep deleted finished instances
	// whose DeleteAfter had passed.
	DeletedByRetention = "retention"
)

// Bus carries notifications between the nodes of a cluster (host/notify
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

type nopObserver struct{}

func (nopObserver) InstanceStatus(string, store.Status)                {}
func (nopObserver) StepFinished(string, string, string, time.Duration) {}
func (nopObserver) InstancesDeleted(string, int)                       {}

// Config configures an Engine.
type Config struct {
	// NodeID names this node in leases and history. Defaults to a random id.
	NodeID string
	// Workers is how many instances this node runs at once. Defaults to
	// 2 × GOMAXPROCS.
	Workers int
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
	// Defaults to 500, at most store.MaxListLimit.
	RetentionBatch int
	// Heartbeat configures the heartbeat scheduler that times out attempts
	// whose guest stopped heartbeating. Defaults to heartbeat's defaults.
	Heartbeat heartbeat.Config
	// Observer is told about status changes and step latencies; nil
	// observes nothing.
	Observer Observer
	// Bus, in a cluster, tells the other nodes about inbox messages and
	// finished instances; nil on a single node.
	Bus Bus
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
		c.Workers = 2 * runtime.GOMAXPROCS(0)
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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Workers < 1:
		return fmt.Errorf("engine: Workers must be at least 1, got %d", c.Workers)
	case c.LockTTL < time.Second:
		return fmt.Errorf("engine: LockTTL must be at least 1s, got %s", c.LockTTL)
	case c.AcquireTimeout <= 0 || c.ActivityTimeout <= 0 || c.TimerInterval <= 0 || c.StimulusTTL <= 0 || c.StimulusInterval <= 0 || c.RecoveryInterval <= 0 || c.RetentionInterval <= 0:
		return errors.New("engine: AcquireTimeout, ActivityTimeout, TimerInterval, StimulusTTL, StimulusInterval, RecoveryInterval and RetentionInterval must be positive")
	case c.Retention < 0 || c.Retention > definition.MaxRetention:
		return fmt.Errorf("engine: Retention must be between 0 (keep forever) and %s, got %s", definition.MaxRetention, c.Retention)
	case c.RetentionBatch < 1 || c.RetentionBatch > store.MaxListLimit:
		return fmt.Errorf("engine: RetentionBatch must be between 1 and %d, got %d", store.MaxListLimit, c.RetentionBatch)
	}
	return nil
}

// DefaultRetention is the host's default Config.Retention
// (engine.retention): a week, long enough to look into what went wrong
// after a weekend, short enough that the store stops growing.
const DefaultRetention = 7 * 24 * time.Hour

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
	programs map[string]*runner.Program // by "name@version"
	waiters  map[string][]chan struct{} // by instance id: Wait calls to wake
	running  map[string]chan struct{}   // by instance id: executions on this node

	scheduler  *heartbeat.Service // renews leases and locks, watches attempts' heartbeats
	renewer    *renewer           // what the scheduler calls: renewals and its actions
	grantCache grantCache
}

// New returns an Engine.
func New(cfg Config, st store.Store, locks lock.Locker, q queue.Queue, pl Plugins) (*Engine, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), store: st, locks: locks, queue: q, plugins: pl,
		boot: randomHex(8), programs: map[string]*runner.Program{}, waiters: map[string][]chan struct{}{},
		running: map[string]chan struct{}{},
	}
	e.renewer = &renewer{e: e}
	svc, err := heartbeat.NewService(cfg.Heartbeat, e.renewer, e.renewer, heartbeat.Env{Logger: e.log})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.scheduler = svc
	return e, nil
}

// CheckDefinition parses and validates source against the stored plugins
// and workflows, as SaveDefinition does, without saving it: every problem,
// of syntax, structure, expressions or references, in one
// *definition.ValidationError.
func (e *Engine) CheckDefinition(ctx context.Context, source []byte) (*definition.Definition, error) {
	return definition.Load(source, catalog{ctx: ctx, st: e.store, timeout: e.cfg.ActivityTimeout})
}

// SaveDefinition validates source against the stored plugins and workflows
// and stores it as the definition's next version, unless it is the same as
// the latest version (created=false). Validation problems come back as a
// *definition.ValidationError listing every one.
func (e *Engine) SaveDefinition(ctx context.Context, source []byte) (*store.Definition, bool, error) {
	def, err := e.CheckDefinition(ctx, source)
	if err != nil {
		return nil, false, err
	}
	version, created, err := e.store.PutDefinition(ctx, def.Name, def.Hash(), source)
	if err != nil {
		return nil, false, fmt.Errorf("engine: saving definition %s: %w", def.Name, err)
	}
	d, err := e.store.GetDefinition(ctx, def.Name, version)
	return d, created, err
}

// Start creates an instance of the latest version of workflow with input,
// pinning the current version of every plugin it uses, and queues it. The
// instance is durably stored when Start returns.
//
// A non-empty id makes the call idempotent: when an instance with that id
// exists, of the same workflow, it is returned as it is, with created
// false; of another workflow, the error matches ErrIDInUse. Of concurrent
// Starts with one id, exactly one creates: the store's commit creates only
// if absent.
func (e *Engine) Start(ctx context.Context, workflow string, input any, id string) (inst *store.Instance, created bool, err error) {
	inst, created, err = e.create(ctx, workflow, input, id, nil)
	if err != nil {
		return nil, false, err
	}
	// An existing instance is queued again unless it has ended: the Start
	// that created it may have died before queueing it.
	if created || !inst.Status.Terminal() {
		e.push(ctx, inst.ID, "start")
	}
	return inst, created, nil
}

// push queues an instance, logging a failure: the sweeps find its work
// again (due timers, inbox, lease expiry).
func (e *Engine) push(ctx context.Context, id, reason string) {
	if err := e.queue.Push(ctx, queue.Item{InstanceID: id, Reason: reason}); err != nil && ctx.Err() == nil {
		e.log.Warn("queueing instance", "instance", id, "err", err)
	}
}

// create stores a new pending instance (idempotently by id, see Start)
// without queueing it.
func (e *Engine) create(ctx context.Context, workflow string, input any, id string, parent *store.ParentRef) (*store.Instance, bool, error) {
	if id != "" {
		// The common case of a retried start, answered without needing the
		// definition or its plugins, which may have changed since.
		if old, err := e.existing(ctx, workflow, id); old != nil || err != nil {
			return old, false, err
		}
	}
	d, err := e.store.GetDefinition(ctx, workflow, 0)
	if err != nil {
		return nil, false, fmt.Errorf("engine: workflow %s: %w", workflow, err)
	}
	prog, err := e.program(ctx, d.Name, d.Version)
	if err != nil {
		return nil, false, err
	}
	pins := map[string]string{}
	var pinErr error
	prog.Definition().Walk(func(_ string, s *definition.Step) bool {
		if s.Kind != definition.KindActivity || pins[s.Activity.Plugin] != "" {
			return true
		}
		p, err := e.store.GetPlugin(ctx, s.Activity.Plugin)
		if err != nil {
			pinErr = fmt.Errorf("engine: workflow %s uses plugin %s: %w", workflow, s.Activity.Plugin, err)
			return false
		}
		pins[s.Activity.Plugin] = p.Current.Version
		return true
	})
	if pinErr != nil {
		return nil, false, pinErr
	}
	in, err := json.Marshal(input)
	if err != nil {
		return nil, false, fmt.Errorf("engine: input of %s: %w", workflow, err)
	}
	if id == "" {
		id = newID(e.cfg.Now())
	}
	inst := &store.Instance{
		ID: id, Workflow: d.Name, Version: d.Version, Status: store.StatusPending, Input: in,
		Plugins: pins, Persistence: string(prog.Definition().Persistence), Parent: parent,
	}
	_, err = e.store.Commit(ctx, store.Commit{Instance: inst, History: []store.Event{{Type: "instance_created", Node: e.cfg.NodeID}}})
	if errors.Is(err, store.ErrExists) {
		// Another Start with the id created it between the check above
		// and this commit.
		old, err := e.existing(ctx, workflow, id)
		if old == nil && err == nil {
			err = fmt.Errorf("engine: instance %s exists and then did not: %w", id, store.ErrNotFound)
		}
		return old, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("engine: creating instance of %s: %w", workflow, err)
	}
	e.cfg.Observer.InstanceStatus(d.Name, store.StatusPending)
	// Read back what the store made of it (times, revision) before a worker
	// can change it.
	inst, err = e.store.GetInstance(ctx, id)
	return inst, err == nil, err
}

// existing returns the instance id when it exists and belongs to workflow,
// nil when there is none, and an error matching ErrIDInUse when it belongs
// to another workflow.
func (e *Engine) existing(ctx context.Context, workflow, id string) (*store.Instance, error) {
	old, err := e.store.GetInstance(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case old.Workflow != workflow:
		return nil, fmt.Errorf("engine: %w: instance %q belongs to workflow %q", ErrIDInUse, id, old.Workflow)
	}
	return old, nil
}

// ErrIDInUse is returned by Start when the id it was given names an
// instance of another workflow.
var ErrIDInUse = errors.New("id in use")

// Wait returns the instance once it is no longer pending or running
// (suspended or finished), or when ctx ends. Instances run by this node wake
// their waiters at once; others are polled.
//
// # Notes
//
// Instances run by other nodes wake the wait through the Bus when one is
// configured; polling every 50ms is the fallback for a lost notification.
func (e *Engine) Wait(ctx context.Context, id string) (*store.Instance, error) {
	return e.waitFor(ctx, id, func(s store.Status) bool { return s != store.StatusPending && s != store.StatusRunning })
}

// WaitFinished is Wait until the instance completed, failed or was
// cancelled.
func (e *Engine) WaitFinished(ctx context.Context, id string) (*store.Instance, error) {
	return e.waitFor(ctx, id, store.Status.Terminal)
}

func (e *Engine) waitFor(ctx context.Context, id string, done func(store.Status) bool) (*store.Instance, error) {
	for {
		ch := make(chan struct{}, 1)
		e.mu.Lock()
		e.waiters[id] = append(e.waiters[id], ch)
		e.mu.Unlock()
		inst, err := e.store.GetInstance(ctx, id)
		if err != nil || done(inst.Status) {
			e.unwait(id, ch)
			return inst, err
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
			e.unwait(id, ch)
		case <-ctx.Done():
			e.unwait(id, ch)
			return inst, ctx.Err()
		}
	}
}

func (e *Engine) unwait(id string, ch chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	list := e.waiters[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(e.waiters, id)
	} else {
		e.waiters[id] = list
	}
}

// subscribe listens to the other nodes' notifications.
func (e *Engine) subscribe(ctx context.Context) (stop func(), err error) {
	inbox, err := e.cfg.Bus.Subscribe(ctx, topicInbox, func(id []byte) { e.wakeExecution(string(id)) })
	if err != nil {
		return nil, fmt.Errorf("engine: subscribing to %s: %w", topicInbox, err)
	}
	changed, err := e.cfg.Bus.Subscribe(ctx, topicChanged, func(id []byte) { e.wake(string(id)) })
	if err != nil {
		inbox()
		return nil, fmt.Errorf("engine: subscribing to %s: %w", topicChanged, err)
	}
	return func() { inbox(); changed() }, nil
}

// publish tells the other nodes, when there are any.
func (e *Engine) publish(ctx context.Context, topic, id string) {
	if e.cfg.Bus == nil {
		return
	}
	if err := e.cfg.Bus.Publish(context.WithoutCancel(ctx), topic, []byte(id)); err != nil {
		e.log.Debug("publishing", "topic", topic, "instance", id, "err", err)
	}
}

// wake wakes the Wait calls of an instance after a commit.
func (e *Engine) wake(id string) {
	e.mu.Lock()
	list := e.waiters[id]
	delete(e.waiters, id)
	e.mu.Unlock()
	for _, ch := range list {
		ch <- struct{}{} // buffered, one send per channel
	}
}

// program returns the compiled program of a definition version.
func (e *Engine) program(ctx context.Context, name string, version int) (*runner.Program, error) {
	k := fmt.Sprintf("%s@%d", name, version)
	e.mu.Lock()
	p := e.programs[k]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	d, err := e.store.GetDefinition(ctx, name, version)
	if err != nil {
		return nil, fmt.Errorf("engine: definition %s version %d: %w", name, version, err)
	}
	// A stored version passed the rules of its save, which may have
	// been fewer: ParseSaved keeps its instances running.
	def, err := definition.ParseSaved(d.Source)
	if err != nil {
		return nil, fmt.Errorf("engine: definition %s version %d no longer parses: %w", name, version, err)
	}
	p = runner.Compile(def)
	e.mu.Lock()
	e.programs[k] = p
	e.mu.Unlock()
	return p, nil
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
	for i := 0; i < e.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.work(ctx)
		}()
	}
	e.requeuePending(ctx)
	for _, w := range []struct {
		key      string
		interval time.Duration
		work     func(context.Context)
	}{
		{"weft-timers-sweep", e.cfg.TimerInterval, e.sweepTimers},
		{"weft-recovery-sweep", e.cfg.RecoveryInterval, e.recover},
		{"weft-stimuli-sweep", e.cfg.StimulusInterval, e.sweepStimuli},
		{"weft-retention-sweep", e.cfg.RetentionInterval, e.sweepRetention},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.singleton(ctx, w.key, w.interval, w.work)
		}()
	}
	<-ctx.Done()
	return nil
}

func (e *Engine) work(ctx context.Context) {
	for {
		d, err := e.queue.Pop(ctx)
		if err != nil {
			return // ctx ended
		}
		if err := e.process(ctx, d.Item().InstanceID, d.Item().Reason == reasonInbox); err != nil && ctx.Err() == nil {
			e.log.Warn("running instance", "instance", d.Item().InstanceID, "err", err)
		}
		_ = d.Ack(context.WithoutCancel(ctx))
	}
}

// singleton runs work every interval on the one node that holds the
// try-lock key; the others skip their turn (docs/cluster.md, "Singleton
// work").
func (e *Engine) singleton(ctx context.Context, key string, interval time.Duration, work func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lease, ok, err := e.locks.TryAcquire(ctx, key, singletonTTL(interval))
		if err != nil || !ok {
			continue
		}
		work(ctx)
		lease.Release(context.WithoutCancel(ctx))
	}
}

// singletonTTL is the lock TTL of singleton work run every interval: a
// turn that takes longer may overlap the next node's.
func singletonTTL(interval time.Duration) time.Duration { return max(time.Second, 4*interval) }

// sweepTimers queues the instances whose timers are due.
func (e *Engine) sweepTimers(ctx context.Context) {
	due, err := e.store.DueTimers(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("sweeping timers", "err", err)
	}
	seen := map[string]bool{}
	for _, tm := range due {
		if !seen[tm.InstanceID] {
			seen[tm.InstanceID] = true
			_ = e.queue.Push(ctx, queue.Item{InstanceID: tm.InstanceID, Reason: "timer"})
		}
	}
}

// requeuePending queues the instances created but not yet run: the
// in-process ready queue does not survive a restart. (Under lazy
// persistence an instance stays pending in the store until it first
// suspends or finishes, so this also resumes instances a crash interrupted.)
func (e *Engine) requeuePending(ctx context.Context) {
	n := 0
	for cursor := ""; ; {
		items, next, err := e.store.ListInstances(ctx, store.InstanceFilter{Status: store.StatusPending, Cursor: cursor, Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("listing pending instances", "err", err)
			}
			return
		}
		for _, in := range items {
			e.push(ctx, in.ID, "recovery")
			n++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if n > 0 {
		e.log.Info("queued pending instances at start-up", "count", n)
	}
}

// recover queues the instances whose lease expired: their node stopped
// renewing it (it died, or lost the instance). Lease expiry, not "not
// updated for a while", decides (docs/architecture.md, "Locks and
// fencing"); the instance lock then makes sure a live instance is never run
// twice.
func (e *Engine) recover(ctx context.Context) {
	ids, err := e.store.ExpiredLeases(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("finding expired leases", "err", err)
	}
	for _, id := range ids {
		e.log.Info("recovering instance whose lease expired", "instance", id)
		e.push(ctx, id, "recovery")
	}
	// Inboxes waiting longer than a lease's TTL lost their wake-up (the
	// node that wrote the message died before queueing the instance, or
	// its queue was in memory): queue them again. A worker takes such an
	// item only when the instance's lock is free.
	waiting, err := e.store.WaitingInboxes(ctx, e.cfg.Now().Add(-e.cfg.LockTTL), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("finding waiting inboxes", "err", err)
	}
	for _, id := range waiting {
		e.push(ctx, id, reasonInbox)
	}
	// Likewise instances created and never run (the node that created
	// them died before queueing them, or a full queue refused the push of
	// an execution): the oldest pending ones first, a lease's TTL old.
	pending, _, err := e.store.ListInstances(ctx, store.InstanceFilter{Status: store.StatusPending, Limit: 1000})
	if err != nil && ctx.Err() == nil {
		e.log.Warn("listing pending instances", "err", err)
	}
	cutoff := e.cfg.Now().Add(-e.cfg.LockTTL)
	for _, in := range pending {
		if !in.CreatedAt.Before(cutoff) {
			break // oldest first: the rest are younger
		}
		e.push(ctx, in.ID, reasonInbox)
	}
}

// reasonInbox is the queue reason of an instance whose inbox waited too
// long, or that stayed pending too long; see recover.
const reasonInbox = "inbox"

// pushSoon queues an instance from inside an execution, waiting at most a
// moment for room: a worker that blocked on a full queue could wait for
// itself. An item it could not queue is found by the recovery sweep.
func (e *Engine) pushSoon(ctx context.Context, id, reason string) {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := e.queue.Push(ctx, queue.Item{InstanceID: id, Reason: reason}); err != nil {
		e.log.Info("could not queue the instance now; the recovery sweep will", "instance", id, "err", err)
	}
}

// sweepStimuli moves stimuli whose TTL ended without a bookmark to the dead
// letters, and lets the store forget old delivered ones.
func (e *Engine) sweepStimuli(ctx context.Context) {
	dead, err := e.store.ExpireStimuli(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("expiring stimuli", "err", err)
	}
	for _, s := range dead {
		e.log.Info("stimulus found no bookmark before its TTL; moved to the dead letters", "stimulus", s.ID, "name", s.Name, "key", s.Key)
	}
}

// catalog is the store seen as a definition.Catalog, with the engine's
// default activity timeout (a definition.TimeoutDefaults).
type catalog struct {
	ctx     context.Context
	st      store.Store
	timeout time.Duration
}

// DefaultActivityTimeout implements definition.TimeoutDefaults.
func (c catalog) DefaultActivityTimeout() time.Duration { return c.timeout }

func (c catalog) HasPlugin(name string) bool {
	_, err := c.st.GetPlugin(c.ctx, name)
	return err == nil
}

func (c catalog) HasActivity(plugin, activity string) bool {
	p, err := c.st.GetPlugin(c.ctx, plugin)
	if err != nil {
		return false
	}
	for _, a := range p.Current.Activities {
		if a == activity {
			return true
		}
	}
	return false
}

// Activities lists the activities of the plugin's current version, for
// the suggestion after a misspelt one.
func (c catalog) Activities(plugin string) []string {
	p, err := c.st.GetPlugin(c.ctx, plugin)
	if err != nil {
		return nil
	}
	return p.Current.Activities
}

func (c catalog) Workflow(name string) (*definition.Definition, bool) {
	d, err := c.st.GetDefinition(c.ctx, name, 0)
	if err != nil {
		return nil, false
	}
	def, err := definition.ParseSaved(d.Source)
	return def, err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newID returns a time-ordered instance id: milliseconds, then randomness.
func newID(now time.Time) string {
	b := make([]byte, 6, 14)
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return hex.EncodeToString(b) + randomHex(8)
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
