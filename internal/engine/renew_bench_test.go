package engine

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/lock/local"
)

// changingPulse is a guest that heartbeats between every two visits.
type changingPulse struct{ n atomic.Uint64 }

func (p *changingPulse) Last() ([]byte, time.Time, uint64) {
	n := p.n.Add(1)
	return fmt.Appendf(nil, `{"done_ms":%d}`, n), time.Now(), n
}

// BenchmarkRenewal100k is the benchmark: 100,000 items tracked by
// one node's heartbeat scheduler, renewed through the engine's Renewer on
// the embedded store (one transaction, one fsync, per tick batch) and on
// Redis (one script, one round trip, per tick batch).
// Each iteration is one tick of the default 100ms/2s scheduler with a batch
// of 5,000, so 20 iterations are one cycle. "leases" tracks 100,000 instance
// leases; "attempts" 100,000 running attempts over 10,000 instances whose
// guests heartbeat between visits, so every renewal stores new details.
// It reports the process CPU (user+sys, rusage) per 1,000 items per cycle;
// on Redis that is the node's CPU only (redis-server is another process).
func BenchmarkRenewal100k(b *testing.B) {
	for _, backend := range []string{"bolt", "redis"} {
		for _, kind := range []string{"leases", "attempts"} {
			b.Run(backend+"/"+kind, func(b *testing.B) { benchRenewal(b, backend, kind) })
		}
	}
}

func benchRenewal(b *testing.B, backend, kind string) {
	const tracked = 100_000
	var st store.Store
	redisCPU := func() time.Duration { return 0 }
	switch backend {
	case "bolt":
		bs, err := embedded.Open(filepath.Join(b.TempDir(), "store"), embedded.Config{})
		if err != nil {
			b.Fatal(err)
		}
		st = bs
	case "redis":
		srv := redistest.Start(b)
		c := srv.Client(b)
		redisCPU = func() time.Duration { return redisCPUTime(b, c) }
		rs, err := redisstore.Open(context.Background(), redisstore.Config{Client: c, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		st = rs
	}
	defer st.Close()
	e, err := New(Config{NodeID: "n1", Logger: slog.New(slog.DiscardHandler)}, st, local.New(local.Config{}), memqueue.New(1), nil)
	if err != nil {
		b.Fatal(err)
	}
	instances := tracked
	if kind == "attempts" {
		instances = tracked / 10
	}
	ctx := context.Background()
	// Leased, running instances, created by many writers to share fsyncs.
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for w := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < instances; i += 100 {
				in := &weft.Instance{ID: fmt.Sprintf("i%06d", i), Workflow: "w", Version: 1, Status: weft.StatusRunning,
					Lease: weft.Lease{Node: "n1", Boot: e.boot, Expiry: time.Now().Add(time.Hour)}}
				if _, err := st.Commit(ctx, store.Commit{Instance: in}); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}

	cfg := heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 5000, Cycle: 2 * time.Second}
	s, err := heartbeat.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	held := &execution{}
	held.sched.held.Store(true)
	for i := range tracked {
		var it heartbeat.Item
		switch kind {
		case "leases":
			id := fmt.Sprintf("i%06d", i)
			it = heartbeat.Item{ID: leasePrefix + id, Kind: heartbeat.InstanceLease, TTL: e.cfg.LockTTL}
			e.renewer.runs.Store(it.ID, &execution{inst: &weft.Instance{ID: id}, sched: scheduling{key: id}})
		case "attempts":
			id, token := fmt.Sprintf("i%06d", i%instances), fmt.Sprintf("a%d", i)
			p := &changingPulse{}
			it = heartbeat.Item{ID: attemptItem(id, token), Kind: heartbeat.Activity, Pulse: p}
			e.renewer.attempts.Store(it.ID, &attempt{x: held, instance: id, token: token, number: 1})
		}
		if _, err := s.Track(it); err != nil {
			b.Fatal(err)
		}
	}

	now := time.Unix(1_800_000_000, 0)
	items := 0
	cpu0, rcpu0 := cpuTime(), redisCPU()
	b.ResetTimer()
	for b.Loop() {
		r := s.Tick(now)
		outs := e.renewer.Renew(ctx, r.Renew)
		for i, o := range outs {
			if o != heartbeat.OK {
				b.Fatalf("renewal of %s: outcome %v", r.Renew[i].ID, o)
			}
		}
		s.Report(r.Seq, outs)
		items += len(r.Renew)
		now = now.Add(cfg.Tick)
	}
	cpu, rcpu := cpuTime()-cpu0, redisCPU()-rcpu0
	if items == 0 {
		b.Fatal("nothing renewed")
	}
	perItem := float64(cpu.Nanoseconds()) / float64(items) // ns per item = µs per 1,000 items
	b.ReportMetric(perItem, "µs-CPU/1k-items/cycle")
	b.ReportMetric(perItem*tracked/float64(cfg.Cycle)*100, "%CPU@100k")
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "renewals/s")
	if backend == "redis" {
		b.ReportMetric(float64(rcpu.Nanoseconds())/float64(items), "µs-redis-CPU/1k-items/cycle")
	}
	if kind == "attempts" {
		beats, err := st.Heartbeats(ctx, "i000000")
		if err != nil || len(beats) == 0 {
			b.Fatalf("no details stored: %v", err)
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPUTime is redis-server's user and system CPU time so far (INFO cpu).
func redisCPUTime(b *testing.B, c *redis.Client) time.Duration {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu: %q: %v", line, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}
