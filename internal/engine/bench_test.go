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
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
)

// BenchmarkWorkflow runs a 3-activity kit.echo workflow end to end on the
// embedded store with 50 instances in flight, for each persistence
// strategy: instances/s, the latency from Start (a durable create) to
// completion (a durable commit), p50 and p99, and the process's CPU per
// instance (the engine, the store, the guests and the collector).
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
			start, cpu0 := time.Now(), processCPU()
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
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
			if len(latencies) > 0 {
				b.ReportMetric(float64(len(latencies))/elapsed.Seconds(), "workflows/s")
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(latencies)), "cpu-ms/op")
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
		b.Run(bc.name, func(b *testing.B) { benchThree(b, bc.concurrency, bc.keys) })
	}
}

// BenchmarkSearchAttributes is BenchmarkConcurrencyKey's workflow without
// search attributes and with five (over input and vars), which the engine
// evaluates at every commit and the store indexes: the CPU per workflow
// they cost.
func BenchmarkSearchAttributes(b *testing.B) {
	for _, bc := range []struct{ name, search string }{
		{"none", ""},
		{"five", `search:
  customer: { type: string, value: "${ input.k }" }
  amount: { type: number, value: "${ input.n }" }
  vip: { type: bool, value: "${ input.n > 10 }" }
  due: { type: time, value: "2026-12-01T00:00:00Z" }
  stage: { type: keywords, value: "${ vars.a.k }" }`},
	} {
		b.Run(bc.name, func(b *testing.B) { benchThree(b, bc.search, 50) })
	}
}

// benchThree runs b.N instances of a 3-activity lazy workflow whose
// definition starts with header, 50 in flight, each worker's input
// {"k": "k<worker % keys>", "n": <worker>}, and reports the workflows a
// second and the process's CPU per workflow.
func benchThree(b *testing.B, header string, keys int) {
	const inFlight = 50
	h := newHost(b, withConfig(engine.Config{NodeID: "bench", Workers: inFlight}))
	h.save(`
name: three
` + header + `
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
			in := json.RawMessage(`{"k": "k` + strconv.Itoa(w%keys) + `", "n": ` + strconv.Itoa(w) + `}`)
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
}

// BenchmarkFairness is the tenant test: tenant A starts 20,000
// instances of a 3-activity workflow (lazy, embedded store, the node's
// default queue capacity of 10,000), and once they are all started or
// queued, tenant B starts 20. It reports B's p50 and p99 latency (start to
// completion) and their ratio to those of B's 20 on the idle host, with
// the workflow's fairness key set to the tenant (fair) and without it
// (fifo: B waits behind A's backlog). The engine has 16 workers, so that
// A's starts (64 goroutines) outrun its runs and leave a backlog. Run it
// once per configuration: -benchtime 1x.
func BenchmarkFairness(b *testing.B) {
	for _, bc := range []struct{ name, fairness string }{
		{"fair", `fairness: { key: "${ input.tenant }" }`},
		{"fifo", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// 16 workers: the instances are created faster than they run, so
			// that A's starts leave a backlog, as a tenant's burst does.
			h := newHost(b, withConfig(engine.Config{NodeID: "bench", Workers: 16}), func(p *hostParts) {
				p.wrapQueue = func(queue.Queue) queue.Queue { return memqueue.New(10000) }
			})
			h.save(`
name: three
` + bc.fairness + `
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.echo, input: "${ vars.a }", output: b }
  - { id: c, activity: kit.echo, input: "${ vars.b }", output: c }
output: "${ vars.c }"
`)
			ctx := context.Background()
			// tenantB starts 20 instances at once and returns their latencies,
			// sorted.
			tenantB := func() []time.Duration {
				var (
					mu  sync.Mutex
					lat []time.Duration
					wg  sync.WaitGroup
				)
				for range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						t0 := time.Now()
						inst, _, err := h.e.Start(ctx, "three", json.RawMessage(`{"tenant": "B"}`), "")
						if err != nil {
							b.Error(err)
							return
						}
						if _, err := h.e.WaitFinished(ctx, inst.ID); err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						lat = append(lat, time.Since(t0))
						mu.Unlock()
					}()
				}
				wg.Wait()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				return lat
			}
			for b.Loop() {
				idle := tenantB()
				// Tenant A: 20,000 starts from 64 goroutines; B starts once A's
				// starts have all returned (the queue then holds A's backlog).
				var (
					next atomic.Int64
					wg   sync.WaitGroup
					ids  = make([]string, 20000)
				)
				for range 64 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := next.Add(1) - 1; i < int64(len(ids)); i = next.Add(1) - 1 {
							inst, _, err := h.e.Start(ctx, "three", json.RawMessage(`{"tenant": "A"}`), "")
							if err != nil {
								b.Error(err)
								return
							}
							ids[i] = inst.ID
						}
					}()
				}
				wg.Wait()
				loaded := tenantB()
				for _, id := range ids {
					if id == "" {
						continue
					}
					if _, err := h.e.WaitFinished(ctx, id); err != nil {
						b.Fatal(err)
					}
				}
				if len(idle) == 20 && len(loaded) == 20 {
					b.ReportMetric(float64(idle[10].Microseconds())/1000, "idle-p50-ms")
					b.ReportMetric(float64(loaded[10].Microseconds())/1000, "B-p50-ms")
					b.ReportMetric(float64(loaded[19].Microseconds())/1000, "B-max-ms")
					b.ReportMetric(float64(loaded[10])/float64(idle[10]), "B/idle-p50")
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
