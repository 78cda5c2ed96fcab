package heartbeat

import (
	"fmt"
	"time"
)

// Kind says what an item keeps alive.
type Kind uint8

const (
	// Activity is a running activity attempt: its attempt lease is renewed
	// and its guest's heartbeats are checked against its heartbeat timeout.
	Activity Kind = iota + 1
	// InstanceLease is the lease by which this node runs a workflow
	// instance (store.Store.RenewLeases).
	InstanceLease
	// LockLease is a long-held lock (lock.Locker), extended before its TTL.
	LockLease
)

func (k Kind) String() string {
	switch k {
	case Activity:
		return "activity"
	case InstanceLease:
		return "instance-lease"
	case LockLease:
		return "lock-lease"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Pulse is the in-memory heartbeat record of an activity attempt, which the
// guest's heartbeat call writes without I/O. *call.Heartbeat implements
// it. The scheduler reads it once per visit of the item.
type Pulse interface {
	// Last returns a copy of the latest details, the time of the last sign
	// of life (the attempt's start until the guest first beats) and how
	// many heartbeats arrived.
	Last() (details []byte, at time.Time, beats uint64)
}

// Item is one thing the scheduler keeps alive.
type Item struct {
	// ID names the item; it is unique among tracked items. The engine
	// chooses it, for example "attempt:<instance>/<step>/<n>",
	// "instance:<id>" or "lock:<name>".
	ID string

	// Kind says what the item is.
	Kind Kind

	// TTL is how long one renewal keeps the lease alive. It is used only to
	// check that it covers two cycles; zero skips the check.
	TTL time.Duration

	// HeartbeatTimeout is, for an Activity, how long its guest may go
	// without a sign of life before the attempt is timed out. Zero means
	// the activity has no heartbeat timeout.
	HeartbeatTimeout time.Duration

	// Pulse is, for an Activity, where its heartbeats are recorded. Nil
	// means nothing is checked and no details are carried.
	Pulse Pulse
}

func (it Item) validate() error {
	switch {
	case it.ID == "":
		return fmt.Errorf("heartbeat: Item.ID must not be empty")
	case it.Kind < Activity || it.Kind > LockLease:
		return fmt.Errorf("heartbeat: item %q: Item.Kind %s is unknown", it.ID, it.Kind)
	case it.TTL < 0:
		return fmt.Errorf("heartbeat: item %q: Item.TTL must not be negative, got %s", it.ID, it.TTL)
	case it.HeartbeatTimeout < 0:
		return fmt.Errorf("heartbeat: item %q: Item.HeartbeatTimeout must not be negative, got %s", it.ID, it.HeartbeatTimeout)
	}
	return nil
}

// Renewal is one element of a batch: the item to renew and, for an
// activity with a Pulse, what its pulse said when the tick checked it, so
// that the renewal persists the latest details.
type Renewal struct {
	Item

	// Details, LastBeat and Beats are what the item's Pulse returned.
	Details  []byte
	LastBeat time.Time
	Beats    uint64

	// Changed reports that heartbeats arrived since the last renewal that
	// succeeded (always true for the first one): the details need writing.
	Changed bool
}

// Outcome is what became of one renewal. The zero value is Error, so that a
// Renewer that forgets an item has it retried, never dropped.
type Outcome uint8

const (
	// Error is any failure not classified below (a timeout, a broken
	// connection): the item is retried within the cycle.
	Error Outcome = iota
	// OK: renewed; the item waits in the backup queue for the next cycle.
	OK
	// Throttled: the backend asked us to slow down; the item goes back to
	// the front of the main deque.
	Throttled
	// NotFound: the attempt, instance or lock no longer exists.
	NotFound
	// Cancelled: the attempt or instance was cancelled.
	Cancelled
	// Superseded: another attempt, node or lock holder owns it now (the
	// lease expired and recovery took it over).
	Superseded
	numOutcomes
)

func (o Outcome) String() string {
	switch o {
	case Error:
		return "error"
	case OK:
		return "ok"
	case Throttled:
		return "throttled"
	case NotFound:
		return "not-found"
	case Cancelled:
		return "cancelled"
	case Superseded:
		return "superseded"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// ActionKind says what the engine must do.
type ActionKind uint8

const (
	// TimeOut: the activity's guest has not shown a sign of life within its
	// heartbeat timeout. Stop the guest, fail the attempt as
	// heartbeat_timeout with Details, and let the retry policy decide.
	TimeOut ActionKind = iota + 1
	// CancelActivity: the attempt's renewal said it is gone, cancelled or
	// superseded. Stop the guest; its completion will be refused.
	CancelActivity
	// LoseLease: the lease renewal said this node no longer holds it. Stop
	// working on the instance or under the lock at once.
	LoseLease
)

func (k ActionKind) String() string {
	switch k {
	case TimeOut:
		return "heartbeat-timeout"
	case CancelActivity:
		return "cancel-activity"
	case LoseLease:
		return "lease-lost"
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is an instruction from the scheduler to the engine. The item is
// no longer tracked when the action is issued.
type Action struct {
	Kind ActionKind
	Item Item

	// Outcome is, for CancelActivity and LoseLease, the renewal outcome
	// that caused the action.
	Outcome Outcome

	// Details, LastBeat and Beats are, for TimeOut, what the item's Pulse
	// said: the details to fail the attempt with.
	Details  []byte
	LastBeat time.Time
	Beats    uint64
}

func (a Action) String() string {
	if a.Kind == TimeOut {
		return fmt.Sprintf("%s %s details=%q", a.Kind, a.Item.ID, a.Details)
	}
	return fmt.Sprintf("%s %s (%s)", a.Kind, a.Item.ID, a.Outcome)
}

// WarningCode classifies a Warning.
type WarningCode string

const (
	// OverCapacity: more items are tracked than Config.Capacity, so items
	// are renewed less than once per cycle.
	OverCapacity WarningCode = "over_capacity"
	// ShortTimeout: a lease TTL or heartbeat timeout does not exceed two
	// cycles, so a healthy item may expire or time out between visits.
	ShortTimeout WarningCode = "short_timeout"
)

// Warning is a configuration problem the scheduler noticed. The shell logs
// warnings; Stats exports the current ones.
type Warning struct {
	Code WarningCode
	// ID is the item concerned, if the warning is about one item.
	ID      string
	Message string
}

func (w Warning) String() string { return w.Message }
