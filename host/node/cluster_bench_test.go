package node_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// BenchmarkClusterThroughput runs a three-activity workflow (echo, upper,
// echo; lazy persistence) on 1, 2 and 3 nodes sharing one real
// redis-server (appendfsync everysec), starting instances round-robin
// through the nodes. The nodes are in this process and share its two
// cores with redis-server: the figure says what coordination costs and how
// the work spreads, not what three machines would do. It reports
// workflows/s, the Redis commands per workflow step (INFO commandstats),
// how many nodes ran activities, and the CPU per workflow of redis-server
// (INFO cpu) and of this process (the nodes), the single server's figures
// that BenchmarkClusterMasters is compared with.
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
	nodes := benchNodes(b, n, func(i int) node.Config {
		return node.Config{
			NodeID: fmt.Sprintf("n%d", i+1), DataDir: b.TempDir(), Store: node.StoreRedis, RedisAddrs: []string{srv.Addr()},
			Plugins: plugins.Config{CacheDir: testplugins.CacheDir(b)},
			Engine:  engine.Config{TimerInterval: 10 * time.Millisecond},
		}
	})
	ctx := context.Background()
	calls0 := commandCalls(b, admin)
	redis0, cpu0 := redisCPU(b, admin), processCPU()
	b.ResetTimer()
	ids := runBenchFlow(b, nodes)
	b.StopTimer()
	redisUsed, cpuUsed := redisCPU(b, admin)-redis0, processCPU()-cpu0
	calls := commandCalls(b, admin) - calls0
	if testing.Verbose() {
		info, _ := admin.Info(context.Background(), "commandstats").Result()
		b.Log(info)
	}
	ran := map[string]bool{}
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
	b.ReportMetric(msPer(redisUsed, b.N), "redis-ms/wf")
	b.ReportMetric(msPer(cpuUsed, b.N), "node-ms/wf")
}

// benchNodes opens n nodes configured by cfg(i), runs them until the
// benchmark ends, stores the kit plugin and benchFlow through the first,
// and runs one workflow through each to warm its plugin pool outside the
// measurement.
func benchNodes(b *testing.B, n int, cfg func(i int) node.Config) []*node.Node {
	b.Helper()
	var nodes []*node.Node
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, nd := range nodes {
			_ = nd.Close()
		}
	})
	for i := range n {
		nd, err := node.Open(context.Background(), cfg(i), slog.New(slog.DiscardHandler))
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
	for _, nd := range nodes {
		inst, _, err := nd.Engine().Start(ctx, "three", json.RawMessage(`"warm"`), "")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := nd.Engine().WaitFinished(ctx, inst.ID); err != nil {
			b.Fatal(err)
		}
	}
	return nodes
}

// runBenchFlow starts b.N instances of benchFlow round-robin through the
// nodes, waits until each has completed, and returns their ids.
func runBenchFlow(b *testing.B, nodes []*node.Node) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range b.N {
		inst, _, err := nodes[i%len(nodes)].Engine().Start(ctx, "three", json.RawMessage(`"hi"`), "")
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = inst.ID
	}
	for i, id := range ids {
		inst, err := nodes[i%len(nodes)].Engine().WaitFinished(ctx, id)
		if err != nil || inst.Status != weft.StatusCompleted {
			b.Fatalf("instance %s: %+v, %v", id, inst, err)
		}
	}
	return ids
}

// BenchmarkClusterMasters runs BenchmarkClusterThroughput's workflow on
// three nodes of this process over a Redis Cluster of three masters on
// loopback (redistest.StartClusterOf, appendfsync everysec), reached
// through node.Config.RedisCluster, to measure how the masters share the
// work before the store is partitioned (issue 37): every store key shares
// the tag {weft:}, so one master takes every commit; the ready queue and
// the notifications spread with RedisShards, and the instance locks (a
// tag per instance) spread already. The variants: three masters alone with
// 1 and 4 shards, and three masters with a replica each, without and with
// RedisWaitReplicas 1 (the cost of WAIT), with 1 shard and with 4. The
// partitions=16 variants divide the store (RedisPartitions 16,
// docs/cluster.md "Partitions"), to be compared in turns with the whole
// store of the same replicas, shards and wait.
//
// It reports workflows/s; per master (m1, m2, m3, in the order the
// cluster's nodes were started, which is the order of their slots) the
// redis-server CPU per workflow (INFO cpu) and the commands per workflow
// step (INFO commandstats, without the benchmark's INFO); their sums over
// the masters; the share of the masters' CPU taken by the one that serves
// {weft:} (with partitions: the masters that serve the catalog's tag or
// a partition's, all three from three partitions on) and the share of the
// busiest master; the replicas' CPU per workflow; and this process's CPU per
// workflow (the three nodes). With -v it logs a line per master: what it
// serves, its figures and its busiest commands. Every redis-server and the
// nodes share the machine's cores, so the figures say what each process
// spent, not what it would do with a machine of its own.
func BenchmarkClusterMasters(b *testing.B) {
	for _, v := range []struct{ replicas, shards, partitions, wait int }{
		{0, 1, 0, 0}, {0, 4, 0, 0}, {1, 1, 0, 0}, {1, 1, 0, 1}, {1, 4, 0, 1},
		{0, 4, 16, 0}, {1, 4, 16, 1},
	} {
		name := fmt.Sprintf("replicas=%d/shards=%d", v.replicas, v.shards)
		if v.partitions > 1 {
			name += fmt.Sprintf("/partitions=%d", v.partitions)
		}
		if v.replicas > 0 {
			name += fmt.Sprintf("/wait=%d", v.wait)
		}
		b.Run(name, func(b *testing.B) { benchMasters(b, v.replicas, v.shards, v.partitions, v.wait) })
	}
}

func benchMasters(b *testing.B, replicas, shards, partitions, wait int) {
	cl := redistest.StartClusterOf(b, 3, replicas)
	masters, replicaServers := cl.Masters(b), cl.Replicas(b)
	nodes := benchNodes(b, 3, func(i int) node.Config {
		return node.Config{
			NodeID: fmt.Sprintf("n%d", i+1), DataDir: b.TempDir(), Store: node.StoreRedis,
			RedisCluster: cl.Addrs(), RedisShards: shards, RedisPartitions: partitions, RedisWaitReplicas: wait,
			Plugins: plugins.Config{CacheDir: testplugins.CacheDir(b)},
			Engine:  engine.Config{TimerInterval: 10 * time.Millisecond},
		}
	})
	serves, store := servedTags(b, cl, shards, partitions)
	clients := make([]*redis.Client, len(masters))
	for i, m := range masters {
		clients[i] = m.Client(b)
	}
	replicaClients := make([]*redis.Client, len(replicaServers))
	for i, r := range replicaServers {
		replicaClients[i] = r.Client(b)
	}
	cmds0, redis0 := make([]map[string]int64, len(masters)), make([]time.Duration, len(masters))
	for i, c := range clients {
		cmds0[i], redis0[i] = commandsByName(b, c), redisCPU(b, c)
	}
	var replica0 time.Duration
	for _, c := range replicaClients {
		replica0 += redisCPU(b, c)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	runBenchFlow(b, nodes)
	b.StopTimer()
	cpuUsed := processCPU() - cpu0
	var replicaUsed time.Duration
	for _, c := range replicaClients {
		replicaUsed += redisCPU(b, c)
	}
	replicaUsed -= replica0

	steps := b.N * 3
	var sumCPU, storeCPU, mostCPU time.Duration
	var sumCalls int64
	for i, c := range clients {
		used := redisCPU(b, c) - redis0[i]
		cmds := commandsByName(b, c)
		var calls int64
		for name, n := range cmds {
			cmds[name] = n - cmds0[i][name]
			calls += cmds[name]
		}
		sumCPU, sumCalls, mostCPU = sumCPU+used, sumCalls+calls, max(mostCPU, used)
		if slices.ContainsFunc(serves[masters[i]], func(tag string) bool { return store[tag] }) {
			storeCPU += used
		}
		label := fmt.Sprintf("m%d", i+1)
		b.ReportMetric(msPer(used, b.N), label+"-redis-ms/wf")
		b.ReportMetric(float64(calls)/float64(steps), label+"-cmds/step")
		if testing.Verbose() {
			holds := describeTags(serves[masters[i]])
			if holds == "" {
				holds = "no shared tag"
			}
			b.Logf("b.N=%d %s %s (%s; instance and sweep locks): redis-server %.3f ms/wf, %.2f commands/step; busiest per step: %s",
				b.N, label, masters[i].Addr(), holds, msPer(used, b.N),
				float64(calls)/float64(steps), busiest(cmds, 8, steps))
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "workflows/s")
	b.ReportMetric(msPer(sumCPU, b.N), "redis-ms/wf")
	b.ReportMetric(float64(sumCalls)/float64(steps), "redis-cmds/step")
	if sumCPU > 0 {
		b.ReportMetric(float64(storeCPU)/float64(sumCPU), "store-master-share")
		b.ReportMetric(float64(mostCPU)/float64(sumCPU), "busiest-master-share")
	}
	if len(replicaClients) > 0 {
		b.ReportMetric(msPer(replicaUsed, b.N), "replicas-ms/wf")
	}
	b.ReportMetric(msPer(cpuUsed, b.N), "node-ms/wf")
}

// servedTags names, for each master of cl, the hash tags of the
// deployment's shared keys that it serves: the store's {weft:} (with
// partitions, the catalog's) and, with partitions, every partition's; the
// ready queue's shards and, with several shards, the sharded
// notifications' (with one, notifications go over classic pub/sub, which
// every node of a cluster relays). The locks, a tag per lock key (an
// instance's, a singleton sweep's), are spread over every master. It also
// returns the store's tags: a master that serves one of them is a store
// master.
func servedTags(b *testing.B, cl *redistest.Cluster, shards, partitions int) (map[*redistest.Server][]string, map[string]bool) {
	b.Helper()
	catalog := "{" + redisstore.DefaultPrefix + "}"
	store := map[string]bool{catalog: true}
	tags := []string{catalog, "{weft:queue}"}
	if partitions > 1 {
		parts, err := partition.Tags(redisstore.DefaultPrefix, partitions)
		if err != nil {
			b.Fatal(err)
		}
		for _, tag := range parts {
			store[tag] = true
		}
		tags = append(tags, parts...)
	}
	if shards > 1 {
		queue, err := partition.Tags("weft:queue:", shards)
		if err != nil {
			b.Fatal(err)
		}
		bus, err := partition.Tags("weft:notify:", shards)
		if err != nil {
			b.Fatal(err)
		}
		tags = slices.Concat(slices.DeleteFunc(tags, func(tag string) bool { return tag == "{weft:queue}" }), queue, bus)
	}
	out := map[*redistest.Server][]string{}
	for _, tag := range tags {
		m := cl.MasterOf(b, tag)
		out[m] = append(out[m], tag)
	}
	return out, store
}

// describeTags lists a master's tags for the benchmark's log, a store's
// partitions as their count and numbers ("5 partitions 0-4") rather than
// sixteen tags.
func describeTags(tags []string) string {
	var parts []string
	var other []string
	for _, tag := range tags {
		// A partition's tag: {weft:<n>~<s>}.
		n, ok := strings.CutPrefix(tag, "{"+redisstore.DefaultPrefix)
		if i, err := strconv.Atoi(strings.SplitN(n, "~", 2)[0]); ok && strings.Contains(n, "~") && err == nil {
			parts = append(parts, strconv.Itoa(i))
			continue
		}
		other = append(other, tag)
	}
	if len(parts) > 0 {
		other = append(other, fmt.Sprintf("%d partitions %s", len(parts), strings.Join(parts, ",")))
	}
	return strings.Join(other, " ")
}

// busiest lists the n commands with the most calls, with their calls per
// workflow step.
func busiest(cmds map[string]int64, n, steps int) string {
	names := make([]string, 0, len(cmds))
	for name, c := range cmds {
		if c > 0 {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(cmds[y], cmds[x]), cmp.Compare(x, y)) })
	parts := make([]string, 0, n)
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(cmds[name])/float64(steps)))
	}
	return strings.Join(parts, ", ")
}

// msPer returns d per workflow, in milliseconds.
func msPer(d time.Duration, workflows int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(workflows)
}

// processCPU returns the CPU time (user and system) this process has
// used: the nodes' share, since every redis-server is a process of its own.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU time (used_cpu_user + used_cpu_sys of INFO
// cpu) the redis-server of c has used.
func redisCPU(b *testing.B, c *redis.Client) time.Duration {
	b.Helper()
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu on %s: %v", c.Options().Addr, err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu on %s: %q: %v", c.Options().Addr, line, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// commandsByName returns the calls of every command the redis-server of c
// ran, by name (INFO commandstats: scripts and the commands they ran),
// without the benchmark's own INFO.
func commandsByName(b *testing.B, c *redis.Client) map[string]int64 {
	b.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats on %s: %v", c.Options().Addr, err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		_, rest, _ = strings.Cut(rest, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats on %s: %q: %v", c.Options().Addr, line, err)
		}
		calls[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return calls
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
