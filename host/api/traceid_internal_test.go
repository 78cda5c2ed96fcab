package api

import (
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestViewTraceID: the trace id of a sampled traceparent, nothing for no
// trace, an unsampled one, or one that does not parse.
func TestViewTraceID(t *testing.T) {
	t.Parallel()
	const tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, c := range []struct {
		name  string
		trace *weft.Trace
		want  string
	}{
		{"no trace", nil, ""},
		{"empty span", &weft.Trace{}, ""},
		{"sampled", &weft.Trace{Span: "00-" + tid + "-00f067aa0ba902b7-01"}, tid},
		{"sampled with other flags", &weft.Trace{Span: "00-" + tid + "-00f067aa0ba902b7-03"}, tid},
		{"not sampled", &weft.Trace{Span: "00-" + tid + "-00f067aa0ba902b7-00"}, ""},
		{"zero trace id", &weft.Trace{Span: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, ""},
		{"damaged", &weft.Trace{Span: "00-" + tid[:30] + "-00f067aa0ba902b7-01"}, ""},
		{"not a traceparent", &weft.Trace{Span: "garbage"}, ""},
	} {
		if got := viewTraceID(c.trace); got != c.want {
			t.Errorf("%s: viewTraceID(%+v) = %q, want %q", c.name, c.trace, got, c.want)
		}
	}
}
