package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/internal/otlptest"
	"github.com/weftworks/weft/internal/tracing"
)

// lockedBuffer is a log destination safe for the exporter's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newOTLP returns the Tracer of cfg, shut down when the test ends, and
// its log.
func newOTLP(t *testing.T, cfg tracing.Config) (*tracing.Tracer, *lockedBuffer) {
	t.Helper()
	var buf lockedBuffer
	tr, err := tracing.New(context.Background(), cfg, []attribute.KeyValue{attribute.String("service.instance.id", "node-1")}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	if tr == nil {
		t.Fatalf("New(%+v) = nil, want a Tracer", cfg)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr, &buf
}

// TestProviderExportsOverBothProtocols: a span ended on a Tracer that New
// built reaches a real OTLP receiver over gRPC and over HTTP, with its
// attributes, its parent and the resource's service attributes.
func TestProviderExportsOverBothProtocols(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	for _, tt := range []struct{ protocol, endpoint string }{
		{tracing.ProtocolGRPC, "http://" + rcv.GRPCEndpoint()},
		{tracing.ProtocolHTTP, rcv.HTTPEndpoint()},
	} {
		tr, _ := newOTLP(t, tracing.Config{Exporter: tracing.ExporterOTLP, Protocol: tt.protocol, Endpoint: tt.endpoint, SampleRate: 1})
		ctx, parent := tr.Start(context.Background(), "parent "+tt.protocol)
		_, child := tr.Start(ctx, "child "+tt.protocol, trace.WithAttributes(attribute.String("weft.plugin", "billing")))
		child.End()
		parent.End()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := tr.Shutdown(sctx); err != nil { // flushes
			t.Errorf("%s: Shutdown: %v", tt.protocol, err)
		}
		cancel()
		spans := rcv.WaitForSpans(t, func(s []otlptest.Span) bool { return find(s, "child "+tt.protocol) != nil }, 10*time.Second)
		c, p := find(spans, "child "+tt.protocol), find(spans, "parent "+tt.protocol)
		if p == nil {
			t.Fatalf("%s: the parent span was not received", tt.protocol)
		}
		if c.TraceID != p.TraceID || c.ParentSpanID != p.SpanID {
			t.Errorf("%s: child %s/%s parent %s, want in the parent's trace %s under %s", tt.protocol, c.TraceID, c.SpanID, c.ParentSpanID, p.TraceID, p.SpanID)
		}
		if c.Attributes["weft.plugin"] != "billing" {
			t.Errorf("%s: child attributes %v, want weft.plugin=billing", tt.protocol, c.Attributes)
		}
		if c.Resource["service.name"] != "weft" || c.Resource["service.instance.id"] != "node-1" || c.Resource["service.version"] == nil {
			t.Errorf("%s: resource %v, want service.name weft, service.instance.id node-1 and a service.version", tt.protocol, c.Resource)
		}
		if c.Scope != tracing.Scope {
			t.Errorf("%s: scope %q, want %q", tt.protocol, c.Scope, tracing.Scope)
		}
	}
}

// find returns the span named name, or nil.
func find(spans []otlptest.Span, name string) *otlptest.Span {
	for i := range spans {
		if spans[i].Name == name {
			return &spans[i]
		}
	}
	return nil
}

// TestProviderSampleRateZero: at rate 0 no new trace is exported, while a
// trace a caller sampled is continued and exported.
func TestProviderSampleRateZero(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	tr, _ := newOTLP(t, tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 0})
	for range 50 {
		_, s := tr.Start(context.Background(), "unsampled")
		s.End()
	}
	caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	_, s := tr.Start(trace.ContextWithRemoteSpanContext(context.Background(), caller), "continued")
	s.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := rcv.WaitForSpans(t, func(s []otlptest.Span) bool { return find(s, "continued") != nil }, 10*time.Second)
	if len(spans) != 1 {
		t.Errorf("received %d spans, want only the continued one: %+v", len(spans), spans)
	}
	if got := spans[0].ParentSpanID; got != caller.SpanID().String() {
		t.Errorf("continued span's parent %s, want the caller's %s", got, caller.SpanID())
	}
}

// TestProviderCollectorDown: with the collector down, ending spans does
// not wait for it (10,000 of them well under a second), Shutdown returns
// within its deadline, and the failures are logged without a line per
// batch.
func TestProviderCollectorDown(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{tracing.ProtocolGRPC, tracing.ProtocolHTTP} {
		t.Run(strings.ReplaceAll(protocol, "/", "_"), func(t *testing.T) {
			t.Parallel()
			rcv := otlptest.Start(t)
			endpoint := rcv.HTTPEndpoint()
			if protocol == tracing.ProtocolGRPC {
				endpoint = "http://" + rcv.GRPCEndpoint()
			}
			rcv.Stop()
			tr, log := newOTLP(t, tracing.Config{Exporter: tracing.ExporterOTLP, Protocol: protocol, Endpoint: endpoint, SampleRate: 1, ExportTimeout: 300 * time.Millisecond})
			start := time.Now()
			for range 10_000 {
				_, s := tr.Start(context.Background(), "dropped")
				s.End()
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("ending 10000 spans with the collector down took %s, want well under a second", d)
			}
			// Failures are logged once the first batch has failed.
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(log.String(), "exporting spans failed") {
				if time.Now().After(deadline) {
					t.Fatalf("no export failure logged within 10s; log:\n%s", log)
				}
				time.Sleep(20 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start = time.Now()
			_ = tr.Shutdown(ctx) // may report the deadline: the queue could not be flushed
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("Shutdown with the collector down took %s, want it to stop at its 500ms deadline", d)
			}
			if n := strings.Count(log.String(), "level=WARN"); n > 2 {
				t.Errorf("%d warnings for one outage, want at most 2 (rate-limited):\n%s", n, log)
			}
			if len(rcv.Spans()) != 0 {
				t.Errorf("a stopped collector received spans")
			}
		})
	}
}

// TestProviderRecovers: after the collector comes back, spans reach it
// again and the recovery is logged.
func TestProviderRecovers(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	rcv.Stop()
	tr, log := newOTLP(t, tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 1, ExportTimeout: 300 * time.Millisecond})
	_, s := tr.Start(context.Background(), "lost")
	s.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = tr.Provider().(interface{ ForceFlush(context.Context) error }).ForceFlush(ctx)
	if !strings.Contains(log.String(), "exporting spans failed") {
		t.Fatalf("the failed export was not logged:\n%s", log)
	}
	rcv.Restart()
	_, s = tr.Start(context.Background(), "after")
	s.End()
	_ = tr.Provider().(interface{ ForceFlush(context.Context) error }).ForceFlush(ctx)
	rcv.WaitForSpans(t, func(s []otlptest.Span) bool { return find(s, "after") != nil }, 10*time.Second)
	if !strings.Contains(log.String(), "exporting spans again") {
		t.Errorf("the recovery was not logged:\n%s", log)
	}
}

// TestProviderOff: the exporter "none", also by default, is no Tracer
// and no error.
func TestProviderOff(t *testing.T) {
	t.Parallel()
	for _, cfg := range []tracing.Config{{}, {Exporter: tracing.ExporterNone, SampleRate: 1}} {
		tr, err := tracing.New(context.Background(), cfg, nil, nil)
		if err != nil || tr != nil {
			t.Errorf("New(%+v) = %v, %v; want nil, nil", cfg, tr, err)
		}
	}
}

// TestProviderConfigErrors: each impossible field is a *ConfigError that
// names it and its value.
func TestProviderConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg   tracing.Config
		field string
		want  string
	}{
		{tracing.Config{Exporter: "zipkin"}, "Exporter", `"zipkin"`},
		{tracing.Config{Exporter: "otlp", Protocol: "http/json"}, "Protocol", `"http/json"`},
		{tracing.Config{Exporter: "otlp", Endpoint: "collector:4317"}, "Endpoint", `"collector:4317"`},
		{tracing.Config{Exporter: "otlp", Endpoint: "ftp://collector"}, "Endpoint", `"ftp://collector"`},
		{tracing.Config{Exporter: "otlp", SampleRate: 1.5}, "SampleRate", "1.5"},
		{tracing.Config{Exporter: "otlp", SampleRate: -0.1}, "SampleRate", "-0.1"},
		{tracing.Config{Exporter: "otlp", SampleRate: 1, ExportTimeout: -time.Second}, "ExportTimeout", "-1s"},
	} {
		_, err := tracing.New(context.Background(), tt.cfg, nil, nil)
		var ce *tracing.ConfigError
		if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want a ConfigError of %s naming %s", tt.cfg, err, tt.field, tt.want)
		}
	}
}
