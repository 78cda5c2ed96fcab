package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserPauseAndResume: with an operator's token, the instance page's
// pause button (after its reason and its confirmation) pauses a suspended
// instance: the page shows it paused, with a banner saying who paused it,
// since when and why, and how many events it holds, which follows the
// event sent meanwhile; the timeline shows the pause, and the history who
// asked. The resume button then resumes it, and it completes with the
// held event.
func TestBrowserPauseAndResume(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "hold", holdFlow)
	h.start("hold", "hold-1", map[string]any{"k": "k1"}, "suspended")

	tb := openTab(t, h.url)
	tb.open("/instances/hold-1", operatorSecret, "operator")
	waitStatus(tb, "suspended")
	waitTrue(tb, "no resume button while it is not paused", q("[data-test=resume]")+" === null")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=pause-reason]"), "carrier outage"))
	tb.click("[data-test=pause-submit]")
	waitStatus(tb, "paused")
	if d := tb.dialogsSeen(); len(d) != 1 || !strings.Contains(d[0], "Pause instance hold-1?") {
		t.Errorf("dialogs %q, want one confirmation of the pause", d)
	}
	banner := q("[data-test=paused-banner]")
	text := func() string { return eval[string](tb, banner+"?.textContent ?? ''") }
	waitFor(tb, "the pause's banner", banner+"?.textContent ?? ''", func(s string) bool { return strings.Contains(s, "0 held") })
	if got := text(); !strings.HasPrefix(got, "Paused by ops since ") || !strings.Contains(got, ": carrier outage — 0 held events/timers") {
		t.Errorf("the banner says %q, want who paused it, since when, why, and what it holds", got)
	}
	waitTrue(tb, "the pause button to go and the resume button to come", q("[data-test=pause]")+" === null && "+q("[data-test=resume]")+" !== null")

	// The event for its wait is held; the banner says so.
	h.Do(t, "POST", "/v1/events", map[string]any{"name": "go", "key": "k1", "payload": map[string]any{"ok": true}}).Want(t, http.StatusAccepted)
	waitFor(tb, "the banner to count the held event", banner+"?.textContent ?? ''", func(s string) bool { return strings.Contains(s, "— 1 held event/timer") })

	// The timeline marks the pause on its time axis; the history says who.
	waitTrue(tb, "the pause on the timeline", q("[data-test=timeline] .tl-axis [data-span=paused]")+" !== null && "+
		q("[data-test=timeline] [data-mark=instance_paused]")+" !== null && "+q("[data-test=timeline] [data-mark=held]")+" !== null")
	actor := q("[data-test=history] tr[data-type=instance_paused] [data-test=history-actor]")
	waitTrue(tb, "the pause's actor in the history", actor+" !== null")
	if got := eval[string](tb, actor+".textContent"); got != "by ops: carrier outage" {
		t.Errorf("the pause's history entry shows %q, want %q", got, "by ops: carrier outage")
	}

	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=resume-reason]"), "carrier back"))
	tb.click("[data-test=resume-submit]")
	waitStatus(tb, "completed")
	waitTrue(tb, "the banner to go", banner+" === null")
	resumed := q("[data-test=history] tr[data-type=instance_resumed] [data-test=history-actor]")
	waitTrue(tb, "the resume's actor in the history", resumed+" !== null")
	if got := eval[string](tb, resumed+".textContent"); got != "by ops: carrier back" {
		t.Errorf("the resume's history entry shows %q, want %q", got, "by ops: carrier back")
	}
	waitTrue(tb, "the resume on the timeline", q("[data-test=timeline] [data-mark=instance_resumed]")+" !== null")
	if in := h.get("hold-1"); in.Status != "completed" || string(in.Output) != `{"ok":true}` {
		t.Errorf("hold-1 is %s with output %s; want completed with the held event's payload", in.Status, in.Output)
	}
}

// TestBrowserWorkflowPauseAndResume: with an operator's token, the
// workflow page's Pause (after its reason and its confirmation) pauses the
// workflow: a banner says who paused it, since when and why, with its
// held starts, and the workflows list marks it paused. An instance
// started from the page is held: its page says so and stays pending, the
// instance list says "held: workflow paused", and the banner counts it.
// Resume links to the release batch, whose page shows it done; the
// instance completes, its history records start_held and
// start_released, and the banner goes.
func TestBrowserWorkflowPauseAndResume(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)

	tb := openTab(t, h.url)
	tb.open("/workflows/greet", operatorSecret, "operator")
	banner := q("[data-test=workflow-paused-banner]")
	bannerText := banner + "?.textContent ?? ''"
	waitTrue(tb, "the pause form, and no banner", q("[data-test=workflow-pause]")+" !== null && "+banner+" === null")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=workflow-pause-reason]"), "bad release"))
	tb.click("[data-test=workflow-pause-submit]")
	got := waitFor(tb, "the pause's banner", bannerText, func(s string) bool { return s != "" })
	if !strings.HasPrefix(got, "Paused by ops since ") || !strings.Contains(got, ": bad release — 0 held starts") {
		t.Errorf("the banner says %q, want who paused it, since when, why, and its held starts", got)
	}
	if d := tb.dialogsSeen(); len(d) != 1 || !strings.Contains(d[0], "Pause workflow greet?") {
		t.Errorf("dialogs %q, want one confirmation of the pause", d)
	}
	waitTrue(tb, "the resume form instead of the pause's", q("[data-test=workflow-resume]")+" !== null && "+q("[data-test=workflow-pause]")+" === null")

	// Started from its page, an instance is held.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=start-input]") + ".value = " + js(`{"text": "hi"}`)))
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=start-id]"), "greet-1"))
	tb.click("[data-test=start-instance-submit]")
	waitFor(tb, "the started instance's page", q("[data-test=instance-id]")+"?.textContent ?? ''", func(s string) bool { return s == "greet-1" })
	waitStatus(tb, "pending")
	held := waitFor(tb, "the held banner", q("[data-test=held-banner]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if !strings.HasPrefix(held, "Held since ") || !strings.Contains(held, "its workflow greet is paused") {
		t.Errorf("the held instance's banner says %q", held)
	}
	tb.goTo("/instances?workflow=greet")
	waitFor(tb, "the held start in the list", q("[data-test=instance-row][data-id=greet-1] [data-test=held]")+"?.textContent ?? ''",
		func(s string) bool { return s == "held: workflow paused" })
	tb.goTo("/workflows")
	waitTrue(tb, "the workflows list marks greet paused", q("[data-test=workflow-row][data-name=greet] [data-test=workflow-paused]")+" !== null")
	if in := h.get("greet-1"); in.Status != "pending" {
		t.Errorf("greet-1 is %s while its workflow is paused, want pending", in.Status)
	}

	tb.goTo("/workflows/greet")
	waitFor(tb, "the banner to count the held start", bannerText, func(s string) bool { return strings.Contains(s, "— 1 held start") })
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=workflow-resume-reason]"), "fixed"))
	tb.click("[data-test=workflow-resume-submit]")
	link := waitFor(tb, "the release batch's link", q("[data-test=release-link]")+"?.getAttribute('href') ?? ''", func(s string) bool { return s != "" })
	if !strings.HasPrefix(link, "#/batches/b-") {
		t.Errorf("the release link is %q, want a batch's page", link)
	}
	waitTrue(tb, "the banner to go, and the pause form to come back", banner+" === null && "+q("[data-test=workflow-pause]")+" !== null")
	tb.click("[data-test=release-link]")
	waitFor(tb, "the release batch done", q("[data-test=batch-phase]")+"?.dataset.phase ?? ''", func(s string) bool { return s == "done" })
	if in := h.awaitStatus("greet-1", "completed"); string(in.Output) != `"HI"` {
		t.Errorf("greet-1 completed with %s, want HI", in.Output)
	}
	var hist struct{ Items []auditEntry }
	h.Do(t, "GET", "/v1/instances/greet-1/history", nil).Want(t, http.StatusOK).JSON(t, &hist)
	var types []string
	for _, e := range hist.Items {
		types = append(types, e.Type)
		if e.Type == "start_held" && (e.Actor != "ops" || e.Data["reason"] != "bad release") {
			t.Errorf("start_held is %+v, want ops's, for a bad release", e)
		}
	}
	if len(types) < 3 || types[1] != "start_held" || types[2] != "start_released" {
		t.Errorf("greet-1's history is %v, want start_held then start_released", types)
	}
}
