package plugins

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/plugins/grant"
)

// Tracing of the guests' outbound requests (abi/README.md §13, "Trace
// context"; docs/observability.md, "Traces"). With Config.Tracer set, every
// hop sent on the wire — the first request and each redirect, as a server
// sees them — is a client span under the span of the call's context (the
// attempt's, under the engine), and carries that span's W3C trace
// context, so that the server joins the trace and each hop's server span
// hangs from the hop that reached it. A hop the grants or a limit refuse
// before it is sent makes no span: the call fails, and the attempt's span
// says why. A hop a rate limit refuses makes a span of its own (the wait
// for a turn is in it), marked weft.http.rate_limited.
//
// Nothing a span holds is a secret: the URL loses its query and fragment,
// and the call's secrets are masked in it as in its request records.

// tracerScope is the instrumentation scope of the outbound spans.
const tracerScope = "github.com/weftworks/weft/plugins"

// Attribute keys of Weft's own on an outbound span.
const (
	attrPlugin      = attribute.Key("weft.plugin")
	attrGrantRule   = attribute.Key("weft.grant.rule")
	attrRateLimited = attribute.Key("weft.http.rate_limited")
)

// tracer returns the tracer of the outbound spans, nil when the runtime
// makes none.
func (o *outbound) tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	o.tracerOnce.Do(func() { o.traceWith = tp.Tracer(tracerScope) })
	return o.traceWith
}

// startHop starts the span of a hop allowed by rule and returns the
// request to send: r itself when h traces nothing, else a copy under the
// span carrying its trace context, unless the guest set its own
// (h.guestTrace), which is sent as the guest wrote it.
func (h *hops) startHop(r *http.Request, rule string) (*http.Request, trace.Span) {
	if h.tracer == nil {
		return r, nil
	}
	method, known := spanMethod(r.Method)
	name := "HTTP"
	if known {
		name += " " + method
	}
	ctx, span := h.tracer.Start(r.Context(), name, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		cs := h.cs
		attrs := []attribute.KeyValue{
			semconv.HTTPRequestMethodKey.String(method),
			semconv.URLFull(cs.mask(string(redactURL([]byte(r.URL.String()))))),
			semconv.URLScheme(r.URL.Scheme),
			semconv.ServerAddress(cs.mask(r.URL.Hostname())),
			semconv.ServerPort(serverPort(r)),
			attrPlugin.String(cs.call.Info.Plugin),
			attrGrantRule.String(rule),
		}
		if !known {
			attrs = append(attrs, semconv.HTTPRequestMethodOriginal(cs.mask(r.Method)))
		}
		span.SetAttributes(attrs...)
	}
	if h.guestTrace {
		return r, span
	}
	r = r.Clone(ctx) // a RoundTripper must not change its request
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(r.Header))
	return r, span
}

// endHop ends a hop's span with what the hop got: a response, whose span
// ends when its body is closed (the client closes a redirect's, the call
// the last one's once read), or an error, which ends it now. resp and err
// are returned as they were, but for the body that ends the span.
func (h *hops) endHop(span trace.Span, r *http.Request, resp *http.Response, refused bool, err error) (*http.Response, error) {
	if span == nil {
		return resp, err
	}
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(h.errorType(r, err)))
		span.SetStatus(codes.Error, h.cs.mask(describe(err)))
		span.End()
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	switch {
	case refused:
		span.SetAttributes(attrRateLimited.Bool(true), semconv.ErrorTypeKey.String("rate_limited"))
		span.SetStatus(codes.Error, "refused by the rate limit of "+h.refused.key+": not sent")
		span.End()
		return resp, nil
	case resp.StatusCode >= 500:
		code := strconv.Itoa(resp.StatusCode)
		span.SetAttributes(semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, "the server answered "+code)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		span.End()
		return resp, nil
	}
	resp.Body = &tracedBody{ReadCloser: resp.Body, span: span, reqCtx: r.Context()}
	return resp, nil
}

// errorType is the error.type of hop r that got no response (err), as
// the request's record names it.
func (h *hops) errorType(r *http.Request, err error) string {
	var ae *grant.AddressError
	var le *limiterError
	switch {
	case errors.As(err, &ae):
		return "not_granted"
	case errors.As(err, &le):
		return "rate_limiter_failed"
	case h.cs.ctx != nil && errors.Is(h.cs.ctx.Err(), context.Canceled):
		return "cancelled"
	}
	_, reason := classifyHTTP(err, r.Context())
	return reason
}

// tracedBody ends its hop's span when the body is closed, marking it
// failed when reading the body failed.
type tracedBody struct {
	io.ReadCloser
	span   trace.Span
	reqCtx context.Context
	once   sync.Once
}

// Read implements io.Reader.
func (b *tracedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		_, reason := classifyHTTP(err, b.reqCtx)
		b.span.SetAttributes(semconv.ErrorTypeKey.String(reason))
		b.span.SetStatus(codes.Error, "reading the response body: "+reason)
	}
	return n, err
}

// Close implements io.Closer.
func (b *tracedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}

// spanMethod returns the http.request.method of method: itself when it is
// one of the methods of RFC 9110 and PATCH, else "_OTHER"
// (semantic conventions), and whether it was one.
func spanMethod(method string) (string, bool) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method, true
	}
	return "_OTHER", false
}

// serverPort is the port r goes to: the URL's, or its scheme's default.
func serverPort(r *http.Request) int {
	if p, err := strconv.Atoi(r.URL.Port()); err == nil {
		return p
	}
	if r.URL.Scheme == "https" {
		return 443
	}
	return 80
}
