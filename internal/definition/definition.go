package definition

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// Definition is a parsed workflow definition. Build one with Parse or Load;
// a Definition is immutable once built and safe for concurrent use.
type Definition struct {
	// Name identifies the workflow: 1 to 64 characters from [a-z0-9_-],
	// starting with a letter (the rule of abi.ValidName).
	Name string
	// Persistence is when the engine persists an instance. Defaults to
	// PersistenceLazy.
	Persistence Persistence
	// Triggers are the events that start an instance; may be empty.
	Triggers []Trigger
	// Steps run in order; there is at least one.
	Steps []*Step
	// Output is the instance's result, evaluated when the last step
	// completes. Zero when absent: the output is then null.
	Output Value
	// Retention is how long an instance is kept once it has finished
	// (completed, failed or cancelled), with its history, before the host
	// deletes it; 0 keeps it forever. Nil when the definition does not
	// say: the host's default (engine.retention) applies. The engine reads
	// it when an instance finishes, from the version the instance runs.
	Retention *time.Duration
	// Priority is the priority of the workflow's instances in the ready
	// queue: weft.HighestPriority (1) is served first, weft.LowestPriority (5)
	// last. An integer literal, or a single ${ } expression over input,
	// which is all there is when the order is decided (use Order). Zero
	// when absent: weft.DefaultPriority.
	Priority Value
	// Fairness puts the workflow's instances in a lane of the ready queue
	// that takes turns with the other lanes of their priority, so that a
	// tenant with a large backlog does not starve the others. Nil when
	// absent: the shared lane, key "", weight 1.
	Fairness *Fairness
	// Concurrency limits how many of the workflow's instances with the
	// same key run at once, so that a service behind them sees no more
	// than it can take. Nil when absent: no limit.
	Concurrency *Concurrency
	// Search holds the workflow's search attributes, sorted by name: typed
	// values computed from an instance's input and variables at every
	// commit, which operators search instances by (use SearchValues).
	// Nil when absent.
	Search []SearchAttr
	// Record says which attempts of the workflow's activity steps keep
	// their tape (docs/replay.md), for the steps that do not say
	// (Activity.Record). Zero when absent: the host's tapes.policy
	// applies. Use RecordPolicy for a step's effective policy.
	Record weft.RecordPolicy
}

// Fairness is a workflow's fairness: which lane of the ready queue its
// instances join, and how many of them the lane may hand out in its turn.
// Both are decided once, when an instance is created, from its input (use
// Definition.Order).
type Fairness struct {
	// Key names the lane, usually a tenant: a literal string or an
	// expression or template over input, whose result is written as a
	// template writes it (null is "", the shared lane); at most
	// weft.MaxFairnessKey bytes. Always set: a fairness without a key is
	// refused.
	Key Value
	// Weight is how many instances the lane hands out in its turn, from 1
	// to weft.MaxFairnessWeight: an integer literal or a single ${ } expression
	// over input. Zero when absent: weft.DefaultFairnessWeight.
	Weight Value
	// keyReported: the key is absent, and the parser reported a field
	// that is likely it misspelt, so validation does not report it again.
	keyReported bool
}

// Concurrency is a workflow's concurrency limit: at most Limit of its
// instances with the same key hold a slot at once, each from its start to
// its end (waits included), and Policy says what a new instance does when
// every slot is taken. The key is decided once, when an instance is
// created, from its input (use Definition.ConcurrencyKey); the engine
// keeps the slots (internal/slots, docs/flow-control.md).
type Concurrency struct {
	// Key names the group the limit counts, usually a customer or a
	// tenant: a literal string or an expression or template over input,
	// whose result is written as a template writes it (null is ""); at
	// most weft.MaxFairnessKey bytes. Zero when absent: one key, "", for
	// all the workflow's instances (a global limit).
	Key Value
	// Limit is how many instances of one key may hold a slot at once: an
	// integer literal from 1 to MaxConcurrencyLimit. Required.
	Limit int
	// Policy is what a new instance does when every slot of its key is
	// taken: wait in line (slots.Queue), be cancelled
	// (slots.CancelNewest), or have the oldest beyond the newest Limit
	// cancelled (slots.CancelOldest). slots.Queue when absent.
	Policy slots.Policy
	// limitReported: the limit is absent or not an integer, and the
	// parser reported it (or a field that is likely it misspelt), so
	// validation does not report it again.
	limitReported bool
}

// MaxConcurrencyLimit bounds the concurrency.limit of a workflow and of
// an activity step: a key with more slots than this is as good as
// unlimited, and each holder is an entry the engine keeps in the key's
// state.
const MaxConcurrencyLimit = 10000

// MaxRetention bounds a retention: longer ones are refused (0, which
// keeps instances forever, is the way to say "longer"), so that a finish
// time plus a retention stays a time every store can index.
const MaxRetention = 100 * 365 * 24 * time.Hour

// Persistence is a workflow's persistence strategy.
type Persistence string

// Persistence strategies.
const (
	// PersistenceLazy persists an instance when it suspends, completes or
	// fails.
	PersistenceLazy Persistence = "lazy"
	// PersistenceActivity also persists it after every activity step.
	PersistenceActivity Persistence = "activity"
)

// Persist is a step's override of the workflow's persistence strategy.
type Persist string

// Step persistence overrides. The empty Persist follows the workflow.
const (
	// PersistAlways persists the instance when the step completes.
	PersistAlways Persist = "always"
	// PersistNever does not persist it when the step completes, even under
	// PersistenceActivity. An instance that suspends is persisted regardless.
	PersistNever Persist = "never"
)

// Trigger is an event that starts an instance; the event's payload becomes
// the instance input.
type Trigger struct {
	// Event is the stimulus name, e.g. `order.created`.
	Event string
}

// Kind is what a step does.
type Kind string

// Step kinds. A step has exactly one.
const (
	KindActivity Kind = "activity"
	KindWait     Kind = "wait"
	KindDelay    Kind = "delay"
	KindIf       Kind = "if"
	KindForeach  Kind = "foreach"
	KindParallel Kind = "parallel"
	KindWorkflow Kind = "workflow"
	KindSet      Kind = "set"
	KindFail     Kind = "fail"
)

// kinds lists every step kind, in the order problems list them ("step kinds
// are activity, wait, …").
var kinds = []Kind{KindActivity, KindWait, KindDelay, KindIf, KindForeach, KindParallel, KindWorkflow, KindSet, KindFail}

// Step is one step of a workflow. Kind says which of the kind-specific
// fields is set; the others are zero.
type Step struct {
	// ID is unique across the whole definition, nested steps included, and
	// follows the rule of abi.ValidName.
	ID   string
	Kind Kind
	// Output names the variable (vars.<Output>) that stores the result of an
	// activity, wait or workflow step; empty to discard it.
	Output string
	// Persist overrides the workflow's persistence when the step completes.
	Persist Persist
	// kindReported: the step has no kind, and the parser reported the
	// misspelt one, so validation does not report it again.
	kindReported bool

	Activity *Activity // KindActivity
	Wait     *Wait     // KindWait
	// Delay is a KindDelay step's literal duration, > 0 (`delay: 36h`, or
	// its long form `delay: {for: 36h}`). Zero when the delay is computed:
	// then DelayExpr or DelayUntil is set.
	Delay time.Duration
	// DelayExpr is a KindDelay step's computed duration (`delay: "${
	// input.days }d"`): an expression or template yielding a duration
	// string or a number of seconds, evaluated when the step starts (use
	// DelayExpr.EvalDuration). Zero otherwise.
	DelayExpr Value
	// DelayUntil is a KindDelay step's absolute time (`delay: {until: …}`):
	// an RFC 3339 literal, checked when parsed, or an expression yielding
	// one (use DelayUntil.EvalTime). Zero otherwise.
	DelayUntil Value
	// delayForm is how the delay was written: "" (`delay: X`), "for" or
	// "until"; problems are reported at that field.
	delayForm string

	If       *If      // KindIf
	Foreach  *Foreach // KindForeach
	Parallel []Branch // KindParallel: at least one branch
	Workflow *ChildWorkflow
	Set      []Assignment // KindSet: sorted by Name
	Fail     *Fail        // KindFail
}

// Activity is an activity step: `activity: <plugin>.<activity>`.
type Activity struct {
	Plugin string
	Name   string
	// Input is the activity's input; zero means null.
	Input Value
	// Timeout bounds one attempt, from start to close. Zero: not set, the
	// engine applies its default.
	Timeout time.Duration
	// ScheduleToClose bounds the whole step, every attempt and the waits
	// between them included. Zero: unbounded.
	ScheduleToClose time.Duration
	// HeartbeatTimeout is how long an attempt may go without a heartbeat
	// before it is considered dead. Zero: heartbeats are not required.
	HeartbeatTimeout time.Duration
	// Retry is the retry policy, with defaults filled in.
	Retry Retry
	// Concurrency limits how many of the step's attempts with the same
	// key run at once, across every step that names the key. Nil when
	// absent: no limit.
	Concurrency *StepConcurrency
	// RateLimit spaces the starts of the step's attempts with the same
	// key, on a budget shared with every step that names the key. Nil
	// when absent: no limit.
	RateLimit *StepRateLimit
	// Record says which of the step's attempts keep their tape, over the
	// workflow's Record. Zero when absent.
	Record weft.RecordPolicy
}

// Retry is an activity's retry policy. The delay before attempt n+1 is
// InitialInterval × Backoff^(n-1), capped at MaxInterval, and, with Jitter,
// drawn uniformly from [delay/2, delay].
type Retry struct {
	// MaxAttempts counts the first attempt; 1 means no retry. Defaults to 3.
	MaxAttempts int
	// InitialInterval is the delay before the first retry. Defaults to 1s.
	InitialInterval time.Duration
	// Backoff multiplies the delay after each retry, ≥ 1. Defaults to 2.
	Backoff float64
	// MaxInterval caps the delay. Defaults to 100 × InitialInterval.
	MaxInterval time.Duration
	// Jitter randomises each delay. Defaults to false.
	Jitter bool
	// NonRetryable lists failure codes that are never retried, besides
	// failures the plugin marks non-retryable itself.
	NonRetryable []string
}

// Retry defaults, applied to the fields a definition leaves out.
const (
	DefaultMaxAttempts     = 3
	DefaultInitialInterval = time.Second
	DefaultBackoff         = 2.0
	// DefaultMaxInterval is a factor: MaxInterval defaults to
	// DefaultMaxIntervalFactor × InitialInterval, as in Temporal.
	DefaultMaxIntervalFactor = 100
)

// Wait is a wait step: a bookmark on an event name and a correlation key.
type Wait struct {
	// Event is the stimulus name; a literal, never an expression.
	Event string
	// Key is the correlation key, usually an expression; its result is
	// stringified as in a template.
	Key Value
	// Timeout bounds the wait when it is written as a literal; zero waits
	// forever, unless TimeoutExpr is set. When it expires the step fails
	// with the code "timeout".
	Timeout time.Duration
	// TimeoutExpr is a computed timeout (`timeout: "${ input.hours }h"`),
	// evaluated when the step starts (use TimeoutExpr.EvalTimeout): a
	// result of zero waits forever, as the literal 0s does, and a negative
	// one fails the step. Zero when the timeout is a literal or absent.
	TimeoutExpr Value
}

// If is a conditional step.
type If struct {
	// Cond evaluates to a boolean; use Cond.EvalBool.
	Cond Value
	Then []*Step // at least one step
	Else []*Step // may be empty
}

// Foreach runs Do once per item of a list.
type Foreach struct {
	// Items evaluates to a list; use Items.EvalList.
	Items Value
	// As names the loop variable that expressions in Do see.
	As string
	// Concurrency is how many iterations may run at once. Defaults to 1.
	Concurrency int
	Do          []*Step // at least one step
}

// Branch is one branch of a parallel step.
type Branch struct {
	Steps []*Step // at least one step
}

// ChildWorkflow is a workflow step: the parent starts the named workflow and
// waits for it.
type ChildWorkflow struct {
	Name  string
	Input Value
}

// Assignment is one variable set by a set step. All the values of one set
// step are evaluated against the variables as they were before the step, then
// stored.
type Assignment struct {
	Name  string
	Value Value
}

// Fail is a fail step: the instance fails with this code and message.
type Fail struct {
	Code    string
	Message Value // may interpolate; zero when absent
}

// Walk calls fn for every step of the definition, nested steps included, in
// document order, with the step's path (e.g. `steps[1].then[0]`). It stops
// early when fn returns false.
func (d *Definition) Walk(fn func(path string, s *Step) bool) {
	walkSteps("steps", d.Steps, fn)
}

func walkSteps(path string, steps []*Step, fn func(string, *Step) bool) bool {
	for i, s := range steps {
		if s == nil {
			continue
		}
		p := joinIndex(path, i)
		if !fn(p, s) {
			return false
		}
		for _, c := range s.children(p) {
			if !walkSteps(c.path, c.steps, fn) {
				return false
			}
		}
	}
	return true
}

type stepList struct {
	path  string
	steps []*Step
}

func (s *Step) children(path string) []stepList {
	switch {
	case s.If != nil:
		return []stepList{{path + ".then", s.If.Then}, {path + ".else", s.If.Else}}
	case s.Foreach != nil:
		return []stepList{{path + ".do", s.Foreach.Do}}
	case s.Parallel != nil:
		out := make([]stepList, len(s.Parallel))
		for i, b := range s.Parallel {
			out[i] = stepList{joinIndex(path+".parallel", i) + ".steps", b.Steps}
		}
		return out
	}
	return nil
}

// Step returns the step with the given id, nested steps included.
func (d *Definition) Step(id string) (*Step, bool) {
	var found *Step
	d.Walk(func(_ string, s *Step) bool {
		if s.ID == id {
			found = s
			return false
		}
		return true
	})
	return found, found != nil
}

// Hash is the sha256, in lowercase hex, of the definition's canonical
// encoding (see Canonical). Two definitions with the same meaning written in
// YAML or JSON, with keys in any order, other whitespace or comments, hash
// the same; any change that can alter execution changes the hash.
func (d *Definition) Hash() string {
	sum := sha256.Sum256(d.Canonical())
	return hex.EncodeToString(sum[:])
}

// persistence returns the effective strategy: the empty one is lazy.
func (d *Definition) persistence() Persistence {
	if d.Persistence == "" {
		return PersistenceLazy
	}
	return d.Persistence
}

// DefaultRetry returns the retry policy of an activity step that has no
// retry field.
func DefaultRetry() Retry {
	return Retry{
		MaxAttempts:     DefaultMaxAttempts,
		InitialInterval: DefaultInitialInterval,
		Backoff:         DefaultBackoff,
		MaxInterval:     DefaultMaxIntervalFactor * DefaultInitialInterval,
	}
}

// RecordPolicy returns the record policy of step s of the definition: the
// step's own (an activity step's record:), else the workflow's, else
// host, the host's tapes.policy. A step that is not an activity keeps no
// tape: off.
func (d *Definition) RecordPolicy(s *Step, host weft.RecordPolicy) weft.RecordPolicy {
	if s == nil || s.Activity == nil {
		return weft.RecordPolicy{Mode: weft.RecordOff}
	}
	return s.Activity.Record.Or(d.Record).Or(host)
}
