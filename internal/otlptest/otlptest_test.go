package otlptest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/internal/otlptest"
)

// TestOTLPReceiver: the SDK's own exporters, over gRPC, HTTP and gzipped
// HTTP, deliver spans the receiver returns flattened: ids, parent, kind,
// attributes, events, links, status.
func TestOTLPReceiver(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	ctx := context.Background()
	exporters := map[string]func() (sdktrace.SpanExporter, error){
		"grpc": func() (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL("http://"+rcv.GRPCEndpoint()))
		},
		"http": func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rcv.HTTPEndpoint()+"/v1/traces"))
		},
		"http-gzip": func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rcv.HTTPEndpoint()+"/v1/traces"), otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		},
	}
	for name, newExp := range exporters {
		exp, err := newExp()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		tr := tp.Tracer("otlptest")
		link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}})
		pctx, parent := tr.Start(ctx, name+" parent", trace.WithSpanKind(trace.SpanKindServer), trace.WithLinks(trace.Link{SpanContext: link}))
		_, child := tr.Start(pctx, name+" child", trace.WithAttributes(attribute.String("s", "v"), attribute.Int("n", 3), attribute.Bool("b", true)))
		child.AddEvent("timer.fired", trace.WithAttributes(attribute.String("timer", "t1")))
		child.End()
		parent.SetStatus(codes.Error, "boom")
		parent.End()
		if err := tp.Shutdown(ctx); err != nil {
			t.Fatalf("%s: Shutdown: %v", name, err)
		}
		spans := rcv.WaitForSpans(t, func(s []otlptest.Span) bool { return has(s, name+" parent") && has(s, name+" child") }, 10*time.Second)
		var p, c otlptest.Span
		for _, s := range spans {
			switch s.Name {
			case name + " parent":
				p = s
			case name + " child":
				c = s
			}
		}
		if c.TraceID != p.TraceID || c.ParentSpanID != p.SpanID || p.ParentSpanID != "" {
			t.Errorf("%s: parent %+v child %+v: want the child under the parent, the parent a root", name, p, c)
		}
		if p.Kind != "SERVER" || c.Kind != "INTERNAL" {
			t.Errorf("%s: kinds %s, %s; want SERVER, INTERNAL", name, p.Kind, c.Kind)
		}
		if c.Attributes["s"] != "v" || c.Attributes["n"] != int64(3) || c.Attributes["b"] != true {
			t.Errorf("%s: attributes %v", name, c.Attributes)
		}
		if len(c.Events) != 1 || c.Events[0].Name != "timer.fired" || c.Events[0].Attributes["timer"] != "t1" {
			t.Errorf("%s: events %+v", name, c.Events)
		}
		if len(p.Links) != 1 || p.Links[0].TraceID != link.TraceID().String() || p.Links[0].SpanID != link.SpanID().String() {
			t.Errorf("%s: links %+v, want %s/%s", name, p.Links, link.TraceID(), link.SpanID())
		}
		if p.StatusCode != "ERROR" || p.StatusMessage != "boom" {
			t.Errorf("%s: status %s %q, want ERROR boom", name, p.StatusCode, p.StatusMessage)
		}
		if !p.End.After(p.Start) && !p.End.Equal(p.Start) {
			t.Errorf("%s: span ends %s before it starts %s", name, p.End, p.Start)
		}
	}
}

// has reports whether a span is named name.
func has(spans []otlptest.Span, name string) bool {
	for _, s := range spans {
		if s.Name == name {
			return true
		}
	}
	return false
}

// TestOTLPReceiverStopRestart: a stopped receiver refuses exports; once
// restarted on its ports it takes them again.
func TestOTLPReceiverStopRestart(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	rcv.Stop()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(rcv.HTTPEndpoint()+"/v1/traces"), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	_, s := tp.Tracer("otlptest").Start(ctx, "x")
	s.End()
	ro := s.(sdktrace.ReadOnlySpan)
	if err := exp.ExportSpans(ctx, []sdktrace.ReadOnlySpan{ro}); err == nil {
		t.Fatal("an export to a stopped receiver succeeded")
	}
	rcv.Restart()
	if err := exp.ExportSpans(ctx, []sdktrace.ReadOnlySpan{ro}); err != nil {
		t.Fatalf("an export to the restarted receiver: %v", err)
	}
	if n := len(rcv.Spans()); n != 1 {
		t.Errorf("%d spans after the restart, want 1", n)
	}
	_ = exp.Shutdown(ctx)
}
