package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// ordersFlow declares a search attribute of each type: four from the
// input, and tags from a variable that its first step sets. Its
// instances then wait for order.go with their id as the key.
const ordersFlow = `
name: orders
search:
  customer: { type: string,   value: "${ input.customer }" }
  amount:   { type: number,   value: "${ input.amount }" }
  rush:     { type: bool,     value: "${ input.rush }" }
  due:      { type: time,     value: "${ input.due }" }
  tags:     { type: keywords, value: "${ vars.tags }" }
steps:
  - id: tag
    set: { tags: "${ input.tags }" }
  - id: hold
    wait: { event: order.go, key: "${ input.n }", timeout: 1h }
`

// refundsFlow shares customer and amount with orders, and completes at
// once.
const refundsFlow = `
name: refunds
search:
  customer: { type: string, value: "${ input.customer }" }
  amount:   { type: number, value: "${ input.amount }" }
steps:
  - id: note
    set: { done: true }
`

// searched is the part of an instance document the search tests read.
type searched struct {
	ID     string         `json:"id"`
	Status string         `json:"status"`
	Search map[string]any `json:"search"`
}

// searchHost is a host with instances of orders and refunds, one of each
// kind of attribute's value: o-2 completed, the other orders suspended,
// r-1 completed, and g-1 of a workflow that declares no attribute.
func searchHost(t *testing.T) *host {
	t.Helper()
	h := newHost(t)
	h.putWorkflow("orders", ordersFlow)
	h.putWorkflow("refunds", refundsFlow)
	h.putWorkflow("plain", "name: plain\nsteps: [{id: s, set: {x: 1}}]\n")
	for _, in := range []map[string]any{
		{"id": "o-1", "input": map[string]any{"n": "1", "customer": "acme", "amount": 100, "rush": true, "due": "2026-12-01T00:00:00Z", "tags": []string{"eu", "vip"}}},
		{"id": "o-2", "input": map[string]any{"n": "2", "customer": "acme", "amount": 2500, "rush": false, "due": "2026-12-15T09:30:00+01:00", "tags": []string{"us"}}},
		{"id": "o-3", "input": map[string]any{"n": "3", "customer": "globex", "amount": 50, "tags": "eu"}},
		{"id": "o-4", "input": map[string]any{"n": "4", "customer": "initech", "amount": 900, "rush": true, "due": "2027-01-10T00:00:00Z", "tags": []string{}}},
	} {
		h.do("POST", "/v1/workflows/orders/instances?wait=30s&until=suspended", in).want(t, http.StatusCreated)
	}
	h.do("POST", "/v1/workflows/refunds/instances?wait=30s", map[string]any{"id": "r-1", "input": map[string]any{"customer": "acme", "amount": 40}}).want(t, http.StatusCreated)
	h.do("POST", "/v1/workflows/plain/instances?wait=30s", map[string]any{"id": "g-1"}).want(t, http.StatusCreated)
	h.do("POST", "/v1/events", map[string]any{"name": "order.go", "key": "2"}).want(t, http.StatusAccepted)
	h.awaitStatus("o-2", "completed")
	return h
}

// searchPage reads one page of GET /v1/instances?q= with the other
// parameters given.
func searchPage(t *testing.T, h *host, q, params string) apiv1.Page[searched] {
	t.Helper()
	var page apiv1.Page[searched]
	h.request("GET", "/v1/instances?q="+url.QueryEscape(q)+params, readerSecret, "", nil).want(t, http.StatusOK).json(t, &page)
	return page
}

// searchAll reads every page of a search, limit instances a page, and
// returns the ids in the order read.
func searchAll(t *testing.T, h *host, q, params string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("q=%s: more than 100 pages", q)
		}
		p := params + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		page := searchPage(t, h, q, p)
		if len(page.Items) > limit {
			t.Fatalf("q=%s: a page of %d items, limit %d", q, len(page.Items), limit)
		}
		for _, in := range page.Items {
			ids = append(ids, in.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			return ids
		}
	}
}

// TestSearchInstances: GET /v1/instances?q= finds the instances by each
// type of search attribute and by the built-in fields, combined with the
// list's other parameters; an equality on an attribute answers by
// creation time (newest first), a range by the attribute's value (the
// highest first, the lowest with order=oldest); an instance without an
// attribute matches != and NOT; paging with limit 1 reads every match
// once, in the order of one page.
func TestSearchInstances(t *testing.T) {
	t.Parallel()
	h := searchHost(t)
	for _, tt := range []struct {
		q, params string
		want      []string
	}{
		// strings
		{`customer = "acme"`, "", []string{"r-1", "o-2", "o-1"}},
		{`customer = "acme"`, "&order=oldest", []string{"o-1", "o-2", "r-1"}},
		{`customer = "acme"`, "&workflow=orders", []string{"o-2", "o-1"}},
		{`customer = "acme"`, "&status=suspended", []string{"o-1"}},
		{`customer = "acme"`, "&workflow=orders&status=completed", []string{"o-2"}},
		{`customer IN ("globex", "initech")`, "", []string{"o-4", "o-3"}},
		{`customer STARTS_WITH "ac" AND NOT tags = "vip"`, "", []string{"r-1", "o-2"}},
		{`customer != "acme"`, "", []string{"g-1", "o-4", "o-3"}},
		// numbers: a range answers by value
		{`amount > 100`, "", []string{"o-2", "o-4"}},
		{`amount > 100`, "&order=oldest", []string{"o-4", "o-2"}},
		{`amount >= 50 AND amount < 1000`, "", []string{"o-4", "o-1", "o-3"}},
		{`amount < 1e3`, "&workflow=refunds", []string{"r-1"}},
		// bools
		{`rush = true`, "", []string{"o-4", "o-1"}},
		{`rush != true`, "&workflow=orders", []string{"o-3", "o-2"}},
		// times, whatever their offsets
		{`due < "2026-12-10"`, "", []string{"o-1"}},
		{`due = "2026-12-15T08:30:00Z"`, "", []string{"o-2"}},
		{`due >= "2026-12-01T00:00:00Z" AND due < "2027-01-01"`, "&order=oldest", []string{"o-1", "o-2"}},
		// keywords
		{`tags = "eu"`, "", []string{"o-3", "o-1"}},
		{`tags = "eu"`, "&status=completed", nil},
		{`tags NOT IN ("eu")`, "&workflow=orders", []string{"o-4", "o-2"}},
		// the built-in fields
		{`status = "completed" AND workflow = "orders"`, "", []string{"o-2"}},
		{`id STARTS_WITH "o-" AND amount < 100`, "", []string{"o-3"}},
		{`workflow = "refunds" OR (rush = true AND amount > 500)`, "", []string{"r-1", "o-4"}},
		{`version = 1 AND created_at > "2000-01-01"`, "&workflow=plain", []string{"g-1"}},
		// nothing can match
		{`workflow = "refunds"`, "&workflow=orders", nil},
		{`amount > 5 AND amount < 1`, "", nil},
	} {
		page := searchPage(t, h, tt.q, tt.params)
		var got []string
		for _, in := range page.Items {
			got = append(got, in.ID)
		}
		if !slices.Equal(got, tt.want) || page.NextCursor != "" {
			t.Errorf("q=%s%s: %v (next %q), want %v and no next page", tt.q, tt.params, got, page.NextCursor, tt.want)
		}
	}

	// Paging, one at a time: each match once, in the order of one page.
	for _, tt := range []struct{ q, params string }{
		{`amount > 0`, ""},
		{`amount > 0`, "&order=oldest"},
		{`customer = "acme"`, ""},
		{`tags IN ("eu", "us", "vip")`, ""},
		{`rush != true`, ""},
		{`created_at > "2000-01-01"`, "&order=oldest"},
	} {
		whole := searchAll(t, h, tt.q, tt.params, 100)
		paged := searchAll(t, h, tt.q, tt.params, 1)
		if len(whole) == 0 || !slices.Equal(paged, whole) {
			t.Errorf("q=%s%s: paged one by one %v, want %v", tt.q, tt.params, paged, whole)
		}
	}
}

// TestSearchInstanceDocument: an instance's search attributes are in its
// document, GET /v1/instances/{id} and the list's, as JSON has them (a
// time in UTC); an attribute whose value is absent (an empty list of
// keywords) is left out, and an instance without any has no search.
func TestSearchInstanceDocument(t *testing.T) {
	t.Parallel()
	h := searchHost(t)
	for id, want := range map[string]map[string]any{
		"o-1": {"customer": "acme", "amount": 100.0, "rush": true, "due": "2026-12-01T00:00:00Z", "tags": []any{"eu", "vip"}},
		"o-2": {"customer": "acme", "amount": 2500.0, "rush": false, "due": "2026-12-15T08:30:00Z", "tags": []any{"us"}},
		"o-3": {"customer": "globex", "amount": 50.0, "tags": []any{"eu"}},
		"o-4": {"customer": "initech", "amount": 900.0, "rush": true, "due": "2027-01-10T00:00:00Z"},
		"r-1": {"customer": "acme", "amount": 40.0},
	} {
		var in searched
		h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusOK).json(t, &in)
		if !reflect.DeepEqual(in.Search, want) {
			t.Errorf("%s: search %v, want %v", id, in.Search, want)
		}
		page := searchPage(t, h, `id = "`+id+`"`, "")
		if len(page.Items) != 1 || !reflect.DeepEqual(page.Items[0].Search, want) {
			t.Errorf("%s listed: %+v, want search %v", id, page.Items, want)
		}
	}
	raw := h.do("GET", "/v1/instances/g-1", nil).want(t, http.StatusOK)
	var doc map[string]json.RawMessage
	raw.json(t, &doc)
	if _, ok := doc["search"]; ok {
		t.Errorf("an instance of a workflow without search attributes: search %s, want none", doc["search"])
	}
}

// TestSearchBadQueries: a query that does not parse or type is a 400
// invalid-query problem whose detail is the error, with the parameter q
// named, the byte offset of the offending token and the token; a query
// with id, event, key or plugin is a 400 naming q; the bounds of a query
// are the query's errors.
func TestSearchBadQueries(t *testing.T) {
	t.Parallel()
	h := searchHost(t)
	long := `customer = "` + strings.Repeat("a", 200) + `"`
	for long += " OR amount = 1"; len(long) <= 4096; long += " OR amount = 1" {
	}
	for _, tt := range []struct {
		q       string
		pos     int
		token   string
		message string
	}{
		{`customer = "acme" AND amout > 1`, 22, "amout", `unknown field; did you mean "amount"?`},
		{`customer == "acme"`, 9, "==", "unknown operator: equality is ="},
		{`amount = "abc"`, 9, `"abc"`, `amount is a number: "abc" is a string`},
		{`tags > "a"`, 5, ">", "> is not allowed on tags"},
		{`status = "lost"`, 9, `"lost"`, "status"},
		{`customer = "acme" AND`, 21, "", ""},
		{`(customer = "acme"`, 18, "", ""},
		{long, 4096, "", "more than 4096"},
	} {
		r := h.request("GET", "/v1/instances?q="+url.QueryEscape(tt.q), readerSecret, "", nil).want(t, http.StatusBadRequest)
		p := r.problem(t)
		if p.Type != "urn:weft:problem:invalid-query" || !strings.HasPrefix(p.Detail, "query: at ") {
			t.Errorf("q=%.60s: %s %q, want an invalid-query problem with the query's error", tt.q, p.Type, p.Detail)
			continue
		}
		if p.Position == nil || *p.Position != tt.pos || p.Token != tt.token {
			t.Errorf("q=%.60s: position %v, token %q; want %d, %q", tt.q, p.Position, p.Token, tt.pos, tt.token)
		}
		if len(p.Errors) != 1 || p.Errors[0].Path != "q" || !strings.Contains(p.Errors[0].Message, tt.message) || !strings.Contains(p.Detail, p.Errors[0].Message) {
			t.Errorf("q=%.60s: errors %+v, want one on q saying %q (detail %q)", tt.q, p.Errors, tt.message, p.Detail)
		}
	}
	// A query of the largest size, escaped three bytes for one in the
	// URL, reaches the handler (the server's headers limit holds it).
	big := `tags = "` + strings.Repeat("%", 56) + `"`
	for len(big)+len(` OR tags = "`)+56+1 <= 4096 && strings.Count(big, " OR ") < 63 {
		big += ` OR tags = "` + strings.Repeat("%", 56) + `"`
	}
	big += strings.Repeat(" ", 4096-len(big))
	if page := searchPage(t, h, big, ""); len(page.Items) != 0 || len(url.QueryEscape(big)) < 10000 {
		t.Errorf("a query of %d bytes (%d escaped): %+v, want no match", len(big), len(url.QueryEscape(big)), page.Items)
	}
	// The position of a token at 0 is there all the same.
	p := h.do("GET", "/v1/instances?q=amout+%3D+1", nil).want(t, http.StatusBadRequest).problem(t)
	var raw map[string]any
	if b, _ := json.Marshal(p); json.Unmarshal(b, &raw) != nil || raw["position"] != 0.0 || raw["token"] != "amout" {
		t.Errorf("a problem at 0: %+v", raw)
	}
	for _, params := range []string{"&id=o-1", "&event=order.go&key=1", "&key=1", "&plugin=kit"} {
		p := h.do("GET", "/v1/instances?q=amount+%3E+1"+params, nil).want(t, http.StatusBadRequest).problem(t)
		if p.Type != "urn:weft:problem:invalid-request" || len(p.Errors) != 1 || p.Errors[0].Path != "q" {
			t.Errorf("q with %s: %+v, want an invalid-request naming q", params, p)
		}
	}
}

// TestSearchAttributeRegistry: GET /v1/search-attributes lists every
// name a saved definition declared, with its type and the workflow that
// declared it first, by name, to a reader; a definition that declares a
// registered name with another type is refused at search.NAME.type, and
// registers nothing.
func TestSearchAttributeRegistry(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	var empty apiv1.SearchAttributes
	r := h.request("GET", "/v1/search-attributes", readerSecret, "", nil).want(t, http.StatusOK)
	r.json(t, &empty)
	if empty.Items == nil || len(empty.Items) != 0 || !strings.Contains(string(r.body), `"items":[]`) {
		t.Errorf("the registry of a new host: %s, want no items (an empty list)", r.body)
	}
	h.putWorkflow("orders", ordersFlow)
	h.putWorkflow("refunds", refundsFlow)
	refused := h.request("PUT", "/v1/workflows/ledger", adminSecret, "application/yaml", []byte(`
name: ledger
search:
  amount: { type: string, value: "${ input.amount }" }
  memo:   { type: string, value: "${ input.memo }" }
steps:
  - { id: s, set: { x: 1 } }
`)).want(t, http.StatusUnprocessableEntity).problem(t)
	if len(refused.Errors) != 1 || refused.Errors[0].Path != "search.amount.type" || !strings.Contains(refused.Errors[0].Message, "number") {
		t.Errorf("a type conflict: %+v, want one problem at search.amount.type naming the registered type", refused.Errors)
	}
	var got apiv1.SearchAttributes
	h.request("GET", "/v1/search-attributes", readerSecret, "", nil).want(t, http.StatusOK).json(t, &got)
	want := []apiv1.SearchAttribute{
		{Name: "amount", Type: apiv1.SearchNumber, Workflow: "orders"},
		{Name: "customer", Type: apiv1.SearchString, Workflow: "orders"},
		{Name: "due", Type: apiv1.SearchTime, Workflow: "orders"},
		{Name: "rush", Type: apiv1.SearchBool, Workflow: "orders"},
		{Name: "tags", Type: apiv1.SearchKeywords, Workflow: "orders"},
	}
	if !slices.Equal(got.Items, want) {
		t.Errorf("the registry: %+v, want %+v", got.Items, want)
	}
	h.request("GET", "/v1/search-attributes", "", "", nil).want(t, http.StatusUnauthorized)
}
