package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/hosttest"
)

var batchInstances = flag.Int("batch-instances", 10000, "BenchmarkBatchCancel: the instances the batch cancels")

// BenchmarkBatchCancel measures a batch job's cancel of many instances on
// the embedded store, served as `weft serve` serves it (a node and its API
// in this process, on loopback): N instances wait for an event; a batch
// cancels every one (`POST /v1/batches`, rate 0) while a prober asks `GET
// /healthz` every 10 ms. It reports instances/s from the batch's start
// until every instance is cancelled (each cancel is an instance's run and
// commit: the batch's own stepping is done well before), the stepper's
// own time to mark every item, and the probe's p50, p99 and worst
// latency. -batch-instances sets N (the recorded run: 100,000).
func BenchmarkBatchCancel(b *testing.B) {
	for range b.N {
		benchBatchCancel(b, *batchInstances)
	}
}

func benchBatchCancel(b *testing.B, n int) {
	b.StopTimer()
	h := hosttest.New(b, hosttest.Options{})
	ctx := context.Background()
	if _, _, err := h.Node.SaveDefinition(ctx, []byte("name: hold\nsteps: [{id: w, wait: {event: go, key: '${ input.k }'}}]")); err != nil {
		b.Fatal(err)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, _, err := h.Node.Start(ctx, "hold", json.RawMessage(fmt.Sprintf(`{"k": "k%d"}`, i)), ""); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitCount(b, h, weft.StatusSuspended, n, 10*time.Minute)

	probeCtx, stopProbe := context.WithCancel(ctx)
	probes := make(chan []time.Duration, 1)
	go func() {
		var lat []time.Duration
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-probeCtx.Done():
				probes <- lat
				return
			case <-tick.C:
			}
			t0 := time.Now()
			resp, err := h.HTTP.Get(h.URL + "/healthz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			lat = append(lat, time.Since(t0))
		}
	}()

	b.StartTimer()
	start := time.Now()
	doc, _ := json.Marshal(map[string]any{"op": "cancel", "query": `workflow = "hold"`, "rate": 0, "reason": "bench"})
	resp, err := h.HTTP.Post(h.URL+"/v1/batches", "application/json", bytes.NewReader(doc))
	if err != nil {
		b.Fatal(err)
	}
	var batch struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&batch); err != nil || resp.StatusCode != http.StatusCreated {
		b.Fatalf("POST /v1/batches: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	var marked time.Duration
	for deadline := time.Now().Add(30 * time.Minute); ; {
		if marked == 0 {
			bt, err := h.Node.Engine().GetBatch(ctx, batch.ID)
			if err == nil && bt.Counts[weft.BatchDone] == n {
				marked = time.Since(start)
			}
		}
		counts, err := h.Node.CountInstances(ctx, "hold")
		if err != nil {
			b.Fatal(err)
		}
		if counts[weft.StatusCancelled] == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not all cancelled after 30 minutes: %v", counts)
		}
		time.Sleep(50 * time.Millisecond) // polling, with a deadline
	}
	elapsed := time.Since(start)
	b.StopTimer()
	stopProbe()
	lat := <-probes
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "instances/s")
	b.ReportMetric(marked.Seconds(), "marked-s")
	b.ReportMetric(q(0.5), "healthz-p50-ms")
	b.ReportMetric(q(0.99), "healthz-p99-ms")
	b.ReportMetric(q(1)/1, "healthz-max-ms")
	b.ReportMetric(0, "ns/op")
}

// waitCount waits until n instances of hold have status.
func waitCount(b *testing.B, h *hosttest.Host, status weft.Status, n int, limit time.Duration) {
	b.Helper()
	for deadline := time.Now().Add(limit); ; {
		counts, err := h.Node.CountInstances(context.Background(), "hold")
		if err != nil {
			b.Fatal(err)
		}
		if counts[status] == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d instances %s after %s: %v", counts[status], n, status, limit, counts)
		}
		time.Sleep(50 * time.Millisecond) // polling, with a deadline
	}
}
