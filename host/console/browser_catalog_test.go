package console_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// versionsJS lists the workflow page's versions, as shown ("v3").
const versionsJS = `[...document.querySelectorAll('[data-test=workflow-versions] li')].map((li) => li.textContent.trim())`

// TestBrowserWorkflowVersionsAndSourceErrors: the workflow page lists the
// versions the host keeps, not every number below the latest (a name saved
// again after a deletion starts after its last version); and a definition
// saved from the page with a problem is refused with the problem marked on
// its line.
func TestBrowserWorkflowVersionsAndSourceErrors(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)
	h.PutWorkflow(t, "greet", strings.Replace(greetFlow, "kit.upper", "kit.echo", 1))
	h.Request(t, "DELETE", "/v1/workflows/greet", adminSecret, "", nil).Want(t, http.StatusNoContent)
	h.PutWorkflow(t, "greet", greetFlow) // version 3
	h.PutWorkflow(t, "greet", strings.Replace(greetFlow, "kit.upper", "kit.echo", 1))

	tb := openTab(t, h.url)
	tb.open("/workflows/greet", adminSecret, "admin")
	got := waitFor(tb, "the versions", versionsJS, func(v []string) bool { return len(v) > 0 })
	if strings.Join(got, " ") != "v4 v3" {
		t.Fatalf("the page lists versions %q, want v4 v3 (1 and 2 were deleted)", got)
	}
	// The other version links to its own page, which has it.
	tb.click(`[data-test=workflow-versions] a`)
	waitFor(tb, "version 3's page", `document.querySelector('[data-test=workflow-versions] [aria-current=page]')?.textContent ?? ''`,
		func(s string) bool { return s == "v3" })
	if got := eval[[]string](tb, versionsJS); strings.Join(got, " ") != "v4 v3" {
		t.Errorf("version 3's page lists versions %q, want v4 v3", got)
	}
	tb.goTo("/workflows/greet")
	waitFor(tb, "the latest version's page", `document.querySelector('[data-test=workflow-versions] [aria-current=page]')?.textContent ?? ''`,
		func(s string) bool { return s == "v4" })

	// Line 4 names an activity kit does not have.
	bad := "name: greet\nsteps:\n  - id: up\n    activity: kit.nosuch\n"
	tb.click("[data-test=edit-section] summary")
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=source-editor]") + ".value = " + js(bad)))
	tb.click("[data-test=save-workflow-submit]")
	lines := `[...document.querySelectorAll('[data-test=save-workflow] [data-test=source-error-line]')].map((l) => l.dataset.line)`
	marked := waitFor(tb, "the marked line", lines, func(l []string) bool { return len(l) > 0 })
	if strings.Join(marked, " ") != "4" {
		t.Errorf("lines %q are marked, want line 4 with the unknown activity", marked)
	}
	note := eval[string](tb, q("[data-test=save-workflow] .src-error")+"?.textContent ?? ''")
	if !strings.Contains(note, "nosuch") {
		t.Errorf("the note under line 4 says %q, want the unknown activity named", note)
	}
	if v := h.getWorkflowVersion("greet"); v != 4 {
		t.Errorf("after the refused save the latest version is %d, want 4", v)
	}
}

// getWorkflowVersion answers the latest version of a workflow.
func (h *host) getWorkflowVersion(name string) int {
	h.t.Helper()
	var wf struct {
		Version int `json:"version"`
	}
	h.Do(h.t, "GET", "/v1/workflows/"+name, nil).Want(h.t, http.StatusOK).JSON(h.t, &wf)
	return wf.Version
}

// pinnedJS lists the ids the plugin page lists as pinned to its version.
const pinnedJS = `[...document.querySelectorAll('[data-test=version-instances] [data-test=pinned-instances] li')].map((li) => li.dataset.id)`

// TestBrowserPluginPinnedInstancesPaged: the plugin page lists the
// instances pinned to its version a page at a time, newest first, and its
// button lists the rest, each once.
func TestBrowserPluginPinnedInstancesPaged(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)
	// One more than the page shows (20).
	var want []string
	for i := range 21 {
		id := fmt.Sprintf("pin-%02d", i)
		h.start("greet", id, map[string]any{"text": "x"}, "")
		want = append([]string{id}, want...) // newest first
	}

	tb := openTab(t, h.url)
	tb.open("/plugins/kit", adminSecret, "admin")
	got := waitFor(tb, "the first page of pinned instances", pinnedJS, func(v []string) bool { return len(v) > 0 })
	if !slices.Equal(got, want[:20]) {
		t.Fatalf("the first page lists %v, want the newest 20, %v", got, want[:20])
	}
	tb.click("[data-test=pinned-more]")
	got = waitFor(tb, "the rest", pinnedJS, func(v []string) bool { return len(v) > 20 })
	if !slices.Equal(got, want) {
		t.Errorf("after more the page lists %v, want %v", got, want)
	}
	waitTrue(tb, "the button to go at the end", q("[data-test=pinned-more]")+".hidden")
}

// tieredFlow computes its priority and fairness key from the input, and
// an event named tiered.submitted starts it.
const tieredFlow = `
name: tiered
triggers: [ { event: tiered.submitted } ]
priority: "${ input.plan == 'pro' ? 2 : 4 }"
fairness: { key: "${ input.tenant }", weight: 3 }
steps:
  - { id: s, set: { n: 1 } }
`

// TestBrowserStartAndSendWithPriority: the workflow page's start form
// and the events page's send form take a priority, which the instances
// they start have, before the one their definition computes; left empty,
// the instance has its definition's. The instance page shows the priority
// and the fairness key with its weight.
func TestBrowserStartAndSendWithPriority(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "tiered", tieredFlow)

	tb := openTab(t, h.url)
	tb.open("/workflows/tiered", operatorSecret, "operator")
	shown := func(wantPrio, wantKey string) {
		t.Helper()
		waitFor(tb, "the instance page's priority", q("[data-test=instance-priority]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
		if p := eval[string](tb, q("[data-test=instance-priority]")+".textContent"); p != wantPrio {
			t.Errorf("the instance page shows priority %q, want %q", p, wantPrio)
		}
		if k := eval[string](tb, q("[data-test=instance-fairness-key]")+"?.parentElement.textContent ?? ''"); k != wantKey+" weight 3" {
			t.Errorf("the instance page shows the fairness key %q, want %q", k, wantKey+" weight 3")
		}
	}

	// Started from the form with priority 1: the start's.
	input := `{"plan": "free", "tenant": "acme"}`
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=start-input]") + ".value = " + js(input)))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=start-id]"), "tiered-1"))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=start-priority]"), "1"))
	tb.click("[data-test=start-instance-submit]")
	waitFor(tb, "the started instance's page", q("[data-test=instance-id]")+"?.textContent ?? ''", func(s string) bool { return s == "tiered-1" })
	shown("1", "acme")

	// Without a priority: the definition's, 4 for the free plan.
	tb.goTo("/workflows/tiered")
	waitTrue(tb, "the start form", q("[data-test=start-priority]")+" !== null")
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=start-input]") + ".value = " + js(input)))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=start-id]"), "tiered-2"))
	tb.click("[data-test=start-instance-submit]")
	waitFor(tb, "the second instance's page", q("[data-test=instance-id]")+"?.textContent ?? ''", func(s string) bool { return s == "tiered-2" })
	shown("4", "acme")

	// An event sent from the events page with priority 5.
	tb.goTo("/events")
	waitTrue(tb, "the send form", q("[data-test=event-priority]")+" !== null")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=event-name]"), "tiered.submitted"))
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=event-payload]") + ".value = " + js(`{"plan": "pro", "tenant": "initech"}`)))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=event-id]"), "ev-5"))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=event-priority]"), "5"))
	tb.click("[data-test=send-event-submit]")
	waitFor(tb, "the event's result", q("[data-test=event-result]")+"?.textContent ?? ''", func(s string) bool { return strings.Contains(s, "stim-ev-5-tiered") })
	tb.goTo("/instances/stim-ev-5-tiered")
	shown("5", "initech")
}
