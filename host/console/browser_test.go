package console_test

// The console in a real browser: headless chromium, driven with chromedp,
// on a real host (node, API, example plugins) on loopback. Each test opens
// the console with a token entered in its dialog, as a person would, and
// checks what the pages show and do; the page must log no JavaScript
// error. The tests also take the screenshots the README shows (-screenshots).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/testplugins"
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
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)
	h.PutWorkflow(t, "hold", holdFlow)
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

	h.Do(t, "POST", "/v1/events", map[string]any{"name": "go", "key": "k1", "payload": map[string]any{"ok": true}}).Want(t, http.StatusAccepted)
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

// flakyFlow's step fails its first attempt with a retryable error; the
// retry policy runs a second, which completes.
const flakyFlow = `
name: flaky
steps:
  - id: call
    activity: kit.fail
    input: { code: unavailable, message: the service is warming up, retryable: true, fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 200ms }
    output: call
output: "${ vars.call.attempt }"
`

// historyEntry is the part of a history entry the tests read.
type historyEntry struct {
	Type     string `json:"type"`
	StepPath string `json:"step_path"`
	Attempt  int    `json:"attempt"`
}

// attemptKeys answers "<step_path>#<attempt>" for each attempt in the
// instance's history, in order: what the timeline's bars are keyed by.
func (h *host) attemptKeys(id string) []string {
	h.t.Helper()
	var page struct {
		Items []historyEntry `json:"items"`
	}
	h.Do(h.t, "GET", "/v1/instances/"+id+"/history?limit=1000", nil).Want(h.t, http.StatusOK).JSON(h.t, &page)
	var keys []string
	for _, e := range page.Items {
		if e.Type == "activity_scheduled" {
			keys = append(keys, fmt.Sprintf("%s#%d", e.StepPath, e.Attempt))
		}
	}
	return keys
}

// statusJS is the status the instance page's heading shows.
const statusJS = `document.querySelector('.page-head [data-status]')?.dataset.status ?? ''`

// waitStatus waits until the instance page shows status.
func waitStatus(tb *tab, status string) {
	tb.t.Helper()
	waitFor(tb, "the instance page to show "+status, statusJS, func(s string) bool { return s == status })
}

// TestBrowserTimelineShowsRetriedAttempt: an instance whose step failed
// its first attempt and completed on the retry shows, on its page, one
// timeline bar per attempt (data-attempt "<step_path>#1" and "#2"), the
// first marked failed and the second completed; choosing the first bar
// shows that attempt's failure.
func TestBrowserTimelineShowsRetriedAttempt(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "flaky", flakyFlow)
	if in := h.start("flaky", "flaky-1", map[string]any{}, "ended"); in.Status != "completed" || string(in.Output) != "2" {
		t.Fatalf("flaky-1 is %s with output %s, want completed on attempt 2", in.Status, in.Output)
	}
	keys := h.attemptKeys("flaky-1")
	if len(keys) != 2 || !strings.HasSuffix(keys[0], "#1") || !strings.HasSuffix(keys[1], "#2") {
		t.Fatalf("the history has attempts %v, want one step's attempts 1 and 2", keys)
	}

	tb := openTab(t, h.url)
	tb.open("/instances/flaky-1", adminSecret, "admin")
	waitStatus(tb, "completed")
	bars := `[...document.querySelectorAll('[data-test=timeline] [data-attempt]')].map((b) => b.dataset.attempt)`
	waitFor(tb, "the timeline's bars "+strings.Join(keys, ", "), bars, func(got []string) bool { return slices.Equal(got, keys) })
	class := func(key string) string {
		return eval[string](tb, q(`[data-test=timeline] [data-attempt="`+key+`"]`)+".className")
	}
	if c := class(keys[0]); !strings.Contains(c, "failed") || strings.Contains(c, "completed") {
		t.Errorf("attempt 1's bar has classes %q, want it marked failed", c)
	}
	if c := class(keys[1]); !strings.Contains(c, "completed") || strings.Contains(c, "failed") {
		t.Errorf("attempt 2's bar has classes %q, want it marked completed", c)
	}

	tb.click(`[data-test=timeline] [data-attempt="` + keys[0] + `"]`)
	detail := q(`[data-test=attempt-detail] [data-test=attempt]`)
	waitFor(tb, "attempt 1's detail", detail+"?.dataset.attempt ?? ''", func(s string) bool { return s == keys[0] })
	if text := eval[string](tb, detail+".textContent"); !strings.Contains(text, "unavailable") || !strings.Contains(text, "the service is warming up") {
		t.Errorf("attempt 1's detail does not show its failure (code unavailable, its message): %q", text)
	}
	waitTrue(tb, "the chosen bar to be pressed", q(`[data-test=timeline] [data-attempt="`+keys[0]+`"]`)+".getAttribute('aria-pressed') === 'true'")
	tb.screenshotAt("instance", "[data-test=timeline-section]")
}

// deliverFlow delivers its input with the webhook plugin, once: without
// grants the plugin can reach nothing, and the instance fails.
const deliverFlow = `
name: deliver
steps:
  - { id: send, activity: webhook.deliver, input: "${ input }", output: sent, retry: { max_attempts: 1 } }
output: "${ vars.sent.status }"
`

// TestBrowserCancelAndRetry: with an operator's token, the instance page's
// cancel button (after its reason and its confirmation) cancels a
// suspended instance, which the page then shows cancelled, with the
// reason given; and the retry button retries an instance that failed
// because its plugin was not granted the host it calls, once it has
// been: the page shows it completed, and the receiver got the delivery.
func TestBrowserCancelAndRetry(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PushPlugin(t, "webhook")
	h.PutWorkflow(t, "hold", holdFlow)
	h.PutWorkflow(t, "deliver", deliverFlow)
	h.start("hold", "hold-1", map[string]any{"k": "k1"}, "suspended")
	if in := h.start("deliver", "deliver-1", map[string]any{"n": 1}, "ended"); in.Status != "failed" {
		t.Fatalf("without grants deliver-1 is %s, want failed", in.Status)
	}

	tb := openTab(t, h.url)
	tb.open("/instances/hold-1", operatorSecret, "operator")
	waitStatus(tb, "suspended")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=cancel-reason]"), "no longer needed"))
	tb.click("[data-test=cancel-submit]")
	waitStatus(tb, "cancelled")
	if d := tb.dialogsSeen(); len(d) != 1 || !strings.Contains(d[0], "Cancel instance hold-1?") {
		t.Errorf("dialogs %q, want one confirmation of the cancel", d)
	}
	waitTrue(tb, "the cancel button to go", q("[data-test=cancel]")+" === null")
	// The history says who cancelled it (the operator token's name), and why.
	actor := q("[data-test=history] tr[data-type=instance_cancelled] [data-test=history-actor]")
	waitTrue(tb, "the cancel's actor in the history", actor+" !== null")
	if got := eval[string](tb, actor+".textContent"); got != "by ops: no longer needed" {
		t.Errorf("the cancel's history entry shows %q, want %q", got, "by ops: no longer needed")
	}
	if in := h.get("hold-1"); in.Status != "cancelled" || !strings.Contains(string(in.Error), "no longer needed") {
		t.Errorf("hold-1 is %s with error %s; want cancelled with the reason given", in.Status, in.Error)
	}

	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		// A receiver that takes its time, as real ones do: the retried
		// instance is still running when the retry's answer arrives.
		select {
		case <-time.After(2 * time.Second):
		case <-r.Context().Done():
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)

	tb.goTo("/instances/deliver-1")
	waitStatus(tb, "failed")
	waitTrue(tb, "the failure to be shown", q("[data-test=instance-failure]")+" !== null")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	grants := fmt.Sprintf(`{"hosts": [{"pattern": %q, "private_networks": true}], "config": {"url": %q}, "secrets": {"token": %q}}`,
		hook.URL, hook.URL+"/in", "file:"+tokenFile)
	h.Request(t, "PUT", "/v1/plugins/webhook/grants", adminSecret, "application/json", []byte(grants)).Want(t, http.StatusOK)
	tb.click("[data-test=retry-submit]")
	h.awaitStatus("deliver-1", "completed")
	// The page shows what became of the retried instance by itself, as
	// it does after a cancel.
	if _, err := poll(tb, statusJS, func(s string) bool { return s == "completed" }); err != nil {
		t.Errorf("the retried instance completed, but its page does not show it without a reload: %v", err)
		// What it shows once the person comes back to it.
		tb.goTo("/instances")
		waitTrue(tb, "the list", q("[data-test=instance-row]")+" !== null")
		tb.goTo("/instances/deliver-1")
		waitStatus(tb, "completed")
	}
	waitTrue(tb, "the retry button to go", q("[data-test=retry]")+" === null")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != `{"n":1}` {
		t.Errorf("the hook received %q, want one delivery of {\"n\":1}", got)
	}
}

// TestBrowserReaderHasNoActions: with a reader's token, the page of a
// suspended instance offers no cancel, retry, pause or send-event button (only
// what a reader may do, the export), nor does the list offer to select
// instances for a bulk cancel; and a cancel forged from the page with the
// reader's token, as the console keeps it, is refused with 403.
func TestBrowserReaderHasNoActions(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "hold", holdFlow)
	h.start("hold", "hold-1", map[string]any{"k": "k1"}, "suspended")

	tb := openTab(t, h.url)
	tb.open("/instances/hold-1", readerSecret, "reader")
	waitStatus(tb, "suspended")
	// The actions and the waits are drawn: the export and the bookmark.
	waitTrue(tb, "the page's actions and waits", q("[data-test=export]")+" !== null && "+q("[data-test=bookmark]")+" !== null")
	for _, sel := range []string{"cancel", "cancel-submit", "retry", "retry-submit", "pause", "pause-submit", "resume", "resume-submit", "send-event", "send-event-submit"} {
		if eval[bool](tb, q("[data-test="+sel+"]")+" !== null") {
			t.Errorf("a reader is offered [data-test=%s]", sel)
		}
	}

	type answer struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	res := eval[answer](tb, `(async () => {
		const res = await fetch('/v1/instances/hold-1/cancel', {method: 'POST',
			headers: {Authorization: 'Bearer ' + sessionStorage.getItem('weft.token'), 'Content-Type': 'application/json'},
			body: JSON.stringify({reason: 'forged'})});
		const p = await res.json();
		return {status: res.status, detail: p.detail};
	})()`)
	if res.Status != http.StatusForbidden || !strings.Contains(res.Detail, "reader") {
		t.Errorf("a reader's cancel from the page answered %d %q, want 403 naming the role", res.Status, res.Detail)
	}
	if in := h.get("hold-1"); in.Status != "suspended" {
		t.Errorf("hold-1 is %s after the forged cancel, want suspended", in.Status)
	}

	tb.goTo("/instances")
	waitRows(tb, "the list", "hold-1=suspended")
	if n := eval[int](tb, `document.querySelectorAll('[data-test=select-instance], [data-test=select-all]').length`); n != 0 {
		t.Errorf("a reader is offered %d checkboxes to select instances for a bulk cancel", n)
	}
}

// stepIDs answers the ids of a definition's steps, nested ones included
// (then and else, a foreach's do, each parallel branch).
func stepIDs(steps []*definition.Step) []string {
	var ids []string
	for _, s := range steps {
		ids = append(ids, s.ID)
		if s.If != nil {
			ids = append(ids, stepIDs(s.If.Then)...)
			ids = append(ids, stepIDs(s.If.Else)...)
		}
		if s.Foreach != nil {
			ids = append(ids, stepIDs(s.Foreach.Do)...)
		}
		for _, b := range s.Parallel {
			ids = append(ids, stepIDs(b.Steps)...)
		}
	}
	return ids
}

// activityPlugins answers the plugins a definition's steps call.
func activityPlugins(steps []*definition.Step, into map[string]bool) {
	for _, s := range steps {
		if s.Activity != nil {
			into[s.Activity.Plugin] = true
		}
		if s.If != nil {
			activityPlugins(s.If.Then, into)
			activityPlugins(s.If.Else, into)
		}
		if s.Foreach != nil {
			activityPlugins(s.Foreach.Do, into)
		}
		for _, b := range s.Parallel {
			activityPlugins(b.Steps, into)
		}
	}
}

// TestBrowserGraphOfEveryExample: every workflow in examples/workflows,
// saved with the example plugins it calls, is drawn on its page as an SVG
// with one <g data-step="<id>"> per step of its definition, nested steps
// included, and no error. The page of a plugin lists the workflows that
// call it and the instances pinned to its version; the events page shows
// its dead letters' table.
func TestBrowserGraphOfEveryExample(t *testing.T) {
	h := newHost(t)
	for _, p := range []string{"kit", "text", "thumbnail", "webhook"} {
		h.PushPlugin(t, p)
	}
	files, err := filepath.Glob(filepath.Join(testplugins.Root(t), "examples", "workflows", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no example workflows (%v)", err)
	}
	type example struct {
		name   string
		source []byte
		ids    []string
	}
	var examples []example
	textUsers := []string{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		def, err := definition.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		examples = append(examples, example{name: def.Name, source: src, ids: stepIDs(def.Steps)})
		uses := map[string]bool{}
		activityPlugins(def.Steps, uses)
		if uses["text"] {
			textUsers = append(textUsers, def.Name)
		}
	}
	// A workflow that starts another as a child is saved after it: save
	// in rounds until every one is, or a round saves none.
	saved := map[string]bool{}
	for len(saved) < len(examples) {
		before := len(saved)
		var refused []string
		for _, e := range examples {
			if saved[e.name] {
				continue
			}
			r := h.Request(t, "PUT", "/v1/workflows/"+e.name, adminSecret, "application/yaml", e.source)
			if r.Status == http.StatusCreated {
				saved[e.name] = true
			} else {
				refused = append(refused, fmt.Sprintf("%s: %d %s", e.name, r.Status, r.Body))
			}
		}
		if len(saved) == before {
			t.Fatalf("the host refuses example workflows:\n%s", strings.Join(refused, "\n"))
		}
	}

	tb := openTab(t, h.url)
	tb.open("/workflows", adminSecret, "admin")
	for _, e := range examples {
		tb.goTo("/workflows/" + e.name)
		waitTrue(tb, "the graph of "+e.name, q("[data-test=workflow-name]")+"?.textContent === "+js(e.name)+
			" && ("+q("[data-test=workflow-graph]")+" !== null || "+q("[data-test=graph-error]")+" !== null)")
		if msg := eval[string](tb, q("[data-test=graph-error]")+"?.textContent ?? ''"); msg != "" {
			t.Errorf("%s: the page cannot draw the graph: %s", e.name, msg)
			continue
		}
		got := eval[[]string](tb, `[...`+q("[data-test=workflow-graph]")+`.querySelectorAll('g[data-step]')].map((g) => g.dataset.step)`)
		want := slices.Clone(e.ids)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the graph draws steps %v, want one <g data-step> for each of %v", e.name, got, want)
		}
		if e.name == "onboarding" {
			tb.screenshotAt("workflow", "[data-test=graph-section]")
		}
	}

	// An instance that pinned the text plugin, for its page to list.
	input, err := os.ReadFile(filepath.Join(testplugins.Root(t), "examples", "workflows", "inputs", "hello.json"))
	if err != nil {
		t.Fatal(err)
	}
	if in := h.start("hello", "hello-1", json.RawMessage(input), "ended"); in.Status != "completed" {
		t.Fatalf("hello-1 is %s, want completed: %s", in.Status, in.Error)
	}
	tb.goTo("/plugins/text")
	waitTrue(tb, "the text plugin's page", q("[data-test=plugin-name]")+"?.textContent === 'text'")
	waitFor(tb, "the instances pinned to text's version", q("[data-test=version-instances]")+"?.textContent ?? ''",
		func(s string) bool { return strings.Contains(s, "hello-1") })
	users := waitFor(tb, "the workflows that call text", `[...document.querySelectorAll('[data-test=plugin-workflows] li > a')].map((a) => a.textContent)`,
		func(got []string) bool { return len(got) > 0 })
	slices.Sort(users)
	slices.Sort(textUsers)
	if !slices.Equal(users, textUsers) {
		t.Errorf("the text plugin's page lists workflows %v, want those that call it, %v", users, textUsers)
	}
	waitTrue(tb, "the plugin's grants", q("[data-test=plugin-grants]")+" !== null")
	tb.screenshot("plugin")

	tb.goTo("/events")
	waitTrue(tb, "the dead letters", q("[data-test=dead-rows] tr")+" !== null && "+q("[data-test=send-event-section]")+" !== null")
	tb.screenshot("events")
}

// beatFlow's work heartbeats its progress ({done_ms}) every 20ms, and on
// its first attempt stops at 200ms without returning: the host fails
// that attempt by its heartbeat_timeout, with the last details, and the
// retry resumes from them.
const beatFlow = `
name: beat
steps:
  - id: work
    activity: kit.work
    input: { ms: 3000, beat_ms: 20, stall_at_ms: 200 }
    timeout: 30s
    heartbeat_timeout: 1s
    retry: { max_attempts: 3, initial_interval: 10ms }
    output: work
output: "${ vars.work }"
`

// TestBrowserAttemptShowsLastHeartbeat: an attempt that heartbeated with
// details and then timed out by its heartbeat_timeout has its bar marked
// as a heartbeat timeout, and its detail panel shows the timeout and the
// details it last reported.
func TestBrowserAttemptShowsLastHeartbeat(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "beat", beatFlow)
	if in := h.start("beat", "beat-1", map[string]any{}, "ended"); in.Status != "completed" {
		t.Fatalf("beat-1 is %s (%s), want completed after a retry", in.Status, in.Error)
	}
	keys := h.attemptKeys("beat-1")
	if len(keys) < 2 {
		t.Fatalf("the history has attempts %v, want the stalled one and its retry", keys)
	}

	tb := openTab(t, h.url)
	tb.open("/instances/beat-1", readerSecret, "reader")
	waitStatus(tb, "completed")
	bar := q(`[data-test=timeline] [data-attempt="` + keys[0] + `"]`)
	waitTrue(tb, "attempt 1's bar", bar+" !== null")
	if !eval[bool](tb, bar+".dataset.heartbeatTimeout === 'true' && "+bar+".classList.contains('timeout')") {
		t.Errorf("attempt 1's bar (classes %q) is not marked as a heartbeat timeout", eval[string](tb, bar+".className"))
	}
	tb.click(`[data-test=timeline] [data-attempt="` + keys[0] + `"]`)
	detail := q(`[data-test=attempt-detail] [data-test=attempt]`)
	waitFor(tb, "attempt 1's detail", detail+"?.dataset.attempt ?? ''", func(s string) bool { return s == keys[0] })
	waitTrue(tb, "the heartbeat timeout badge", q(`[data-test=attempt-detail] [data-test=heartbeat-timeout]`)+" !== null")
	var beat struct {
		DoneMS *int64 `json:"done_ms"`
	}
	text := eval[string](tb, q(`[data-test=attempt-detail] [data-test=last-heartbeat]`)+"?.textContent ?? ''")
	if err := json.Unmarshal([]byte(text), &beat); err != nil || beat.DoneMS == nil || *beat.DoneMS > 200 {
		t.Errorf("attempt 1's last heartbeat shows %q, want the details it last reported, {done_ms} up to 200 (%v)", text, err)
	}

	// The completed retry reported none of its own when it ended.
	tb.click(`[data-test=timeline] [data-attempt="` + keys[len(keys)-1] + `"]`)
	waitFor(tb, "the last attempt's detail", detail+"?.dataset.attempt ?? ''", func(s string) bool { return s == keys[len(keys)-1] })
	if eval[bool](tb, q(`[data-test=attempt-detail] [data-test=heartbeat-timeout]`)+" !== null") {
		t.Error("the completed attempt is marked as a heartbeat timeout")
	}
}

// focusJS describes the focused element: "h1:<text>", "main", or its
// tag and data-test.
const focusJS = `(() => { const a = document.activeElement; if (!a) return ''; if (a.tagName === 'H1') return 'h1:' + a.textContent;
	if (a.id === 'main') return 'main'; return a.tagName.toLowerCase() + (a.dataset.test ? '[' + a.dataset.test + ']' : ''); })()`

// press sends keys, one keystroke each, to the focused element.
func (tb *tab) press(keys string) {
	tb.t.Helper()
	tb.do(chromedp.KeyEvent(keys))
}

// TestBrowserKeyboard: after each route change the focus is on the new
// page's heading; "g" then i, w, s, p or e goes to a section; "/" focuses
// the search box; none of them fires while typing in a field; "?" shows
// the list of shortcuts, which Escape closes; the skip link, focused,
// is shown and moves the focus to main.
func TestBrowserKeyboard(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)
	h.start("greet", "greet-1", map[string]any{"text": "hi"}, "ended")

	tb := openTab(t, h.url)
	tb.open("/instances", adminSecret, "admin")
	waitRows(tb, "the list", "greet-1=completed")
	waitFor(tb, "the focus on the heading", focusJS, func(s string) bool { return s == "h1:Instances" })

	for _, c := range []struct{ key, hash, heading string }{
		{"w", "#/workflows", "h1:Workflows"},
		{"s", "#/schedules", "h1:Schedules"},
		{"f", "#/flow", "h1:Flow"},
		{"p", "#/plugins", "h1:Plugins"},
		{"e", "#/events", "h1:Events"},
		{"i", "#/instances", "h1:Instances"},
	} {
		tb.press("g" + c.key)
		waitFor(tb, "g "+c.key+" to go to "+c.hash, "location.hash", func(s string) bool { return s == c.hash })
		waitFor(tb, "the focus on "+c.heading, focusJS, func(s string) bool { return s == c.heading })
	}
	// A link followed moves the focus to its page's heading too.
	waitRows(tb, "the list again", "greet-1=completed")
	tb.click(`[data-test=instance-row][data-id=greet-1] [data-test=instance-link]`)
	waitFor(tb, "the focus on the instance's heading", focusJS, func(s string) bool { return s == "h1:Instance greet-1" })
	waitStatus(tb, "completed")
	if f := eval[string](tb, focusJS); f != "h1:Instance greet-1" {
		t.Errorf("once the instance page has drawn, the focus is on %q, want its heading still", f)
	}

	tb.press("gi")
	waitFor(tb, "the instance list", focusJS, func(s string) bool { return s == "h1:Instances" })
	tb.press("/")
	waitFor(tb, "/ to focus the search box", focusJS, func(s string) bool { return s == "input[filter-id]" })
	// chromedp sends the "/" keystroke's character as an event of its
	// own, after the keydown moved the focus, which the page cannot
	// cancel (a browser's own keystroke it can): empty the box first.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=filter-id]") + ".value = ''"))
	// Typed into the field, the keys are text, not shortcuts.
	tb.press("gw?")
	if v := eval[string](tb, q("[data-test=filter-id]")+".value"); v != "gw?" {
		t.Errorf("the search box holds %q, want the keys typed into it", v)
	}
	if hash := eval[string](tb, "location.hash"); hash != "#/instances" {
		t.Errorf("typing g w in the search box went to %q", hash)
	}
	if eval[bool](tb, q("[data-test=keys-dialog]")+".open") {
		t.Error("typing ? in the search box opened the shortcuts")
	}

	// "?" from the page.
	tb.do(chromedp.Evaluate[chromedp.Void]("document.activeElement.blur()"))
	tb.press("?")
	waitTrue(tb, "the shortcuts dialog", q("[data-test=keys-dialog]")+".open")
	if text := eval[string](tb, q("[data-test=keys-dialog]")+".textContent"); !strings.Contains(text, "Workflows") || !strings.Contains(text, "Search") {
		t.Errorf("the shortcuts dialog says %q, want the shortcuts listed", text)
	}
	// Over the dialog, shortcuts do nothing.
	tb.press("gw")
	if hash := eval[string](tb, "location.hash"); hash != "#/instances" {
		t.Errorf("g w over the shortcuts dialog went to %q", hash)
	}
	tb.press(kb.Escape)
	waitTrue(tb, "the shortcuts dialog to close", "!"+q("[data-test=keys-dialog]")+".open")

	// The skip link, first in the page, shows when focused.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=skip-link]") + ".focus()"))
	if top := eval[float64](tb, q("[data-test=skip-link]")+".getBoundingClientRect().top"); top < 0 {
		t.Errorf("the focused skip link is off screen (top %v)", top)
	}
	if first := eval[string](tb, `[...document.querySelectorAll('a[href], button, input, select, textarea')][0].dataset.test`); first != "skip-link" {
		t.Errorf("the first focusable element is %q, want the skip link", first)
	}
	tb.press(kb.Enter)
	waitFor(tb, "the skip link to focus main", focusJS, func(s string) bool { return s == "main" })
	if hash := eval[string](tb, "location.hash"); hash != "#/instances" {
		t.Errorf("the skip link changed the route to %q", hash)
	}
}

// overflowJS answers how many CSS pixels the page is wider than its
// viewport (0 when nothing overflows horizontally), and the widest
// elements to blame when it is.
const overflowJS = `(() => {
	const over = document.documentElement.scrollWidth - window.innerWidth;
	const wide = over <= 0 ? [] : [...document.querySelectorAll('body *')]
		.filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5 && !e.closest('.table-wrap, pre, .graph-wrap, .source'))
		.slice(0, 5).map((e) => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).replace(/ /g, '.') : '') + (e.dataset.test ? '[' + e.dataset.test + ']' : ''));
	return {over, wide};
})()`

type overflow struct {
	Over float64  `json:"over"`
	Wide []string `json:"wide"`
}

// checkPhoneFits fails the test when the page at a phone's width can be
// scrolled sideways, or when a section of the nav is not on screen at
// the top of the page (the nav scrolls with the page: a click further
// down, which scrolls to what it clicks, takes it off screen).
func checkPhoneFits(tb *tab, what string) {
	tb.t.Helper()
	if o := eval[overflow](tb, overflowJS); o.Over > 0 {
		tb.t.Errorf("%s: the page is %vpx wider than the phone's screen; past its right edge: %v", what, o.Over, o.Wide)
	}
	type box struct{ Left, Right, Top, Bottom, Width, Height float64 }
	links := eval[[]box](tb, `window.scrollTo(0, 0), [...document.querySelectorAll('header nav a')].map((a) => { const r = a.getBoundingClientRect();
		return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height}; })`)
	if len(links) != 7 {
		tb.t.Fatalf("%s: the nav has %d links, want 7", what, len(links))
	}
	w := float64(tb.w)
	for i, b := range links {
		// Large enough to tap (WCAG's minimum target is 24px).
		if b.Left < 0 || b.Right > w || b.Top < 0 || b.Width < 24 || b.Height < 24 {
			tb.t.Errorf("%s: nav link %d is at %+v, not wholly on a %dpx wide screen or too small to tap", what, i, b, tb.w)
		}
	}
}

// TestBrowserPhone: at a phone's size (390x844), the instance list and
// an instance's page (a retried attempt, a wait with its event form)
// fit the screen's width, and the nav is on screen and works.
func TestBrowserPhone(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "flaky", flakyFlow)
	h.PutWorkflow(t, "hold", holdFlow)
	h.start("flaky", "flaky-with-a-rather-long-instance-id-1", map[string]any{}, "ended")
	h.start("hold", "hold-1", map[string]any{"k": "order-2026-11-28-000042"}, "suspended")

	tb := openTab(t, h.url)
	tb.viewport(390, 844)
	tb.open("/instances", operatorSecret, "operator")
	waitRows(tb, "the list", "flaky-with-a-rather-long-instance-id-1=completed hold-1=suspended")
	checkPhoneFits(tb, "the instance list")
	tb.screenshot("phone")

	tb.goTo("/instances/flaky-with-a-rather-long-instance-id-1")
	waitStatus(tb, "completed")
	waitTrue(tb, "the timeline", q("[data-test=timeline] [data-attempt]")+" !== null")
	tb.click(`[data-test=timeline] [data-attempt]`)
	waitTrue(tb, "an attempt's detail", q("[data-test=attempt-detail] [data-test=attempt]")+" !== null")
	checkPhoneFits(tb, "a completed instance's page")

	tb.goTo("/instances/hold-1")
	waitStatus(tb, "suspended")
	waitTrue(tb, "the event form", q("[data-test=send-event]")+" !== null")
	checkPhoneFits(tb, "a suspended instance's page")

	// The nav works by touch.
	tb.click("[data-test=nav-workflows]")
	waitFor(tb, "the workflows page", "location.hash", func(s string) bool { return s == "#/workflows" })
	waitTrue(tb, "the workflows", q("main h1")+"?.textContent === 'Workflows'")
	checkPhoneFits(tb, "the workflows page")
}

// localInputJS is the value a datetime-local input shows for the RFC 3339
// time iso, in the browser's zone, to the second.
func localInputJS(iso string) string {
	return `(() => { const d = new Date(` + js(iso) + `); const p = (n) => String(n).padStart(2, '0');
		return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds()); })()`
}

// applyFilters resets the list's filters, sets the fields given (by
// data-test, to a JavaScript expression's value) and applies them.
func applyFilters(tb *tab, fields map[string]string) {
	tb.t.Helper()
	tb.goTo("/instances")
	waitTrue(tb, "the unfiltered list", "location.hash === '#/instances' && "+q("[data-test=instance-row]")+" !== null && "+
		`[...document.querySelectorAll('[data-test=instance-filters] input, [data-test=instance-filters] select')].every((e) => e.value === '' || e.value === 'newest')`)
	for sel, v := range fields {
		tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test="+sel+"]") + ".value = " + v))
	}
	tb.click("[data-test=filter-apply]")
}

// TestBrowserInstanceListSearches: the instance list's created-after and
// created-before fields (to the second) show only the instances created
// in the range, and keep their bounds when the filters are applied
// again; the id search finds one instance by its exact id; the search
// by waiting event and key finds the instance waiting for them, and so
// does the key alone; and a bulk cancel of two rows selected cancels
// both, with the reason given.
func TestBrowserInstanceListSearches(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", greetFlow)
	h.PutWorkflow(t, "hold", holdFlow)
	h.start("greet", "greet-1", map[string]any{"text": "hi"}, "ended")
	var first struct {
		CreatedAt time.Time `json:"created_at"`
	}
	h.Do(t, "GET", "/v1/instances/greet-1", nil).Want(t, http.StatusOK).JSON(t, &first)
	// The range's bound: the second after greet-1's, which the others
	// are created in or after.
	bound := first.CreatedAt.Truncate(time.Second).Add(time.Second)
	for time.Now().Before(bound) {
		time.Sleep(10 * time.Millisecond) // the clock, not the host, is waited for
	}
	h.start("greet", "greet-2", map[string]any{"text": "yo"}, "ended")
	h.start("hold", "hold-1", map[string]any{"k": "k1"}, "suspended")
	h.start("hold", "hold-2", map[string]any{"k": "k2"}, "suspended")
	all := "greet-1=completed greet-2=completed hold-1=suspended hold-2=suspended"

	tb := openTab(t, h.url)
	tb.open("/instances", operatorSecret, "operator")
	waitRows(tb, "the list", all)

	boundISO := bound.UTC().Format(time.RFC3339)
	applyFilters(tb, map[string]string{"filter-created-after": localInputJS(boundISO)})
	waitRows(tb, "created after "+boundISO, "greet-2=completed hold-1=suspended hold-2=suspended")
	// Applied again with another filter, the bound is where it was.
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=filter-status]"), "completed"))
	tb.click("[data-test=filter-apply]")
	waitRows(tb, "created after "+boundISO+" and completed", "greet-2=completed")
	// Compared as instants: a field's value drops the seconds when they
	// are zero (a valid normalized local date and time string).
	if !eval[bool](tb, "new Date("+q("[data-test=filter-created-after]")+".value).getTime() === new Date("+js(boundISO)+").getTime()") {
		t.Errorf("after applying the filters again, created after shows %q, want the instant %s", eval[string](tb, q("[data-test=filter-created-after]")+".value"), boundISO)
	}

	applyFilters(tb, map[string]string{"filter-created-before": localInputJS(boundISO)})
	waitRows(tb, "created before "+boundISO, "greet-1=completed")

	applyFilters(tb, map[string]string{"filter-id": js("hold-2")})
	waitRows(tb, "the id search", "hold-2=suspended")
	applyFilters(tb, map[string]string{"filter-id": js("hold")})
	waitTrue(tb, "no instance with a partial id", q("[data-test=instance-rows]")+"?.textContent.includes('No instances match')")

	applyFilters(tb, map[string]string{"filter-event": js("go"), "filter-key": js("k1")})
	waitRows(tb, "the search by event and key", "hold-1=suspended")
	if hash := eval[string](tb, "location.hash"); !strings.Contains(hash, "event=go") || !strings.Contains(hash, "key=k1") {
		t.Errorf("searched by event and key, the route is %q", hash)
	}
	// The key alone: under any event a saved workflow waits for.
	applyFilters(tb, map[string]string{"filter-key": js("k1")})
	waitRows(tb, "the search by key alone", "hold-1=suspended")

	// Bulk cancel of the two suspended instances.
	tb.goTo("/instances")
	waitRows(tb, "the whole list", all)
	for _, id := range []string{"hold-1", "hold-2"} {
		tb.click(`[data-test=instance-row][data-id="` + id + `"] [data-test=select-instance]`)
	}
	waitFor(tb, "the bulk bar", q("[data-test=bulk-bar]")+"?.hidden === false ? "+q("[data-test=selected-count]")+".textContent : ''",
		func(s string) bool { return s == "2 selected" })
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=bulk-reason]"), "batch closed"))
	tb.click("[data-test=bulk-cancel]")
	outcomes := `[...document.querySelectorAll('[data-test=cancel-outcome]')].map((o) => o.dataset.id + '=' + o.dataset.outcome).sort().join(' ')`
	waitFor(tb, "the bulk cancel's outcomes", outcomes, func(s string) bool { return s == "hold-1=cancelled hold-2=cancelled" })
	if d := tb.dialogsSeen(); len(d) != 1 || !strings.Contains(d[0], "Cancel 2 instance(s)?") {
		t.Errorf("dialogs %q, want one confirmation of the bulk cancel", d)
	}
	for _, id := range []string{"hold-1", "hold-2"} {
		if in := h.awaitStatus(id, "cancelled"); !strings.Contains(string(in.Error), "batch closed") {
			t.Errorf("%s was cancelled with %s, want the reason given", id, in.Error)
		}
	}
	waitRows(tb, "the cancelled rows", "greet-1=completed greet-2=completed hold-1=cancelled hold-2=cancelled")
	waitTrue(tb, "the bulk bar to go", q("[data-test=bulk-bar]")+".hidden")
}

// approveFlow logs two lines, then waits for the event approved with the
// instance's key, for an hour at most (a timer), and echoes its payload.
const approveFlow = `
name: approve
steps:
  - { id: note, activity: kit.log, input: { lines: ["info:asked for approval", "warn:no reviewer yet"] }, output: note }
  - id: wait
    wait: { event: approved, key: "${ input.k }", timeout: 1h }
    output: got
  - { id: echo, activity: kit.echo, input: "${ vars.got }", output: echoed }
output: "${ vars.echoed }"
`

// TestBrowserInstancePageActions: the page of a suspended instance shows
// its priority (the start's), and no fairness key for an instance in the
// shared lane, the due time of its wait's timer, and, for an attempt, the
// node it ran on and its log lines; its export downloads the instance's
// state; and the event its wait expects, sent from the page with a
// payload, completes it with that payload.
func TestBrowserInstancePageActions(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "approve", approveFlow)
	started := time.Now()
	h.Do(t, "POST", "/v1/workflows/approve/instances?wait=60s&until=suspended",
		map[string]any{"id": "approve-1", "input": map[string]any{"k": "doc-42"}, "priority": 2}).Want(t, http.StatusCreated)
	keys := h.attemptKeys("approve-1")
	if len(keys) != 1 {
		t.Fatalf("the history has attempts %v, want the log step's one", keys)
	}

	tb := openTab(t, h.url)
	downloads := t.TempDir()
	ctx, cancel := context.WithTimeout(tb.ctx, waitLimit)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	tb.open("/instances/approve-1", operatorSecret, "operator")
	waitStatus(tb, "suspended")

	// The start's priority; no fairness key: the shared lane.
	if p := eval[string](tb, q("[data-test=instance-priority]")+"?.textContent ?? ''"); p != "2" {
		t.Errorf("the page shows priority %q, want the start's, 2", p)
	}
	if eval[bool](tb, q("[data-test=instance-fairness-key]")+" !== null") {
		t.Error("the page shows a fairness key for an instance in the shared lane")
	}

	// The timer of the wait's timeout, due an hour after it began.
	due := waitFor(tb, "the wait's timer", q("[data-test=timer] time")+"?.getAttribute('datetime') ?? ''", func(s string) bool { return s != "" })
	if d, err := time.Parse(time.RFC3339Nano, due); err != nil || d.Before(started.Add(time.Hour-time.Minute)) || d.After(time.Now().Add(time.Hour+time.Minute)) {
		t.Errorf("the timer is shown due %q (%v), want an hour after the wait began", due, err)
	}
	if text := eval[string](tb, q("[data-test=timer]")+".textContent"); !strings.Contains(text, "in ") {
		t.Errorf("the timer's row says %q, want how long until it is due", text)
	}

	// The log step's attempt: its node and its log lines.
	tb.click(`[data-test=timeline] [data-attempt="` + keys[0] + `"]`)
	detail := q(`[data-test=attempt-detail] [data-test=attempt]`)
	waitFor(tb, "the attempt's detail", detail+"?.dataset.attempt ?? ''", func(s string) bool { return s == keys[0] })
	if node := eval[string](tb, q("[data-test=attempt-detail] [data-test=attempt-node]")+"?.textContent ?? ''"); node != "n1" {
		t.Errorf("the attempt's detail names node %q, want n1", node)
	}
	lines := `[...document.querySelectorAll('[data-test=attempt-detail] [data-test=log-lines] tbody tr')].map((r) => r.textContent)`
	got := waitFor(tb, "the attempt's log lines", lines, func(l []string) bool { return len(l) >= 2 })
	joined := strings.Join(got, "\n")
	for _, want := range []string{"asked for approval (attempt 1)", "no reviewer yet (attempt 1)", "n1", "WARN"} {
		if !strings.Contains(strings.ToUpper(joined), strings.ToUpper(want)) {
			t.Errorf("the attempt's log lines %q do not show %q", got, want)
		}
	}

	// The export downloads the state.
	tb.click("[data-test=export]")
	file := filepath.Join(downloads, "approve-1.state.json")
	var state []byte
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(file); err == nil && json.Valid(b) {
			state = b
			break
		}
		if time.Now().After(deadline) {
			names, _ := os.ReadDir(downloads)
			t.Fatalf("after %v no %s was downloaded (the directory holds %v)", waitLimit, file, names)
		}
		<-tick.C // polling under the deadline above
	}
	if !strings.Contains(string(state), `"approve-1"`) || !strings.Contains(string(state), `"doc-42"`) {
		t.Errorf("the exported state does not hold the instance: %.300s", state)
	}

	// The event the wait expects, sent from the page.
	waitTrue(tb, "the event form", q("[data-test=bookmark] [data-test=event-payload]")+" !== null")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=bookmark] [data-test=event-payload]"), `{"approved": true, "by": "ops"}`))
	tb.click("[data-test=send-event-submit]")
	waitStatus(tb, "completed")
	if in := h.get("approve-1"); in.Status != "completed" || string(in.Output) != `{"approved":true,"by":"ops"}` {
		t.Errorf("approve-1 is %s with output %s, want completed with the payload sent", in.Status, in.Output)
	}
	waitFor(tb, "the output shown", q("[data-test=instance-output]")+"?.textContent ?? ''", func(s string) bool { return strings.Contains(s, `"by": "ops"`) })
	waitTrue(tb, "the wait to go", q("[data-test=bookmark]")+" === null")
}

// parentFlow waits for a child instance of kidFlow, which echoes its input.
const parentFlow = `
name: parent
steps:
  - id: audit
    workflow: kid
    input: { order: "${ input.order }" }
    output: audit
output: "${ vars.audit }"
`

const kidFlow = `
name: kid
steps:
  - id: echo
    activity: kit.echo
    input: "${ input }"
    output: echoed
output: "${ vars.echoed }"
`

// TestBrowserParentAndChildLinks: a parent's page links the child its
// child step started, and the child's page links back to its parent and
// the step that started it.
func TestBrowserParentAndChildLinks(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "kid", kidFlow)
	h.PutWorkflow(t, "parent", parentFlow)
	if in := h.start("parent", "parent-1", map[string]any{"order": "A-1"}, "ended"); in.Status != "completed" {
		t.Fatalf("parent-1 is %s (%s), want completed", in.Status, in.Error)
	}

	tb := openTab(t, h.url)
	tb.open("/instances/parent-1", readerSecret, "reader")
	waitStatus(tb, "completed")
	ids := `[...document.querySelectorAll('[data-test=children] [data-test=child-link]')].map((a) => a.dataset.id)`
	kids := waitFor(tb, "the child's link", ids, func(l []string) bool { return len(l) > 0 })
	if len(kids) != 1 || kids[0] == "" {
		t.Fatalf("the parent's page links children %q, want the one its step started", kids)
	}
	if got := h.get(kids[0]); got.Workflow != "kid" || got.Status != "completed" {
		t.Fatalf("the linked child %s is %s of %q, want a completed kid", kids[0], got.Status, got.Workflow)
	}

	tb.click(`[data-test=children] [data-test=child-link]`)
	waitFor(tb, "the child's page", "location.hash", func(p string) bool { return p == "#/instances/"+kids[0] })
	waitStatus(tb, "completed")
	parent := waitFor(tb, "the link to the parent", q("[data-test=parent-link]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if parent != "parent-1" {
		t.Errorf("the child's page links parent %q, want parent-1", parent)
	}
	if step := eval[string](tb, q("[data-test=parent-link]")+".parentElement.textContent"); !strings.Contains(step, "audit") {
		t.Errorf("the child's parent row says %q, want the step audit named", step)
	}
}

// backoffFlow fails its step and waits an hour before the next attempt.
const backoffFlow = `
name: backoff
steps:
  - id: call
    activity: kit.fail
    input: { code: unavailable, message: down for maintenance, retryable: true }
    retry: { max_attempts: 3, initial_interval: 1h }
    output: call
`

// TestBrowserCancelledRetryWaitEndsAtTheCancel: an instance cancelled
// while it waits an hour to retry its step shows that wait ending at the
// cancel, not at its due time an hour later: the time axis ends at the
// cancel, which sits at the timeline's right end, and the retry wait's
// bar ends there too, titled as ended by the cancel.
func TestBrowserCancelledRetryWaitEndsAtTheCancel(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "backoff", backoffFlow)
	h.start("backoff", "backoff-1", map[string]any{}, "suspended")
	h.Do(t, "POST", "/v1/instances/backoff-1/cancel", map[string]any{"reason": "maintenance is over"}).Want(t, http.StatusAccepted)
	h.awaitStatus("backoff-1", "cancelled")

	tb := openTab(t, h.url)
	tb.open("/instances/backoff-1", adminSecret, "admin")
	waitStatus(tb, "cancelled")
	span := q(`[data-test=timeline] [data-span=retry]`)
	waitTrue(tb, "the retry wait's bar", span+" !== null")
	mark := q(`[data-test=timeline] [data-mark=instance_cancelled]`)
	waitTrue(tb, "the cancel's mark", mark+" !== null")
	// Both in percent of the axis.
	spanEnd := eval[float64](tb, `(() => { const s = `+span+`.style; return parseFloat(s.left) + parseFloat(s.width); })()`)
	markAt := eval[float64](tb, `parseFloat(`+mark+`.style.left)`)
	if markAt < 95 {
		t.Errorf("the cancel is drawn at %.2f%% of the time axis, want at its end (the axis runs past the cancel, to the retry's due time)", markAt)
	}
	if spanEnd > markAt+0.5 {
		t.Errorf("the retry wait's bar ends at %.2f%% of the axis, after the cancel at %.2f%%", spanEnd, markAt)
	}
	if title := eval[string](tb, span+".title"); !strings.Contains(title, "ended by the instance's cancel") {
		t.Errorf("the retry wait's title is %q, want it to say the cancel ended it", title)
	}
}

// secretHookFlow delivers its input with the webhook plugin, to the url in its
// input's config: the receiver decides what comes back.
const secretHookFlow = `
name: hook
steps:
  - { id: send, activity: webhook.deliver, input: "${ input }", output: sent, retry: { max_attempts: 1 } }
output: "${ vars.sent }"
`

// TestBrowserPagesShowNoSecret: the webhook plugin sends its secret token
// to two receivers, one that refuses it with a 401 quoting the request and
// one that echoes it in a 200; the pages a reader and an operator open
// (the list, each instance with its timeline and each attempt's detail,
// the plugin's page) show the masked token and never its value.
func TestBrowserPagesShowNoSecret(t *testing.T) {
	const secret = "tok-4f1b9c2e-never-shown"
	h := newHost(t)
	h.PushPlugin(t, "webhook")
	h.PutWorkflow(t, "hook", secretHookFlow)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("deny") != "" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "refused Authorization: %s", r.Header.Get("Authorization"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"you sent": %q}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(receiver.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}

	ids := map[string]string{"hook-deny": "failed", "hook-echo": "completed"}
	for id, status := range ids {
		url := receiver.URL + "/in"
		if id == "hook-deny" {
			url += "?deny=1"
		}
		grants := fmt.Sprintf(`{"hosts": [{"pattern": %q, "private_networks": true}], "config": {"url": %q}, "secrets": {"token": %q}}`,
			receiver.URL, url, "file:"+tokenFile)
		h.Request(t, "PUT", "/v1/plugins/webhook/grants", adminSecret, "application/json", []byte(grants)).Want(t, http.StatusOK)
		if in := h.start("hook", id, map[string]any{"n": 1}, "ended"); in.Status != status {
			t.Fatalf("%s is %s, want %s", id, in.Status, status)
		}
	}

	html := `document.documentElement.outerHTML`
	for _, who := range []struct{ token, role string }{{readerSecret, "reader"}, {operatorSecret, "operator"}} {
		tb := openTab(t, h.url)
		tb.open("/instances", who.token, who.role)
		waitTrue(tb, "the list's rows", `document.querySelectorAll('[data-test=instance-row]').length === 2`)
		if page := eval[string](tb, html); strings.Contains(page, secret) {
			t.Errorf("%s: the instance list shows the secret", who.role)
		}
		for id, status := range ids {
			tb.goTo("/instances/" + id)
			waitStatus(tb, status)
			bar := `[data-test=timeline] [data-attempt]`
			waitTrue(tb, "the attempt's bar", q(bar)+" !== null")
			tb.click(bar)
			waitTrue(tb, "the attempt's detail", q(`[data-test=attempt-detail] [data-test=attempt]`)+" !== null")
			page := eval[string](tb, html)
			if strings.Contains(page, secret) {
				t.Errorf("%s: the page of %s shows the secret", who.role, id)
			}
			if id == "hook-deny" && !strings.Contains(page, "Bearer [secret]") {
				t.Errorf("%s: the page of %s does not show the refused request with its token masked", who.role, id)
			}
		}
		tb.goTo("/plugins/webhook")
		waitTrue(tb, "the plugin's page", `document.body.textContent.includes('webhook')`)
		if page := eval[string](tb, html); strings.Contains(page, secret) {
			t.Errorf("%s: the plugin's page shows the secret", who.role)
		}
	}
}
