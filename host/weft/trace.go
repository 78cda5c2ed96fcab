package weft

// Trace is where an instance's spans go when tracing is on
// (docs/observability.md, "Traces"): the W3C trace context of the
// instance's own span, which every span of the instance descends from on
// whichever node runs it, and what that span hangs from. It is decided
// once, when the instance is created, and kept with it, so that a trace
// survives the node that started it.
type Trace struct {
	// Span is the W3C traceparent of the instance's span:
	// "00-<trace id>-<span id>-<flags>". Its sampled flag decides, for
	// the instance's whole life, whether its spans are recorded.
	Span string `json:"span"`
	// Parent is the span id (16 hex digits) of the span the instance's
	// span is a child of, in the same trace: the span of a request that
	// carried a traceparent, or the parent instance's attempt that
	// started a child workflow. Empty when the instance's span is the
	// root of its trace.
	Parent string `json:"parent,omitempty"`
	// Link is the traceparent of the span that created the instance when
	// that span is not its parent (an API request without a traceparent,
	// a schedule's fire): the instance's trace links to it.
	Link string `json:"link,omitempty"`
}
