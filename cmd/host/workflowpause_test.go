package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// TestCLIWorkflowPauseResume: `weft workflow pause` pauses a workflow,
// which `weft workflow ls` and `show` then show paused (show with its held
// starts); a start is held, and `weft instance show` and `ls` say so.
// `weft workflow resume --watch` names the release batch, follows it to
// its end and the start completes; a resume of a workflow not paused
// exits 4. -o json prints the API's answers.
func TestCLIWorkflowPauseResume(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	flow := writeFile(t, t.TempDir(), "quick.yaml", "name: quick\nsteps:\n  - id: a\n    set: { n: \"${ input.n }\" }\noutput: \"${ vars.n }\"\n")
	ts.ok(t, "workflow", "put", flow)

	out := ts.ok(t, "workflow", "pause", "quick", "--reason", "bad release")
	if !regexp.MustCompile(`^workflow quick paused since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d by anonymous: bad release; its new starts are held until weft workflow resume quick\n$`).MatchString(out) {
		t.Errorf("workflow pause printed %q", out)
	}
	var again apiv1.WorkflowPause
	ts.okJSON(t, &again, "workflow", "pause", "quick", "--reason", "another")
	if again.Workflow != "quick" || again.Reason != "bad release" {
		t.Errorf("a second pause -o json printed %+v, want the first pause", again)
	}
	if out := ts.ok(t, "workflow", "ls"); !regexp.MustCompile(`(?m)^quick +1 +\S+ +\S+ \S+ +since \S+ \S+ by anonymous$`).MatchString(out) {
		t.Errorf("workflow ls does not show quick paused:\n%s", out)
	}

	ts.ok(t, "run", "quick", "--id", "q-1", "--input", `{"n": 5}`)
	show := ts.ok(t, "instance", "show", "q-1")
	if !regexp.MustCompile(`(?m)^status: +pending\n(?s:.*)^held: +since \S+ \S+: its workflow is paused; it starts when the workflow is resumed$`).MatchString(show) {
		t.Errorf("instance show of a held start:\n%s", show)
	}
	if out := ts.ok(t, "instance", "ls", "--workflow", "quick"); !regexp.MustCompile(`(?m)^q-1 +quick +1 +pending .*held: workflow paused$`).MatchString(out) {
		t.Errorf("instance ls of a held start:\n%s", out)
	}
	if out := ts.ok(t, "workflow", "show", "quick"); !regexp.MustCompile(`(?m)^# paused since \S+ \S+ by anonymous: bad release \(1 held start\); its new starts are held until weft workflow resume quick\nname: quick\n`).MatchString(out) {
		t.Errorf("workflow show of the paused workflow:\n%s", out)
	}

	out = ts.ok(t, "workflow", "resume", "quick", "--reason", "fixed", "--rate", "0", "--watch")
	want := regexp.MustCompile(`^workflow quick resumed \(paused since \S+ \S+ by anonymous: bad release\); its held starts are released, oldest first, by batch (b-\S+)\n(?s:.*)batch (b-\S+) done: release of 1 instance: done 1\n$`)
	m := want.FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("workflow resume --watch printed %q, want the release batch followed to its end", out)
	}
	if in := ts.waitStatus(t, "q-1", "completed"); string(in.Output) != "5" {
		t.Errorf("q-1 completed with %s, want 5", in.Output)
	}
	if out := ts.ok(t, "batch", "show", m[1]); !strings.Contains(out, "reason:     fixed\n") || !strings.Contains(out, "rate:       unlimited\n") {
		t.Errorf("the release batch shows:\n%s", out)
	}
	if r := ts.weft(t, nil, "workflow", "resume", "quick"); r.code != exitNotFound || !strings.Contains(r.stderr, `workflow "quick" is not paused`) {
		t.Errorf("resume of a workflow not paused: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// -o json: the pause, then the resume's answer with its release.
	ts.ok(t, "workflow", "pause", "quick")
	var res apiv1.WorkflowResume
	ts.okJSON(t, &res, "workflow", "resume", "quick")
	if res.Pause.Workflow != "quick" || res.Pause.Reason != "paused through the API" || res.Release == nil || res.Release.Op != apiv1.BatchRelease || res.Release.Rate != 1000 {
		t.Errorf("workflow resume -o json printed %+v", res)
	}
	if r := ts.weft(t, nil, "workflow", "pause", "Not A Name"); r.code != exitFailed || !strings.Contains(r.stderr, "cannot name a workflow") {
		t.Errorf("pause of a bad name: exit %d\nstderr: %s", r.code, r.stderr)
	}
}
