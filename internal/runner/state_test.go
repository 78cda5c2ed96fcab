package runner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
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
// the instance) reads back field for field (documents kept as their
// bytes: decoded, the same values), and encodes to the same JSON (the
// documents now last), so stores and exports written before still load and
// compare equal.
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
			got := previousState{Status: st.Status, Input: plain(t, st.Input), Vars: st.Vars, Root: st.Root, Seq: st.Seq, Output: plain(t, st.Output), Error: st.Error}
			if got.Vars != nil {
				got.Vars = map[string]any{}
				for k, v := range st.Vars {
					got.Vars[k] = plain(t, v)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("read %s as\n%#v\nwant\n%#v", stored, got, want)
			}
			whole, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, whole, stored) {
				t.Errorf("encoded\n%s\nthe previous code wrote\n%s", whole, stored)
			}
			// As persisted now: without the input and the variables,
			// which Decode takes from the instance.
			enc, err := st.Encode()
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(enc.State, &top); err != nil {
				t.Fatal(err)
			}
			if _, in := top["input"]; in || top["vars"] != nil {
				t.Errorf("persisted %s: want neither the input nor the variables", enc.State)
			}
			input, err := json.Marshal(want.Input)
			if err != nil {
				t.Fatal(err)
			}
			back, err := runner.Decode(enc.State, input, enc.Vars)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := json.Marshal(back); err != nil || !sameJSON(t, again, stored) {
				t.Errorf("decoded from the instance %s, %v; want %s", again, err, stored)
			}
			vars, err := json.Marshal(want.Vars)
			if err != nil {
				t.Fatal(err)
			}
			output, err := json.Marshal(want.Output)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, enc.Vars, vars) || !sameJSON(t, enc.Output, output) {
				t.Errorf("vars %s, output %s; the previous code stored %s and %s", enc.Vars, enc.Output, vars, output)
			}
		})
	}
}

// TestStateSavedBeforeComputedTimeResumes: the states in testdata/state
// were saved by the code before delays and wait timeouts could be
// computed, mid-way through a literal delay and a wait with a literal
// timeout. They load, encode to the same bytes, and resume: the delay's
// timer completes it, and the wait's timeout names the definition's.
func TestStateSavedBeforeComputedTimeResumes(t *testing.T) {
	t.Parallel()
	def, err := definition.Load([]byte(`
name: remind
steps:
  - { id: prep, set: { n: 1 } }
  - { id: nap, delay: 36h }
  - { id: review, wait: { event: order.approved, key: "${ input.id }", timeout: 72h }, output: approval }
output: "${ vars.approval }"
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := runner.Compile(def)
	load := func(name string) *runner.State {
		t.Helper()
		stored, err := os.ReadFile(filepath.Join("testdata", "state", name))
		if err != nil {
			t.Fatal(err)
		}
		stored = bytes.TrimSpace(stored)
		var st runner.State
		if err := json.Unmarshal(stored, &st); err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		whole, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, whole, stored) {
			t.Errorf("%s encodes as\n%s\nwas stored as\n%s", name, whole, stored)
		}
		return &st
	}
	epoch := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	c := runner.Context{InstanceID: "i1", Now: epoch.Add(36 * time.Hour), Rand: func() float64 { return 0.5 }}

	st := load("delay-literal.json")
	acts := p.Apply(st, c, runner.TimerFired{Token: "t3"})
	bm, timer := only[runner.CreateBookmark](t, acts), only[runner.ArmTimer](t, acts)
	if bm.Key != "o-42" || timer.Kind != runner.TimerWaitTimeout || !timer.Due.Equal(c.Now.Add(72*time.Hour)) {
		t.Errorf("after the delay: bookmark %+v, timer %+v; want the wait on o-42, timing out 72h later", bm, timer)
	}

	st = load("wait-literal-timeout.json")
	c.Now = c.Now.Add(72 * time.Hour)
	p.Apply(st, c, runner.TimerFired{Token: "t6"})
	want := &weft.Failure{Code: "timeout", Message: "no order.approved stimulus within 72h0m0s", Step: "steps[2]"}
	if st.Status != weft.StatusFailed || !reflect.DeepEqual(st.Error, want) {
		t.Errorf("after the timeout: %s, %+v; want failed with %+v", st.Status, st.Error, want)
	}
}

// plain is x decoded when it is a document.
func plain(t *testing.T, x any) any {
	t.Helper()
	v, err := jsonv.Plain(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// order of members and the escapes.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
