package slots

import "time"

// State is what the engine keeps of one key between two calls, in the
// store, and hands back to the next call. The zero State (with its Key
// set) is a key nobody holds or waits for; a State that is Empty again can
// be deleted.
type State struct {
	// Key names the key, for errors and for the engine's records; the
	// operations never read it otherwise.
	Key string `json:"key"`
	// Holders hold the key's slots, in the order they were granted
	// (oldest first).
	Holders []Holder `json:"holders,omitempty"`
	// Waiters wait for a slot, first in line first.
	Waiters []Waiter `json:"waiters,omitempty"`
}

// Holder is one slot taken.
type Holder struct {
	// ID is the holder: an instance id (a workflow's limit) or an
	// attempt id (an activity step's).
	ID string `json:"id"`
	// Since is when the slot was granted: at Acquire, or at the promotion
	// of a waiter.
	Since time.Time `json:"since"`
	// Expiry is when the lease ends: the holder loses its slot at the
	// first operation at or after it, unless it was renewed.
	Expiry time.Time `json:"expiry"`
	// Cancelling is set when a CancelOldest acquisition listed the holder
	// for cancellation; it keeps its slot until it Releases it or its
	// lease expires, and is never listed again.
	Cancelling bool `json:"cancelling,omitempty"`
}

// Waiter is one id in the line.
type Waiter struct {
	// ID is the waiter, as Holder.ID.
	ID string `json:"id"`
	// Since is when it joined the line. A waiter has no lease: see the
	// package documentation, "Waiters".
	Since time.Time `json:"since"`
}

// Stats is what a key shows (the API, `weft flow`, the metrics).
type Stats struct {
	// Running counts the holders, those being cancelled included: they
	// still hold their slot.
	Running int
	// Cancelling counts the holders listed for cancellation.
	Cancelling int
	// Waiting counts the waiters.
	Waiting int
	// OldestWait is the earliest Since of the waiters; zero when none
	// waits.
	OldestWait time.Time
	// NextExpiry is the earliest lease expiry of the holders; zero when
	// none holds. The engine indexes keys by it to Expire the ones that no
	// call touches.
	NextExpiry time.Time
}

// Stats returns what s shows.
func (s State) Stats() Stats {
	st := Stats{Running: len(s.Holders), Waiting: len(s.Waiters)}
	for _, h := range s.Holders {
		if h.Cancelling {
			st.Cancelling++
		}
		if st.NextExpiry.IsZero() || h.Expiry.Before(st.NextExpiry) {
			st.NextExpiry = h.Expiry
		}
	}
	// The line is in arrival order, but the callers' clocks may disagree
	// (nodes of a cluster): the minimum, not the first.
	for _, w := range s.Waiters {
		if st.OldestWait.IsZero() || w.Since.Before(st.OldestWait) {
			st.OldestWait = w.Since
		}
	}
	return st
}

// Empty reports whether nobody holds or waits for the key: the engine may
// then delete its State.
func (s State) Empty() bool { return len(s.Holders) == 0 && len(s.Waiters) == 0 }

// clone returns a copy of s that shares no slice with it.
func (s State) clone() State {
	s.Holders = append([]Holder(nil), s.Holders...)
	s.Waiters = append([]Waiter(nil), s.Waiters...)
	return s
}

// holder returns the index of id among the holders, or -1.
func (s *State) holder(id string) int {
	for i, h := range s.Holders {
		if h.ID == id {
			return i
		}
	}
	return -1
}

// waiter returns the index of id in the line, or -1.
func (s *State) waiter(id string) int {
	for i, w := range s.Waiters {
		if w.ID == id {
			return i
		}
	}
	return -1
}
