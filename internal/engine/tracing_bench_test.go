package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/tracing"
)

// countingExporter discards the spans it is given and counts them: the
// spans a workflow exports, without a collector's cost.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

// closedPort returns a loopback address nothing listens on: a collector
// that is down (the connection is refused).
func closedPort(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("listening on a loopback port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		b.Fatalf("closing %s: %v", addr, err)
	}
	return addr
}

// BenchmarkTracing runs BenchmarkConcurrencyKey's 3-activity kit.echo
// workflow (lazy, 50 in flight, embedded store) with tracing off (a nil
// Config.Tracer) and on: every trace sampled, 1% of them, and every one
// sampled into an OTLP exporter whose collector is down (a loopback port
// nothing listens on, each export refused and retried for 2s while the
// batch queue fills and drops). Spans go through a batch processor, as
// in production. An op is a workflow: ns/op is wall time per workflow
// with 50 in flight (1/throughput), B/op and allocs/op the process's
// allocations per workflow, cpu-ms/workflow the process's CPU per
// workflow (the batch processor's exports included: the tracer is
// flushed, after the timer stops, before CPU is read), spans/workflow
// what the exporter got.
// Off and on should differ by the cost of the spans only; collector=down
// should run as fast as sample=1: the engine never waits on a collector.
func BenchmarkTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		// tracer returns the Tracer to run with (nil: off) and the
		// exporter counting its spans (nil: not counted).
		tracer func(b *testing.B) (*tracing.Tracer, *countingExporter)
	}{
		{"tracer=off", func(*testing.B) (*tracing.Tracer, *countingExporter) { return nil, nil }},
		{"tracer=on,sample=1", func(*testing.B) (*tracing.Tracer, *countingExporter) {
			exp := &countingExporter{}
			return tracing.NewTracer(1, sdktrace.WithBatcher(exp)), exp
		}},
		{"tracer=on,sample=0.01", func(*testing.B) (*tracing.Tracer, *countingExporter) {
			exp := &countingExporter{}
			return tracing.NewTracer(0.01, sdktrace.WithBatcher(exp)), exp
		}},
		{"tracer=on,collector=down", func(b *testing.B) (*tracing.Tracer, *countingExporter) {
			cfg := tracing.Config{
				Exporter: tracing.ExporterOTLP, Protocol: tracing.ProtocolHTTP, Endpoint: "http://" + closedPort(b),
				SampleRate: 1, ExportTimeout: 2 * time.Second,
			}
			tr, err := tracing.New(context.Background(), cfg, nil, slog.New(slog.DiscardHandler))
			if err != nil || tr == nil {
				b.Fatalf("tracing.New(%+v): %v, %v", cfg, tr, err)
			}
			return tr, nil
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tr, exp := bc.tracer(b)
			if tr != nil {
				b.Cleanup(func() {
					// Bounded: the collector that is down has its queued
					// spans dropped.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					_ = tr.Shutdown(ctx)
				})
			}
			benchTraced(b, tr, exp)
		})
	}
}

// benchTraced runs b.N instances of a 3-activity lazy workflow, 50 in
// flight, on an engine with tracer tr, and reports what BenchmarkTracing
// says; exp, when not nil, counts the spans exported.
func benchTraced(b *testing.B, tr *tracing.Tracer, exp *countingExporter) {
	const inFlight = 50
	h := newHost(b, withConfig(engine.Config{NodeID: "bench", Workers: inFlight, Tracer: tr}))
	h.save(`
name: three
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.echo, input: "${ vars.a }", output: b }
  - { id: c, activity: kit.echo, input: "${ vars.b }", output: c }
output: "${ vars.c }"
`)
	ctx := context.Background()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), processCPU()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				inst, _, err := h.e.Start(ctx, "three", json.RawMessage(`{"n": 1}`), "")
				if err != nil {
					b.Errorf("starting an instance of three: %v", err)
					return
				}
				done, err := h.e.WaitFinished(ctx, inst.ID)
				if err != nil || done.Status != weft.StatusCompleted {
					b.Errorf("instance %s: %v %v, want completed", inst.ID, done.Status, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if exp != nil {
		// The spans still queued are exported before CPU is read: their
		// cost is the workflows'. (Not with the collector down: a flush
		// would wait out the exporter's retries, which the engine never
		// does.)
		if p, ok := tr.Provider().(*sdktrace.TracerProvider); ok {
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := p.ForceFlush(fctx); err != nil {
				b.Errorf("flushing the tracer: %v", err)
			}
			cancel()
		}
	}
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "workflows/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/workflow")
	if exp != nil {
		b.ReportMetric(float64(exp.spans.Load())/float64(b.N), "spans/workflow")
	}
}
