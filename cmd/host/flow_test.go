package main

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// chargeYAML lets one instance per customer run at once; each waits for
// its receipt, holding its slot.
const chargeYAML = `name: charge
concurrency: { key: "${ input.c }", limit: 1 }
steps:
  - id: receipt
    wait: { event: charge.receipt, key: "${ input.n }", timeout: 1h }
`

// pollFlow runs weft flow show -o json until done says the key is as
// wanted, and fails the test after 30 seconds.
func (ts *testServer) pollFlow(t *testing.T, workflow, key, what string, done func(apiv1.ConcurrencyLine) bool) apiv1.ConcurrencyLine {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := ts.weft(t, nil, "flow", "show", workflow, key, "-o", "json")
		var line apiv1.ConcurrencyLine
		if r.code == exitOK {
			if err := json.Unmarshal([]byte(r.stdout), &line); err != nil {
				t.Fatalf("weft flow show %s %s -o json: %v\n%s", workflow, key, err, r.stdout)
			}
			if done(line) {
				return line
			}
		} else if r.code != exitNotFound {
			t.Fatalf("weft flow show %s %s: exit %d\n%s", workflow, key, r.code, r.stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("concurrency key %q of %s: no %s after 30s: %+v", key, workflow, what, line)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestFlowCommands runs weft flow ls and show against one host: three
// instances of a workflow limited to one per customer, one customer's,
// make a key with one holder and two waiting, listed with its counts, its
// oldest wait and its policy, and shown with its holder and its line in
// order, a page at a time, as JSON too; instance show says where an
// instance stands; a key nobody holds is exit 4, a workflow name that
// cannot be one exit 1, and a key a terminal would act on is escaped.
func TestFlowCommands(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "charge.yaml", chargeYAML))
	// The first holds its slot (it suspends at its wait); the others wait,
	// one after the other.
	ts.ok(t, "run", "charge", "--id", "charge-1", "--input", `{"c": "cus_42", "n": "1"}`, "--until", "suspended")
	for i, id := range []string{"charge-2", "charge-3"} {
		ts.ok(t, "run", "charge", "--id", id, "--input", `{"c": "cus_42", "n": "`+id+`"}`)
		ts.pollFlow(t, "charge", "cus_42", "waiter", func(l apiv1.ConcurrencyLine) bool { return l.Key.Waiting == i+1 })
	}
	// A key made of what a terminal acts on, held by one instance.
	ts.ok(t, "run", "charge", "--id", "charge-esc", "--input", `{"c": "k\u001b]0;x\u0007", "n": "e"}`, "--until", "suspended")

	t.Run("ls", func(t *testing.T) {
		out := ts.ok(t, "flow", "ls")
		if !regexp.MustCompile(`(?m)^WORKFLOW +KEY +RUNNING/LIMIT +WAITING +OLDEST WAIT +POLICY\n(.*\n)*charge +"cus_42" +1/1 +2 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +queue$`).MatchString(out) {
			t.Errorf("flow ls:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)^charge +"k\\x1b\]0;x\\a" +1/1 +0 +- +queue$`).MatchString(out) || strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("flow ls does not escape the key:\n%q", out)
		}
		var page struct {
			Items      []apiv1.ConcurrencyKey `json:"items"`
			NextCursor *string                `json:"next_cursor"`
		}
		ts.okJSON(t, &page, "flow", "ls", "--workflow", "charge")
		if len(page.Items) != 2 || page.NextCursor == nil || page.Items[0].Key != "cus_42" || page.Items[0].Holders[0].InstanceID != "charge-1" {
			t.Errorf("flow ls --workflow charge -o json: %+v", page)
		}
		// A page at a time: the next page is named on stderr.
		r := ts.weft(t, nil, "flow", "ls", "--limit", "1")
		if r.code != exitOK || !strings.Contains(r.stdout, `"cus_42"`) || !strings.Contains(r.stderr, "(more: add --cursor ") {
			t.Errorf("flow ls --limit 1: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if out := ts.ok(t, "flow", "ls", "--workflow", "other"); strings.Count(out, "\n") != 1 {
			t.Errorf("flow ls --workflow other lists keys:\n%s", out)
		}
	})

	t.Run("show", func(t *testing.T) {
		out := ts.ok(t, "flow", "show", "charge", "cus_42")
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^workflow:  charge\nkey:       "cus_42"\nlimit:     1, policy queue\nrunning:   1\nwaiting:   2, the first since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n`),
			regexp.MustCompile(`(?m)^holders:\n  INSTANCE +SINCE +CANCELLING\n  charge-1 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +no\n`),
			regexp.MustCompile(`(?m)^line: +first in line first\n  # +INSTANCE +SINCE\n  1 +charge-2 +\S+ \S+\n  2 +charge-3 +\S+ \S+\n$`),
		} {
			if !want.MatchString(out) {
				t.Errorf("flow show charge cus_42 does not match %s:\n%s", want, out)
			}
		}
		var line apiv1.ConcurrencyLine
		ts.okJSON(t, &line, "flow", "show", "charge", "cus_42")
		var ids []string
		for _, w := range line.Waiting {
			ids = append(ids, w.InstanceID)
		}
		if !slices.Equal(ids, []string{"charge-2", "charge-3"}) || line.Key.Running != 1 || line.NextCursor != "" {
			t.Errorf("flow show -o json: %+v", line)
		}

		// The line a page at a time.
		r := ts.weft(t, nil, "flow", "show", "charge", "cus_42", "--limit", "1")
		m := regexp.MustCompile(`\(more: add --cursor (\S+)\)`).FindStringSubmatch(r.stderr)
		if r.code != exitOK || m == nil || !strings.Contains(r.stdout, "charge-2") || strings.Contains(r.stdout, "charge-3") {
			t.Fatalf("flow show --limit 1: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		out = ts.ok(t, "flow", "show", "charge", "cus_42", "--limit", "1", "--cursor", m[1])
		if !regexp.MustCompile(`(?m)^line: +first in line first\n  INSTANCE +SINCE\n  charge-3 `).MatchString(out) || strings.Contains(out, "charge-2") {
			t.Errorf("flow show's second page:\n%s", out)
		}

		// A holder with an empty line; the key escaped.
		out = ts.ok(t, "flow", "show", "charge", "k\x1b]0;x\a")
		if !strings.Contains(out, `key:       "k\x1b]0;x\a"`) || !strings.Contains(out, "line:      empty\n") || strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("flow show of the escaped key:\n%q", out)
		}
	})

	t.Run("instance show", func(t *testing.T) {
		if out := ts.ok(t, "instance", "show", "charge-2"); !regexp.MustCompile(`(?m)^flow:      concurrency key "cus_42"; waiting for a slot since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(out) {
			t.Errorf("instance show of a waiter:\n%s", out)
		}
		if out := ts.ok(t, "instance", "show", "charge-1"); !regexp.MustCompile(`(?m)^flow:      concurrency key "cus_42"$`).MatchString(out) {
			t.Errorf("instance show of the holder:\n%s", out)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"flow", "show", "charge"}, exitNotFound, `nothing runs or waits under concurrency key "" of workflow "charge"`},
			{[]string{"flow", "show", "charge", "cus_7"}, exitNotFound, `concurrency key "cus_7"`},
			{[]string{"flow", "show", "Not A Name", "cus_42"}, exitFailed, `workflow name "Not A Name"`},
			{[]string{"flow", "ls", "--workflow", "Not.a.name"}, exitFailed, `workflow name "Not.a.name"`},
			{[]string{"flow", "show"}, exitUsage, "flow show: missing WORKFLOW [KEY]"},
			{[]string{"flow", "show", "charge", "cus_42", "more"}, exitUsage, `unexpected argument "more"`},
			{[]string{"flow", "ls", "extra"}, exitUsage, `unexpected argument "extra"`},
		} {
			r := ts.weft(t, nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("weft %s: exit %d (want %d)\nstdout: %s\nstderr: %s (want %q in it)", strings.Join(c.args, " "), r.code, c.code, r.stdout, r.stderr, c.want)
			}
		}
	})
}

// syncYAML lets one attempt of its step run at once under the step key
// partner-api, each sleeping long enough to hold its slot; pingYAML's
// step starts one attempt an hour under the rate limit key partner-api
// (another set of keys), and escYAML's under a key a terminal would act
// on, with a burst that leaves turns free for an hour.
const (
	syncYAML = `name: sync
steps:
  - id: call
    activity: kit.sleep
    input: { ms: 600000 }
    timeout: 15m
    concurrency: { key: partner-api, limit: 1 }
`
	pingYAML = `name: ping
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: partner-api, limit: 1, per: 1h } }
`
	escYAML = `name: esc
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: "k\e]0;x\a", limit: 10, per: 1h, burst: 20 } }
`
)

// pollStepFlow runs weft flow show --step KEY -o json until done says the
// key is as wanted, and fails the test after 30 seconds.
func (ts *testServer) pollStepFlow(t *testing.T, key, what string, done func(apiv1.ConcurrencyLine) bool) apiv1.ConcurrencyLine {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := ts.weft(t, nil, "flow", "show", "--step", key, "-o", "json")
		var line apiv1.ConcurrencyLine
		if r.code == exitOK {
			if err := json.Unmarshal([]byte(r.stdout), &line); err != nil {
				t.Fatalf("weft flow show --step %s -o json: %v\n%s", key, err, r.stdout)
			}
			if done(line) {
				return line
			}
		} else if r.code != exitNotFound {
			t.Fatalf("weft flow show --step %s: exit %d\n%s", key, r.code, r.stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("step concurrency key %q: no %s after 30s: %+v", key, what, line)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestFlowStepsAndRates runs weft flow show --step and weft flow rates
// against one host: three instances whose step allows one attempt at once
// make a step key with one attempt holding its slot and two in its line,
// shown with the holder and the line in order; three instances whose
// step starts one attempt an hour make a rate limit key with two turns
// ahead and its next turn three hours away, listed with its terms, by
// kind and prefix, as JSON too, and a key a terminal would act on is
// escaped. The command lines that make no sense are usage errors.
func TestFlowStepsAndRates(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dir := t.TempDir()
	for name, src := range map[string]string{"sync": syncYAML, "ping": pingYAML, "esc": escYAML} {
		ts.ok(t, "workflow", "put", writeFile(t, dir, name+".yaml", src))
	}
	for i, id := range []string{"sync-1", "sync-2", "sync-3"} {
		ts.ok(t, "run", "sync", "--id", id)
		ts.pollStepFlow(t, "partner-api", "attempt", func(l apiv1.ConcurrencyLine) bool { return l.Key.Running == 1 && l.Key.Waiting == i })
	}
	before := time.Now()
	for _, id := range []string{"ping-1", "ping-2", "ping-3"} {
		ts.ok(t, "run", "ping", "--id", id)
	}
	ts.ok(t, "run", "esc", "--id", "esc-1", "--wait")

	t.Run("show --step", func(t *testing.T) {
		out := ts.ok(t, "flow", "show", "--step", "partner-api")
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^workflow:  \(steps\)\nkey:       "partner-api"\nlimit:     1, policy queue\nrunning:   1\nwaiting:   2, the first since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n`),
			regexp.MustCompile(`(?m)^holders:\n  INSTANCE +SINCE +CANCELLING\n  sync-1 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +no\n`),
			regexp.MustCompile(`(?m)^line: +first in line first\n  # +INSTANCE +SINCE\n  1 +sync-2 +\S+ \S+\n  2 +sync-3 +\S+ \S+\n$`),
		} {
			if !want.MatchString(out) {
				t.Errorf("flow show --step partner-api does not match %s:\n%s", want, out)
			}
		}
		var line apiv1.ConcurrencyLine
		ts.okJSON(t, &line, "flow", "show", "--step", "partner-api", "--limit", "1")
		if !line.Key.Step || len(line.Waiting) != 1 || line.Waiting[0].InstanceID != "sync-2" || line.NextCursor == "" {
			t.Errorf("flow show --step --limit 1 -o json: %+v", line)
		}
		if out := ts.ok(t, "flow", "ls"); !regexp.MustCompile(`(?m)^\(steps\) +"partner-api" +1/1 +2 `).MatchString(out) {
			t.Errorf("flow ls does not list the step key:\n%s", out)
		}
	})

	t.Run("rates", func(t *testing.T) {
		var rates apiv1.RateLimits
		deadline := time.Now().Add(30 * time.Second)
		for {
			ts.okJSON(t, &rates, "flow", "rates", "--kind", "step", "--prefix", "partner")
			if len(rates.Items) == 1 && rates.Items[0].Ahead == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("flow rates: no key with two turns ahead after 30s: %+v", rates)
			}
			time.Sleep(20 * time.Millisecond) // polling, with a deadline
		}
		if k := rates.Items[0]; k.Kind != apiv1.RateLimitStep || k.Key != "partner-api" || k.Limit != 1 || k.Per != "1h0m0s" || k.Burst != 1 ||
			k.NextTurn.Sub(before) < 3*time.Hour || k.NextTurn.Sub(before) > 3*time.Hour+time.Minute || rates.Truncated {
			t.Errorf("flow rates -o json: %+v; want partner-api, 1 per 1h, burst 1, 2 ahead, the next turn 3h on", rates)
		}

		out := ts.ok(t, "flow", "rates")
		if !regexp.MustCompile(`(?m)^KIND +KEY +LIMIT +AHEAD +NEXT TURN\nstep +"k\\x1b\]0;x\\a" +10 per 1h, burst 20 +0 +now\nstep +"partner-api" +1 per 1h, burst 1 +2 +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(in (2h59m\d+s|3h)\)\n$`).MatchString(out) ||
			strings.ContainsAny(out, "\x1b\a") {
			t.Errorf("flow rates:\n%q", out)
		}
		if out := ts.ok(t, "flow", "rates", "--kind", "host"); out != "KIND  KEY  LIMIT  AHEAD  NEXT TURN\n" {
			t.Errorf("flow rates --kind host lists keys:\n%s", out)
		}
		r := ts.weft(t, nil, "flow", "rates", "--limit", "1")
		if r.code != exitOK || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, "(more: narrow with --prefix") {
			t.Errorf("flow rates --limit 1: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"flow", "show", "--step", "nobody"}, exitNotFound, `nothing runs or waits under step concurrency key "nobody"`},
			{[]string{"flow", "show", "--step", ""}, exitUsage, "--step needs a KEY"},
			{[]string{"flow", "show", "--step", "partner-api", "sync"}, exitUsage, `unexpected argument "sync"`},
			{[]string{"flow", "show", "--step"}, exitUsage, "flag needs an argument"},
			{[]string{"flow", "rates", "--kind", "queue"}, exitFailed, `kind: "queue" is no kind of rate limit`},
			{[]string{"flow", "rates", "extra"}, exitUsage, `unexpected argument "extra"`},
		} {
			r := ts.weft(t, nil, c.args...)
			if r.code != c.code || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
				t.Errorf("weft %s: exit %d (want %d)\nstdout: %s\nstderr: %s (want %q in it)", strings.Join(c.args, " "), r.code, c.code, r.stdout, r.stderr, c.want)
			}
		}
	})
}

// TestRateTermsForPeople: a rate limit's period is shown without the zero
// units Go's durations end with, and its next turn as now or as a time
// with how far it is.
func TestRateTermsForPeople(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ per, want string }{
		{"1h0m0s", "1h"}, {"24h0m0s", "24h"}, {"1h30m0s", "1h30m"}, {"2m0s", "2m"}, {"1m30s", "1m30s"},
		{"1s", "1s"}, {"10s", "10s"}, {"500ms", "500ms"}, {"1h0m1s", "1h0m1s"}, {"0s", "0s"}, {"soon", "soon"},
	} {
		if got := shortDuration(c.per); got != c.want {
			t.Errorf("shortDuration(%q) = %q, want %q", c.per, got, c.want)
		}
	}
	if got := rateTerms(10, "1s", 20); got != "10 per 1s, burst 20" {
		t.Errorf("rateTerms = %q", got)
	}
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.Local)
	for _, c := range []struct {
		in   time.Duration
		want string
	}{
		{-time.Second, "now"}, {0, "now"},
		{250*time.Millisecond + 400*time.Microsecond, "2026-11-29 10:00:00 (in 250ms)"},
		{3*time.Hour - 300*time.Millisecond, "2026-11-29 12:59:59 (in 3h)"},
		{90*time.Second + 600*time.Millisecond, "2026-11-29 10:01:30 (in 1m31s)"},
	} {
		if got := nextTurn(now.Add(c.in), now); got != c.want {
			t.Errorf("nextTurn(now + %v) = %q, want %q", c.in, got, c.want)
		}
	}
}
