package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
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
	Bookmarks []weft.Bookmark
	// Timers, when not nil, replaces the instance's whole timer set (an
	// empty slice clears it); nil leaves it as it is.
	Timers []weft.Timer
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
	Send []weft.Message
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
	// Slot, when set, is an operation on a key's concurrency slots that
	// goes with the commit (a new instance asks for its slot, a finished
	// one gives it back): applied as UpdateSlots would, in the commit's
	// transaction on the embedded store, and right after the commit on
	// Redis, only when the commit succeeds. Its outcome is set in the
	// SlotChange.
	Slot *SlotChange
}

// SlotChange is a Commit's operation on concurrency slots: UpdateSlots's
// arguments, and, once the commit returned, its outcome.
type SlotChange struct {
	Key, ID string
	Params  slots.Params
	Now     time.Time
	Op      SlotOp
	// Decision is the operation's, set when the commit succeeded.
	Decision slots.Decision
	// Err is set when the operation failed after a commit that succeeded
	// (Redis applies it after the commit): the commit stands, and the
	// caller's sweeps repair the slots. On the embedded store an
	// operation's failure refuses the commit instead.
	Err error
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
