package bench

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/hosttest"
)

// BenchmarkUpperInTurns is issue 40's compute figure with every contender
// in one process and in strict turns: the kit's upper on 64 KiB end to end
// in a host (a node on the embedded store, timed by its history,
// activity_scheduled to activity_completed), the same call through the
// plugin runtime's Invoke, and bare wazero without and with the
// instrumentation. One op is one of each, so a change of the machine's
// speed (which moves this machine's figures by half within minutes) weighs
// on all alike; each is reported as its median, and as the median of its
// ratio to the bare call of the same op.
func BenchmarkUpperInTurns(b *testing.B) {
	h := hosttest.New(b, hosttest.Options{})
	h.Request(b, "PUT", "/v1/plugins/kit", hosttest.AdminToken, "application/wasm", kitWasm).Want(b, http.StatusCreated)
	h.PutWorkflow(b, "upper", "name: upper\nsteps:\n  - { id: u, activity: kit.upper, input: \"${ input }\", output: u }\noutput: \"${ vars.u }\"\n")
	doc := upperInput()
	ctx := context.Background()
	n := h.Node
	e2e := func() time.Duration {
		inst, _, err := n.Start(ctx, "upper", doc, "")
		if err != nil {
			b.Fatal(err)
		}
		done, err := n.WaitFinished(ctx, inst.ID)
		if err != nil || done.Status != weft.StatusCompleted {
			b.Fatalf("instance %s: %v, %v", inst.ID, done.Status, err)
		}
		if err := checkUpper(doc, done.Output); err != nil {
			b.Fatal(err)
		}
		hist, err := n.History(ctx, inst.ID, 0, 100)
		if err != nil {
			b.Fatal(err)
		}
		var scheduled, completed time.Time
		for _, e := range hist {
			switch e.Type {
			case weft.HistoryActivityScheduled:
				scheduled = e.Time
			case weft.HistoryActivityCompleted:
				completed = e.Time
			}
		}
		if scheduled.IsZero() || completed.IsZero() {
			b.Fatalf("instance %s: no activity_scheduled or activity_completed in its history", inst.ID)
		}
		return completed.Sub(scheduled)
	}
	timed := func(call callFunc) func() time.Duration {
		return func() time.Duration {
			t0 := time.Now()
			out, err := call(ctx, "upper", doc)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if err := checkUpper(doc, out); err != nil {
				b.Fatal(err)
			}
			return d
		}
	}
	contenders := []struct {
		name string
		run  func() time.Duration
	}{
		{"e2e", e2e},
		{"invoke", timed(setupWeft(b, kitWasm))},
		{"bare-instr", timed(setupBareInstr(b, kitWasm))},
		{"bare", timed(setupBare(b, kitWasm))},
	}
	for range 3 { // pools warm, the guests' memories grown
		for _, c := range contenders {
			c.run()
		}
	}
	times := make([][]time.Duration, len(contenders))
	ratios := make([][]float64, len(contenders))
	b.ResetTimer()
	for range b.N {
		op := make([]time.Duration, len(contenders))
		for i, c := range contenders {
			op[i] = c.run()
		}
		bare := op[len(op)-1]
		for i, d := range op {
			times[i] = append(times[i], d)
			ratios[i] = append(ratios[i], float64(d)/float64(bare))
		}
	}
	b.StopTimer()
	for i, c := range contenders {
		slices.Sort(times[i])
		b.ReportMetric(float64(times[i][len(times[i])/2].Microseconds())/1000, c.name+"-p50-ms")
		b.ReportMetric(float64(times[i][len(times[i])/10].Microseconds())/1000, c.name+"-p10-ms")
		b.ReportMetric(float64(times[i][len(times[i])*9/10].Microseconds())/1000, c.name+"-p90-ms")
		if i < len(contenders)-1 {
			slices.Sort(ratios[i])
			b.ReportMetric(ratios[i][len(ratios[i])/2], c.name+"-x-bare")
		}
	}
}
