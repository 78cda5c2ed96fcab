package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

const nightly = `
id: nightly-report
workflow: report
input:
  day: "${ schedule.time }"
  run: "${ schedule.id }/${ schedule.kind }"
  fixed: 3
priority: 2
spec:
  cron: ["0 9 * * MON-FRI", "@monthly"]
  every: [{every: 15m, offset: 2m}, 1d]
  time_zone: Europe/Berlin
  start: 2026-01-01T00:00:00+01:00
  end: "2027-01-01T00:00:00Z"
  jitter: 30s
policy:
  overlap: buffer_one
  catch_up_window: 10m
  pause_on_failure: true
  max_runs: 100
`

// TestParseDocument reads every field of a schedule document, and its
// canonical form reads back to itself.
func TestParseDocument(t *testing.T) {
	t.Parallel()
	d, err := ParseDocument([]byte(nightly))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "nightly-report" || d.Workflow != "report" || len(d.Spec.Cron) != 2 || len(d.Spec.Every) != 2 ||
		d.Spec.Every[0] != (Interval{Every: 15 * time.Minute, Offset: 2 * time.Minute}) || d.Spec.Every[1].Every != 24*time.Hour ||
		d.Spec.TimeZone != "Europe/Berlin" || d.Spec.Jitter != 30*time.Second ||
		!d.Spec.Start.Equal(time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC)) || !d.Spec.End.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("spec = %+v", d.Spec)
	}
	if d.Policy != (Policy{Overlap: OverlapBufferOne, CatchUpWindow: 10 * time.Minute, PauseOnFailure: true, MaxRuns: 100}) {
		t.Errorf("policy = %+v", d.Policy)
	}
	if d.Priority != 2 {
		t.Errorf("priority = %d, want 2", d.Priority)
	}
	if d.Calendar() == nil || d.Calendar().Location().String() != "Europe/Berlin" {
		t.Fatal("no calendar in the zone")
	}
	canon, err := d.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseDocument(canon)
	if err != nil {
		t.Fatalf("the canonical form does not parse: %v\n%s", err, canon)
	}
	if c2, _ := again.Canonical(); string(c2) != string(canon) {
		t.Errorf("canonical forms differ:\n%s\n%s", canon, c2)
	}
	in, err := d.RunInput(Fire{Nominal: time.Date(2026, 3, 31, 7, 0, 0, 0, time.UTC), Kind: weft.FireScheduled})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"day":"2026-03-31T09:00:00+02:00","fixed":3,"run":"nightly-report/scheduled"}`; string(in) != want {
		t.Errorf("input = %s, want %s", in, want)
	}
	bare, err := ParseDocument([]byte(`{"id": "a", "workflow": "w", "spec": {"cron": "@daily"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if in, err := bare.RunInput(Fire{Nominal: time.Now()}); in != nil || err != nil {
		t.Errorf("a document without input: %s, %v", in, err)
	}
	if c, _ := bare.Canonical(); string(c) != `{"id":"a","workflow":"w","spec":{"cron":["@daily"]}}` {
		t.Errorf("canonical = %s", c)
	}
}

// TestParseDocumentRefuses: each problem is named with its path, and its
// line when it has one.
func TestParseDocumentRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, path, msg string
		line                 int
	}{
		{"empty", ``, "", "empty", 0},
		{"not yaml", `{`, "", "not YAML or JSON", 0},
		{"two documents", "id: a\n---\nid: b\n", "", "more than one document", 2},
		{"a list", `[1]`, "", "want a mapping", 1},
		{"no id", "workflow: w\nspec: {cron: '@daily'}\n", "id", "is required", 1},
		{"bad id", "id: Nightly\nworkflow: w\nspec: {cron: '@daily'}\n", "id", "starting with a letter", 1},
		{"unknown field", "id: a\nworkflow: w\nspec: {cron: '@daily'}\nwhen: now\n", "when", "unknown field", 4},
		{"twice", "id: a\nid: b\nworkflow: w\nspec: {cron: '@daily'}\n", "id", "appears twice", 2},
		{"unknown spec field", "id: a\nworkflow: w\nspec: {cron: '@daily', tz: UTC}\n", "spec.tz", "unknown field", 3},
		{"malformed cron", "id: a\nworkflow: w\nspec:\n  cron: [\"@daily\", \"1 2\"]\n", "spec.cron[1]", "expected 5 to 6 fields", 0},
		{"cron not a string", "id: a\nworkflow: w\nspec:\n  cron: [5]\n", "spec.cron[0]", "want a string", 4},
		{"bad duration", "id: a\nworkflow: w\nspec: {every: [{every: soon}]}\n", "spec.every[0].every", "soon", 3},
		{"interval without every", "id: a\nworkflow: w\nspec: {every: [{offset: 1m}]}\n", "spec.every[0].every", "is required", 3},
		{"bad zone", "id: a\nworkflow: w\nspec: {cron: '@daily', time_zone: Berlin}\n", "spec.time_zone", "IANA", 0},
		{"start without offset", "id: a\nworkflow: w\nspec: {cron: '@daily', start: '2026-01-01T00:00:00'}\n", "spec.start", "RFC 3339", 3},
		{"bad overlap", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npolicy: {overlap: sometimes}\n", "policy.overlap", "must be one of", 0},
		{"zero window", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npolicy: {catch_up_window: 0s}\n", "policy.catch_up_window", "at least 1s", 4},
		{"max runs not a number", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npolicy: {max_runs: many}\n", "policy.max_runs", "whole number", 4},
		{"priority out of range", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npriority: 6\n", "priority", "6 is not from 1 (first) to 5 (last)", 4},
		{"priority not a number", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npriority: high\n", "priority", "want a whole number", 4},
		{"pause not a bool", "id: a\nworkflow: w\nspec: {cron: '@daily'}\npolicy: {pause_on_failure: yes please}\n", "policy.pause_on_failure", "true or false", 4},
		{"input expression", "id: a\nworkflow: w\nspec: {cron: '@daily'}\ninput: {x: '${ schedule.time +* 1 }'}\n", "input.x", "", 4},
		{"input not JSON", "id: a\nworkflow: w\nspec: {cron: '@daily'}\ninput: .inf\n", "input", "JSON", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDocument([]byte(tt.doc))
			var e *weft.ScheduleError
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) {
				t.Fatalf("ParseDocument = %v, want an *weft.ScheduleError", err)
			}
			for _, p := range e.Problems {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) && (tt.line == 0 || p.Line == tt.line) {
					return
				}
			}
			t.Errorf("problems %+v, want one at %q (line %d) containing %q", e.Problems, tt.path, tt.line, tt.msg)
		})
	}
}

// TestRunInputFailsVisibly: an input expression that fails at fire time
// is an error that names the field, not a run with a wrong input.
func TestRunInputFailsVisibly(t *testing.T) {
	t.Parallel()
	d, err := ParseDocument([]byte("id: a\nworkflow: w\nspec: {cron: '@daily'}\ninput: {n: '${ schedule.nothing.deeper }'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.RunInput(Fire{Nominal: time.Now(), Kind: weft.FireTrigger}); err == nil || !strings.Contains(err.Error(), "input") {
		t.Errorf("RunInput = %v, want an error naming the input", err)
	}
}
