package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/runner"
)

// Signal delivers a stimulus and returns once what it did is durable. A
// stimulus that was seen before (same ID) does nothing again and returns
// the first outcome. An instance that is busy gets the stimulus in its inbox
// and applies it when it is free: Signal never waits for an instance.
func (e *Engine) Signal(ctx context.Context, s weft.Event) (*weft.SignalOutcome, error) {
	if s.ID == "" {
		s.ID = newID(e.cfg.Now())
	}
	if err := (weft.Order{Priority: s.Priority}).Check(); err != nil {
		return nil, fmt.Errorf("engine: event %s: %w", s.ID, err)
	}
	if old, err := e.store.GetStimulus(ctx, s.ID); err == nil {
		return outcomeOf(old)
	} else if !errors.Is(err, weft.ErrNotFound) {
		return nil, err
	}
	payload, err := jsonv.Marshal(s.Payload) // a document keeps its bytes
	if err != nil {
		return nil, fmt.Errorf("engine: stimulus %s payload: %w", s.ID, err)
	}
	// The instance that receives it takes it as a document (checked, not
	// decoded): a payload it could not take is refused here rather than
	// left in an inbox it would block.
	if _, err := payloadValue(payload); err != nil {
		return nil, fmt.Errorf("%w: engine: event %s: the payload is not JSON: %v", weft.ErrInvalid, s.ID, err)
	}
	out := &weft.SignalOutcome{ID: s.ID, Resumed: []string{}, Started: []string{}}

	// Triggers first, with ids derived from the stimulus: a retried signal
	// starts the same instances, which the store's idempotent create
	// absorbs.
	started, heard, err := e.trigger(ctx, s, payload)
	if err != nil {
		return nil, err
	}
	for _, in := range started {
		out.Started = append(out.Started, in.ID)
	}

	bms, err := e.store.FindBookmarks(ctx, s.Name, s.Key)
	if err != nil {
		return nil, err
	}
	rec := weft.Stimulus{ID: s.ID, Name: s.Name, Key: s.Key, Payload: payload, ExpiresAt: e.cfg.Now().Add(e.cfg.StimulusTTL)}
	if len(bms) == 0 && len(started) == 0 {
		out.Queued = true
		if !heard {
			// The latest versions do not name it; an older version kept
			// may still have instances waiting for it. The warning is
			// advice: a failure to look leaves it out rather than fail
			// the event.
			waited, err := e.WaitedEvents(ctx)
			if err != nil {
				e.log.Warn("looking for the workflows that wait for an event", "event", s.Name, "err", err)
				heard = true
			} else {
				_, heard = slices.BinarySearch(waited, s.Name)
			}
		}
		if !heard {
			out.Warning = fmt.Sprintf("no saved workflow waits for or is triggered by %q; the event is kept for %s in case an instance waits for it, then moved to the dead letters", s.Name, e.cfg.StimulusTTL)
		}
		rec.Outcome, _ = json.Marshal(out)
		existing, err := e.store.EnqueueStimulus(ctx, rec)
		if err != nil {
			return nil, err
		}
		if existing != nil {
			return outcomeOf(existing)
		}
		// A bookmark committed after the lookup above, by an instance that
		// checked the queue before the stimulus was in it, would miss it
		// until its TTL. Look again: any bookmark found now makes its
		// instance check the queue once more.
		late, err := e.store.FindBookmarks(ctx, s.Name, s.Key)
		if err != nil {
			return nil, err
		}
		for _, b := range late {
			e.push(ctx, itemOf(b.InstanceID, reasonStimulus, b.Order))
		}
		return out, nil
	}
	var msgs []weft.Message
	for _, b := range bms {
		msgs = append(msgs, weft.Message{InstanceID: b.InstanceID, ID: "stimulus:" + s.ID + ":" + b.Token, Kind: weft.MessageStimulus, Token: b.Token, Payload: payload})
		out.Resumed = append(out.Resumed, b.InstanceID)
	}
	rec.Outcome, _ = json.Marshal(out)
	existing, err := e.store.Deliver(ctx, &rec, msgs)
	if err != nil {
		return nil, err
	}
	if existing != nil {
		return outcomeOf(existing)
	}
	for _, b := range bms {
		e.notify(ctx, itemOf(b.InstanceID, reasonStimulus, b.Order))
	}
	for _, in := range started {
		e.push(ctx, itemOf(in.ID, "start", in.Order))
	}
	return out, nil
}

// queuedOutcome is what Signal answered for s when it queued it, to be
// stored with its delivery: the store keeps no outcome for a queued
// stimulus, and one delivered without an outcome would answer a repeated
// send with an empty one instead of "queued".
func queuedOutcome(s weft.Stimulus) json.RawMessage {
	if len(s.Outcome) > 0 {
		return s.Outcome
	}
	out, _ := json.Marshal(weft.SignalOutcome{ID: s.ID, Resumed: []string{}, Started: []string{}, Queued: true})
	return out
}

func outcomeOf(s *weft.Stimulus) (*weft.SignalOutcome, error) {
	var out weft.SignalOutcome
	if len(s.Outcome) > 0 {
		if err := json.Unmarshal(s.Outcome, &out); err != nil {
			return nil, fmt.Errorf("engine: stimulus %s: stored outcome: %w", s.ID, err)
		}
	}
	out.ID = s.ID
	if s.State == weft.StimulusQueued {
		out.Queued = true
	}
	// As the first answer had them: lists, never null.
	if out.Resumed == nil {
		out.Resumed = []string{}
	}
	if out.Started == nil {
		out.Started = []string{}
	}
	return &out, nil
}

// trigger starts an instance of every workflow whose trigger names the
// stimulus, with its payload (as JSON) as input. It also reports whether
// the latest version of any saved workflow names the stimulus at all, in a
// trigger or in a wait.
func (e *Engine) trigger(ctx context.Context, s weft.Event, payload json.RawMessage) (started []*weft.Instance, heard bool, err error) {
	for cursor := ""; ; {
		defs, next, err := e.store.ListDefinitions(ctx, cursor, 100)
		if err != nil {
			return nil, false, err
		}
		for _, d := range defs {
			prog, err := e.program(ctx, d.Name, d.Version)
			if err != nil {
				return nil, false, err
			}
			def := prog.Definition()
			for _, t := range def.Triggers {
				if t.Event != s.Name {
					continue
				}
				heard = true
				inst, _, err := e.createAs(ctx, creation{workflow: d.Name, input: payload, id: "stim-" + s.ID + "-" + d.Name, priority: s.Priority, lookFirst: true})
				if err != nil {
					return nil, false, err
				}
				started = append(started, inst)
				break
			}
			if !heard {
				def.Walk(func(_ string, st *definition.Step) bool {
					heard = st.Wait != nil && st.Wait.Event == s.Name
					return !heard
				})
			}
		}
		if next == "" {
			return started, heard, nil
		}
		cursor = next
	}
}

// WaitedEvents returns the event names the saved workflows wait for, in
// every version kept, sorted: where a correlation key without its event can
// be looked for. Older versions count: an instance started on one waits on
// its events, which a later version may have renamed.
func (e *Engine) WaitedEvents(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for cursor := ""; ; {
		defs, next, err := e.store.ListDefinitions(ctx, cursor, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			versions, err := e.store.ListDefinitionVersions(ctx, d.Name)
			if errors.Is(err, weft.ErrNotFound) {
				continue // deleted since listed
			}
			if err != nil {
				return nil, fmt.Errorf("engine: versions of definition %s: %w", d.Name, err)
			}
			for _, v := range versions {
				// Compiled programs are cached: a second look reads nothing.
				prog, err := e.program(ctx, d.Name, v.Version)
				if errors.Is(err, weft.ErrNotFound) {
					continue
				}
				if err != nil {
					return nil, err
				}
				prog.Definition().Walk(func(_ string, st *definition.Step) bool {
					if st.Wait != nil {
						seen[st.Wait.Event] = true
					}
					return true
				})
			}
		}
		if next == "" {
			return slices.Sorted(maps.Keys(seen)), nil
		}
		cursor = next
	}
}

// Cancel cancels an instance: a message in its inbox, applied when it runs
// next, at once when it runs on this node. Running activities see the
// cancellation through their heartbeat and are stopped after the plugin
// runtime's grace period; timers, bookmarks and children are cancelled.
//
// op says who asks and why (its reason becomes the instance's error
// message), and when (now, when op.At is zero); the instance_cancelled
// entry records it. An instance has one cancel message: a second cancel
// before the first applied writes nothing, and the first one's op is
// recorded.
//
// It returns the instance as it was before the cancellation applied; an
// error matching weft.ErrNotFound for no such instance, and a
// *weft.FinishedError (matching weft.ErrFinished) for one that has
// finished already.
func (e *Engine) Cancel(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	if inst.Status.Terminal() {
		return nil, &weft.FinishedError{ID: id, Status: inst.Status}
	}
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	msg, err := cancelMessage(id, op)
	if err != nil {
		return nil, err
	}
	if _, err := e.store.Deliver(ctx, nil, []weft.Message{msg}); err != nil {
		return nil, err
	}
	e.notify(ctx, itemOf(id, "cancel", inst.Order))
	return inst, nil
}

// cancelMessage is the message that cancels instance id, with op. An
// instance has one: a second cancel before the first applied writes
// nothing.
func cancelMessage(id string, op weft.Operation) (weft.Message, error) {
	// The reason in the payload too, for a node that does not read Op.
	payload, err := json.Marshal(op.Reason)
	if err != nil {
		return weft.Message{}, fmt.Errorf("engine: cancel of instance %s: reason: %w", id, err)
	}
	return weft.Message{InstanceID: id, ID: "cancel", Kind: weft.MessageCancel, Payload: payload, Op: &op}, nil
}

// notify makes the instance of it look at its inbox: the execution
// running it on this node at once, otherwise through the queue.
func (e *Engine) notify(ctx context.Context, it queue.Item) {
	if !e.wakeExecution(it.InstanceID) {
		// Maybe another node runs it.
		e.publish(ctx, topicInbox, it.InstanceID)
	}
	// Queued too: the execution may be about to finish without looking.
	e.push(ctx, it)
}

// wakeExecution makes the execution running an instance on this node, if
// any, read its inbox; it reports whether there was one.
func (e *Engine) wakeExecution(id string) bool {
	e.mu.Lock()
	wake := e.running[id]
	e.mu.Unlock()
	if wake == nil {
		return false
	}
	select {
	case wake <- struct{}{}:
	default: // already woken
	}
	return true
}

func (e *Engine) register(id string, wake chan struct{}) {
	e.mu.Lock()
	e.running[id] = wake
	e.mu.Unlock()
}

func (e *Engine) unregister(id string, wake chan struct{}) {
	e.mu.Lock()
	if e.running[id] == wake {
		delete(e.running, id)
	}
	e.mu.Unlock()
}

// DeadLetters returns a page of the stimuli that found no bookmark before
// their TTL, in the order they died, and the next cursor.
func (e *Engine) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	return e.store.DeadLetters(ctx, cursor, limit)
}

// retryRequest is the payload of a retry message: the reason, and which
// failure it retries, so that a retry that arrives after the instance ran
// again, and failed again, does not retry the new failure unasked. A
// failure is named by the runner state's Seq when it failed: a retry
// always hands out a token, so the next failure has another (and a commit
// that only settles the inbox changes the revision, not the state).
type retryRequest struct {
	Reason string `json:"reason"`
	Seq    uint64 `json:"seq"`
}

// Retry makes a failed instance continue from where its failure stopped
// it (see runner.Retry): a message in its inbox, and the instance queued,
// so that the next execution applies it; the history records it as
// instance_retried, with op: who asks, why and when (now, when op.At is
// zero). It returns ErrNotFound for no such instance, an error
// matching ErrNotFailed for one that has not failed, and one matching
// weft.ErrNotFound when a plugin version it is pinned to was deleted
// since it failed (the retry could not run it). Two retries of one
// failure are one, recorded with the first one's op.
func (e *Engine) Retry(ctx context.Context, id string, op weft.Operation) error {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	msg, err := e.retryMessage(ctx, inst, op)
	if err != nil {
		return err
	}
	if _, err := e.store.Deliver(ctx, nil, []weft.Message{msg}); err != nil {
		return err
	}
	e.push(ctx, itemOf(id, "retry", inst.Order))
	return nil
}

// retryMessage is the message that retries inst's failure, with op, or
// why it cannot be retried (see Retry).
func (e *Engine) retryMessage(ctx context.Context, inst *weft.Instance, op weft.Operation) (weft.Message, error) {
	id := inst.ID
	if inst.Status != weft.StatusFailed {
		return weft.Message{}, fmt.Errorf("engine: instance %s is %s: %w", id, inst.Status, weft.ErrNotFailed)
	}
	if inst.Error == nil || inst.Error.Step == "" {
		code := ""
		if inst.Error != nil {
			code = inst.Error.Code
		}
		return weft.Message{}, fmt.Errorf("engine: instance %s failed outside its steps (%s): %w", id, code, weft.ErrNotRetryable)
	}
	if _, err := e.store.GetDefinition(ctx, inst.Workflow, inst.Version); errors.Is(err, weft.ErrNotFound) {
		return weft.Message{}, fmt.Errorf("engine: instance %s cannot be retried: its workflow %s version %d was deleted: %w", id, inst.Workflow, inst.Version, err)
	} else if err != nil {
		return weft.Message{}, err
	}
	for name, version := range inst.Plugins {
		p, err := e.store.GetPlugin(ctx, name)
		if err != nil && !errors.Is(err, weft.ErrNotFound) {
			return weft.Message{}, err
		}
		if p == nil || !slices.ContainsFunc(p.Versions, func(r weft.PluginRecord) bool { return r.Version == version }) {
			return weft.Message{}, fmt.Errorf("engine: instance %s cannot be retried: it runs plugin %s version %s, which was deleted: %w", id, name, version, weft.ErrNotFound)
		}
	}
	seq, err := stateSeq(inst)
	if err != nil {
		return weft.Message{}, err
	}
	payload, err := json.Marshal(retryRequest{Reason: op.Reason, Seq: seq})
	if err != nil {
		return weft.Message{}, err
	}
	// One message per failure: a retry sent twice is applied once.
	return weft.Message{InstanceID: id, ID: "retry:" + strconv.FormatUint(seq, 10), Kind: weft.MessageRetry, Payload: payload, Op: &op}, nil
}

// reopens reports whether msgs run the finished inst again: a reset, or a
// retry of its failure.
func reopens(inst *weft.Instance, msgs []weft.Message) bool {
	if slices.ContainsFunc(msgs, func(m weft.Message) bool { return m.Kind == weft.MessageReset || migrateThen(m) == MigrateThenRetry }) {
		return true // a migration that retries checks the failure itself
	}
	isRetry := func(m weft.Message) bool { return m.Kind == weft.MessageRetry }
	if inst.Status != weft.StatusFailed || !slices.ContainsFunc(msgs, isRetry) {
		return false // the state is decoded only when a retry is there
	}
	seq, err := stateSeq(inst)
	if err != nil {
		return false // the execution would fail on it too; settle instead
	}
	return slices.ContainsFunc(msgs, func(m weft.Message) bool {
		return isRetry(m) && retrySeq(m) == seq
	})
}

// stateSeq is the Seq of inst's runner state.
func stateSeq(inst *weft.Instance) (uint64, error) {
	var st runner.State
	if err := json.Unmarshal(inst.State, &st); err != nil {
		return 0, fmt.Errorf("engine: instance %s: state does not decode: %w", inst.ID, err)
	}
	return st.Seq, nil
}

// retrySeq is the failure a retry message retries (see retryRequest); 0
// for a payload that does not say.
func retrySeq(m weft.Message) uint64 {
	var r retryRequest
	if json.Unmarshal(m.Payload, &r) != nil {
		return 0
	}
	return r.Seq
}

// reopenWaiting reports whether a finished instance has a retry of its
// failure, or a reset, to apply.
func (e *Engine) reopenWaiting(ctx context.Context, inst *weft.Instance) (bool, error) {
	if !inst.InboxWaiting {
		return false, nil
	}
	msgs, err := e.store.Inbox(ctx, inst.ID)
	if err != nil {
		return false, err
	}
	return reopens(inst, msgs), nil
}
