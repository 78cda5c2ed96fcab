package console_test

import (
	"net/http"
	"strings"
	"testing"
)

// recordedGreet is greetFlow keeping the tape of every attempt
// (docs/replay.md): its one step is recorded each time it runs.
const recordedGreet = `
name: greet
record: all
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input.text }" }, output: up }
output: "${ vars.up.text }"
`

// plainGreet is greetFlow under another name, recording nothing (the
// test host's policy keeps no tape).
var plainGreet = strings.Replace(greetFlow, "name: greet", "name: plain", 1)

// tapeSummary is the part of the API's tape summary the tests read.
type tapeSummary struct {
	Key struct {
		InstanceID string `json:"instance_id"`
		StepPath   string `json:"step_path"`
		Exec       string `json:"exec"`
		Attempt    int    `json:"attempt"`
	} `json:"key"`
	Outcome  string `json:"outcome"`
	Plugin   string `json:"plugin"`
	Activity string `json:"activity"`
}

// tapes lists an instance's recorded attempts through the API.
func (h *host) tapes(id string) []tapeSummary {
	h.t.Helper()
	var page struct {
		Items []tapeSummary `json:"items"`
	}
	h.Do(h.t, "GET", "/v1/instances/"+id+"/tapes", nil).Want(h.t, http.StatusOK).JSON(h.t, &page)
	return page.Items
}

// TestBrowserInstanceTapesReplay: an instance of a workflow that records
// every attempt ran to completion; its page, opened by an admin, lists
// its one recorded attempt (the step path the API names, attempt 1,
// kit.upper, completed), and the attempt's Replay shows the report
// inline: the same output as recorded, {"text": "HI"}, on both sides.
// The page of an instance with no tape shows no "Recorded attempts".
func TestBrowserInstanceTapesReplay(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", recordedGreet)
	h.PutWorkflow(t, "plain", plainGreet)
	for _, s := range []struct{ workflow, id string }{{"greet", "rec-1"}, {"plain", "plain-1"}} {
		if in := h.start(s.workflow, s.id, map[string]any{"text": "hi"}, "ended"); in.Status != "completed" {
			t.Fatalf("%s is %s, want completed", s.id, in.Status)
		}
	}
	recs := h.tapes("rec-1")
	if len(recs) != 1 || recs[0].Outcome != "completed" || recs[0].Activity != "upper" || recs[0].Key.Attempt != 1 {
		t.Fatalf("the tapes of rec-1: %+v, want attempt 1 of kit.upper, completed", recs)
	}
	if got := h.tapes("plain-1"); len(got) != 0 {
		t.Fatalf("the tapes of plain-1: %+v, want none", got)
	}
	step := recs[0].Key.StepPath

	tb := openTab(t, h.url)
	tb.open("/instances/rec-1", adminSecret, "admin")
	row := "[data-test=tape-row][data-step=" + js(step) + "][data-attempt='1']"
	waitTrue(tb, "the recorded attempt listed", q(row))
	if got := eval[string](tb, q(row)+".dataset.outcome + ' ' + "+q(row+" [data-test=tape-activity]")+".textContent"); got != "completed kit.upper" {
		t.Errorf("the tape's row says %q, want completed kit.upper", got)
	}
	if n := eval[int](tb, "document.querySelectorAll('[data-test=tape-row]').length"); n != 1 {
		t.Errorf("%d tape rows, want 1", n)
	}

	tb.click(row + " [data-test=tape-replay]")
	report := "[data-test=tape-report] [data-test=replay-report]"
	waitFor(tb, "the replay's report", q(report)+"?.dataset.outcome ?? ''", func(s string) bool { return s != "" })
	if got := eval[string](tb, q(report)+".dataset.outcome"); got != "same" {
		t.Fatalf("the replay's outcome is %q, want same: %s", got, eval[string](tb, q(report)+".textContent"))
	}
	for _, side := range []string{"recorded-side", "replayed-side"} {
		if got := eval[string](tb, q(report+" [data-test="+side+"] pre")+"?.textContent ?? ''"); !strings.Contains(got, `"HI"`) {
			t.Errorf("the report's %s shows %q, want the output {\"text\": \"HI\"}", side, got)
		}
	}

	// An instance without a tape: no section, once the page knows.
	tb.goTo("/instances/plain-1")
	waitFor(tb, "plain-1's page", q("[data-test=instance-id]")+"?.textContent ?? ''", func(s string) bool { return s == "plain-1" })
	waitFor(tb, "plain-1's tapes read", q("[data-test=tapes-box]")+"?.dataset.state ?? ''", func(s string) bool { return s != "loading" })
	if got := eval[string](tb, q("[data-test=tapes-box]")+".dataset.state"); got != "none" {
		t.Errorf("plain-1's recorded attempts are %q, want none", got)
	}
	if eval[bool](tb, "Boolean("+q("[data-test=tapes]")+")") {
		t.Error("plain-1's page shows a Recorded attempts section; it has no tape")
	}
}
