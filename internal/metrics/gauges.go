package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/weft"
)

// DefaultGaugeInterval is the least time between two refreshes of the
// store gauges: shorter than the usual scrape interval (15s), so that
// every scrape of a single Prometheus refreshes them, while several
// Prometheus servers (or a dashboard refreshing every second) scraping
// one node still cost the store one count per interval.
const DefaultGaugeInterval = 10 * time.Second

// MaxCountedStimuli bounds the stimuli a refresh counts in each state: the
// store lists them a page at a time without a count, so a refresh reads at
// most this many of each. A gauge at this value means "at least".
const MaxCountedStimuli = 10000

// stimuliPage is the page size of the stimuli counts.
const stimuliPage = 1000

// StoreCounter reads what the store gauges report; store.Store
// implements it.
type StoreCounter interface {
	CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error)
	QueuedStimuli(ctx context.Context, cursor string, limit int) (items []weft.Stimulus, next string, err error)
	DeadLetters(ctx context.Context, cursor string, limit int) (items []weft.Stimulus, next string, err error)
}

// GaugeConfig configures WatchStore.
type GaugeConfig struct {
	// Interval is the least time between two refreshes;
	// DefaultGaugeInterval when 0.
	Interval time.Duration
	// Timeout bounds one refresh, which a scrape waits for; 5s when 0.
	Timeout time.Duration
	// Now is the clock that spaces the refreshes; time.Now when nil.
	Now func() time.Time
	// Logger logs the failed refreshes; slog.Default() when nil.
	Logger *slog.Logger
}

// WatchStore registers the gauges weft_instances{status} (instances by
// status) and weft_stimuli{state} (stimuli queued for an instance, and
// dead-lettered: expired unclaimed), read from src.
//
// They are refreshed by a scrape that finds them older than
// cfg.Interval, and served from the last refresh otherwise: counting
// reads an index of every instance (the embedded store) or pages through
// the stimuli, which a node should not do for every scrape. A refresh
// that fails keeps the last values, counts
// weft_store_gauges_refresh_errors_total and is logged; a gauge that has
// never been read is absent rather than 0.
//
// The counts are the store's, global: every node of a cluster reports the
// same values. Aggregate them across nodes with max(), not sum().
func (m *Metrics) WatchStore(src StoreCounter, cfg GaugeConfig) error {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultGaugeInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return m.reg.Register(&storeGauges{
		src: src, cfg: cfg, errs: m.gaugeRefreshErrors,
		instances: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "instances"),
			"Instances by status (pending, running, suspended, paused, completed, failed, cancelled), as the store counts them, refreshed at most every few seconds. Global: every node reports the same, aggregate with max().",
			[]string{"status"}, nil),
		stimuli: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "stimuli"),
			fmt.Sprintf("Stimuli (events) by state: queued (waiting for an instance) or dead (expired unclaimed: GET /v1/events/dead), counted up to %d each, refreshed at most every few seconds. Global: every node reports the same, aggregate with max().", MaxCountedStimuli),
			[]string{"state"}, nil),
	})
}

// storeGauges is the collector of WatchStore: the last counts read, and
// when they were read.
type storeGauges struct {
	src                StoreCounter
	cfg                GaugeConfig
	errs               prometheus.Counter
	instances, stimuli *prometheus.Desc

	// mu serializes the refreshes: concurrent scrapes wait for the one
	// refresh under way, then serve its counts.
	mu sync.Mutex
	// at is when the last refresh began; zero before the first.
	at time.Time
	// counts are nil until read once.
	counts       map[weft.Status]int
	queued, dead *int
}

// Describe implements prometheus.Collector.
func (g *storeGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.instances
	ch <- g.stimuli
}

// Collect implements prometheus.Collector.
func (g *storeGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now := g.cfg.Now(); g.at.IsZero() || now.Sub(g.at) >= g.cfg.Interval {
		g.at = now
		g.refresh()
	}
	if g.counts != nil {
		for _, st := range weft.Statuses() {
			ch <- prometheus.MustNewConstMetric(g.instances, prometheus.GaugeValue, float64(g.counts[st]), string(st))
		}
	}
	if g.queued != nil {
		ch <- prometheus.MustNewConstMetric(g.stimuli, prometheus.GaugeValue, float64(*g.queued), "queued")
	}
	if g.dead != nil {
		ch <- prometheus.MustNewConstMetric(g.stimuli, prometheus.GaugeValue, float64(*g.dead), "dead")
	}
}

// refresh reads the counts; each that fails keeps its last value.
func (g *storeGauges) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.Timeout)
	defer cancel()
	var failed []any
	if counts, err := g.src.CountInstances(ctx, ""); err != nil {
		failed = append(failed, "instances", err.Error())
	} else {
		g.counts = counts
	}
	if n, err := countStimuli(ctx, g.src.QueuedStimuli); err != nil {
		failed = append(failed, "queued_stimuli", err.Error())
	} else {
		g.queued = &n
	}
	if n, err := countStimuli(ctx, g.src.DeadLetters); err != nil {
		failed = append(failed, "dead_letters", err.Error())
	} else {
		g.dead = &n
	}
	if failed != nil {
		g.errs.Inc()
		g.cfg.Logger.Warn("metrics: refreshing the store gauges failed; they keep their last values", failed...)
	}
}

// countStimuli counts the stimuli list pages, up to MaxCountedStimuli.
func countStimuli(ctx context.Context, list func(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error)) (int, error) {
	n := 0
	for cursor := ""; n < MaxCountedStimuli; {
		page, next, err := list(ctx, cursor, min(stimuliPage, MaxCountedStimuli-n))
		if err != nil {
			return 0, err
		}
		n += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	return n, nil
}
