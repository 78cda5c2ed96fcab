package redisstore_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/store/storetest"
)

// commandCalls sums INFO commandstats: scripts (EVALSHA and EVAL, the
// round trips the store makes) and every command, the ones scripts run
// included. INFO and CONFIG (Redis 7 names it config|resetstat) are not
// counted.
func commandCalls(b testing.TB, c redis.UniversalClient) (scripts, all int64) {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" || strings.HasPrefix(name, "cmdstat_config") {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					b.Fatalf("commandstats line %q: %v", line, err)
				}
				all += n
				if name == "cmdstat_evalsha" || name == "cmdstat_eval" {
					scripts += n
				}
			}
		}
	}
	return scripts, all
}

// benchServer starts a redis-server with the fsync policy and opens a
// store on it; the command counters start at zero.
func benchServer(b *testing.B, fsync string) (*redis.Client, store.Store) {
	b.Helper()
	srv := redistest.Start(b, redistest.WithAppendFsync(fsync))
	opts := srv.Options()
	opts.PoolSize = 64 // one connection per writer: the writers wait on Redis, not on the pool
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	s := open(b, c, "bench:", time.Now)
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	return c, s
}

// reportCommands reports Redis scripts and commands per commit.
func reportCommands(b *testing.B, c *redis.Client, commits int) {
	b.Helper()
	scripts, all := commandCalls(b, c)
	b.ReportMetric(float64(scripts)/float64(commits), "scripts/commit")
	b.ReportMetric(float64(all)/float64(commits), "cmds/commit")
}

// BenchmarkCommitParallel is the embedded store's benchmark of the same name on
// Redis: 50 goroutines creating instances (about 1 KiB of vars and one
// history event), each create acknowledged when Commit returns, under
// both AOF fsync policies.
func BenchmarkCommitParallel(b *testing.B) {
	for _, fsync := range []string{"always", "everysec"} {
		b.Run("appendfsync="+fsync, func(b *testing.B) {
			c, s := benchServer(b, fsync)
			storetest.BenchCommits(b, s, 50)
			reportCommands(b, c, b.N)
		})
	}
}

// BenchmarkCommitRunParallel: the same creates from b.RunParallel's
// goroutines (25 per GOMAXPROCS), then an update of each, so that the
// figures include a compare-and-set on a stored instance with its indexes.
func BenchmarkCommitRunParallel(b *testing.B) {
	vars, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1000)})
	for _, fsync := range []string{"always", "everysec"} {
		b.Run("appendfsync="+fsync, func(b *testing.B) {
			c, s := benchServer(b, fsync)
			ctx := context.Background()
			var next, commits atomic.Int64
			b.SetParallelism(25)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					in := &weft.Instance{ID: fmt.Sprint("bench-", next.Add(1)), Workflow: "bench", Status: weft.StatusPending, Vars: vars}
					rev, err := s.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}})
					if err != nil {
						b.Error(err)
						return
					}
					in.Rev, in.Status = rev, weft.StatusRunning
					in.Lease = weft.Lease{Node: "n", Boot: "b", Expiry: time.Now().Add(time.Minute)}
					if _, err := s.Commit(ctx, store.Commit{Instance: in, Fence: 1, History: []weft.HistoryEntry{{Type: "started"}}}); err != nil {
						b.Error(err)
						return
					}
					commits.Add(2)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(commits.Load())/b.Elapsed().Seconds(), "commits/s")
			reportCommands(b, c, int(commits.Load()))
		})
	}
}

// searchInstances is how many instances BenchmarkSearch fills the store
// with: `go test -run '^$' -bench Search ./internal/store/redisstore
// -search-instances 1000000` measures issue 36's million.
var searchInstances = flag.Int("search-instances", 10_000, "instances that BenchmarkSearch stores")

// BenchmarkSearch: the first page of `customer = <one value>` among
// -search-instances instances of 1,000 distinct customers (a page of
// min(n/1000, 100) instances), read through the search index: one script
// call, which reads the page and one entry more.
func BenchmarkSearch(b *testing.B) {
	c, s := benchServer(b, "everysec")
	storetest.BenchSearch(b, s, *searchInstances)
	b.StopTimer()
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.ListInstances(context.Background(), weft.InstanceFilter{Search: &weft.SearchRange{
		Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{{Type: weft.SearchString, String: "customer-0500"}}}}); err != nil {
		b.Fatal(err)
	}
	scripts, all := commandCalls(b, c)
	b.ReportMetric(float64(scripts), "scripts/page")
	b.ReportMetric(float64(all), "cmds/page")
}

// BenchmarkCommitWait is the cost of Config.WaitReplicas: the creates of
// BenchmarkCommitParallel (50 writers, appendfsync everysec) on a master
// with one replica, answered as the master applied them ("wait=0") and
// once the replica has them ("wait=1": an INCR and a WAIT after each
// script, on the script's connection). Run the two in turns to compare.
func BenchmarkCommitWait(b *testing.B) {
	for _, replicas := range []int{0, 1} {
		b.Run(fmt.Sprintf("wait=%d", replicas), func(b *testing.B) {
			master, _ := replicatedB(b)
			opts := master.Options()
			opts.PoolSize = 64
			c := redis.NewClient(opts)
			b.Cleanup(func() { _ = c.Close() })
			s, err := redisstore.Open(context.Background(), redisstore.Config{Client: c, Prefix: "bench:", WaitReplicas: replicas, WaitTimeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			storetest.BenchCommits(b, s, 50)
			reportCommands(b, c, b.N)
		})
	}
}
