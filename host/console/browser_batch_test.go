package console_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// parcelFlow waits for parcel.arrived with the instance's n as the key,
// then notes what came: two top-level steps, so two reset points.
const parcelFlow = `
name: %s
steps:
  - id: arrive
    wait: { event: parcel.arrived, key: "${ input.n }", timeout: 1h }
    output: got
  - id: note
    set: { note: "${ vars.got }" }
`

// batchView is the part of the API's batch document the test reads.
type batchView struct {
	ID     string         `json:"id"`
	Op     string         `json:"op"`
	Phase  string         `json:"phase"`
	Actor  string         `json:"actor"`
	Reason string         `json:"reason"`
	Counts map[string]int `json:"counts"`
}

// auditEntry is the part of a history entry that says who did what.
type auditEntry struct {
	Type  string         `json:"type"`
	Actor string         `json:"actor"`
	Data  map[string]any `json:"data"`
}

// TestBrowserBatchApplyToAll: with an operator's token, the instance
// list queried by workflow offers "Apply to all matching…": a batch
// cancel of the 30 instances the query matches (25 waiting, 5 completed)
// says "30 instances match" once its held selection is done, and applies
// nothing until confirmed (the dialog's Cancel cancels the batch, which
// applied nothing); Confirm goes to the batch's page, whose bar reaches
// 30/30 with 25 done and the 5 completed ones listed as skipped,
// "finished (completed)", each linked to its instance. The instances of
// another workflow are untouched; each cancelled instance's history
// names the operator, the reason and the batch; the batches page lists
// it. Then a completed instance's Reset dialog lists its reset points and
// runs it again from its first step: it waits again, and its history
// and timeline show the reset. An operator is offered neither a delete
// batch nor a migration.
func TestBrowserBatchApplyToAll(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "parcel", fmt.Sprintf(parcelFlow, "parcel"))
	h.PutWorkflow(t, "crate", fmt.Sprintf(parcelFlow, "crate"))
	var ids []string
	for i := 1; i <= 30; i++ {
		id := fmt.Sprintf("p-%02d", i)
		ids = append(ids, id)
		h.start("parcel", id, map[string]any{"n": id}, "suspended")
	}
	for _, id := range []string{"c-1", "c-2"} {
		h.start("crate", id, map[string]any{"n": id}, "suspended")
	}
	finished := ids[:5]
	for _, id := range finished {
		h.Do(t, "POST", "/v1/events", map[string]any{"name": "parcel.arrived", "key": id, "payload": map[string]any{"at": "dock"}}).Want(t, http.StatusAccepted)
	}
	for _, id := range finished {
		h.awaitStatus(id, "completed")
	}

	tb := openTab(t, h.url)
	tb.open("/instances", operatorSecret, "operator")
	waitTrue(tb, "the whole list", "document.querySelectorAll('[data-test=instance-row]').length === 32")
	waitTrue(tb, "no apply-to-all without a query", q("[data-test=apply-all]")+" === null")
	query(tb, `workflow = "parcel"`)
	waitTrue(tb, "the parcels", "document.querySelectorAll('[data-test=instance-row]').length === 30")

	// A held batch, cancelled from its dialog: nothing applied.
	tb.click("[data-test=apply-all]")
	waitTrue(tb, "the apply dialog", q("[data-test=apply-dialog]")+"?.open")
	ops := eval[[]string](tb, `[...document.querySelectorAll('[data-test=apply-op] option')].map((o) => o.value)`)
	if want := []string{"cancel", "retry", "pause", "resume", "signal", "reset"}; !slices.Equal(ops, want) {
		t.Errorf("an operator is offered %q, want %q (no delete: it needs an admin)", ops, want)
	}
	if got := eval[string](tb, q("[data-test=apply-query]")+".textContent"); got != `workflow = "parcel"` {
		t.Errorf("the dialog applies to the query %q", got)
	}
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=apply-op]"), "pause"))
	tb.click("[data-test=apply-submit]")
	matched := q("[data-test=apply-matched]") + "?.textContent ?? ''"
	waitFor(tb, "the held pause's count", matched, func(s string) bool { return s == "30 instances match" })
	held := eval[string](tb, q("[data-test=apply-batch-link]")+".textContent")
	tb.click("[data-test=apply-cancel]")
	waitTrue(tb, "the dialog to close", q("[data-test=apply-dialog]")+" === null")
	var pb batchView
	h.Do(t, "GET", "/v1/batches/"+held, nil).Want(t, http.StatusOK).JSON(t, &pb)
	if pb.Op != "pause" || pb.Phase != "cancelled" || pb.Counts["done"] != 0 {
		t.Errorf("the batch cancelled from the dialog is %+v; want a pause, cancelled, none done", pb)
	}

	// The cancel, confirmed.
	tb.click("[data-test=apply-all]")
	waitTrue(tb, "the apply dialog again", q("[data-test=apply-dialog]")+"?.open")
	tb.do(chromedp.SetValue(chromedp.CSS("[data-test=apply-op]"), "cancel"),
		chromedp.SendKeys(chromedp.CSS("[data-test=apply-reason]"), "recalled by the carrier"))
	tb.click("[data-test=apply-submit]")
	waitFor(tb, "the cancel's count", matched, func(s string) bool { return s == "30 instances match" })
	if got := eval[string](tb, q("[data-test=apply-confirm]")+".textContent"); got != "Confirm: cancel 30 instances" {
		t.Errorf("the confirm button reads %q", got)
	}
	tb.screenshotAt("batch-confirm", "[data-test=apply-dialog]")
	tb.click("[data-test=apply-confirm]")
	hash := waitFor(tb, "the batch's page", "location.hash", func(s string) bool { return strings.HasPrefix(s, "#/batches/b-") })
	id := strings.TrimPrefix(hash, "#/batches/")

	progress := q("[data-test=batch-progress]")
	waitFor(tb, "the bar to reach 30/30", progress+"?.dataset.processed + '/' + "+progress+"?.dataset.matched", func(s string) bool { return s == "30/30" })
	waitTrue(tb, "the batch to be done", q("[data-test=batch-phase]")+"?.dataset.phase === 'done' && "+q("[data-test=batch-finished]")+" !== null")
	if got := eval[string](tb, q("[data-test=batch-progress-text]")+".textContent"); got != "30/30" {
		t.Errorf("the bar's text reads %q, want 30/30", got)
	}
	counts := `[...document.querySelectorAll('[data-test=batch-count]')].map((c) => c.dataset.outcome + '=' + c.dataset.count).join(' ')`
	if got := eval[string](tb, counts); got != "done=25 skipped=5" {
		t.Errorf("the counts read %q, want done=25 skipped=5", got)
	}
	skipped := `[...document.querySelectorAll('[data-test=batch-skipped] [data-test=batch-item]')].map((r) => r.dataset.id + ': ' + r.querySelector('[data-test=batch-item-reason]').textContent).join(', ')`
	want := make([]string, len(finished))
	for i, fid := range finished {
		want[i] = fid + ": finished (completed)"
	}
	waitFor(tb, "the skipped items", skipped, func(s string) bool { return s == strings.Join(want, ", ") })
	if got := eval[string](tb, q("[data-test=batch-skipped] [data-test=batch-item-link]")+".getAttribute('href')"); got != "#/instances/p-01" {
		t.Errorf("a skipped item links to %q", got)
	}
	if eval[bool](tb, q("[data-test=batch-failed]")+" !== null") {
		t.Error("the page lists failed items of a batch that has none")
	}
	doc := eval[string](tb, q("[data-test=batch-document]")+".textContent")
	for _, s := range []string{`workflow = "parcel"`, "recalled by the carrier", "ops"} {
		if !strings.Contains(doc, s) {
			t.Errorf("the batch's document reads %q; want it to show %q", doc, s)
		}
	}
	waitTrue(tb, "no actions on a finished batch", q("[data-test=batch-cancel]")+" === null && "+q("[data-test=batch-confirm]")+" === null")
	tb.screenshot("batch")

	// What the host did: 25 cancelled with the batch in their history,
	// the 5 completed left so, the other workflow's untouched.
	for _, iid := range ids[5:] {
		h.awaitStatus(iid, "cancelled")
	}
	for _, iid := range finished {
		if in := h.get(iid); in.Status != "completed" {
			t.Errorf("%s is %s; the batch should have skipped it", iid, in.Status)
		}
	}
	for _, iid := range []string{"c-1", "c-2"} {
		if in := h.get(iid); in.Status != "suspended" {
			t.Errorf("%s, of another workflow, is %s", iid, in.Status)
		}
	}
	var hist struct {
		Items []auditEntry `json:"items"`
	}
	h.Do(t, "GET", "/v1/instances/p-10/history?limit=1000", nil).Want(t, http.StatusOK).JSON(t, &hist)
	i := slices.IndexFunc(hist.Items, func(e auditEntry) bool { return e.Type == "instance_cancelled" })
	if i < 0 || hist.Items[i].Actor != "ops" || hist.Items[i].Data["batch"] != id || hist.Items[i].Data["reason"] != "recalled by the carrier" {
		t.Errorf("p-10's history has no instance_cancelled by ops for batch %s with the reason: %+v", id, hist.Items)
	}

	// The batches page lists both, newest first.
	tb.click("[data-test=nav-batches]")
	rows := `[...document.querySelectorAll('[data-test=batch-row]')].map((r) => r.dataset.id + '=' + r.dataset.phase).join(' ')`
	waitFor(tb, "the batches", rows, func(s string) bool { return s == id+"=done "+held+"=cancelled" })
	if got := eval[string](tb, `document.querySelector('[data-test=batch-row] [data-test=batch-progress-text]').textContent`); got != "30/30" {
		t.Errorf("the list shows the batch's progress as %q", got)
	}

	// A completed instance, reset to its first step.
	tb.goTo("/instances/p-01")
	waitStatus(tb, "completed")
	waitTrue(tb, "no migration for an operator", q("[data-test=reset-open]")+" !== null && "+q("[data-test=migrate-open]")+" === null")
	tb.click("[data-test=reset-open]")
	points := `[...document.querySelectorAll('[data-test=reset-point]')].map((p) => p.dataset.step + '=' + p.dataset.vars).join(' ')`
	waitFor(tb, "the reset points", points, func(s string) bool { return s == "arrive=true note=true" })
	tb.click("[data-test=reset-point][data-step=arrive] input")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=reset-reason]"), "redeliver"))
	tb.screenshotAt("reset", "[data-test=reset-dialog]")
	tb.click("[data-test=reset-submit]")
	waitTrue(tb, "the reset dialog to close", q("[data-test=reset-dialog]")+" === null")
	waitStatus(tb, "suspended")
	actor := q("[data-test=history] tr[data-type=instance_reset] [data-test=history-actor]")
	waitTrue(tb, "the reset in the history", actor+" !== null")
	if got := eval[string](tb, actor+".textContent"); got != "by ops: redeliver" {
		t.Errorf("the reset's history entry shows %q, want %q", got, "by ops: redeliver")
	}
	waitTrue(tb, "the reset on the timeline", q("[data-test=timeline] [data-mark=instance_reset]")+" !== null")
	waitTrue(tb, "it waits again", q("[data-test=bookmark]")+"?.textContent.includes('parcel.arrived')")
}

// parcelV2 is parcelFlow with a step after the others: an instance
// waiting at arrive can move to it.
const parcelV2 = `
name: parcel
steps:
  - id: arrive
    wait: { event: parcel.arrived, key: "${ input.n }", timeout: 1h }
    output: got
  - id: note
    set: { note: "${ vars.got }" }
  - id: stamp
    set: { stamped: true }
`

// parcelV3 waits at arrive for another event: an instance waiting there
// cannot move to it.
const parcelV3 = `
name: parcel
steps:
  - id: arrive
    wait: { event: parcel.landed, key: "${ input.n }", timeout: 1h }
    output: got
  - id: note
    set: { note: "${ vars.got }" }
`

// TestBrowserMigrate: with an admin's token, the instance page's Migrate
// dialog dry-runs a migration: to a version whose wait waits for another
// event it cannot move, the plan says why at which step, and no move is
// offered; to a version that only adds a step it can, with a note; a
// change of the version forgets the plan. The move then moves it: the
// page shows the new version, the history the migration by the admin,
// and the instance completes on the new version.
func TestBrowserMigrate(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "parcel", fmt.Sprintf(parcelFlow, "parcel"))
	h.start("parcel", "m-1", map[string]any{"n": "m-1"}, "suspended")
	h.PutWorkflow(t, "parcel", parcelV2)
	h.PutWorkflow(t, "parcel", parcelV3)

	tb := openTab(t, h.url)
	tb.open("/instances/m-1", adminSecret, "admin")
	waitStatus(tb, "suspended")
	tb.click("[data-test=migrate-open]")
	waitTrue(tb, "the migrate dialog", q("[data-test=migrate-dialog]")+"?.open")
	setVersion := func(v string) {
		tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=migrate-version]") + ".value = " + js(v) + "; " +
			q("[data-test=migrate-version]") + ".dispatchEvent(new Event('input'))"))
	}
	plan := q("[data-test=plan]")

	setVersion("3")
	tb.click("[data-test=migrate-dry-submit]")
	waitTrue(tb, "the plan to version 3", plan+"?.dataset.canMove === 'false'")
	if got := eval[string](tb, q("[data-test=plan-verdict]")+".textContent"); got != "It cannot move from version 1 to version 3." {
		t.Errorf("the verdict reads %q", got)
	}
	problems := eval[string](tb, q("[data-test=plan-problems]")+"?.textContent ?? ''")
	if !strings.Contains(problems, "arrive") {
		t.Errorf("the problems read %q; want them to name the step arrive", problems)
	}
	if eval[bool](tb, q("[data-test=migrate-move]")+" !== null") {
		t.Error("a move is offered for an instance that cannot move")
	}

	setVersion("2")
	waitTrue(tb, "the plan to be forgotten", plan+" === null")
	tb.click("[data-test=migrate-dry-submit]")
	waitTrue(tb, "the plan to version 2", plan+"?.dataset.canMove === 'true'")
	if got := eval[string](tb, q("[data-test=plan-verdict]")+".textContent"); got != "It can move from version 1 to version 2." {
		t.Errorf("the verdict reads %q", got)
	}
	if notes := eval[string](tb, q("[data-test=plan-notes]")+"?.textContent ?? ''"); !strings.Contains(notes, "stamp") {
		t.Errorf("the notes read %q; want them to name the new step stamp", notes)
	}
	tb.screenshotAt("migrate", "[data-test=migrate-dialog]")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=migrate-reason]"), "roll back the dock change"))
	tb.click("[data-test=migrate-move-submit]")
	waitTrue(tb, "the dialog to close", q("[data-test=migrate-dialog]")+" === null")
	actor := q("[data-test=history] tr[data-type=instance_migrated] [data-test=history-actor]")
	waitTrue(tb, "the migration in the history", actor+" !== null")
	if got := eval[string](tb, actor+".textContent"); got != "by ci: roll back the dock change" {
		t.Errorf("the migration's history entry shows %q", got)
	}
	waitFor(tb, "the new version", `document.querySelector('[data-test=workflow-link]')?.parentElement.textContent ?? ''`,
		func(s string) bool { return s == "parcel version 2" })
	waitTrue(tb, "the migration on the timeline", q("[data-test=timeline] [data-mark=instance_migrated]")+" !== null")

	h.Do(t, "POST", "/v1/events", map[string]any{"name": "parcel.arrived", "key": "m-1"}).Want(t, http.StatusAccepted)
	waitStatus(tb, "completed")
	var in struct {
		Version int            `json:"version"`
		Vars    map[string]any `json:"vars"`
	}
	h.Do(t, "GET", "/v1/instances/m-1", nil).Want(t, http.StatusOK).JSON(t, &in)
	if in.Version != 2 || in.Vars["stamped"] != true {
		t.Errorf("m-1 completed on version %d with vars %v; want version 2, stamped by its new step", in.Version, in.Vars)
	}
}
