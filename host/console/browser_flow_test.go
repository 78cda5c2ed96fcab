package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chargeFlow lets one instance per customer run at once; each waits for
// its receipt, holding its slot.
const chargeFlow = `
name: charge
concurrency: { key: "${ input.c }", limit: 1 }
steps:
  - id: receipt
    wait: { event: charge.receipt, key: "${ input.n }", timeout: 1h }
`

// keyLine is the part of the API's concurrency key page the tests read.
type keyLine struct {
	Key struct {
		Waiting int `json:"waiting"`
		Holders []struct {
			InstanceID string `json:"instance_id"`
		} `json:"holders"`
	} `json:"key"`
}

// awaitWaiting waits, up to 30 seconds, for a key of charge to have n
// instances in its line.
func (h *host) awaitWaiting(key string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.Do(h.t, "GET", "/v1/concurrency/charge?key="+url.QueryEscape(key), nil)
		var l keyLine
		if r.Status == http.StatusOK {
			r.JSON(h.t, &l)
			if l.Key.Waiting == n {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("key %q of charge: %d waiting after 30s (status %d), want %d", key, l.Key.Waiting, r.Status, n)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestBrowserFlow: with a reader's token, the Flow page lists a key with
// one instance holding its slot and two waiting (running 1/1, waiting 2,
// its oldest wait, its policy), and, read again, a key made of markup
// that appeared meanwhile, as text; the
// key's page shows its holder and its line in order, each linked to its
// instance, whose page says which key it counts against and since when
// it waits for a slot, and links back to the key. When the holder ends,
// the key's page, reading it again, shows the slot handed to the first
// in line. The filter by workflow narrows the list; at a phone's size,
// both pages fit the screen.
func TestBrowserFlow(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "charge", chargeFlow)
	h.start("charge", "charge-1", map[string]any{"c": "cus_42", "n": "1"}, "suspended")
	h.start("charge", "charge-2", map[string]any{"c": "cus_42", "n": "2"}, "")
	h.awaitWaiting("cus_42", 1)
	h.start("charge", "charge-3", map[string]any{"c": "cus_42", "n": "3"}, "")
	h.awaitWaiting("cus_42", 2)

	tb := openTab(t, h.url)
	tb.open("/flow", readerSecret, "reader")
	row := `[data-test=flow-row][data-workflow=charge][data-key=cus_42]`
	waitTrue(tb, "the key's row", q(row)+" !== null")
	if got := eval[string](tb, q(row+" [data-test=flow-running]")+".textContent"); got != "1/1" {
		t.Errorf("the row's running is %q, want 1/1", got)
	}
	if text := eval[string](tb, q(row)+".textContent"); !strings.Contains(text, "queue") || eval[string](tb, q(row+" [data-test=flow-waiting]")+".textContent") != "2" ||
		eval[bool](tb, q(row+" time")+" === null") {
		t.Errorf("the row says %q, want 2 waiting since a time, and the policy queue", text)
	}
	tb.screenshot("flow")
	// A key made of markup, which the list, reading its page again, shows
	// as text.
	h.start("charge", "charge-x", map[string]any{"c": hostile, "n": "x"}, "suspended")
	waitTrue(tb, "the row of the key made of markup", `[...document.querySelectorAll('[data-test=flow-row]')].some((r) => r.dataset.key === `+js(hostile)+`)`)
	if got := eval[[]string](tb, textsJS("[data-test=flow-key-link]")); !slices.Contains(got, hostile) {
		t.Errorf("the keys shown are %q, want %q as text among them", got, hostile)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the key made %d <img> in the list", n)
	}

	// The key's page: its holder, its line in order.
	tb.click(row + " [data-test=flow-key-link]")
	waitTrue(tb, "the key's page", q("[data-test=flow-key]")+"?.textContent === 'cus_42'")
	holders := waitFor(tb, "the holder", textsJS("[data-test=holder-link]"), func(s []string) bool { return len(s) > 0 })
	if !slices.Equal(holders, []string{"charge-1"}) {
		t.Errorf("the holders are %q, want charge-1", holders)
	}
	if got := eval[[]string](tb, textsJS("[data-test=line-link]")); !slices.Equal(got, []string{"charge-2", "charge-3"}) {
		t.Errorf("the line is %q, want charge-2 then charge-3", got)
	}
	if got := eval[string](tb, q("[data-test=flow-policy]")+".textContent") + " " + eval[string](tb, q("[data-test=flow-limit]")+".textContent"); got != "queue 1" {
		t.Errorf("the policy and limit are %q, want queue 1", got)
	}

	// A waiter's page: its key, since when it waits, and a link back.
	tb.click(`[data-test=line-row][data-id=charge-2] [data-test=line-link]`)
	waitTrue(tb, "charge-2's page", q("[data-test=instance-id]")+"?.textContent === 'charge-2'")
	waitTrue(tb, "the wait for a slot", q("[data-test=instance-slot-wait] time")+" !== null")
	if got := eval[string](tb, q("[data-test=instance-concurrency-key]")+".textContent"); got != "cus_42" {
		t.Errorf("the instance's concurrency key is %q, want cus_42", got)
	}
	tb.click("[data-test=instance-concurrency-key]")
	waitTrue(tb, "the key's page again", q("[data-test=flow-key]")+"?.textContent === 'cus_42'")
	waitTrue(tb, "its holder", q("[data-test=holder-row][data-id=charge-1]")+" !== null")

	// charge-1 ends: the page, reading the key again, shows the slot
	// handed to charge-2 and charge-3 alone in the line.
	h.Do(t, "POST", "/v1/events", map[string]any{"name": "charge.receipt", "key": "1"}).Want(t, http.StatusAccepted)
	waitFor(tb, "the slot handed to charge-2", textsJS("[data-test=holder-link]"), func(s []string) bool { return slices.Equal(s, []string{"charge-2"}) })
	waitFor(tb, "charge-3 alone in the line", textsJS("[data-test=line-link]"), func(s []string) bool { return slices.Equal(s, []string{"charge-3"}) })
	tb.screenshot("flow-key")

	// At a phone's size, the key's page and the list fit the screen.
	tb.viewport(390, 844)
	tb.do(chromedp.Evaluate[chromedp.Void]("window.scrollTo(0, 0)"))
	checkPhoneFits(tb, "a concurrency key's page")
	tb.click("[data-test=nav-flow]")
	waitTrue(tb, "the list", q(row)+" !== null")
	checkPhoneFits(tb, "the flow list")

	// The filter: another workflow has no key.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=flow-workflow]") + ".value = 'other'"))
	tb.click("[data-test=flow-filter-submit]")
	waitTrue(tb, "the empty list", q("[data-test=flow-empty]")+" !== null")
	if hash := eval[string](tb, "location.hash"); hash != "#/flow?workflow=other" {
		t.Errorf("the filtered list is at %q, want #/flow?workflow=other", hash)
	}
}

// TestBrowserFlowKeyGone: a key nobody holds or waits for (the
// workflow-wide key of a workflow whose instances have keys of their own)
// is said to be so, not shown as an error; a workflow name that cannot
// be one shows the host's problem.
func TestBrowserFlowKeyGone(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "charge", chargeFlow)

	tb := openTab(t, h.url)
	tb.open("/flow/charge", readerSecret, "reader")
	waitTrue(tb, "the note that nothing runs under the key", q("[data-test=flow-gone]")+" !== null")
	if eval[bool](tb, q("[data-test=flow-error]")+" !== null") {
		t.Error("a key nobody holds is shown as an error")
	}
	if got := eval[string](tb, q("[data-test=flow-key]")+".textContent"); !strings.Contains(got, "workflow-wide") {
		t.Errorf("the workflow-wide key is shown as %q", got)
	}
	tb.goTo("/flow/Not%20A%20Name?key=k")
	problem := waitFor(tb, "the host's problem", q("[data-test=flow-error]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if !strings.Contains(problem, "400") || !strings.Contains(problem, `workflow name "Not A Name"`) {
		t.Errorf("the page shows %q, want the host's 400 naming the workflow", problem)
	}
}

// syncFlow lets one attempt of its step run at once per key (input.k);
// each sleeps long enough to hold its slot while the test looks. pingFlow
// starts one attempt of its step an hour per key (input.k): the first
// runs, the next are deferred, each holding its turn.
const (
	syncFlow = `
name: sync
steps:
  - id: call
    activity: kit.sleep
    input: { ms: 600000 }
    timeout: 15m
    concurrency: { key: "${ input.k }", limit: 1 }
`
	pingFlow = `
name: ping
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: "${ input.k }", limit: 1, per: 1h } }
`
)

// awaitStep waits, up to 30 seconds, for the step concurrency key to
// have n attempts in its line and one holding its slot.
func (h *host) awaitStep(key string, n int) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.Do(h.t, "GET", "/v1/step-concurrency?key="+url.QueryEscape(key), nil)
		var l keyLine
		if r.Status == http.StatusOK {
			r.JSON(h.t, &l)
			if l.Key.Waiting == n && len(l.Key.Holders) == 1 {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("step key %q: %d waiting after 30s (status %d), want %d", key, l.Key.Waiting, r.Status, n)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestBrowserFlowStepsAndRates: with a reader's token, the Flow page
// lists a key of the activity steps' concurrency limits, linked to its
// page, which shows it as the steps' (no workflow), the attempt holding
// its slot and the two in its line in order, each linked to its
// instance; a step key made of markup is shown as text, on the list and
// on its page. The page's rate limits table shows a step's rate limit key
// with its terms, two turns ahead and its next turn an hour or more away,
// and a key made of markup as text; at a phone's size the page fits the
// screen.
func TestBrowserFlowStepsAndRates(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "sync", syncFlow)
	h.PutWorkflow(t, "ping", pingFlow)
	for i, id := range []string{"sync-1", "sync-2", "sync-3"} {
		h.start("sync", id, map[string]any{"k": "partner-api"}, "")
		h.awaitStep("partner-api", i)
	}
	h.start("sync", "sync-x", map[string]any{"k": hostile}, "")
	h.awaitStep(hostile, 0)
	for _, id := range []string{"ping-1", "ping-2", "ping-3"} {
		h.start("ping", id, map[string]any{"k": "partner-api"}, "")
	}
	h.start("ping", "ping-x", map[string]any{"k": hostile}, "ended")

	tb := openTab(t, h.url)
	tb.open("/flow", readerSecret, "reader")
	row := `[data-test=flow-row][data-step=true][data-key=partner-api]`
	waitTrue(tb, "the step key's row", q(row)+" !== null")
	if got := eval[string](tb, q(row+" [data-test=flow-waiting]")+".textContent"); got != "2" {
		t.Errorf("the step key's row says %q waiting, want 2", got)
	}
	if got := eval[[]string](tb, textsJS("[data-test=flow-row][data-step=true] [data-test=flow-key-link]")); !slices.Contains(got, hostile) {
		t.Errorf("the step keys shown are %q, want %q as text among them", got, hostile)
	}

	// The rate limits: the step key with its terms and two turns ahead
	// (the other two instances' attempts, deferred), and the key made of
	// markup, as text.
	rate := `[data-test=rate-row][data-kind=step][data-key=partner-api]`
	waitTrue(tb, "the rate limit key's row with two turns ahead", q(rate+" [data-test=rate-ahead]")+"?.textContent === '2'")
	if got := eval[string](tb, q(rate+" [data-test=rate-terms]")+".textContent"); got != "1 per 1h, burst 1" {
		t.Errorf("the rate limit's terms are %q, want 1 per 1h, burst 1", got)
	}
	if next := eval[string](tb, q(rate+" [data-test=rate-next]")+".textContent"); !strings.Contains(next, "(in 2h 59m)") && !strings.Contains(next, "(in 3h 00m)") {
		t.Errorf("the next turn is %q, want one three hours on", next)
	}
	if got := eval[[]string](tb, `[...document.querySelectorAll('[data-test=rate-row]')].map((r) => r.dataset.key)`); !slices.Equal(got, []string{hostile, "partner-api"}) {
		t.Errorf("the rate limit keys are %q, want the one made of markup, then partner-api", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the keys made %d <img> on the Flow page", n)
	}
	tb.viewport(390, 844)
	checkPhoneFits(tb, "the flow list with its rate limits")
	tb.viewport(1280, 900)

	// The step key's page: no workflow, its holder, its line in order.
	tb.click(row + " [data-test=flow-key-link]")
	waitTrue(tb, "the step key's page", q("[data-test=flow-key]")+"?.textContent === 'partner-api'")
	if hash := eval[string](tb, "location.hash"); hash != "#/flow/(steps)?key=partner-api" {
		t.Errorf("the step key's page is at %q, want #/flow/(steps)?key=partner-api", hash)
	}
	holders := waitFor(tb, "the holder", textsJS("[data-test=holder-link]"), func(s []string) bool { return len(s) > 0 })
	if !slices.Equal(holders, []string{"sync-1"}) {
		t.Errorf("the holders are %q, want sync-1", holders)
	}
	if got := eval[[]string](tb, textsJS("[data-test=line-link]")); !slices.Equal(got, []string{"sync-2", "sync-3"}) {
		t.Errorf("the line is %q, want sync-2 then sync-3", got)
	}
	if eval[bool](tb, q("[data-test=workflow-link]")+" !== null") || eval[bool](tb, q("[data-test=flow-steps]")+" === null") {
		t.Error("the step key's page names a workflow, or does not say the steps share the key")
	}
	tb.click(`[data-test=line-row][data-id=sync-2] [data-test=line-link]`)
	waitTrue(tb, "sync-2's page", q("[data-test=instance-id]")+"?.textContent === 'sync-2'")

	// The page of the step key made of markup shows it as text.
	tb.goTo("/flow/(steps)?key=" + url.QueryEscape(hostile))
	waitTrue(tb, "the markup key's holder", q("[data-test=holder-row][data-id=sync-x]")+" !== null")
	if got := eval[string](tb, q("[data-test=flow-key]")+".textContent"); got != hostile {
		t.Errorf("the markup key's heading shows %q, want it as text", got)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the key made %d <img> on its page", n)
	}
	// A step key nobody holds is said so.
	tb.goTo("/flow/(steps)?key=nobody")
	waitTrue(tb, "the note that nothing runs under the step key", q("[data-test=flow-gone]")+" !== null")
}

// TestBrowserPluginRuleRateLimit: the plugin page shows each host rule of
// its grants with its rate limit in words (terms, wait, key), a rule
// without a key of its own under its pattern's, and a key made of markup
// as text (a rule's key has no spaces: hostile's without them).
func TestBrowserPluginRuleRateLimit(t *testing.T) {
	const hostile = `<img/src=x/onerror=alert(1)>`
	h := newHost(t)
	h.PushPlugin(t, "kit")
	grants := `{"hosts": [
		{"pattern": "api.partner.example", "rate_limit": {"limit": 10, "per": "1s", "burst": 20, "max_wait": "5s", "key": "partner"}},
		{"pattern": "hooks.example.com", "rate_limit": {"limit": 60, "per": "1h"}},
		{"pattern": "x.example.com", "rate_limit": {"limit": 1, "per": "1m", "key": ` + js(hostile) + `}},
		{"pattern": "free.example.com"}]}`
	h.Request(t, "PUT", "/v1/plugins/kit/grants", adminSecret, "application/json", []byte(grants)).Want(t, http.StatusOK)

	tb := openTab(t, h.url)
	tb.open("/plugins/kit", readerSecret, "reader")
	rule := func(pattern string) string { return `[data-test=grant-host][data-pattern="` + pattern + `"]` }
	waitTrue(tb, "the grants' host rules", q(rule("api.partner.example"))+" !== null")
	for pattern, want := range map[string]string{
		"api.partner.example": "api.partner.example: 10 per 1s, burst 20, waits ≤ 5s, key partner",
		"hooks.example.com":   "hooks.example.com: 60 per 1h, burst 1, never waits, key hooks.example.com",
		"x.example.com":       "x.example.com: 1 per 1m, burst 1, never waits, key " + hostile,
		"free.example.com":    "free.example.com",
	} {
		if got := eval[string](tb, q(rule(pattern))+".textContent"); got != want {
			t.Errorf("the rule %s reads %q, want %q", pattern, got, want)
		}
	}
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the rule's key made %d <img> on the plugin page", n)
	}
}
