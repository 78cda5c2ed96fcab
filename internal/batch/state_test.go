package batch

import (
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// TestInitial: a query selects first; an id list is selected already,
// and waits for a confirmation when held.
func TestInitial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc     string
		phase   Phase
		matched int
	}{
		{`{"op": "cancel", "query": "status = \"failed\""}`, PhaseSelecting, 0},
		{`{"op": "cancel", "query": "status = \"failed\"", "hold": true}`, PhaseSelecting, 0},
		{`{"op": "cancel", "ids": ["a", "b", "c"]}`, PhaseApplying, 3},
		{`{"op": "cancel", "ids": ["a", "b"], "hold": true}`, PhaseSelected, 2},
	}
	for _, tt := range tests {
		d, err := ParseDocument([]byte(tt.doc))
		if err != nil {
			t.Fatal(err)
		}
		want := State{Phase: tt.phase, Matched: tt.matched, StartedAt: t0}
		if got := Initial(d, t0); got != want {
			t.Errorf("Initial(%s) = %+v, want %+v", tt.doc, got, want)
		}
	}
}

// TestStateRoundTrip: Encode and ParseState keep every field.
func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	for _, st := range []State{
		{Phase: PhaseSelecting, StartedAt: t0},
		{Phase: PhaseApplying, SelectCursor: "c-17", ApplyAfter: 1200, Matched: 5000, StartedAt: t0, LastApply: t0.Add(time.Minute)},
		{Phase: PhaseCancelled, ApplyAfter: 3, Matched: 9, StartedAt: t0, FinishedAt: t0.Add(time.Hour),
			Cancelled: &weft.Operation{Actor: "alice", Reason: "wrong query", At: t0.Add(time.Hour)}},
		{Phase: PhaseFailed, Error: "the query matches more than 1000000 instances", StartedAt: t0, FinishedAt: t0.Add(time.Second)},
	} {
		b, err := st.Encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseState(b)
		if err != nil {
			t.Fatalf("ParseState(%s): %v", b, err)
		}
		again, _ := got.Encode()
		if string(again) != string(b) || got.Phase != st.Phase || !got.LastApply.Equal(st.LastApply) {
			t.Errorf("round trip:\n%s\n%s", b, again)
		}
	}
	if _, err := (State{Phase: PhaseDone, StartedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).Encode(); err == nil ||
		!strings.Contains(err.Error(), "phase done") {
		t.Errorf("Encode of a year JSON cannot hold = %v, want an error naming the phase", err)
	}
}

// TestParseState: what a node cannot read is an error; a field it does
// not know is not.
func TestParseState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data, err string
	}{
		{`{"phase": "applying", "matched": 2, "started_at": "2026-03-01T12:00:00Z", "newer": {"x": 1}}`, ""},
		{`{"phase": "paused", "matched": 2}`, `unknown phase "paused"`},
		{`{"matched": 2}`, `unknown phase ""`},
		{`{"phase": "done", "matched": -1}`, "matched is -1"},
		{`{"phase": 1}`, "cannot unmarshal"},
		{`nope`, "invalid character"},
	}
	for _, tt := range tests {
		_, err := ParseState([]byte(tt.data))
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "batch: reading a state: ")) {
			t.Errorf("ParseState(%s) = %v, want %q", tt.data, err, tt.err)
		}
	}
}

// TestPhaseFinished: done, cancelled and failed are the ends.
func TestPhaseFinished(t *testing.T) {
	t.Parallel()
	finished := map[Phase]bool{PhaseDone: true, PhaseCancelled: true, PhaseFailed: true}
	for _, p := range Phases() {
		if !p.Valid() || p.Finished() != finished[p] {
			t.Errorf("%s: Valid %v, Finished %v", p, p.Valid(), p.Finished())
		}
	}
	if Phase("paused").Valid() || Phase("").Finished() {
		t.Error("a phase not listed is valid or finished")
	}
}
