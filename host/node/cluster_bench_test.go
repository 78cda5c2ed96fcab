package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// BenchmarkClusterThroughput runs a three-activity workflow (echo, upper,
// echo; lazy persistence) on 1, 2 and 3 nodes sharing one real
// redis-server (appendfsync everysec), starting instances round-robin
// through the nodes. The nodes are in this process and share its two
// cores with redis-server: the figure says what coordination costs and how
// the work spreads, not what three machines would do. It reports
// workflows/s, the Redis commands per workflow step (INFO commandstats)
// and how many nodes ran activities.
func BenchmarkClusterThroughput(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchCluster(b, n) })
	}
}

const benchFlow = `
name: three
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.upper, input: { text: "${ vars.a }" }, output: b }
  - { id: c, activity: kit.echo, input: "${ vars.b.text }", output: c }
output: "${ vars.c }"
`

func benchCluster(b *testing.B, n int) {
	srv := redistest.Start(b)
	admin := srv.Client(b)
	var nodes []*node.Node
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		for _, nd := range nodes {
			_ = nd.Close()
		}
	}()
	for i := range n {
		nd, err := node.Open(context.Background(), node.Config{
			NodeID: fmt.Sprintf("n%d", i+1), DataDir: b.TempDir(), Store: node.StoreRedis, RedisAddrs: []string{srv.Addr()},
			Plugins: plugins.Config{CacheDir: testplugins.CacheDir(b)},
			Engine:  engine.Config{TimerInterval: 10 * time.Millisecond},
		}, slog.New(slog.DiscardHandler))
		if err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, nd)
		wg.Add(1)
		go func() { defer wg.Done(); _ = nd.Run(ctx) }()
	}
	if _, _, err := nodes[0].PutPlugin(ctx, "kit", testplugins.Bytes(b, "kit")); err != nil {
		b.Fatal(err)
	}
	if _, _, err := nodes[0].Engine().SaveDefinition(ctx, []byte(benchFlow)); err != nil {
		b.Fatal(err)
	}
	// Warm every node's plugin pool outside the measurement.
	for _, nd := range nodes {
		inst, _, err := nd.Engine().Start(ctx, "three", json.RawMessage(`"warm"`), "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := nd.Engine().WaitFinished(ctx, inst.ID); err != nil {
			b.Fatal(err)
		}
	}
	calls0 := commandCalls(b, admin)
	b.ResetTimer()
	ids := make([]string, b.N)
	for i := range b.N {
		inst, _, err := nodes[i%n].Engine().Start(ctx, "three", json.RawMessage(`"hi"`), "")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = inst.ID
	}
	ran := map[string]bool{}
	for i, id := range ids {
		inst, err := nodes[i%n].Engine().WaitFinished(ctx, id)
		if err != nil || inst.Status != weft.StatusCompleted {
			b.Fatalf("instance %s: %+v, %v", id, inst, err)
		}
	}
	b.StopTimer()
	calls := commandCalls(b, admin) - calls0
	if testing.Verbose() {
		info, _ := admin.Info(context.Background(), "commandstats").Result()
		b.Log(info)
	}
	for _, id := range ids[:min(len(ids), 200)] {
		evs, err := nodes[0].Store().History(ctx, id, 0, 100)
		if err != nil {
			b.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == "activity_completed" {
				ran[ev.Node] = true
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "workflows/s")
	b.ReportMetric(float64(calls)/float64(b.N*3), "redis-cmds/step")
	b.ReportMetric(float64(len(ran)), "nodes-used")
}

// commandCalls sums the calls of every command in INFO commandstats.
func commandCalls(b *testing.B, c *redis.Client) int64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		if !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		total += n
	}
	return total
}
