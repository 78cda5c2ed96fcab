package metrics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/plugins"
)

// failingLimiter fails every reservation, as a Redis that is down would.
type failingLimiter struct{}

func (failingLimiter) Reserve(context.Context, string, ratelimit.Limit, time.Duration) (time.Duration, bool, error) {
	return 0, false, errors.New("redis down")
}

// TestRateLimiter: turns counted by kind of key and result, the granted
// turns' waits recorded; keys are never labels.
func TestRateLimiter(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	now := time.Unix(1_000_000, 0)
	l := metrics.RateLimiter(m, locallimit.New(locallimit.Config{Now: func() time.Time { return now }}))
	ctx := context.Background()
	one := ratelimit.Limit{Count: 1, Per: time.Hour}
	for i, c := range []struct {
		key     string
		maxWait time.Duration
		ok      bool
	}{
		{"step/a", 0, true},             // at once
		{"step/a", 2 * time.Hour, true}, // an hour ahead
		{"step/a", time.Minute, false},  // two hours ahead: refused
		{plugins.HostRateKeyPrefix + "partner", 0, true},
	} {
		_, ok, err := l.Reserve(ctx, c.key, one, c.maxWait)
		if err != nil || ok != c.ok {
			t.Fatalf("reservation %d (%s): ok %v, %v; want ok %v", i, c.key, ok, err, c.ok)
		}
	}
	if _, _, err := metrics.RateLimiter(m, failingLimiter{}).Reserve(ctx, "step/b", one, 0); err == nil {
		t.Fatal("the failing limiter's error was lost")
	}
	for _, c := range []struct {
		family string
		labels []string
		want   float64
	}{
		{"weft_rate_limit_turns_total", []string{"kind", "step", "result", "granted"}, 2},
		{"weft_rate_limit_turns_total", []string{"kind", "step", "result", "refused"}, 1},
		{"weft_rate_limit_turns_total", []string{"kind", "step", "result", "error"}, 1},
		{"weft_rate_limit_turns_total", []string{"kind", "host", "result", "granted"}, 1},
		{"weft_rate_limit_wait_seconds", []string{"kind", "step"}, 2},
		{"weft_rate_limit_wait_seconds", []string{"kind", "host"}, 1},
	} {
		if v := value(t, reg, c.family, c.labels...); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.family, c.labels, v, c.want)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == "key" && (mf.GetName() == "weft_rate_limit_turns_total" || mf.GetName() == "weft_rate_limit_wait_seconds") {
					t.Errorf("%s has a key label", mf.GetName())
				}
			}
		}
	}
}
