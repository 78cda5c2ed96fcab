package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/weft"
)

// TestListInstancesNewestFirstInRangeAndFound: the list is newest first
// unless asked for the oldest; created_after (inclusive) and
// created_before (exclusive) bound it; ?id= finds one instance and
// ?event=&key= those waiting on a correlation key (?key= alone, under any
// event a saved workflow waits for); the counts by status
// follow. Bad parameters are 400s naming themselves.
func TestListInstancesNewestFirstInRangeAndFound(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("hold", holdFlow)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	var made []instance
	for _, id := range []string{"l-1", "l-2", "l-3"} {
		var in instance
		h.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": id}).want(t, http.StatusCreated).json(t, &in)
		made = append(made, in)
	}
	h.do("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"id": "g-1", "input": map[string]any{"name": "x"}}).want(t, http.StatusCreated)
	// Another event, the same key.
	h.putWorkflow("other", "name: other\nsteps: [{id: w, wait: {event: other.go, key: fixed}}]\n")
	h.do("POST", "/v1/workflows/other/instances?wait=30s&until=suspended", map[string]any{"id": "o-1"}).want(t, http.StatusCreated)

	ids := func(query string) []string {
		t.Helper()
		var page pageDoc[instance]
		h.do("GET", "/v1/instances?"+query, nil).want(t, http.StatusOK).json(t, &page)
		var out []string
		for _, in := range page.Items {
			out = append(out, in.ID)
		}
		return out
	}
	at := func(in instance) string { return url.QueryEscape(in.CreatedAt.Format(time.RFC3339Nano)) }
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"o-1", "g-1", "l-3", "l-2", "l-1"}},
		{"order=oldest", []string{"l-1", "l-2", "l-3", "g-1", "o-1"}},
		{"workflow=hold&limit=2", []string{"l-3", "l-2"}},
		{"workflow=hold&created_after=" + at(made[1]), []string{"l-3", "l-2"}},
		{"workflow=hold&created_before=" + at(made[1]), []string{"l-1"}},
		{"created_after=" + at(made[1]) + "&created_before=" + at(made[2]) + "&order=oldest", []string{"l-2"}},
		{"id=l-2", []string{"l-2"}},
		{"id=l-2&workflow=greet", nil},
		{"id=nobody", nil},
		{"event=hold.released&key=fixed", []string{"l-3", "l-2", "l-1"}},
		{"event=hold.released&key=fixed&order=oldest&limit=2", []string{"l-1", "l-2"}},
		{"event=hold.released&key=other", nil},
		{"key=fixed", []string{"o-1", "l-3", "l-2", "l-1"}},
		{"key=fixed&workflow=other", []string{"o-1"}},
		{"key=other", nil},
	} {
		if got := ids(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("GET /v1/instances?%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	for query, param := range map[string]string{
		"order=sideways":                      "order",
		"created_after=yesterday":             "created_after",
		"created_before=2026-13-01T00:00:00Z": "created_before",
		"key=fixed&cursor=abc":                "cursor",
		"id=l-1&event=hold.released&key=x":    "id",
	} {
		p := h.do("GET", "/v1/instances?"+query, nil).want(t, http.StatusBadRequest).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Path != param {
			t.Errorf("GET /v1/instances?%s: errors %+v, want one on %s", query, p.Errors, param)
		}
	}

	var counts struct {
		Total    int            `json:"total"`
		ByStatus map[string]int `json:"by_status"`
	}
	h.do("GET", "/v1/counts/instances?workflow=hold", nil).want(t, http.StatusOK).json(t, &counts)
	if counts.Total != 3 || counts.ByStatus["suspended"] != 3 || len(counts.ByStatus) != len(weft.Statuses()) {
		t.Errorf("counts of hold = %+v, want 3 suspended of 3, every status named", counts)
	}
	h.do("POST", "/v1/instances/l-1/cancel", nil).want(t, http.StatusAccepted)
	h.awaitStatus("l-1", "cancelled")
	h.request("GET", "/v1/counts/instances", readerSecret, "", nil).want(t, http.StatusOK).json(t, &counts)
	if counts.Total != 5 || counts.ByStatus["suspended"] != 3 || counts.ByStatus["cancelled"] != 1 || counts.ByStatus["completed"] != 1 {
		t.Errorf("counts = %+v, want 3 suspended, 1 cancelled, 1 completed", counts)
	}
}

// TestWhoami: a token learns its role; without tokens every caller is an
// admin, unauthenticated.
func TestWhoami(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	type who struct {
		Role          string `json:"role"`
		Authenticated bool   `json:"authenticated"`
		Token         string `json:"token"`
	}
	for secret, want := range map[string]who{
		readerSecret:   {"reader", true, "dash"},
		operatorSecret: {"operator", true, "ops"},
		adminSecret:    {"admin", true, "ci"},
	} {
		var got who
		h.request("GET", "/v1/whoami", secret, "", nil).want(t, http.StatusOK).json(t, &got)
		if got != want {
			t.Errorf("whoami = %+v, want %+v", got, want)
		}
	}
	h.request("GET", "/v1/whoami", "", "", nil).want(t, http.StatusUnauthorized)

	open := newHostWith(t, hostOptions{api: api.Config{}})
	var got who
	open.request("GET", "/v1/whoami", "", "", nil).want(t, http.StatusOK).json(t, &got)
	if got != (who{Role: "admin"}) {
		t.Errorf("whoami without tokens = %+v, want an unauthenticated admin", got)
	}
}

// TestQueuedStimuli: an event nothing waits for is listed as queued until
// an instance takes it.
func TestQueuedStimuli(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	var out struct {
		Queued bool `json:"queued"`
	}
	h.do("POST", "/v1/events", map[string]any{"name": "hold.released", "key": "fixed", "id": "early"}).want(t, http.StatusAccepted).json(t, &out)
	if !out.Queued {
		t.Fatal("an event nothing waits for was not queued")
	}
	var page pageDoc[struct{ ID, Name, Key, State string }]
	h.request("GET", "/v1/events/queued", readerSecret, "", nil).want(t, http.StatusOK).json(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != "early" || page.Items[0].State != "queued" || page.Items[0].Key != "fixed" {
		t.Fatalf("queued = %+v, want the event early", page.Items)
	}
	h.putWorkflow("hold", holdFlow)
	h.do("POST", "/v1/workflows/hold/instances", map[string]any{"id": "taker"}).want(t, http.StatusCreated)
	h.awaitStatus("taker", "completed")
	h.request("GET", "/v1/events/queued", readerSecret, "", nil).want(t, http.StatusOK).json(t, &page)
	if len(page.Items) != 0 {
		t.Fatalf("queued after an instance took it = %+v, want none", page.Items)
	}
}

// TestListByKeyAloneFindsOlderVersions: ?key= alone finds an instance
// waiting on an event that only an older version of its workflow waits
// for; an instance waiting twice with the key is listed once; newest
// first.
func TestListByKeyAloneFindsOlderVersions(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("renamed", "name: renamed\nsteps: [{id: w, wait: {event: old.go, key: k}}]\n")
	h.do("POST", "/v1/workflows/renamed/instances?wait=30s&until=suspended", map[string]any{"id": "r-1"}).want(t, http.StatusCreated)
	// Version 2 waits for another event; r-1 still waits for old.go.
	h.putWorkflow("renamed", "name: renamed\nsteps: [{id: w, wait: {event: new.go, key: k}}]\n")
	h.do("POST", "/v1/workflows/renamed/instances?wait=30s&until=suspended", map[string]any{"id": "r-2"}).want(t, http.StatusCreated)
	// Two waits on the same key in one workflow: its instance is listed once.
	h.putWorkflow("both", "name: both\nsteps: [{id: p, parallel: [{steps: [{id: a, wait: {event: both.a, key: k}}]}, {steps: [{id: b, wait: {event: both.b, key: k}}]}]}]\n")
	h.do("POST", "/v1/workflows/both/instances?wait=30s&until=suspended", map[string]any{"id": "b-1"}).want(t, http.StatusCreated)

	var page pageDoc[instance]
	h.do("GET", "/v1/instances?key=k", nil).want(t, http.StatusOK).json(t, &page)
	var got []string
	for _, in := range page.Items {
		got = append(got, in.ID)
	}
	if !slices.Equal(got, []string{"b-1", "r-2", "r-1"}) {
		t.Errorf("GET /v1/instances?key=k = %v, want b-1, r-2, r-1 (r-1 waits for version 1's old.go)", got)
	}
}
