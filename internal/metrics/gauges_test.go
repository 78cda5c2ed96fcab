package metrics_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
)

// fakeClock is a clock that moves when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// countingStore answers the gauges' reads from its fields and counts
// them. queued and dead are how many stimuli it lists, page by page.
type countingStore struct {
	mu           sync.Mutex
	counts       map[weft.Status]int
	queued, dead int
	err          error
	reads        int
}

func (s *countingStore) set(f func(s *countingStore)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

func (s *countingStore) CountInstances(context.Context, string) (map[weft.Status]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if s.err != nil {
		return nil, s.err
	}
	out := map[weft.Status]int{}
	for st, n := range s.counts {
		out[st] = n
	}
	return out, nil
}

func (s *countingStore) page(total int, cursor string, limit int) ([]weft.Stimulus, string, error) {
	s.reads++
	if s.err != nil {
		return nil, "", s.err
	}
	from, _ := strconv.Atoi(cursor)
	n := min(limit, total-from)
	next := ""
	if from+n < total {
		next = strconv.Itoa(from + n)
	}
	return make([]weft.Stimulus, n), next, nil
}

func (s *countingStore) QueuedStimuli(_ context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.page(s.queued, cursor, limit)
}

func (s *countingStore) DeadLetters(_ context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.page(s.dead, cursor, limit)
}

func (s *countingStore) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// TestStoreGaugesCached: a scrape refreshes the gauges only when the last
// refresh is older than the interval; a failed refresh keeps the last
// values and is counted.
func TestStoreGaugesCached(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	clock := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	src := &countingStore{counts: map[weft.Status]int{weft.StatusRunning: 3, weft.StatusFailed: 1}, queued: 2, dead: 1}
	if err := m.WatchStore(src, metrics.GaugeConfig{Interval: 10 * time.Second, Now: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[string]float64) {
		t.Helper()
		for k, v := range want {
			family, label, lv := "weft_instances", "status", k
			if k == "queued" || k == "dead" {
				family, label = "weft_stimuli", "state"
			}
			if got := value(t, reg, family, label, lv); got != v {
				t.Errorf("%s: %s{%s=%s} = %v, want %v", when, family, label, lv, got, v)
			}
		}
	}
	check("first scrape", map[string]float64{"running": 3, "failed": 1, "pending": 0, "completed": 0, "queued": 2, "dead": 1})
	if n := testutil.CollectAndCount(reg, "weft_instances"); n != len(weft.Statuses()) {
		t.Errorf("weft_instances series = %d, want one per status (%d)", n, len(weft.Statuses()))
	}
	reads := src.readCount()

	// Within the interval: the cached values, no read.
	src.set(func(s *countingStore) { s.counts[weft.StatusRunning] = 7 })
	clock.Add(9 * time.Second)
	check("within the interval", map[string]float64{"running": 3})
	if got := src.readCount(); got != reads {
		t.Fatalf("scrapes within the interval read the store %d times", got-reads)
	}

	// Past it: read again.
	clock.Add(time.Second)
	check("after the interval", map[string]float64{"running": 7})

	// A failed refresh keeps the values, counts the error, and is not
	// retried before the interval.
	src.set(func(s *countingStore) {
		s.err = errors.New("redis: connection refused")
		s.counts[weft.StatusRunning] = 9
	})
	clock.Add(10 * time.Second)
	check("failed refresh", map[string]float64{"running": 7, "queued": 2, "dead": 1})
	if v := value(t, reg, "weft_store_gauges_refresh_errors_total"); v != 1 {
		t.Fatalf("refresh errors = %v, want 1", v)
	}
	reads = src.readCount()
	check("after a failure, within the interval", map[string]float64{"running": 7})
	if got := src.readCount(); got != reads {
		t.Fatalf("a failed refresh was retried %d times within the interval", got-reads)
	}
	src.set(func(s *countingStore) { s.err = nil })
	clock.Add(10 * time.Second)
	check("recovered", map[string]float64{"running": 9})
	if v := value(t, reg, "weft_store_gauges_refresh_errors_total"); v != 1 {
		t.Fatalf("refresh errors after recovery = %v, want 1", v)
	}
}

// TestStoreGaugesBounded: a gauge never read is absent, not 0; the
// stimuli are counted up to MaxCountedStimuli.
func TestStoreGaugesBounded(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	src := &countingStore{err: errors.New("embedded: broken")}
	if err := m.WatchStore(src, metrics.GaugeConfig{Interval: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "weft_instances", "weft_stimuli"); n != 0 {
		t.Fatalf("%d series before any successful read, want none", n)
	}
	src.set(func(s *countingStore) { s.err = nil; s.queued = 3 * metrics.MaxCountedStimuli; s.dead = 1500 })
	if v := value(t, reg, "weft_stimuli", "state", "queued"); v != metrics.MaxCountedStimuli {
		t.Errorf("queued = %v, want the bound %d", v, metrics.MaxCountedStimuli)
	}
	if v := value(t, reg, "weft_stimuli", "state", "dead"); v != 1500 {
		t.Errorf("dead = %v, want 1500", v)
	}
}

// TestStoreGaugesEmbedded: the gauges read a real embedded store.
func TestStoreGaugesEmbedded(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	now := time.Now()
	bs, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bs.Close() })
	ctx := t.Context()
	for _, id := range []string{"s1", "s2"} {
		if _, err := bs.EnqueueStimulus(ctx, weft.Stimulus{ID: id, Name: "paid", ExpiresAt: now.Add(time.Minute)}); err != nil {
			t.Fatalf("enqueueing stimulus %s: %v", id, err)
		}
	}
	// s1 and s2 expire unclaimed: dead letters.
	if _, err := bs.ExpireStimuli(ctx, now.Add(time.Hour), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.EnqueueStimulus(ctx, weft.Stimulus{ID: "s3", Name: "paid", ExpiresAt: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for i, st := range []weft.Status{weft.StatusRunning, weft.StatusRunning, weft.StatusFailed} {
		id := "i" + strconv.Itoa(i)
		if _, err := bs.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "greet", Version: 1, Status: st}}); err != nil {
			t.Fatalf("creating instance %s: %v", id, err)
		}
	}
	if err := m.WatchStore(bs, metrics.GaugeConfig{}); err != nil {
		t.Fatal(err)
	}
	if v := value(t, reg, "weft_stimuli", "state", "queued"); v != 1 {
		t.Errorf("queued = %v, want 1", v)
	}
	if v := value(t, reg, "weft_stimuli", "state", "dead"); v != 2 {
		t.Errorf("dead = %v, want 2", v)
	}
	for st, want := range map[string]float64{"running": 2, "failed": 1, "completed": 0} {
		if v := value(t, reg, "weft_instances", "status", st); v != want {
			t.Errorf("instances{status=%s} = %v, want %v", st, v, want)
		}
	}
}
