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
