package runner

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/retry"
)

// Program is a definition prepared for execution. It is immutable and safe
// for concurrent use by many instances.
type Program struct {
	def   *definition.Definition
	lists map[string][]*definition.Step
	// plugins are the plugin names the activities use, in the order of
	// their first use.
	plugins []string
}

// Compile prepares def, which must have passed validation.
func Compile(def *definition.Definition) *Program {
	p := &Program{def: def, lists: map[string][]*definition.Step{}}
	p.index("steps", def.Steps)
	def.Walk(func(_ string, s *definition.Step) bool {
		if s.Kind == definition.KindActivity && !slices.Contains(p.plugins, s.Activity.Plugin) {
			p.plugins = append(p.plugins, s.Activity.Plugin)
		}
		return true
	})
	return p
}

// Plugins returns the names of the plugins the program's activities use,
// in the order of their first use. The caller must not modify the slice.
func (p *Program) Plugins() []string { return p.plugins }

func (p *Program) index(list string, steps []*definition.Step) {
	p.lists[list] = steps
	for i, s := range steps {
		at := list + "[" + strconv.Itoa(i) + "]"
		switch s.Kind {
		case definition.KindIf:
			p.index(at+".then", s.If.Then)
			p.index(at+".else", s.If.Else)
		case definition.KindForeach:
			p.index(at+".do", s.Foreach.Do)
		case definition.KindParallel:
			for b, br := range s.Parallel {
				p.index(at+".parallel["+strconv.Itoa(b)+"]", br.Steps)
			}
		}
	}
}

// Definition returns the definition the program runs.
func (p *Program) Definition() *definition.Definition { return p.def }

// apply is the state of one Apply call.
type apply struct {
	p       *Program
	st      *State
	c       Context
	out     []Action
	persist bool
}

// Apply applies ev to st and returns the actions to perform, in order. A
// finished instance ignores every event but records it.
func (p *Program) Apply(st *State, c Context, ev Input) []Action {
	a := &apply{p: p, st: st, c: c}
	if st.Vars == nil {
		st.Vars = map[string]any{}
	}
	if r, ok := ev.(Retry); ok && st.Status == weft.StatusFailed && st.Root != nil {
		a.retry(r)
		a.settle()
		return a.out
	}
	if r, ok := ev.(Reset); ok && st.Root != nil {
		a.reset(r)
		a.settle()
		return a.out
	}
	if st.Status.Terminal() {
		data := map[string]any{"reason": "instance " + string(st.Status), "event": fmt.Sprintf("%T", ev)}
		path, attempt := a.attemptEnd(ev, data)
		a.emit(Record{Type: weft.HistoryEventIgnored, Path: path, Attempt: attempt, Actor: actorOf(ev), Data: data})
		return a.out
	}
	if st.Paused != nil && a.hold(ev) {
		a.settle()
		return a.out
	}
	switch ev := ev.(type) {
	case Start:
		a.start(ev)
	case ActivityCompleted:
		a.activityCompleted(ev)
	case ActivityFailed:
		a.activityFailed(ev)
	case TimerFired:
		a.timerFired(ev)
	case StimulusDelivered:
		a.stimulusDelivered(ev)
	case ChildCompleted:
		a.childCompleted(ev)
	case ChildFailed:
		a.childFailed(ev)
	case Cancel:
		a.cancel(ev)
	case Recover:
		a.recover(a.st.Root, ev.Heartbeats)
	case Pause:
		a.pause(ev)
	case Resume:
		a.resumeInstance(ev)
	case Reset:
		a.emit(Record{Type: weft.HistoryEventIgnored, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"reason": "not started", "event": "reset"})})
	case ActivityDeferred:
		a.activityDeferred(ev)
	case Retry:
		a.emit(Record{Type: weft.HistoryEventIgnored, Actor: ev.Op.Actor, Data: map[string]any{"reason": "instance " + string(st.Status) + ", not failed", "event": "retry"}})
	}
	a.settle()
	return a.out
}

func (a *apply) emit(act Action) { a.out = append(a.out, act) }

func (a *apply) record(typ weft.HistoryType, path string, attempt int, data map[string]any) {
	a.emit(Record{Type: typ, Path: path, Attempt: attempt, Data: data})
}

// actorOf is who asked for ev: an operator's action's actor, "" for any
// other input.
func actorOf(ev Input) string {
	switch ev := ev.(type) {
	case Cancel:
		return ev.Op.Actor
	case Retry:
		return ev.Op.Actor
	case Pause:
		return ev.Op.Actor
	case Resume:
		return ev.Op.Actor
	case StimulusDelivered:
		if ev.Op != nil {
			return ev.Op.Actor
		}
	case Reset:
		return ev.Op.Actor
	}
	return ""
}

func (a *apply) next(prefix string) string {
	a.st.Seq++
	return prefix + strconv.FormatUint(a.st.Seq, 10)
}

func (a *apply) env(f *Frame) definition.Env {
	return definition.Env{Input: a.st.Input, Vars: a.st.Vars, Locals: f.Locals}
}

func (a *apply) start(ev Start) {
	if a.st.Root != nil {
		a.record(weft.HistoryEventIgnored, "", 0, map[string]any{"reason": "already started"})
		return
	}
	a.st.Status = weft.StatusRunning
	var data map[string]any
	if a.c.VarsLimit > 0 {
		// The variables the first step begins with: none. A reset finds
		// every step's from here on.
		data = map[string]any{"vars": map[string]any{}}
		a.st.VarsRev, a.st.VarsMarked, a.st.VarsChain = 1, 1, true
	}
	a.record(weft.HistoryInstanceStarted, "", 0, data)
	if len(ev.Input) > 0 {
		// Kept as its bytes (the shell validated them), decoded only by
		// an expression that computes on it.
		a.st.Input, a.st.input = jsonv.Trusted(ev.Input), ev.Input
	}
	a.st.Root = &Frame{List: "steps", Path: "steps"}
	a.advance(a.st.Root)
}

// settle finishes an Apply: completes the instance when its root frame is
// done, works out the status, and decides whether to persist.
func (a *apply) settle() {
	if !a.st.Status.Terminal() && a.st.Root != nil && a.st.Root.Done {
		out, err := a.p.def.Output.Eval(definition.Env{Input: a.st.Input, Vars: a.st.Vars})
		if err != nil {
			a.fail(&weft.Failure{Code: "expression", Message: "output: " + err.Error()})
		} else {
			a.st.Status = weft.StatusCompleted
			a.st.Output = out
			a.record(weft.HistoryInstanceCompleted, "", 0, nil)
			a.emit(Finish{Status: weft.StatusCompleted, Output: out})
		}
	}
	if !a.st.Status.Terminal() && a.st.Root != nil {
		// Paused only once nothing is in flight: until then the attempt
		// runs, and the instance with it. Decided here only, from the
		// state, so that no end of an attempt can leave a status that
		// contradicts the pause.
		switch {
		case a.st.InFlight():
			a.st.Status = weft.StatusRunning
		case a.st.Paused != nil:
			a.st.Status = weft.StatusPaused
		default:
			a.st.Status = weft.StatusSuspended
		}
	}
	// Suspended or finished after an input, or the strategy asks: persist.
	if a.st.Status != weft.StatusRunning || a.persist {
		a.emit(Persist{})
	}
}

func stepPath(f *Frame) string { return f.Path + "[" + strconv.Itoa(f.Index) + "]" }

func (a *apply) step(f *Frame) *definition.Step { return a.p.lists[f.List][f.Index] }

// advance runs frame f until it waits or is done.
func (a *apply) advance(f *Frame) {
	for !f.Done && !a.st.Status.Terminal() {
		steps := a.p.lists[f.List]
		if f.Run == nil {
			if a.st.Paused != nil {
				return // a paused instance begins no step, nor ends a list
			}
			if f.Index >= len(steps) {
				f.Done = true
				return
			}
			if !a.begin(f, steps[f.Index]) {
				return
			}
			continue
		}
		if len(f.Run.Children) == 0 && f.Run.Pending != "" {
			return // a leaf waiting for its operation
		}
		if !a.advanceContainer(f, steps[f.Index]) {
			return
		}
	}
}

// begin starts the step under f's cursor. It reports whether f can go on at
// once (the step completed, or is a container to advance).
func (a *apply) begin(f *Frame, s *definition.Step) bool {
	path := stepPath(f)
	env := a.env(f)
	run := &Run{Exec: a.next("e"), Started: a.c.Now}
	data := map[string]any{"step": s.ID, "kind": string(s.Kind)}
	if f == a.st.Root {
		a.markVars(data)
	}
	a.emit(Record{Type: weft.HistoryStepStarted, Path: path, Step: s.ID, Data: data})
	switch s.Kind {
	case definition.KindSet:
		values := make(map[string]any, len(s.Set))
		for _, as := range s.Set {
			v, err := as.Value.Eval(env)
			if err != nil {
				return a.exprFailed(f, "set "+as.Name, err)
			}
			values[as.Name] = v
		}
		a.st.VarsRev++
		for k, v := range values {
			a.setVar(k, v)
		}
		a.complete(f, s, nil)
		return true
	case definition.KindFail:
		msg, err := s.Fail.Message.EvalString(env)
		if err != nil {
			msg = "message: " + err.Error()
		}
		a.failStep(f, s.Fail.Code, msg)
		return false
	case definition.KindIf:
		cond, err := s.If.Cond.EvalBool(env)
		if err != nil {
			return a.exprFailed(f, "if", err)
		}
		branch := "else"
		if cond {
			branch = "then"
		}
		a.record(weft.HistoryBranchTaken, path, 0, map[string]any{"branch": branch})
		f.Run = run
		if len(a.p.lists[f.List+"["+strconv.Itoa(f.Index)+"]."+branch]) == 0 {
			a.complete(f, s, nil)
			return true
		}
		run.Children = []*Frame{{
			List: f.List + "[" + strconv.Itoa(f.Index) + "]." + branch, Path: path + "." + branch, Locals: f.Locals,
		}}
		return true
	case definition.KindParallel:
		f.Run = run
		for b := range s.Parallel {
			suffix := ".parallel[" + strconv.Itoa(b) + "]"
			run.Children = append(run.Children, &Frame{List: f.List + "[" + strconv.Itoa(f.Index) + "]" + suffix, Path: path + suffix, Locals: f.Locals})
		}
		return true
	case definition.KindForeach:
		items, err := s.Foreach.Items.EvalList(env)
		if err != nil {
			return a.exprFailed(f, "foreach", err)
		}
		run.Items = items
		f.Run = run
		if len(items) == 0 {
			a.complete(f, s, nil)
		}
		return true
	case definition.KindActivity:
		in, err := s.Activity.Input.Eval(env)
		if err != nil {
			return a.exprFailed(f, "input", err)
		}
		run.Input, run.Attempt, run.Scheduled = in, 1, a.c.Now
		if c := s.Activity.Concurrency; c != nil {
			if run.SlotKey, err = c.EvalKey(env); err != nil {
				return a.exprFailed(f, "concurrency key", err)
			}
			run.SlotKey = a.limitKey(run.SlotKey, s)
		}
		if r := s.Activity.RateLimit; r != nil {
			if run.RateKey, err = r.EvalKey(env); err != nil {
				return a.exprFailed(f, "rate limit key", err)
			}
			run.RateKey = a.limitKey(run.RateKey, s)
		}
		f.Run = run
		a.invoke(f, s)
		return false
	case definition.KindWait:
		key, err := s.Wait.Key.EvalString(env)
		if err != nil {
			return a.exprFailed(f, "wait key", err)
		}
		timeout := s.Wait.Timeout
		if !s.Wait.TimeoutExpr.IsZero() {
			if timeout, err = s.Wait.TimeoutExpr.EvalTimeout(env); err != nil {
				return a.exprFailed(f, "wait timeout", err)
			}
			run.Timeout = timeout
		}
		run.Pending, run.Token = PendingBookmark, a.next("b")
		f.Run = run
		a.emit(CreateBookmark{Token: run.Token, StepID: s.ID, Path: path, Event: s.Wait.Event, Key: key})
		data := map[string]any{"event": s.Wait.Event, "key": key}
		if timeout > 0 {
			data["timeout"] = timeout.String()
		}
		a.record(weft.HistoryBookmarkCreated, path, 0, data)
		if timeout > 0 {
			run.TimeoutToken = a.next("t")
			a.emit(ArmTimer{Token: run.TimeoutToken, Due: a.c.Now.Add(timeout), Kind: TimerWaitTimeout})
		}
		return false
	case definition.KindDelay:
		delay, due, field, err := a.delay(s, env)
		if err != nil {
			return a.exprFailed(f, field, err)
		}
		f.Run = run
		data := map[string]any{"due": due, "delay": delay.String()}
		if delay <= 0 {
			// Already due: no timer, and the step completes at once, its
			// history as a delay's that fired.
			data["already_due"] = true
			a.record(weft.HistoryTimerArmed, path, 0, data)
			a.record(weft.HistoryTimerFired, path, 0, nil)
			a.complete(f, s, nil)
			return true
		}
		run.Pending, run.Token = PendingDelay, a.next("t")
		a.emit(ArmTimer{Token: run.Token, Due: due, Kind: TimerDelay})
		a.record(weft.HistoryTimerArmed, path, 0, data)
		return false
	case definition.KindWorkflow:
		in, err := s.Workflow.Input.Eval(env)
		if err != nil {
			return a.exprFailed(f, "input", err)
		}
		run.Pending, run.Token, run.Input = PendingChild, a.next("c"), in
		f.Run = run
		a.emit(StartChild{Token: run.Token, StepID: s.ID, Workflow: s.Workflow.Name, Input: in})
		a.record(weft.HistoryChildStarted, path, 0, map[string]any{"workflow": s.Workflow.Name, "instance": ChildID(a.c.InstanceID, run.Token)})
		return false
	}
	return a.failStep(f, "internal", fmt.Sprintf("step kind %q cannot run", s.Kind))
}

// delay works out a delay step's wait from now: its duration (zero or less
// when it is already due) and its due time. A computed one that cannot be
// evaluated fails with the field to name.
func (a *apply) delay(s *definition.Step, env definition.Env) (time.Duration, time.Time, string, error) {
	switch {
	case !s.DelayUntil.IsZero():
		until, err := s.DelayUntil.EvalTime(env)
		if err != nil {
			return 0, time.Time{}, "delay until", err
		}
		if until.After(a.c.Now.Add(math.MaxInt64)) {
			// Sub would saturate: the timer would be armed early.
			err := fmt.Errorf("%s is beyond the longest delay from now (about 106751d, 292 years)", until.Format(time.RFC3339Nano))
			return 0, time.Time{}, "delay until", &definition.EvalError{Source: fmt.Sprint(s.DelayUntil.Source()), Err: err}
		}
		until = until.In(a.c.Now.Location())
		return until.Sub(a.c.Now), until, "", nil
	case !s.DelayExpr.IsZero():
		d, err := s.DelayExpr.EvalDuration(env)
		if err != nil {
			return 0, time.Time{}, "delay", err
		}
		return d, a.c.Now.Add(d), "", nil
	}
	return s.Delay, a.c.Now.Add(s.Delay), "", nil
}

// advanceContainer advances a container's children and completes it when
// they are all done; it reports whether f can go on.
func (a *apply) advanceContainer(f *Frame, s *definition.Step) bool {
	run := f.Run
	if s.Kind == definition.KindForeach {
		// Start iterations while slots are free.
		for run.Next < len(run.Items) && len(run.Children) < max(1, s.Foreach.Concurrency) {
			i := run.Next
			run.Next++
			locals := make(map[string]any, len(f.Locals)+1)
			for k, v := range f.Locals {
				locals[k] = v
			}
			locals[s.Foreach.As] = run.Items[i]
			run.Children = append(run.Children, &Frame{
				List: f.List + "[" + strconv.Itoa(f.Index) + "].do", Path: stepPath(f) + ".do#" + strconv.Itoa(i), Locals: locals,
			})
		}
	}
	for _, c := range run.Children {
		a.advance(c)
		if a.st.Status.Terminal() {
			return false
		}
	}
	if s.Kind == definition.KindForeach {
		kept := run.Children[:0]
		for _, c := range run.Children {
			if !c.Done {
				kept = append(kept, c)
			}
		}
		run.Children = kept
		if run.Next < len(run.Items) {
			return len(run.Children) < max(1, s.Foreach.Concurrency) // free slots: start more
		}
	}
	for _, c := range run.Children {
		if !c.Done {
			return false
		}
	}
	a.complete(f, s, nil)
	return true
}

// complete finishes the step under f's cursor, stores its result and moves
// the cursor on.
func (a *apply) complete(f *Frame, s *definition.Step, result any) {
	if s.Output != "" && (s.Kind == definition.KindActivity || s.Kind == definition.KindWait || s.Kind == definition.KindWorkflow) {
		a.st.VarsRev++
		a.setVar(s.Output, result)
	}
	a.emit(Record{Type: weft.HistoryStepCompleted, Path: stepPath(f), Step: s.ID, Data: map[string]any{"step": s.ID}, Elapsed: a.elapsed(f)})
	if s.Persist == definition.PersistAlways {
		a.persist = true
	}
	f.Run = nil
	f.Index++
}

// failStep fails the step under f's cursor, and with it the instance.
func (a *apply) failStep(f *Frame, code, message string) bool {
	a.stepFailed(f, code)
	a.fail(&weft.Failure{Code: code, Message: message, Step: stepPath(f)})
	return false
}

// exprFailed fails the step under f on an expression of its field that
// could not be evaluated, naming the step: the expression alone does not
// say where it is.
func (a *apply) exprFailed(f *Frame, field string, err error) bool {
	return a.failStep(f, "expression", fmt.Sprintf("step %q, %s: %v", a.step(f).ID, field, err))
}

// stepFailed records that the step under f failed (the instance fails
// with it).
func (a *apply) stepFailed(f *Frame, code string) {
	id := a.step(f).ID
	a.emit(Record{Type: weft.HistoryStepFailed, Path: stepPath(f), Step: id, Data: map[string]any{"step": id, "code": code}, Elapsed: a.elapsed(f)})
}

// elapsed is how long the step under f has run.
func (a *apply) elapsed(f *Frame) time.Duration {
	if f.Run == nil || f.Run.Started.IsZero() {
		return 0
	}
	return a.c.Now.Sub(f.Run.Started)
}

// fail ends the instance as failed, cancelling everything outstanding.
func (a *apply) fail(failure *weft.Failure) {
	a.cancelOutstanding(a.st.Root)
	a.unpause()
	a.st.Status = weft.StatusFailed
	a.st.Error = failure
	a.record(weft.HistoryInstanceFailed, failure.Step, 0, map[string]any{"code": failure.Code, "message": failure.Message})
	a.emit(Finish{Status: weft.StatusFailed, Error: failure})
}

// recover reschedules every activity in flight under f as its next attempt.
func (a *apply) recover(f *Frame, beats map[string]json.RawMessage) {
	if f == nil || f.Run == nil {
		return
	}
	if r := f.Run; r.Pending == PendingActivity {
		data := map[string]any{"token": r.Token, "reason": "no longer in flight"}
		if d, ok := beats[r.Token]; ok && len(d) > 0 {
			r.LastHeartbeat = d
			data["last_heartbeat"] = d
		}
		a.record(weft.HistoryAttemptAbandoned, stepPath(f), r.Attempt, data)
		a.releaseSlot(f) // its slot went with its node: the next attempt asks anew
		r.Attempt++
		if a.st.Paused != nil {
			r.Pending, r.Token = PendingPaused, "" // Resume invokes it
		} else {
			a.invoke(f, a.step(f))
		}
	}
	for _, c := range f.Run.Children {
		a.recover(c, beats)
	}
}

// retry un-fails the instance and restarts the steps its failure stopped.
func (a *apply) retry(ev Retry) {
	failed := a.st.Error
	a.st.Status, a.st.Error = weft.StatusRunning, nil
	// The reason always, as before actors were recorded.
	data := ev.Op.Data(map[string]any{"reason": ev.Op.Reason})
	if failed != nil {
		data["code"], data["step"] = failed.Code, failed.Step
	}
	a.emit(Record{Type: weft.HistoryInstanceRetried, Actor: ev.Op.Actor, Data: data})
	a.restart(a.st.Root)
	a.advance(a.st.Root)
}

// restart starts again every step under f that the failure stopped. An
// activity keeps its execution, and so its idempotency key and the
// details its last attempt reported: the attempts after a retry are more
// attempts of the same call (a charge that went through before its
// attempt failed is not made twice), numbered from 1 again, with a fresh
// schedule-to-close. Another leaf (a wait, a delay, a child) whose
// operation was cancelled loses its run, which advance begins anew. A
// step that failed before it began (an expression, a fail step) has no
// run, and begins anew as it is. Containers keep their runs (an if its
// branch, a foreach its items and place) and restart inside.
func (a *apply) restart(f *Frame) {
	if f == nil || f.Done || f.Run == nil {
		return
	}
	switch s := a.step(f); s.Kind {
	case definition.KindActivity:
		if f.Run.Pending == "" {
			f.Run.Attempt, f.Run.Scheduled = 1, a.c.Now
			a.invoke(f, s)
		}
		return
	case definition.KindWait, definition.KindDelay, definition.KindWorkflow:
		if f.Run.Pending == "" {
			f.Run = nil
		}
		return
	}
	for _, c := range f.Run.Children {
		a.restart(c)
	}
}

// cancel ends the instance as cancelled. The state keeps why, as it keeps
// a failure, so that the instance's error says so: an instance that ended
// without completing always has one.
func (a *apply) cancel(ev Cancel) {
	a.cancelOutstanding(a.st.Root)
	a.unpause()
	a.st.Status = weft.StatusCancelled
	a.st.Error = &weft.Failure{Code: string(weft.StatusCancelled), Message: ev.Op.Reason}
	// The reason always, as before actors were recorded.
	a.emit(Record{Type: weft.HistoryInstanceCancelled, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"reason": ev.Op.Reason})})
	a.emit(Finish{Status: weft.StatusCancelled, Error: a.st.Error})
}

// cancelOutstanding cancels every outstanding operation under f.
func (a *apply) cancelOutstanding(f *Frame) {
	if f == nil || f.Run == nil {
		return
	}
	r := f.Run
	switch r.Pending {
	case PendingActivity:
		a.emit(CancelActivity{Token: r.Token})
	case PendingRetry, PendingDelay:
		a.emit(CancelTimer{Token: r.Token})
	case PendingDeferred:
		a.emit(CancelTimer{Token: r.Token})
		a.releaseSlot(f)
		r.Deferred = ""
	case PendingBookmark:
		a.emit(RemoveBookmark{Token: r.Token})
	case PendingChild:
		a.emit(CancelChild{Token: r.Token})
	}
	if r.TimeoutToken != "" {
		a.emit(CancelTimer{Token: r.TimeoutToken})
	}
	r.Pending, r.Token, r.TimeoutToken = "", "", ""
	for _, c := range r.Children {
		a.cancelOutstanding(c)
	}
}

// find returns the frame whose step waits on token, with what it waits for.
func find(f *Frame, token string) (*Frame, bool) {
	if f == nil || f.Run == nil || token == "" {
		return nil, false
	}
	if f.Run.Token == token || f.Run.TimeoutToken == token {
		return f, true
	}
	for _, c := range f.Run.Children {
		if g, ok := find(c, token); ok {
			return g, true
		}
	}
	return nil, false
}

// waiting returns the frame waiting on token for want, or records the event
// as refused.
func (a *apply) waiting(token string, want Pending, event string, ev Input) *Frame {
	f, ok := find(a.st.Root, token)
	if ok && f.Run.Token == token && f.Run.Pending == want {
		return f
	}
	// An attempt's end is recorded where it ran, with its logs.
	data := map[string]any{"event": event, "token": token, "reason": "not outstanding (superseded, cancelled or unknown)"}
	path, attempt := a.attemptEnd(ev, data)
	a.record(weft.HistoryEventRefused, path, attempt, data)
	return nil
}

func (a *apply) invoke(f *Frame, s *definition.Step) {
	r := f.Run
	r.Pending, r.Token = PendingActivity, a.next("a")
	inv := Invoke{
		Token: r.Token, StepID: s.ID, Path: stepPath(f),
		Plugin: s.Activity.Plugin, Activity: s.Activity.Name, Input: r.Input, Attempt: r.Attempt,
		IdempotencyKey:   a.c.InstanceID + "/" + s.ID + "/" + r.Exec,
		Timeout:          s.Activity.Timeout,
		HeartbeatTimeout: s.Activity.HeartbeatTimeout,
		LastHeartbeat:    r.LastHeartbeat,
	}
	if s.Activity.ScheduleToClose > 0 {
		inv.Deadline = r.Scheduled.Add(s.Activity.ScheduleToClose)
	}
	if c := s.Activity.Concurrency; c != nil && r.SlotKey != "" {
		inv.Slot = &StepSlot{Key: r.SlotKey, Limit: c.Limit, Holder: a.holder(r)}
	}
	if l := s.Activity.RateLimit; l != nil && r.RateKey != "" {
		inv.Rate = &StepRate{Key: r.RateKey, Limit: l.Limit}
	}
	inv.Resumed, r.Deferred = r.Deferred, ""
	data := map[string]any{"plugin": inv.Plugin, "activity": inv.Activity}
	if a.c.AttemptDataLimit > 0 {
		// Encoded here, once, for the record and for the call.
		if in, err := jsonv.Encode(r.Input); err == nil {
			inv.InputJSON = in
			a.attemptData(data, "input", in)
		}
	}
	a.emit(inv)
	a.record(weft.HistoryActivityScheduled, inv.Path, r.Attempt, data)
}

// attemptData records an attempt's input or output, doc, in data under
// name when it is within Context.AttemptDataLimit, and otherwise only its
// size, under name + "_omitted_bytes": cut short, it would not be JSON.
func (a *apply) attemptData(data map[string]any, name string, doc json.RawMessage) {
	if len(doc) > a.c.AttemptDataLimit {
		data[name+"_omitted_bytes"] = len(doc)
		return
	}
	data[name] = doc
}

// attemptEnd adds the logs of an attempt's end that is not applied to
// data and returns where it ran; nothing for another input.
func (a *apply) attemptEnd(ev Input, data map[string]any) (path string, attempt int) {
	switch ev := ev.(type) {
	case ActivityCompleted:
		addLogs(data, ev.Logs)
		return ev.Path, ev.Attempt
	case ActivityFailed:
		addLogs(data, ev.Logs)
		return ev.Path, ev.Attempt
	}
	return "", 0
}

func (a *apply) activityCompleted(ev ActivityCompleted) {
	f := a.waiting(ev.Token, PendingActivity, "activity_completed", ev)
	if f == nil {
		return
	}
	s := a.step(f)
	data := map[string]any{}
	if len(ev.Requests) > 0 {
		data["requests"] = ev.Requests
	}
	if a.c.AttemptDataLimit > 0 {
		out := ev.OutputJSON
		if out == nil {
			out, _ = jsonv.Encode(ev.Output) // decoded from JSON: it encodes
		}
		a.attemptData(data, "output", out)
	}
	addLogs(data, ev.Logs)
	if len(data) == 0 {
		data = nil
	}
	a.record(weft.HistoryActivityCompleted, stepPath(f), f.Run.Attempt, data)
	if a.p.def.Persistence == definition.PersistenceActivity && s.Persist != definition.PersistNever {
		a.persist = true
	}
	a.complete(f, s, ev.Output)
	a.resume(f)
}

func (a *apply) activityFailed(ev ActivityFailed) {
	f := a.waiting(ev.Token, PendingActivity, "activity_failed", ev)
	if f == nil {
		return
	}
	s, r := a.step(f), f.Run
	if ev.LastHeartbeat != nil {
		r.LastHeartbeat = ev.LastHeartbeat
	}
	data := map[string]any{"code": ev.Cause.Code, "kind": string(ev.Cause.Kind), "message": ev.Message}
	if len(r.LastHeartbeat) > 0 {
		data["last_heartbeat"] = r.LastHeartbeat
	}
	if len(ev.Requests) > 0 {
		data["requests"] = ev.Requests
	}
	addLogs(data, ev.Logs)
	a.record(weft.HistoryActivityFailed, stepPath(f), r.Attempt, data)
	d := retry.Decide(s.Activity.Retry, retry.Attempt{
		Number: r.Attempt, Failed: a.c.Now, FirstScheduled: r.Scheduled, ScheduleToClose: s.Activity.ScheduleToClose,
	}, ev.Cause, a.c.Rand)
	if !d.Retry {
		r.Pending, r.Token = "", "" // it has ended: nothing to cancel
		a.stepFailed(f, ev.Cause.Code)
		a.fail(&weft.Failure{Code: ev.Cause.Code, Message: ev.Message, Details: ev.Details, Step: stepPath(f)})
		return
	}
	r.Pending, r.Token = PendingRetry, a.next("t")
	due := a.c.Now.Add(d.Delay)
	a.emit(ArmTimer{Token: r.Token, Due: due, Kind: TimerRetry})
	a.record(weft.HistoryRetryScheduled, stepPath(f), r.Attempt+1, map[string]any{"due": due, "delay": d.Delay.String()})
}

// activityDeferred parks an attempt the shell did not start, for a step
// limit, until ev.Until: a durable timer, so that the instance waits
// without a worker; its wait counts toward the step's schedule-to-close
// (Run.Scheduled is kept), and toward no attempt's timeout.
func (a *apply) activityDeferred(ev ActivityDeferred) {
	f := a.waiting(ev.Token, PendingActivity, "activity_deferred", ev)
	if f == nil {
		return
	}
	r := f.Run
	r.Pending, r.Token, r.Deferred = PendingDeferred, a.next("t"), ev.Reason
	a.emit(ArmTimer{Token: r.Token, Due: ev.Until, Kind: TimerDeferred})
	a.record(weft.HistoryActivityDeferred, stepPath(f), r.Attempt, map[string]any{"reason": ev.Reason, "key": ev.Key, "until": ev.Until})
}

// releaseSlot gives up the slot, or the place in the line, of the
// attempt of f's activity, when it has a concurrency limit.
func (a *apply) releaseSlot(f *Frame) {
	r := f.Run
	if r.SlotKey == "" {
		return
	}
	if s := a.step(f); s.Kind == definition.KindActivity && s.Activity.Concurrency != nil {
		a.emit(ReleaseSlot{Key: r.SlotKey, Holder: a.holder(r), Limit: s.Activity.Concurrency.Limit})
	}
}

// limitKey is the key of a step limit: the one the step names, or the
// step's own, "<workflow>.<step id>", when it names none.
func (a *apply) limitKey(key string, s *definition.Step) string {
	if key == "" {
		return a.p.def.Name + "." + s.ID
	}
	return key
}

// holder names an activity's attempt among the holders and waiters of its
// step's concurrency key.
func (a *apply) holder(r *Run) string {
	return r.Exec + "/" + strconv.Itoa(r.Attempt) + "/" + a.c.InstanceID
}

// HolderInstance returns the instance of a StepSlot.Holder; false for a
// string that is not one.
func HolderInstance(holder string) (string, bool) {
	_, rest, ok := strings.Cut(holder, "/")
	if !ok {
		return "", false
	}
	_, id, ok := strings.Cut(rest, "/")
	return id, ok && id != ""
}

// DeferredSlot is an attempt deferred for its step's concurrency limit:
// the timer that starts it again, and its place under the limit.
type DeferredSlot struct {
	Timer string
	StepSlot
}

// DeferredSlots returns the attempts of st deferred for a concurrency
// limit, for the shell to start at once those whose turn has come (their
// timer is only a fallback).
func (p *Program) DeferredSlots(st *State, instanceID string) []DeferredSlot {
	if st.Paused != nil {
		return nil // they left their lines when it paused: Resume asks again
	}
	var out []DeferredSlot
	a := &apply{p: p, st: st, c: Context{InstanceID: instanceID}}
	var walk func(f *Frame)
	walk = func(f *Frame) {
		if f == nil || f.Run == nil {
			return
		}
		r := f.Run
		if r.Pending == PendingDeferred && r.Deferred == DeferredConcurrency && r.SlotKey != "" {
			if s := a.step(f); s.Kind == definition.KindActivity && s.Activity.Concurrency != nil {
				out = append(out, DeferredSlot{Timer: r.Token, StepSlot: StepSlot{Key: r.SlotKey, Limit: s.Activity.Concurrency.Limit, Holder: a.holder(r)}})
			}
		}
		for _, c := range r.Children {
			walk(c)
		}
	}
	walk(st.Root)
	return out
}

func (a *apply) timerFired(ev TimerFired) {
	f, ok := find(a.st.Root, ev.Token)
	if !ok {
		a.record(weft.HistoryEventRefused, "", 0, map[string]any{"event": "timer_fired", "token": ev.Token, "reason": "not outstanding"})
		return
	}
	s, r := a.step(f), f.Run
	switch {
	case r.TimeoutToken == ev.Token && r.Pending == PendingBookmark:
		a.emit(RemoveBookmark{Token: r.Token})
		r.Pending, r.Token, r.TimeoutToken = "", "", ""
		a.record(weft.HistoryWaitTimedOut, stepPath(f), 0, nil)
		timeout := s.Wait.Timeout
		if r.Timeout > 0 {
			timeout = r.Timeout // computed when the wait started
		}
		a.failStep(f, "timeout", fmt.Sprintf("no %s stimulus within %s", s.Wait.Event, timeout))
	case r.Pending == PendingRetry:
		r.Attempt++
		a.invoke(f, s)
	case r.Pending == PendingDeferred:
		a.invoke(f, s) // the same attempt: it never started
	case r.Pending == PendingDelay:
		a.record(weft.HistoryTimerFired, stepPath(f), 0, nil)
		a.complete(f, s, nil)
		a.resume(f)
	}
}

func (a *apply) stimulusDelivered(ev StimulusDelivered) {
	f := a.waiting(ev.Token, PendingBookmark, "stimulus_delivered", ev)
	if f == nil {
		return
	}
	if f.Run.TimeoutToken != "" {
		a.emit(CancelTimer{Token: f.Run.TimeoutToken})
	}
	// The stimulus consumed the bookmark: a later one with the same event
	// and key must not find it.
	a.emit(RemoveBookmark{Token: ev.Token})
	if ev.Op != nil {
		a.emit(Record{Type: weft.HistoryBookmarkResumed, Path: stepPath(f), Actor: ev.Op.Actor, Data: ev.Op.Data(nil)})
	} else {
		a.record(weft.HistoryBookmarkResumed, stepPath(f), 0, nil)
	}
	a.complete(f, a.step(f), ev.Payload)
	a.resume(f)
}

func (a *apply) childCompleted(ev ChildCompleted) {
	f := a.waiting(ev.Token, PendingChild, "child_completed", ev)
	if f == nil {
		return
	}
	a.record(weft.HistoryChildCompleted, stepPath(f), 0, nil)
	a.complete(f, a.step(f), ev.Output)
	a.resume(f)
}

func (a *apply) childFailed(ev ChildFailed) {
	f := a.waiting(ev.Token, PendingChild, "child_failed", ev)
	if f == nil {
		return
	}
	f.Run.Pending, f.Run.Token = "", ""
	a.failStep(f, ev.Failure.Code, "child workflow failed: "+ev.Failure.Message)
}

// resume advances the whole tree after a leaf completed. The tree is small,
// so advancing from the root is simpler than finding the path up.
func (a *apply) resume(*Frame) { a.advance(a.st.Root) }

// addLogs sets data's logs and logs_dropped, the fields of l's JSON form
// (weft.AttemptLogs), as far as l has them.
func addLogs(data map[string]any, l weft.AttemptLogs) {
	if len(l.Lines) > 0 {
		data["logs"] = l.Lines
	}
	if l.Dropped != nil {
		data["logs_dropped"] = l.Dropped
	}
}

// hold keeps ev for Resume when it is an input a paused instance holds
// for an outstanding token, recorded as event_held; a second one for the
// token is refused, as it would be after the first was applied. It
// reports whether ev was dealt with.
func (a *apply) hold(ev Input) bool {
	h, ok := held(ev, a.c.Now)
	if !ok {
		return false
	}
	if _, out := find(a.st.Root, h.Token); !out {
		return false // refused as ever by its handler
	}
	data := map[string]any{"event": h.Input, "token": h.Token}
	for _, o := range a.st.Held {
		if o.Token == h.Token {
			data["reason"] = "one already held for the token"
			a.record(weft.HistoryEventRefused, "", 0, data)
			return true
		}
	}
	a.st.Held = append(a.st.Held, h)
	a.record(weft.HistoryEventHeld, "", 0, data)
	return true
}

// pause pauses the instance (see Pause).
func (a *apply) pause(ev Pause) {
	if a.st.Paused != nil {
		a.emit(Record{Type: weft.HistoryEventIgnored, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"reason": "already paused", "event": "pause"})})
		return
	}
	a.st.Paused = &weft.Pause{Since: a.c.Now, Op: ev.Op}
	a.emit(Record{Type: weft.HistoryInstancePaused, Actor: ev.Op.Actor, Data: ev.Op.Data(nil)})
	// An attempt waiting in its key's line would be let in and hold a
	// slot it does not use: it leaves the line (its timer stays, and is
	// held when it fires), and asks again on resume.
	walk(a.st.Root, func(f *Frame) {
		if r := f.Run; r.Pending == PendingDeferred && r.Deferred == DeferredConcurrency {
			a.releaseSlot(f)
		}
	})
}

// resumeInstance resumes a paused instance (see Resume).
func (a *apply) resumeInstance(ev Resume) {
	if a.st.Paused == nil {
		a.emit(Record{Type: weft.HistoryEventIgnored, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"reason": "not paused", "event": "resume"})})
		return
	}
	held := a.st.Held
	data := ev.Op.Data(map[string]any{"held": len(held), "paused_ms": a.c.Now.Sub(a.st.Paused.Since).Milliseconds()})
	a.unpause()
	a.emit(Record{Type: weft.HistoryInstanceResumed, Actor: ev.Op.Actor, Data: data})
	walk(a.st.Root, func(f *Frame) {
		if f.Run.Pending == PendingPaused {
			a.invoke(f, a.step(f))
		}
	})
	for _, h := range held {
		if a.st.Status.Terminal() {
			// A held input failed it (a wait's timeout came first): the
			// others are recorded, as after any end, not applied.
			a.record(weft.HistoryEventIgnored, "", 0, map[string]any{"event": h.Input, "token": h.Token, "reason": "instance " + string(a.st.Status)})
			continue
		}
		switch in := h.input().(type) {
		case TimerFired:
			a.timerFired(in)
		case StimulusDelivered:
			a.stimulusDelivered(in)
		case ChildCompleted:
			a.childCompleted(in)
		case ChildFailed:
			a.childFailed(in)
		}
	}
	if a.st.Status.Terminal() {
		return
	}
	// Those still deferred for a concurrency limit left their lines when
	// the instance paused: they ask for their slot again now.
	walk(a.st.Root, func(f *Frame) {
		if r := f.Run; r.Pending == PendingDeferred && r.Deferred == DeferredConcurrency {
			a.emit(CancelTimer{Token: r.Token})
			a.invoke(f, a.step(f))
		}
	})
	a.advance(a.st.Root)
}

// unpause forgets the pause and what it held.
func (a *apply) unpause() { a.st.Paused, a.st.Held = nil, nil }

// walk calls fn on every frame under f that has a run, parents first.
func walk(f *Frame, fn func(*Frame)) {
	if f == nil || f.Run == nil {
		return
	}
	fn(f)
	for _, c := range f.Run.Children {
		walk(c, fn)
	}
}

// setVar sets variable name, a change of revision VarsRev (which the
// caller has counted).
func (a *apply) setVar(name string, v any) {
	a.st.Vars[name] = v
	if a.st.VarsAt == nil {
		a.st.VarsAt = map[string]uint64{}
	}
	a.st.VarsAt[name] = a.st.VarsRev
}

// markVars adds to data, a top-level step's step_started record's, the
// variables when they changed since the last copy, for a Reset to the
// step: as the changes since that copy (vars_changed) when the records
// since the last whole copy rebuild it, whole (vars) otherwise (the first
// copy, after a reset, after a copy omitted, or in a state that predates
// the changes); by their size only when over Context.VarsLimit. Changes
// keep a chain of n steps that each add a variable linear in n where
// whole copies were quadratic.
func (a *apply) markVars(data map[string]any) {
	if a.c.VarsLimit <= 0 || a.st.VarsRev == a.st.VarsMarked && a.st.VarsRev != 0 {
		return
	}
	a.st.VarsRev = max(a.st.VarsRev, 1)
	changes := a.st.VarsChain && a.st.VarsAt != nil
	vars := a.st.Vars
	if changes {
		vars = make(map[string]any)
		for k, v := range a.st.Vars {
			if a.st.VarsAt[k] > a.st.VarsMarked {
				vars[k] = v
			}
		}
	}
	a.st.VarsMarked = a.st.VarsRev
	doc, err := jsonv.EncodeMap(vars)
	switch {
	case err != nil:
		// A value JSON has no form for (an expression's infinity): the
		// store could not keep the state either, but say why here.
		data["vars_error"] = err.Error()
		a.st.VarsChain = false
	case len(doc) > a.c.VarsLimit:
		data["vars_omitted_bytes"] = len(doc)
		a.st.VarsChain = false
	case changes:
		// The encoding, not the map: later actions of this Apply may
		// change the variables before the shell writes the record.
		data["vars_changed"] = json.RawMessage(doc)
	default:
		data["vars"] = json.RawMessage(doc)
		a.st.VarsChain = true
	}
}

// reset runs the instance again from a top-level step (see Reset).
func (a *apply) reset(ev Reset) {
	index := slices.IndexFunc(a.p.lists["steps"], func(s *definition.Step) bool { return s.ID == ev.Step })
	if index < 0 {
		a.emit(Record{Type: weft.HistoryEventIgnored, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"reason": "no top-level step " + strconv.Quote(ev.Step), "event": "reset"})})
		return
	}
	from := a.st.Status
	a.cancelOutstanding(a.st.Root)
	a.st.Held = nil // for operations just cancelled
	a.st.Status, a.st.Error, a.st.Output = weft.StatusRunning, nil, nil
	a.st.Vars = maps.Clone(ev.Vars)
	if a.st.Vars == nil {
		a.st.Vars = map[string]any{}
	}
	a.st.VarsRev++
	// Replaced whole: the next step's record copies them whole.
	a.st.VarsAt, a.st.VarsChain = nil, false
	a.st.Root = &Frame{List: "steps", Path: "steps", Index: index}
	a.emit(Record{Type: weft.HistoryInstanceReset, Actor: ev.Op.Actor, Data: ev.Op.Data(map[string]any{"step": ev.Step, "from_status": string(from)})})
	a.advance(a.st.Root)
}
