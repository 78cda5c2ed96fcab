package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// The data-path benchmarks (issue 40, BENCHMARKS.md "The data path"):
// what the engine spends on a payload per step beyond the guest's call.
// BenchmarkPayload runs whole workflows of 1 and 5 kit.echo steps,
// BenchmarkPayloadGuest the guest's echo alone, and
// BenchmarkPayloadCommits the two commits an instance cannot do without;
// the engine's overhead per step is (5 steps − 1 step)/4 − the guest.

// payloadInFlight is how many instances BenchmarkPayload keeps in flight:
// enough for the store's group commit to share fsyncs, as a busy node's
// would, few enough for a 2-core machine.
const payloadInFlight = 8

// payloadSizes are the payload sizes.
var payloadSizes = []struct {
	name string
	n    int
}{{"16B", 16}, {"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

// payloadDoc returns a JSON document of at most n bytes: kind "string" is
// one JSON string of n bytes, the cheapest value to decode per byte; kind
// "object" is {"items": [...]} of as many small records (numbers, strings,
// a bool) as fit, the costliest (at 16 B, no record fits: {"items":[]}).
func payloadDoc(kind string, n int) []byte {
	if kind == "string" {
		pad := max(n-2, 0)
		return []byte(`"` + strings.Repeat("abcdefghij", pad/10+1)[:pad] + `"`)
	}
	var b strings.Builder
	b.WriteString(`{"items":[`)
	for i := 0; ; i++ {
		rec := fmt.Sprintf(`{"id":%d,"name":"item-%d","price":%d.25,"tags":["a","bb"],"ok":true}`, i, i, i%1000)
		if i > 0 {
			rec = "," + rec
		}
		if b.Len()+len(rec)+2 > n {
			break
		}
		b.WriteString(rec)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// payloadWorkflow is the definition of a workflow named name of steps
// kit.echo steps. Flat: every step echoes the workflow's input, and the
// output is the input. Chained: each step echoes the previous step's
// output (the first the input), and the output is the last step's.
func payloadWorkflow(name, shape string, steps int) string {
	var b strings.Builder
	b.WriteString("name: " + name + "\nsteps:\n")
	prev := "input"
	for i := range steps {
		id := "s" + strconv.Itoa(i)
		if shape == "flat" {
			fmt.Fprintf(&b, "  - { id: %s, activity: kit.echo, input: \"${ input }\" }\n", id)
			continue
		}
		fmt.Fprintf(&b, "  - { id: %s, activity: kit.echo, input: \"${ %s }\", output: %s }\n", id, prev, id)
		prev = "vars." + id
	}
	b.WriteString("output: \"${ " + prev + " }\"\n")
	return b.String()
}

// payloadEngineConfig is the engine as the host configures it where the
// data path is concerned: attempt data and variables copied into history
// up to the host's limits, and every attempt recorded on a tape under the
// host's record policy (kept when it fails).
func payloadEngineConfig() engine.Config {
	return engine.Config{
		NodeID:           "bench",
		TimerInterval:    time.Hour,
		Workers:          payloadInFlight,
		AttemptDataLimit: engine.DefaultAttemptDataLimit,
		VarsLimit:        engine.DefaultVarsLimit,
		Tapes:            engine.TapeConfig{Policy: weft.DefaultRecordPolicy},
	}
}

// BenchmarkPayload runs workflows of 1 and 5 kit.echo steps, flat and
// chained, on the embedded store with the real kit plugin, payloadInFlight
// instances in flight; one op is one instance from Start to its completion
// being durable. It reports the process's CPU per instance (cpu-ms/op,
// from getrusage: the engine, the store, the guest and the collector) and
// the median latency of an instance (p50-ms); ns/op is the wall time over
// the ops.
func BenchmarkPayload(b *testing.B) {
	for _, shape := range []string{"flat", "chained"} {
		for _, kind := range []string{"string", "object"} {
			for _, size := range payloadSizes {
				for _, steps := range []int{1, 5} {
					name := fmt.Sprintf("shape=%s/doc=%s/size=%s/steps=%d", shape, kind, size.name, steps)
					b.Run(name, func(b *testing.B) {
						benchPayload(b, shape, payloadDoc(kind, size.n), steps)
					})
				}
			}
		}
	}
}

// benchPayload runs b.N instances of the workflow of shape and steps on
// doc, payloadInFlight at a time, after a warm-up that fills the guest's
// instance pool.
func benchPayload(b *testing.B, shape string, doc []byte, steps int) {
	h := newHost(b, withConfig(payloadEngineConfig()))
	const wf = "payload"
	h.save(payloadWorkflow(wf, shape, steps))
	ctx := context.Background()
	run := func() (time.Duration, bool) {
		t0 := time.Now()
		inst, _, err := h.e.Start(ctx, wf, doc, "")
		if err != nil {
			b.Errorf("starting %s on %d bytes: %v", wf, len(doc), err)
			return 0, false
		}
		done, err := h.e.WaitFinished(ctx, inst.ID)
		if err != nil {
			b.Errorf("waiting for instance %s: %v", inst.ID, err)
			return 0, false
		}
		if done.Status != weft.StatusCompleted || len(done.Output) < len(doc)/2 {
			b.Errorf("instance %s is %s with %d bytes of output (%v), want completed with about %d", inst.ID, done.Status, len(done.Output), done.Error, len(doc))
			return 0, false
		}
		return time.Since(t0), true
	}
	// drive runs n instances, payloadInFlight at a time, and returns
	// their latencies.
	drive := func(n int) []time.Duration {
		var (
			next atomic.Int64
			wg   sync.WaitGroup
			mu   sync.Mutex
			lat  = make([]time.Duration, 0, n)
		)
		for range min(payloadInFlight, n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(n) {
					d, ok := run()
					if !ok {
						return
					}
					mu.Lock()
					lat = append(lat, d)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return lat
	}
	drive(payloadInFlight)
	if b.Failed() {
		return
	}
	b.ResetTimer()
	cpu0 := processCPU()
	lat := drive(b.N)
	cpu := processCPU() - cpu0
	b.StopTimer()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.SetBytes(int64(len(doc)))
}

// BenchmarkPayloadGuest is the guest alone: kit.echo of the same documents
// through the plugin runtime's Invoke, one call at a time, reporting the
// process's CPU per call (cpu-ms/op).
func BenchmarkPayloadGuest(b *testing.B) {
	rt := testplugins.Runtime(b, plugins.Config{})
	ctx := context.Background()
	m, err := rt.Load(ctx, testplugins.Bytes(b, "kit"))
	if err != nil {
		b.Fatalf("loading kit: %v", err)
	}
	for _, kind := range []string{"string", "object"} {
		for _, size := range payloadSizes {
			b.Run(fmt.Sprintf("doc=%s/size=%s", kind, size.name), func(b *testing.B) {
				doc := payloadDoc(kind, size.n)
				echo := func() {
					out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "echo", Input: doc})
					if err != nil || len(out) != len(doc) {
						b.Fatalf("kit.echo of %d bytes: %d bytes back, %v", len(doc), len(out), err)
					}
				}
				echo()
				b.SetBytes(int64(len(doc)))
				b.ResetTimer()
				cpu0 := processCPU()
				for range b.N {
					echo()
				}
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// BenchmarkPayloadCommits is the floor under an instance of the embedded
// store: the two commits no instance does without, its create carrying the
// document as its input and its completion carrying it as its output, one
// history entry each, one instance at a time; one op is both commits. It
// reports the process's CPU per op (cpu-ms/op).
func BenchmarkPayloadCommits(b *testing.B) {
	for _, kind := range []string{"string", "object"} {
		for _, size := range payloadSizes {
			b.Run(fmt.Sprintf("doc=%s/size=%s", kind, size.name), func(b *testing.B) {
				st := openStore(b)
				doc := payloadDoc(kind, size.n)
				ctx := context.Background()
				n := 0
				commits := func() {
					n++
					in := &weft.Instance{ID: "p" + strconv.Itoa(n), Workflow: "payload", Version: 1, Status: weft.StatusRunning, Input: doc}
					rev, err := st.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: weft.HistoryInstanceStarted}}})
					if err != nil {
						b.Fatalf("creating instance %s: %v", in.ID, err)
					}
					done := *in
					done.Rev, done.Status, done.Output = rev, weft.StatusCompleted, doc
					if _, err := st.Commit(ctx, store.Commit{Instance: &done, History: []weft.HistoryEntry{{Type: weft.HistoryInstanceCompleted}}}); err != nil {
						b.Fatalf("completing instance %s: %v", in.ID, err)
					}
				}
				commits()
				b.SetBytes(int64(len(doc)))
				b.ResetTimer()
				cpu0 := processCPU()
				for range b.N {
					commits()
				}
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// upperDoc is kit.upper's input of exactly 64 KiB: {"text": …} of
// lower-case ASCII, as the compute benchmarks use it (BENCHMARKS.md).
func upperDoc() []byte {
	const n = 64 << 10
	pad := n - len(`{"text":""}`)
	return []byte(`{"text":"` + strings.Repeat("abcdefghij", pad/10+1)[:pad] + `"}`)
}

// BenchmarkUpperEndToEnd is issue 40's end-to-end compute figure: a
// workflow of one kit.upper step on 64 KiB, one instance at a time, timed
// as the history times it (activity_scheduled to activity_completed: the
// guest's call and what the engine does around it until the result is
// applied), against the same call through the plugin runtime's Invoke
// (attempt=guest). It reports the median of each (p50-ms) and their
// ratio (x-guest, from the same run).
func BenchmarkUpperEndToEnd(b *testing.B) {
	doc := upperDoc()
	h := newHost(b, withConfig(payloadEngineConfig()))
	h.save("name: upper\nsteps:\n  - { id: u, activity: kit.upper, input: \"${ input }\", output: u }\noutput: \"${ vars.u }\"\n")
	ctx := context.Background()
	e2e := func() time.Duration {
		inst, _, err := h.e.Start(ctx, "upper", doc, "")
		if err != nil {
			b.Fatal(err)
		}
		done, err := h.e.WaitFinished(ctx, inst.ID)
		if err != nil || done.Status != weft.StatusCompleted || len(done.Output) != len(doc) {
			b.Fatalf("instance %s: %v, %d bytes of output, %v", inst.ID, done.Status, len(done.Output), err)
		}
		var scheduled, completed time.Time
		for _, e := range h.history(inst.ID) {
			switch e.Type {
			case weft.HistoryActivityScheduled:
				scheduled = e.Time
			case weft.HistoryActivityCompleted:
				completed = e.Time
			}
		}
		return completed.Sub(scheduled)
	}
	rt := testplugins.Runtime(b, plugins.Config{})
	m, err := rt.Load(ctx, testplugins.Bytes(b, "kit"))
	if err != nil {
		b.Fatal(err)
	}
	guest := func() time.Duration {
		t0 := time.Now()
		out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "upper", Input: doc})
		if err != nil || len(out) != len(doc) {
			b.Fatalf("kit.upper: %d bytes, %v", len(out), err)
		}
		return time.Since(t0)
	}
	for range 3 { // pools warm
		e2e()
		guest()
	}
	var ends, calls []time.Duration
	b.ResetTimer()
	for range b.N {
		// In turns, so that a change of the machine's speed weighs on
		// both alike.
		ends = append(ends, e2e())
		calls = append(calls, guest())
	}
	b.StopTimer()
	slices.Sort(ends)
	slices.Sort(calls)
	e, g := ends[len(ends)/2], calls[len(calls)/2]
	b.ReportMetric(float64(e.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(g.Microseconds())/1000, "guest-p50-ms")
	b.ReportMetric(float64(e)/float64(g), "x-guest")
}
