package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

// testServer is `weft serve` running in-process on 127.0.0.1:0, on a
// temporary data directory, seeded with the example plugins and workflows.
type testServer struct {
	url  string
	logs *logtest.Buffer
	// workflows is its workflows_dir.
	workflows string
}

// seedDir returns a directory holding the example plugins kit, text and
// thumbnail, as `make run` seeds them from bin/plugins.
func seedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"kit", "text", "thumbnail"} {
		if err := os.Symlink(testplugins.Path(t, name), filepath.Join(dir, name+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func startServer(t *testing.T, extra ...string) *testServer {
	t.Helper()
	ts := &testServer{logs: &logtest.Buffer{}, workflows: t.TempDir()}
	args := append([]string{
		"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--workflows-dir", ts.workflows,
		"--seed", seedDir(t), "--seed", filepath.Join(testplugins.Root(t), "examples", "workflows"),
		"--set", "plugins.cache_dir=" + testplugins.CacheDir(t),
		"--set", "engine.timer_interval=10ms",
		"--node-id", "test",
	}, extra...)
	cfg, err := config.Load(parseHostFlags(t, args...).sources(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := openServer(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	s.start()
	ts.url = "http://" + s.addr()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.shutdown(ctx); err != nil {
			// Where it hangs: the stacks of this process's goroutines
			// (the host runs in it).
			var stacks strings.Builder
			if perr := pprof.Lookup("goroutine").WriteTo(&stacks, 2); perr != nil {
				stacks.WriteString(perr.Error())
			}
			t.Errorf("shutdown: %v\ngoroutines:\n%s", err, &stacks)
		}
		if t.Failed() {
			t.Logf("host log:\n%s", ts.logs)
		}
	})
	return ts
}

// result is one CLI invocation's outcome.
type result struct {
	code           int
	stdout, stderr string
}

// weft runs the CLI in-process against the server, with env as its
// environment (WEFT_SERVER is set to the server).
func (ts *testServer) weft(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return ts.weftIn(t, env, "", args...)
}

func (ts *testServer) weftIn(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{
		stdin: strings.NewReader(stdin), stdout: &stdout, stderr: &stderr,
		env: append([]string{"WEFT_SERVER=" + ts.url}, env...), now: time.Now,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := a.run(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// ok runs the CLI and fails the test unless it exits 0.
func (ts *testServer) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := ts.weft(t, nil, args...)
	if r.code != exitOK {
		t.Fatalf("weft %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs the CLI with -o json and decodes its output into v.
func (ts *testServer) okJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := ts.ok(t, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("weft %s -o json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

type instanceJSON struct {
	ID        string          `json:"id"`
	Workflow  string          `json:"workflow"`
	Status    string          `json:"status"`
	Output    json.RawMessage `json:"output"`
	Error     *struct{ Code string }
	WaitingOn *struct {
		Bookmarks []struct{ Event, Key string }
	} `json:"waiting_on"`
}

// waitStatus polls `weft instance show` until the instance has status.
func (ts *testServer) waitStatus(t *testing.T, id, status string) instanceJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var in instanceJSON
		ts.okJSON(t, &in, "instance", "show", id)
		if in.Status == status {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s after 30s, want %s", id, in.Status, status)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

func examplePath(t *testing.T, parts ...string) string {
	return filepath.Join(append([]string{testplugins.Root(t), "examples", "workflows"}, parts...)...)
}

// TestCLIRunsEveryExample runs each seeded example workflow with its
// sample input through `weft run --wait` and checks that it completes.
func TestCLIRunsEveryExample(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	for _, want := range []string{"first start: seeding the store; each plugin is compiled once", `msg="seed: plugin loaded" plugin=kit`, "first start: seeded the store"} {
		if !strings.Contains(ts.logs.String(), want) {
			t.Fatalf("no %q in the log:\n%s", want, ts.logs)
		}
	}
	tests := []struct {
		workflow   string
		wantOutput string
	}{
		{"hello", `"greeting":"Hello, ADA! Your post is at /posts/notes-on-the-analytical-engine."`},
		{"word-report", `"verdict":"long"`},
		{"retries", `"succeeded_on_attempt":3`},
		{"onboarding", `"greeting":"Hello, GRACE! Your post is at /posts/compilers-and-why."`},
		{"thumbnail", `"thumbnail":{"format":"png","height":21,`},
	}
	for _, tt := range tests {
		t.Run(tt.workflow, func(t *testing.T) {
			t.Parallel()
			var in instanceJSON
			ts.okJSON(t, &in, "run", tt.workflow, "--input", "@"+examplePath(t, "inputs", tt.workflow+".json"), "--wait")
			if in.Status != "completed" {
				t.Fatalf("status %s, error %+v", in.Status, in.Error)
			}
			var out bytes.Buffer
			if err := json.Compact(&out, in.Output); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), tt.wantOutput) {
				t.Errorf("output %s does not contain %s", &out, tt.wantOutput)
			}
		})
	}
}

func TestCLIAgainstHost(t *testing.T) {
	t.Parallel()
	// A short stimulus TTL, so that an event nothing waits for becomes a
	// dead letter within the test.
	ts := startServer(t, "--set", "engine.stimulus_ttl=1s")
	dir := t.TempDir()
	junk := writeFile(t, dir, "junk.wasm", "not wasm")
	good := writeFile(t, dir, "greet.yaml", "name: greet\nsteps:\n  - id: up\n    activity: kit.upper\n    input: { text: \"${ input.name }\" }\n    output: up\noutput: \"${ vars.up.text }\"\n")
	bad := writeFile(t, dir, "bad.yaml", "name: bad\nsteps:\n  - id: a\n    activity: kit.upper\n  - id: a\n    delay: 1x\n")
	unknown := writeFile(t, dir, "unknown.yaml", "name: unknown\nsteps:\n  - id: a\n    activity: kit.nope\n")
	misspelt := writeFile(t, dir, "misspelt.yaml", "name: misspelt\nsteps:\n  - id: a\n    activity: kit.ecoh\n")
	failing := writeFile(t, dir, "doomed.yaml", "name: doomed\nsteps:\n  - id: no\n    fail: { code: doomed, message: \"always\" }\n")
	slow := writeFile(t, dir, "slow.yaml", "name: slow\nsteps:\n  - id: nap\n    delay: 1h\n")
	kit := testplugins.Path(t, "kit")

	t.Run("plugins", func(t *testing.T) {
		out := ts.ok(t, "plugin", "ls")
		for _, want := range []string{"NAME", "kit", "text", "thumbnail", "upper"} {
			if !strings.Contains(out, want) {
				t.Errorf("plugin ls lacks %q:\n%s", want, out)
			}
		}
		if out := ts.ok(t, "plugin", "push", kit, "--name", "kit2"); !strings.Contains(out, "plugin kit2: new version") {
			t.Errorf("first push: %s", out)
		}
		if out := ts.ok(t, "plugin", "push", kit, "--name", "kit2"); !strings.Contains(out, "unchanged") {
			t.Errorf("second push: %s", out)
		}
		var detail struct {
			Name     string
			Versions []struct{ Version string }
		}
		ts.okJSON(t, &detail, "plugin", "show", "kit2")
		if detail.Name != "kit2" || len(detail.Versions) != 1 {
			t.Errorf("plugin show kit2: %+v", detail)
		}
		// A plugin a saved workflow calls is deleted only with --force.
		used := writeFile(t, t.TempDir(), "uses-kit2.yaml", "name: uses-kit2\nsteps:\n  - id: a\n    activity: kit2.echo\n")
		ts.ok(t, "workflow", "put", used)
		if r := ts.weft(t, nil, "plugin", "rm", "kit2"); r.code != exitFailed || !strings.Contains(r.stderr, "uses-kit2") {
			t.Errorf("rm of a plugin a workflow calls: exit %d, %s", r.code, r.stderr)
		}
		ts.ok(t, "plugin", "rm", "kit2", "--force")
		ts.ok(t, "workflow", "rm", "uses-kit2")
		if r := ts.weft(t, nil, "plugin", "show", "kit2"); r.code != exitNotFound || !strings.Contains(r.stderr, `no plugin "kit2"`) {
			t.Errorf("show after rm: exit %d, %s", r.code, r.stderr)
		}
		if r := ts.weft(t, nil, "plugin", "push", junk); r.code != exitFailed || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, "module:") {
			t.Errorf("push junk: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("workflows", func(t *testing.T) {
		if out := ts.ok(t, "workflow", "put", good); !strings.Contains(out, "workflow greet: saved as version 1") {
			t.Errorf("put: %s", out)
		}
		if out := ts.ok(t, "workflow", "put", good); !strings.Contains(out, "unchanged, version 1") {
			t.Errorf("put again: %s", out)
		}
		r := ts.weft(t, nil, "workflow", "put", bad)
		if r.code != exitFailed {
			t.Errorf("put bad: exit %d", r.code)
		}
		for _, want := range []string{"bad.yaml", "2 problem(s)", "steps[1].id: duplicate step id \"a\", first used at steps[0] (line 5, column 9)", "steps[1].delay: invalid duration"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("put bad: stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		r = ts.weft(t, nil, "workflow", "put", unknown)
		if want := `steps[0].activity: plugin "kit" has no activity "nope" (line 4, column 15)`; r.code != exitFailed || !strings.Contains(r.stderr, want) {
			t.Errorf("put unknown: exit %d, stderr lacks %q:\n%s", r.code, want, r.stderr)
		}
		r = ts.weft(t, nil, "workflow", "put", misspelt)
		if want := `plugin "kit" has no activity "ecoh"; did you mean echo?`; r.code != exitFailed || !strings.Contains(r.stderr, want) {
			t.Errorf("put misspelt: exit %d, stderr lacks %q:\n%s", r.code, want, r.stderr)
		}
		if out := ts.ok(t, "workflow", "show", "greet"); !strings.Contains(out, "# workflow greet, version 1") || !strings.Contains(out, "activity: kit.upper") {
			t.Errorf("show: %s", out)
		}
		var page struct {
			Items []struct{ Name string }
		}
		ts.okJSON(t, &page, "workflow", "ls")
		if len(page.Items) < 7 {
			t.Errorf("workflow ls: %d workflows, want the 6 examples and greet", len(page.Items))
		}
	})

	t.Run("run", func(t *testing.T) {
		ts.ok(t, "workflow", "put", good, failing, slow)
		out := ts.ok(t, "run", "greet", "--input", `{"name":"ada"}`, "--wait")
		for _, want := range []string{"status:    completed", `output:    "ADA"`} {
			if !strings.Contains(out, want) {
				t.Errorf("run --wait lacks %q:\n%s", want, out)
			}
		}
		// Without --wait: answers once stored.
		var in instanceJSON
		ts.okJSON(t, &in, "run", "greet", "--input", `{"name":"bob"}`, "--id", "greet-bob")
		ts.waitStatus(t, "greet-bob", "completed")
		// The same id again is the same instance.
		ts.okJSON(t, &in, "run", "greet", "--input", `{"name":"bob"}`, "--id", "greet-bob")
		if in.ID != "greet-bob" || in.Status != "completed" {
			t.Errorf("idempotent start: %+v", in)
		}
		// Input from stdin.
		r := ts.weftIn(t, nil, `{"name":"eve"}`, "run", "greet", "--input", "@-", "--wait", "-o", "json")
		if r.code != exitOK || !strings.Contains(r.stdout, `"EVE"`) {
			t.Errorf("input from stdin: exit %d, %s %s", r.code, r.stdout, r.stderr)
		}

		// On a terminal, --wait draws a spinner with the elapsed time on
		// stderr, and clears it.
		var stdout, stderr bytes.Buffer
		tty := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, env: []string{"WEFT_SERVER=" + ts.url}, terminal: true, now: time.Now}
		if code := tty.run(context.Background(), []string{"run", "slow", "--wait=400ms"}); code != exitPending {
			t.Errorf("run --wait on a terminal: exit %d, %s", code, &stderr)
		}
		if !strings.Contains(stderr.String(), "\r⠋ slow 0.") || !strings.Contains(stderr.String(), "\r\033[K") {
			t.Errorf("no spinner on the terminal: %q", &stderr)
		}
		// The short waits that must find an instance suspended wait on
		// one that is: a fresh one may still be on its way to its delay
		// when a short wait ends on a loaded machine.
		ts.ok(t, "run", "slow", "--id", "slow-asleep")
		ts.waitStatus(t, "slow-asleep", "suspended")

		tests := []struct {
			name       string
			args       []string
			wantCode   int
			wantStdout string
			wantStderr string
		}{
			{name: "no spinner without a terminal", args: []string{"run", "slow", "--wait=200ms"}, wantCode: exitPending, wantStderr: "weft: the wait ended"},
			{name: "failed run", args: []string{"run", "doomed", "--wait"}, wantCode: exitFailed, wantStdout: "error:     doomed: always"},
			{name: "wait ends first", args: []string{"run", "slow", "--id", "slow-asleep", "--wait=300ms"}, wantCode: exitPending, wantStdout: "timer", wantStderr: "the wait ended with the instance suspended"},
			{name: "wait duration as its own argument", args: []string{"run", "slow", "--id", "slow-asleep", "--wait", "200ms", "-o", "json"}, wantCode: exitPending, wantStdout: `"status": "suspended"`},
			{name: "unknown workflow", args: []string{"run", "nope"}, wantCode: exitNotFound, wantStderr: `no workflow "nope"`},
			{name: "bad input", args: []string{"run", "greet", "--input", "{bad"}, wantCode: exitUsage, wantStderr: "--input: the value is not valid JSON"},
			{name: "missing input file", args: []string{"run", "greet", "--input", "@/nonexistent.json"}, wantCode: exitUsage, wantStderr: "no such file"},
			{name: "no workflow", args: []string{"run"}, wantCode: exitUsage, wantStderr: "missing WORKFLOW"},
			{name: "bad id", args: []string{"run", "greet", "--id", strings.Repeat("x", 300)}, wantCode: exitFailed, wantStderr: "id"},
			{name: "bad output flag", args: []string{"run", "greet", "-o", "xml"}, wantCode: exitUsage, wantStderr: "-o must be table or json"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := ts.weft(t, nil, tt.args...)
				if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantStdout) || !strings.Contains(r.stderr, tt.wantStderr) {
					t.Errorf("exit %d (want %d)\nstdout: %s(want %q)\nstderr: %s(want %q)", r.code, tt.wantCode, r.stdout, tt.wantStdout, r.stderr, tt.wantStderr)
				}
				if strings.ContainsRune(r.stderr, '⠋') {
					t.Errorf("a spinner on stderr, which is not a terminal: %q", r.stderr)
				}
			})
		}
	})

	t.Run("instances", func(t *testing.T) {
		ts.ok(t, "workflow", "put", good, slow)
		ts.ok(t, "run", "greet", "--input", `{"name":"ida"}`, "--id", "greet-ida", "--wait")
		if out := ts.ok(t, "instance", "ls", "--workflow", "greet"); !strings.Contains(out, "greet-ida") || !strings.Contains(out, "completed") {
			t.Errorf("instance ls: %s", out)
		}
		var page struct {
			Items []instanceJSON `json:"items"`
		}
		ts.okJSON(t, &page, "instance", "ls", "--status", "completed", "--workflow", "greet")
		if len(page.Items) == 0 {
			t.Errorf("instance ls --status completed: none")
		}
		for _, in := range page.Items {
			if in.Status != "completed" || in.Workflow != "greet" {
				t.Errorf("instance ls filtered: %+v", in)
			}
		}
		out := ts.ok(t, "instance", "history", "greet-ida")
		for _, want := range []string{"SEQ", "instance_created", "activity_completed", "instance_completed"} {
			if !strings.Contains(out, want) {
				t.Errorf("history lacks %q:\n%s", want, out)
			}
		}
		// The API's document: a page, here with every item.
		var history struct {
			Items []struct {
				Seq  uint64
				Type string
			}
			NextCursor *string `json:"next_cursor"`
		}
		ts.okJSON(t, &history, "instance", "history", "greet-ida")
		if events := history.Items; len(events) == 0 || events[len(events)-1].Type != "instance_completed" || history.NextCursor == nil || *history.NextCursor != "" {
			t.Errorf("history -o json: %+v", history)
		}

		// Export, delete, import: the instance is back as it was.
		state := filepath.Join(t.TempDir(), "state.json")
		ts.ok(t, "instance", "export", "greet-ida", "--file", state)
		ts.ok(t, "instance", "rm", "greet-ida")
		if r := ts.weft(t, nil, "instance", "show", "greet-ida"); r.code != exitNotFound {
			t.Errorf("show after rm: exit %d", r.code)
		}
		if out := ts.ok(t, "instance", "import", state); !strings.Contains(out, "instance greet-ida created (status completed)") {
			t.Errorf("import: %s", out)
		}
		in := ts.waitStatus(t, "greet-ida", "completed")
		if string(in.Output) != `"IDA"` {
			t.Errorf("imported output %s", in.Output)
		}

		// Cancel a suspended instance; a second cancel is refused.
		ts.ok(t, "run", "slow", "--id", "slow-1")
		ts.waitStatus(t, "slow-1", "suspended")
		// A list says what a suspended instance waits on.
		if out := ts.ok(t, "instance", "ls", "--workflow", "slow"); !strings.Contains(out, "WAITING ON") || !regexp.MustCompile(`slow-1 .* suspended .* delay \d`).MatchString(out) {
			t.Errorf("instance ls does not show the delay slow-1 waits on:\n%s", out)
		}
		var suspended struct {
			Items []struct {
				ID        string
				WaitingOn *struct {
					Timers []struct{ Kind string }
				} `json:"waiting_on"`
			}
		}
		ts.okJSON(t, &suspended, "instance", "ls", "--workflow", "slow", "--status", "suspended")
		found := false
		for _, it := range suspended.Items {
			if it.WaitingOn == nil || len(it.WaitingOn.Timers) != 1 || it.WaitingOn.Timers[0].Kind != "delay" {
				t.Errorf("instance ls -o json: %s waits on %+v, want a delay timer", it.ID, it.WaitingOn)
			}
			found = found || it.ID == "slow-1"
		}
		if !found {
			t.Errorf("instance ls -o json: %+v, want slow-1", suspended)
		}
		ts.ok(t, "instance", "cancel", "slow-1", "--reason", "test")
		ts.waitStatus(t, "slow-1", "cancelled")
		if r := ts.weft(t, nil, "instance", "cancel", "slow-1"); r.code != exitFailed || !strings.Contains(r.stderr, "cancelled already") {
			t.Errorf("second cancel: exit %d, %s", r.code, r.stderr)
		}
		if r := ts.weft(t, nil, "instance", "retry", "slow-1"); r.code != exitFailed || !strings.Contains(r.stderr, "only a failed instance") {
			t.Errorf("retry of a cancelled instance: exit %d, %s", r.code, r.stderr)
		}

		// Several at once; one unknown fails the command, the others are
		// cancelled all the same.
		ts.ok(t, "run", "slow", "--id", "slow-2")
		ts.ok(t, "run", "slow", "--id", "slow-3")
		ts.waitStatus(t, "slow-3", "suspended")
		r := ts.weft(t, nil, "instance", "cancel", "slow-2", "slow-1", "slow-3", "nope", "--reason", "batch")
		want := "instance slow-2: cancelled\ninstance slow-1: finished\ninstance slow-3: cancelled\ninstance nope: not found: no instance \"nope\"\n"
		if r.code != exitFailed || r.stdout != want {
			t.Errorf("cancel of four: exit %d, stdout %q, want %d and %q", r.code, r.stdout, exitFailed, want)
		}
		ts.waitStatus(t, "slow-3", "cancelled")
		if out := ts.ok(t, "instance", "count", "--workflow", "slow"); !regexp.MustCompile(`(?m)^cancelled +[3-9]$`).MatchString(out) || !regexp.MustCompile(`(?m)^total +\d+$`).MatchString(out) {
			t.Errorf("instance count, want 3 cancelled at least and a total:\n%s", out)
		}
		// Newest first, unless --oldest; --after bounds the list.
		if out := ts.ok(t, "instance", "ls", "--workflow", "slow"); strings.Index(out, "slow-3") > strings.Index(out, "slow-1") {
			t.Errorf("instance ls lists slow-1 before slow-3, want the newest first:\n%s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--workflow", "slow", "--oldest"); strings.Index(out, "slow-1") > strings.Index(out, "slow-3") {
			t.Errorf("instance ls --oldest lists slow-3 before slow-1:\n%s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--workflow", "slow", "--after", "2262-01-01T00:00:00Z"); strings.Contains(out, "slow-") {
			t.Errorf("instance ls --after the future lists:\n%s", out)
		}
		if r := ts.weft(t, nil, "instance", "ls", "--after", "yesterday"); r.code != exitUsage || !strings.Contains(r.stderr, "--after") {
			t.Errorf("instance ls --after yesterday: exit %d, %s", r.code, r.stderr)
		}
		if r := ts.weft(t, nil, "instance", "history", "nope"); r.code != exitNotFound {
			t.Errorf("history of no instance: exit %d", r.code)
		}
	})

	t.Run("events", func(t *testing.T) {
		// approval starts on document.submitted and waits for
		// document.approved with the document's id.
		var sent struct {
			Started []string `json:"started"`
			Resumed []string `json:"resumed"`
			Queued  bool     `json:"queued"`
		}
		payload := `{"id":"doc-7","title":"Field notes"}`
		ts.okJSON(t, &sent, "event", "send", "document.submitted", "--payload", payload, "--id", "submit-7")
		if len(sent.Started) != 1 {
			t.Fatalf("document.submitted started %v", sent.Started)
		}
		id := sent.Started[0]
		in := ts.waitStatus(t, id, "suspended")
		if in.WaitingOn == nil || len(in.WaitingOn.Bookmarks) != 1 || in.WaitingOn.Bookmarks[0].Key != "doc-7" {
			t.Errorf("waiting on %+v, want document.approved doc-7", in.WaitingOn)
		}
		if out := ts.ok(t, "instance", "show", id); !strings.Contains(out, `event document.approved with key "doc-7"`) {
			t.Errorf("instance show: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--workflow", "approval"); !strings.Contains(out, "event document.approved/doc-7") {
			t.Errorf("instance ls: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--event", "document.approved", "--key", "doc-7"); !strings.Contains(out, id) {
			t.Errorf("instance ls --event --key: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--key", "doc-7"); !strings.Contains(out, id) {
			t.Errorf("instance ls --key: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--plugin", "text"); !strings.Contains(out, id) {
			t.Errorf("instance ls --plugin text: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--plugin", "thumbnail"); strings.Contains(out, id) {
			t.Errorf("instance ls --plugin thumbnail lists the approval that pins text only: %s", out)
		}
		if out := ts.ok(t, "instance", "ls", "--plugin", "text", "--plugin-version", "0000"); strings.Contains(out, id) {
			t.Errorf("instance ls --plugin text --plugin-version 0000: %s", out)
		}
		out := ts.ok(t, "event", "send", "document.approved", "--key", "doc-7", "--payload", `{"approved":true,"by":"grace"}`)
		if !strings.Contains(out, "resumed: "+id) {
			t.Errorf("event send: %s", out)
		}
		in = ts.waitStatus(t, id, "completed")
		if !strings.Contains(string(in.Output), "Field notes is published at /docs/field-notes, approved by grace.") {
			t.Errorf("output %s", in.Output)
		}
		// The same event id again does nothing new.
		ts.okJSON(t, &sent, "event", "send", "document.submitted", "--payload", payload, "--id", "submit-7")
		if len(sent.Started) != 1 || sent.Started[0] != id {
			t.Errorf("resent event started %v", sent.Started)
		}
		// Nothing waits for this one: it is queued, then dies at its TTL.
		if out := ts.ok(t, "event", "send", "document.approved", "--key", "doc-none"); !strings.Contains(out, "queued") {
			t.Errorf("unmatched event: %s", out)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			var dead struct {
				Items []struct{ Name, Key string }
			}
			ts.okJSON(t, &dead, "event", "dead")
			if len(dead.Items) > 0 {
				if d := dead.Items[0]; d.Name != "document.approved" || d.Key != "doc-none" {
					t.Errorf("dead letters %+v, want document.approved doc-none", dead.Items)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no dead letter a minute after the event's TTL of 1s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		if out := ts.ok(t, "event", "dead"); !strings.Contains(out, "document.approved") || !strings.Contains(out, "doc-none") {
			t.Errorf("event dead: %s", out)
		}
		// A name no workflow knows: a warning, on stderr.
		if r := ts.weft(t, nil, "event", "send", "document.aproved", "--key", "doc-1"); r.code != exitOK || !strings.Contains(r.stderr, "warning") {
			t.Errorf("misspelt event: exit %d, stderr %s", r.code, r.stderr)
		}
		if r := ts.weft(t, nil, "event", "send", "x", "--payload", "{"); r.code != exitUsage {
			t.Errorf("bad payload: exit %d", r.code)
		}
	})

	t.Run("priority", func(t *testing.T) { testPriority(t, ts) })

	t.Run("admin refresh", func(t *testing.T) {
		writeFile(t, ts.workflows, "fresh.yaml", "name: fresh\nsteps:\n  - id: s\n    set: { x: 1 }\n")
		out := ts.ok(t, "admin", "refresh")
		if !strings.Contains(out, "fresh") || !strings.Contains(out, "new version") {
			t.Errorf("refresh: %s", out)
		}
		writeFile(t, ts.workflows, "broken.yaml", "name: broken\nsteps: 3\n")
		r := ts.weft(t, nil, "admin", "refresh", "-o", "json")
		if r.code != exitFailed || !json.Valid([]byte(r.stdout)) {
			t.Errorf("refresh with a broken file: exit %d, %s", r.code, r.stdout)
		}
	})

	t.Run("admin backup", func(t *testing.T) { testAdminBackup(t, ts) })

	t.Run("admin status", func(t *testing.T) {
		if out := ts.ok(t, "admin", "status"); !strings.Contains(out, "alive and ready") {
			t.Errorf("status: %s", out)
		}
		var st struct {
			Alive, Ready bool
		}
		ts.okJSON(t, &st, "admin", "status", "-o", "json")
		if !st.Alive || !st.Ready {
			t.Errorf("status -o json: %+v", st)
		}
	})

	t.Run("transport and usage", func(t *testing.T) {
		tests := []struct {
			name       string
			env        []string
			args       []string
			wantCode   int
			wantStderr string
		}{
			{name: "unreachable", args: []string{"plugin", "ls", "--server", "http://127.0.0.1:1"}, wantCode: exitInternal, wantStderr: "cannot reach the host"},
			{name: "unreachable from env", env: []string{"WEFT_SERVER=http://127.0.0.1:1"}, args: []string{"workflow", "ls"}, wantCode: exitInternal, wantStderr: "http://127.0.0.1:1"},
			{name: "global flags first", args: []string{"--server", "http://127.0.0.1:1", "plugin", "ls"}, wantCode: exitInternal, wantStderr: "cannot reach"},
			{name: "bad server URL", args: []string{"plugin", "ls", "--server", "ftp://x"}, wantCode: exitUsage, wantStderr: "--server"},
			{name: "unknown flag", args: []string{"plugin", "ls", "--frob"}, wantCode: exitUsage, wantStderr: "frob"},
			{name: "extra argument", args: []string{"plugin", "show", "a", "b"}, wantCode: exitUsage, wantStderr: `unexpected argument "b"`},
			{name: "help", args: []string{"run", "--help"}, wantCode: exitOK},
			{name: "help of a local command", args: []string{"plugin", "call", "--help"}, wantCode: exitOK},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := ts.weft(t, tt.env, tt.args...)
				if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantStderr) {
					t.Errorf("exit %d (want %d), stderr %s(want %q)", r.code, tt.wantCode, r.stderr, tt.wantStderr)
				}
				// Help is asked for: it goes to stdout.
				if tt.wantCode == exitOK && !strings.Contains(r.stdout, "usage: weft "+tt.args[0]) {
					t.Errorf("stdout %q, want the command's usage", r.stdout)
				}
			})
		}
	})
}

func TestCLIAuth(t *testing.T) {
	t.Parallel()
	admin, reader := "admin-secret-0123456789", "reader-secret-0123456789"
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "auth:\n  tokens:\n    - {name: ci, role: admin, token: "+admin+"}\n    - {name: ro, role: reader, token: "+reader+"}\n")
	ts := startServer(t, "--config", filepath.Join(dir, "weft.yaml"))
	good := writeFile(t, t.TempDir(), "tiny.yaml", "name: tiny\nsteps:\n  - id: s\n    set: { x: 1 }\n")
	backups := t.TempDir()
	tests := []struct {
		name       string
		env        []string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "no token", args: []string{"plugin", "ls"}, wantCode: exitAuth, wantStderr: "--token"},
		{name: "wrong token", args: []string{"plugin", "ls", "--token", "nope-nope-nope-nope"}, wantCode: exitAuth},
		{name: "reader reads", args: []string{"plugin", "ls", "--token", reader}, wantCode: exitOK},
		{name: "reader from env", env: []string{"WEFT_TOKEN=" + reader}, args: []string{"workflow", "ls"}, wantCode: exitOK},
		{name: "reader may not write", args: []string{"workflow", "put", good, "--token", reader}, wantCode: exitAuth, wantStderr: "role may not"},
		{name: "admin writes", args: []string{"workflow", "put", good, "--token", admin}, wantCode: exitOK},
		{name: "reader may not grant", args: []string{"plugin", "grant", "kit", "--config", "a=b", "--token", reader}, wantCode: exitAuth, wantStderr: "role may not"},
		{name: "reader may not revoke", args: []string{"plugin", "revoke", "kit", "--all", "--token", reader}, wantCode: exitAuth, wantStderr: "role may not"},
		{name: "admin grants", args: []string{"plugin", "grant", "kit", "--config", "a=b", "--token", admin}, wantCode: exitOK},
		{name: "reader shows the grants", args: []string{"plugin", "show", "kit", "--token", reader}, wantCode: exitOK},
		{name: "reader may not back up", args: []string{"admin", "backup", filepath.Join(backups, "weft.db"), "--token", reader}, wantCode: exitAuth, wantStderr: "role may not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.weft(t, tt.env, tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stderr, tt.wantStderr) {
				t.Errorf("exit %d (want %d), stderr %s(want %q)", r.code, tt.wantCode, r.stderr, tt.wantStderr)
			}
		})
	}
	if entries, err := os.ReadDir(backups); err != nil || len(entries) != 0 {
		t.Errorf("the refused backup left %v (%v)", entries, err)
	}
}

func TestServeRefusesToListenBeyondLoopbackWithoutTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen string
		tokens bool
		want   error
	}{
		{listen: "0.0.0.0:0", want: ErrUnsafeListen},
		{listen: ":0", want: ErrUnsafeListen},
		{listen: "[::]:0", want: ErrUnsafeListen},
		{listen: "example.com:8080", want: ErrUnsafeListen},
		{listen: "127.0.0.1:0"},
		{listen: "127.0.0.2:0"},
		{listen: "[::1]:0"},
		{listen: "localhost:0"},
		{listen: "0.0.0.0:0", tokens: true},
	}
	for _, tt := range tests {
		t.Run(tt.listen, func(t *testing.T) {
			t.Parallel()
			args := []string{"--listen", tt.listen}
			if tt.tokens {
				args = append(args, "--set", "auth.tokens=ci:admin:0123456789abcdef0123")
			}
			cfg, err := config.Load(parseHostFlags(t, args...).sources(t.TempDir(), nil))
			if err != nil {
				t.Fatal(err)
			}
			err = checkListen(cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("checkListen: %v, want %v", err, tt.want)
			}
			// And on the address actually bound: "localhost" resolving to
			// another address must not pass.
			for _, a := range []struct {
				addr *net.TCPAddr
				ok   bool
			}{
				{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, true},
				{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, true},
				{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 2), Port: 8080}, tt.tokens},
			} {
				if err := checkListener(cfg, a.addr); (err == nil) != a.ok || err != nil && !errors.Is(err, ErrUnsafeListen) {
					t.Errorf("checkListener(%s): %v, want ok=%v", a.addr, err, a.ok)
				}
			}
			if err != nil && (!strings.Contains(err.Error(), "configure auth.tokens") || !strings.Contains(err.Error(), "from flag --listen")) {
				t.Errorf("the refusal does not say what to do: %v", err)
			}
		})
	}
	// And serve itself stops before opening anything.
	var stderr bytes.Buffer
	data := filepath.Join(t.TempDir(), "data")
	code := serveCmd([]string{"--listen", "0.0.0.0:0", "--data-dir", data}, nil, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "configure auth.tokens") {
		t.Errorf("serve: exit %d, %s", code, &stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("the refused serve created its data dir: %v", err)
	}
}

// TestSeedOnlyOnFirstStart restarts a host on the same data directory:
// the second start loads nothing.
func TestSeedOnlyOnFirstStart(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	seeds := []string{"--seed", seedDir(t), "--seed", examplePath(t)}
	for i, want := range []string{"first start: seeded the store", "seed skipped"} {
		cfg, err := config.Load(parseHostFlags(t, append([]string{"--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "debug",
			"--set", "plugins.cache_dir=" + testplugins.CacheDir(t)}, seeds...)...).sources(t.TempDir(), nil))
		if err != nil {
			t.Fatal(err)
		}
		logs := &logtest.Buffer{}
		s, err := openServer(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatal(err)
		}
		s.start()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.shutdown(ctx); err != nil {
			t.Error(err)
		}
		cancel()
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start %d: log lacks %q:\n%s", i+1, want, logs)
		}
		if i == 0 && !strings.Contains(logs.String(), "workflows=approval,hello,onboarding,retries,thumbnail,word-report") {
			t.Errorf("first start: not every example seeded:\n%s", logs)
		}
	}
}

// TestCLICluster runs two hosts in cluster mode on one real redis-server:
// the first seeds the shared store, the second skips seeding, and an
// instance started through either completes.
func TestCLICluster(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	a := startServer(t, "--store", "redis", "--redis-addr", redis.Addr(), "--node-id", "a")
	b := startServer(t, "--store", "redis", "--redis-addr", redis.Addr(), "--node-id", "b")
	if !strings.Contains(a.logs.String(), "first start: seeded the store") {
		t.Errorf("the first node did not seed:\n%s", a.logs)
	}
	if strings.Contains(b.logs.String(), "seeded the store") {
		t.Errorf("the second node seeded a store that was not empty:\n%s", b.logs)
	}
	for i, ts := range []*testServer{a, b} {
		var in instanceJSON
		ts.okJSON(t, &in, "run", "hello", "--input", "@"+examplePath(t, "inputs", "hello.json"), "--wait", "--id", fmt.Sprintf("hello-%d", i))
		if in.Status != "completed" {
			t.Errorf("through node %d: %+v", i, in)
		}
	}
	// Both nodes see every instance.
	for _, ts := range []*testServer{a, b} {
		out := ts.ok(t, "instance", "ls", "--workflow", "hello")
		if !strings.Contains(out, "hello-0") || !strings.Contains(out, "hello-1") {
			t.Errorf("instance ls: %s", out)
		}
	}
	// A backup is of the embedded: refused, saying what to do,
	// and leaving no file.
	dir := t.TempDir()
	if r := a.weft(t, nil, "admin", "backup", filepath.Join(dir, "weft.db")); r.code != exitFailed || !strings.Contains(r.stderr, "back up the Redis server instead") {
		t.Errorf("admin backup on redis: exit %d, stderr %s", r.code, r.stderr)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("the refused backup left %v (%v)", entries, err)
	}
}

// TestAdminStatusNotReady: a host that answers /healthz but not /readyz
// (a fake, to inject that one fault) makes weft admin status say why and
// exit non-zero; one that does not answer at all is a failure too.
func TestAdminStatusNotReady(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			fmt.Fprint(w, `{"status":"ok"}`)
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"type":"urn:weft:problem:not-ready","title":"Service Unavailable","status":503,"detail":"store: data/weft.db is broken"}`)
	}))
	defer srv.Close()
	ts := &testServer{url: srv.URL}
	r := ts.weft(t, nil, "admin", "status")
	if r.code != exitFailed || !strings.Contains(r.stdout, "not ready: store: data/weft.db is broken") {
		t.Errorf("not ready: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = ts.weft(t, nil, "admin", "status", "-o", "json")
	var st struct {
		Alive, Ready bool
		Reason       string
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != exitFailed || !st.Alive || st.Ready || st.Reason != "store: data/weft.db is broken" {
		t.Errorf("not ready, json: exit %d, %q (%v)", r.code, r.stdout, err)
	}
	srv.Close()
	if r := ts.weft(t, nil, "admin", "status"); r.code == exitOK || r.stderr == "" {
		t.Errorf("no host: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestCLIInstanceLogs: weft instance logs prints each attempt's log lines,
// oldest first, one a line: the time in the local zone with its offset,
// the step and attempt, the level and the message (with its source when
// not the log host function, further lines indented); --step and
// --attempt select; -o json is the API's document. The host's default
// history.attempt_data_limit records the attempts' input and output.
func TestCLIInstanceLogs(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	flow := writeFile(t, t.TempDir(), "chatty.yaml", `name: chatty
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["one", "warn:two\nand more"], stdout: "three\n", fail_attempts: 1 }
    retry: { max_attempts: 2, initial_interval: 10ms }
`)
	ts.ok(t, "workflow", "put", flow)
	var in instanceJSON
	ts.okJSON(t, &in, "run", "chatty", "--wait", "--id", "talker")
	if in.Status != "completed" {
		t.Fatalf("run: %+v", in)
	}

	var doc struct {
		Items []struct {
			Seq      uint64    `json:"seq"`
			Time     time.Time `json:"time"`
			StepPath string    `json:"step_path"`
			Attempt  int       `json:"attempt"`
			Node     string    `json:"node"`
			Level    string    `json:"level"`
			Source   string    `json:"source"`
			Message  string    `json:"message"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	ts.okJSON(t, &doc, "instance", "logs", "talker")
	if len(doc.Items) != 6 || doc.NextCursor == nil || *doc.NextCursor != "" || doc.Items[0].Node != "test" || doc.Items[0].Seq == 0 {
		t.Fatalf("instance logs -o json: %+v", doc)
	}

	out := ts.ok(t, "instance", "logs", "talker")
	stamp := `\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d\d:\d\d`
	var want []string
	for _, attempt := range []string{"1", "2"} {
		want = append(want,
			stamp+`  steps\[0\] #`+attempt+`  info   one \(attempt `+attempt+`\)`,
			stamp+`  steps\[0\] #`+attempt+`  warn   two`,
			`    and more \(attempt `+attempt+`\)`,
			stamp+`  steps\[0\] #`+attempt+`  info   \[stdout\] three`,
		)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("instance logs printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile("^" + w + "$").MatchString(lines[i]) {
			t.Errorf("line %d is %q, want it to match %q", i+1, lines[i], w)
		}
	}
	// The time printed is the line's, in this process's zone.
	if first := doc.Items[0].Time.Local().Format(logTimeLayout); !strings.HasPrefix(lines[0], first+"  ") {
		t.Errorf("first line %q, want it to start with its time %s", lines[0], first)
	}

	if out := ts.ok(t, "instance", "logs", "talker", "--step", "steps[0]", "--attempt", "2"); strings.Count(out, "#2 ") != 3 || strings.Contains(out, "#1 ") {
		t.Errorf("--step steps[0] --attempt 2 printed:\n%s", out)
	}
	if r := ts.weft(t, nil, "instance", "logs", "talker", "--step", "steps[9]"); r.code != exitFailed || r.stdout != "" || !strings.Contains(r.stderr, `no step "steps[9]"`) {
		t.Errorf("--step of a step the workflow does not have: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r := ts.weft(t, nil, "instance", "logs", "nope"); r.code != exitNotFound || !strings.Contains(r.stderr, `"nope"`) {
		t.Errorf("logs of an unknown instance: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := ts.weft(t, nil, "instance", "logs", "talker", "--attempt", "-1"); r.code != exitUsage {
		t.Errorf("--attempt -1: exit %d, stderr %s", r.code, r.stderr)
	}

	// The attempts' input and output are in the history, as the default
	// configuration keeps them.
	var hist struct {
		Items []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"items"`
	}
	ts.okJSON(t, &hist, "instance", "history", "talker")
	var scheduled, completed bool
	for _, e := range hist.Items {
		var data struct{ Input, Output json.RawMessage }
		_ = json.Unmarshal(e.Data, &data)
		var in, out bytes.Buffer
		_ = json.Compact(&in, data.Input)
		_ = json.Compact(&out, data.Output)
		switch e.Type {
		case "activity_scheduled":
			scheduled = in.String() == `{"fail_attempts":1,"lines":["one","warn:two\nand more"],"stdout":"three\n"}`
		case "activity_completed":
			completed = out.String() == `{"attempt":2}`
		}
	}
	if !scheduled || !completed {
		t.Errorf("history without the attempts' input or output:\n%s", ts.ok(t, "instance", "history", "talker", "-o", "json"))
	}
}
