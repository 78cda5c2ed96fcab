package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Commit is one atomic write of an instance: its new state and everything
// that changes with it. Either all of it is applied or none of it.
type Commit struct {
	// Instance is the new state. Its Rev must equal the stored Rev; 0
	// creates the instance and fails with ErrExists if the id is taken.
	// The caller's value is not modified; the new Rev is returned.
	Instance *weft.Instance
	// Fence is the writer's fencing token (the instance lock's
	// lock.Lease.Token, 0 for an unlocked create). Refused with ErrFenced
	// when lower than the stored Fence; stored as the new Fence.
	Fence uint64
	// History is appended in order, each event getting the next sequence
	// number (the first event of an instance gets 1).
	History []weft.HistoryEntry
	// Bookmarks, when not nil, replaces the instance's whole bookmark set
	// (an empty slice clears it); nil leaves it as it is.
	Bookmarks []Bookmark
	// Timers, when not nil, replaces the instance's whole timer set (an
	// empty slice clears it); nil leaves it as it is.
	Timers []Timer
	// DeliveredStimulus, when set, is the id of a queued stimulus this
	// commit consumes: it leaves the queue and is remembered as delivered
	// (to this instance, with DeliveredOutcome) in the same transaction.
	// The commit is refused with ErrNotQueued when the stimulus is not
	// queued (never enqueued, already delivered, expired).
	DeliveredStimulus string
	// DeliveredOutcome is stored as the delivered stimulus's Outcome.
	DeliveredOutcome json.RawMessage
	// Consumed lists ids of messages in this instance's inbox that this
	// commit has applied: they are removed with it. An id not in the inbox
	// is ignored (it was consumed already).
	Consumed []string
	// Drains, when set, makes the commit refused with ErrInboxNotEmpty
	// when the inbox holds a message Consumed does not list: a writer
	// that has applied every message it read learns, in the same round
	// trip, whether another arrived since.
	Drains bool
	// Send writes messages to other instances' inboxes in the same
	// transaction (a child's end to its parent). A message for an instance
	// that does not exist is dropped; one whose ID the target inbox holds
	// is not written twice.
	Send []Message
	// Catalog, when not empty, is the StartCatalog.Generation a create read
	// its definition and plugins from: the commit is refused with
	// ErrCatalogChanged, and writes nothing, when the catalog changed since
	// (a definition saved or deleted, a plugin uploaded or deleted), or
	// when the store did not hand out that generation. Only a create may
	// carry it.
	Catalog string
	// At, when set, is the commit's time by the committer's clock: stored
	// as UpdatedAt, and as CreatedAt by a create that gives none. A
	// committer that sets it knows the instance as stored without reading
	// it back. Zero: the store's clock.
	At time.Time
}

// Bookmark is a suspended step waiting for a stimulus with Event as its
// name and Key as its correlation key.
type Bookmark struct {
	InstanceID string `json:"instance_id"`
	StepPath   string `json:"step_path"`
	Event      string `json:"event"`
	Key        string `json:"key"`
	// Token is the runner's name for the wait; a Message for this bookmark
	// carries it. Optional for the store.
	Token string `json:"token,omitempty"`
}

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
	// reason, a JSON string.
	MessageCancel MessageKind = "cancel"
	// MessageRetry: a request to continue a failed instance from where its
	// failure stopped it; the payload is the reason, a JSON string. The
	// one message that runs a finished (failed) instance again.
	MessageRetry MessageKind = "retry"
	// MessageNote: a history record for the instance from another
	// execution (an attempt's late result it refused), recorded as it is.
	MessageNote MessageKind = "note"
)

// Timer is a durable timer of an instance (a delay step, a wait's timeout,
// a retry's backoff…). It is removed only by a Commit of its instance that
// replaces the timer set, or with the instance.
type Timer struct {
	InstanceID string `json:"instance_id"`
	// ID is unique within the instance.
	ID   string          `json:"id"`
	Due  time.Time       `json:"due"`
	Kind string          `json:"kind,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// LeaseRenewal is one batch of RenewLeases: the leases of a node's running
// instances, and the latest heartbeats of their running attempts.
type LeaseRenewal struct {
	// Node and Boot identify the lease owner; Node must not be empty.
	Node string
	Boot string
	// IDs are the instances whose leases move to Expiry.
	IDs    []string
	Expiry time.Time
	// Heartbeats are stored for the instances Node and Boot still hold.
	Heartbeats []Heartbeat
}

// Heartbeat is the latest heartbeat of a running activity attempt: what
// its guest last reported, persisted by the heartbeat scheduler so that the
// next attempt gets it even when this node dies.
type Heartbeat struct {
	InstanceID string `json:"instance_id"`
	// Token is the runner's token of the attempt; unique per attempt.
	Token   string `json:"token"`
	Attempt int    `json:"attempt"`
	// Details is the JSON document the guest last passed to heartbeat.
	Details json.RawMessage `json:"details,omitempty"`
	// Time is when the guest reported it.
	Time time.Time `json:"time"`
}

// Validate reports what is malformed in r, naming the field; the error
// matches ErrInvalid.
func (r LeaseRenewal) Validate() error {
	switch {
	case r.Node == "":
		return Invalid("lease node must not be empty")
	case r.Expiry.IsZero() && len(r.IDs) > 0:
		return Invalid("lease expiry must be set")
	}
	for i, h := range r.Heartbeats {
		switch {
		case h.InstanceID == "":
			return Invalid("heartbeat %d: instance id must not be empty", i)
		case h.Token == "":
			return Invalid("heartbeat %d of instance %q: token must not be empty", i, h.InstanceID)
		}
		if err := checkJSON(h.Details, func() string { return fmt.Sprintf("heartbeat %d of instance %q: details", i, h.InstanceID) }); err != nil {
			return err
		}
	}
	return nil
}
