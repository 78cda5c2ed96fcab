package sdk

import "testing"

// TestInfoTraceIDs: Info carries the attempt's trace context when the
// host's info document has it, and leaves it empty when the host does
// not trace (the keys are absent).
func TestInfoTraceIDs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc, trace, span string
	}{
		{`{"attempt":1,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}`, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{`{"attempt":1}`, "", ""},
	} {
		ctx := &Context{host: &fakeHost{infoDoc: []byte(tc.doc)}}
		if i := ctx.Info(); i.TraceID != tc.trace || i.SpanID != tc.span || i.Attempt != 1 {
			t.Errorf("info %s: %+v, want trace %q span %q", tc.doc, i, tc.trace, tc.span)
		}
	}
}
