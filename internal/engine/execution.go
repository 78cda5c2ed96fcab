package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
	"github.com/weftworks/weft/plugins/tape"
)

// execution is one run of an instance under its lock: from taking the lock
// until the instance is suspended or finished. One goroutine, the run loop,
// applies inputs to the runner's state and commits what they changed; the
// attempts it starts and the heartbeat scheduler reach it through channels
// and atomics only.
type execution struct {
	e   *Engine
	ctx context.Context
	// lease is the instance's lock; its token fences every commit.
	lease lock.Lease
	prog  *runner.Program

	// The instance as last committed: inst is what the store holds (the
	// next commit compares its Rev), status what the observer was told,
	// storedTimers and storedBookmarks whether it holds any: a commit
	// leaves empty sets alone rather than clear them again.
	inst            *weft.Instance
	status          weft.Status
	storedTimers    bool
	storedBookmarks bool

	// The instance as the runner has it now, not yet committed: its state,
	// and the timers and bookmarks it waits on, which every commit writes
	// whole.
	st        *runner.State
	timers    map[string]weft.Timer
	bookmarks map[string]weft.Bookmark // by token

	// next is what the next commit writes besides them.
	next nextCommit

	// What this run has read, so that nothing is applied twice: seen are
	// the inbox messages applied, checked the bookmarks already matched
	// against queued stimuli. wake is signalled when there may be more to
	// read (a message written on this node), or when the scheduler found
	// the lease or lock lost.
	seen    map[string]bool
	checked map[string]bool
	wake    chan struct{}

	// inflight are the activity attempts started and not yet ended.
	inflight inFlight

	// searchWarned holds the search attributes whose values did not fit,
	// logged once per execution (searchOf).
	searchWarned map[string]bool

	// sched is what the heartbeat scheduler shares with this execution: it
	// renews the lock and the lease from its own goroutine.
	sched scheduling

	// err is the first failed commit: a fenced or refused writer must stop.
	err error
	// drained is set when the last commit checked that the inbox held no
	// message it did not consume (Commit.Drains), so the run need not read
	// it again before it ends.
	drained bool
	// deferrals are the attempts the last Apply's Invokes could not start
	// (step limits), for apply to hand back to the runner once it has
	// performed that Apply's other actions.
	deferrals []runner.ActivityDeferred
	// reopened: the instance had finished, and a message in its inbox
	// runs it again (a retry, a reset); migrateOnly: it had finished, and
	// the run only applies a migration to it, which leaves it finished.
	reopened, migrateOnly bool

	// span is this execution's span (tracing.SpanExecution), a no-op one when the instance
	// is not traced. traced says its spans are recorded: then each Apply
	// follows the step executions it ends (stepsEnded), stepsDone those
	// whose span was emitted, and lists the definition's step lists.
	span      trace.Span
	traced    bool
	stepsDone map[string]bool
	lists     map[string][]*definition.Step
	// recordSaid caches whether the definition says record anywhere
	// (recordPolicy): 0 not looked yet, 1 no, 2 yes.
	recordSaid uint8

	// logCtx is the context the execution's log lines are logged with
	// (logAt): ctx holding the execution's span, so that a node's logger
	// wrapped by tracing.LogHandler gives each line the instance's trace.
	// ctx itself does not hold it: the store and the queue are called
	// with ctx, and what a span in it would change there is not a log
	// line's business. Set once, before the scheduler's goroutine sees
	// the execution.
	logCtx context.Context
}

// logAt logs a line about the execution's instance at level: with its
// instance and workflow, and the execution's trace when it has one (logCtx).
// args are key-value pairs, as slog.Logger.Log takes them. The
// scheduler's goroutine calls it too: it reads only what does not change
// during the execution.
func (x *execution) logAt(level slog.Level, msg string, args ...any) {
	l := x.e.log
	if !l.Enabled(x.logCtx, level) {
		return
	}
	l.Log(x.logCtx, level, msg, append([]any{"instance", x.inst.ID, "workflow", x.inst.Workflow}, args...)...)
}

// logContext is ctx holding span, for the log lines of an execution: ctx as it
// is when span has no valid context (tracing off, an instance without a
// trace).
func logContext(ctx context.Context, span trace.Span) context.Context {
	if !span.SpanContext().IsValid() {
		return ctx
	}
	return trace.ContextWithSpan(ctx, span)
}

// nextCommit is what an execution writes at its next commit besides the
// state, timers and bookmarks: the changes made since the last one, which
// the commit clears.
type nextCommit struct {
	// dirty is set when anything changed since the last commit.
	dirty   bool
	history []weft.HistoryEntry
	// consumed are inbox messages applied since the last commit.
	consumed []string
	// delivered is a queued stimulus applied since the last commit, and
	// deliveredOutcome its answer when it was queued, kept through its
	// delivery: a repeated send answers what the first did.
	delivered        string
	deliveredOutcome json.RawMessage
	// children are the child instances the runner started since the last
	// commit; the commit creates them before it writes the parent.
	children []runner.StartChild
	// stepEnds are the step executions that ended since the last commit,
	// whose spans are emitted once it succeeds.
	stepEnds []stepEnd
}

// inFlight are an execution's activity attempts that have not ended. Each
// runs on its own goroutine and sends its end on results, which only the
// run loop reads.
type inFlight struct {
	results  chan result
	attempts map[string]flight // by token
}

// flight is one attempt in flight.
type flight struct {
	// hb is the attempt's heartbeat, through which it is cancelled.
	hb *call.Heartbeat
	// inv names the attempt, for the notes of a superseded execution.
	inv runner.Invoke
	// span is the attempt's span, ended with its outcome.
	span trace.Span
	// tape is the attempt's recording, nil when its policy records none.
	tape *recording
}

// scheduling is an execution's side of the heartbeat scheduler, which
// extends its lock, renews its lease and watches its attempts from another
// goroutine: what the scheduler touches is atomic or a channel.
type scheduling struct {
	// key names the execution in the scheduler's items: the instance and
	// the lock's token, so that two executions of one instance on one node
	// (the first lost its lock) never share an item.
	key string
	// leased is true once the scheduler renews the store lease (the run
	// loop's view); held mirrors it for the scheduler's goroutine.
	leased bool
	held   atomic.Bool
	// lost is set by the scheduler when the lease or lock was lost: the
	// execution must stop, and write nothing more.
	lost atomic.Bool
	// lockUntil is when the lock ends (Unix ns, by the engine's clock)
	// unless extended: set when it is taken and at each extension.
	lockUntil atomic.Int64
	// persist carries the scheduler's requests to commit a running
	// instance that has no lease yet (lazy persistence), so that its long
	// attempt becomes recoverable and its details can be stored; exited is
	// closed when the execution stops reading it.
	persist chan chan error
	exited  chan struct{}
}

// result is an activity attempt's end.
type result struct {
	token string
	// version and activity name the call, for an output that is not JSON
	// (its error is made here, not by the runtime).
	version, activity string
	// out is the output, with its secrets masked by the runtime: what the
	// state, the vars and the history keep.
	out []byte
	err error
	hb  *call.Heartbeat
	// requests are the attempt's outbound HTTP requests, and logs its log
	// lines, for its record.
	requests []call.Request
	logs     weft.AttemptLogs
}

// process runs instance id until it is suspended or finished.
//
// With onlyIfFree it gives up at once, with errBusy, when another
// execution holds the instance's lock: that execution reads the inbox
// before it finishes, so a wake-up for an inbox (reasonSwept) has nothing
// to add. An instance whose last run here failed is not run before its
// backoff runs out (errBackingOff; see Engine.run).
//
// It sets *logCtx, once it has read the instance, to the context of the
// run's log lines, holding the execution's span (logContext): the lines its
// caller logs about the run then carry the instance's trace.
func (e *Engine) process(ctx context.Context, id string, onlyIfFree bool, logCtx *context.Context) (err error) {
	var lease lock.Lease
	asked := e.cfg.Now()
	if onlyIfFree {
		var ok bool
		lease, ok, err = e.locks.TryAcquire(ctx, InstanceLockKey(id), e.cfg.LockTTL)
		if err == nil && !ok {
			return errBusy
		}
	} else {
		actx, cancel := context.WithTimeout(ctx, e.cfg.AcquireTimeout)
		lease, err = e.locks.Acquire(actx, InstanceLockKey(id), e.cfg.LockTTL)
		cancel()
	}
	if err != nil {
		return fmt.Errorf("locking instance %s: %w", id, err)
	}
	// The lock's TTL started a round trip ago at most; the lease's own
	// Expiry is by the locker's clock, which need not be the engine's.
	acquired := e.cfg.Now()
	defer lease.Release(context.WithoutCancel(ctx))
	// A run that failed here holds the instance off until its backoff
	// runs out; this check, under the lock, sees the hold of a failed run
	// that this one waited for, as the hold is set before that run
	// releases the lock (below).
	if e.heldOff(id) {
		return errBackingOff
	}
	defer func() {
		if err != nil && ctx.Err() == nil && runAgain(err) {
			e.holdOff(id)
		}
	}()

	// Registered before the read: a message that the read does not see
	// (inst.InboxWaiting) wakes the execution.
	wake := make(chan struct{}, 1)
	e.register(id, wake)
	defer e.unregister(id, wake)
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	span := e.startRun(ctx, inst, asked)
	defer func() { endRun(span, err) }()
	lctx := logContext(ctx, span)
	*logCtx = lctx
	if span.IsRecording() {
		span.AddEvent("lock", trace.WithTimestamp(acquired), trace.WithAttributes(attrDurationMS.Float64(millis(acquired.Sub(asked)))))
	}
	if inst.Status == weft.StatusRunning && !inst.Lease.IsZero() && !inst.Lease.Held(e.cfg.NodeID, e.boot) {
		// Its lease was another node's (or this node's previous life's):
		// that node died, stalled or handed it back, and this run takes
		// the instance over.
		e.cfg.Observer.InstanceTakenOver()
		e.log.InfoContext(lctx, "taking over an instance from another node", "instance", id, "workflow", inst.Workflow, "previous_node", inst.Lease.Node)
		if span.IsRecording() {
			span.AddEvent("takeover", trace.WithAttributes(attrPreviousNode.String(inst.Lease.Node)))
		}
	}
	var reopened, migrateOnly bool
	if inst.Status.Terminal() {
		// One read of the inbox decides: a retry delivered after it is
		// not consumed by the settling below, which takes only what it
		// read, and its push runs the instance again.
		msgs, err := e.store.Inbox(ctx, id)
		if err != nil {
			return err
		}
		reopened = reopens(inst, msgs)
		migrateOnly = !reopened && slices.ContainsFunc(msgs, func(m weft.Message) bool { return m.Kind == weft.MessageMigrate })
		if !reopened && !migrateOnly {
			return e.settleInbox(ctx, lctx, inst, lease, msgs)
		}
		// A failed instance asked to retry, or any finished one asked to
		// reset, runs: the execution applies the request from the inbox
		// like any message. It is re-opened: the
		// commit that finishes it again decides its DeleteAfter from that
		// finish, and one that leaves it running clears it (the retry in
		// its inbox keeps the retention sweep off it until then).
		inst.InboxWaiting = true
		if reopened {
			inst.DeleteAfter = time.Time{}
		}
	}
	prog, err := e.program(ctx, inst.Workflow, inst.Version)
	if err != nil {
		return err
	}
	x := &execution{
		e: e, ctx: ctx, lease: lease, prog: prog,
		inst: inst, status: inst.Status,
		st: &runner.State{}, timers: map[string]weft.Timer{}, bookmarks: map[string]weft.Bookmark{},
		seen: map[string]bool{}, checked: map[string]bool{}, wake: wake,
		reopened: reopened, migrateOnly: migrateOnly,
		span: span, traced: e.traced(inst), stepsDone: map[string]bool{}, logCtx: lctx,
		inflight: inFlight{results: make(chan result), attempts: map[string]flight{}},
		sched: scheduling{
			key:     id + "#" + strconv.FormatUint(lease.Token(), 10),
			persist: make(chan chan error), exited: make(chan struct{}),
		},
	}
	x.sched.lockUntil.Store(acquired.Add(e.cfg.LockTTL).UnixNano())
	defer close(x.sched.exited)
	// The heartbeat scheduler extends the lock while the instance runs; a
	// lock it finds lost stops the execution like a lost lease.
	e.renewer.holdLock(x)
	defer e.renewer.releaseLock(x)
	if len(inst.State) > 0 {
		st, err := runner.Decode(inst.State, inst.Input, inst.Vars)
		if err != nil {
			return fmt.Errorf("instance %s: state does not decode: %w", id, err)
		}
		x.st = st
	}
	// An instance at revision 1 is as Start created it, without timers or
	// bookmarks: most executions are the first of their instance, and the
	// two reads are two round trips to Redis.
	if inst.Rev > 1 {
		timers, err := e.store.Timers(ctx, id)
		if err != nil {
			return err
		}
		for _, t := range timers {
			x.timers[t.ID] = t
		}
		x.storedTimers = len(timers) > 0
		bms, err := e.store.Bookmarks(ctx, id)
		if err != nil {
			return err
		}
		for _, b := range bms {
			x.bookmarks[b.Token] = b
		}
		x.storedBookmarks = len(bms) > 0
	}
	defer func() {
		if x.sched.leased {
			e.renewer.releaseLease(x)
		}
	}()
	return x.run()
}

func (x *execution) run() error {
	if x.st.InFlight() {
		// Loaded state: whatever attempts it shows in flight died with the
		// execution that started them; the next attempts resume from the
		// details the heartbeat scheduler persisted for them. (Only then:
		// applying an event to a suspended state would persist it again
		// for nothing.)
		beats, err := x.e.store.Heartbeats(x.ctx, x.inst.ID)
		if err != nil {
			return fmt.Errorf("instance %s: reading persisted heartbeats: %w", x.inst.ID, err)
		}
		rec := runner.Recover{}
		if len(beats) > 0 {
			rec.Heartbeats = make(map[string]json.RawMessage, len(beats))
			for _, b := range beats {
				rec.Heartbeats[b.Token] = b.Details
			}
		}
		x.apply(rec)
		// Take the instance over in the store at once, before any new
		// attempt can end: the commit raises the fence to this lock's
		// token, so the execution this one replaces (paused, not dead)
		// can no longer write, and the lease stops recovery from queueing
		// the instance again.
		if x.err == nil && x.next.dirty {
			x.err = x.commit(false)
		}
	}
	held := false
	if x.inst.Status == weft.StatusPending && x.inst.Hold != nil {
		released, err := x.release()
		if err != nil {
			return err
		}
		if !released {
			// Its workflow is still paused. A cancellation is the one
			// message it takes while held.
			if cancel, err := x.cancelRequested(); !cancel || err != nil {
				return err
			}
			held = true
		}
	}
	if !held && (x.inst.Status == weft.StatusPending || x.reopened) {
		// It starts, or runs again (a failed one asked to retry, a
		// finished one to reset): under a concurrency limit, once it has a
		// slot.
		admitted, err := x.admit()
		if err != nil {
			return err
		}
		switch {
		case admitted && x.inst.Status == weft.StatusPending:
			// As stored: the state keeps these bytes as its input's JSON.
			x.apply(runner.Start{Input: x.inst.Input})
		case !admitted && !x.next.dirty:
			// It waits for its turn, which queues it. A cancellation is
			// the one message it takes while it waits: it leaves the line.
			if cancel, err := x.cancelRequested(); !cancel || err != nil {
				return err
			}
		}
	}
	// Attempts whose turn for a step slot came, before their timer.
	x.startPromoted()
	// Due timers, earliest first.
	now := x.e.cfg.Now()
	var due []weft.Timer
	for _, t := range x.timers {
		if !t.Due.After(now) {
			due = append(due, t)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Due.Before(due[j].Due) })
	for _, t := range due {
		if _, still := x.timers[t.ID]; still {
			delete(x.timers, t.ID)
			x.next.dirty = true
			x.e.cfg.Observer.TimerFired(now.Sub(t.Due))
			if x.span.IsRecording() {
				x.event("timer", now, attrKind.String(t.Kind), attrLateMS.Float64(millis(now.Sub(t.Due))))
			}
			x.apply(runner.TimerFired{Token: t.ID})
		}
	}

	// The inbox is read on the first pass if it held a message when the
	// instance was read, when the execution is woken (a message for it was
	// written on this node or sent through the bus), and when nothing is
	// in flight, unless the last commit drained it; not after every
	// activity result. A commit made with nothing in flight, which ends
	// the run unless a message comes, checks the inbox itself
	// (Commit.Drains): a message that arrived without waking the execution
	// refuses it, and is read and applied before the next try.
	poll := x.inst.InboxWaiting
	for {
		if stop, err := x.settle(poll); stop {
			return err
		}
		if x.err != nil {
			// Another node holds the instance now (ErrFenced), or it changed
			// under us (ErrConflict): stop, and leave the work to the holder.
			done := x.cancelAll()
			switch {
			case errors.Is(x.err, weft.ErrFenced), errors.Is(x.err, weft.ErrConflict), errors.Is(x.err, ErrLeaseLost):
				x.superseded(done, x.err)
			case x.ctx.Err() != nil:
				x.handBack() // shutting down, seen first as a failed store call
			}
			return x.err
		}
		if !x.next.dirty {
			return nil
		}
		if err := x.commit(true); !errors.Is(err, store.ErrInboxNotEmpty) {
			return err
		}
		poll = true
	}
}

// settle applies messages, queued stimuli and attempts' ends until nothing
// new arrives and no attempt is in flight, or a commit fails (x.err). With
// poll it reads the inbox first. It says stop, with the error run returns,
// when the execution must end at once: its lease or lock was lost, or the
// node is shutting down.
func (x *execution) settle(poll bool) (bool, error) {
	for x.err == nil {
		// Messages (stimuli, children's ends, cancellation) and queued
		// stimuli for new bookmarks, until nothing new arrives and no
		// attempt is in flight.
		var n int
		var err error
		if poll || (len(x.inflight.attempts) == 0 && !x.drained) {
			n, err = x.pollInbox()
			poll = false
		}
		if err == nil {
			var m int
			m, err = x.pollQueued()
			n += m
		}
		if err != nil {
			x.err = err
			break
		}
		if n == 0 && len(x.inflight.attempts) == 0 {
			break
		}
		if len(x.inflight.attempts) == 0 {
			continue
		}
		select {
		case r := <-x.inflight.results:
			f := x.inflight.attempts[r.token]
			inv := f.inv
			delete(x.inflight.attempts, r.token)
			if x.ctx.Err() != nil {
				// The node is stopping and this result may be the stop's
				// own cancellation, picked before ctx.Done: it ends as the
				// other attempts do (cancelAll), not as a failure.
				x.e.renewer.forget(attemptItem(x.sched.key, r.token))
				endStopped(f.span, r.err == nil)
				x.cancelAll()
				x.handBack()
				return true, x.ctx.Err()
			}
			// The attempt ended when its result came, before its slot
			// goes to the next in the key's line: its end is recorded
			// at this time, so that no attempt the slot goes to next on
			// this node is recorded as starting before it ended.
			ended := x.e.cfg.Now()
			if s := inv.Slot; s != nil {
				x.e.releaseStepSlot(x.ctx, x.logCtx, s.Key, s.Holder, s.Limit)
			}
			in := x.input(r, inv, x.e.renewer.forget(attemptItem(x.sched.key, r.token)))
			refused := !awaited(x.st.Root, r.token)
			if refused {
				// The instance moved on without it (its step was
				// cancelled, timed out, reset): the runner refuses its end.
				x.e.cfg.Observer.AttemptAbandoned(AbandonedSuperseded)
			}
			endAttempt(f.span, in, refused)
			// Before the commit that records the attempt's end.
			x.keepTape(f, in)
			x.applyAt(in, ended)
		case done := <-x.sched.persist:
			if !x.sched.leased {
				x.err = x.commit(false)
			}
			done <- x.err
		case <-x.wake:
			poll = true
			if x.sched.lost.Load() {
				err := fmt.Errorf("%w: instance %s", ErrLeaseLost, x.inst.ID)
				x.superseded(x.cancelAll(), err)
				return true, err
			}
		case <-x.ctx.Done():
			// Shutting down: stop the attempts and hand the instance back;
			// it is resumed from its last persisted state (activities run
			// at least once).
			x.cancelAll()
			x.handBack()
			return true, x.ctx.Err()
		}
	}
	return false, nil
}

// pollInbox applies the instance's inbox messages not applied yet and
// returns how many it applied.
func (x *execution) pollInbox() (int, error) {
	msgs, err := x.e.store.Inbox(x.ctx, x.inst.ID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		if x.seen[m.ID] {
			continue
		}
		if m.Kind == weft.MessageMigrate {
			if len(x.inflight.attempts) > 0 || x.st.InFlight() {
				// A migration applies at rest; the messages after it
				// wait for it, in order.
				break
			}
			x.seen[m.ID] = true
			x.next.consumed = append(x.next.consumed, m.ID)
			n++
			if x.span.IsRecording() {
				x.event("message", x.e.cfg.Now(), attrKind.String(string(m.Kind)))
			}
			if err := x.migrate(m); err != nil {
				return n, err
			}
			continue
		}
		entry, err := decodeMessage(m)
		if err != nil {
			return n, fmt.Errorf("instance %s: %w", x.inst.ID, err)
		}
		if x.span.IsRecording() {
			x.event("message", x.e.cfg.Now(), attrKind.String(string(m.Kind)))
		}
		x.seen[m.ID] = true
		x.next.consumed = append(x.next.consumed, m.ID)
		n++
		if m.Kind == weft.MessageRetry && (x.st.Status != weft.StatusFailed || retrySeq(m) != x.st.Seq) {
			// A retry of a failure that is not the instance's now (it was
			// retried already, ran again, maybe failed again): recorded,
			// not applied.
			x.next.history = append(x.next.history, ignoredRetry(m, x.st.Status, x.e.cfg.Now()))
			x.next.dirty = true
			continue
		}
		if entry.note != nil {
			// Recorded as it is; the runner's state does not change.
			ev := *entry.note
			ev.Time = x.e.cfg.Now()
			x.next.history = append(x.next.history, ev)
			x.next.dirty = true
			continue
		}
		x.apply(entry.input)
	}
	return n, nil
}

// pollQueued delivers, to bookmarks not checked yet, the oldest queued
// stimulus that matches each: a stimulus that arrived before its bookmark
// existed. Each delivery is committed on its own, since a commit consumes
// one queued stimulus.
func (x *execution) pollQueued() (int, error) {
	n := 0
	for token, b := range x.bookmarks {
		if x.checked[token] {
			continue
		}
		x.checked[token] = true
		pending, err := x.e.store.PendingStimuli(x.ctx, b.Event, b.Key)
		if err != nil {
			return n, err
		}
		if len(pending) == 0 {
			continue
		}
		s := pending[0]
		payload, err := payloadValue(s.Payload)
		if err != nil {
			return n, fmt.Errorf("instance %s: the payload of queued stimulus %s: %w", x.inst.ID, s.ID, err)
		}
		x.next.delivered, x.next.deliveredOutcome = s.ID, queuedOutcome(s)
		if x.span.IsRecording() {
			x.event("message", x.e.cfg.Now(), attrKind.String("queued_stimulus"))
		}
		x.apply(runner.StimulusDelivered{Token: token, Payload: payload})
		if x.next.delivered != "" { // not committed by a Persist action
			if err := x.commit(false); err != nil {
				return n, err
			}
		}
		n++
	}
	return n, nil
}

// handBack ends the instance's lease now, when this execution holds one,
// so that recovery on any node takes the instance over at its next sweep
// instead of after the lease's TTL: a node shutting down hands its work
// back. (The lock is released as the execution returns.)
func (x *execution) handBack() {
	if !x.sched.leased {
		return
	}
	ctx := context.WithoutCancel(x.ctx)
	_, err := x.e.store.RenewLeases(ctx, store.LeaseRenewal{Node: x.e.cfg.NodeID, Boot: x.e.boot, IDs: []string{x.inst.ID}, Expiry: x.e.cfg.Now()})
	if err != nil {
		x.logAt(slog.LevelWarn, "handing an instance back at shutdown; its lease will expire instead", "err", err)
	}
}

// stoppedAttempt is an attempt that completed after its execution was
// told to stop, with its log lines.
type stoppedAttempt struct {
	inv  runner.Invoke
	logs weft.AttemptLogs
}

// cancelAll stops the attempts in flight and returns those that completed
// anyway (before they saw the cancellation).
func (x *execution) cancelAll() (completed []stoppedAttempt) {
	for _, f := range x.inflight.attempts {
		f.hb.RequestCancel()
	}
	for range x.inflight.attempts {
		r := <-x.inflight.results
		x.e.renewer.forget(attemptItem(x.sched.key, r.token))
		f := x.inflight.attempts[r.token]
		endStopped(f.span, r.err == nil)
		if r.err == nil {
			completed = append(completed, stoppedAttempt{inv: f.inv, logs: r.logs})
		}
	}
	clear(x.inflight.attempts)
	return completed
}

// settleInbox empties a finished instance's inbox of msgs: notes of refused late
// completions (which may arrive after the holder finished) go to its
// history; messages nothing will apply any more (a child's end after the
// parent was cancelled) are dropped.
//
// Its log lines are logged with logCtx, the execution's (process).
func (e *Engine) settleInbox(ctx, logCtx context.Context, inst *weft.Instance, lease lock.Lease, msgs []weft.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	c := store.Commit{Instance: inst, Fence: lease.Token()}
	for _, m := range msgs {
		c.Consumed = append(c.Consumed, m.ID)
		if m.Kind == weft.MessageRetry {
			// A retry of an earlier failure (reopens found none of the
			// failure it is at): recorded, as a running instance records
			// it (pollInbox), not dropped unseen.
			c.History = append(c.History, ignoredRetry(m, inst.Status, e.cfg.Now()))
			continue
		}
		if m.Kind != weft.MessageNote {
			continue
		}
		entry, err := decodeMessage(m)
		if err != nil {
			// The instance is finished: the note is consumed either way.
			e.log.WarnContext(logCtx, "settling the inbox of a finished instance", "instance", inst.ID, "workflow", inst.Workflow, "message", m.ID, "err", err)
			continue
		}
		ev := *entry.note
		ev.Time = e.cfg.Now()
		c.History = append(c.History, ev)
	}
	if _, err := e.store.Commit(ctx, c); err != nil {
		return fmt.Errorf("instance %s: settling the inbox of a finished instance: %w", inst.ID, err)
	}
	e.changed(inst.ID)
	return nil
}

// ignoredRetry is the history entry of a retry message that retries a
// failure the instance is not at (it was retried already, ran again,
// maybe failed again): recorded with who asked, not applied.
func ignoredRetry(m weft.Message, status weft.Status, now time.Time) weft.HistoryEntry {
	e := weft.HistoryEntry{Type: weft.HistoryEventIgnored, Time: now,
		Data: json.RawMessage(fmt.Sprintf(`{"event":"retry","reason":"it retries an earlier failure; the instance is %s"}`, status))}
	if m.Op != nil {
		e.Actor = m.Op.Actor
	}
	return e
}

// superseded is called when another node took the instance over (its lease
// or lock was lost, or the store fenced a commit): the attempt ends this
// execution could not commit — the completions that arrived and those it
// stopped — are refused, never applied (a result the instance no longer
// waits for must not change it), and recorded: as notes in
// the instance's inbox, which need no lock and which the holder's next run
// writes to the history as late_completion_refused.
func (x *execution) superseded(stopped []stoppedAttempt, cause error) {
	var notes []weft.Message
	note := func(outcome, path string, attempt int, logs weft.AttemptLogs) {
		data, err := json.Marshal(lateNote{Type: weft.HistoryLateCompletionRefused, Outcome: outcome, StepPath: path, Attempt: attempt, Node: x.e.cfg.NodeID, Reason: cause.Error(), AttemptLogs: logs})
		if err != nil {
			// Its logs hold what does not encode: the note goes without them.
			x.logAt(slog.LevelError, "encoding the note of a refused late completion; keeping it without its logs", "step_path", path, "attempt", attempt, "err", err)
			if data, err = json.Marshal(lateNote{Type: weft.HistoryLateCompletionRefused, Outcome: outcome, StepPath: path, Attempt: attempt, Node: x.e.cfg.NodeID, Reason: cause.Error()}); err != nil {
				x.logAt(slog.LevelError, "encoding the note of a refused late completion; dropping it", "step_path", path, "attempt", attempt, "err", err)
				return
			}
		}
		notes = append(notes, weft.Message{InstanceID: x.inst.ID, Kind: weft.MessageNote, Payload: data,
			ID: fmt.Sprintf("late:%s:%s:%s:%d:%s", x.e.cfg.NodeID, x.e.boot, path, attempt, outcome)})
	}
	for _, ev := range x.next.history {
		switch ev.Type {
		case weft.HistoryActivityCompleted, weft.HistoryActivityFailed:
			// The attempt ran and logged: its lines stay with its note.
			var logs weft.AttemptLogs
			_ = json.Unmarshal(ev.Data, &logs) // encoded above from the same type
			note(strings.TrimPrefix(string(ev.Type), "activity_"), ev.StepPath, ev.Attempt, logs)
		}
	}
	for _, a := range stopped {
		note("completed", a.inv.Path, a.inv.Attempt, a.logs)
	}
	if len(notes) == 0 {
		return
	}
	for range notes {
		x.e.cfg.Observer.AttemptAbandoned(AbandonedSuperseded)
	}
	ctx := context.WithoutCancel(x.ctx)
	if _, err := x.e.store.Deliver(ctx, nil, notes); err != nil {
		x.logAt(slog.LevelWarn, "recording refused late completions", "count", len(notes), "err", err)
		return
	}
	x.logAt(slog.LevelInfo, "late completions refused: another node holds the instance", "count", len(notes))
	x.e.publish(ctx, topicInbox, x.inst.ID)
	x.e.pushSoon(ctx, itemOf(x.inst.ID, "note", x.inst.Order))
}

// input turns the end of attempt inv into the runner's input.
func (x *execution) input(r result, inv runner.Invoke, watched *attempt) runner.Input {
	if watched != nil && watched.timedOut.Load() {
		// The scheduler saw the guest stop heartbeating and stopped it.
		watched.mu.Lock()
		details := watched.details
		watched.mu.Unlock()
		return runner.ActivityFailed{
			Token: r.token, Cause: retry.Of(retry.KindHeartbeatTimeout), LastHeartbeat: details,
			Message: fmt.Sprintf("no heartbeat within %s", watched.timeout), Logs: r.logs, Path: inv.Path, Attempt: inv.Attempt,
		}
	}
	var requests json.RawMessage
	if len(r.requests) > 0 {
		requests, _ = json.Marshal(r.requests) // strings and numbers: cannot fail
	}
	if r.err == nil {
		// Checked, not decoded: the output is kept as the guest's bytes
		// (a document, decoded only by an expression that computes on it).
		v, err := jsonv.New(r.out)
		if err != nil {
			// Named like every other call error: the runtime does not
			// parse outputs (see plugins.Runtime.Invoke), so it is made here.
			cause := call.CheckOutput(r.out)
			if cause == nil {
				// Valid JSON to encoding/json but not UTF-8.
				cause = fmt.Errorf("%w: the output is not UTF-8 JSON: %v", call.ErrProtocol, err)
			}
			perr := &call.Error{Version: r.version, Activity: r.activity, Err: cause}
			return runner.ActivityFailed{Token: r.token, Cause: retry.Of(retry.KindProtocol), Message: perr.Error(), Requests: requests, Logs: r.logs, Path: inv.Path, Attempt: inv.Attempt}
		}
		return runner.ActivityCompleted{Token: r.token, Output: outputValue(v), OutputJSON: v.Bytes(), Requests: requests, Logs: r.logs, Path: inv.Path, Attempt: inv.Attempt}
	}
	f := runner.ActivityFailed{Token: r.token, Cause: classify.Cause(r.err), Message: r.err.Error(), Requests: requests, Logs: r.logs, Path: inv.Path, Attempt: inv.Attempt}
	var ge *call.GuestError
	if errors.As(r.err, &ge) {
		f.Message, f.Details = ge.Message, ge.Details
	}
	if details, _, _ := r.hb.Last(); details != nil {
		f.LastHeartbeat = details
	}
	return f
}

// apply applies one event and performs the actions.
func (x *execution) apply(ev runner.Input) { x.applyAt(ev, x.e.cfg.Now()) }

// applyAt is apply at now: what the runner decides, and the history
// entries it records, are of that time.
func (x *execution) applyAt(ev runner.Input, now time.Time) {
	before := x.stepsBefore()
	acts := x.prog.Apply(x.st, runner.Context{InstanceID: x.inst.ID, Now: now, Rand: seeded(x.inst.ID, x.st.Seq), AttemptDataLimit: x.e.cfg.AttemptDataLimit, VarsLimit: x.e.cfg.VarsLimit}, ev)
	x.stepsEnded(before, acts, now)
	x.next.dirty = true
	for _, a := range acts {
		switch a := a.(type) {
		case runner.Invoke:
			x.invoke(a)
		case runner.ArmTimer:
			x.timers[a.Token] = weft.Timer{InstanceID: x.inst.ID, ID: a.Token, Due: a.Due, Kind: string(a.Kind)}
		case runner.CancelTimer:
			delete(x.timers, a.Token)
		case runner.CancelActivity:
			if f, ok := x.inflight.attempts[a.Token]; ok {
				f.hb.RequestCancel()
			}
		case runner.CreateBookmark:
			x.bookmarks[a.Token] = weft.Bookmark{InstanceID: x.inst.ID, StepPath: a.Path, Event: a.Event, Key: a.Key, Token: a.Token}
		case runner.RemoveBookmark:
			delete(x.bookmarks, a.Token)
		case runner.StartChild:
			x.next.children = append(x.next.children, a)
		case runner.CancelChild:
			x.cancelChild(a.Token)
		case runner.Record:
			switch a.Type {
			case weft.HistoryStepCompleted, weft.HistoryStepFailed:
				x.e.cfg.Observer.StepFinished(x.inst.Workflow, a.Step, strings.TrimPrefix(string(a.Type), "step_"), a.Elapsed)
			case weft.HistoryAttemptAbandoned:
				// In flight on a node that lost the instance (Recover).
				x.e.cfg.Observer.AttemptAbandoned(AbandonedNodeLost)
			}
			var data json.RawMessage
			if a.Data != nil {
				var err error
				// Documents spliced as they are: a copy of the variables
				// may be hundreds of KiB.
				if data, err = jsonv.EncodeMap(a.Data); err != nil {
					// A value the runner recorded does not encode (an
					// expression's infinity): the entry stays, saying so,
					// rather than the run failing on every try.
					x.logAt(slog.LevelError, "encoding a history entry's data", "type", a.Type, "step_path", a.Path, "err", err)
					data, _ = json.Marshal(map[string]string{"encoding_error": err.Error()}) // a map of strings encodes
				}
			}
			if x.next.history == nil {
				// Room for the entries of a commit of a few steps, which
				// the slice would otherwise grow into four times.
				x.next.history = make([]weft.HistoryEntry, 0, 8)
			}
			x.next.history = append(x.next.history, weft.HistoryEntry{Time: now, Type: a.Type, StepPath: a.Path, Attempt: a.Attempt, Node: x.e.cfg.NodeID, Actor: a.Actor, Data: data})
		case runner.Persist:
			if x.err == nil {
				x.err = x.commit(len(x.inflight.attempts) == 0)
				if errors.Is(x.err, store.ErrInboxNotEmpty) {
					x.err = nil // the run loop reads the inbox, as drained is false
				}
			}
		case runner.ReleaseSlot:
			x.e.releaseStepSlot(x.ctx, x.logCtx, a.Key, a.Holder, a.Limit)
		case runner.Finish:
		}
	}
	// After the actions of ev, whose history entries come first (the
	// activity_scheduled of an attempt before its activity_deferred).
	for len(x.deferrals) > 0 {
		d := x.deferrals[0]
		x.deferrals = x.deferrals[1:]
		x.apply(d)
	}
}

// cancelChild cancels a child instance, as the engine's own action.
func (x *execution) cancelChild(token string) {
	op := weft.Operation{Actor: weft.ActorEngine, Reason: "parent " + x.inst.ID + " ended"}
	child := runner.ChildID(x.inst.ID, token)
	if _, err := x.e.Cancel(x.ctx, child, op); err != nil && !errors.Is(err, weft.ErrNotFound) && !errors.Is(err, weft.ErrFinished) {
		x.logAt(slog.LevelWarn, "cancelling child", "child", child, "err", err)
	}
}

// invoke starts an activity attempt.
//
// The attempt's clocks start when its guest starts running, not now:
// loading the version (a node's first call of it may compile it, seconds
// for a Go plugin) and waiting for an instance are not the attempt's time.
// The runtime counts Call.Timeout, the start-to-close timeout, from then,
// and restarts the heartbeat's clock then; until then the heartbeat
// scheduler sees the attempt as alive (track). The context's deadline is
// only the step's schedule-to-close deadline, which is absolute.
func (x *execution) invoke(inv runner.Invoke) {
	var delay time.Duration
	var gateErr error
	if inv.Rate != nil || inv.Slot != nil {
		var d runner.ActivityDeferred
		var ok bool
		if delay, d, ok, gateErr = x.gate(inv); gateErr == nil && !ok {
			x.deferrals = append(x.deferrals, d)
			return
		}
	}
	// The zero time marks a guest that has not started; the runtime sets
	// the heartbeat's clock when it starts.
	hb := call.NewHeartbeat(time.Time{})
	version := x.inst.Plugins[inv.Plugin]
	info := abi.Info{
		InstanceID: x.inst.ID, Workflow: x.inst.Workflow, StepID: inv.StepID, Plugin: inv.Plugin, Activity: inv.Activity,
		Attempt: inv.Attempt, IdempotencyKey: inv.IdempotencyKey,
	}
	// Under the span of its step execution; its outbound requests' spans
	// are its children.
	actx, span := x.startAttempt(inv, version, &info)
	fl := flight{hb: hb, inv: inv, span: span}
	x.track(inv, hb)
	if gateErr != nil {
		x.inflight.attempts[inv.Token] = fl
		// The limiter or the store failed: the attempt fails as a host
		// failure, retried, rather than start beyond its limits.
		go func() { x.inflight.results <- result{token: inv.Token, err: gateErr, hb: hb} }()
		return
	}
	timeout := inv.Timeout
	if timeout == 0 {
		timeout = x.e.cfg.ActivityTimeout
	}
	// The bytes the runner recorded, when it did: the history shows what
	// the guest got.
	in, err := []byte(inv.InputJSON), error(nil)
	if in == nil {
		in, err = jsonv.Encode(inv.Input)
	}
	c := call.Call{
		Activity: inv.Activity, Input: in, LastHeartbeat: inv.LastHeartbeat, Heartbeat: hb, Timeout: timeout,
		// Info.DeadlineUnixMilli is set by the runtime when the guest
		// starts: the sooner of the start-to-close and the context's
		// deadline.
		Info: info,
	}
	if p := x.recordPolicy(inv); p.Records() && err == nil {
		fl.tape = &recording{policy: p, rec: tape.NewRecorder(x.e.cfg.Tapes.MaxBytes), version: version, input: in}
		c.Record = fl.tape.rec
	}
	x.inflight.attempts[inv.Token] = fl
	go func() {
		if err != nil {
			x.inflight.results <- result{token: inv.Token, err: fmt.Errorf("encoding input: %w", err), hb: hb}
			return
		}
		ctx := actx
		if !inv.Deadline.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, inv.Deadline)
			defer cancel()
		}
		if delay > 0 {
			// Its rate limit's turn, a moment away (gate).
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		}
		// Read when the guest first needs them (an HTTP request, a config
		// or secret lookup): an attempt that needs none reads none.
		c.LoadGrants = func(ctx context.Context) (*grant.Set, error) { return x.e.grants(ctx, inv.Plugin) }
		// The guest's goroutine calls these, one at a time, before Invoke
		// returns.
		var requests []call.Request
		c.Requested = func(r call.Request) { requests = append(requests, r) }
		logs := x.keepLogs(ctx, &c)
		out, err := x.e.plugins.Invoke(ctx, version, c)
		x.inflight.results <- result{token: inv.Token, version: version, activity: inv.Activity, out: out, err: err, hb: hb, requests: requests, logs: *logs}
	}()
}

// keepLogs has c keep its guest's log records, as the lines of the
// attempt's history entry, and still pass them on to the node's log, where
// they went before the history kept them, logged with ctx, the attempt's
// (its span's ids go with them). What the runtime's log limits dropped is
// noted with them. The lines are the caller's once Invoke returned.
func (x *execution) keepLogs(ctx context.Context, c *call.Call) *weft.AttemptLogs {
	logs := &weft.AttemptLogs{}
	info := *c // for LogTo: the call's names, not its later changes
	c.Log = func(rec call.Record) {
		info.LogToContext(ctx, x.e.log, rec)
		if d := rec.Dropped; d != nil {
			limit := weft.LogLimitBytes
			if d.OnRecords {
				limit = weft.LogLimitRecords
			}
			logs.Dropped = &weft.LogsDropped{Records: d.Records, Bytes: d.Bytes, Limit: limit}
		}
		logs.Lines = append(logs.Lines, weft.LogLine{Time: x.e.cfg.Now().UTC(), Level: rec.LevelName(), Source: rec.Source, Message: rec.Message})
	}
	return logs
}

// track has the heartbeat scheduler watch an attempt: every attempt, so
// that the details of all of them are persisted, and those with a
// heartbeat timeout are timed out when their guest goes silent. The
// scheduler must not take the time before the guest starts for silence:
// hb reports the zero time until then, and startPulse the present.
func (x *execution) track(inv runner.Invoke, hb *call.Heartbeat) {
	a := &attempt{x: x, instance: x.inst.ID, token: inv.Token, number: inv.Attempt, hb: hb, timeout: inv.HeartbeatTimeout}
	x.e.renewer.watch(attemptItem(x.sched.key, inv.Token), a, startPulse{hb: hb, now: x.e.cfg.Now})
}

// startPulse is an attempt's heartbeat.Pulse: the guest's heartbeats once
// it runs, and the present before, while the version loads or the call
// waits for an instance.
type startPulse struct {
	hb  *call.Heartbeat
	now func() time.Time
}

// Last implements heartbeat.Pulse.
func (p startPulse) Last() (details []byte, at time.Time, beats uint64) {
	details, at, beats = p.hb.Last()
	if at.IsZero() {
		at = p.now()
	}
	return details, at, beats
}

// commit writes the instance: a compare-and-set on its revision, fenced by
// the lock's token, with the history, timers and status of the state. With
// drains it is refused, with store.ErrInboxNotEmpty and nothing written,
// when the inbox holds a message this run has not applied.
func (x *execution) commit(drains bool) error {
	inst := x.inst
	if x.sched.lost.Load() {
		// The scheduler found the lease or lock lost: whoever holds the
		// instance now decides; this execution writes nothing more.
		return fmt.Errorf("%w: instance %s", ErrLeaseLost, inst.ID)
	}
	enc, err := x.st.Encode()
	if err != nil {
		return fmt.Errorf("instance %s: %w", inst.ID, err)
	}
	inst.State, inst.Vars = enc.State, enc.Vars
	inst.Status = x.st.Status
	if def := x.prog.Definition(); len(def.Search) > 0 {
		if x.searchWarned == nil {
			x.searchWarned = map[string]bool{}
		}
		inst.Search = x.e.searchOf(x.logCtx, def, inst.ID, x.st.Input, x.st.Vars, x.searchWarned)
	}
	if x.st.Status == weft.StatusCompleted {
		inst.Output = enc.Output
	}
	inst.Error = nil // a retried instance has its failure no more
	if f := x.st.Error; f != nil {
		failure := *f
		inst.Error = &failure
	}
	if inst.Status.Terminal() {
		inst.Hold = nil // cancelled while held
	}
	inst.Lease = weft.Lease{}
	if inst.Status == weft.StatusRunning {
		inst.Lease = weft.Lease{Node: x.e.cfg.NodeID, Boot: x.e.boot, Expiry: x.e.cfg.Now().Add(x.e.cfg.LockTTL)}
	}
	if !inst.Status.Terminal() {
		inst.DeleteAfter = time.Time{} // retried: it runs again
	}
	if inst.Status.Terminal() && inst.DeleteAfter.IsZero() {
		// Decided once, as it finishes (see retention.go); a commit
		// tried again in this run keeps the first decision. A retried
		// instance had its old one cleared when its run began (process).
		inst.DeleteAfter = x.e.deleteAfter(x.prog.Definition(), x.e.cfg.Now())
	}
	// Each set is written whole, unless it is empty and so is the
	// stored one (nil leaves it as it is).
	// Each carries the instance's order, for the sweeps that queue it.
	var timers []weft.Timer
	if len(x.timers) > 0 || x.storedTimers {
		timers = make([]weft.Timer, 0, len(x.timers))
		for _, t := range x.timers {
			t.Order = inst.Order
			timers = append(timers, t)
		}
	}
	var bookmarks []weft.Bookmark
	if len(x.bookmarks) > 0 || x.storedBookmarks {
		bookmarks = make([]weft.Bookmark, 0, len(x.bookmarks))
		for _, b := range x.bookmarks {
			b.Order = inst.Order
			bookmarks = append(bookmarks, b)
		}
	}
	// Children first: their ids come from the runner's deterministic
	// tokens, so a parent replayed after a crash asks for the same ids and
	// the store's idempotent create absorbs the repeat.
	for _, c := range x.next.children {
		in, err := jsonv.Encode(c.Input)
		if err != nil {
			return fmt.Errorf("instance %s: encoding the input of child %s: %w", inst.ID, runner.ChildID(inst.ID, c.Token), err)
		}
		if _, _, err := x.e.create(x.childContext(c), c.Workflow, in, runner.ChildID(inst.ID, c.Token), &weft.ParentRef{InstanceID: inst.ID, StepID: c.StepID, Token: c.Token, Order: inst.Order}); err != nil {
			return fmt.Errorf("instance %s: starting child %s: %w", inst.ID, c.Workflow, err)
		}
	}
	c := store.Commit{
		Instance: inst, Fence: x.lease.Token(), History: x.next.history, Timers: timers, Bookmarks: bookmarks,
		Consumed: x.next.consumed, DeliveredStimulus: x.next.delivered, DeliveredOutcome: x.next.deliveredOutcome,
		At: x.e.cfg.Now().UTC(), Drains: drains,
	}
	dc := x.prog.Definition().Concurrency
	if inst.Status.Terminal() && inst.Concurrency != nil && dc != nil {
		// Its slot, or its place in the line, goes to the next in line,
		// with this commit where the store can.
		now := x.e.cfg.Now()
		c.Slot = &store.SlotChange{Key: workflowSlotKey(inst.Workflow, inst.Concurrency.Key), ID: inst.ID, Params: slotParams(dc, now), Now: now, Op: slots.Release}
	}
	if inst.Status.Terminal() && inst.Parent != nil && !x.migrateOnly {
		end, err := jsonv.Marshal(childEnd{ID: inst.ID, Status: string(inst.Status), Output: inst.Output, Error: inst.Error})
		if err != nil {
			return fmt.Errorf("engine: encoding the end of instance %s for its parent %s: %w", inst.ID, inst.Parent.InstanceID, err)
		}
		c.Send = []weft.Message{{InstanceID: inst.Parent.InstanceID, ID: "child:" + inst.ID, Kind: weft.MessageChild, Token: waitToken(inst.Parent), Payload: end}}
	}
	began := x.e.cfg.Now()
	rev, err := x.e.store.Commit(x.ctx, c)
	if err == nil && x.span.IsRecording() {
		x.event("commit", began, attrRev.Int64(int64(rev)), attrDurationMS.Float64(millis(x.e.cfg.Now().Sub(began))), attrEntries.Int(len(c.History)))
	}
	if err != nil {
		if errors.Is(err, store.ErrInboxNotEmpty) {
			x.drained = false
			return err // as it is: the run reads the inbox and tries again
		}
		return fmt.Errorf("committing instance %s: %w", inst.ID, err)
	}
	// The instance as stored (a running one's lease aside, which a renewal
	// may have moved on).
	inst.Rev, inst.Fence, inst.UpdatedAt = rev, c.Fence, c.At
	x.drained = drains
	switch {
	case c.Slot != nil:
		x.e.slotChanged(x.ctx, x.logCtx, inst, c.Slot)
	case inst.Status.Terminal() && inst.Concurrency != nil:
		// A limit its version does not have (an import): the key's own
		// terms.
		x.e.releaseSlot(x.ctx, x.logCtx, inst, nil)
	}
	x.storedTimers, x.storedBookmarks = len(x.timers) > 0, len(x.bookmarks) > 0
	if inst.Status != x.status {
		wasTerminal := x.status.Terminal()
		x.status = inst.Status
		x.e.cfg.Observer.InstanceStatus(inst.Workflow, inst.Status)
		if inst.Status.Terminal() && !wasTerminal {
			x.finished(inst, c.At)
		}
	}
	switch {
	case inst.Status == weft.StatusRunning && !x.sched.leased:
		// The store's lease tells recovery this instance is alive; the
		// heartbeat scheduler renews it, batched with the others.
		x.sched.leased = true
		x.sched.held.Store(true)
		x.e.renewer.holdLease(x)
	case inst.Status != weft.StatusRunning && x.sched.leased:
		// The commit cleared the lease: stop renewing it, or the next
		// renewal would find it gone and stop this execution for nothing
		// should it run on (a message arriving before it finishes).
		x.sched.leased = false
		x.sched.held.Store(false)
		x.e.renewer.releaseLease(x)
	}
	children := x.next.children
	x.emitSteps(x.next.stepEnds)
	x.next = nextCommit{}
	for _, ch := range children {
		// A child has its parent's order (create).
		x.e.pushSoon(x.ctx, itemOf(runner.ChildID(inst.ID, ch.Token), "start", inst.Order))
	}
	if len(c.Send) > 0 {
		x.e.pushSoon(x.ctx, itemOf(inst.Parent.InstanceID, "child", inst.Parent.Order))
	}
	if inst.Status != weft.StatusRunning {
		// A copy: later commits change x.inst in place.
		stored := *inst
		x.e.wake(inst.ID, &stored)
		x.e.publish(x.ctx, topicChanged, inst.ID)
	}
	x.e.changed(inst.ID)
	return nil
}

// waitToken is the parent runner's name for the wait a child's end is sent
// to: Token, or StepID for a child stored before Token was kept.
func waitToken(p *weft.ParentRef) string {
	if p.Token != "" {
		return p.Token
	}
	return p.StepID
}

// outputValue is an activity's output as the runner takes it: null as nil
// (as it was decoded before outputs were kept as their bytes), anything
// else the document.
func outputValue(d *jsonv.Doc) any {
	if string(d.Bytes()) == "null" {
		return nil
	}
	return d
}
