package heartbeat_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/heartbeat"
)

// livePulse is a guest that always beat a moment ago.
type livePulse struct{ now *time.Time }

func (p livePulse) Last() ([]byte, time.Time, uint64) { return nil, *p.now, 1 }

// BenchmarkTick measures the core's CPU per item: 100,000 tracked items (a
// third each activity attempts with a pulse and a heartbeat timeout,
// instance leases and lock leases), a configuration whose capacity is
// exactly 100,000 (5,000 per tick × 20 ticks per cycle), every renewal OK.
// Each iteration is one Tick and the Report of its batch; the round trip
// itself is not included (it belongs to the Renewer's backend).
//
//	go test -run '^$' -bench BenchmarkTick ./internal/heartbeat
func BenchmarkTick(b *testing.B) {
	const tracked = 100_000
	cfg := heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 5000, Cycle: 2 * time.Second}
	s, err := heartbeat.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	now := epoch
	for i := range tracked {
		it := heartbeat.Item{ID: "item-" + strconv.Itoa(i), TTL: 8 * time.Second}
		switch i % 3 {
		case 0:
			it.Kind, it.HeartbeatTimeout, it.Pulse = heartbeat.Activity, 10*time.Second, livePulse{&now}
		case 1:
			it.Kind = heartbeat.InstanceLease
		case 2:
			it.Kind = heartbeat.LockLease
		}
		if _, err := s.Track(it); err != nil {
			b.Fatal(err)
		}
	}
	ok := make([]heartbeat.Outcome, cfg.Batch)
	for i := range ok {
		ok[i] = heartbeat.OK
	}
	items := 0
	b.ReportAllocs()
	for b.Loop() {
		r := s.Tick(now)
		items += len(r.Renew)
		s.Report(r.Seq, ok)
		now = now.Add(cfg.Tick)
	}
	if st := s.Stats(); st.Timeouts != 0 || st.Backlog != 0 && st.Cycles > 1 {
		b.Fatalf("Stats = %+v: the scheduler fell behind", st)
	}
	perItem := float64(b.Elapsed().Nanoseconds()) / float64(items)
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
	// Each item is handled once per cycle: 1,000 items cost 1,000 × perItem
	// ns per cycle, which is perItem µs.
	b.ReportMetric(perItem, "µs-CPU/1k-items/cycle")
	b.ReportMetric(perItem*tracked/float64(cfg.Cycle)*100, "%CPU@100k")
}
