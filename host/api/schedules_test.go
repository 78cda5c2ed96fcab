package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
)

// tickFlow is the workflow the schedules start: set steps only, no plugin.
const tickFlow = `
name: tick
steps:
  - { id: note, set: { at: "${ input.at }" } }
output: "${ vars.at }"
`

// nightly is a schedule document; its lines count from its marker
// comment.
const nightly = `# schedule
id: nightly
workflow: tick
input:
  at: "${ schedule.time }"
spec:
  cron: "0 1 * * *"
  time_zone: Europe/Berlin
`

// putSchedule saves a YAML schedule document as id with the token.
func (h *host) putSchedule(id, token, yaml string) response {
	h.t.Helper()
	return h.request("PUT", "/v1/schedules/"+id, token, "application/yaml", []byte(yaml))
}

// schedule reads a schedule.
func (h *host) schedule(id string) apiv1.Schedule {
	h.t.Helper()
	var s apiv1.Schedule
	h.do("GET", "/v1/schedules/"+id, nil).want(h.t, http.StatusOK).json(h.t, &s)
	return s
}

// scheduleEvents reads a schedule's whole record.
func (h *host) scheduleEvents(id string) []apiv1.ScheduleEvent {
	h.t.Helper()
	var p pageDoc[apiv1.ScheduleEvent]
	h.do("GET", "/v1/schedules/"+id+"/events", nil).want(h.t, http.StatusOK).json(h.t, &p)
	return p.Items
}

// awaitRun waits, up to a minute, for the instance id to exist and
// complete: a schedule's run, which the schedules sweep starts at its
// next turn.
func (h *host) awaitRun(id string) instance {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := h.do("GET", "/v1/instances/"+url.PathEscape(id)+"?wait=1s", nil)
		var in instance
		if r.status == http.StatusOK {
			r.json(h.t, &in)
			if in.Status == "completed" {
				return in
			}
		} else if r.status != http.StatusNotFound {
			h.t.Fatalf("GET instance %s: status %d: %s", id, r.status, r.body)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("the run %s is not completed after a minute (status %d, %s)", id, r.status, in.Status)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// eventTypes lists the types of a schedule's events, with their actors.
func eventTypes(evs []apiv1.ScheduleEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Type)+" by "+e.Actor)
	}
	return out
}

// TestScheduleRoutes: save (201, 200 unchanged, 200 updated, JSON too),
// show, list in pages, delete, and 404 for a schedule that is not.
func TestScheduleRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("tick", tickFlow)

	var s apiv1.Schedule
	h.putSchedule("nightly", adminSecret, nightly).want(t, http.StatusCreated).json(t, &s)
	if s.ID != "nightly" || s.Workflow != "tick" || s.Paused || s.Revision != 1 || len(s.NextFires) != 10 ||
		s.Running == nil || s.Recent == nil || s.CreatedAt.IsZero() {
		t.Fatalf("created = %+v", s)
	}
	// The next fires are 01:00 in Berlin (a time no daylight-saving change
	// skips or repeats), a day apart.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range s.NextFires {
		if l := f.In(berlin); l.Hour() != 1 || l.Minute() != 0 || i > 0 && !f.After(s.NextFires[i-1]) {
			t.Fatalf("next_fires = %v, want every day's 01:00 in Berlin", s.NextFires)
		}
	}
	var doc struct {
		ID       string `json:"id"`
		Workflow string `json:"workflow"`
		Spec     struct {
			Cron     []string `json:"cron"`
			TimeZone string   `json:"time_zone"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(s.Document, &doc); err != nil || doc.ID != "nightly" || !slices.Equal(doc.Spec.Cron, []string{"0 1 * * *"}) || doc.Spec.TimeZone != "Europe/Berlin" {
		t.Fatalf("document %s (%v): want the canonical document", s.Document, err)
	}

	// The same document again changes nothing: no event records it. (The
	// revision is no witness: the schedules sweep writes the schedule
	// too.)
	var same apiv1.Schedule
	h.putSchedule("nightly", adminSecret, "# the same, in other words\n"+nightly).want(t, http.StatusOK).json(t, &same)
	if string(same.Document) != string(s.Document) {
		t.Fatalf("an unchanged save answered the document %s, want %s", same.Document, s.Document)
	}
	if evs := eventTypes(h.scheduleEvents("nightly")); !slices.Equal(evs, []string{"created by ci"}) {
		t.Fatalf("events after an unchanged save = %q", evs)
	}
	var updated apiv1.Schedule
	h.putSchedule("nightly", adminSecret, strings.Replace(nightly, "0 1 * * *", "30 3 * * *", 1)).want(t, http.StatusOK).json(t, &updated)
	if updated.Revision <= same.Revision || !strings.Contains(string(updated.Document), "30 3 * * *") || updated.NextFires[0].In(berlin).Hour() != 3 {
		t.Fatalf("updated = %+v", updated)
	}
	jsonDoc := `{"id": "hourly", "workflow": "tick", "spec": {"every": "1h"}}`
	h.request("PUT", "/v1/schedules/hourly", adminSecret, "application/json", []byte(jsonDoc)).want(t, http.StatusCreated)
	h.request("PUT", "/v1/schedules/hourly", adminSecret, "text/plain", []byte(jsonDoc)).want(t, http.StatusUnsupportedMediaType).problem(t)

	if got := h.schedule("nightly"); string(got.Document) != string(updated.Document) || got.Workflow != "tick" {
		t.Fatalf("shown = %+v", got)
	}
	var p1, p2 pageDoc[apiv1.Schedule]
	h.do("GET", "/v1/schedules?limit=1", nil).want(t, http.StatusOK).json(t, &p1)
	if len(p1.Items) != 1 || p1.Items[0].ID != "hourly" || p1.NextCursor == nil || *p1.NextCursor == "" {
		t.Fatalf("page 1 = %+v", p1)
	}
	h.do("GET", "/v1/schedules?limit=1&cursor="+url.QueryEscape(*p1.NextCursor), nil).want(t, http.StatusOK).json(t, &p2)
	if len(p2.Items) != 1 || p2.Items[0].ID != "nightly" {
		t.Fatalf("page 2 = %+v", p2)
	}
	if evs := eventTypes(h.scheduleEvents("nightly")); !slices.Equal(evs, []string{"created by ci", "updated by ci"}) {
		t.Fatalf("events = %q", evs)
	}

	h.do("DELETE", "/v1/schedules/nightly", nil).want(t, http.StatusNoContent)
	for _, r := range []response{
		h.do("GET", "/v1/schedules/nightly", nil),
		h.do("DELETE", "/v1/schedules/nightly", nil),
		h.do("GET", "/v1/schedules/nightly/events", nil),
		h.do("POST", "/v1/schedules/nightly/pause", nil),
		h.do("POST", "/v1/schedules/nightly/trigger", nil),
	} {
		if p := r.want(t, http.StatusNotFound).problem(t); p.Detail != `no schedule "nightly"` {
			t.Errorf("detail %q", p.Detail)
		}
	}
	// Deleting one schedule left the other.
	h.schedule("hourly")
}

// TestScheduleRefused: a document with a mistake gets a 422 naming each
// problem with its path and, where it has one, its line.
func TestScheduleRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("tick", tickFlow)
	type problem struct {
		path string
		line int // 0: not checked
	}
	for _, tc := range []struct {
		name, id, doc string
		want          []problem
	}{
		{"bad cron", "nightly", strings.Replace(nightly, `"0 1 * * *"`, `["0 1 * * *", "0 25 * * *"]`, 1), []problem{{"spec.cron[1]", 7}}},
		{"bad cron alone", "nightly", strings.Replace(nightly, "0 1 * * *", "0 25 * * *", 1), []problem{{"spec.cron[0]", 7}}},
		{"unknown zone", "nightly", strings.Replace(nightly, "Europe/Berlin", "Berlin", 1), []problem{{"spec.time_zone", 8}}},
		{"two at once", "nightly", strings.NewReplacer("Europe/Berlin", "Mars/Olympus", `"0 1 * * *"`, `["@every 1h"]`).Replace(nightly),
			[]problem{{"spec.cron[0]", 7}, {"spec.time_zone", 8}}},
		{"no such workflow", "nightly", strings.Replace(nightly, "workflow: tick", "workflow: nope", 1), []problem{{"workflow", 0}}},
		{"id not the URL's", "other", nightly, []problem{{"id", 2}}},
		{"id not the URL's, and a bad zone", "other", strings.Replace(nightly, "Europe/Berlin", "Berlin", 1), []problem{{"id", 2}, {"spec.time_zone", 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := h.putSchedule(tc.id, adminSecret, tc.doc).want(t, http.StatusUnprocessableEntity).problem(t)
			if p.Type != "urn:weft:problem:validation" || len(p.Errors) != len(tc.want) {
				t.Fatalf("problem = %+v, want %d field errors", p, len(tc.want))
			}
			for i, w := range tc.want {
				if e := p.Errors[i]; e.Path != w.path || w.line != 0 && e.Line != w.line || e.Message == "" {
					t.Errorf("errors[%d] = %+v, want path %s at line %d", i, e, w.path, w.line)
				}
			}
		})
	}
	// Nothing was saved.
	h.do("GET", "/v1/schedules/nightly", nil).want(t, http.StatusNotFound)
	h.do("GET", "/v1/schedules/other", nil).want(t, http.StatusNotFound)
}

// TestSchedulePauseTriggerBackfill: pause and unpause with a note; a
// trigger starts a run named by the schedule and the second it was asked
// for; a backfill of a past range starts a run per time the calendar
// names in it; the record says who did each.
func TestSchedulePauseTriggerBackfill(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("tick", tickFlow)
	h.putSchedule("nightly", adminSecret, nightly).want(t, http.StatusCreated)

	var paused apiv1.Schedule
	h.request("POST", "/v1/schedules/nightly/pause", operatorSecret, "application/json", []byte(`{"note": "migrating the warehouse"}`)).
		want(t, http.StatusOK).json(t, &paused)
	if !paused.Paused || paused.Note != "migrating the warehouse" || len(paused.NextFires) != 0 {
		t.Fatalf("paused = %+v", paused)
	}
	var resumed apiv1.Schedule
	h.request("POST", "/v1/schedules/nightly/unpause", operatorSecret, "", nil).want(t, http.StatusOK).json(t, &resumed)
	if resumed.Paused || len(resumed.NextFires) != 10 {
		t.Fatalf("resumed = %+v", resumed)
	}

	before := time.Now().UTC().Truncate(time.Second)
	var triggered apiv1.Schedule
	h.request("POST", "/v1/schedules/nightly/trigger", operatorSecret, "application/json", []byte(`{"overlap": "allow_all"}`)).
		want(t, http.StatusAccepted).json(t, &triggered)
	if triggered.Triggers != 1 {
		t.Fatalf("triggered = %+v: want the trigger waiting", triggered)
	}
	// The run is the instance nightly@<the second of the trigger>.
	evs := h.scheduleEvents("nightly")
	i := slices.IndexFunc(evs, func(e apiv1.ScheduleEvent) bool { return e.Type == "triggered" })
	if i < 0 {
		t.Fatalf("no triggered event in %q", eventTypes(evs))
	}
	var data struct {
		Nominal time.Time `json:"nominal"`
		Overlap string    `json:"overlap"`
	}
	if err := json.Unmarshal(evs[i].Data, &data); err != nil || data.Nominal.Before(before) || data.Overlap != "allow_all" {
		t.Fatalf("triggered data %s (%v)", evs[i].Data, err)
	}
	run := h.awaitRun("nightly@" + data.Nominal.UTC().Format(time.RFC3339))
	if run.Workflow != "tick" || string(run.Output) != `"`+data.Nominal.In(mustZone(t, "Europe/Berlin")).Format(time.RFC3339)+`"` {
		t.Fatalf("run = %+v, output %s: want the fire's time in Berlin", run, run.Output)
	}
	want := []string{"created by ci", "paused by ops", "unpaused by ops", "triggered by ops", "run_started by scheduler"}
	deadline := time.Now().Add(time.Minute)
	for got := eventTypes(h.scheduleEvents("nightly")); !slices.Equal(got[:min(len(got), len(want))], want); got = eventTypes(h.scheduleEvents("nightly")) {
		if time.Now().After(deadline) {
			t.Fatalf("events = %q, want %q first", got, want)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}

	// A backfill of the last three whole minutes on a schedule of every
	// minute: three runs, named by their minutes.
	h.putSchedule("minutely", adminSecret, "id: minutely\nworkflow: tick\ninput: { at: \"${ schedule.time }\" }\nspec: { every: 1m }\n").want(t, http.StatusCreated)
	from := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Minute)
	var res apiv1.BackfillResult
	body := fmt.Sprintf(`{"from": %q, "to": %q, "overlap": "allow_all"}`, from.Format(time.RFC3339), from.Add(2*time.Minute).Format(time.RFC3339))
	h.request("POST", "/v1/schedules/minutely/backfill", operatorSecret, "application/json", []byte(body)).want(t, http.StatusAccepted).json(t, &res)
	if res.Fires != 3 || res.Schedule.ID != "minutely" {
		t.Fatalf("backfill = %+v", res)
	}
	for m := range 3 {
		nominal := from.Add(time.Duration(m) * time.Minute)
		if run := h.awaitRun("minutely@" + nominal.Format(time.RFC3339)); string(run.Output) != `"`+nominal.Format(time.RFC3339)+`"` {
			t.Errorf("the backfill's run of %s answered %s", nominal, run.Output)
		}
	}
	evs = h.scheduleEvents("minutely")
	if i := slices.IndexFunc(evs, func(e apiv1.ScheduleEvent) bool { return e.Type == "backfill" }); i < 0 || evs[i].Actor != "ops" ||
		!strings.Contains(string(evs[i].Data), `"fires":3`) {
		t.Fatalf("events = %q: want the backfill by ops, of 3 fires", eventTypes(evs))
	}

	// Bad requests: 400 for a time that is not one, 422 for what the
	// schedule refuses, each naming the field.
	for _, tc := range []struct {
		body   string
		status int
		path   string
	}{
		{`{"from": "yesterday", "to": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest, "from"},
		{`{"from": "2026-01-01T00:00:00Z"}`, http.StatusUnprocessableEntity, "from"},
		{fmt.Sprintf(`{"from": %q, "to": %q}`, from.Format(time.RFC3339), from.Add(-time.Minute).Format(time.RFC3339)), http.StatusUnprocessableEntity, "to"},
		{fmt.Sprintf(`{"from": %q, "to": %q}`, from.Format(time.RFC3339), time.Now().Add(time.Hour).Format(time.RFC3339)), http.StatusUnprocessableEntity, "to"},
		{fmt.Sprintf(`{"from": %q, "to": %q, "overlap": "sometimes"}`, from.Format(time.RFC3339), from.Format(time.RFC3339)), http.StatusUnprocessableEntity, "overlap"},
		{`{"form": "2026-01-01T00:00:00Z"}`, http.StatusBadRequest, "form"},
	} {
		p := h.request("POST", "/v1/schedules/minutely/backfill", operatorSecret, "application/json", []byte(tc.body)).want(t, tc.status).problem(t)
		if len(p.Errors) == 0 || p.Errors[0].Path != tc.path {
			t.Errorf("%s: problem %+v, want one at %s", tc.body, p, tc.path)
		}
	}
	p := h.request("POST", "/v1/schedules/minutely/trigger", operatorSecret, "application/json", []byte(`{"overlap": "sometimes"}`)).
		want(t, http.StatusUnprocessableEntity).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "overlap" {
		t.Errorf("trigger with a bad overlap: %+v", p)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestScheduleEventsPages: the record in pages, after a seq.
func TestScheduleEventsPages(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("tick", tickFlow)
	h.putSchedule("nightly", adminSecret, nightly).want(t, http.StatusCreated)
	for _, action := range []string{"pause", "unpause", "pause"} {
		h.do("POST", "/v1/schedules/nightly/"+action, map[string]string{"note": action}).want(t, http.StatusOK)
	}
	var first, rest pageDoc[apiv1.ScheduleEvent]
	h.do("GET", "/v1/schedules/nightly/events?limit=2", nil).want(t, http.StatusOK).json(t, &first)
	if len(first.Items) != 2 || first.Items[0].Seq != 1 || first.Items[0].Type != "created" || first.NextCursor == nil || *first.NextCursor != "2" {
		t.Fatalf("page 1 = %+v", first)
	}
	h.do("GET", "/v1/schedules/nightly/events?after="+*first.NextCursor, nil).want(t, http.StatusOK).json(t, &rest)
	if len(rest.Items) != 2 || rest.Items[0].Seq != 3 || rest.Items[0].Type != "unpaused" || string(rest.Items[1].Data) != `{"note":"pause"}` ||
		rest.NextCursor == nil || *rest.NextCursor != "" {
		t.Fatalf("after 2 = %+v", rest)
	}
	h.do("GET", "/v1/schedules/nightly/events?after=x", nil).want(t, http.StatusBadRequest).problem(t)
}

// TestSchedulePerms: a reader reads schedules and changes none; an
// operator pauses, triggers and backfills them but does not save or
// delete them; without tokens, the record names the actor anonymous.
func TestSchedulePerms(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("tick", tickFlow)
	h.putSchedule("nightly", adminSecret, nightly).want(t, http.StatusCreated)
	for _, tc := range []struct {
		method, path, token string
		status              int
	}{
		{"GET", "/v1/schedules", readerSecret, http.StatusOK},
		{"GET", "/v1/schedules/nightly", readerSecret, http.StatusOK},
		{"GET", "/v1/schedules/nightly/events", readerSecret, http.StatusOK},
		{"PUT", "/v1/schedules/nightly", readerSecret, http.StatusForbidden},
		{"POST", "/v1/schedules/nightly/pause", readerSecret, http.StatusForbidden},
		{"POST", "/v1/schedules/nightly/trigger", readerSecret, http.StatusForbidden},
		{"POST", "/v1/schedules/nightly/backfill", readerSecret, http.StatusForbidden},
		{"DELETE", "/v1/schedules/nightly", readerSecret, http.StatusForbidden},
		{"PUT", "/v1/schedules/nightly", operatorSecret, http.StatusForbidden},
		{"DELETE", "/v1/schedules/nightly", operatorSecret, http.StatusForbidden},
		{"POST", "/v1/schedules/nightly/pause", operatorSecret, http.StatusOK},
		{"POST", "/v1/schedules/nightly/unpause", operatorSecret, http.StatusOK},
		{"GET", "/v1/schedules/nightly", "", http.StatusUnauthorized},
	} {
		ct, body := "", []byte(nil)
		if tc.method == "PUT" {
			ct, body = "application/yaml", []byte(nightly)
		}
		r := h.request(tc.method, tc.path, tc.token, ct, body).want(t, tc.status)
		if tc.status >= 400 {
			r.problem(t)
		}
	}
	if evs := eventTypes(h.scheduleEvents("nightly")); !slices.Equal(evs, []string{"created by ci", "paused by ops", "unpaused by ops"}) {
		t.Fatalf("events = %q: want the operator's pause and unpause, and nothing of the refused requests", evs)
	}

	open := newHostWith(t, hostOptions{api: api.Config{}})
	open.putWorkflow("tick", tickFlow)
	open.putSchedule("nightly", "", nightly).want(t, http.StatusCreated)
	if evs := eventTypes(open.scheduleEvents("nightly")); !slices.Equal(evs, []string{"created by anonymous"}) {
		t.Fatalf("events without tokens = %q", evs)
	}
}

// TestScheduleBusy: a schedule holds at most 100 triggers and 10
// backfills that its sweep has not taken; one more is a 409 to retry.
// The sweep is kept from running (an interval of an hour), so that
// nothing takes them.
func TestScheduleBusy(t *testing.T) {
	t.Parallel()
	o := hostOptions{api: api.Config{Tokens: testTokens()}}
	o.node.Engine.ScheduleInterval = time.Hour
	h := newHostWith(t, o)
	h.putWorkflow("tick", tickFlow)
	h.putSchedule("minutely", adminSecret, "id: minutely\nworkflow: tick\nspec: { every: 1m }\n").want(t, http.StatusCreated)
	var s apiv1.Schedule
	for range 100 {
		h.do("POST", "/v1/schedules/minutely/trigger", nil).want(t, http.StatusAccepted).json(t, &s)
	}
	if s.Triggers != 100 {
		t.Fatalf("triggers = %d after 100, want 100 waiting", s.Triggers)
	}
	if p := h.do("POST", "/v1/schedules/minutely/trigger", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "too many requests waiting") {
		t.Errorf("detail %q", p.Detail)
	}
	from := time.Now().UTC().Truncate(time.Minute).Add(-time.Hour)
	body := map[string]string{"from": from.Format(time.RFC3339), "to": from.Add(10 * time.Minute).Format(time.RFC3339)}
	for range 10 {
		var res apiv1.BackfillResult
		h.do("POST", "/v1/schedules/minutely/backfill", body).want(t, http.StatusAccepted).json(t, &res)
		if res.Fires != 11 {
			t.Fatalf("fires = %d, want 11", res.Fires)
		}
	}
	h.do("POST", "/v1/schedules/minutely/backfill", body).want(t, http.StatusConflict).problem(t)
	if s := h.schedule("minutely"); s.Backfills != 10 || s.Triggers != 100 {
		t.Fatalf("schedule = %+v", s)
	}
}
