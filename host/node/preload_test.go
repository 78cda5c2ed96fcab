package node_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// created returns the instances a node's runtime created of a plugin
// version since it loaded it, from the node's metrics
// (weft_plugin_pool_instances_created_total): 0 while the version is not
// loaded, at least 1 once it is, before any call.
func created(t *testing.T, reg *prometheus.Registry, plugin, version string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "weft_plugin_pool_instances_created_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["plugin"] == plugin && labels["version"] == version[:12] {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// within polls ok until it reports true, failing the test after d.
func within(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A version uploaded through one node of a cluster is loaded (compiled) by
// every other node, without any call asking for it.
func TestUploadIsCompiledOnEveryNode(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var nodes []*node.Node
	var regs []*prometheus.Registry
	for _, id := range []string{"a", "b", "c"} {
		cfg := clusterConfig(t, id, srv.Addr())
		cfg.Registerer = prometheus.NewRegistry()
		n, _, _ := open(t, cfg)
		nodes = append(nodes, n)
		regs = append(regs, cfg.Registerer.(*prometheus.Registry))
	}
	ctx := context.Background()
	kit := testplugins.Bytes(t, "kit")
	version := plugins.Hash(kit)
	for i := range nodes {
		if got := created(t, regs[i], "kit", version); got != 0 {
			t.Fatalf("node %d has kit loaded before the upload (%v instances)", i, got)
		}
	}
	start := time.Now()
	if _, _, err := nodes[0].PutPlugin(ctx, "kit", kit); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"b", "c"} {
		reg := regs[i+1]
		within(t, 2*time.Minute, "node "+id+" loads the uploaded version", func() bool { return created(t, reg, "kit", version) >= 1 })
	}
	t.Logf("b and c loaded the version %s after the upload started", time.Since(start).Round(time.Millisecond))
}

// The user's story: on a fresh cluster, the first instance of a workflow
// started right after its plugin was uploaded succeeds on its first
// attempt, although the node that runs it is still compiling the version:
// its 400ms of work is timed from when it starts, not from when the node
// began to compile. Before, the compile counted against its
// heartbeat_timeout and its timeout, and the attempt failed. (Both are a
// few seconds: well above the work on a loaded machine, well below a
// compile under the race detector.)
func TestFirstInstanceAfterAnUploadSucceeds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// b is fresh: its compilation cache is empty, so it compiles the
	// version (seconds; tens of seconds under the race detector). a, which
	// uploads, uses the shared cache: how long it takes to compile does
	// not matter here.
	a, _, stopA := open(t, clusterConfig(t, "a", srv.Addr()))
	cfg := clusterConfig(t, "b", srv.Addr())
	cfg.Plugins.CacheDir = t.TempDir()
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	b, _, _ := open(t, cfg)
	ctx := context.Background()
	kit := testplugins.Bytes(t, "kit")
	if _, _, err := a.PutPlugin(ctx, "kit", kit); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: first
steps:
  - id: work
    activity: kit.work
    input: { ms: 400, beat_ms: 100 }
    timeout: 4s
    heartbeat_timeout: 3s
    retry: { max_attempts: 1 }
    output: work
output: "${ vars.work.done_ms }"
`)); err != nil {
		t.Fatal(err)
	}
	// a leaves, so that the instance surely runs on a node that compiles
	// the version after the upload (the uploader compiled it while
	// storing it).
	stopA()
	inst, _, err := b.Engine().Start(ctx, "first", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("b had the version loaded when the instance started: %v", created(t, reg, "kit", plugins.Hash(kit)) >= 1)

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	done, err := b.Engine().WaitFinished(wctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := b.Store().History(ctx, inst.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != weft.StatusCompleted || string(done.Output) != "400" || count(hist, "activity_scheduled") != 1 {
		t.Fatalf("instance %s, output %s, error %+v; want completed at its first attempt:\n%s", done.Status, done.Output, done.Error, dump(hist))
	}
}

// A restarted node loads, before it is ready, a version that a running
// instance pins although it is no longer its plugin's current version.
func TestRestartLoadsVersionsPinnedByUnfinishedInstances(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := config(dir)
	// The instance is committed as running at the scheduler's first
	// visit of its attempt.
	cfg.Engine.Heartbeat = heartbeat.Config{Tick: 20 * time.Millisecond, Cycle: 200 * time.Millisecond}
	first, _, stop := open(t, cfg)
	kit := testplugins.Bytes(t, "kit")
	if _, _, err := first.PutPlugin(ctx, "kit", kit); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Engine().SaveDefinition(ctx, []byte(`
name: long
steps: [ { id: w, activity: kit.work, input: { ms: 600000, beat_ms: 20 } } ]
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := first.Engine().Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	within(t, 30*time.Second, "the instance is stored as running", func() bool {
		got, err := first.Store().GetInstance(ctx, inst.ID)
		return err == nil && got.Status == weft.StatusRunning
	})
	// A new current version of kit, which the instance does not use.
	next := testplugins.Manifested(t, `{"activities":[{"name":"work"}]}`)
	if _, _, err := first.PutPlugin(ctx, "kit", next); err != nil {
		t.Fatal(err)
	}
	stop()

	// Opened without running, so that no call loads anything: what is
	// loaded, the warm-up loaded.
	cfg = config(dir)
	cfg.Plugins.CacheDir = testplugins.CacheDir(t)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	second, err := node.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := second.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}()
	<-second.Warmed()
	if err := second.Ready(ctx); err != nil {
		t.Fatalf("Ready once warmed: %v", err)
	}
	got, err := second.Store().GetInstance(ctx, inst.ID)
	if err != nil || got.Status != weft.StatusRunning || got.Plugins["kit"] != plugins.Hash(kit) {
		t.Fatalf("instance %+v, %v: want it running, pinning the first version", got, err)
	}
	for what, version := range map[string]string{"pinned": plugins.Hash(kit), "current": plugins.Hash(next)} {
		if created(t, reg, "kit", version) < 1 {
			t.Errorf("the %s version %s is not loaded after Open", what, version[:12])
		}
	}
}

// count returns how many events of a type hist has.
func count(hist []weft.HistoryEntry, typ weft.HistoryType) int {
	n := 0
	for _, ev := range hist {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
