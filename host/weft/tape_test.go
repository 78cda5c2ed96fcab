package weft_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestParseRecordPolicy: the text forms parse and print back; a bare
// fraction, a share out of range and other words are ErrInvalid.
func TestParseRecordPolicy(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"off", "failed", "all", "5%", "0.5%", "100%", "12.25%"} {
		p, err := weft.ParseRecordPolicy(s)
		if err != nil || p.String() != s {
			t.Errorf("ParseRecordPolicy(%q) = %q, %v", s, p, err)
		}
		var q weft.RecordPolicy
		if err := q.UnmarshalText([]byte(s)); err != nil || q != p {
			t.Errorf("UnmarshalText(%q) = %+v, %v; want %+v", s, q, err, p)
		}
	}
	for _, s := range []string{"", "Off", "none", "0.05", "1", "0%", "-5%", "101%", "NaN%", "inf%", "0x10%", " 5%", "5 %", "%"} {
		if p, err := weft.ParseRecordPolicy(s); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("ParseRecordPolicy(%q) = %+v, %v; want ErrInvalid", s, p, err)
		}
	}
	var zero weft.RecordPolicy
	if !zero.IsZero() || zero.Records() || zero.Or(weft.DefaultRecordPolicy) != weft.DefaultRecordPolicy {
		t.Error("the zero policy is not \"not said\"")
	}
}

// TestRecordPolicyKeep: off keeps nothing, failed the failures (a
// timeout is one, a cancel is not), all everything, a sample the
// failures and about its share of the rest, deciding alike for a key.
func TestRecordPolicyKeep(t *testing.T) {
	t.Parallel()
	key := weft.TapeKey{InstanceID: "i", StepPath: "steps[0]", Exec: "e1", Attempt: 1}
	pol := func(s string) weft.RecordPolicy {
		p, err := weft.ParseRecordPolicy(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		policy string
		keeps  []weft.TapeOutcome
	}{
		{"off", nil},
		{"failed", []weft.TapeOutcome{weft.TapeFailed, weft.TapeTimedOut}},
		{"all", []weft.TapeOutcome{weft.TapeCompleted, weft.TapeFailed, weft.TapeTimedOut, weft.TapeCancelled}},
		{"100%", []weft.TapeOutcome{weft.TapeCompleted, weft.TapeFailed, weft.TapeTimedOut, weft.TapeCancelled}},
	} {
		for _, o := range []weft.TapeOutcome{weft.TapeCompleted, weft.TapeFailed, weft.TapeTimedOut, weft.TapeCancelled} {
			if got, want := pol(tt.policy).Keep(key, o), slices.Contains(tt.keeps, o); got != want {
				t.Errorf("%s keeps a %s attempt: %v, want %v", tt.policy, o, got, want)
			}
		}
		if got, want := pol(tt.policy).Records(), tt.policy != "off"; got != want {
			t.Errorf("%s Records() = %v", tt.policy, got)
		}
	}

	// A 10% sample keeps every failure, and about a tenth of the rest.
	sample := pol("10%")
	kept := 0
	const n = 10000
	for i := range n {
		k := weft.TapeKey{InstanceID: fmt.Sprintf("inst-%d", i), StepPath: "steps[0]", Exec: "e1", Attempt: 1}
		if !sample.Keep(k, weft.TapeFailed) {
			t.Fatalf("a 10%% sample drops failed attempt %s", k)
		}
		if sample.Keep(k, weft.TapeCompleted) {
			kept++
		}
		if sample.Keep(k, weft.TapeCompleted) != k.Sampled(10) {
			t.Fatalf("%s: Keep and Sampled disagree", k)
		}
	}
	if kept < n/10-300 || kept > n/10+300 {
		t.Errorf("a 10%% sample kept %d of %d completed attempts", kept, n)
	}
}

// TestTapeKey: keys are checked, and ordered as a listing shows them.
func TestTapeKey(t *testing.T) {
	t.Parallel()
	ok := weft.TapeKey{InstanceID: "i", StepPath: "steps[0]", Exec: "e1", Attempt: 1}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []weft.TapeKey{
		{StepPath: "steps[0]", Exec: "e1", Attempt: 1},
		{InstanceID: "i", Exec: "e1", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[0]", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[0]", Exec: "e1"},
		{InstanceID: "i", StepPath: "steps[0]\x00", Exec: "e1", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[0]", Exec: string(make([]byte, weft.MaxTapeExec+1)), Attempt: 1},
	} {
		if err := k.Check(); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", k, err)
		}
	}

	ordered := []weft.TapeKey{
		{InstanceID: "a", StepPath: "steps[9]", Exec: "e1", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[1]", Exec: "e2", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[1]", Exec: "e2", Attempt: 2},
		{InstanceID: "b", StepPath: "steps[1]", Exec: "e2", Attempt: 10},
		{InstanceID: "b", StepPath: "steps[1]", Exec: "e10", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[1].do[2]", Exec: "e3", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[1].do[10]", Exec: "e3", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[2]", Exec: "e1", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[10]", Exec: "e1", Attempt: 1},
	}
	shuffled := slices.Clone(ordered)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, weft.TapeKey.Compare)
	if !slices.Equal(shuffled, ordered) {
		t.Errorf("sorted keys:\n%v\nwant\n%v", shuffled, ordered)
	}
	for i, k := range ordered {
		if k.Compare(k) != 0 || (i > 0 && (ordered[i-1].Compare(k) >= 0 || k.Compare(ordered[i-1]) <= 0)) {
			t.Errorf("Compare around %s is not a strict order", k)
		}
	}
}

// TestRecordPolicyCheck: what ParseRecordPolicy returns, and the zero
// policy, pass; an unknown mode, a sample's share out of range and a
// share on another mode are refused as invalid.
func TestRecordPolicyCheck(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"off", "failed", "all", "5%", "0.5%", "100%"} {
		p, err := weft.ParseRecordPolicy(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	if err := (weft.RecordPolicy{}).Check(); err != nil {
		t.Errorf("zero policy: %v", err)
	}
	for _, p := range []weft.RecordPolicy{
		{Mode: "failures"},
		{Mode: weft.RecordSample},
		{Mode: weft.RecordSample, Percent: 101},
		{Mode: weft.RecordSample, Percent: math.NaN()},
		{Mode: weft.RecordAll, Percent: 5},
	} {
		if err := p.Check(); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("%+v: %v, want invalid", p, err)
		}
	}
}

// TestReplayReportJSON: a report encodes with its documented names, its
// outputs as documents.
func TestReplayReportJSON(t *testing.T) {
	t.Parallel()
	r := weft.ReplayReport{
		Key: weft.TapeKey{InstanceID: "i1", StepPath: "steps[0]", Exec: "e1", Attempt: 2}, Activity: "fail", Plugin: "kit",
		RecordedVersion: "v1", ReplayedVersion: "v2", Outcome: weft.ReplayDiverged, RecordedOutput: json.RawMessage(`{"a":1}`),
		Failure:    &weft.ReplayFailure{Code: "diverged", Message: "m"},
		Divergence: &weft.ReplayDivergence{Index: 1, Want: weft.ReplayCall{Kind: "http", Ask: "GET x"}, Got: weft.ReplayCall{Kind: "random", Ask: "8"}, Note: "n"},
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"key":{"instance_id":"i1","step_path":"steps[0]","exec":"e1","attempt":2},"activity":"fail","plugin":"kit",` +
		`"recorded_version":"v1","replayed_version":"v2","outcome":"diverged","recorded_output":{"a":1},` +
		`"failure":{"code":"diverged","message":"m"},"divergence":{"index":1,"want":{"kind":"http","ask":"GET x"},"got":{"kind":"random","ask":"8"},"note":"n"},"duration":0}`
	if string(b) != want {
		t.Errorf("JSON:\n%s\nwant\n%s", b, want)
	}
}
