// Package runner executes workflow definitions as a deterministic state
// machine: Apply takes an instance's State and one Input (start, activity
// result, timer fired, stimulus, child result, cancel) and returns the
// Actions the shell must perform (invoke an activity, arm or cancel a timer,
// create or remove a bookmark, start or cancel a child, persist, record
// history, finish). There are no goroutines, clocks or I/O inside: time and
// randomness come in through Context, so a test drives an instance step by
// step with a fake clock and compares the exact actions.
//
// # Execution model
//
// A State is a tree of Frames. A frame runs one list of steps (the
// definition's steps, an if's branch, a parallel branch, one iteration of a
// foreach) and has a cursor into it; the step under the cursor has a Run.
// Leaf steps (activity, wait, delay, workflow) wait on one outstanding
// operation named by a token; containers (if, foreach, parallel) own child
// frames. After every event the runner advances every frame as far as it
// can without waiting.
//
// Every outstanding operation has a unique token. An event whose token is
// not outstanding (a completion from an attempt that was already timed out
// and retried, a timer that was cancelled) is refused: it changes nothing
// and is recorded in the history.
//
// # Decisions
//
//   - A failing step fails the instance: the definition language has no
//     try/catch. Retries happen within an activity step, per its policy.
//   - Steps that store into the same variable from concurrent branches or
//     iterations: the last one to complete wins.
//   - An activity's input is evaluated once per step execution; every
//     attempt of it gets the same input and the same idempotency key,
//     <instance id>/<step id>/<execution>.
//   - Persistence (docs/architecture.md, "When an instance is persisted"):
//     an instance is persisted whenever an input leaves it suspended
//     (nothing but timers, bookmarks or children to wait for) or finished;
//     with the `activity` strategy also after every activity completes; a
//     step with `persist: always` after it completes, and `persist: never`
//     suppresses the per-activity persist of its step.
//   - A delay or a wait timeout computed from data is evaluated when its
//     step starts, against Context.Now: a delay's due time is fixed then,
//     and a retry that begins the step again computes it again. A delay
//     already due arms no timer and completes at once; its history still
//     has timer_armed (with already_due) and timer_fired, so that every
//     delay reads alike. A wait's computed timeout is kept in its Run, for
//     the failure that names it, since the definition has only its
//     expression.
//   - An attempt's input is encoded by the runner, once, for its
//     activity_scheduled record and for the call (Invoke.InputJSON), so
//     that the history shows the bytes the guest got. Input and output
//     are recorded whole or not at all (Context.AttemptDataLimit): a JSON
//     document cut short is not one.
package runner

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// State is an instance's execution state. It must only be changed by Apply.
// It is persisted with the instance as one JSON document (see Encode), which
// json.Marshal and json.Unmarshal also read and write.
type State struct {
	Status weft.Status
	// Input is the instance's input; input is the same as JSON, as Start
	// gave it or the document held it, so that it is encoded once, when
	// the instance is created, and copied from then on.
	Input any
	input json.RawMessage
	Vars  map[string]any
	Root  *Frame
	// Seq numbers tokens and executions.
	Seq    uint64
	Output any
	Error  *weft.Failure
	// Paused is the pause of a paused instance (Pause), nil otherwise;
	// Held the inputs that came for it meanwhile, for Resume to apply.
	Paused *weft.Pause
	Held   []Held
	// VarsRev counts the changes of Vars; VarsMarked is the VarsRev of
	// the last copy a record kept (Context.VarsLimit). Both are 0 in a
	// state that predates the copies: its next top-level step copies.
	VarsRev, VarsMarked uint64
	// VarsAt is the VarsRev of each variable's last change, so that a
	// step's record copies only the variables changed since the last
	// copy; VarsChain says that the records since the last whole copy
	// rebuild the variables as of VarsMarked (none was omitted). A state
	// without them (an earlier version's, or after a reset) copies the
	// variables whole at its next top-level step.
	VarsAt    map[string]uint64
	VarsChain bool
}

// Held is an input for a paused instance, kept to be applied when it is
// resumed: a timer's fire, a stimulus, a child's end. Only an input for
// an outstanding token is held, and one per token, so that Held never
// holds more than the instance waits on.
type Held struct {
	// Input is the input's kind: timer_fired, stimulus_delivered,
	// child_completed or child_failed.
	Input string `json:"input"`
	Token string `json:"token"`
	// Payload is a stimulus's payload or a child's output.
	Payload any `json:"payload,omitempty"`
	// Failure is a child's failure.
	Failure *weft.Failure `json:"failure,omitempty"`
	// Op is a stimulus's operator's action (StimulusDelivered.Op).
	Op *weft.Operation `json:"op,omitempty"`
	// At is when it came.
	At time.Time `json:"at"`
}

// The kinds of Held.Input.
const (
	heldTimer          = "timer_fired"
	heldStimulus       = "stimulus_delivered"
	heldChildCompleted = "child_completed"
	heldChildFailed    = "child_failed"
)

// held is ev as State.Held keeps it; false for an input that is not held.
func held(ev Input, at time.Time) (Held, bool) {
	switch ev := ev.(type) {
	case TimerFired:
		return Held{Input: heldTimer, Token: ev.Token, At: at}, true
	case StimulusDelivered:
		return Held{Input: heldStimulus, Token: ev.Token, Payload: ev.Payload, Op: ev.Op, At: at}, true
	case ChildCompleted:
		return Held{Input: heldChildCompleted, Token: ev.Token, Payload: ev.Output, At: at}, true
	case ChildFailed:
		return Held{Input: heldChildFailed, Token: ev.Token, Failure: &ev.Failure, At: at}, true
	}
	return Held{}, false
}

// input is h as the input it was.
func (h Held) input() Input {
	switch h.Input {
	case heldStimulus:
		return StimulusDelivered{Token: h.Token, Payload: h.Payload, Op: h.Op}
	case heldChildCompleted:
		return ChildCompleted{Token: h.Token, Output: h.Payload}
	case heldChildFailed:
		var f weft.Failure
		if h.Failure != nil {
			f = *h.Failure
		}
		return ChildFailed{Token: h.Token, Failure: f}
	}
	return TimerFired{Token: h.Token}
}

// document is the persisted form of a State. Input, Vars and Output are
// JSON already: Encode encodes each once, for the document and for the
// instance's own fields.
type document struct {
	Status weft.Status     `json:"status"`
	Input  json.RawMessage `json:"input,omitempty"`
	Vars   json.RawMessage `json:"vars,omitempty"`
	Root   *Frame          `json:"root,omitempty"`
	Seq    uint64          `json:"seq"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  *weft.Failure   `json:"error,omitempty"`
	Paused *weft.Pause     `json:"paused,omitempty"`
	Held   []Held          `json:"held,omitempty"`
	// VarsRev and VarsMarked as State's.
	VarsRev    uint64            `json:"vars_rev,omitempty"`
	VarsMarked uint64            `json:"vars_marked,omitempty"`
	VarsAt     map[string]uint64 `json:"vars_at,omitempty"`
	VarsChain  bool              `json:"vars_chain,omitempty"`
}

// Encoded is a State as persisted: the document, and the parts of the
// state that an instance stores on its own (weft.Instance's Vars and
// Output; its Input it has from its start). The document holds neither the
// input nor the variables: Decode takes them from the instance, so that a
// commit writes each once.
type Encoded struct {
	State  []byte
	Vars   json.RawMessage
	Output json.RawMessage // null while the state has none
}

// Encode returns s as persisted. The parts it shares with the instance are
// encoded once, and documents (*jsonv.Doc: the input, and the variables and
// output a step took whole from a guest or the input) not at all: their
// bytes are spliced in.
func (s *State) Encode() (Encoded, error) {
	return s.encode(false)
}

// encode is Encode; whole puts the input and the variables in the
// document too (MarshalJSON's).
func (s *State) encode(whole bool) (Encoded, error) {
	var enc Encoded
	var err error
	if enc.Vars, err = jsonv.EncodeMap(s.Vars); err != nil {
		return Encoded{}, fmt.Errorf("encoding vars: %w", err)
	}
	if enc.Output, err = jsonv.Encode(s.Output); err != nil {
		return Encoded{}, fmt.Errorf("encoding output: %w", err)
	}
	doc := document{Status: s.Status, Root: s.Root, Seq: s.Seq, Error: s.Error, Paused: s.Paused, Held: s.Held, VarsRev: s.VarsRev, VarsMarked: s.VarsMarked, VarsAt: s.VarsAt, VarsChain: s.VarsChain}
	head, err := jsonv.Marshal(doc) // a Run's input keeps its bytes
	if err != nil {
		return Encoded{}, fmt.Errorf("encoding state: %w", err)
	}
	var fields []jsonv.Field
	if whole {
		input := []byte(s.input)
		if input == nil { // none, or set by hand rather than by Apply
			if input, err = jsonv.Encode(s.Input); err != nil {
				return Encoded{}, fmt.Errorf("encoding input: %w", err)
			}
		}
		fields = append(fields, jsonv.Field{Name: "input", Value: input}, jsonv.Field{Name: "vars", Value: enc.Vars})
	}
	if s.Output != nil {
		fields = append(fields, jsonv.Field{Name: "output", Value: enc.Output})
	}
	if enc.State, err = jsonv.AppendFields(head, fields...); err != nil {
		return Encoded{}, fmt.Errorf("encoding state: %w", err)
	}
	return enc, nil
}

// MarshalJSON returns the state's whole document: Encode's with the input
// and the variables in it, which UnmarshalJSON reads back alone.
func (s State) MarshalJSON() ([]byte, error) {
	enc, err := s.encode(true)
	return enc.State, err
}

// Decode returns the state an instance persisted: its document (Encoded's
// State), and the instance's input and variables, which a document of this
// version does not hold (one of an earlier version holds them, and they
// are read from it).
func Decode(state, input, vars json.RawMessage) (*State, error) {
	var st State
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, err
	}
	if st.input == nil && len(input) > 0 {
		st.Input, st.input = docOf(input), input
	}
	if st.Vars == nil && len(vars) > 0 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(vars, &m); err != nil {
			return nil, fmt.Errorf("the instance's vars: %w", err)
		}
		if m != nil {
			st.Vars = make(map[string]any, len(m))
		}
		for k, v := range m {
			st.Vars[k] = docOf(v)
		}
	}
	return &st, nil
}

// UnmarshalJSON reads a document Encode made. The input, each variable and
// the output are kept as documents (*jsonv.Doc), decoded only when an
// expression computes on them.
func (s *State) UnmarshalJSON(data []byte) error {
	var doc struct {
		document
		Vars map[string]json.RawMessage `json:"vars"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	st := State{Status: doc.Status, Root: doc.Root, Seq: doc.Seq, Error: doc.Error, Paused: doc.Paused, Held: doc.Held, VarsRev: doc.VarsRev, VarsMarked: doc.VarsMarked, VarsAt: doc.VarsAt, VarsChain: doc.VarsChain}
	if len(doc.Input) > 0 {
		st.Input, st.input = docOf(doc.Input), doc.Input
	}
	if doc.Vars != nil {
		st.Vars = make(map[string]any, len(doc.Vars))
		for k, v := range doc.Vars {
			st.Vars[k] = docOf(v)
		}
	}
	if len(doc.Output) > 0 {
		st.Output = docOf(doc.Output)
	}
	*s = st
	return nil
}

// docOf is raw, read back from a state, as a value: nil for null, a
// document otherwise.
func docOf(raw json.RawMessage) any {
	if string(raw) == "null" {
		return nil
	}
	return jsonv.Trusted(raw)
}

// Frame runs one list of steps.
type Frame struct {
	// List identifies the step list in the definition ("steps",
	// "steps[2].then", "steps[3].do", "steps[4].parallel[1]").
	List string `json:"list"`
	// Path is where the frame is in this instance: List, with "#n" after
	// a foreach's "do" for iteration n.
	Path  string `json:"path"`
	Index int    `json:"index"`
	// Locals are the loop variables in scope.
	Locals map[string]any `json:"locals,omitempty"`
	Run    *Run           `json:"run,omitempty"`
	Done   bool           `json:"done,omitempty"`
}

// Pending names what a leaf step waits for.
type Pending string

// What a leaf step waits for.
const (
	PendingActivity Pending = "activity"
	PendingRetry    Pending = "retry"
	PendingDelay    Pending = "delay"
	PendingBookmark Pending = "bookmark"
	PendingChild    Pending = "child"
	// PendingDeferred: an activity's attempt the shell did not start, for
	// a step limit (Run.Deferred says which); Token is the timer that
	// starts it again.
	PendingDeferred Pending = "deferred"
	// PendingPaused: an activity's attempt that was in flight when its
	// node died while the instance was paused (Recover): Resume invokes it
	// again; no token.
	PendingPaused Pending = "paused"
)

// Why an attempt was deferred (Run.Deferred, ActivityDeferred.Reason,
// Invoke.Resumed).
const (
	// DeferredConcurrency: every slot of the step's concurrency key was
	// taken; the attempt waits in the key's line.
	DeferredConcurrency = "concurrency"
	// DeferredRateLimit: the step's rate limit reserved the attempt a
	// later start.
	DeferredRateLimit = "rate_limit"
)

// Run is the execution of the step under a frame's cursor.
type Run struct {
	// Exec identifies this execution of the step; stable across attempts.
	Exec string `json:"exec"`
	// Pending and Token name the outstanding operation of a leaf step.
	Pending Pending `json:"pending,omitempty"`
	Token   string  `json:"token,omitempty"`
	// TimeoutToken is a wait's timeout timer.
	TimeoutToken string `json:"timeout_token,omitempty"`
	// Timeout is a wait's computed timeout, as evaluated when the wait
	// started, for the failure that names it; zero for a literal one (the
	// definition has it), and in the states saved before timeouts could
	// be computed.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Attempt counts an activity's attempts from 1.
	Attempt int `json:"attempt,omitempty"`
	// Scheduled is when the step's first attempt was scheduled.
	Scheduled time.Time `json:"scheduled,omitempty"`
	// Started is when the step started, for its latency.
	Started time.Time `json:"started,omitzero"`
	// Input is an activity's or child's evaluated input.
	Input any `json:"input,omitempty"`
	// LastHeartbeat is the details the last failed attempt reported.
	LastHeartbeat json.RawMessage `json:"last_heartbeat,omitempty"`
	// SlotKey and RateKey are an activity's concurrency and rate limit
	// keys, evaluated when the step started ("" without a limit);
	// Deferred is why its attempt waits (PendingDeferred).
	SlotKey  string `json:"slot_key,omitempty"`
	RateKey  string `json:"rate_key,omitempty"`
	Deferred string `json:"deferred,omitempty"`

	// Children are the frames of a container step: an if's chosen branch,
	// a parallel's branches, a foreach's running iterations.
	Children []*Frame `json:"children,omitempty"`
	// Items and Next are a foreach's list and the next iteration to start.
	Items []any `json:"items,omitempty"`
	Next  int   `json:"next,omitempty"`
}

// InFlight reports whether the state shows an activity attempt in flight:
// after loading a state, those attempts died with the execution that
// started them, and a Recover event reschedules them.
func (s *State) InFlight() bool { return inFlight(s.Root) }

func inFlight(f *Frame) bool {
	if f == nil || f.Run == nil {
		return false
	}
	if f.Run.Pending == PendingActivity {
		return true
	}
	for _, c := range f.Run.Children {
		if inFlight(c) {
			return true
		}
	}
	return false
}

// UnmarshalJSON reads a Run, keeping its input as a document (*jsonv.Doc)
// as State keeps its own: read back, it is passed on whole, and a number
// no Go value holds stays readable.
func (r *Run) UnmarshalJSON(data []byte) error {
	type plainRun Run
	var doc struct {
		*plainRun
		Input json.RawMessage `json:"input,omitempty"`
	}
	doc.plainRun = (*plainRun)(r)
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	r.Input = nil
	if len(doc.Input) > 0 {
		r.Input = docOf(doc.Input)
	}
	return nil
}

// UnmarshalJSON reads a Held, keeping its payload as a document, as Run
// keeps its input.
func (h *Held) UnmarshalJSON(data []byte) error {
	type plainHeld Held
	var doc struct {
		*plainHeld
		Payload json.RawMessage `json:"payload,omitempty"`
	}
	doc.plainHeld = (*plainHeld)(h)
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	h.Payload = nil
	if len(doc.Payload) > 0 {
		h.Payload = docOf(doc.Payload)
	}
	return nil
}
