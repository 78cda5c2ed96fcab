package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestTraceViewerURLConfig: tracing.viewer_url is empty by default, an
// absolute http(s) URL with {trace_id} in it once is what reaches the API
// (whatever tracing.exporter is) and survives `weft config`, and any
// other value is refused with the key, its source and why.
func TestTraceViewerURLConfig(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.API().TraceViewerURL; got != "" {
		t.Errorf("the API's trace viewer URL is %q by default, want none", got)
	}

	for _, tmpl := range []string{
		"https://jaeger.example.com/trace/{trace_id}",
		`http://grafana.example.com/explore?left={"datasource":"tempo","queries":[{"query":"{trace_id}"}]}`,
	} {
		c, err := load(t, "", []string{"WEFT_TRACING_VIEWER_URL=" + tmpl, "WEFT_TRACING_EXPORTER=none"})
		if err != nil {
			t.Fatalf("tracing.viewer_url=%s: %v", tmpl, err)
		}
		if got := c.API().TraceViewerURL; got != tmpl {
			t.Errorf("tracing.viewer_url=%s reaches the API as %q", tmpl, got)
		}
		var out bytes.Buffer
		if err := c.Print(&out); err != nil {
			t.Fatal(err)
		}
		back, err := Load(Sources{File: writeFile(t, t.TempDir(), "printed.yaml", out.String()), Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("the printed configuration does not load: %v\n%s", err, &out)
		}
		if got := back.API().TraceViewerURL; got != tmpl {
			t.Errorf("tracing.viewer_url=%s is %q once printed and loaded back:\n%s", tmpl, got, &out)
		}
	}

	for _, tt := range []struct{ value, want string }{
		{"not a url {trace_id}", "absolute http:// or https:// URL"},
		{"/trace/{trace_id}", "absolute http:// or https:// URL"},
		{"javascript:alert('{trace_id}')", "absolute http:// or https:// URL"},
		{"https://jaeger.example.com/trace/", "{trace_id} exactly once"},
		{"https://jaeger.example.com/trace/{trace_id}?again={trace_id}", "{trace_id} exactly once"},
	} {
		_, err := load(t, "", nil, set("tracing.viewer_url="+tt.value)...)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("tracing.viewer_url=%s: %v, want an invalid configuration", tt.value, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "tracing.viewer_url (from flag --set tracing.viewer_url)") || !strings.Contains(msg, tt.want) {
			t.Errorf("tracing.viewer_url=%s: the error does not name the key, its source and %q:\n%v", tt.value, tt.want, err)
		}
		if strings.Contains(msg, "TraceViewerURL") {
			t.Errorf("tracing.viewer_url=%s: the error names the API's field, not the key:\n%v", tt.value, err)
		}
	}
}
