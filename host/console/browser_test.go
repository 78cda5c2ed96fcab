package console_test

// The console in a real browser: headless chromium, driven with chromedp,
// on a real host (node, API, example plugins) on loopback. Each test opens
// the console with a token entered in its dialog, as a person would, and
// checks what the pages show and do; the page must log no JavaScript
// error. The tests also take the screenshots the README shows (-screenshots).

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// greetFlow completes at once.
const greetFlow = `
name: greet
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input.text }" }, output: up }
output: "${ vars.up.text }"
`

// holdFlow waits for the event go with the instance's key, then echoes its
// payload.
const holdFlow = `
name: hold
steps:
  - id: wait-for-go
    wait: { event: go, key: "${ input.k }", timeout: 1h }
    output: got
  - { id: echo, activity: kit.echo, input: "${ vars.got }", output: echoed }
output: "${ vars.echoed }"
`

// rowsJS lists the instance list's rows as "id=status", sorted.
const rowsJS = `[...document.querySelectorAll('[data-test=instance-row]')].map((r) => r.dataset.id + '=' + r.dataset.status).sort().join(' ')`

// chipsJS reads the counts chips: status (or "all") to count.
const chipsJS = `Object.fromEntries([...document.querySelectorAll('[data-test=status-chips] [data-count]')].map((c) => [c.dataset.test.replace(/^chip-/, ''), Number(c.dataset.count)]))`

// waitRows waits until the instance list shows exactly want ("id=status",
// sorted, space-separated).
func waitRows(tb *tab, what, want string) {
	tb.t.Helper()
	waitFor(tb, what+": rows "+want, rowsJS, func(s string) bool { return s == want })
}

// waitChips waits until the counts chips say what want says (the chips
// not named in want are not checked).
func waitChips(tb *tab, want map[string]int) {
	tb.t.Helper()
	waitFor(tb, fmt.Sprintf("the counts chips to show %v", want), chipsJS, func(got map[string]int) bool {
		for k, n := range want {
			if c, ok := got[k]; !ok || c != n {
				return false
			}
		}
		return true
	})
}

// TestBrowserInstanceListLive: the instance list, opened with an
// operator's token entered in the console's dialog, follows the instances
// stream: an instance started through the API appears without a reload,
// suspended, and turns completed once the event it waits for is sent; the
// counts chips count the instances by status; the status filter and the
// workflow filter show only the matching rows, and the chips count only
// the filtered workflow's instances.
func TestBrowserInstanceListLive(t *testing.T) {
	h := newHost(t)
	h.pushPlugin("kit")
	h.putWorkflow("greet", greetFlow)
	h.putWorkflow("hold", holdFlow)
	for _, id := range []string{"greet-1", "greet-2"} {
		if in := h.start("greet", id, map[string]any{"text": "hi"}, "ended"); in.Status != "completed" {
			t.Fatalf("%s is %s, want completed", id, in.Status)
		}
	}

	tb := openTab(t, h.url)
	tb.open("/instances", operatorSecret, "operator")
	waitRows(tb, "the list", "greet-1=completed greet-2=completed")
	waitChips(tb, map[string]int{"all": 2, "completed": 2, "suspended": 0})
	// What follows must come from the stream, not from loading the list.
	waitTrue(tb, "the live stream to open", q("[data-test=live-state]")+"?.dataset.state === 'open'")
	eval[bool](tb, "window.weftTestNoReload = true")

	h.start("hold", "hold-1", map[string]any{"k": "k1"}, "")
	waitRows(tb, "an instance started through the API", "greet-1=completed greet-2=completed hold-1=suspended")
	waitChips(tb, map[string]int{"all": 3, "completed": 2, "suspended": 1})

	h.do("POST", "/v1/events", map[string]any{"name": "go", "key": "k1", "payload": map[string]any{"ok": true}}).want(t, http.StatusAccepted)
	waitRows(tb, "the released instance", "greet-1=completed greet-2=completed hold-1=completed")
	waitChips(tb, map[string]int{"all": 3, "completed": 3, "suspended": 0})

	h.start("hold", "hold-2", map[string]any{"k": "k2"}, "")
	waitRows(tb, "another instance", "greet-1=completed greet-2=completed hold-1=completed hold-2=suspended")
	waitChips(tb, map[string]int{"all": 4, "completed": 3, "suspended": 1})
	if !eval[bool](tb, "window.weftTestNoReload === true") {
		t.Fatal("the page was reloaded; the list must follow the stream")
	}
	tb.screenshot("instances")

	// The status filter.
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=filter-status]"), "suspended"))
	tb.click("[data-test=filter-apply]")
	waitRows(tb, "the status filter", "hold-2=suspended")
	if hash := eval[string](tb, "location.hash"); !strings.Contains(hash, "status=suspended") {
		t.Errorf("filtered by status, the route is %q; want it to carry status=suspended", hash)
	}
	waitTrue(tb, "the suspended chip to be pressed", q("[data-test=chip-suspended]")+"?.getAttribute('aria-pressed') === 'true'")

	// The workflow filter, from the whole list again.
	tb.click("[data-test=filter-reset]")
	waitRows(tb, "the reset list", "greet-1=completed greet-2=completed hold-1=completed hold-2=suspended")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=filter-workflow]"), "greet"))
	tb.click("[data-test=filter-apply]")
	waitRows(tb, "the workflow filter", "greet-1=completed greet-2=completed")
	waitChips(tb, map[string]int{"all": 2, "completed": 2, "suspended": 0})

	// A filtered list still follows the stream, for its workflow only.
	h.start("greet", "greet-3", map[string]any{"text": "yo"}, "ended")
	h.start("hold", "hold-3", map[string]any{"k": "k3"}, "suspended")
	waitRows(tb, "the filtered list after two more starts", "greet-1=completed greet-2=completed greet-3=completed")
	waitChips(tb, map[string]int{"all": 3, "completed": 3})
}
