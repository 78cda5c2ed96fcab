package engine

import (
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/runner"
)

// The pure half of the inbox: what a message means to the execution that
// applies it, decided without a store (TestDecodeMessage).

// CodeCorruptMessage is the failure code of a child step whose child's end
// could not be read from the parent's inbox: the step fails with it, with a
// message naming the child, instead of waiting for an end that will not
// come.
const CodeCorruptMessage = "corrupt_message"

// childEnd is the payload of a MessageChild.
type childEnd struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output,omitempty"`
	Error  *weft.Failure   `json:"error,omitempty"`
}

// lateNote is the payload of a MessageNote: an attempt's end that a node
// which lost the instance could not commit, for the history, where the
// payload becomes the entry's data.
//
// Its fields only grow, each optional: a note written by an older node
// (without logs) reads as one without lines, and an older node applying a
// newer note keeps the fields it does not know in the entry's data.
type lateNote struct {
	Type     weft.HistoryType `json:"type"`
	Outcome  string           `json:"outcome"`
	StepPath string           `json:"step_path"`
	Attempt  int              `json:"attempt"`
	Node     string           `json:"node"`
	Reason   string           `json:"reason"`
	// The attempt's log lines (logs, logs_dropped): it ran, and what it
	// logged is kept even though its end was refused.
	weft.AttemptLogs
}

// inboxEntry is an inbox message as the execution applies it: an input for
// the runner, or, for a note, a history record (without its time).
type inboxEntry struct {
	input runner.Input
	note  *weft.HistoryEntry
}

// decodeMessage returns what m means to its instance. A child's end that
// does not decode fails the child step with CodeCorruptMessage; a cancel
// whose reason does not decode still cancels, with the raw payload as the
// reason. A cancel, a retry, a pause or a resume carries its message's Op
// (who asked) to the runner. A stimulus or a note that does not decode, or a kind this
// version does not know, is an error: the message stays in the inbox.
func decodeMessage(m weft.Message) (inboxEntry, error) {
	switch m.Kind {
	case weft.MessageStimulus:
		payload, err := payloadValue(m.Payload)
		if err != nil {
			return inboxEntry{}, fmt.Errorf("inbox message %s: the stimulus payload: %w", m.ID, err)
		}
		return inboxEntry{input: runner.StimulusDelivered{Token: m.Token, Payload: payload, Op: m.Op}}, nil
	case weft.MessageChild:
		return inboxEntry{input: childInput(m)}, nil
	case weft.MessageCancel:
		var reason string
		if err := json.Unmarshal(m.Payload, &reason); err != nil {
			reason = string(m.Payload)
		}
		return inboxEntry{input: runner.Cancel{Op: operation(m, reason)}}, nil
	case weft.MessageRetry:
		var r retryRequest
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			r.Reason = string(m.Payload)
		}
		return inboxEntry{input: runner.Retry{Op: operation(m, r.Reason)}}, nil
	case weft.MessagePause:
		return inboxEntry{input: runner.Pause{Op: operation(m, "")}}, nil
	case weft.MessageResume:
		return inboxEntry{input: runner.Resume{Op: operation(m, "")}}, nil
	case weft.MessageReset:
		var r resetRequest
		if err := json.Unmarshal(m.Payload, &r); err != nil {
			return inboxEntry{}, fmt.Errorf("inbox message %s: the reset: %w", m.ID, err)
		}
		return inboxEntry{input: runner.Reset{Step: r.Step, Vars: r.Vars, Op: operation(m, "")}}, nil
	case weft.MessageNote:
		var n lateNote
		if err := json.Unmarshal(m.Payload, &n); err != nil {
			return inboxEntry{}, fmt.Errorf("inbox message %s: the note: %w", m.ID, err)
		}
		return inboxEntry{note: &weft.HistoryEntry{Type: n.Type, StepPath: n.StepPath, Attempt: n.Attempt, Node: n.Node, Data: m.Payload}}, nil
	}
	return inboxEntry{}, fmt.Errorf("inbox message %s: unknown kind %q", m.ID, m.Kind)
}

// operation is who asked for the action of m, a cancel or a retry whose
// payload gives reason: its Op, with the payload's reason when Op has
// none. A message written before actors were recorded has no Op: its
// operation is the reason alone.
func operation(m weft.Message, reason string) weft.Operation {
	var op weft.Operation
	if m.Op != nil {
		op = *m.Op
	}
	if op.Reason == "" {
		op.Reason = reason
	}
	return op
}

// childInput is the runner's input for a child's end.
func childInput(m weft.Message) runner.Input {
	corrupt := func(err error) runner.Input {
		return runner.ChildFailed{Token: m.Token, Failure: weft.Failure{Code: CodeCorruptMessage,
			Message: fmt.Sprintf("the end of the child (inbox message %s) could not be read: %v", m.ID, err)}}
	}
	var end childEnd
	if err := json.Unmarshal(m.Payload, &end); err != nil {
		return corrupt(err)
	}
	if end.Status == string(weft.StatusCompleted) {
		out, err := payloadValue(end.Output)
		if err != nil {
			return corrupt(fmt.Errorf("its output: %w", err))
		}
		return runner.ChildCompleted{Token: m.Token, Output: out}
	}
	if !weft.Status(end.Status).Terminal() {
		return corrupt(fmt.Errorf("child %q ended with status %q", end.ID, end.Status))
	}
	f := weft.Failure{Code: end.Status, Message: "child " + end.ID + " " + end.Status}
	switch {
	case end.Error != nil && end.Status == string(weft.StatusCancelled):
		// Who cancelled the child, and why, is news to the parent; a
		// child's own failure speaks for itself.
		f.Code, f.Message = end.Error.Code, f.Message+": "+end.Error.Message
	case end.Error != nil:
		f.Code, f.Message = end.Error.Code, end.Error.Message
	}
	return runner.ChildFailed{Token: m.Token, Failure: f}
}

// payloadValue returns a JSON value as the runner takes it: none and null as
// nil, anything else as a document (*jsonv.Doc), checked but not decoded.
func payloadValue(raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	d, err := jsonv.New(raw)
	if err != nil {
		return nil, err
	}
	return d, nil
}
