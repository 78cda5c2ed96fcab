package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// weftTTY runs the CLI as on a terminal: stderr a terminal, and stdin one
// too, holding stdin.
func (ts *testServer) weftTTY(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{
		stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		env: []string{"WEFT_SERVER=" + ts.url}, terminal: true, interactive: true, now: time.Now,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := a.run(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// batchIDIn finds the id of the batch a command's output names.
func batchIDIn(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`batch (b-[0-9a-z-]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no batch id in %q", out)
	}
	return m[1]
}

// compact is a JSON value on one line, as -o json indents it.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// gatedFlow waits for gated.go with the instance's key.
const gatedFlow = "name: gated\nsteps:\n  - id: go\n    wait: {event: gated.go, key: \"${ input.k }\"}\n    output: got\noutput: \"${ vars.got }\"\n"

// TestCLIBatchQueryConfirmation: `weft batch start` of a query without a
// terminal and without --yes leaves the batch held, with the count,
// saying how to confirm it; `weft batch show` shows it waiting; `weft
// batch confirm --watch` applies it and prints its progress in lines,
// then how it ended; `weft batch items` and `weft batch ls` list it. On a
// terminal the command asks, draws a bar, and a no cancels the batch.
func TestCLIBatchQueryConfirmation(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "gated.yaml", gatedFlow))
	for _, id := range []string{"g-1", "g-2", "g-3"} {
		ts.ok(t, "run", "gated", "--id", id, "--input", `{"k":"`+id+`"}`, "--until", "suspended")
	}

	r := ts.weft(t, nil, "batch", "start", "cancel", "--query", `workflow = "gated" AND id != "g-3"`, "--reason", "bad batch")
	want := regexp.MustCompile(`^weft: batch b-\S+: 2 instances match; nothing is applied without a confirmation: pass --yes, or confirm this selection with\n  weft batch confirm b-\S+\nor drop it with\n  weft batch cancel b-\S+\n$`)
	if r.code != exitFailed || !want.MatchString(r.stderr) || r.stdout != "" {
		t.Fatalf("batch start without a terminal or --yes: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	id := batchIDIn(t, r.stderr)
	show := ts.ok(t, "batch", "show", id)
	for _, re := range []string{`(?m)^op: +cancel$`, `(?m)^query: +workflow = "gated" AND id != "g-3"$`, `(?m)^reason: +bad batch$`,
		`(?m)^rate: +1000 instances/s$`, `(?m)^started by: +anonymous$`, `(?m)^phase: +selected$`, `(?m)^matched: +2$`, `(?m)^items: +pending 2$`,
		`(?m)^waiting for a confirmation: weft batch confirm ` + id} {
		if !regexp.MustCompile(re).MatchString(show) {
			t.Errorf("batch show does not match %s:\n%s", re, show)
		}
	}
	out := ts.ok(t, "batch", "confirm", id, "--watch")
	if !strings.Contains(out, "batch "+id+" done: cancel of 2 instances: done 2\n") {
		t.Errorf("batch confirm --watch printed:\n%s", out)
	}
	ts.waitStatus(t, "g-1", "cancelled")
	ts.waitStatus(t, "g-2", "cancelled")
	if hist := ts.ok(t, "instance", "history", "g-1"); !regexp.MustCompile(`(?m)instance_cancelled +- +- +anonymous +\{"batch":"` + id + `","reason":"bad batch"`).MatchString(hist) {
		t.Errorf("g-1's history:\n%s", hist)
	}
	items := ts.ok(t, "batch", "items", id)
	if !regexp.MustCompile(`(?m)^SEQ +INSTANCE +OUTCOME +TIME +REASON\n1 +g-[12] +done +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +-\n2 +g-[12] +done `).MatchString(items) {
		t.Errorf("batch items:\n%s", items)
	}
	if ls := ts.ok(t, "batch", "ls"); !regexp.MustCompile(`(?m)^` + id + ` +cancel +done +2 +0 +2 +0 +0 +anonymous +\S+ \S+ +workflow = "gated" AND id != "g-3"$`).MatchString(ls) {
		t.Errorf("batch ls:\n%s", ls)
	}

	// On a terminal: a no cancels the batch, and nothing is applied.
	r = ts.weftTTY(t, "n\n", "batch", "start", "pause", "--query", `workflow = "gated" AND status = "suspended"`)
	if r.code != exitFailed || !strings.Contains(r.stderr, "1 instance matches; pause it? [y/N] ") || !strings.Contains(r.stderr, "cancelled: not confirmed; nothing was applied") {
		t.Fatalf("batch start, answered no: exit %d\nstdout: %s\nstderr: %q", r.code, r.stdout, r.stderr)
	}
	var b struct{ Phase string }
	ts.okJSON(t, &b, "batch", "show", batchIDIn(t, r.stderr))
	if b.Phase != "cancelled" {
		t.Errorf("the batch answered no is %s", b.Phase)
	}
	// A yes applies it, with a bar on the terminal.
	r = ts.weftTTY(t, "y\n", "batch", "start", "pause", "--query", `workflow = "gated" AND status = "suspended"`, "--watch")
	if r.code != exitOK || !strings.Contains(r.stderr, "pause it? [y/N] ") || !regexp.MustCompile(`\rdone \[█{30}\] 100%  1/1  done 1  \d+\.\ds`).MatchString(r.stderr) ||
		!strings.Contains(r.stdout, "done: pause of 1 instance: done 1\n") {
		t.Fatalf("batch start, answered yes: exit %d\nstdout: %s\nstderr: %q", r.code, r.stdout, r.stderr)
	}
	ts.waitStatus(t, "g-3", "paused")
}

// TestCLIBatchIDs: a batch of listed ids (read from stdin) starts at
// once, with no question; a signal's event, key and payload are its
// arguments; --watch -o json prints the batch once it ends. The ids that
// wait for no such event are skipped, with why, which items --outcome
// lists. A document the host refuses is shown with the problems' paths.
func TestCLIBatchIDs(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "gated.yaml", gatedFlow))
	ts.ok(t, "run", "gated", "--id", "s-1", "--input", `{"k":"a"}`, "--until", "suspended")
	ts.ok(t, "run", "gated", "--id", "s-2", "--input", `{"k":"b"}`, "--until", "suspended")

	r := ts.weftIn(t, nil, "s-1\n# the other one\ns-2\n\nnope\n", "batch", "start", "signal", "--ids", "-", "--event", "gated.go", "--key", "a", "--payload", `{"ok":1}`, "--rate", "0", "--watch", "-o", "json")
	var b struct {
		ID, Phase string
		IDs       int
		Rate      float64
		Counts    map[string]int
		Args      struct {
			Event, Key string
			Payload    json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil || r.code != exitOK {
		t.Fatalf("batch start signal --ids -: exit %d, %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	if b.Phase != "done" || b.IDs != 3 || b.Rate != 0 || b.Counts["done"] != 1 || b.Counts["skipped"] != 2 || b.Args.Event != "gated.go" || b.Args.Key != "a" || compact(b.Args.Payload) != `{"ok":1}` {
		t.Errorf("the signal batch: %+v", b)
	}
	if in := ts.waitStatus(t, "s-1", "completed"); compact(in.Output) != `{"ok":1}` {
		t.Errorf("s-1 completed with %s", in.Output)
	}
	skipped := ts.ok(t, "batch", "items", b.ID, "--outcome", "skipped")
	if !regexp.MustCompile(`(?m)^2 +s-2 +skipped +\S+ \S+ +waits for no event gated.go with key a$`).MatchString(skipped) ||
		!regexp.MustCompile(`(?m)^3 +nope +skipped +\S+ \S+ +not found$`).MatchString(skipped) {
		t.Errorf("batch items --outcome skipped:\n%s", skipped)
	}

	r = ts.weft(t, nil, "batch", "start", "reset", "--ids", writeFile(t, t.TempDir(), "ids", "s-2\ns-2\n"), "--event", "x")
	if r.code != exitFailed || !strings.Contains(r.stderr, "the batch document has 3 problem(s)") || !strings.Contains(r.stderr, "  ids[1]: \"s-2\" is also ids[0]") ||
		!strings.Contains(r.stderr, "  args.event: not an argument of reset, which takes step") || !strings.Contains(r.stderr, "  args.step: is required") {
		t.Errorf("a refused document: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if r := ts.weft(t, nil, "batch", "start", "cancel"); r.code != exitUsage || !strings.Contains(r.stderr, "give --query Q") {
		t.Errorf("batch start without a selection: exit %d\n%s", r.code, r.stderr)
	}
	if r := ts.weft(t, nil, "batch", "show", "b-nope"); r.code != exitNotFound {
		t.Errorf("batch show of no batch: exit %d\n%s", r.code, r.stderr)
	}
}

// TestCLIInstanceResetMigrate: `weft instance reset-points` lists the
// steps, `weft instance reset` runs the instance again from one; `weft
// instance migrate --dry-run` prints the plan as a table and sends
// nothing; a refused migration prints its problems and exits 1; a
// migration with --retry completes the failed instance on the new
// version.
func TestCLIInstanceResetMigrate(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dir := t.TempDir()
	ts.ok(t, "workflow", "put", writeFile(t, dir, "twice.yaml", "name: twice\nsteps:\n  - id: one\n    set: { a: 1 }\n  - { id: x, activity: kit.echo, input: \"${ vars.a }\", output: xr }\noutput: \"${ vars.xr }\"\n"))
	ts.ok(t, "run", "twice", "--id", "tw-1", "--wait")
	points := ts.ok(t, "instance", "reset-points", "tw-1")
	if !regexp.MustCompile(`(?m)^STEP +INDEX +SEQ +BEGAN +VARS +WHY NOT\none +0 +\d+ +\S+ \S+ +yes +-\nx +1 +\d+ +\S+ \S+ +yes +-\n$`).MatchString(points) {
		t.Errorf("instance reset-points:\n%s", points)
	}
	if out := ts.ok(t, "instance", "reset", "tw-1", "--step", "x", "--reason", "again"); out != "instance tw-1: reset to step x requested (status completed); it applies when the instance next runs\n" {
		t.Errorf("instance reset printed %q", out)
	}
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(ts.ok(t, "instance", "history", "tw-1"), "instance_reset"); {
		if time.Now().After(deadline) {
			t.Fatal("no instance_reset after 30s")
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	if r := ts.weft(t, nil, "instance", "reset", "tw-1", "--step", "nope"); r.code != exitFailed || !strings.Contains(r.stderr, `has no top-level step "nope"`) {
		t.Errorf("reset to no such step: exit %d\n%s", r.code, r.stderr)
	}
	if r := ts.weft(t, nil, "instance", "reset", "tw-1"); r.code != exitUsage {
		t.Errorf("reset without --step: exit %d", r.code)
	}

	ts.ok(t, "workflow", "put", writeFile(t, dir, "roll.yaml", "name: roll\nsteps:\n  - id: a\n    wait: { event: go, key: \"${ input.k }\" }\n  - { id: b, activity: kit.fail, input: { message: bad }, retry: { max_attempts: 1 } }\n"))
	ts.ok(t, "run", "roll", "--id", "roll-f", "--input", `{"k":"f"}`, "--until", "suspended")
	ts.ok(t, "run", "roll", "--id", "roll-w", "--input", `{"k":"w"}`, "--until", "suspended")
	ts.ok(t, "event", "send", "go", "--key", "f")
	ts.waitStatus(t, "roll-f", "failed")
	ts.ok(t, "workflow", "put", writeFile(t, dir, "roll2.yaml", "name: roll\nsteps:\n  - { id: b, activity: kit.echo, input: { message: fixed }, output: b }\noutput: \"${ vars.b.message }\"\n"))

	plan := ts.ok(t, "instance", "migrate", "roll-f", "--dry-run")
	if !regexp.MustCompile(`^instance roll-f can move from version 1 to 2\nSTEP +KIND +FROM +TO\nb +activity +steps\[1\] +steps\[0\]\n(note: .*\n)*dry run: nothing was sent\n$`).MatchString(plan) {
		t.Errorf("migrate --dry-run:\n%s", plan)
	}
	r := ts.weft(t, nil, "instance", "migrate", "roll-w")
	if r.code != exitFailed || !strings.Contains(r.stdout, "instance roll-w cannot move from version 1 to 2\n") || !regexp.MustCompile(`(?m)^problem: step a, .+ \(steps\[0\]\)$`).MatchString(r.stdout) ||
		!strings.Contains(r.stderr, "weft: instance roll-w: not migrated: instance \"roll-w\" cannot move from version 1 to 2: step a, ") {
		t.Errorf("a refused migration: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	out := ts.ok(t, "instance", "migrate", "roll-f", "--retry", "--reason", "fixed")
	if !strings.Contains(out, "migration requested, then a retry; it applies when the instance is at rest") {
		t.Errorf("migrate --retry:\n%s", out)
	}
	if in := ts.waitStatus(t, "roll-f", "completed"); string(in.Output) != `"bad"` {
		t.Errorf("roll-f completed with %s; want b's input, given before the move", in.Output)
	}
	if r := ts.weft(t, nil, "instance", "migrate", "roll-w", "--retry", "--resume"); r.code != exitUsage {
		t.Errorf("--retry --resume: exit %d", r.code)
	}
}

// TestBatchProgressDrawing: the bar and the line say how many items have
// their outcome, of how many, and which outcomes; a selection says how
// many it found so far.
func TestBatchProgressDrawing(t *testing.T) {
	t.Parallel()
	b := func(phase apiv1.BatchPhase, matched int, counts map[apiv1.BatchOutcome]int) *apiv1.Batch {
		return &apiv1.Batch{ID: "b-1", Op: apiv1.BatchCancel, Phase: phase, Matched: matched, Counts: counts}
	}
	for _, tc := range []struct {
		b         *apiv1.Batch
		bar, line string
	}{
		{b(apiv1.PhaseSelecting, 120, map[apiv1.BatchOutcome]int{apiv1.ItemPending: 120}),
			"selecting  120 matched so far  1.5s", "batch b-1: selecting, 120 matched so far"},
		{b(apiv1.PhaseApplying, 4, map[apiv1.BatchOutcome]int{apiv1.ItemPending: 3, apiv1.ItemDone: 1}),
			"applying [███████·······················]  25%  1/4  done 1  1.5s", "batch b-1: applying 1/4 (pending 3, done 1)"},
		{b(apiv1.PhaseDone, 3, map[apiv1.BatchOutcome]int{apiv1.ItemDone: 1, apiv1.ItemSkipped: 1, apiv1.ItemFailed: 1}),
			"done [██████████████████████████████] 100%  3/3  done 1, skipped 1, failed 1  1.5s", "batch b-1: done 3/3 (done 1, skipped 1, failed 1)"},
		{b(apiv1.PhaseApplying, 2, map[apiv1.BatchOutcome]int{apiv1.ItemPending: 2}),
			"applying [······························]   0%  0/2  1.5s", "batch b-1: applying 0/2 (pending 2)"},
		{b(apiv1.PhaseDone, 0, map[apiv1.BatchOutcome]int{}),
			"done [██████████████████████████████] 100%  0/0  1.5s", "batch b-1: done 0/0 (none)"},
	} {
		if got := batchBar(tc.b, 1500*time.Millisecond); got != tc.bar {
			t.Errorf("batchBar(%s %v)\n got %q\nwant %q", tc.b.Phase, tc.b.Counts, got, tc.bar)
		}
		if got := progressLine(tc.b); got != tc.line {
			t.Errorf("progressLine(%s %v)\n got %q\nwant %q", tc.b.Phase, tc.b.Counts, got, tc.line)
		}
	}
	for answer, want := range map[string]bool{"y\n": true, "Yes\n": true, " y ": true, "n\n": false, "": false, "yes please\n": false} {
		if isYes(answer) != want {
			t.Errorf("isYes(%q) = %v", answer, !want)
		}
	}
}
