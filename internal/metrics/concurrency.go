package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/weft"
)

// ConcurrencyReader reads the concurrency keys that have running or waiting
// instances, a page at a time (the node's ConcurrencyKeys).
type ConcurrencyReader func(ctx context.Context, workflow, cursor string, limit int) ([]weft.ConcurrencyKey, string, error)

// maxScrapedKeys bounds the keys a scrape reads: a host with more keys
// reports the first ones only (the gauges say so by their sum), and a
// scrape stays short.
const maxScrapedKeys = 10000

// WatchConcurrency registers the gauges weft_concurrency_running and
// weft_concurrency_waiting by workflow, read at each scrape: the instances
// that hold a slot of their workflow's concurrency keys, and those that
// wait for one. Labels are workflows, never keys, whose number has no
// bound. Keys that cannot be read within a second leave the gauges out of
// the scrape rather than report a number that could be mistaken for the
// truth.
func (m *Metrics) WatchConcurrency(read ConcurrencyReader) error {
	return m.reg.Register(&concurrencyCollector{
		read: read,
		running: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "concurrency", "running"),
			"Instances that hold a slot of their workflow's concurrency key, by workflow.", []string{"workflow"}, nil),
		waiting: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "concurrency", "waiting"),
			"Instances waiting for a slot of their workflow's concurrency key, by workflow.", []string{"workflow"}, nil),
	})
}

// concurrencyCollector reads the keys at scrape time.
type concurrencyCollector struct {
	read             ConcurrencyReader
	running, waiting *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *concurrencyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.running
	ch <- c.waiting
}

// Collect implements prometheus.Collector.
func (c *concurrencyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	running, waiting := map[string]int{}, map[string]int{}
	n := 0
	for cursor := ""; n < maxScrapedKeys; {
		page, next, err := c.read(ctx, "", cursor, 1000)
		if err != nil {
			return
		}
		for _, k := range page {
			if k.Step {
				continue // the steps' keys belong to no one workflow
			}
			running[k.Workflow] += k.Running
			waiting[k.Workflow] += k.Waiting
		}
		n += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	for wf, v := range running {
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(v), wf)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(waiting[wf]), wf)
	}
}
