package redislimit_test

import (
	"context"
	"flag"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/redislimit"
	"github.com/weftworks/weft/internal/redistest"
)

// TestRateAccuracy runs the short variant by default (3s);
// `go test ./internal/ratelimit/redislimit -run TestRateAccuracy
// -ratelimit.accuracy -v` measures for a minute, the issue's benchmark
// (BENCHMARKS.md), and -ratelimit.duration changes the length. The flags
// are read once, as the test's configuration.
var (
	accuracyFull = flag.Bool("ratelimit.accuracy", false, "TestRateAccuracy: measure for -ratelimit.duration instead of the short variant's 3s")
	accuracyFor  = flag.Duration("ratelimit.duration", time.Minute, "TestRateAccuracy with -ratelimit.accuracy: how long to measure")
)

// TestRateAccuracy measures how well one limit holds across three nodes
// over real time: three limiters on three clients of one redis-server, 64
// goroutines each, reserve events of one key limited to 100/s (burst 1)
// with a maximum wait of 5s, and act at their reserved times. It counts
// the events acted in each second of the window, which starts a second
// after the first event, and checks that the
// total is within ±5% of the limit's (the target over a minute);
// with -v it logs the events per second (min, median, max), how late the
// goroutines acted, and the Redis calls.
func TestRateAccuracy(t *testing.T) {
	t.Parallel()
	window := 3 * time.Second
	if *accuracyFull {
		window = *accuracyFor
	}
	const nodes, goroutines = 3, 64
	lim := ratelimit.Limit{Count: 100, Per: time.Second}
	s := redistest.Start(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		acted []time.Time     // when each event was acted
		late  []time.Duration // how long after the answer plus the wait
		calls atomic.Int64
		errs  = make(chan error, nodes*goroutines)
		wg    sync.WaitGroup
	)
	for range nodes {
		l, err := redislimit.New(redislimit.Config{Client: s.Client(t), Prefix: "accuracy:"})
		if err != nil {
			t.Fatal(err)
		}
		for range goroutines {
			wg.Go(func() {
				for {
					wait, ok, err := l.Reserve(ctx, "partner", lim, 5*time.Second)
					due := time.Now().Add(wait)
					calls.Add(1)
					if err != nil {
						if ctx.Err() == nil {
							errs <- err
						}
						return
					}
					timer := time.NewTimer(wait) // until the reserved time, or the retry's
					select {
					case <-ctx.Done():
						timer.Stop()
						return
					case now := <-timer.C:
						if ok {
							mu.Lock()
							acted = append(acted, now)
							late = append(late, now.Sub(due))
							mu.Unlock()
						}
					}
				}
			})
		}
	}
	// The window starts a second after the first event, once the 192
	// first calls, made at once, have their answers; demand goes on a
	// little past its end, so that the end is measured under load too.
	const warmUp, after = time.Second, 500 * time.Millisecond
	end := time.NewTimer(warmUp + window + after)
	select {
	case <-end.C:
	case err := <-errs:
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	slices.SortFunc(acted, time.Time.Compare)
	if len(acted) == 0 {
		t.Fatal("no event was acted")
	}
	// Half an interval early, so that the seconds' bounds fall between
	// events (which come one interval apart), not on them.
	t0 := acted[0].Add(warmUp - lim.Interval()/2)
	seconds := int(window / time.Second)
	perSecond := make([]int, seconds)
	total := 0
	for _, a := range acted {
		if s := int(a.Sub(t0) / time.Second); !a.Before(t0) && s < seconds {
			perSecond[s]++
			total++
		}
	}
	want := seconds * lim.Count
	sorted := slices.Sorted(slices.Values(perSecond))
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[int(p*float64(len(late)-1))] }
	t.Logf("%d nodes × %d goroutines, one key at %s, %s: %d events (want %d, %+.2f%%); per second min %d, median %d, max %d",
		nodes, goroutines, lim, window, total, want, 100*float64(total-want)/float64(want), sorted[0], sorted[len(sorted)/2], sorted[len(sorted)-1])
	t.Logf("acted after the answer plus the wait: p50 %s, p99 %s, max %s; %d Reserve calls (%.0f/s)",
		pct(0.5), pct(0.99), late[len(late)-1], calls.Load(), float64(calls.Load())/(warmUp+window+after).Seconds())
	if diff := total - want; diff*20 > want || -diff*20 > want {
		t.Errorf("%d events in %s, want %d ±5%%", total, window, want)
	}
}
