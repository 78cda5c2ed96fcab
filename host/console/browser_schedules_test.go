package console_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// tickFlow is what the schedules start: a set step, no plugin.
const tickFlow = `
name: tick
steps:
  - { id: note, set: { at: "${ input.at }" } }
output: "${ vars.at }"
`

// nightlyDoc fires at 02:00 in Berlin every night.
const nightlyDoc = `id: nightly
workflow: tick
input:
  at: "${ schedule.time }"
spec:
  cron: "0 2 * * *"
  time_zone: Europe/Berlin
`

// hostile is a note that would run script if the page parsed it as HTML.
const hostile = `<img src=x onerror=alert(1)>`

// scheduleDoc is the part of the API's schedule the tests read.
type scheduleDoc struct {
	ID        string      `json:"id"`
	Paused    bool        `json:"paused"`
	Note      string      `json:"note"`
	NextFires []time.Time `json:"next_fires"`
}

// newScheduleHost is a test host with the workflow tick and the schedule
// nightly, saved through the API.
func newScheduleHost(t *testing.T) *host {
	t.Helper()
	h := newHost(t)
	h.PutWorkflow(t, "tick", tickFlow)
	h.Request(t, "PUT", "/v1/schedules/nightly", adminSecret, "application/yaml", []byte(nightlyDoc)).Want(t, http.StatusCreated)
	return h
}

// schedule reads a schedule through the API.
func (h *host) schedule(id string) scheduleDoc {
	h.t.Helper()
	var s scheduleDoc
	h.Do(h.t, "GET", "/v1/schedules/"+id, nil).Want(h.t, http.StatusOK).JSON(h.t, &s)
	return s
}

// textsJS lists the text of every element sel matches.
func textsJS(sel string) string {
	return `[...document.querySelectorAll(` + js(sel) + `)].map((e) => e.textContent)`
}

// TestBrowserSchedules: with an operator's token, the schedules list shows
// a saved schedule with its workflow, state and next fire; its page shows
// the next 10 fires in UTC and in the schedule's time zone as the host
// computes them; Trigger now starts a run that the page lists with a link
// to the instance's page, which works; Pause with a note shows the
// schedule paused with the note as text (a note made of markup stays
// text, on the page, in its record and in the list), and no next fire;
// Unpause shows it active with its fires again; a backfill without its
// range shows the host's problem, and one with a range says how many
// fires it holds, in the form and in the record; at a phone's size, the
// page and the list fit the screen.
func TestBrowserSchedules(t *testing.T) {
	h := newScheduleHost(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}

	tb := openTab(t, h.url)
	tb.open("/schedules", operatorSecret, "operator")
	row := `[data-test=schedule-row][data-id=nightly]`
	waitTrue(tb, "the schedule's row", q(row)+" !== null")
	if text := eval[string](tb, q(row)+".textContent"); !strings.Contains(text, "tick") || !strings.Contains(text, "active") {
		t.Errorf("the row says %q, want its workflow and that it is active", text)
	}
	if eval[bool](tb, q(row+" [data-test=next-fire] time")+" === null") {
		t.Error("the row shows no next fire")
	}

	tb.click(row + " [data-test=schedule-link]")
	waitTrue(tb, "the schedule's page", q("[data-test=schedule-id]")+"?.textContent === 'nightly'")
	want := h.schedule("nightly").NextFires
	if len(want) != 10 {
		t.Fatalf("the host answers %d next fires, want 10", len(want))
	}
	var utc, local []string
	for _, f := range want {
		utc = append(utc, f.UTC().Format("2006-01-02 15:04:05 UTC"))
		local = append(local, f.In(berlin).Format("2006-01-02 15:04:05 UTC-07:00"))
	}
	got := waitFor(tb, "the next fires in UTC", textsJS("[data-test=fire-utc]"), func(s []string) bool { return len(s) > 0 })
	if !slices.Equal(got, utc) {
		t.Errorf("the next fires in UTC are %q, want %q", got, utc)
	}
	if got := eval[[]string](tb, textsJS("[data-test=fire-zone]")); !slices.Equal(got, local) {
		t.Errorf("the next fires in Europe/Berlin are %q, want %q", got, local)
	}
	for _, l := range local {
		if !strings.Contains(l, " 02:00:00 ") {
			t.Fatalf("Berlin's fire %s is not at 02:00: the test's expectation is wrong", l)
		}
	}

	// Trigger now: a run, linked to its instance.
	tb.click("[data-test=trigger-submit]")
	link := `[data-test=runs-section] [data-test=run-link]`
	id := waitFor(tb, "the triggered run's link", q(link)+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if !strings.HasPrefix(id, "nightly@") {
		t.Errorf("the run is %q, want an instance nightly@<time>", id)
	}
	h.awaitStatus(id, "completed")
	waitTrue(tb, "the run_started event linking the run",
		`[...document.querySelectorAll('[data-test=schedule-event][data-type=run_started] [data-test=event-run-link]')].some((a) => a.dataset.id === `+js(id)+`)`)
	// Its status is its instance's, whether or not the schedule has
	// seen it end yet.
	waitTrue(tb, "the run shown completed",
		`[...document.querySelectorAll('[data-test=runs-section] [data-test=run-row]')].some((r) => r.dataset.id === `+js(id)+` && r.dataset.status === 'completed')`)
	// The picture shows the page, not the notice of the trigger.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=notice]") + ".hidden = true"))
	tb.screenshot("schedule")
	tb.click(link)
	waitTrue(tb, "the run's instance page", `location.hash === '#/instances/' + encodeURIComponent(`+js(id)+`)`)
	waitStatus(tb, "completed")
	if got := eval[string](tb, q("[data-test=instance-id]")+".textContent"); got != id {
		t.Errorf("the instance page shows %q, want %q", got, id)
	}

	// Pause, with a note made of markup.
	tb.goTo("/schedules/nightly")
	waitTrue(tb, "the pause form", q("[data-test=pause-note]")+" !== null")
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=pause-note]"), hostile))
	tb.click("[data-test=pause-submit]")
	waitTrue(tb, "the schedule shown paused", q("[data-test=schedule-state]")+"?.dataset.state === 'paused'")
	if got := eval[string](tb, q("[data-test=schedule-note]")+"?.textContent ?? ''"); got != hostile {
		t.Errorf("the page shows the note %q, want %q as text", got, hostile)
	}
	waitTrue(tb, "no next fire while paused", q("[data-test=no-next-fires]")+" !== null")
	waitFor(tb, "the paused event's note", textsJS("[data-test=schedule-event][data-type=paused] [data-test=event-note]"),
		func(s []string) bool { return slices.Contains(s, hostile) })
	if s := h.schedule("nightly"); !s.Paused || s.Note != hostile {
		t.Errorf("the host has paused=%v note=%q, want paused with the note", s.Paused, s.Note)
	}
	tb.goTo("/schedules")
	waitTrue(tb, "the paused row", q(row)+"?.dataset.paused === 'true'")
	if got := eval[string](tb, q(row+" [data-test=schedule-note]")+"?.textContent ?? ''"); got != hostile {
		t.Errorf("the list shows the note %q, want %q as text", got, hostile)
	}
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the note made %d <img> in the list", n)
	}
	if got := eval[string](tb, q(row+" [data-test=last-run-link]")+"?.dataset.id ?? ''"); got != id {
		t.Errorf("the list shows the last run %q, want %q", got, id)
	}

	// Unpause.
	tb.goTo("/schedules/nightly")
	waitTrue(tb, "the unpause form", q("[data-test=unpause-note]")+" !== null")
	if n := eval[int](tb, `document.querySelectorAll('main img').length`); n != 0 {
		t.Errorf("the note made %d <img> on the schedule's page", n)
	}
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=unpause-note]"), "maintenance over"))
	tb.click("[data-test=unpause-submit]")
	waitTrue(tb, "the schedule shown active", q("[data-test=schedule-state]")+"?.dataset.state === 'active'")
	waitTrue(tb, "the next fires again", `document.querySelectorAll('[data-test=next-fire]').length === 10`)
	if s := h.schedule("nightly"); s.Paused {
		t.Error("the host has the schedule paused after Unpause")
	}
	waitTrue(tb, "the pause form again", q("[data-test=pause-note]")+" !== null")

	// A backfill without its range: the host's problem, in the form.
	tb.click("[data-test=backfill-submit]")
	problem := waitFor(tb, "the backfill's problem", q("[data-test=backfill] [data-test=error]")+"?.textContent ?? ''",
		func(s string) bool { return s != "" })
	if !strings.Contains(problem, "422") {
		t.Errorf("the refused backfill shows %q, want the host's 422 problem", problem)
	}
	// The last three days: the fires at 02:00 in Berlin in the range.
	to := time.Now().Add(-time.Minute).Truncate(time.Second)
	from := to.Add(-72 * time.Hour)
	fires := 0
	for d := from.In(berlin); !d.After(to.Add(24 * time.Hour)); d = d.AddDate(0, 0, 1) {
		f := time.Date(d.Year(), d.Month(), d.Day(), 2, 0, 0, 0, berlin)
		if !f.Before(from) && !f.After(to) {
			fires++
		}
	}
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=backfill-from]") + ".value = " + localInputJS(from.UTC().Format(time.RFC3339))))
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=backfill-to]") + ".value = " + localInputJS(to.UTC().Format(time.RFC3339))))
	tb.click("[data-test=backfill-submit]")
	result := waitFor(tb, "the backfill's result", q("[data-test=backfill-result]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if want := fmt.Sprintf("%d fire(s)", fires); !strings.HasPrefix(result, want) {
		t.Errorf("the backfill says %q, want %d fire(s)", result, fires)
	}
	if d := tb.dialogsSeen(); len(d) != 1 || !strings.Contains(d[0], "Run every fire of nightly") {
		t.Errorf("dialogs %q, want one confirmation of the backfill", d)
	}
	recorded := fmt.Sprintf(": %d fire(s)", fires)
	waitFor(tb, "the backfill in the record", textsJS("[data-test=schedule-event][data-type=backfill] [data-test=event-data]"),
		func(s []string) bool { return len(s) == 1 && strings.HasSuffix(s[0], recorded) })

	// At a phone's size, the page and the list fit the screen's width.
	tb.viewport(390, 844)
	tb.do(chromedp.Evaluate[chromedp.Void]("window.scrollTo(0, 0)"))
	checkPhoneFits(tb, "a schedule's page")
	tb.goTo("/schedules")
	waitTrue(tb, "the list", q(row)+" !== null")
	checkPhoneFits(tb, "the schedules list")
}

// TestBrowserScheduleReaderAndEditor: a reader is shown a schedule's next
// fires and no action (no pause, trigger, backfill or editor), and the
// list offers no form to save one; an admin's new schedule with a problem
// is refused with the problem marked on its line, and a valid one is
// saved and shown.
func TestBrowserScheduleReaderAndEditor(t *testing.T) {
	h := newScheduleHost(t)

	tb := openTab(t, h.url)
	tb.open("/schedules/nightly", readerSecret, "reader")
	waitTrue(tb, "the next fires", `document.querySelectorAll('[data-test=next-fire]').length === 10`)
	for _, sel := range []string{"[data-test=schedule-actions] form", "[data-test=pause]", "[data-test=unpause]", "[data-test=trigger-submit]",
		"[data-test=backfill-submit]", "[data-test=edit-schedule]"} {
		if eval[bool](tb, q(sel)+" !== null") {
			t.Errorf("a reader is offered %s", sel)
		}
	}
	tb.goTo("/schedules")
	waitTrue(tb, "the list", q("[data-test=schedule-row]")+" !== null")
	if eval[bool](tb, q("[data-test=new-schedule]")+" !== null") {
		t.Error("a reader is offered the form to save a schedule")
	}

	admin := openTab(t, h.url)
	admin.open("/schedules", adminSecret, "admin")
	waitTrue(admin, "the list", q("[data-test=schedule-row]")+" !== null")
	admin.click("[data-test=new-schedule] summary")
	// Line 5 names an hour that does not exist.
	bad := "id: hourly\nworkflow: tick\nspec:\n  cron:\n    - \"0 25 * * *\"\n"
	admin.do(chromedp.Evaluate[chromedp.Void](q("[data-test=schedule-editor]") + ".value = " + js(bad)))
	admin.click("[data-test=save-schedule-submit]")
	lines := `[...document.querySelectorAll('[data-test=save-schedule] [data-test=source-error-line]')].map((l) => l.dataset.line)`
	if marked := waitFor(admin, "the marked line", lines, func(l []string) bool { return len(l) > 0 }); strings.Join(marked, " ") != "5" {
		t.Errorf("lines %q are marked, want line 5 with the bad hour", marked)
	}
	good := "id: hourly\nworkflow: tick\nspec:\n  cron: \"0 * * * *\"\n"
	admin.do(chromedp.Evaluate[chromedp.Void](q("[data-test=schedule-editor]") + ".value = " + js(good)))
	admin.click("[data-test=save-schedule-submit]")
	waitTrue(admin, "the new schedule's page", q("[data-test=schedule-id]")+"?.textContent === 'hourly'")
	waitTrue(admin, "its next fires", `document.querySelectorAll('[data-test=next-fire]').length === 10`)
	// Without a time zone, only UTC.
	if eval[bool](admin, q("[data-test=fire-zone]")+" !== null") {
		t.Error("a schedule in UTC shows its fires in a second zone")
	}
	if s := h.schedule("hourly"); s.ID != "hourly" || len(s.NextFires) != 10 {
		t.Errorf("the host has %+v, want the schedule saved from the page", s)
	}
}
