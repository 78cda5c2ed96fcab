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
package runner

import (
	"encoding/json"
	"time"

	"github.com/weftworks/weft/host/store"
)

// State is an instance's execution state. It is persisted with the instance
// as JSON and must only be changed by Apply.
type State struct {
	Status store.Status   `json:"status"`
	Input  any            `json:"input"`
	Vars   map[string]any `json:"vars"`
	Root   *Frame         `json:"root,omitempty"`
	// Seq numbers tokens and executions.
	Seq    uint64         `json:"seq"`
	Output any            `json:"output,omitempty"`
	Error  *store.Failure `json:"error,omitempty"`
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
