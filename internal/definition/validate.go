package definition

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// Catalog is what Load needs to know about the rest of the host: which
// plugins and activities exist and which workflows are saved. The host's
// plugin registry and definition store implement it.
type Catalog interface {
	// HasPlugin reports whether a plugin with that name is registered.
	HasPlugin(plugin string) bool
	// HasActivity reports whether the plugin's manifest lists the activity.
	HasActivity(plugin, activity string) bool
	// Workflow returns the current version of the named workflow.
	Workflow(name string) (*Definition, bool)
}

// ActivityLister is what a Catalog may also offer: the activities of a
// plugin's current version, so that a misspelt activity gets a suggestion.
type ActivityLister interface {
	Activities(plugin string) []string
}

// DefaultActivityTimeout is the start-to-close timeout of an activity step
// that sets no timeout, unless the host sets another (the engine's
// Config.ActivityTimeout, engine.activity_timeout).
const DefaultActivityTimeout = 10 * time.Minute

// TimeoutDefaults is what a Catalog may also offer: the host's timeout of
// an activity step that sets none, which the step's heartbeat_timeout must
// not exceed. A Catalog without it stands for a host with
// DefaultActivityTimeout.
type TimeoutDefaults interface {
	DefaultActivityTimeout() time.Duration
}

// MaxEventLen is the longest event name.
const MaxEventLen = 128

type validator struct {
	def      *Definition
	catalog  Catalog
	problems []weft.Problem
	ids      map[string]string // step id → path of its first use
	cycles   *cycleFinder
}

func (v *validator) problem(path, format string, args ...any) {
	v.problems = append(v.problems, weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// validate checks def as a whole and against catalog, and returns every
// problem, for Load to report with the parser's. It checks names, step ids
// (unique across the definition, nested steps included), that each step
// has exactly one kind, durations and their relations, retry policies,
// priority and fairness, concurrency (a workflow's, a foreach's and an
// activity step's), an activity step's rate limit, search attributes, wait
// keys, variable names, that plugins, activities and child workflows
// exist, and that child workflows form no cycle. A nil catalog skips the
// checks that need one, except a workflow that starts itself.
//
// When def is a new version of a workflow that catalog already holds, def
// replaces it for the cycle check.
func validate(def *Definition, catalog Catalog) []weft.Problem {
	if def == nil {
		return []weft.Problem{{Path: RootPath, Message: "no definition"}}
	}
	v := &validator{def: def, catalog: catalog, ids: map[string]string{}}
	v.cycles = &cycleFinder{def: def, catalog: catalog, clean: map[string]bool{}}
	switch {
	case def.Name == "":
		v.problem("name", "required")
	case !abi.ValidName(def.Name):
		v.problem("name", "invalid workflow name %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", def.Name, abi.MaxNameLen)
	}
	switch def.Persistence {
	case "", PersistenceLazy, PersistenceActivity:
	default:
		v.problem("persistence", "unknown persistence %q; want lazy or activity", def.Persistence)
	}
	if r := def.Retention; r != nil {
		switch {
		case *r < 0:
			v.problem("retention", "retention %s must not be negative; 0 keeps finished instances forever", *r)
		case *r > MaxRetention:
			v.problem("retention", "retention %s is longer than the limit of 100 years (%s); 0 keeps finished instances forever", *r, MaxRetention)
		}
	}
	v.order(def)
	v.concurrency(def.Concurrency)
	v.search(def.Search)
	events := map[string]bool{}
	for i, t := range def.Triggers {
		p := joinIndex("triggers", i) + ".event"
		if v.event(p, t.Event) {
			if events[t.Event] {
				v.problem(p, "duplicate trigger %q", t.Event)
			}
			events[t.Event] = true
		}
	}
	if len(def.Steps) == 0 {
		v.problem("steps", "required: a workflow has at least one step")
	}
	v.steps("steps", def.Steps, nil, false)
	return v.problems
}

// order checks the literals of priority and fairness; their expressions
// are checked when evaluated (Definition.Order).
func (v *validator) order(def *Definition) {
	if n, ok := def.Priority.src.(int); ok && (n < weft.HighestPriority || n > weft.LowestPriority) {
		v.problem("priority", "priority %d is out of range: want an integer from %d (served first) to %d (served last)", n, weft.HighestPriority, weft.LowestPriority)
	}
	f := def.Fairness
	if f == nil {
		return
	}
	if f.Key.IsZero() && !f.keyReported {
		v.problem(FieldFairnessKey, `required: the lane's key, e.g. "${ input.tenant }"`)
	}
	v.literalKey(FieldFairnessKey, f.Key)
	if n, ok := f.Weight.src.(int); ok && (n < 1 || n > weft.MaxFairnessWeight) {
		v.problem("fairness.weight", "weight %d is out of range: want an integer from 1 to %d", n, weft.MaxFairnessWeight)
	}
}

// literalKey checks the length of a key that is a literal (fairness.key,
// concurrency.key); a computed one is checked when evaluated.
func (v *validator) literalKey(path string, key Value) {
	if key.IsZero() || !key.IsConst() {
		return
	}
	// As evaluated: $${ is one byte shorter than written.
	if k, _ := key.Eval(Env{}); len(stringify(k)) > weft.MaxFairnessKey {
		v.problem(path, "the key is %d bytes long; the limit is %d", len(stringify(k)), weft.MaxFairnessKey)
	}
}

// concurrency checks the literals of a workflow's concurrency: the
// limit's range, the policy and a literal key's length; a computed key is
// checked when evaluated (Definition.ConcurrencyKey).
func (v *validator) concurrency(c *Concurrency) {
	if c == nil {
		return
	}
	v.literalKey(FieldConcurrencyKey, c.Key)
	if !c.limitReported && (c.Limit < 1 || c.Limit > MaxConcurrencyLimit) {
		v.problem("concurrency.limit", "limit %d is out of range: want an integer from 1 to %d", c.Limit, MaxConcurrencyLimit)
	}
	if _, err := slots.ParsePolicy(string(c.Policy)); err != nil {
		policies := []string{string(slots.Queue), string(slots.CancelNewest), string(slots.CancelOldest)}
		if hint := didYouMean(string(c.Policy), policies); hint != "" {
			v.problem("concurrency.policy", "unknown policy %q%s", c.Policy, hint)
		} else {
			v.problem("concurrency.policy", "unknown policy %q; want queue (the default), cancel_newest or cancel_oldest", c.Policy)
		}
	}
}

// event checks an event name and reports whether it is valid.
func (v *validator) event(path, e string) bool {
	if e == "" {
		v.problem(path, "required")
		return false
	}
	if err := CheckEventName(e); err != nil {
		v.problem(path, "%v", err)
		return false
	}
	return true
}

// CheckEventName returns an error when name cannot name an event: empty,
// longer than MaxEventLen, or with a character other than ASCII letters,
// digits and . _ - : /. Definitions and the events sent to the host share
// this rule, so that an event a definition could never name is refused
// when it is sent.
func CheckEventName(name string) error {
	switch {
	case name == "":
		return errors.New("event name is empty")
	case len(name) > MaxEventLen:
		return fmt.Errorf("event name is %d bytes long; the limit is %d", len(name), MaxEventLen)
	case strings.IndexFunc(name, func(r rune) bool { return !validEventRune(r) }) >= 0:
		return fmt.Errorf("invalid event name %q: want letters, digits and . _ - : /", name)
	}
	return nil
}

func validEventRune(r rune) bool {
	return r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-:/", r))
}

// validVar reports whether s can name a variable or a loop variable: an
// expr identifier, so that vars.<s> and <s> work in expressions.
func validVar(s string) bool {
	if s == "" || len(s) > abi.MaxNameLen {
		return false
	}
	for i, r := range s {
		if r != '_' && !(r >= 'a' && r <= 'z') && !(r >= 'A' && r <= 'Z') && (i == 0 || !(r >= '0' && r <= '9')) {
			return false
		}
	}
	return true
}

// reserved names cannot be loop variables: they would hide the environment.
var reserved = []string{"input", "vars", "env", "true", "false", "nil", "in", "not", "and", "or", "matches", "contains", "startsWith", "endsWith", "let"}

func (v *validator) steps(path string, steps []*Step, scope []string, required bool) {
	if required && len(steps) == 0 {
		v.problem(path, "required: at least one step")
	}
	for i, s := range steps {
		if s != nil {
			v.step(joinIndex(path, i), s, scope)
		}
	}
}

func (v *validator) duration(path string, d time.Duration, positive bool) {
	if d < 0 || (positive && d == 0) {
		v.problem(path, "duration %s must be greater than zero", d)
	}
}

func (v *validator) step(path string, s *Step, scope []string) {
	switch first, dup := v.ids[s.ID]; {
	case s.ID == "":
		v.problem(path+".id", "required")
	case !abi.ValidName(s.ID):
		v.problem(path+".id", "invalid step id %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", s.ID, abi.MaxNameLen)
	case dup:
		v.problem(path+".id", "duplicate step id %q, first used at %s", s.ID, first)
	default:
		v.ids[s.ID] = path
	}
	switch s.Persist {
	case "", PersistAlways, PersistNever:
	default:
		v.problem(path+".persist", "unknown persist %q; want always or never", s.Persist)
	}
	if s.Output != "" {
		if s.Kind != KindActivity && s.Kind != KindWait && s.Kind != KindWorkflow {
			v.problem(path+".output", "only activity, wait and workflow steps have an output")
		} else if !validVar(s.Output) {
			v.problem(path+".output", "invalid variable name %q: want a letter or _ then letters, digits or _", s.Output)
		}
	}
	kp := path + "." + string(s.Kind)
	missing := func() { v.problem(path, "step kind %s has no %s settings", s.Kind, s.Kind) }
	switch s.Kind {
	case "":
		if !s.kindReported {
			v.problem(path, "step has no kind; want one of %s", kindNames())
		}
	case KindActivity:
		if s.Activity == nil {
			missing()
			return
		}
		v.activity(path, s.Activity)
	case KindWait:
		if s.Wait == nil {
			missing()
			return
		}
		v.event(kp+".event", s.Wait.Event)
		if s.Wait.Key.IsZero() || s.Wait.Key.src == "" || s.Wait.Key.src == nil {
			v.problem(kp+".key", "required: a wait needs a correlation key")
		}
		if s.Wait.TimeoutExpr.IsZero() {
			v.duration(kp+".timeout", s.Wait.Timeout, false)
		}
	case KindDelay:
		// A computed delay is checked when its step runs; a literal one
		// here, at the field it was written in. A literal until was
		// checked when parsed, and an absent one reported then.
		switch {
		case !s.DelayExpr.IsZero() || s.delayForm == "until":
		case s.delayForm == "for":
			v.duration(kp+".for", s.Delay, true)
		default:
			v.duration(kp, s.Delay, true)
		}
	case KindIf:
		if s.If == nil {
			missing()
			return
		}
		if s.If.Cond.IsZero() {
			v.problem(kp, "required: a condition")
		}
		v.steps(path+".then", s.If.Then, scope, true)
		v.steps(path+".else", s.If.Else, scope, false)
	case KindForeach:
		f := s.Foreach
		if f == nil {
			missing()
			return
		}
		if f.Items.IsZero() {
			v.problem(kp, "required: a list to iterate over")
		}
		inner := scope
		switch {
		case f.As == "":
			v.problem(path+".as", "required: the name of the loop variable")
		case !validVar(f.As):
			v.problem(path+".as", "invalid loop variable name %q: want a letter or _ then letters, digits or _", f.As)
		case contains(reserved, f.As):
			v.problem(path+".as", "loop variable name %q is reserved", f.As)
		case contains(scope, f.As):
			v.problem(path+".as", "loop variable %q hides the one of an enclosing foreach", f.As)
		default:
			inner = append(append([]string{}, scope...), f.As)
		}
		if f.Concurrency < 1 {
			v.problem(path+".concurrency", "concurrency %d must be at least 1", f.Concurrency)
		}
		v.steps(path+".do", f.Do, inner, true)
	case KindParallel:
		if len(s.Parallel) == 0 {
			v.problem(kp, "required: at least one branch")
		}
		for i, b := range s.Parallel {
			v.steps(joinIndex(kp, i)+".steps", b.Steps, scope, true)
		}
	case KindWorkflow:
		if s.Workflow == nil {
			missing()
			return
		}
		v.child(kp, s.Workflow.Name)
	case KindSet:
		if len(s.Set) == 0 {
			v.problem(kp, "required: at least one variable")
		}
		for _, a := range s.Set {
			if !validVar(a.Name) {
				v.problem(joinKey(kp, a.Name), "invalid variable name %q: want a letter or _ then letters, digits or _", a.Name)
			}
		}
	case KindFail:
		if s.Fail == nil {
			missing()
			return
		}
		switch c := s.Fail.Code; {
		case c == "":
			v.problem(kp+".code", "required")
		case strings.IndexFunc(c, unicode.IsSpace) >= 0 || len(c) > MaxEventLen:
			v.problem(kp+".code", "invalid failure code %q: want up to %d characters without spaces", c, MaxEventLen)
		}
	default:
		v.problem(path, "unknown step kind %q; want one of %s", s.Kind, kindNames())
	}
}

func (v *validator) activity(path string, a *Activity) {
	kp := path + ".activity"
	switch {
	case a.Plugin == "" && a.Name == "":
		v.problem(kp, "required: <plugin>.<activity>")
	case a.Name == "" || strings.Contains(a.Name, "."):
		v.problem(kp, "%q is not <plugin>.<activity>", a.Plugin+dotIf(a.Name))
	case !abi.ValidName(a.Plugin):
		v.problem(kp, "invalid plugin name %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", a.Plugin, abi.MaxNameLen)
	case !abi.ValidName(a.Name):
		v.problem(kp, "invalid activity name %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", a.Name, abi.MaxNameLen)
	case v.catalog == nil:
	case !v.catalog.HasPlugin(a.Plugin):
		v.problem(kp, "unknown plugin %q", a.Plugin)
	case !v.catalog.HasActivity(a.Plugin, a.Name):
		hint := ""
		if l, ok := v.catalog.(ActivityLister); ok {
			hint = didYouMean(a.Name, l.Activities(a.Plugin))
		}
		v.problem(kp, "plugin %q has no activity %q%s", a.Plugin, a.Name, hint)
	}
	v.duration(path+".timeout", a.Timeout, false)
	v.duration(path+".schedule_to_close", a.ScheduleToClose, false)
	v.duration(path+".heartbeat_timeout", a.HeartbeatTimeout, false)
	if a.HeartbeatTimeout > 0 && a.Timeout > 0 && a.HeartbeatTimeout > a.Timeout {
		v.problem(path+".heartbeat_timeout", "heartbeat_timeout %s is larger than timeout %s", a.HeartbeatTimeout, a.Timeout)
	}
	// Without a timeout the host's default bounds the attempt, and a
	// heartbeat_timeout beyond it could never fire. The default is the
	// host's: without a catalog there is no host to ask, and a stored
	// version (reparsed without one) is not judged by a default changed
	// since it was saved.
	if a.HeartbeatTimeout > 0 && a.Timeout == 0 && v.catalog != nil {
		def := DefaultActivityTimeout
		if td, ok := v.catalog.(TimeoutDefaults); ok {
			def = td.DefaultActivityTimeout()
		}
		if a.HeartbeatTimeout > def {
			v.problem(path+".heartbeat_timeout", "heartbeat_timeout %s is larger than timeout %s, the host's default for a step without one (engine.activity_timeout); set a timeout of at least %s, or a shorter heartbeat_timeout",
				a.HeartbeatTimeout, def, a.HeartbeatTimeout)
		}
	}
	if a.Timeout > 0 && a.ScheduleToClose > 0 && a.Timeout > a.ScheduleToClose {
		v.problem(path+".timeout", "timeout %s is larger than schedule_to_close %s", a.Timeout, a.ScheduleToClose)
	}
	if a.HeartbeatTimeout > 0 && a.ScheduleToClose > 0 && a.HeartbeatTimeout > a.ScheduleToClose {
		v.problem(path+".heartbeat_timeout", "heartbeat_timeout %s is larger than schedule_to_close %s", a.HeartbeatTimeout, a.ScheduleToClose)
	}
	v.stepLimits(path, a)
	r, rp := a.Retry, path+".retry"
	if r.MaxAttempts < 1 {
		v.problem(rp+".max_attempts", "max_attempts %d must be at least 1", r.MaxAttempts)
	}
	if r.InitialInterval <= 0 {
		v.problem(rp+".initial_interval", "initial_interval %s must be greater than zero", r.InitialInterval)
	}
	if r.Backoff < 1 {
		v.problem(rp+".backoff", "backoff %g must be at least 1", r.Backoff)
	}
	if r.MaxInterval <= 0 {
		v.problem(rp+".max_interval", "max_interval %s must be greater than zero", r.MaxInterval)
	} else if r.InitialInterval > 0 && r.MaxInterval < r.InitialInterval {
		v.problem(rp+".max_interval", "max_interval %s is less than initial_interval %s", r.MaxInterval, r.InitialInterval)
	}
	for i, c := range r.NonRetryable {
		if c == "" || strings.IndexFunc(c, unicode.IsSpace) >= 0 {
			v.problem(joinIndex(rp+".non_retryable", i), "invalid failure code %q", c)
		}
	}
}

func dotIf(s string) string {
	if s == "" {
		return ""
	}
	return "." + s
}

// child checks a workflow step's child name, its existence and cycles.
func (v *validator) child(path, name string) {
	switch {
	case name == "":
		v.problem(path, "required: the child workflow's name")
		return
	case !abi.ValidName(name):
		v.problem(path, "invalid workflow name %q: want 1 to %d characters from [a-z0-9_-], starting with a letter", name, abi.MaxNameLen)
		return
	case name != v.def.Name && v.catalog == nil:
		return
	case name != v.def.Name:
		if _, ok := v.catalog.Workflow(name); !ok {
			v.problem(path, "unknown workflow %q", name)
			return
		}
	}
	if cycle := v.cycles.find(name, []string{v.def.Name}); cycle != nil {
		v.problem(path, "cycle of child workflows: %s", strings.Join(cycle, " → "))
	}
}

// cycleFinder searches the graph of child workflows depth first.
type cycleFinder struct {
	def     *Definition
	catalog Catalog
	clean   map[string]bool // workflows from which no cycle is reachable
}

func (c *cycleFinder) lookup(name string) *Definition {
	if name == c.def.Name {
		return c.def
	}
	if c.catalog == nil {
		return nil
	}
	d, ok := c.catalog.Workflow(name)
	if !ok {
		return nil
	}
	return d
}

// find returns the first cycle reachable from name when stack is the chain
// of workflows that led to it, spelled out from the repeated workflow to
// itself, or nil.
func (c *cycleFinder) find(name string, stack []string) []string {
	for i, s := range stack {
		if s == name {
			return append(append([]string{}, stack[i:]...), name)
		}
	}
	if c.clean[name] {
		return nil
	}
	d := c.lookup(name)
	if d == nil {
		return nil
	}
	stack = append(stack[:len(stack):len(stack)], name)
	var cycle []string
	d.Walk(func(_ string, s *Step) bool {
		if s.Kind == KindWorkflow && s.Workflow != nil {
			cycle = c.find(s.Workflow.Name, stack)
		}
		return cycle == nil
	})
	if cycle == nil {
		c.clean[name] = true
	}
	return cycle
}
