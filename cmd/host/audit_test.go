package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCLIInstanceHistoryShowsTheActor: `weft instance cancel --reason`
// and `weft instance retry --reason` record the token's name and the
// reason; `weft instance history` prints the name in its ACTOR column
// ("-" for an entry without one) beside the reason in the data, and
// `-o json` has it as each entry's actor (docs/operations.md, "Audit").
func TestCLIInstanceHistoryShowsTheActor(t *testing.T) {
	t.Parallel()
	admin, alice := "admin-secret-0123456789", "alice-secret-0123456789"
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "auth:\n  tokens:\n    - {name: ci, role: admin, token: "+admin+"}\n    - {name: alice, role: operator, token: "+alice+"}\n")
	ts := startServer(t, "--config", filepath.Join(dir, "weft.yaml"))
	as := func(token string, args ...string) result {
		t.Helper()
		return ts.weft(t, []string{"WEFT_TOKEN=" + token}, args...)
	}
	ok := func(token string, args ...string) string {
		t.Helper()
		r := as(token, args...)
		if r.code != exitOK {
			t.Fatalf("weft %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	slow := writeFile(t, t.TempDir(), "slow.yaml", "name: slow\nsteps:\n  - id: nap\n    delay: 1h\n")
	failing := writeFile(t, t.TempDir(), "failing.yaml", "name: failing\nsteps:\n  - {id: charge, activity: kit.fail, input: {code: declined, message: no}, retry: {max_attempts: 1}}\n")
	ok(admin, "workflow", "put", slow, failing)

	ok(alice, "run", "slow", "--id", "s-1")
	ok(alice, "instance", "cancel", "s-1", "--reason", "no longer needed")
	if r := as(alice, "instance", "show", "s-1", "--wait=30s"); !strings.Contains(r.stdout, "cancelled") {
		t.Fatalf("s-1 after the cancel: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := as(alice, "run", "failing", "--id", "f-1", "--wait=30s"); r.code != exitFailed {
		t.Fatalf("run failing: exit %d, want %d\n%s%s", r.code, exitFailed, r.stdout, r.stderr)
	}
	ok(admin, "instance", "retry", "f-1", "--reason", "card replaced")
	// The retry is applied when f-1 next runs, which fails again: until
	// its history says so.
	for deadline := time.Now().Add(30 * time.Second); strings.Count(ok(alice, "instance", "history", "f-1"), "instance_failed") < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("f-1 did not fail again after its retry within 30s:\n%s", ok(alice, "instance", "history", "f-1"))
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}

	tests := []struct {
		id   string
		want []string // regular expressions the table must match
		// entry, actor and reason: what -o json must hold.
		entry, actor, reason string
	}{
		{id: "s-1", want: []string{`(?m)^SEQ +TIME +EVENT +STEP +ATTEMPT +ACTOR +DATA$`, `(?m)instance_created +- +- +- `, `(?m)instance_cancelled +- +- +alice +\{"reason":"no longer needed"`},
			entry: "instance_cancelled", actor: "alice", reason: "no longer needed"},
		{id: "f-1", want: []string{`(?m)instance_retried +- +- +ci +\{"code":"declined","reason":"card replaced"`},
			entry: "instance_retried", actor: "ci", reason: "card replaced"},
	}
	for _, tt := range tests {
		out := ok(alice, "instance", "history", tt.id)
		for _, re := range tt.want {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("instance history %s does not match %s:\n%s", tt.id, re, out)
			}
		}
		var page struct {
			Items []struct {
				Type  string          `json:"type"`
				Actor string          `json:"actor"`
				Data  json.RawMessage `json:"data"`
			} `json:"items"`
		}
		if err := json.Unmarshal([]byte(ok(alice, "instance", "history", tt.id, "-o", "json")), &page); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range page.Items {
			if e.Type != tt.entry {
				continue
			}
			found = true
			var data struct{ Reason string }
			if err := json.Unmarshal(e.Data, &data); err != nil || e.Actor != tt.actor || data.Reason != tt.reason {
				t.Errorf("instance history %s -o json: %s by %q with data %s (%v); want by %q, reason %q", tt.id, e.Type, e.Actor, e.Data, err, tt.actor, tt.reason)
			}
		}
		if !found {
			t.Errorf("instance history %s -o json has no %s entry", tt.id, tt.entry)
		}
	}
}
