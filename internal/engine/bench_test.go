package engine_test

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
)

// BenchmarkWorkflow runs a 3-activity kit.echo workflow end to end on the
// embedded store with 50 instances in flight, for each persistence
// strategy: instances/s and the latency from Start (a durable create) to
// completion (a durable commit), p50 and p99.
func BenchmarkWorkflow(b *testing.B) {
	for _, persistence := range []string{"lazy", "activity"} {
		b.Run(persistence, func(b *testing.B) {
			const inFlight = 50
			h := newHost(b, withConfig(engine.Config{NodeID: "bench", Workers: inFlight}))
			h.save(`
name: three
persistence: ` + persistence + `
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.echo, input: "${ vars.a }", output: b }
  - { id: c, activity: kit.echo, input: "${ vars.b }", output: c }
output: "${ vars.c }"
`)
			ctx := context.Background()
			var (
				next      atomic.Int64
				mu        sync.Mutex
				latencies = make([]time.Duration, 0, b.N)
				wg        sync.WaitGroup
			)
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < inFlight; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						t0 := time.Now()
						inst, _, err := h.e.Start(ctx, "three", json.RawMessage(`{"n": 1}`), "")
						if err != nil {
							b.Error(err)
							return
						}
						done, err := h.e.WaitFinished(ctx, inst.ID)
						if err != nil || done.Status != weft.StatusCompleted {
							b.Errorf("instance %s: %v %v", inst.ID, done.Status, err)
							return
						}
						mu.Lock()
						latencies = append(latencies, time.Since(t0))
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			if len(latencies) > 0 {
				b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "workflows/s")
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkStimulusToCompletion measures, one instance at a time, the time
// from Signal (its delivery durable) to the resumed instance's completion
// being durable, for an instance suspended on a wait.
func BenchmarkStimulusToCompletion(b *testing.B) {
	h := newHost(b, withConfig(engine.Config{NodeID: "bench"}))
	h.save(`
name: waiter
steps:
  - { id: w, wait: { event: go, key: "${ input.k }" }, output: got }
output: "${ vars.got }"
`)
	ctx := context.Background()
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		key := strconv.Itoa(i)
		inst, _, err := h.e.Start(ctx, "waiter", json.RawMessage(`{"k": "`+key+`"}`), "")
		if err != nil {
			b.Fatal(err)
		}
		if got, err := h.e.Wait(ctx, inst.ID); err != nil || got.Status != weft.StatusSuspended {
			b.Fatalf("instance %v, %v; want suspended", got.Status, err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := h.e.Signal(ctx, weft.Event{Name: "go", Key: key, Payload: i}); err != nil {
			b.Fatal(err)
		}
		if got, err := h.e.WaitFinished(ctx, inst.ID); err != nil || got.Status != weft.StatusCompleted {
			b.Fatalf("instance %v, %v; want completed", got.Status, err)
		}
		latencies = append(latencies, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkConcurrencyKey runs BenchmarkWorkflow's 3-activity workflow
// (lazy, 50 in flight, embedded store) without a concurrency limit
// (none), with one that never binds (free: 50 keys of limit 1000), and
// with one that does (binding: 5 keys of limit 5, so that half the
// instances in flight wait for a slot): workflows/s, and the process's
// CPU per workflow, which is the measure (docs/flow-control.md,
// "Costs").
func BenchmarkConcurrencyKey(b *testing.B) {
	for _, bc := range []struct {
		name, concurrency string
		keys              int
	}{
		{"none", "", 1},
		{"free", `concurrency: { key: "${ input.k }", limit: 1000 }`, 50},
		{"binding", `concurrency: { key: "${ input.k }", limit: 5 }`, 5},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const inFlight = 50
			h := newHost(b, withConfig(engine.Config{NodeID: "bench", Workers: inFlight}))
			h.save(`
name: three
` + bc.concurrency + `
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
			b.ResetTimer()
			start, cpu0 := time.Now(), processCPU()
			for w := range inFlight {
				wg.Add(1)
				go func() {
					defer wg.Done()
					in := json.RawMessage(`{"k": "k` + strconv.Itoa(w%bc.keys) + `"}`)
					for next.Add(1) <= int64(b.N) {
						inst, _, err := h.e.Start(ctx, "three", in, "")
						if err != nil {
							b.Error(err)
							return
						}
						done, err := h.e.WaitFinished(ctx, inst.ID)
						if err != nil || done.Status != weft.StatusCompleted {
							b.Errorf("instance %s: %v %v", inst.ID, done.Status, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "workflows/s")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/workflow")
			b.ReportMetric(0, "ns/op")
		})
	}
}
