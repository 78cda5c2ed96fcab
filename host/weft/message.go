package weft

import (
	"encoding/json"
	"time"
)

// Message is something for an instance to apply when it next runs: a
// stimulus for one of its bookmarks, a child's end, a cancellation. It stays
// in the instance's inbox until a Commit of that instance consumes it, so
// that an event for a busy instance never blocks or fails its sender and is
// never lost: the instance lock is not reentrant, so a child resuming its
// parent, or a workflow signalling itself, must not wait for it.
type Message struct {
	InstanceID string `json:"instance_id"`
	// ID is unique within the inbox: writing a message whose ID the inbox
	// already holds writes nothing.
	ID   string      `json:"id"`
	Kind MessageKind `json:"kind"`
	// Token is the runner's token the message answers (a bookmark's or a
	// child step's); empty for a cancel or a note.
	Token   string          `json:"token,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Op is who asked for the action a cancel, a retry, a pause or a
	// resume carries, why and when, for the history entry that records
	// it; nil in a message of another kind, or one written before actors
	// were recorded. The
	// payload keeps the reason too, for a node that does not read Op.
	Op *Operation `json:"op,omitempty"`
	// Seq orders an inbox; CreatedAt is set by the store.
	Seq       uint64    `json:"seq"`
	CreatedAt time.Time `json:"created_at"`
}

// MessageKind says what a Message carries. The store keeps any kind; the
// engine writes and applies these.
type MessageKind string

// The kinds of Message.
const (
	// MessageStimulus: a stimulus for a bookmark (Token); the payload is the
	// stimulus's.
	MessageStimulus MessageKind = "stimulus"
	// MessageChild: a child instance's end, for the parent's child step
	// (Token).
	MessageChild MessageKind = "child"
	// MessageCancel: a request to cancel the instance; the payload is the
	// reason, a JSON string, and Op who asked.
	MessageCancel MessageKind = "cancel"
	// MessageRetry: a request to continue a failed instance from where its
	// failure stopped it; the payload says which failure, with the
	// reason, and Op who asked. The one message that runs a finished
	// (failed) instance again.
	MessageRetry MessageKind = "retry"
	// MessagePause: an operator's pause of the instance; Op says who and
	// why. Pause and resume messages have ids of their own, so that a
	// pause, a resume and a pause again all apply, in order.
	MessagePause MessageKind = "pause"
	// MessageResume: an operator's resume of a paused instance; Op says
	// who and why.
	MessageResume MessageKind = "resume"
	// MessageReset: an operator's reset of the instance to a top-level
	// step; the payload names the step and holds the variables it began
	// with, and Op says who asked. With a retry, the one message that runs
	// a finished instance again.
	MessageReset MessageKind = "reset"
	// MessageMigrate: an operator's migration of the instance to another
	// version of its workflow or plugins; the payload is the target as
	// resolved, and Op says who asked. Applied when the instance is at
	// rest.
	MessageMigrate MessageKind = "migrate"
	// MessageNote: a history record for the instance from another
	// execution (an attempt's late result it refused), recorded as it is.
	MessageNote MessageKind = "note"
)
