package api_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
)

// TestWhoamiTraceURL: GET /v1/whoami answers the host's trace viewer as
// trace_url to every role, and leaves it out when the host names none.
func TestWhoamiTraceURL(t *testing.T) {
	t.Parallel()
	const viewer = "https://jaeger.example.com/trace/{trace_id}"
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), TraceViewerURL: viewer}})
	type who struct {
		Role     string `json:"role"`
		TraceURL string `json:"trace_url"`
	}
	for _, secret := range []string{readerSecret, adminSecret} {
		var got who
		h.request("GET", "/v1/whoami", secret, "", nil).want(t, http.StatusOK).json(t, &got)
		if got.TraceURL != viewer {
			t.Errorf("whoami as %s: trace_url %q, want %q", got.Role, got.TraceURL, viewer)
		}
	}

	plain := newHost(t)
	r := plain.request("GET", "/v1/whoami", readerSecret, "", nil).want(t, http.StatusOK)
	if strings.Contains(string(r.body), "trace_url") {
		t.Errorf("whoami on a host without a trace viewer: %s, want no trace_url", r.body)
	}
}

// TestTraceViewerURLValidate: a trace viewer's link must be an absolute
// http(s) URL holding {trace_id} once; anything else is a ConfigError
// naming TraceViewerURL, and New refuses it.
func TestTraceViewerURLValidate(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", "http://tempo.internal:3200/trace/{trace_id}", "https://grafana.example.com/explore?q={trace_id}&from=now-1h"} {
		if err := (api.Config{TraceViewerURL: ok}).WithDefaults().Validate(); err != nil {
			t.Errorf("TraceViewerURL %q: %v, want it accepted", ok, err)
		}
	}
	for _, tt := range []struct{ url, want string }{
		{"jaeger.example.com/trace/{trace_id}", "absolute"},
		{"ftp://jaeger.example.com/{trace_id}", "absolute"},
		{"https:///trace/{trace_id}", "absolute"},
		{"https://jaeger.example.com/trace", "exactly once"},
		{"https://jaeger.example.com/{trace_id}/{trace_id}", "exactly once"},
	} {
		err := (api.Config{TraceViewerURL: tt.url}).WithDefaults().Validate()
		var ce *api.ConfigError
		if !errors.As(err, &ce) || ce.Field != "TraceViewerURL" || !strings.Contains(ce.Message, tt.want) {
			t.Errorf("TraceViewerURL %q: %v, want a ConfigError of TraceViewerURL saying %q", tt.url, err, tt.want)
		}
		if _, err := api.New(api.Config{TraceViewerURL: tt.url}, nil); err == nil {
			t.Errorf("New accepts TraceViewerURL %q", tt.url)
		}
	}
}
