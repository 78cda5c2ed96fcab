package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestInvalidUTF8Refused: a JSON body with bytes that are not UTF-8 (in a
// string, where encoding/json takes them) is refused with a 400 problem
// naming the byte offset, wherever the host would keep it raw (a start's
// input, an event's payload) or decode it; nothing is stored.
func TestInvalidUTF8Refused(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	for _, tc := range []struct {
		method, path, token string
		body                string
	}{
		{"POST", "/v1/workflows/greet/instances", operatorSecret, "{\"id\":\"u1\",\"input\":{\"name\":\"ab\xffc\"}}"},
		{"POST", "/v1/events", operatorSecret, "{\"name\":\"order.approved\",\"payload\":\"\xc3\x28\"}"},
		{"POST", "/v1/instances/cancel", operatorSecret, "{\"ids\":[\"x\"],\"reason\":\"gr\xe2\x82eet\"}"},
		{"PUT", "/v1/plugins/kit/grants", adminSecret, "{\"config\":{\"k\":\"\xed\xa0\x80\"}}"},
	} {
		at := strings.IndexFunc(tc.body, func(r rune) bool { return r == '\uFFFD' })
		r := h.request(tc.method, tc.path, tc.token, "application/json", []byte(tc.body)).want(t, http.StatusBadRequest)
		p := r.problem(t)
		want := "invalid UTF-8 at byte " + strconv.Itoa(at)
		if p.Type != "urn:weft:problem:invalid-request" || len(p.Errors) != 1 || !strings.Contains(p.Errors[0].Message, want) {
			t.Errorf("%s %s with invalid UTF-8 at byte %d: %+v; want an invalid-request problem saying %q", tc.method, tc.path, at, p, want)
		}
	}
	h.do("GET", "/v1/instances/u1", nil).want(t, http.StatusNotFound)
}

// TestUnknownMethod: a method the server does not know gets a 501 problem
// and one it knows but the route does not take a 405 problem with Allow;
// both are logged and counted like any request, the unknown method under
// one label value, and quoted and cut short in the log.
func TestUnknownMethod(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	long := strings.Repeat("X", 200)
	for _, m := range []string{"FOO", "get", long} {
		r := h.request(m, "/v1/plugins", readerSecret, "", nil).want(t, http.StatusNotImplemented)
		if p := r.problem(t); p.Type != "urn:weft:problem:not-implemented" {
			t.Errorf("%.10s: %+v", m, p)
		}
	}
	// With a body: answered all the same, the body unread.
	h.request("BREW", "/v1/events", operatorSecret, "application/json", []byte(`{"name":"a.b"}`)).want(t, http.StatusNotImplemented).problem(t)

	r := h.request("PATCH", "/v1/plugins", readerSecret, "", nil).want(t, http.StatusMethodNotAllowed)
	if p := r.problem(t); p.Type != "urn:weft:problem:method-not-allowed" || r.header.Get("Allow") != "GET" {
		t.Errorf("PATCH /v1/plugins: %+v, Allow %q", p, r.header.Get("Allow"))
	}

	logs := h.logs.String()
	for _, want := range []string{`"method":"\"FOO\"","path":"/v1/plugins","route":"unmatched","status":501`, `"method":"\"BREW\""`, `"method":"PATCH","path":"/v1/plugins","route":"unmatched","status":405`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the access log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, long[:33]) {
		t.Errorf("the access log has the whole 200-byte method:\n%s", logs)
	}
	metrics := string(h.request("GET", "/metrics", readerSecret, "", nil).want(t, http.StatusOK).body)
	for _, want := range []string{
		`weft_http_requests_total{method="other",route="unmatched",status="501"} 4`,
		`weft_http_requests_total{method="PATCH",route="unmatched",status="405"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
