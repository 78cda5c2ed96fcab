package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestCLIPluginShadow: weft plugin shadow of the recorded version over
// two recorded attempts prints a line for each, the same and alike, and
// the summary, and exits 0; -o json prints the API's report; a candidate
// that answers another document prints the difference as a patch and
// exits 1; --workflow and --since select (none: exit 0, saying nothing
// was compared); a bad --since or --last is a usage error, an unknown
// plugin exits 4. weft attempt replay takes the step's id for --step.
func TestCLIPluginShadow(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dir := t.TempDir()
	ts.ok(t, "workflow", "put", writeFile(t, dir, "shout.yaml",
		"name: shout\nrecord: all\nsteps:\n  - { id: up, activity: kit.upper, input: { text: \"${ input }\" } }\n"))
	for _, name := range []string{"ada", "grace"} {
		ts.ok(t, "run", "shout", "--id", "shout-"+name, "--input", `"`+name+`"`, "--wait")
	}
	kit := testplugins.Path(t, "kit")

	out := ts.ok(t, "plugin", "shadow", "kit", kit)
	for _, re := range []string{
		`(?m)^shadow run of plugin kit, candidate [0-9a-f]{12}: 2 attempts \(the newest 100\), \S+\n`,
		`(?m)^INSTANCE +STEP +ATTEMPT +ACTIVITY +OUTCOME +SPEED +FUEL +DETAIL\n`,
		// A Go guest's runtime may read a live clock on a tape that is not
		// fresh, which moves its fuel by a fraction of a percent.
		`(?m)^shout-grace +steps\[0\] +1 +upper +same +alike +(?:0\.99|1\.0\d)x +-\nshout-ada +steps\[0\] +1 +upper +same +alike +(?:0\.99|1\.0\d)x +-\n`,
		`(?m)^summary: 2 same; speed: 0 slower, 0 faster, 2 alike; fuel (?:0\.99|1\.0\d)x the baseline's\n`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("plugin shadow: no match for %s in\n%s", re, out)
		}
	}
	var rep apiv1.ShadowReport
	ts.okJSON(t, &rep, "plugin", "shadow", "kit", kit, "--last", "1", "--workflow", "shout", "--since", "1h")
	if rep.Plugin != "kit" || rep.Query.Limit != 1 || rep.Query.Workflow != "shout" || rep.Query.Since.IsZero() ||
		len(rep.Attempts) != 1 || rep.Attempts[0].Key.InstanceID != "shout-grace" || rep.Attempts[0].Outcome != "same" {
		t.Errorf("plugin shadow -o json: %+v", rep)
	}

	candidate := filepath.Join(dir, "nope.wasm")
	if err := os.WriteFile(candidate, testplugins.Constant(t, "upper", `{"text":"NOPE"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ts.weft(t, nil, "plugin", "shadow", "kit", candidate)
	if r.code != exitFailed || !regexp.MustCompile(`(?m)^shout-ada +steps\[0\] +1 +upper +different_output +faster +0\.\d\dx +replace /text "NOPE"$`).MatchString(r.stdout) ||
		!strings.Contains(r.stdout, "summary: 2 different_output; speed: 0 slower, 2 faster, 0 alike") {
		t.Errorf("plugin shadow of a candidate that differs: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = ts.weft(t, nil, "plugin", "shadow", "kit", candidate, "-o", "json")
	rep = apiv1.ShadowReport{}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != exitFailed || rep.Summary.Outcomes["different_output"] != 2 || len(rep.Attempts[0].Diff) == 0 {
		t.Errorf("plugin shadow -o json of a candidate that differs: exit %d, %v\n%s", r.code, err, r.stdout)
	}

	r = ts.weft(t, nil, "plugin", "shadow", "kit", kit, "--workflow", "other")
	if r.code != exitOK || !strings.Contains(r.stdout, ": 0 attempts (the newest 100, of workflow other)") || !strings.Contains(r.stderr, "nothing was compared") {
		t.Errorf("plugin shadow of no attempt: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"--since", "yesterday"}, {"--last", "1001"}} {
		if r := ts.weft(t, nil, append([]string{"plugin", "shadow", "kit", kit}, args...)...); r.code != exitUsage || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("plugin shadow %s: exit %d, %s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
	if r := ts.weft(t, nil, "plugin", "shadow", "kit"); r.code != exitUsage {
		t.Errorf("plugin shadow without a module: exit %d, %s", r.code, r.stderr)
	}
	if r := ts.weft(t, nil, "plugin", "shadow", "nobody", kit); r.code != exitNotFound {
		t.Errorf("plugin shadow of no plugin: exit %d, %s", r.code, r.stderr)
	}

	out = ts.ok(t, "attempt", "replay", "shout-ada", "--step", "up", "--attempt", "1")
	if !strings.Contains(out, "replay of steps[0] ") || !strings.Contains(out, ": same\n") {
		t.Errorf("attempt replay --step by id:\n%s", out)
	}
}
