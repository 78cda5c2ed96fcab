package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
)

// MigrationPlan says whether an instance's state can move from one program
// (the workflow version it runs) to another, and how: an operator moves
// instances stuck on a bad rollout to a fixed version (docs/operations.md,
// Migrate). It is a pure function of the two programs and the state, so a
// dry run is the plan alone, and the engine plans again at rest, against
// the state then, before it applies one.
//
// Frames map by step id, which is unique across a definition: the step an
// instance is at, and every step after it in its list, must be in the
// target, in the same list, in the same order and of the same kind. New
// steps in between will run; new steps before the place will not (Notes).
type MigrationPlan struct {
	// CanMove: the state is at rest (suspended, paused or failed, with no
	// attempt in flight) and has no Problems; Apply moves it.
	CanMove bool
	// At is where the instance is: one point per frame with work left, in
	// the order of the state's tree (a container before its children).
	At []weft.MigrationPoint
	// Problems say why the state cannot move; empty when it can.
	Problems []weft.MigrationProblem
	// Notes say what the move changes for the rest of the run, each once:
	// new steps that will run or not, an activity that calls another
	// plugin or activity.
	Notes []string
	// Activities are the activities the rest of the run may call in the
	// target, by plugin, sorted: the plugin versions the instance is to be
	// pinned to must have them. Nil when there are none.
	Activities map[string][]string

	// frames are the moves Apply makes, by the frame's path in the source.
	frames map[string]frameMove
	// errorFrom and errorTo are a failed state's Error.Step before and
	// after the move ("" when it has none).
	errorFrom, errorTo string
}

// frameMove is where a frame goes: its list and path in the target, and
// its cursor there; and, to check that Apply moves the state planned, its
// list and cursor in the source.
type frameMove struct {
	list, path string
	index      int
	fromList   string
	fromIndex  int
}

// stepAt is where a step is in a program: its list and index.
type stepAt struct {
	list  string
	index int
	step  *definition.Step
}

// stepsByID indexes p's steps by id.
func stepsByID(p *Program) map[string]stepAt {
	at := map[string]stepAt{}
	for list, steps := range p.lists {
		for i, s := range steps {
			at[s.ID] = stepAt{list: list, index: i, step: s}
		}
	}
	return at
}

// PlanMigration works out whether st, an instance's state under from, can
// move to to, and how. It changes nothing; Apply moves the state. Whether
// the plugin versions the instance is to be pinned to have the
// activities the rest of the run calls (Activities) is the caller's to
// check: the runner knows no plugin versions.
func PlanMigration(st *State, from, to *Program) *MigrationPlan {
	plan := &MigrationPlan{}
	if msg := atRest(st); msg != "" {
		plan.Problems = []weft.MigrationProblem{{Message: msg}}
		return plan
	}
	m := &planner{
		st: st, from: from, to: to,
		fromAt: stepsByID(from), toAt: stepsByID(to),
		plan:  plan,
		noted: map[string]bool{},
		acts:  map[string]map[string]bool{},
	}
	plan.frames = map[string]frameMove{}
	m.frame(st.Root, "steps", "steps")
	if st.Error != nil && st.Error.Step != "" && plan.errorFrom == "" && len(plan.Problems) == 0 {
		plan.Problems = append(plan.Problems, weft.MigrationProblem{Path: st.Error.Step,
			Message: fmt.Sprintf("failed at %s, where no frame of the state is", st.Error.Step)})
	}
	for plugin, names := range m.acts {
		if plan.Activities == nil {
			plan.Activities = map[string][]string{}
		}
		for name := range names {
			plan.Activities[plugin] = append(plan.Activities[plugin], name)
		}
		slices.Sort(plan.Activities[plugin])
	}
	plan.CanMove = len(plan.Problems) == 0
	return plan
}

// atRest says why st cannot move at all ("" when it is at rest): only a
// suspended, paused or failed state with nothing in flight can.
func atRest(st *State) string {
	status := st.Status
	if status == "" {
		status = weft.StatusPending
	}
	switch {
	case status == weft.StatusCompleted || status == weft.StatusCancelled:
		return string(status) + ": finished"
	case st.InFlight():
		return string(status) + ": an attempt is in flight"
	case st.Root == nil:
		return string(status) + ": it has begun no step"
	case status != weft.StatusSuspended && status != weft.StatusPaused && status != weft.StatusFailed:
		return string(status) + ": not at rest"
	}
	return ""
}

// planner is the state of one PlanMigration call.
type planner struct {
	st           *State
	from, to     *Program
	fromAt, toAt map[string]stepAt
	plan         *MigrationPlan
	noted        map[string]bool
	acts         map[string]map[string]bool // plugin → activity names
}

func (m *planner) problem(step, path, format string, args ...any) {
	m.plan.Problems = append(m.plan.Problems, weft.MigrationProblem{Step: step, Path: path, Message: fmt.Sprintf(format, args...)})
}

func (m *planner) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !m.noted[n] {
		m.noted[n] = true
		m.plan.Notes = append(m.plan.Notes, n)
	}
}

// frame plans the move of f, whose list and path in the target its parent
// worked out, and of the frames under it.
func (m *planner) frame(f *Frame, list, path string) {
	steps := m.to.lists[list]
	if f.Done {
		// A finished branch: it only needs its list, which its parent
		// checked.
		m.move(f, list, path, len(steps))
		return
	}
	old := m.from.lists[f.List]
	if f.Index >= len(old) {
		// Past its last step, not marked done: the instance ended
		// before the frame could be. Nothing of its list is left to run.
		m.move(f, list, path, len(steps))
		return
	}
	s := old[f.Index]
	from := stepPath(f)
	at, ok := m.toAt[s.ID]
	switch {
	case !ok:
		m.problem(s.ID, from, "step %s, where the instance is, is not in the target", s.ID)
		return
	case at.list != list:
		m.problem(s.ID, from, "step %s, where the instance is, moved from %s to %s", s.ID, f.List, at.list)
		return
	}
	to := path + "[" + strconv.Itoa(at.index) + "]"
	m.plan.At = append(m.plan.At, weft.MigrationPoint{Step: s.ID, Kind: string(s.Kind), From: from, To: to})
	m.move(f, list, path, at.index)
	if m.st.Error != nil && m.st.Error.Step == from {
		m.plan.errorFrom, m.plan.errorTo = from, to
	}
	m.before(f, s, list, at.index)
	m.after(f, s, list, path, at.index)
	if at.step.Kind != s.Kind {
		m.problem(s.ID, from, "step %s, where the instance is, is %s and %s in the target", s.ID, kindName(s.Kind), kindName(at.step.Kind))
		return
	}
	if f.Run == nil {
		m.collect(at.step) // it begins anew (a failed instance's retry)
		return
	}
	m.running(f, s, at, to)
}

// move plans f's move to list and path in the target, with its cursor at
// index.
func (m *planner) move(f *Frame, list, path string, index int) {
	m.plan.frames[f.Path] = frameMove{list: list, path: path, index: index, fromList: f.List, fromIndex: f.Index}
}

// before notes the target's steps before the cursor that f's list does not
// have: the instance is past them, so they will not run in this frame.
func (m *planner) before(f *Frame, s *definition.Step, list string, index int) {
	for _, t := range m.to.lists[list][:index] {
		if o, ok := m.fromAt[t.ID]; !ok || o.list != f.List {
			m.note("new step %s is before %s, where the instance is: it will not run in %s", t.ID, s.ID, f.Path)
		}
	}
}

// after checks that every step after the cursor of f is in the target's
// list, after it, in the same order and of the same kind, and notes the
// target's new steps there.
func (m *planner) after(f *Frame, s *definition.Step, list, path string, index int) {
	prev, prevID := index, s.ID
	old := m.from.lists[f.List]
	for i := f.Index + 1; i < len(old); i++ {
		o := old[i]
		where := f.Path + "[" + strconv.Itoa(i) + "]"
		at, ok := m.toAt[o.ID]
		switch {
		case !ok:
			m.problem(o.ID, where, "step %s, which the instance has yet to run, is not in the target", o.ID)
			continue
		case at.list != list:
			m.problem(o.ID, where, "step %s, which the instance has yet to run, moved from %s to %s", o.ID, f.List, at.list)
		case at.index <= prev:
			m.problem(o.ID, where, "step %s comes before %s in the target", o.ID, prevID)
		default:
			prev, prevID = at.index, o.ID
		}
		if at.step.Kind != o.Kind {
			m.problem(o.ID, where, "step %s is %s and %s in the target", o.ID, kindName(o.Kind), kindName(at.step.Kind))
		}
	}
	steps := m.to.lists[list]
	for j := index + 1; j < len(steps); j++ {
		t := steps[j]
		m.collect(t)
		o, ok := m.fromAt[t.ID]
		switch {
		case !ok:
			m.note("new step %s will run", t.ID)
		case o.list == f.List && o.index > f.Index:
			// checked above
		case o.list == f.List:
			m.problem(t.ID, f.Path+"["+strconv.Itoa(o.index)+"]",
				"step %s, which the instance has run, comes after %s in the target: it would run again", t.ID, s.ID)
		default:
			m.problem(t.ID, path+"["+strconv.Itoa(j)+"]", "step %s moved from %s to %s", t.ID, o.list, list)
		}
	}
}

// running checks the step in progress under f's cursor, s, against its
// target at, whose path in the instance will be to, and plans the frames
// under it.
func (m *planner) running(f *Frame, s *definition.Step, at stepAt, to string) {
	t, r, from := at.step, f.Run, stepPath(f)
	switch s.Kind {
	case definition.KindActivity:
		m.collect(t)
		if t.Activity.Plugin != s.Activity.Plugin || t.Activity.Name != s.Activity.Name {
			m.note("activity step %s now calls %s.%s (was %s.%s): its next attempt does",
				s.ID, t.Activity.Plugin, t.Activity.Name, s.Activity.Plugin, s.Activity.Name)
		}
		if r.Pending == PendingDeferred && r.Deferred == DeferredConcurrency && r.SlotKey != "" && t.Activity.Concurrency == nil {
			m.problem(s.ID, from, "step %s waits in the line of concurrency key %s, and the target has no concurrency limit to release it from", s.ID, r.SlotKey)
		}
		return
	case definition.KindWait:
		if r.Pending == PendingBookmark && t.Wait.Event != s.Wait.Event {
			m.problem(s.ID, from, "step %s waits for event %s, and for %s in the target", s.ID, s.Wait.Event, t.Wait.Event)
		}
		if r.TimeoutToken != "" && (t.Wait.Timeout != s.Wait.Timeout || t.Wait.TimeoutExpr.IsZero() != s.Wait.TimeoutExpr.IsZero()) {
			m.note("wait step %s keeps the timeout it began with", s.ID)
		}
		return
	case definition.KindWorkflow:
		if r.Pending == PendingChild && t.Workflow.Name != s.Workflow.Name {
			m.note("workflow step %s keeps its child of workflow %s (the target starts %s)", s.ID, s.Workflow.Name, t.Workflow.Name)
		}
		return
	case definition.KindParallel:
		if len(t.Parallel) != len(s.Parallel) {
			m.problem(s.ID, from, "parallel step %s, where the instance is, has %d branches, and %d in the target", s.ID, len(s.Parallel), len(t.Parallel))
			return
		}
	case definition.KindForeach:
		if t.Foreach.As != s.Foreach.As {
			m.problem(s.ID, from, "foreach step %s, where the instance is, names its item %s, and %s in the target", s.ID, s.Foreach.As, t.Foreach.As)
			return
		}
		if r.Next < len(r.Items) {
			m.collectList(t.Foreach.Do) // the iterations still to start
		}
	case definition.KindIf:
	default:
		return // set and fail keep no run
	}
	prefix := f.List + "[" + strconv.Itoa(f.Index) + "]."
	for _, c := range r.Children {
		suffix, ok := strings.CutPrefix(c.List, prefix)
		if !ok {
			m.problem(s.ID, from, "a frame under step %s runs %s, which is not one of its lists", s.ID, c.List)
			continue
		}
		iteration, ok := strings.CutPrefix(c.Path, from+"."+suffix)
		if !ok {
			m.problem(s.ID, from, "a frame under step %s is at %s, which is not one of its lists", s.ID, c.Path)
			continue
		}
		list := at.list + "[" + strconv.Itoa(at.index) + "]." + suffix
		if steps, ok := m.to.lists[list]; !ok || (len(steps) == 0 && !c.Done) {
			m.problem(s.ID, from, "step %s, where the instance is, runs its %s, which the target does not have", s.ID, suffix)
			continue
		}
		m.frame(c, list, to+"."+suffix+iteration)
	}
}

// kindName is "a KIND step" or "an KIND step", for a problem.
func kindName(k definition.Kind) string {
	if strings.ContainsRune("aeiou", rune(k[0])) {
		return "an " + string(k) + " step"
	}
	return "a " + string(k) + " step"
}

// collect adds the activities of s, and of every step under it, to the
// plan's.
func (m *planner) collect(s *definition.Step) {
	switch s.Kind {
	case definition.KindActivity:
		names := m.acts[s.Activity.Plugin]
		if names == nil {
			names = map[string]bool{}
			m.acts[s.Activity.Plugin] = names
		}
		names[s.Activity.Name] = true
	case definition.KindIf:
		m.collectList(s.If.Then)
		m.collectList(s.If.Else)
	case definition.KindForeach:
		m.collectList(s.Foreach.Do)
	case definition.KindParallel:
		for _, b := range s.Parallel {
			m.collectList(b.Steps)
		}
	}
}

func (m *planner) collectList(steps []*definition.Step) {
	for _, s := range steps {
		m.collect(s)
	}
}

// Apply moves st as planned: every frame gets its list, path and cursor in
// the target, and a failed state's Error.Step its path there. Tokens, Seq
// and each run's Exec are unchanged, and with them the idempotency keys
// and step limit keys, which name steps by id. It fails, changing nothing,
// when the plan cannot move or st is not the state it was planned for.
func (p *MigrationPlan) Apply(st *State) error {
	if !p.CanMove {
		return fmt.Errorf("migrating the state: the plan cannot move it (%d problems)", len(p.Problems))
	}
	type pending struct {
		f    *Frame
		move frameMove
	}
	var moves []pending
	var walk func(f *Frame) error
	walk = func(f *Frame) error {
		mv, ok := p.frames[f.Path]
		switch {
		case !ok:
			return fmt.Errorf("migrating the state: frame %s is not in the plan; the state changed since it was planned", f.Path)
		case mv.fromList != f.List || mv.fromIndex != f.Index:
			return fmt.Errorf("migrating the state: frame %s is at %s[%d] and the plan has it at %s[%d]; the state changed since it was planned",
				f.Path, f.List, f.Index, mv.fromList, mv.fromIndex)
		}
		moves = append(moves, pending{f, mv})
		if f.Run != nil {
			for _, c := range f.Run.Children {
				if err := walk(c); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if st.Root == nil {
		return fmt.Errorf("migrating the state: it has no frame")
	}
	if err := walk(st.Root); err != nil {
		return err
	}
	if len(moves) != len(p.frames) {
		return fmt.Errorf("migrating the state: it has %d frames and the plan %d; the state changed since it was planned", len(moves), len(p.frames))
	}
	var errorStep string
	if st.Error != nil {
		errorStep = st.Error.Step
	}
	if errorStep != p.errorFrom {
		return fmt.Errorf("migrating the state: it failed at %q and the plan at %q; the state changed since it was planned", errorStep, p.errorFrom)
	}
	for _, mv := range moves {
		mv.f.List, mv.f.Path, mv.f.Index = mv.move.list, mv.move.path, mv.move.index
	}
	if p.errorFrom != "" {
		e := *st.Error // the caller may share the old one
		e.Step = p.errorTo
		st.Error = &e
	}
	return nil
}
