package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestCLIInstancePauseResume: `weft instance pause` pauses an instance,
// which `weft instance show` then shows paused, by whom, why and what it
// holds, and `weft instance ls --status paused` lists; an event sent
// meanwhile is held, and `weft instance resume` lets it complete with it.
// Several ids are done in turn, a line each, and one refused fails the
// command; a resume of an instance that is not paused is refused.
func TestCLIInstancePauseResume(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	flow := writeFile(t, t.TempDir(), "gated.yaml", "name: gated\nsteps:\n  - id: go\n    wait: {event: gated.go, key: \"${ input.k }\"}\n    output: got\noutput: \"${ vars.got }\"\n")
	ts.ok(t, "workflow", "put", flow)
	ts.ok(t, "run", "gated", "--id", "c-1", "--input", `{"k":"a"}`, "--until", "suspended")

	if r := ts.weft(t, nil, "instance", "resume", "c-1"); r.code != exitFailed || !strings.Contains(r.stderr, `instance "c-1" is not paused: it is suspended`) {
		t.Fatalf("resume of a suspended instance: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if out := ts.ok(t, "instance", "pause", "c-1", "--reason", "bad rollout"); out != "instance c-1: pause requested (status suspended); it applies when the instance next runs\n" {
		t.Errorf("instance pause printed %q", out)
	}
	ts.waitStatus(t, "c-1", "paused")
	show := regexp.MustCompile(`(?m)^status: +paused\n(?s:.*)^paused: +since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d by anonymous: bad rollout \(0 held\)$`)
	if out := ts.ok(t, "instance", "show", "c-1"); !show.MatchString(out) {
		t.Errorf("instance show of the paused instance does not match %s:\n%s", show, out)
	}
	if out := ts.ok(t, "instance", "ls", "--status", "paused"); !regexp.MustCompile(`(?m)^c-1 +gated +1 +paused `).MatchString(out) {
		t.Errorf("instance ls --status paused:\n%s", out)
	}

	// Several at once: one paused already, one that does not exist.
	r := ts.weft(t, nil, "instance", "pause", "c-1", "nope")
	if r.code != exitFailed || !regexp.MustCompile(`(?m)^instance c-1: paused already, since .* by anonymous: bad rollout \(0 held\)\ninstance nope: no instance "nope"\n$`).MatchString(r.stdout) {
		t.Errorf("instance pause c-1 nope: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// The event is held until the resume.
	ts.ok(t, "event", "send", "gated.go", "--key", "a", "--payload", `"x"`)
	for deadline := time.Now().Add(30 * time.Second); ; {
		var in struct {
			Status string
			Paused *struct{ Held int }
		}
		ts.okJSON(t, &in, "instance", "show", "c-1")
		if in.Status != "paused" {
			t.Fatalf("c-1 is %s after the event, want paused", in.Status)
		}
		if in.Paused != nil && in.Paused.Held == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c-1 holds %+v after 30s, want the event", in.Paused)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	var answered instanceJSON
	ts.okJSON(t, &answered, "instance", "resume", "c-1", "--reason", "fixed")
	if answered.ID != "c-1" {
		t.Errorf("instance resume -o json printed %+v, want the instance", answered)
	}
	if in := ts.waitStatus(t, "c-1", "completed"); string(in.Output) != `"x"` {
		t.Errorf("c-1 completed with %s, want the held event's payload", in.Output)
	}
	hist := ts.ok(t, "instance", "history", "c-1")
	for _, re := range []string{`(?m)instance_paused +- +- +anonymous +\{"reason":"bad rollout"`, `(?m)event_held +- +- +- +\{"event":"stimulus_delivered"`, `(?m)instance_resumed +- +- +anonymous +\{"held":1,`} {
		if !regexp.MustCompile(re).MatchString(hist) {
			t.Errorf("instance history does not match %s:\n%s", re, hist)
		}
	}

	// -o json of several: the instances answered, in a list.
	ts.ok(t, "run", "gated", "--id", "c-2", "--input", `{"k":"b"}`, "--until", "suspended")
	ts.ok(t, "run", "gated", "--id", "c-3", "--input", `{"k":"c"}`, "--until", "suspended")
	var list []instanceJSON
	ts.okJSON(t, &list, "instance", "pause", "c-2", "c-3")
	if len(list) != 2 || list[0].ID != "c-2" || list[1].ID != "c-3" {
		b, _ := json.Marshal(list)
		t.Errorf("instance pause c-2 c-3 -o json printed %s, want both instances", b)
	}
}
