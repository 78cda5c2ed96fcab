package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// NoRule is the rule label of a plugin's outbound request that no grant
// rule allowed.
const NoRule = "none"

// Invoker runs activities: the engine's Plugins interface, which
// *plugins.Runtime implements.
type Invoker interface {
	Invoke(ctx context.Context, version string, c call.Call) ([]byte, error)
}

// Plugins returns inner decorated to time every call and count it by
// outcome: ok, or the failure kind internal/retry/classify gives the error;
// and to count and time the calls' outbound HTTP requests, by the grant
// rule that allowed each (NoRule when none did). Calls are
// labelled with c.Info.Plugin, or when it is empty with the name
// TrackPlugin gave the version.
func Plugins(m *Metrics, inner Invoker) Invoker {
	return &invoker{m: m, inner: inner}
}

type invoker struct {
	m     *Metrics
	inner Invoker
}

// Invoke implements Invoker.
func (i *invoker) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	// The call names its plugin; the version map is for callers that do
	// not, and knows only the versions this node stored or loaded (another
	// node of a cluster may have uploaded this one).
	name := c.Info.Plugin
	if name == "" {
		name = i.m.pluginName(version)
	}
	inner := c.Requested
	c.Requested = func(r call.Request) {
		code := r.Error
		if code == "" {
			code = strconv.Itoa(r.Status)
		}
		// By the rule, which the operator wrote, not by the host, which
		// the guest chose: a guest under a wildcard rule would otherwise
		// make a series of every host it names.
		rule := r.Rule
		if rule == "" {
			rule = NoRule
		}
		i.m.outbound.WithLabelValues(name, rule, code).Inc()
		i.m.outboundDuration.WithLabelValues(name, rule).Observe(r.Duration.Seconds())
		if inner != nil {
			inner(r)
		}
	}
	i.m.invocations.WithLabelValues(name).Inc()
	g := i.m.inFlight.WithLabelValues(name)
	g.Inc()
	start := time.Now()
	out, err := i.inner.Invoke(ctx, version, c)
	d := time.Since(start)
	g.Dec()
	outcome := "ok"
	if err != nil {
		outcome = string(classify.Cause(err).Kind)
	}
	i.m.attempts.WithLabelValues(name, c.Activity, outcome).Inc()
	i.m.activity.WithLabelValues(name, c.Activity, outcome).Observe(d.Seconds())
	return out, err
}

// PoolStatser reports a plugin version's instance pool; *plugins.Runtime
// implements it.
type PoolStatser interface {
	Stats(version string) plugins.PoolStats
}

// WatchPools registers a collector that reports, at each scrape, the pool
// statistics of every version named with TrackPlugin.
func (m *Metrics) WatchPools(rt PoolStatser) error {
	return m.reg.Register(&poolCollector{m: m, rt: rt})
}

var (
	poolLive = prometheus.NewDesc(Namespace+"_plugin_pool_instances",
		"Plugin instances by plugin, version and state: busy (in a call) or idle.",
		[]string{"plugin", "version", "state"}, nil)
	poolCreated = prometheus.NewDesc(Namespace+"_plugin_pool_instances_created_total",
		"Plugin instances created since the version was loaded.",
		[]string{"plugin", "version"}, nil)
	poolDiscarded = prometheus.NewDesc(Namespace+"_plugin_pool_instances_discarded_total",
		"Plugin instances closed after a failed call since the version was loaded.",
		[]string{"plugin", "version"}, nil)
)

type poolCollector struct {
	m  *Metrics
	rt PoolStatser
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolLive
	ch <- poolCreated
	ch <- poolDiscarded
}

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	for version, name := range c.m.tracked() {
		st := c.rt.Stats(version)
		v := shortVersion(version)
		ch <- prometheus.MustNewConstMetric(poolLive, prometheus.GaugeValue, float64(st.Live-st.Idle), name, v, "busy")
		ch <- prometheus.MustNewConstMetric(poolLive, prometheus.GaugeValue, float64(st.Idle), name, v, "idle")
		ch <- prometheus.MustNewConstMetric(poolCreated, prometheus.CounterValue, float64(st.Created), name, v)
		ch <- prometheus.MustNewConstMetric(poolDiscarded, prometheus.CounterValue, float64(st.Discarded), name, v)
	}
}
