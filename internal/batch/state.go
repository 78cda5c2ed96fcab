package batch

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Phase is where a batch is in its life: selecting its instances, waiting
// for a confirmation, applying its operation, or finished.
type Phase string

// The phases of a batch.
const (
	// PhaseSelecting: the stepper pages the query's matches into items.
	PhaseSelecting Phase = "selecting"
	// PhaseSelected: the items are selected (State.Matched of them) and
	// the batch, started with hold, waits for an operator to confirm it.
	PhaseSelected Phase = "selected"
	// PhaseApplying: the stepper applies the operation to the pending
	// items, a chunk at a time, at the document's rate.
	PhaseApplying Phase = "applying"
	// PhaseDone: every item has its outcome.
	PhaseDone Phase = "done"
	// PhaseCancelled: an operator cancelled the batch (State.Cancelled
	// says who and why); the items still pending stay so.
	PhaseCancelled Phase = "cancelled"
	// PhaseFailed: the batch stopped on an error (State.Error), such as a
	// selection larger than the host allows.
	PhaseFailed Phase = "failed"
)

// Phases lists the phases, in the order of a batch's life.
func Phases() []Phase {
	return []Phase{PhaseSelecting, PhaseSelected, PhaseApplying, PhaseDone, PhaseCancelled, PhaseFailed}
}

// Valid reports whether p is one of the phases.
func (p Phase) Valid() bool { return slices.Contains(Phases(), p) }

// Finished reports whether p is done, cancelled or failed: the batch
// applies nothing more, and is kept until its retention ends.
func (p Phase) Finished() bool {
	return p == PhaseDone || p == PhaseCancelled || p == PhaseFailed
}

// State is what the stepper of a batch keeps between two steps, in the
// batch's record (weft.Batch.State, as Encode writes it). The items and
// their counts are the store's, beside it.
type State struct {
	Phase Phase `json:"phase"`
	// SelectCursor is where the selection's next page of query matches
	// begins; empty before the first page.
	SelectCursor string `json:"select_cursor,omitempty"`
	// ApplyAfter is the Seq of the last item applied: the stepper's next
	// chunk is the pending items after it.
	ApplyAfter uint64 `json:"apply_after,omitempty"`
	// Matched is how many instances the selection found: the items.
	Matched int `json:"matched"`
	// Error says why the batch failed (PhaseFailed).
	Error string `json:"error,omitempty"`
	// Cancelled says who cancelled the batch, why and when
	// (PhaseCancelled).
	Cancelled *weft.Operation `json:"cancelled,omitempty"`
	// StartedAt is when the batch began; FinishedAt when it reached a
	// finished phase (zero before).
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// LastApply is when the stepper applied its last chunk, zero before
	// the first: Budget's last.
	LastApply time.Time `json:"last_apply,omitzero"`
}

// Initial is the state of a new batch of d, at now: selecting for a
// query; for a list of ids, which are the items from the start, applying,
// or selected (waiting for a confirmation) with Hold.
func Initial(d *Document, now time.Time) State {
	st := State{Phase: PhaseSelecting, StartedAt: now}
	if d.Query == "" {
		st.Phase, st.Matched = PhaseApplying, len(d.IDs)
		if d.Hold {
			st.Phase = PhaseSelected
		}
	}
	return st
}

// ParseState reads a state that Encode wrote. Fields it does not know are
// ignored, so that a node reads the state a newer node wrote; a phase it
// does not know is an error.
func ParseState(data []byte) (State, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return State{}, fmt.Errorf("batch: reading a state: %w", err)
	}
	if !st.Phase.Valid() {
		return State{}, fmt.Errorf("batch: reading a state: unknown phase %q", st.Phase)
	}
	if st.Matched < 0 {
		return State{}, fmt.Errorf("batch: reading a state: matched is %d", st.Matched)
	}
	return st, nil
}

// Encode writes s as JSON, for weft.Batch.State. It fails only for a time
// outside the years 0 to 9999, which JSON's form of a time cannot hold.
func (s State) Encode() ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("batch: writing a state in phase %s: %w", s.Phase, err)
	}
	return b, nil
}
