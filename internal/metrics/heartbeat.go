package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/internal/heartbeat"
)

// WatchHeartbeats registers a collector that reports, at each scrape, the
// heartbeat scheduler's statistics as stats returns them
// ((*engine.Engine).HeartbeatStats).
func (m *Metrics) WatchHeartbeats(stats func() heartbeat.Stats) error {
	return m.reg.Register(&heartbeatCollector{stats: stats})
}

func hbDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_heartbeat_"+name, help, labels, nil)
}

var (
	hbTracked   = hbDesc("items", "Items the heartbeat scheduler tracks, by where they are: main, backup, in_flight.", "queue")
	hbCapacity  = hbDesc("capacity", "Items the scheduler can visit per cycle (items per tick × ticks per cycle), checked at start-up.")
	hbRenewals  = hbDesc("renewals_total", "Heartbeats and lease renewals by outcome.", "outcome")
	hbTicks     = hbDesc("ticks_total", "Ticks that took a batch.")
	hbOverruns  = hbDesc("tick_overruns_total", "Ticks that ran late.")
	hbCoalesced = hbDesc("ticks_coalesced_total", "Ticks skipped because they came too early.")
	hbTimeouts  = hbDesc("timeouts_total", "Attempts timed out for lack of heartbeats.")
	hbCycles    = hbDesc("cycles_total", "Cycles completed (backup queue moved back into the main deque).")
	hbCycleTime = hbDesc("cycle_seconds", "The achieved cycle time: the time between the last two cycles.")
	hbBacklog   = hbDesc("backlog", "Items not visited within their cycle at the last cycle's end.")
	hbWarnings  = hbDesc("warnings", "Current configuration warnings by code (over_capacity, short_timeout).", "code")
)

type heartbeatCollector struct {
	stats func() heartbeat.Stats
}

// Describe implements prometheus.Collector.
func (c *heartbeatCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hbTracked, hbCapacity, hbRenewals, hbTicks, hbOverruns, hbCoalesced, hbTimeouts, hbCycles, hbCycleTime, hbBacklog, hbWarnings} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *heartbeatCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(hbTracked, float64(st.Main), "main")
	gauge(hbTracked, float64(st.Backup), "backup")
	gauge(hbTracked, float64(st.InFlight), "in_flight")
	gauge(hbCapacity, float64(st.Capacity))
	for o, n := range st.Renewals {
		counter(hbRenewals, n, o.String())
	}
	counter(hbTicks, st.Ticks)
	counter(hbOverruns, st.Overruns)
	counter(hbCoalesced, st.Coalesced)
	counter(hbTimeouts, st.Timeouts)
	counter(hbCycles, st.Cycles)
	gauge(hbCycleTime, st.CycleTime.Seconds())
	gauge(hbBacklog, float64(st.Backlog))
	warnings := map[heartbeat.WarningCode]int{heartbeat.OverCapacity: 0, heartbeat.ShortTimeout: 0}
	for _, w := range st.Warnings {
		warnings[w.Code]++
	}
	for code, n := range warnings {
		gauge(hbWarnings, float64(n), string(code))
	}
}
