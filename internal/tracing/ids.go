package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// forcedKey is the context key of forcedIDs.
type forcedKey struct{}

// forcedIDs are the ids the next span started under a context is given,
// in place of random ones: a span emitted when it ends with ids decided
// before (an instance's, a step's). A valid trace makes the span a root
// of that trace, sampled as sampled says.
type forcedIDs struct {
	trace   trace.TraceID
	span    trace.SpanID
	sampled bool
}

// withIDs returns ctx forcing ids on the next span started under it.
func withIDs(ctx context.Context, ids forcedIDs) context.Context {
	return context.WithValue(ctx, forcedKey{}, ids)
}

// idGenerator is the provider's IDGenerator: random ids, except those a
// context forces (withIDs).
type idGenerator struct{}

// NewIDs implements sdktrace.IDGenerator: a root span's ids.
func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	f, _ := ctx.Value(forcedKey{}).(forcedIDs)
	tid, sid := f.trace, f.span
	if !tid.IsValid() {
		tid = newTraceID()
	}
	if !sid.IsValid() {
		sid = newSpanID()
	}
	return tid, sid
}

// NewSpanID implements sdktrace.IDGenerator: a child span's id.
func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedKey{}).(forcedIDs); ok && f.span.IsValid() {
		return f.span
	}
	return newSpanID()
}

// newTraceID returns a random, valid trace id.
func newTraceID() trace.TraceID {
	var id trace.TraceID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:8], rand.Uint64())
		binary.BigEndian.PutUint64(id[8:], rand.Uint64())
	}
	return id
}

// newSpanID returns a random, valid span id.
func newSpanID() trace.SpanID {
	var id trace.SpanID
	for !id.IsValid() {
		binary.BigEndian.PutUint64(id[:], rand.Uint64())
	}
	return id
}

// derivedSpanID is the span id of key in trace tid: the same on every
// node, so that the spans of a step made on several nodes share a parent
// without storing its id. FNV-1a over the trace id and the key.
func derivedSpanID(tid trace.TraceID, key string) trace.SpanID {
	h := fnv.New64a()
	h.Write(tid[:])
	h.Write([]byte(key))
	var id trace.SpanID
	binary.BigEndian.PutUint64(id[:], h.Sum64())
	if !id.IsValid() {
		id[7] = 1
	}
	return id
}

// joinKey is the context key of Join.
type joinKey struct{}

// Join marks ctx so that an instance created under it is a child of
// ctx's span rather than a trace of its own linked to it (Begin): what a
// request that carried a traceparent asks, and what a parent instance's
// attempt does for its children.
func Join(ctx context.Context) context.Context {
	return context.WithValue(ctx, joinKey{}, true)
}

// joined says whether ctx was marked with Join.
func joined(ctx context.Context) bool {
	j, _ := ctx.Value(joinKey{}).(bool)
	return j
}

// traceparent is sc as a W3C traceparent header value.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// parseTraceparent reads a W3C traceparent header value of version 00
// ("00-<32 hex>-<16 hex>-<2 hex>", as traceparent writes it) as a remote
// span context. It is read on every span of an instance, so it decodes
// the fixed positions itself rather than going through a propagator.
func parseTraceparent(s string) (trace.SpanContext, error) {
	var tid trace.TraceID
	var sid trace.SpanID
	var flags [1]byte
	if len(s) != 55 || s[:3] != "00-" || s[35] != '-' || s[52] != '-' ||
		!decodeHex(tid[:], s[3:35]) || !decodeHex(sid[:], s[36:52]) || !decodeHex(flags[:], s[53:55]) {
		return trace.SpanContext{}, fmt.Errorf("tracing: %q is not a W3C traceparent", s)
	}
	// As the W3C propagator: flags beyond sampled (1) and random (2) are
	// not version 00's.
	if flags[0] > 3 {
		return trace.SpanContext{}, fmt.Errorf("tracing: %q is not a W3C traceparent", s)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	if !sc.IsValid() {
		return sc, fmt.Errorf("tracing: %q is not a W3C traceparent", s)
	}
	return sc, nil
}

// decodeHex decodes lowercase hex s into dst, which is len(s)/2 long.
func decodeHex(dst []byte, s string) bool {
	for i := range dst {
		hi, ok1 := hexDigit(s[2*i])
		lo, ok2 := hexDigit(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexDigit is the value of a lowercase hex digit.
func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
