package main

import (
	"regexp"
	"strings"
	"testing"
)

// testPriority: `weft run --priority` and `weft event send --priority`
// give the instances they start their priority, before the one the
// definition computes; `instance show` and `instance ls` show the
// priority and the fairness key, and -o json carries both; a priority
// out of 1–5 is a usage error, sent nowhere.
func testPriority(t *testing.T, ts *testServer) {
	flow := writeFile(t, t.TempDir(), "tiered.yaml", `name: tiered
triggers: [ { event: tiered.submitted } ]
priority: "${ input.plan == 'pro' ? 2 : 4 }"
fairness: { key: "${ input.tenant }", weight: 2 }
steps:
  - { id: s, set: { n: 1 } }
`)
	plain := writeFile(t, t.TempDir(), "plain.yaml", "name: plain\nsteps:\n  - { id: s, set: { n: 1 } }\n")
	ts.ok(t, "workflow", "put", flow, plain)

	out := ts.ok(t, "run", "tiered", "--input", `{"plan": "free", "tenant": "acme"}`, "--id", "tiered-1", "--priority", "1", "--wait")
	for _, want := range []string{"status:    completed", "priority:  1\n", `fairness:  key "acme", weight 2`} {
		if !strings.Contains(out, want) {
			t.Errorf("run --priority 1 lacks %q:\n%s", want, out)
		}
	}
	var in struct {
		ID             string `json:"id"`
		Priority       int    `json:"priority"`
		FairnessKey    string `json:"fairness_key"`
		FairnessWeight int    `json:"fairness_weight"`
	}
	ts.okJSON(t, &in, "run", "tiered", "--input", `{"plan": "pro", "tenant": "initech"}`, "--id", "tiered-2")
	if in.Priority != 2 || in.FairnessKey != "initech" || in.FairnessWeight != 2 {
		t.Errorf("run without --priority -o json: %+v, want the definition's priority 2 and key initech", in)
	}
	ts.waitStatus(t, "tiered-2", "completed")
	if out := ts.ok(t, "instance", "show", "tiered-2"); !strings.Contains(out, "priority:  2\n") || !strings.Contains(out, `fairness:  key "initech", weight 2`) {
		t.Errorf("instance show tiered-2:\n%s", out)
	}
	list := ts.ok(t, "instance", "ls", "--workflow", "tiered", "--oldest")
	if !strings.Contains(list, "PRIORITY") || !strings.Contains(list, "FAIRNESS KEY") ||
		!regexp.MustCompile(`(?m)^tiered-1 .* completed +1 +acme `).MatchString(list) ||
		!regexp.MustCompile(`(?m)^tiered-2 .* completed +2 +initech `).MatchString(list) {
		t.Errorf("instance ls does not show the priorities and keys:\n%s", list)
	}
	// An instance in the shared lane: its priority, and no fairness line.
	if out := ts.ok(t, "run", "plain", "--wait"); !strings.Contains(out, "priority:  3\n") || strings.Contains(out, "fairness:") {
		t.Errorf("run plain, at the default priority in the shared lane:\n%s", out)
	}

	var sent struct {
		Started []string `json:"started"`
	}
	ts.okJSON(t, &sent, "event", "send", "tiered.submitted", "--payload", `{"plan": "pro", "tenant": "acme"}`, "--priority", "5")
	if len(sent.Started) != 1 {
		t.Fatalf("event send --priority 5 started %v, want one instance", sent.Started)
	}
	ts.okJSON(t, &in, "instance", "show", sent.Started[0])
	if in.Priority != 5 || in.FairnessKey != "acme" {
		t.Errorf("the instance the event started: %+v, want priority 5 and key acme", in)
	}

	for _, args := range [][]string{
		{"run", "tiered", "--priority", "9"},
		{"run", "tiered", "--priority", "0"},
		{"run", "tiered", "--priority", "high"},
		{"event", "send", "tiered.submitted", "--priority", "6"},
	} {
		r := ts.weft(t, nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "-priority") || !strings.Contains(r.stderr, "want 1 (served first) to 5 (served last)") {
			t.Errorf("weft %s: exit %d (want %d), stderr %s", strings.Join(args, " "), r.code, exitUsage, r.stderr)
		}
	}
}
