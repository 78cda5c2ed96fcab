package runner_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/runner"
)

// previousState is State as it was before it had a document of its own: its
// fields and tags, copied, so that the test below reads what that code
// wrote.
type previousState struct {
	Status weft.Status    `json:"status"`
	Input  any            `json:"input"`
	Vars   map[string]any `json:"vars"`
	Root   *runner.Frame  `json:"root,omitempty"`
	Seq    uint64         `json:"seq"`
	Output any            `json:"output,omitempty"`
	Error  *weft.Failure  `json:"error,omitempty"`
}

// TestStateReadsThePreviousDocument: a state stored by the previous code
// (json.Marshal of its State, and its Vars and Output marshalled apart for
// the instance) reads back field for field, and encodes to the same bytes,
// so stores and exports written before still load and compare equal.
func TestStateReadsThePreviousDocument(t *testing.T) {
	t.Parallel()
	scheduled := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, prev := range map[string]previousState{
		"suspended": {
			Status: weft.StatusSuspended,
			Input:  map[string]any{"id": "o-42", "big": 12345678901234567890.0, "html": "<a & b>", "list": []any{1.5, "x", nil, true}},
			Vars:   map[string]any{"a": map[string]any{"n": 1.0}},
			Root: &runner.Frame{List: "steps", Path: "steps", Index: 1, Run: &runner.Run{
				Exec: "e1", Pending: runner.PendingBookmark, Token: "b3", TimeoutToken: "t4", Scheduled: scheduled, Started: scheduled,
				Input: map[string]any{"k": "v"}, LastHeartbeat: json.RawMessage(`{"at":3}`),
			}},
			Seq: 4,
		},
		"completed": {
			Status: weft.StatusCompleted, Input: "hi", Vars: map[string]any{"out": "HI"},
			Root: &runner.Frame{List: "steps", Path: "steps", Index: 1, Done: true}, Seq: 2, Output: "HI",
		},
		"failed without input": {
			Status: weft.StatusFailed, Vars: map[string]any{},
			Root:  &runner.Frame{List: "steps", Path: "steps"},
			Error: &weft.Failure{Code: "card_declined", Message: "no", Details: json.RawMessage(`{"try":2}`), Step: "steps[0]"},
		},
		"never applied": {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stored, err := json.Marshal(prev)
			if err != nil {
				t.Fatal(err)
			}
			// What the previous code read back from it.
			var want previousState
			if err := json.Unmarshal(stored, &want); err != nil {
				t.Fatal(err)
			}
			var st runner.State
			if err := json.Unmarshal(stored, &st); err != nil {
				t.Fatalf("reading %s: %v", stored, err)
			}
			got := previousState{Status: st.Status, Input: st.Input, Vars: st.Vars, Root: st.Root, Seq: st.Seq, Output: st.Output, Error: st.Error}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read %s as\n%#v\nwant\n%#v", stored, got, want)
			}
			enc, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if string(enc.State) != string(stored) {
				t.Errorf("encoded\n%s\nthe previous code wrote\n%s", enc.State, stored)
			}
			vars, err := json.Marshal(want.Vars)
			if err != nil {
				t.Fatal(err)
			}
			output, err := json.Marshal(want.Output)
			if err != nil {
				t.Fatal(err)
			}
			if string(enc.Vars) != string(vars) || string(enc.Output) != string(output) {
				t.Errorf("vars %s, output %s; the previous code stored %s and %s", enc.Vars, enc.Output, vars, output)
			}
		})
	}
}
