package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
)

// TestCLIOperatorOutput runs what the CLI tells an operator against one
// host: escaped control characters, logs by step, revoke's exit code,
// waits until a suspension, whole failures.
func TestCLIOperatorOutput(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	t.Run("escapes control characters", func(t *testing.T) { testEscapesControlCharacters(t, ts) })
	t.Run("logs by step", func(t *testing.T) { testInstanceLogsByStep(t, ts) })
	t.Run("revoke what is not granted", func(t *testing.T) { testRevokeNotGrantedIsNotFound(t, ts) })
	t.Run("wait until", func(t *testing.T) { testWaitUntil(t, ts) })
	t.Run("whole failures", func(t *testing.T) { testShowsWholeFailures(t, ts) })
}

// testEscapesControlCharacters: what a plugin logged or failed with
// reaches the operator's terminal with its control characters escaped
// (ESC, BEL, CR, C1: a terminal acts on them to set its title, write the
// clipboard or overwrite a line), in instance show, logs and history, and
// in the tables; -o json stays JSON that decodes to what the plugin wrote.
func testEscapesControlCharacters(t *testing.T, ts *testServer) {
	flow := writeFile(t, t.TempDir(), "noisy.yaml", `name: noisy
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["\e]0;pwned\a title", "\e[2K\rfake line", "tab\tand\u009b31m"] }
  - id: boom
    activity: kit.fail
    input: { code: boom, message: "\e]52;c;Y2xpcA==\a clip \u202eevil\r" }
`)
	ts.ok(t, "workflow", "put", flow)
	r := ts.weft(t, nil, "run", "noisy", "--wait", "--id", "noisy-1")
	if r.code != exitFailed {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	raw := func(what, out string) {
		t.Helper()
		for _, c := range out {
			if c != '\n' && c != ' ' && (unicode.IsControl(c) || unicode.Is(unicode.Bidi_Control, c)) {
				t.Errorf("%s prints the raw control %U:\n%q", what, c, out)
				return
			}
		}
	}
	show := ts.ok(t, "instance", "show", "noisy-1")
	raw("run --wait", r.stdout)
	raw("instance show", show)
	if want := `error:     boom: \x1b]52;c;Y2xpcA==\a clip \u202eevil\r`; !strings.Contains(show, want) {
		t.Errorf("instance show lacks the escaped message %q:\n%s", want, show)
	}
	logs := ts.ok(t, "instance", "logs", "noisy-1")
	raw("instance logs", strings.ReplaceAll(logs, "\t", " "))
	for _, want := range []string{`\x1b]0;pwned\a title`, `\x1b[2K\rfake line`, "tab\tand\\u009b31m"} {
		if !strings.Contains(logs, want) {
			t.Errorf("instance logs lacks %q:\n%s", want, logs)
		}
	}
	history := ts.ok(t, "instance", "history", "noisy-1")
	raw("instance history", history)
	if !strings.Contains(history, `\x1b]52;c;Y2xpcA==\a clip`) {
		t.Errorf("instance history lacks the escaped message:\n%s", history)
	}

	// JSON escapes them, C1 included, and says what the plugin said.
	r = ts.weft(t, nil, "instance", "show", "noisy-1", "-o", "json")
	raw("instance show -o json", r.stdout)
	var in struct {
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil || in.Error.Message != "\x1b]52;c;Y2xpcA==\a clip \u202eevil\r" {
		t.Errorf("instance show -o json: message %q (%v)", in.Error.Message, err)
	}
	r = ts.weft(t, nil, "instance", "logs", "noisy-1", "-o", "json")
	raw("instance logs -o json", r.stdout)
	var lines struct {
		Items []struct{ Message string }
	}
	if err := json.Unmarshal([]byte(r.stdout), &lines); err != nil || !slices.ContainsFunc(lines.Items, func(l struct{ Message string }) bool { return l.Message == "tab\tand\u009b31m (attempt 1)" }) {
		t.Errorf("instance logs -o json: %+v (%v)", lines.Items, err)
	}

	// A key is the client's: tables escape it too.
	ts.ok(t, "event", "send", "nobody.waits", "--key", "k\x1b]0;x\a")
	if out := ts.ok(t, "event", "ls"); !strings.Contains(out, `k\x1b]0;x\a`) {
		t.Errorf("event ls does not escape the key:\n%q", out)
	} else {
		raw("event ls", out)
	}
}

// TestCLIGroupHelp: every group's -h, --help and help print the group's
// commands on stdout and exit 0, weft help GROUP too; a group without a
// command, or with an unknown one, is a usage error that shows them. The
// usage names every command, and each of its flags.
func TestCLIGroupHelp(t *testing.T) {
	t.Parallel()
	ts := &testServer{url: "http://127.0.0.1:1"} // help asks no server
	verbs := map[string][]string{}
	for name := range (&app{}).commands() {
		if group, verb, ok := strings.Cut(name, " "); ok {
			verbs[group] = append(verbs[group], verb)
		}
	}
	for _, group := range []string{"plugin", "workflow", "instance", "event", "schedule", "flow", "batch", "admin"} {
		for _, args := range [][]string{{group, "-h"}, {group, "--help"}, {group, "help"}, {"help", group}} {
			r := ts.weft(t, nil, args...)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, "usage: weft "+group+" COMMAND") {
				t.Errorf("weft %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
				continue
			}
			for _, verb := range verbs[group] {
				if !regexp.MustCompile(`weft ` + group + ` (.*[| ])?` + verb + `\b`).MatchString(r.stdout) {
					t.Errorf("weft %s does not name %s %s:\n%s", strings.Join(args, " "), group, verb, r.stdout)
				}
			}
		}
		if r := ts.weft(t, nil, group); r.code != exitUsage || !strings.Contains(r.stderr, "missing a command") || !strings.Contains(r.stderr, "usage: weft "+group) {
			t.Errorf("weft %s: exit %d, stderr %s", group, r.code, r.stderr)
		}
		if r := ts.weft(t, nil, group, "frob"); r.code != exitUsage || !strings.Contains(r.stderr, `unknown command "`+group+` frob"`) {
			t.Errorf("weft %s frob: exit %d, stderr %s", group, r.code, r.stderr)
		}
	}

	// Every command's flags are in the usage of its group (or, for run,
	// of weft), but those every client command has and the paging ones.
	flagRE := regexp.MustCompile(`(?m)^  (-[a-z-]+)`)
	for name := range (&app{}).commands() {
		r := ts.weft(t, nil, append(strings.Fields(name), "-h")...)
		if r.code != exitOK {
			t.Errorf("weft %s -h: exit %d, %s", name, r.code, r.stderr)
			continue
		}
		group, _, _ := strings.Cut(name, " ")
		usage := ts.weft(t, nil, group, "-h").stdout
		if group == "run" {
			usage = ts.weft(t, nil, "-h").stdout
		}
		for _, m := range flagRE.FindAllStringSubmatch(r.stdout, -1) {
			flag := strings.TrimLeft(m[1], "-")
			switch flag {
			case "server", "token", "o", "output", "limit", "cursor":
				continue
			}
			if !regexp.MustCompile(`[ \[]--?` + flag + `\b`).MatchString(usage) {
				t.Errorf("the usage does not name %s's -%s", name, flag)
			}
		}
	}
}

// testInstanceLogsByStep: --step takes a step's id or path, every
// iteration of a step in a foreach and the steps of parallel branches
// included, and an unknown step is refused naming it.
func testInstanceLogsByStep(t *testing.T, ts *testServer) {
	flow := writeFile(t, t.TempDir(), "steps.yaml", `name: steps
steps:
  - id: first
    activity: kit.log
    input: { lines: ["first"] }
  - id: each
    foreach: "${ [1, 2] }"
    as: n
    do:
      - id: inner
        activity: kit.log
        input: { lines: ["inner ${ n }"] }
  - id: both
    parallel:
      - steps:
          - id: left
            activity: kit.log
            input: { lines: ["left"] }
      - steps:
          - id: right
            activity: kit.log
            input: { lines: ["right"] }
`)
	ts.ok(t, "workflow", "put", flow)
	if r := ts.weft(t, nil, "run", "steps", "--wait", "--id", "steps-1"); r.code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	messages := func(args ...string) []string {
		t.Helper()
		var doc struct {
			Items []struct{ Message string }
		}
		ts.okJSON(t, &doc, append([]string{"instance", "logs", "steps-1"}, args...)...)
		var out []string
		for _, l := range doc.Items {
			out = append(out, strings.TrimSuffix(l.Message, " (attempt 1)"))
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		step string
		want []string
	}{
		{"first", []string{"first"}},
		{"steps[0]", []string{"first"}},
		{"inner", []string{"inner 1", "inner 2"}},
		{"steps[1].do[0]", []string{"inner 1", "inner 2"}},
		{"steps[1].do#1[0]", []string{"inner 2"}},
		{"right", []string{"right"}},
		{"steps[2].parallel[0].steps[0]", []string{"left"}},
		{"steps[2].parallel[0][0]", []string{"left"}},
		{"each", nil},
	} {
		if got := messages("--step", tt.step); !slices.Equal(got, tt.want) {
			t.Errorf("--step %s: %q, want %q", tt.step, got, tt.want)
		}
	}
	if out := ts.ok(t, "instance", "logs", "steps-1", "--step", "inner"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "steps[1].do#0[0] #1  info   inner 1") {
		t.Errorf("--step inner printed:\n%s", out)
	}
	for _, step := range []string{"nope", "steps[9]"} {
		r := ts.weft(t, nil, "instance", "logs", "steps-1", "--step", step)
		if r.code == exitOK || r.stdout != "" || !strings.Contains(r.stderr, `no step "`+step+`"`) || !strings.Contains(r.stderr, "first, each, inner") {
			t.Errorf("--step %s: exit %d, stdout %q, stderr %s", step, r.code, r.stdout, r.stderr)
		}
	}
}

// testRevokeNotGrantedIsNotFound: revoking a host, a configuration
// value or a secret that is not granted exits 4, as the README's table
// says, and changes nothing.
func testRevokeNotGrantedIsNotFound(t *testing.T, ts *testServer) {
	ts.ok(t, "plugin", "grant", "kit", "--config", "region=eu", "--secret", "token=env:HOME", "--host", "api.example.com")
	for _, args := range [][]string{{"--config", "nope"}, {"--secret", "nope"}, {"--host", "nope.example.com"}, {"--config", "region", "--secret", "nope"}} {
		r := ts.weft(t, nil, append([]string{"plugin", "revoke", "kit"}, args...)...)
		if r.code != exitNotFound || !strings.Contains(r.stderr, "not granted") || !strings.Contains(r.stderr, "nope") {
			t.Errorf("revoke %s: exit %d (want %d), stderr %s", strings.Join(args, " "), r.code, exitNotFound, r.stderr)
		}
	}
	if out := ts.ok(t, "plugin", "show", "kit"); !strings.Contains(out, "region") {
		t.Errorf("a refused revoke changed the grants:\n%s", out)
	}
}

// testWaitUntil: weft run --until suspended answers when the instance
// suspends, exit 0; instance show --wait waits for an instance already
// started, until it ends or suspends, and exits as run --wait does.
func testWaitUntil(t *testing.T, ts *testServer) {
	dir := t.TempDir()
	ts.ok(t, "workflow", "put",
		writeFile(t, dir, "nap.yaml", "name: nap\nsteps:\n  - id: nap\n    delay: 1h\n"),
		writeFile(t, dir, "short.yaml", "name: short\nsteps:\n  - id: nap\n    delay: 300ms\n  - id: done\n    set: { ok: true }\noutput: \"${ vars.ok }\"\n"),
		writeFile(t, dir, "doomed.yaml", "name: doomed\nsteps:\n  - id: no\n    fail: { code: doomed, message: always }\n"))

	start := time.Now()
	r := ts.weft(t, nil, "run", "nap", "--id", "nap-1", "--wait=50s", "--until", "suspended")
	if r.code != exitOK || !strings.Contains(r.stdout, "status:    suspended") || !strings.Contains(r.stdout, "delay timer") {
		t.Fatalf("run --until suspended: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("run --until suspended took %s, the whole wait", d)
	}
	// --until alone waits.
	var in instanceJSON
	ts.okJSON(t, &in, "run", "nap", "--id", "nap-2", "--until", "suspended")
	if in.Status != "suspended" {
		t.Errorf("run --until suspended without --wait: %+v", in)
	}

	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"show waits for a suspension", []string{"instance", "show", "nap-1", "--wait", "--until", "suspended"}, exitOK, "status:    suspended"},
		{"show's wait for the end runs out", []string{"instance", "show", "nap-1", "--wait", "200ms"}, exitPending, "status:    suspended"},
		{"show --until finished", []string{"instance", "show", "nap-1", "--wait=200ms", "--until", "finished"}, exitPending, "status:    suspended"},
		{"a bad --until", []string{"run", "nap", "--until", "later"}, exitUsage, ""},
		{"show of no instance", []string{"instance", "show", "nope", "--wait"}, exitNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ts.weft(t, nil, tt.args...)
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.want) {
				t.Errorf("exit %d (want %d)\nstdout: %s(want %q)\nstderr: %s", r.code, tt.wantCode, r.stdout, tt.want, r.stderr)
			}
		})
	}

	// Started without a wait, waited for by show: through its delay to
	// its end.
	ts.ok(t, "run", "short", "--id", "short-1")
	if r := ts.weft(t, nil, "instance", "show", "short-1", "--wait"); r.code != exitOK || !strings.Contains(r.stdout, "status:    completed") {
		t.Errorf("show --wait of a delayed instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ts.weft(t, nil, "run", "doomed", "--id", "doomed-1")
	if r := ts.weft(t, nil, "instance", "show", "doomed-1", "--wait", "-o", "json"); r.code != exitFailed || !strings.Contains(r.stdout, `"status": "failed"`) {
		t.Errorf("show --wait of a failing instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// testShowsWholeFailures: the history table prints a failure's whole
// message, and instance show says at which step, activity and attempt a
// failed instance failed.
func testShowsWholeFailures(t *testing.T, ts *testServer) {
	long := strings.Repeat("the gateway refused the charge; ", 8) + "end of message"
	flow := writeFile(t, t.TempDir(), "charge.yaml", `name: charge
steps:
  - id: prepare
    set: { amount: 10 }
  - id: charge
    activity: kit.fail
    input: { code: declined, message: "`+long+`", retryable: true }
    retry: { max_attempts: 2, initial_interval: 10ms }
`)
	ts.ok(t, "workflow", "put", flow)
	if r := ts.weft(t, nil, "run", "charge", "--wait", "--id", "charge-1"); r.code != exitFailed {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	history := ts.ok(t, "instance", "history", "charge-1")
	for _, typ := range []string{"activity_failed", "instance_failed"} {
		if !regexp.MustCompile(`(?m)` + typ + `.*\n +message: ` + regexp.QuoteMeta(long) + `$`).MatchString(history) {
			t.Errorf("the history does not print %s's whole message:\n%s", typ, history)
		}
	}
	show := ts.ok(t, "instance", "show", "charge-1")
	if want := "failed at: steps[1] (step charge, activity kit.fail, attempt 2)"; !strings.Contains(show, want) || !strings.Contains(show, long) {
		t.Errorf("instance show lacks %q or the message:\n%s", want, show)
	}
}
