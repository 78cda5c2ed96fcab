package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/testplugins"
)

// The cluster tests run real `weft serve --store redis` processes against a
// real redis-server and drive them over HTTP, as users do. The settings
// shrink the failover times: lock and lease TTL 6s, a renewal cycle of
// 250ms, a recovery sweep every 200ms. The TTL is long enough that a live
// node on a loaded machine (beside another `make test`) does not let its
// lease lapse, which would run an attempt again on another node and fail
// the tests that count attempts.

// clusterHost is one node of a test cluster.
type clusterHost struct {
	id string
	p  *serveProcess
	c  *client.Client
}

// cluster starts n nodes on one Redis, each with the extra arguments.
func startCluster(t *testing.T, bin string, srv *redistest.Server, n int, extra ...string) []*clusterHost {
	t.Helper()
	cache := testplugins.CacheDir(t)
	var hosts []*clusterHost
	for i := range n {
		id := fmt.Sprintf("node%d", i+1)
		p := startProcess(t, bin, append([]string{"--store", "redis", "--redis-addr", srv.Addr(), "--node-id", id,
			"--data-dir", t.TempDir(), "--set", "plugins.cache_dir=" + cache,
			"--set", "engine.lock_ttl=6s", "--set", "engine.recovery_interval=200ms",
			"--set", "heartbeat.tick=25ms", "--set", "heartbeat.cycle=250ms"}, extra...)...)
		c, err := client.New(client.Config{Server: "http://" + p.addr})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, &clusterHost{id: id, p: p, c: c})
	}
	return hosts
}

// deploy uploads the kit plugin and a workflow through a node.
func deploy(t *testing.T, h *clusterHost, name, workflow string) {
	t.Helper()
	ctx := context.Background()
	if _, _, err := h.c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.c.PutWorkflow(ctx, name, []byte(workflow)); err != nil {
		t.Fatal(err)
	}
}

// history returns an instance's whole history through a node.
func history(t *testing.T, h *clusterHost, id string) []apiv1.HistoryEntry {
	t.Helper()
	page, err := h.c.History(context.Background(), id, client.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	return page.Items
}

// until polls f every 10ms until it reports true, for up to limit.
func until(t *testing.T, limit time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// runsOn returns the node that scheduled an instance's latest attempt.
func runsOn(evs []apiv1.HistoryEntry) string {
	node := ""
	for _, e := range evs {
		if e.Type == "activity_scheduled" {
			node = e.Node
		}
	}
	return node
}

// heartbeatsStored reports whether the store holds details for a running
// attempt of the instance: what a node that dies now leaves behind.
func heartbeatsStored(t *testing.T, st *redisstore.Store, id string) bool {
	t.Helper()
	beats, err := st.Heartbeats(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return len(beats) > 0
}

func openRedisStore(t *testing.T, srv *redistest.Server) *redisstore.Store {
	t.Helper()
	st, err := redisstore.Open(context.Background(), redisstore.Config{Client: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

type workOut struct {
	DoneMS      int64 `json:"done_ms"`
	ResumedFrom int64 `json:"resumed_from"`
	Attempt     int   `json:"attempt"`
}

func clusterBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts host processes")
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err != nil {
		t.Fatal("install redis-server (make deps)")
	}
	return buildWeft(t)
}

// Three nodes; instances started through one of them run on all of them.
// One node is killed with SIGKILL in the middle of its activities: after
// its leases expire the others take its instances over, and each attempt
// they start resumes from the details the dead node's guests reported.
func TestClusterKilledNodeHandsOverItsInstances(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	// Every start reaches one node: without eager starts, the shared queue
	// spreads them over the three.
	hosts := startCluster(t, bin, srv, 3, "--set", "engine.eager_starts=false")
	st := openRedisStore(t, srv)
	deploy(t, hosts[0], "long", `
name: long
steps:
  - { id: work, activity: kit.work, input: { ms: 3000, beat_ms: 20 }, heartbeat_timeout: 10s, output: work }
output: "${ vars.work }"
`)
	ctx := context.Background()
	var ids []string
	for range 6 {
		inst, _, err := hosts[2].c.Start(ctx, "long", apiv1.StartRequest{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	ran := map[string]string{}
	until(t, 60*time.Second, "every instance running", func() bool {
		for _, id := range ids {
			if ran[id] = runsOn(history(t, hosts[0], id)); ran[id] == "" {
				return false
			}
		}
		return true
	})
	victim := hosts[1]
	var victims []string
	for _, id := range ids {
		if ran[id] == victim.id {
			victims = append(victims, id)
		}
	}
	if len(victims) == 0 {
		victim = map[string]*clusterHost{"node1": hosts[0], "node2": hosts[1], "node3": hosts[2]}[ran[ids[0]]]
		for _, id := range ids {
			if ran[id] == victim.id {
				victims = append(victims, id)
			}
		}
	}
	t.Logf("instances by node: %v; killing %s", ran, victim.id)
	until(t, 30*time.Second, "the victim's details stored", func() bool {
		for _, id := range victims {
			if !heartbeatsStored(t, st, id) {
				return false
			}
		}
		return true
	})
	if err := victim.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	survivor := hosts[0]
	if victim == survivor {
		survivor = hosts[2]
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		var inst *apiv1.Instance
		var err error
		for inst == nil || !inst.Terminal() {
			if inst, err = survivor.c.Instance(wctx, id); err != nil {
				cancel()
				t.Fatalf("instance %s: %v", id, err)
			}
			if !inst.Terminal() {
				time.Sleep(20 * time.Millisecond) // polling with a deadline (wctx)
			}
		}
		cancel()
		var out workOut
		if inst.Status != apiv1.StatusCompleted || json.Unmarshal(inst.Output, &out) != nil {
			t.Fatalf("instance %s: %s %s %+v", id, inst.Status, inst.Output, inst.Error)
		}
		if !slices.Contains(victims, id) {
			continue
		}
		evs := history(t, survivor, id)
		var takenBy string
		for _, e := range evs {
			if e.Type == "attempt_abandoned" {
				takenBy = e.Node
			}
		}
		if takenBy == "" || takenBy == victim.id || out.Attempt != 2 || out.ResumedFrom == 0 {
			t.Errorf("instance %s of the killed node: taken over by %q, result %+v; want attempt 2 on another node resuming from the stored details", id, takenBy, out)
		}
	}
	nodes := map[string]bool{}
	for _, n := range ran {
		nodes[n] = true
	}
	if len(nodes) < 2 {
		t.Errorf("all instances ran on %v: the shared queue should spread them", nodes)
	}
}

// A node paused with SIGSTOP past its lock TTL loses the instance it runs
// to another node; resumed with SIGCONT, it cannot overwrite the newer
// state: its late completion is refused and recorded, and the instance's
// result is the new owner's.
func TestClusterPausedNodeCannotOverwrite(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	hosts := startCluster(t, bin, srv, 2)
	st := openRedisStore(t, srv)
	// Attempt 1 stops calling the host at 300ms (it never sees a
	// cancellation) and works on; attempt 2 is a normal one.
	deploy(t, hosts[0], "stubborn", `
name: stubborn
steps:
  - { id: work, activity: kit.work, input: { ms: 4000, beat_ms: 20, stall_at_ms: 300 }, output: work }
output: "${ vars.work }"
`)
	ctx := context.Background()
	inst, _, err := hosts[0].c.Start(ctx, "stubborn", apiv1.StartRequest{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	var owner string
	until(t, 60*time.Second, "the instance running", func() bool {
		owner = runsOn(history(t, hosts[0], inst.ID))
		return owner != "" && heartbeatsStored(t, st, inst.ID)
	})
	paused, other := hosts[0], hosts[1]
	if owner == other.id {
		paused, other = other, paused
	}
	if err := paused.p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = paused.p.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	until(t, 30*time.Second, "another node taking the instance over", func() bool {
		for _, e := range history(t, other, inst.ID) {
			if e.Type == "attempt_abandoned" && e.Node == other.id {
				return true
			}
		}
		return false
	})
	if err := paused.p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	var fin *apiv1.Instance
	until(t, 60*time.Second, "the instance finished", func() bool {
		fin, err = other.c.Instance(ctx, inst.ID)
		return err == nil && fin.Terminal()
	})
	var out workOut
	if fin.Status != apiv1.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil || out.Attempt != 2 {
		t.Fatalf("instance %s output %s; want attempt 2's result", fin.Status, fin.Output)
	}
	var late []apiv1.HistoryEntry
	until(t, 30*time.Second, "the refused late completion in the history", func() bool {
		late = nil
		for _, e := range history(t, other, inst.ID) {
			if e.Type == "activity_completed" && e.Node == paused.id {
				t.Fatalf("the paused node's completion was applied: %+v", e)
			}
			if e.Type == "late_completion_refused" {
				late = append(late, e)
			}
		}
		return len(late) > 0
	})
	if late[0].Node != paused.id || late[0].Attempt != 1 {
		t.Errorf("late completion %+v; want attempt 1 from %s", late[0], paused.id)
	}
	// The paused node is healthy again and serves the current state.
	got, err := paused.c.Instance(ctx, inst.ID)
	if err != nil || string(got.Output) != string(fin.Output) {
		t.Errorf("the resumed node reads %+v, %v; want the new owner's result", got, err)
	}
}

// Redis killed and restarted (AOF, appendfsync always) in the middle of a
// run: every instance that was acknowledged finishes, none is lost or run
// to a wrong result, and a stimulus sent to one node for an instance that
// waits on another resumes it exactly once.
func TestClusterSurvivesRedisRestart(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t, redistest.WithAppendFsync("always"))
	hosts := startCluster(t, bin, srv, 3)
	deploy(t, hosts[0], "steps", `
name: steps
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
  - { id: b, activity: kit.work, input: { ms: 1500, beat_ms: 20 } }
  - { id: c, activity: kit.upper, input: { text: "${ vars.a }" }, output: c }
output: "${ vars.c.text }"
`)
	deploy(t, hosts[0], "approval", `
name: approval
steps:
  - { id: prep, activity: kit.work, input: { ms: 300 } }
  - id: review
    wait: { event: approved, key: "${ input }", timeout: 1h }
    output: review
output: "${ vars.review.by }"
`)
	ctx := context.Background()
	want := map[string]string{}
	for i := range 20 {
		word := fmt.Sprintf("w%d", i)
		in, _ := json.Marshal(word)
		inst, _, err := hosts[i%3].c.Start(ctx, "steps", apiv1.StartRequest{Input: in}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want[inst.ID] = fmt.Sprintf("%q", "W"+word[1:])
	}
	waiting, _, err := hosts[0].c.Start(ctx, "approval", apiv1.StartRequest{Input: json.RawMessage(`"o-1"`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Mid-run: some instances are running, not all have finished.
	until(t, 60*time.Second, "the run under way", func() bool {
		page, err := hosts[0].c.Instances(ctx, client.InstanceFilter{Workflow: "steps", Status: apiv1.StatusRunning})
		return err == nil && len(page.Items) > 0
	})
	srv.Kill(t)
	srv.Restart(t)
	check := func(id string, suspended bool) *apiv1.Instance {
		var inst *apiv1.Instance
		until(t, 90*time.Second, "instance "+id+" finished or waiting", func() bool {
			inst, err = hosts[1].c.Instance(ctx, id)
			return err == nil && (inst.Terminal() || suspended && inst.Status == apiv1.StatusSuspended)
		})
		return inst
	}
	for id, out := range want {
		if inst := check(id, false); inst.Status != apiv1.StatusCompleted || string(inst.Output) != out {
			t.Errorf("instance %s: %s %s %+v; want completed %s", id, inst.Status, inst.Output, inst.Error, out)
		}
	}
	if inst := check(waiting.ID, true); inst.Status != apiv1.StatusSuspended {
		t.Fatalf("approval: %s %+v; want suspended on its wait", inst.Status, inst.Error)
	}
	// The stimulus goes to a node, the instance resumes on whichever pops
	// it; sent twice (same id), it is applied once.
	for range 2 {
		res, err := hosts[2].c.SendEvent(ctx, apiv1.EventRequest{ID: "approval-1", Name: "approved", Key: "o-1", Payload: json.RawMessage(`{"by":"ada"}`)})
		if err != nil || len(res.Resumed) != 1 {
			t.Fatalf("SendEvent: %+v, %v", res, err)
		}
	}
	if inst := check(waiting.ID, false); inst.Status != apiv1.StatusCompleted || string(inst.Output) != `"ada"` {
		t.Fatalf("approval after the stimulus: %s %s", inst.Status, inst.Output)
	}
	resumed := 0
	for _, e := range history(t, hosts[0], waiting.ID) {
		if e.Type == "bookmark_resumed" {
			resumed++
		}
	}
	if resumed != 1 {
		t.Errorf("the wait was resumed %d times, want once", resumed)
	}
}
