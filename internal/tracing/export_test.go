package tracing

// ParseTraceparent and Traceparent are the package's traceparent codec,
// for its fuzz target.
var (
	ParseTraceparent = parseTraceparent
	Traceparent      = traceparent
)
