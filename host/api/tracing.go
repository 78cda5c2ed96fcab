package api

import (
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// tracerScope is the instrumentation scope of the API's spans.
const tracerScope = "github.com/weftworks/weft/host/api"

// attrRequestID is the span attribute of the request's id (X-Request-Id).
const attrRequestID = "weft.request_id"

// startSpan starts the request's server span, a child of the caller's
// span when the request carries a valid W3C traceparent (and its
// tracestate), and makes it the request's context for the handlers, which
// pass it to the node and the engine. A traceparent also marks the context
// with the node's JoinCallerTrace: an instance the request starts is then a child of
// the request's span, in the caller's trace; without one the instance
// gets a trace of its own, linked to the request's. It returns nil, and
// does nothing else, when tracing is off. The span is named after the
// route at its end (endSpan), when the route is known.
func (s *Server) startSpan(c *fiber.Ctx) trace.Span {
	if s.tracer == nil {
		return nil
	}
	ctx := propagation.TraceContext{}.Extract(c.UserContext(), headerCarrier{&c.Request().Header})
	if trace.SpanContextFromContext(ctx).IsValid() {
		ctx = s.node.JoinCallerTrace(ctx)
	}
	method := c.Method()
	if _, unknown := c.Locals(localUnknownMethod).(string); unknown {
		method = "_OTHER" // as the semantic conventions name a method they do not know
	}
	ctx, span := s.tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLPath(c.Path()),
		semconv.URLScheme(c.Protocol()),
		semconv.ClientAddress(c.IP()),
		attribute.String(attrRequestID, requestID(c)),
	))
	c.SetUserContext(ctx)
	return span
}

// endSpan ends the request's span, named "METHOD route" (the registered
// pattern, as the metrics' label; "unmatched" for a request no route
// took), with its status code; a 5xx marks it failed.
func endSpan(span trace.Span, c *fiber.Ctx, route string, status int) {
	if span == nil {
		return
	}
	method := c.Method()
	if _, unknown := c.Locals(localUnknownMethod).(string); unknown {
		method = "_OTHER"
	}
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if route != "unmatched" {
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(status)+" "+fasthttp.StatusMessage(status))
	}
	span.End()
}

// headerCarrier reads a request's headers for a propagator.
type headerCarrier struct{ h *fasthttp.RequestHeader }

// Get implements propagation.TextMapCarrier.
func (hc headerCarrier) Get(key string) string { return string(hc.h.Peek(key)) }

// Set implements propagation.TextMapCarrier; extraction does not set.
func (hc headerCarrier) Set(key, value string) { hc.h.Set(key, value) }

// Keys implements propagation.TextMapCarrier.
func (hc headerCarrier) Keys() []string {
	var keys []string
	hc.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
