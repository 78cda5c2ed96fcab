//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/testplugins"
)

// The chaos harness (docs/reliability.md): three `weft serve --store redis`
// nodes on a Redis with AOF (appendfsync always) run instances of a
// workflow with a heartbeating activity, a wait for an event and a last
// activity, while the test SIGKILLs a random node every few seconds and
// restarts it on its data directory, pauses one past its lock TTL and
// kills Redis once. Afterwards it checks from the API, the histories and
// the store that every instance completed with the right output, that no
// step was completed twice, no wait resumed twice, every event applied
// once, that every takeover of a killed or paused node's instance
// happened within the lock TTL and one heartbeat cycle, and that no
// concurrency key (the workflow has a limit per group of instances) ever
// ran more instances at once than its limit.
//
// With -chaos.redis=cluster the nodes run on a Redis Cluster of three
// masters with a replica each, waiting for a replica to have each write
// (redis.wait_replicas 1), and the Redis fault is a master's death instead:
// the master of the store's slot gets SIGKILL, its replica is promoted, and
// the dead master is restarted and rejoins as a replica; later the master
// of the ready queue's slot goes the same way.
//
// With -chaos.partitions=N (N from 2 to 1,024) the nodes divide the store
// into N partitions (redis.partitions, docs/cluster.md "Partitions"). On
// the cluster, the first master killed is the catalog's (it holds
// partitions too when N >= 3), the second one that holds partitions and
// is not the catalog's master at that moment, so that the two kills hit
// two masters and the partitions on each; the checks read the stimuli
// through the partitioned store, as the nodes do.
//
// `go test -run TestChaos ./cmd/host` runs the short variant; `make chaos`
// runs 10,000 instances (-chaos.instances), `make chaos-cluster` as many on
// the cluster. The flags are read once, as the test's configuration.
var (
	chaosInstances = flag.Int("chaos.instances", 0, "chaos: instances to run (0: the short variant's 240)")
	chaosRate      = flag.Float64("chaos.rate", 0, "chaos: instance starts per second (0: the default, 8)")
	chaosSeed      = flag.Uint64("chaos.seed", 0, "chaos: the seed of the plan and the faults (0: from the clock)")
	chaosRedis     = flag.String("chaos.redis", string(redisSingle), "chaos: what the nodes run on, single (one redis-server, killed once) or cluster (a Redis Cluster of three masters with a replica each, the masters of the store and of the queue killed)")
	chaosParts     = flag.Int("chaos.partitions", 1, "chaos: the store's partitions (redis.partitions, 2 to 1024; 1: the whole store), on either Redis")
	chaosOut       = flag.String("chaos.out", "", "chaos and soak: directory for reports and node logs (default bin/chaos under the repository)")
)

// chaosConfig is one chaos run's shape.
type chaosConfig struct {
	Instances int
	Rate      float64 // instance starts per second
	InFlight  int     // at most this many instances started and not ended
	WorkMS    [2]int64
	BeatMS    int64
	// EventLag: an event for an instance that exists is sent up to this
	// long after its start, so that some find it running its activity
	// (they are queued for its wait) and some waiting (they resume it).
	EventLag time.Duration
	// Lead: an event sent before its instance exists is sent up to this
	// long before the start.
	Lead time.Duration

	// Groups: each instance is in group i % Groups, its workflow's
	// concurrency key, which lets at most Limit of a group's instances run
	// at once; the others wait for a slot (docs/flow-control.md).
	Groups, Limit int

	LockTTL, Cycle, Tick, Recovery time.Duration
	Workers, Pool                  int

	KillEvery [2]time.Duration // between node kills
	DownFor   [2]time.Duration // a killed node stays down this long
	PauseAt   float64          // fraction of the start phase
	PauseFor  time.Duration    // beyond the lock TTL
	RedisAt   float64          // fraction of the start phase
	RedisDown time.Duration
	// Redis is what the nodes run on. On redisCluster the fault at RedisAt
	// kills the master of the store's slot instead of the one Redis; it
	// stays down RedisDown after its replica's promotion. QueueMasterAt
	// (a fraction of the start phase, 0 for none) kills the master of the
	// ready queue's slot the same way.
	Redis         rigRedis
	QueueMasterAt float64
	// Partitions divides the store (redis.partitions) when above 1. On
	// redisCluster the kill at RedisAt then hits the catalog's master and
	// the one at QueueMasterAt a master of partitions other than the
	// catalog's (masterKillKey), instead of the queue's.
	Partitions int
	// Deadline bounds one instance, from its start to its end, as the
	// driver waits for it; the checks wait longer still for an instance
	// not ended by then (endWait), rather than read it while it runs.
	Deadline time.Duration
	// BoundTakeovers makes a takeover later than the lock TTL and one
	// heartbeat cycle a violation, unless the CPU was saturated
	// (starvedShare). Only the full run (`make chaos`) sets it. The short
	// variant lists late takeovers in its report and summary without
	// failing: it runs under `make test`, beside the other packages and
	// maybe another `make test`, the CPU oversubscribed three or four
	// times in bursts, and whether a takeover makes 5s there says more
	// about the neighbours than about the host. Excusing late takeovers
	// from a lower pressure (20 %, or unknown) instead would still fail on
	// a burst that the pressure averaged over the takeover's few seconds
	// hides. The short variant's other invariants still fail it: an
	// instance that nobody takes over does not complete.
	BoundTakeovers bool
}

// endWait bounds the wait, after the driver, for the instances it did not
// see end within their Deadline.
const endWait = 5 * time.Minute

func defaultChaosConfig() chaosConfig {
	return chaosConfig{
		Instances: 240, Rate: 8, InFlight: 96,
		WorkMS: [2]int64{500, 3000}, BeatMS: 50,
		EventLag: 3 * time.Second, Lead: time.Second,
		// At 8 starts a second, a group starts one a second, and an
		// instance holds its slot for its whole life (a median of 2.25s
		// on an idle machine): a group is full now and then, and always
		// while a killed node's instances keep their slots until they are
		// taken over. On a loaded machine most instances wait.
		Groups: 8, Limit: 3,
		// Production ratios at half the production times: the TTL covers
		// four renewal cycles (docs/architecture.md, "Defaults"), the
		// recovery sweep runs twice per cycle. A dead node's instance
		// must be taken over within TTL + cycle: the lease ends at most a
		// TTL after the node's last renewal, and a cycle is left for the
		// sweep to find it and another node to take it.
		LockTTL: 4 * time.Second, Cycle: time.Second, Tick: 50 * time.Millisecond, Recovery: 500 * time.Millisecond,
		// Enough workers and guests for one node to carry the whole load
		// (starts × the work step's mean length) while the other two are
		// down or paused: a takeover queues behind the starts otherwise.
		Workers: 32, Pool: 16,
		KillEvery: [2]time.Duration{5 * time.Second, 8 * time.Second},
		DownFor:   [2]time.Duration{500 * time.Millisecond, 2500 * time.Millisecond},
		PauseAt:   0.3, PauseFor: 1500 * time.Millisecond,
		RedisAt: 0.6, RedisDown: time.Second,
		Redis: redisSingle, QueueMasterAt: 0.85, Partitions: 1,
		// Short runs on a loaded machine took up to 37s from start to
		// end: the deadline is far above it.
		Deadline: 5 * time.Minute,
	}
}

// chaosWorkflow is the workflow under test, with cfg's concurrency limit
// per group. Its output names everything the harness checks: the
// instance's own key, the work step's result (how long it worked, from
// where its last attempt resumed) and the last activity's result, which
// depends on the event's payload.
func chaosWorkflow(cfg chaosConfig) string {
	return fmt.Sprintf(chaosFlow, cfg.Limit)
}

// chaosFlow is chaosWorkflow's text, its limit a verb.
const chaosFlow = `
name: chaos
concurrency: { key: "${ input.group }", limit: %d }
steps:
  - id: work
    activity: kit.work
    input: { ms: "${ input.ms }", beat_ms: "${ input.beat_ms }" }
    heartbeat_timeout: 30s
    output: work
  - id: signal
    wait: { event: chaos.signal, key: "${ input.key }", timeout: 1h }
    output: signal
  - id: finish
    activity: kit.upper
    input: { text: "${ input.key + ':' + vars.signal.word }" }
    output: finish
output:
  key: "${ input.key }"
  work: "${ vars.work }"
  text: "${ vars.finish.text }"
`

const (
	chaosEvent = "chaos.signal"
	workPath   = "steps[0]"
	waitPath   = "steps[1]"
	finishPath = "steps[2]"
)

// planned is one instance of the plan, all drawn from the seed.
type planned struct {
	ID    string
	Group int // its concurrency key: its index % chaosConfig.Groups
	MS    int64
	Word  string
	Early bool          // its event is sent before it exists
	Lead  time.Duration // early: how long before the start; else after
	Gap   time.Duration // between the event's two sends
	Seed  uint64        // for its own choices of nodes
}

func (p planned) eventID() string { return "ev-" + p.ID }

type chaosOutput struct {
	Key  string `json:"key"`
	Text string `json:"text"`
	Work struct {
		DoneMS      int64 `json:"done_ms"`
		ResumedFrom int64 `json:"resumed_from"`
		Attempt     int   `json:"attempt"`
	} `json:"work"`
}

// outcome is what the driver saw of one instance.
type outcome struct {
	Started, Ended time.Time
	Answers        [2]*apiv1.EventOutcome
	Sent           [2]sent
	Final          *apiv1.Instance
	Err            error // the harness could not start it, send its event or see its end
}

// sent is when an event's send was answered, and by which node.
type sent struct {
	At   time.Time
	Node string
}

// fault is one thing the injector did.
type fault struct {
	At time.Time
	// Kind is kill, restart, pause, resume, redis-kill or redis-up; on a
	// Redis Cluster master-kill (SIGKILL to a master), master-promoted
	// (its replica serves its slots, as the cluster's nodes agree) and
	// master-rejoined (the dead master restarted and in sync as a
	// replica) instead of the last two.
	Kind string
	// Node is the node id for a node's fault; for a master's, what the
	// master serves (masterRole) and its address ("store+queue
	// 127.0.0.1:port").
	Node string
}

func TestChaos(t *testing.T) {
	bin := clusterBinary(t)
	cfg := defaultChaosConfig()
	if *chaosInstances > 0 {
		cfg.Instances = *chaosInstances
	}
	if *chaosRate > 0 {
		cfg.Rate = *chaosRate
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	switch cfg.Redis = rigRedis(*chaosRedis); cfg.Redis {
	case redisSingle, redisCluster:
	default:
		t.Fatalf("-chaos.redis=%s: want %s or %s", cfg.Redis, redisSingle, redisCluster)
	}
	if cfg.Partitions = max(*chaosParts, 1); cfg.Partitions > partition.Max {
		t.Fatalf("-chaos.partitions=%d: want 1 to %d", cfg.Partitions, partition.Max)
	}
	long := cfg.Instances > defaultChaosConfig().Instances
	cfg.BoundTakeovers = long
	dir := runDir(t, cfg.kind(), seed)
	t.Logf("%s: seed %d (-chaos.seed=%d repeats the plan and the faults), %d instances at %.1f/s on %s Redis, the store in %d partition(s); logs and report in %s",
		cfg.kind(), seed, seed, cfg.Instances, cfg.Rate, cfg.Redis, cfg.Partitions, dir)

	args := []string{
		"--set", "engine.lock_ttl=" + cfg.LockTTL.String(),
		"--set", "engine.recovery_interval=" + cfg.Recovery.String(),
		"--set", "heartbeat.tick=" + cfg.Tick.String(),
		"--set", "heartbeat.cycle=" + cfg.Cycle.String(),
		"--set", fmt.Sprint("engine.workers=", cfg.Workers),
		"--set", fmt.Sprint("plugins.pool_size=", cfg.Pool),
	}
	if cfg.Partitions > 1 {
		args = append(args, "--set", fmt.Sprint("redis.partitions=", cfg.Partitions))
	}
	r := startRigOn(t, bin, cfg.Redis, 3, dir, args...)
	deployTo(t, r, chaosWorkflow(cfg))
	deploySchedule(t, r)

	plan := makePlan(cfg, seed)
	outs := make([]outcome, len(plan))
	stats := &callStats{}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pressure := sampleCPUPressure(ctx)
	t0 := time.Now()
	startPhase := time.Duration(float64(cfg.Instances) / cfg.Rate * float64(time.Second))
	driven := make(chan struct{})
	var startedAll atomic.Int64
	go func() {
		defer close(driven)
		drive(ctx, r, cfg, seed, plan, outs, stats, &startedAll)
	}()
	faults := injectFaults(t, r, cfg, rand.New(rand.NewPCG(seed, 0xfa17)), t0, startPhase, driven)
	<-driven
	elapsed := time.Since(t0)
	healRig(t, r, &faults)
	awaitEnds(t, r, cfg, plan, outs)

	res := checkChaos(t, r, cfg, plan, outs, faults, pressure)
	checkSchedule(t, r, stats, res)
	res.seed, res.t0, res.elapsed, res.faults, res.retries = seed, t0, elapsed, faults, stats.snapshot()
	res.startPhase, res.cfg = startPhase, cfg
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(res.report()), 0o644); err != nil {
		t.Errorf("writing the report: %v", err)
	}
	summary := res.summary(path)
	t.Log(summary)
	fmt.Println(summary) // the one line `make chaos` (`make chaos-cluster`) prints
	for _, v := range res.verdicts {
		if v.failed > 0 {
			t.Errorf("%s: %d of %d violate it (seed %d), e.g.\n  %s", v.name, v.failed, v.checked, seed, strings.Join(v.examples, "\n  "))
		}
	}
	if t.Failed() {
		r.postMortem(t)
	} else if !long {
		// The short variant keeps its report, not the node logs.
		for _, n := range r.nodes {
			_ = os.Remove(n.logPath)
		}
	}
}

// kind names a run of cfg: chaos, or chaos-cluster on a Redis Cluster;
// with a partitioned store, -partitions after either. It starts the
// summary line and names the run's directory.
func (cfg chaosConfig) kind() string {
	k := "chaos"
	if cfg.Redis == redisCluster {
		k = "chaos-cluster"
	}
	if cfg.Partitions > 1 {
		k += "-partitions"
	}
	return k
}

// redisFault is the kind of fault that kills Redis: the one redis-server,
// or a master of the cluster.
func (cfg chaosConfig) redisFault() string {
	if cfg.Redis == redisCluster {
		return "master-kill"
	}
	return "redis-kill"
}

// runDir makes the directory of one run: -chaos.out, or bin/chaos under
// the repository, then kind-time-seed.
func runDir(t *testing.T, kind string, seed uint64) string {
	t.Helper()
	base := *chaosOut
	if base == "" {
		base = filepath.Join(testplugins.Root(t), "bin", "chaos")
	}
	dir := filepath.Join(base, fmt.Sprintf("%s-%s-seed%d", kind, time.Now().Format("20060102-150405"), seed))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// deployTo uploads the kit plugin and a workflow through the rig's first
// node.
func deployTo(t *testing.T, r *rig, workflow string) {
	t.Helper()
	c, ok := r.nodes[0].client()
	if !ok {
		t.Fatal("node1 is not up")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatalf("uploading kit: %v", err)
	}
	if _, _, err := c.PutWorkflow(ctx, "chaos", []byte(workflow)); err != nil {
		t.Fatalf("saving the workflow: %v", err)
	}
}

func makePlan(cfg chaosConfig, seed uint64) []planned {
	rng := rand.New(rand.NewPCG(seed, 0x91a2))
	plan := make([]planned, cfg.Instances)
	for i := range plan {
		word := make([]byte, 8)
		for j := range word {
			word[j] = byte('a' + rng.IntN(26))
		}
		p := planned{
			ID:    fmt.Sprintf("chaos-%05d", i),
			Group: i % max(cfg.Groups, 1),
			MS:    cfg.WorkMS[0] + rng.Int64N(cfg.WorkMS[1]-cfg.WorkMS[0]+1),
			Word:  string(word),
			Early: rng.IntN(4) == 0,
			Gap:   time.Duration(rng.Int64N(int64(500 * time.Millisecond))),
			Seed:  rng.Uint64(),
		}
		if p.Early {
			p.Lead = time.Duration(rng.Int64N(int64(cfg.Lead)))
		} else {
			p.Lead = time.Duration(rng.Int64N(int64(cfg.EventLag)))
		}
		plan[i] = p
	}
	return plan
}

// drive starts the plan's instances at cfg.Rate (at most cfg.InFlight at
// once), sends each one's event twice, and waits for each to end.
func drive(ctx context.Context, r *rig, cfg chaosConfig, seed uint64, plan []planned, outs []outcome, stats *callStats, started *atomic.Int64) {
	sem := make(chan struct{}, cfg.InFlight)
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.Rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := range plan {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		started.Add(1)
		wg.Go(func() {
			defer func() { <-sem }()
			outs[i] = runOne(ctx, r, cfg, seed, plan[i], stats)
		})
	}
}

// runOne drives one instance through its life.
func runOne(ctx context.Context, r *rig, cfg chaosConfig, seed uint64, p planned, stats *callStats) (o outcome) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	payload, _ := json.Marshal(map[string]string{"word": p.Word})
	var mu sync.Mutex // o.Err and o.Answers, written by the event's goroutine too
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		o.Err = errors.Join(o.Err, err)
	}
	send := func(rng *rand.Rand, k int) {
		var res *apiv1.EventOutcome
		node, err := r.call(ctx, rng, stats, 10*time.Second, func(ctx context.Context, c *client.Client) (err error) {
			res, err = c.SendEvent(ctx, apiv1.EventRequest{ID: p.eventID(), Name: chaosEvent, Key: p.ID, Payload: payload})
			return err
		})
		if err != nil {
			fail(fmt.Errorf("sending event %s (%d): %w", p.eventID(), k+1, err))
			return
		}
		mu.Lock()
		o.Answers[k], o.Sent[k] = res, sent{time.Now(), node}
		mu.Unlock()
	}
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-time.After(d): // the plan's pacing
		}
	}
	rng := rand.New(rand.NewPCG(seed, p.Seed))
	evRNG := rand.New(rand.NewPCG(seed, p.Seed+1))
	var events sync.WaitGroup
	defer events.Wait()
	if p.Early {
		send(rng, 0)
		events.Go(func() { sleep(p.Gap); send(evRNG, 1) })
		sleep(p.Lead)
	}
	input, _ := json.Marshal(map[string]any{"key": p.ID, "group": p.Group, "ms": p.MS, "beat_ms": cfg.BeatMS})
	o.Started = time.Now()
	_, err := r.call(ctx, rng, stats, 10*time.Second, func(ctx context.Context, c *client.Client) error {
		_, _, err := c.Start(ctx, "chaos", apiv1.StartRequest{ID: p.ID, Input: input}, 0)
		return err
	})
	if err != nil {
		fail(fmt.Errorf("starting %s: %w", p.ID, err))
		return o
	}
	if !p.Early {
		events.Go(func() { sleep(p.Lead); send(evRNG, 0); sleep(p.Gap); send(evRNG, 1) })
	}
	for {
		var inst *apiv1.Instance
		_, err := r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
			inst, err = c.Await(ctx, p.ID, 20*time.Second, apiv1.UntilEnded)
			return err
		})
		if err != nil {
			fail(fmt.Errorf("waiting for %s to end: %w", p.ID, err))
			return o
		}
		if inst.Terminal() {
			o.Ended, o.Final = time.Now(), inst
			return o
		}
	}
}

// injectFaults kills, restarts, pauses and resumes nodes and kills Redis
// once (on a cluster: the store's master, then the queue's), on the test's
// goroutine (redistest fails the test from it), until the start phase is
// over or the driver is done; nodes it took down are back up when it
// returns. While Redis is down or a master fails over, it waits: a node
// due back meanwhile comes back after that.
func injectFaults(t *testing.T, r *rig, cfg chaosConfig, rng *rand.Rand, t0 time.Time, startPhase time.Duration, driven <-chan struct{}) []fault {
	t.Helper()
	var faults []fault
	record := func(kind, node string) { faults = append(faults, fault{At: time.Now(), Kind: kind, Node: node}) }
	between := func(d [2]time.Duration) time.Duration { return d[0] + time.Duration(rng.Int64N(int64(d[1]-d[0])+1)) }
	type pending struct {
		at   time.Time
		node *rigNode
		kind string // restart or resume
	}
	var later []pending
	end := t0.Add(startPhase)
	nextKill := t0.Add(between(cfg.KillEvery))
	pauseAt := t0.Add(time.Duration(cfg.PauseAt * float64(startPhase)))
	redisAt := t0.Add(time.Duration(cfg.RedisAt * float64(startPhase)))
	queueAt := t0.Add(time.Duration(cfg.QueueMasterAt * float64(startPhase)))
	paused, redisDone, injecting := false, false, true
	queueDone := cfg.Redis != redisCluster || cfg.QueueMasterAt <= 0
	// victim picks a node that serves, leaving at least one other serving.
	victim := func() *rigNode {
		up := r.up()
		if len(up) < 2 {
			return nil
		}
		return up[rng.IntN(len(up))]
	}
	for injecting || len(later) > 0 {
		next := time.Now().Add(time.Hour)
		if injecting {
			next = nextKill
			if !paused && pauseAt.Before(next) {
				next = pauseAt
			}
			if !redisDone && redisAt.Before(next) {
				next = redisAt
			}
			if !queueDone && queueAt.Before(next) {
				next = queueAt
			}
			if end.Before(next) {
				next = end
			}
		}
		for _, p := range later {
			if p.at.Before(next) {
				next = p.at
			}
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-driven:
			injecting = false
		case <-timer.C:
		}
		timer.Stop()
		now := time.Now()
		if !now.Before(end) {
			injecting = false
		}
		// Restarts and resumes that are due.
		kept := later[:0]
		for _, p := range later {
			if p.at.After(now) {
				kept = append(kept, p)
				continue
			}
			switch p.kind {
			case "restart":
				if err := p.node.start(); err != nil {
					t.Fatal(err)
				}
			case "resume":
				if err := p.node.signal(syscall.SIGCONT, []nodeState{nodePaused}, nodeUp); err != nil {
					t.Fatal(err)
				}
			}
			record(p.kind, p.node.id)
		}
		later = kept
		if !injecting {
			continue
		}
		if !redisDone && !now.Before(redisAt) || !queueDone && !now.Before(queueAt) {
			// A node that boots while Redis (or the store's master) is
			// down cannot open its store and exits, to be restarted by
			// its supervisor; the rig has none, so the nodes that are
			// starting serve before Redis goes down. (A run on the
			// cluster found it: a node restarted 1.5s before a master's
			// kill, slow to boot under -race, exited.)
			r.waitUp(t, 2*time.Minute)
		}
		switch {
		case !redisDone && !now.Before(redisAt) && cfg.Redis == redisCluster:
			redisDone = true
			killMaster(t, r, cfg, masterKillKey(t, r, cfg, true), record)
		case !queueDone && !now.Before(queueAt):
			queueDone = true
			killMaster(t, r, cfg, masterKillKey(t, r, cfg, false), record)
		case !redisDone && !now.Before(redisAt):
			redisDone = true
			r.srv.Kill(t)
			record("redis-kill", "")
			time.Sleep(cfg.RedisDown) // Redis stays down this long: fault pacing
			r.srv.Restart(t)
			record("redis-up", "")
		case !paused && !now.Before(pauseAt):
			n := victim()
			if n == nil {
				pauseAt = now.Add(500 * time.Millisecond)
				break
			}
			paused = true
			if err := n.signal(syscall.SIGSTOP, []nodeState{nodeUp}, nodePaused); err != nil {
				t.Fatal(err)
			}
			record("pause", n.id)
			later = append(later, pending{at: now.Add(cfg.LockTTL + cfg.PauseFor), node: n, kind: "resume"})
		case !now.Before(nextKill):
			n := victim()
			if n == nil {
				nextKill = now.Add(500 * time.Millisecond)
				break
			}
			if err := n.kill(); err != nil {
				t.Fatal(err)
			}
			record("kill", n.id)
			later = append(later, pending{at: time.Now().Add(between(cfg.DownFor)), node: n, kind: "restart"})
			nextKill = now.Add(between(cfg.KillEvery))
		}
	}
	return faults
}

// killMaster kills the master of key's slot in the rig's cluster with
// SIGKILL, waits until its replica is promoted and every node of the
// cluster agrees, keeps the dead master down cfg.RedisDown longer, then
// restarts it on its directory and waits until it has rejoined as the new
// master's replica, in sync. The faults it records name the master by
// what it serves (masterRole) and its address. With redis.wait_replicas 1,
// the store's writes fail from the kill of its master until the rejoin:
// until the promotion no master serves its slot, and after it the new
// master has no replica to wait for.
func killMaster(t *testing.T, r *rig, cfg chaosConfig, key string, record func(kind, node string)) {
	t.Helper()
	dead := r.cluster.MasterOf(t, key)
	role := masterRole(t, r, cfg, dead)
	if cfg.Partitions >= 3 && !strings.Contains(role, "partitions[") {
		// Every master holds partitions from three on (partition.Tags
		// spreads them over the slots): a kill that hit none would test
		// nothing of the partitioned store.
		t.Errorf("the master %s killed for %s serves no partition of %d (%s): the run does not test what it claims", dead.Addr(), key, cfg.Partitions, role)
	}
	dead.Kill(t)
	record("master-kill", role+" "+dead.Addr())
	heir := r.cluster.WaitFailover(t, key)
	record("master-promoted", role+" "+heir.Addr())
	time.Sleep(cfg.RedisDown) // the dead master stays down this long: fault pacing
	dead.Restart(t)
	r.cluster.WaitHealthy(t)
	record("master-rejoined", role+" "+dead.Addr())
}

// masterRole says which of the store's and the ready queue's slots m
// serves: store, queue, store+queue, or other. Today the two hash tags'
// slots (9610 and 7963) fall in the same third of the slots, so on three
// masters one master serves both. With a partitioned store, the store's
// tag is the catalog's, and the partitions m serves follow in brackets:
// "catalog+queue+partitions[5-10]". It has no space: the failovers split
// a fault's node at the first.
func masterRole(t *testing.T, r *rig, cfg chaosConfig, m *redistest.Server) string {
	t.Helper()
	store := "store"
	if cfg.Partitions > 1 {
		store = "catalog"
	}
	var roles []string
	if r.cluster.MasterOf(t, storeSlotKey) == m {
		roles = append(roles, store)
	}
	if r.cluster.MasterOf(t, queueSlotKey) == m {
		roles = append(roles, "queue")
	}
	if cfg.Partitions > 1 {
		var held []int
		for i, tag := range partitionTags(t, cfg) {
			if r.cluster.MasterOf(t, tag) == m {
				held = append(held, i)
			}
		}
		if len(held) > 0 {
			roles = append(roles, "partitions["+indexRanges(held)+"]")
		}
	}
	if len(roles) == 0 {
		return "other"
	}
	return strings.Join(roles, "+")
}

// partitionTags are the hash tags of cfg's partitions, as the nodes
// compute them (redisstore.OpenPartitioned), each a key of its slot.
func partitionTags(t *testing.T, cfg chaosConfig) []string {
	t.Helper()
	tags, err := partition.Tags(redisstore.DefaultPrefix, cfg.Partitions)
	if err != nil {
		t.Fatalf("the tags of %d partitions: %v", cfg.Partitions, err)
	}
	return tags
}

// masterKillKey is a key of the slot whose master a cluster run kills:
// first the store's (the catalog's, with partitions), then the ready
// queue's. With partitions, the second kill instead aims at the first
// partition whose master is not the one serving the catalog now (after
// the first kill, its promoted replica), so that the two kills hit two
// masters and the partitions each holds; the queue's master when every
// partition is the catalog's master's (two partitions can be).
func masterKillKey(t *testing.T, r *rig, cfg chaosConfig, first bool) string {
	t.Helper()
	switch {
	case first:
		return storeSlotKey
	case cfg.Partitions <= 1:
		return queueSlotKey
	}
	catalog := r.cluster.MasterOf(t, storeSlotKey)
	for _, tag := range partitionTags(t, cfg) {
		if r.cluster.MasterOf(t, tag) != catalog {
			return tag
		}
	}
	return queueSlotKey
}

// indexRanges writes sorted indexes as ranges: 0-2,5,7-8.
func indexRanges(ix []int) string {
	var parts []string
	for i := 0; i < len(ix); {
		j := i
		for j+1 < len(ix) && ix[j+1] == ix[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ix[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ix[i], ix[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// stimulusReader is what the checks read from the store beyond the API.
type stimulusReader interface {
	GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error)
	PendingStimuli(ctx context.Context, name, key string) ([]weft.Stimulus, error)
}

// openCheckStore opens the store the rig's nodes share as they do: whole,
// or divided into cfg.Partitions, whose stimuli are in the catalog. The
// partitioned store's relay loop is kept from running (an hour's
// interval): the checks read, the nodes relay. It is closed when the test
// ends.
func openCheckStore(t *testing.T, r *rig, cfg chaosConfig) stimulusReader {
	t.Helper()
	if cfg.Partitions <= 1 {
		return r.openStore(t)
	}
	var c redis.UniversalClient
	where := ""
	if r.cluster != nil {
		c, where = r.cluster.Client(t), "the Redis Cluster "+strings.Join(r.cluster.Addrs(), ",")
	} else {
		c, where = r.srv.Client(t), "redis "+r.srv.Addr()
	}
	st, err := redisstore.OpenPartitioned(t.Context(), redisstore.PartitionedConfig{
		Config: redisstore.Config{Client: c}, Partitions: cfg.Partitions, RelayInterval: time.Hour,
	})
	if err != nil {
		t.Fatalf("opening the store of %d partitions on %s: %v", cfg.Partitions, where, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// healRig brings every node back: the driver is done, but the checks read
// through every node.
func healRig(t *testing.T, r *rig, faults *[]fault) {
	t.Helper()
	for _, n := range r.nodes {
		st, _, err := n.status()
		if err != nil {
			t.Errorf("node %s: %v", n.id, err)
		}
		switch st {
		case nodeDown:
			if err := n.start(); err != nil {
				t.Fatal(err)
			}
			*faults = append(*faults, fault{At: time.Now(), Kind: "restart", Node: n.id})
		case nodePaused:
			if err := n.signal(syscall.SIGCONT, []nodeState{nodePaused}, nodeUp); err != nil {
				t.Fatal(err)
			}
			*faults = append(*faults, fault{At: time.Now(), Kind: "resume", Node: n.id})
		}
	}
	r.waitUp(t, 2*time.Minute)
}

// awaitEnds waits, up to endWait in all, for every instance the driver
// did not see end (a slow machine can make one outlive its Deadline), so
// that the checks read it ended rather than while it runs. An instance that
// does not end is left as it is, for the checks to report.
func awaitEnds(t *testing.T, r *rig, cfg chaosConfig, plan []planned, outs []outcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), endWait)
	defer cancel()
	stats := &callStats{}
	var wg sync.WaitGroup
	work := make(chan int)
	for w := range 8 {
		rng := rand.New(rand.NewPCG(uint64(w), 11))
		wg.Go(func() {
			for i := range work {
				o := &outs[i]
				for ctx.Err() == nil {
					var inst *apiv1.Instance
					_, err := r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
						inst, err = c.Await(ctx, plan[i].ID, 20*time.Second, apiv1.UntilEnded)
						return err
					})
					if err != nil {
						break // not there (never started) or out of time: the checks say so
					}
					if inst.Terminal() {
						o.Final = inst
						if !o.Started.IsZero() {
							o.Ended = time.Now()
						}
						break
					}
				}
			}
		})
	}
	var late []int
	for i := range plan {
		if outs[i].Final == nil || !outs[i].Final.Terminal() {
			late = append(late, i)
			work <- i
		}
	}
	close(work)
	wg.Wait()
	if len(late) > 0 {
		ended := 0
		for _, i := range late {
			if outs[i].Final != nil && outs[i].Final.Terminal() {
				ended++
			}
		}
		t.Logf("chaos: %d instance(s) not seen ending within their deadline of %s; %d of them ended since", len(late), cfg.Deadline, ended)
	}
}

// verdict is one invariant's tally.
type verdict struct {
	name            string
	checked, failed int
	examples        []string
}

func (v *verdict) check(ok bool, format string, args ...any) {
	v.checked++
	if ok {
		return
	}
	v.failed++
	if len(v.examples) < 10 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// takeover is one attempt_abandoned: a node took over an instance whose
// attempt another execution had left running.
type takeover struct {
	Instance, Path string
	Attempt        int    // the abandoned attempt
	From, By       string // the node that ran it, the node that took over
	Scheduled, At  time.Time
	Cause          *fault // the fault that explains it; nil when none does
	Latency        time.Duration
	// Stall is the share of the time from the fault to the takeover
	// during which some task waited for a CPU (-1: unknown).
	Stall   float64
	Details bool // the next attempt got heartbeat details
}

// chaosResult is what checkChaos found.
type chaosResult struct {
	cfg        chaosConfig
	seed       uint64
	t0         time.Time
	elapsed    time.Duration
	startPhase time.Duration
	faults     []fault
	retries    map[string]int

	instances, completed int
	verdicts             []*verdict
	takeovers            []takeover
	starved              []takeover // late, while the CPU was saturated
	unbounded            []takeover // late otherwise, in a run that does not bound them
	durations            []time.Duration
	attempts             map[int]int // the work step's completing attempt → instances
	counts               map[string]int
	harness              []string // what the driver could not do
	groups               []groupTally
	slotWaits            []time.Duration // slot_acquired's waited_ms
}

// groupTally is what the histories say of one group's concurrency key.
type groupTally struct {
	instances, waited int
	most              int // instances running at once, at most
}

// waited counts the instances that waited for a slot.
func (res *chaosResult) waited() int {
	n := 0
	for _, g := range res.groups {
		n += g.waited
	}
	return n
}

// mostAtOnceOfAll is the most instances of one key that ran at once.
func (res *chaosResult) mostAtOnceOfAll() int {
	most := 0
	for _, g := range res.groups {
		most = max(most, g.most)
	}
	return most
}

// chaosEv is a history event as checked, its data decoded.
type chaosEv struct {
	apiv1.HistoryEntry
	data struct {
		Token         string          `json:"token"`
		Event         string          `json:"event"`
		LastHeartbeat json.RawMessage `json:"last_heartbeat"`
	}
}

// checkChaos reads every instance and its history through the API, and
// the store's record of every event, and tallies the invariants.
func checkChaos(t *testing.T, r *rig, cfg chaosConfig, plan []planned, outs []outcome, faults []fault, pressure *cpuPressure) *chaosResult {
	t.Helper()
	res := &chaosResult{instances: len(plan), attempts: map[int]int{}, counts: map[string]int{}}
	vOutput := &verdict{name: "every instance completes with the right output"}
	vOnce := &verdict{name: "no step has two applied completions"}
	vWait := &verdict{name: "no wait is resumed twice"}
	vEvent := &verdict{name: "every event with an id is applied once"}
	vAnswer := &verdict{name: "an event sent again answers what it did the first time"}
	vResume := &verdict{name: "a takeover's attempt resumes from the details last recorded"}
	vFast := &verdict{name: fmt.Sprintf("a killed or paused node's instances are taken over within lock TTL + heartbeat cycle (%s), the CPU not saturated", cfg.LockTTL+cfg.Cycle)}
	if !cfg.BoundTakeovers {
		vFast.name += "; the short variant reports later ones without failing"
	}
	vLimit := &verdict{name: fmt.Sprintf("no concurrency key ever runs more than its limit (%d) at once; some instances waited for a slot, and none is left held", cfg.Limit)}
	res.verdicts = []*verdict{vOutput, vOnce, vWait, vEvent, vAnswer, vResume, vFast, vLimit}
	res.groups = make([]groupTally, max(cfg.Groups, 1))
	spans := make([][]span, len(res.groups))

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	st := openCheckStore(t, r, cfg)
	stats := &callStats{}
	type read struct {
		inst *apiv1.Instance
		hist []apiv1.HistoryEntry
		stim *weft.Stimulus
		left []weft.Stimulus
		err  error
	}
	reads := make([]read, len(plan))
	var wg sync.WaitGroup
	work := make(chan int)
	for w := range 8 {
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() {
			for i := range work {
				p := plan[i]
				rd := &reads[i]
				_, rd.err = r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
					rd.inst, err = c.Instance(ctx, p.ID)
					if err != nil {
						return err
					}
					rd.hist = nil
					for after := ""; ; {
						page, err := c.History(ctx, p.ID, client.ListOptions{Limit: 1000, Cursor: after})
						if err != nil {
							return err
						}
						rd.hist = append(rd.hist, page.Items...)
						if page.NextCursor == "" {
							return nil
						}
						after = page.NextCursor
					}
				})
				if rd.err != nil {
					continue
				}
				if rd.stim, rd.err = st.GetStimulus(ctx, p.eventID()); rd.err != nil {
					rd.err = fmt.Errorf("stimulus %s: %w", p.eventID(), rd.err)
					continue
				}
				if rd.left, rd.err = st.PendingStimuli(ctx, chaosEvent, p.ID); rd.err != nil {
					rd.err = fmt.Errorf("queued stimuli for %s: %w", p.ID, rd.err)
				}
			}
		})
	}
	for i := range plan {
		work <- i
	}
	close(work)
	wg.Wait()

	for i, p := range plan {
		o, rd := outs[i], reads[i]
		if o.Err != nil {
			res.harness = append(res.harness, fmt.Sprintf("%s: %v", p.ID, o.Err))
		}
		if rd.err != nil {
			vOutput.check(false, "%s: cannot be read: %v", p.ID, rd.err)
			continue
		}
		if !o.Ended.IsZero() {
			res.durations = append(res.durations, o.Ended.Sub(o.Started))
		}
		evs := make([]chaosEv, len(rd.hist))
		for j, e := range rd.hist {
			evs[j].HistoryEntry = e
			if len(e.Data) > 0 {
				_ = json.Unmarshal(e.Data, &evs[j].data)
			}
			res.counts[string(e.Type)]++
		}
		excerpt := func() string { return historyExcerpt(evs) }

		// Its span under its group's limit, and its wait for a slot.
		g := &res.groups[p.Group]
		g.instances++
		if sp, ok := runSpan(rd.hist); ok {
			sp.ID = p.ID
			spans[p.Group] = append(spans[p.Group], sp)
		}
		if slices.ContainsFunc(evs, func(e chaosEv) bool { return e.Type == "slot_waiting" }) {
			g.waited++
		}
		for _, e := range evs {
			switch e.Type {
			case "slot_acquired":
				var d struct {
					WaitedMS int64 `json:"waited_ms"`
				}
				if json.Unmarshal(e.Data, &d) == nil {
					res.slotWaits = append(res.slotWaits, time.Duration(d.WaitedMS)*time.Millisecond)
				}
			}
		}

		// The output.
		var out chaosOutput
		want := strings.ToUpper(p.ID + ":" + p.Word)
		okOut := rd.inst.Status == apiv1.StatusCompleted && json.Unmarshal(rd.inst.Output, &out) == nil &&
			out.Key == p.ID && out.Text == want && out.Work.DoneMS == p.MS
		if rd.inst.Status == apiv1.StatusCompleted {
			res.completed++
		}
		vOutput.check(okOut, "%s: %s, output %s, error %+v; want key %s, text %s, done_ms %d\n%s",
			p.ID, rd.inst.Status, rd.inst.Output, rd.inst.Error, p.ID, want, p.MS, excerpt())

		// Completions: one per step, and one instance_completed.
		completions := map[string]int{}
		for _, e := range evs {
			switch e.Type {
			case "activity_completed", "step_completed":
				completions[string(e.Type)+" "+e.StepPath]++
			case "instance_completed", "instance_failed", "instance_cancelled":
				completions[string(e.Type)]++
			}
		}
		okOnce := true
		for _, n := range completions {
			okOnce = okOnce && n <= 1
		}
		vOnce.check(okOnce, "%s: completions %v\n%s", p.ID, completions, excerpt())

		// The wait.
		resumed := 0
		for _, e := range evs {
			if e.Type == "bookmark_resumed" && e.StepPath == waitPath {
				resumed++
			}
		}
		vWait.check(resumed <= 1, "%s: its wait was resumed %d times\n%s", p.ID, resumed, excerpt())

		// The event: applied once (one resume), consumed in the store,
		// with nothing left queued, and answered as what it did: queued
		// when its instance did not exist yet, else queued or resuming
		// its instance.
		a := o.Answers
		okEv := resumed == 1 && a[0] != nil && a[1] != nil && rd.stim.State == weft.StimulusDelivered &&
			rd.stim.DeliveredTo == p.ID && len(rd.left) == 0 && len(a[0].Started) == 0
		if okEv {
			if p.Early {
				okEv = a[0].Queued && len(a[0].Resumed) == 0
			} else {
				okEv = a[0].Queued && len(a[0].Resumed) == 0 || !a[0].Queued && slices.Equal(a[0].Resumed, []string{p.ID})
			}
		}
		if okEv {
			if a[0].Queued {
				res.counts["event queued"]++
			} else {
				res.counts["event resumed"]++
			}
		}
		sends := fmt.Sprintf("event %s (early %v) answered %s by %s at %s and %s by %s at %s",
			p.eventID(), p.Early, answerString(a[0]), o.Sent[0].Node, o.Sent[0].At.Format("15:04:05.000"),
			answerString(a[1]), o.Sent[1].Node, o.Sent[1].At.Format("15:04:05.000"))
		vEvent.check(okEv, "%s: %s; stored %s (delivered to %q), %d left queued; wait resumed %d times\n%s",
			p.ID, sends, rd.stim.State, rd.stim.DeliveredTo, len(rd.left), resumed, excerpt())
		// The second send: "an event seen before does nothing again and
		// answers what it did the first time" (docs/http-api.md).
		vAnswer.check(a[0] != nil && a[1] != nil && slices.Equal(a[0].Resumed, a[1].Resumed) &&
			slices.Equal(a[0].Started, a[1].Started) && a[0].Queued == a[1].Queued, "%s: %s", p.ID, sends)

		// Takeovers, and what the completing attempt resumed from.
		type sched struct {
			node    string
			at      time.Time
			attempt int
		}
		last := map[string]sched{}
		var details json.RawMessage
		for _, e := range evs {
			switch e.Type {
			case "activity_scheduled":
				last[e.StepPath] = sched{e.Node, e.Time, e.Attempt}
			case "attempt_abandoned":
				s := last[e.StepPath]
				tk := takeover{Instance: p.ID, Path: e.StepPath, Attempt: e.Attempt, From: s.node, By: e.Node, Scheduled: s.at, At: e.Time,
					Details: len(e.data.LastHeartbeat) > 0}
				tk.Cause = causeOf(faults, s.node, s.at, e.Time, cfg.LockTTL)
				if tk.Cause != nil {
					tk.Latency = e.Time.Sub(tk.Cause.At)
					tk.Stall = pressure.share(tk.Cause.At, e.Time)
					late := tk.Latency > cfg.LockTTL+cfg.Cycle
					switch {
					case tk.Cause.Kind == "redis-kill", tk.Cause.Kind == "master-kill":
						// Every node lost Redis (or a master's slots),
						// not one: reported, not bounded.
					case late && tk.Stall >= starvedShare:
						// The bound holds for a host that gets the CPU:
						// counted apart, not as the host's failure.
						res.starved = append(res.starved, tk)
					case late && !cfg.BoundTakeovers:
						// The short variant: reported, not bounded
						// (chaosConfig.BoundTakeovers).
						res.unbounded = append(res.unbounded, tk)
					default:
						vFast.check(!late, "%s: %s of %s at %s taken over by %s after %s (CPU contended %s of that time)\n%s",
							p.ID, tk.Cause.Kind, s.node, tk.Cause.At.Format(time.RFC3339Nano), e.Node, tk.Latency.Round(time.Millisecond), share(tk.Stall), excerpt())
					}
				}
				res.takeovers = append(res.takeovers, tk)
			}
			if e.StepPath == workPath && (e.Type == "attempt_abandoned" || e.Type == "activity_failed") && len(e.data.LastHeartbeat) > 0 {
				details = e.data.LastHeartbeat
			}
		}
		if okOut {
			res.attempts[out.Work.Attempt]++
			var d struct {
				DoneMS int64 `json:"done_ms"`
			}
			_ = json.Unmarshal(details, &d)
			vResume.check(out.Work.ResumedFrom == d.DoneMS, "%s: attempt %d resumed from %d ms, the history's last details say %s\n%s",
				p.ID, out.Work.Attempt, out.Work.ResumedFrom, details, excerpt())
		}
	}

	// No key ran more than its limit at once, from the histories: the
	// spans from instance_started to the instance's end.
	for i, ss := range spans {
		most, at := mostAtOnce(ss)
		res.groups[i].most = most
		var open []string
		for _, sp := range ss {
			if !sp.Start.After(at) && (sp.End.IsZero() || sp.End.After(at)) {
				open = append(open, fmt.Sprintf("%s %s–%s", sp.ID, sp.Start.Format("15:04:05.000"), sp.End.Format("15:04:05.000")))
			}
		}
		vLimit.check(most <= cfg.Limit, "group %d: %d instances ran at once at %s, limit %d:\n    %s",
			i, most, at.Format(time.RFC3339Nano), cfg.Limit, strings.Join(open, "\n    "))
	}
	// A run where nobody waited tested nothing.
	vLimit.check(res.waited() > 0, "no instance waited for a slot (the most at once of a key was %d, the limit %d): the check tested nothing",
		res.mostAtOnceOfAll(), cfg.Limit)
	// Every instance ended: no slot is left held, nobody left in a line
	// (a slot its node died before giving back is the slots sweep's, in
	// a recovery interval or two).
	var left []apiv1.ConcurrencyKey
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := r.call(ctx, rand.New(rand.NewPCG(1, 3)), stats, 30*time.Second, func(ctx context.Context, c *client.Client) error {
			page, err := c.ConcurrencyKeys(ctx, "chaos", client.ListOptions{Limit: 100})
			if err == nil {
				left = page.Items
			}
			return err
		})
		if err != nil || len(left) == 0 || time.Now().After(deadline) {
			vLimit.check(err == nil && len(left) == 0, "keys still held or waited for 30s after every instance ended: %+v (%v)", left, err)
			break
		}
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}

	// Nothing else: no instance the plan did not start, no dead letter.
	var listed int
	_, err := r.call(ctx, rand.New(rand.NewPCG(1, 1)), stats, 30*time.Second, func(ctx context.Context, c *client.Client) error {
		listed = 0
		for cursor := ""; ; {
			page, err := c.Instances(ctx, client.InstanceFilter{Workflow: "chaos", ListOptions: client.ListOptions{Limit: 1000, Cursor: cursor}})
			if err != nil {
				return err
			}
			listed += len(page.Items)
			if page.NextCursor == "" {
				return nil
			}
			cursor = page.NextCursor
		}
	})
	vOutput.check(err == nil && listed == len(plan), "the host lists %d chaos instances (%v), the plan started %d", listed, err, len(plan))
	var dead *apiv1.Page[apiv1.Stimulus]
	_, err = r.call(ctx, rand.New(rand.NewPCG(1, 2)), stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
		dead, err = c.DeadLetters(ctx, client.ListOptions{Limit: 100})
		return err
	})
	vEvent.check(err == nil && len(dead.Items) == 0, "dead letters: %v %v", dead, err)
	return res
}

// starvedShare is the CPU pressure from which a late takeover is put down
// to a saturated machine rather than to the host: for more than half of the
// time from the fault to the takeover, some task was waiting for a CPU
// (/proc/pressure/cpu). The report lists each such takeover with its share.
const starvedShare = 0.5

func share(f float64) string {
	if f < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f%%", 100*f)
}

// causeOf returns the fault that explains a takeover of an attempt node
// scheduled: the first kill of node, of Redis or of a Redis Cluster's
// master between the scheduling and the takeover; failing that, a pause
// of node or a Redis outage that began before the takeover and ended less
// than a TTL before the attempt was scheduled (an execution that lost its
// lease then records a step before it finds out). A master's outage lasts
// from its kill to its rejoining: until then the store's writes do not
// reach a replica, and with redis.wait_replicas they fail.
func causeOf(faults []fault, node string, scheduled, takenOver time.Time, ttl time.Duration) *fault {
	for i, f := range faults {
		if f.At.After(takenOver) {
			break
		}
		if (f.Kind == "kill" && f.Node == node || f.Kind == "redis-kill" || f.Kind == "master-kill") && !f.At.Before(scheduled) {
			return &faults[i]
		}
	}
	for i, f := range faults {
		if f.At.After(takenOver) {
			break
		}
		var ends func(fault) bool
		switch {
		case f.Kind == "pause" && f.Node == node:
			ends = func(g fault) bool { return g.Kind == "resume" && g.Node == node }
		case f.Kind == "redis-kill":
			ends = func(g fault) bool { return g.Kind == "redis-up" }
		case f.Kind == "master-kill":
			ends = func(g fault) bool { return g.Kind == "master-rejoined" }
		default:
			continue
		}
		ended := takenOver
		for _, g := range faults[i:] {
			if ends(g) {
				ended = g.At
				break
			}
		}
		if ended.Add(ttl).After(scheduled) {
			return &faults[i]
		}
	}
	return nil
}

func answerString(a *apiv1.EventOutcome) string {
	if a == nil {
		return "nothing"
	}
	return fmt.Sprintf("{resumed %v started %v queued %v}", a.Resumed, a.Started, a.Queued)
}

// historyExcerpt is a history, one event a line, for a report.
func historyExcerpt(evs []chaosEv) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "    %3d %s %-24s %-9s a%d %-6s %s\n", e.Seq, e.Time.Format("15:04:05.000"), e.Type, e.StepPath, e.Attempt, e.Node, e.Data)
	}
	return b.String()
}

// quantiles returns min, median, p99 and max of ds (sorted in place).
func quantiles(ds []time.Duration) (lo, med, p99, hi time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	q := func(f float64) time.Duration { return ds[min(len(ds)-1, int(f*float64(len(ds))))] }
	return ds[0], q(0.5), q(0.99), ds[len(ds)-1]
}

func (res *chaosResult) latencies(kinds ...string) []time.Duration {
	var ds []time.Duration
	for _, tk := range res.takeovers {
		if tk.Cause != nil && slices.Contains(kinds, tk.Cause.Kind) {
			ds = append(ds, tk.Latency)
		}
	}
	return ds
}

func (res *chaosResult) faultCount(kind string) int {
	n := 0
	for _, f := range res.faults {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

func (res *chaosResult) failed() bool {
	for _, v := range res.verdicts {
		if v.failed > 0 {
			return true
		}
	}
	return false
}

// summary is the one line a run prints.
func (res *chaosResult) summary(path string) string {
	verdict := "PASS"
	if res.failed() {
		verdict = "FAIL"
	}
	var viol []string
	for _, v := range res.verdicts {
		viol = append(viol, fmt.Sprint(v.failed))
	}
	lo, med, p99, hi := quantiles(res.latencies("kill", "pause"))
	unexplained := 0
	for _, tk := range res.takeovers {
		if tk.Cause == nil {
			unexplained++
		}
	}
	unbounded := ""
	if !res.cfg.BoundTakeovers {
		unbounded = fmt.Sprintf(", %d late otherwise (reported, not bounded, in the short variant)", len(res.unbounded))
	}
	_, wmed, _, whi := quantiles(slices.Clone(res.slotWaits))
	afterRedis, redisFaults := "after the Redis kill", fmt.Sprintf("%d Redis kill", res.faultCount("redis-kill"))
	if res.cfg.Redis == redisCluster {
		afterRedis = "after a master kill"
		redisFaults = fmt.Sprintf("%d master kills (%s)", res.faultCount("master-kill"), strings.Join(res.failovers(), "; "))
	}
	return fmt.Sprintf("%s %s: seed %d, %d/%d instances completed in %s; violations %s (output/completion/wait/event/answer/details/takeover-time/limit/schedule); "+
		"%d takeovers (%d after a kill or pause: min %s median %s p99 %s max %s, bound %s, %d late while the CPU was saturated%s; %d %s; %d unexplained); "+
		"concurrency: %d keys, at most %d of one running at once (limit %d), %d instances waited for a slot (median %s, max %s); "+
		"faults: %d kills, %d pause, %s; report %s",
		res.cfg.kind(), verdict, res.seed, res.completed, res.instances, res.elapsed.Round(time.Second), strings.Join(viol, "/"),
		len(res.takeovers), len(res.latencies("kill", "pause")), ms(lo), ms(med), ms(p99), ms(hi), res.cfg.LockTTL+res.cfg.Cycle,
		len(res.starved), unbounded, len(res.latencies(res.cfg.redisFault())), afterRedis, unexplained,
		len(res.groups), res.mostAtOnceOfAll(), res.cfg.Limit, res.waited(), ms(wmed), ms(whi),
		res.faultCount("kill"), res.faultCount("pause"), redisFaults, path)
}

// failovers describes each master kill of a cluster run: which master
// died, and how long after its kill its replica was seen promoted and it
// was back as a replica, as "the store+queue master 127.0.0.1:port:
// promoted 2.1s rejoined 4.3s".
func (res *chaosResult) failovers() []string {
	var out []string
	for i, f := range res.faults {
		if f.Kind != "master-kill" {
			continue
		}
		what, addr, _ := strings.Cut(f.Node, " ")
		d := fmt.Sprintf("the %s master %s:", what, addr)
		for _, kind := range []string{"master-promoted", "master-rejoined"} {
			for _, g := range res.faults[i:] {
				if g.Kind == kind {
					d += fmt.Sprintf(" %s %s", strings.TrimPrefix(kind, "master-"), ms(g.At.Sub(f.At)))
					break
				}
			}
		}
		out = append(out, d)
	}
	return out
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// report is the details of a run, in Markdown.
func (res *chaosResult) report() string {
	var b strings.Builder
	cfg := res.cfg
	on, redisArg := "", ""
	if cfg.Redis == redisCluster {
		on, redisArg = " on a Redis Cluster", " -chaos.redis=cluster"
	}
	if cfg.Partitions > 1 {
		on += fmt.Sprintf(", the store in %d partitions", cfg.Partitions)
		redisArg += fmt.Sprint(" -chaos.partitions=", cfg.Partitions)
	}
	fmt.Fprintf(&b, "# Chaos run%s, seed %d\n\n", on, res.seed)
	fmt.Fprintf(&b, "Repeat the plan and the faults: `go test -run '^TestChaos$' -timeout 60m ./cmd/host -args -chaos.instances=%d -chaos.rate=%g -chaos.seed=%d%s`\n\n",
		cfg.Instances, cfg.Rate, res.seed, redisArg)
	fmt.Fprintf(&b, "- %d instances, %d completed; %d started at %.1f/s (planned start phase %s), all ended after %s\n",
		res.instances, res.completed, res.instances, cfg.Rate, res.startPhase.Round(time.Second), res.elapsed.Round(time.Second))
	redis := "Redis with appendfsync always"
	if cfg.Redis == redisCluster {
		redis = "a Redis Cluster of three masters with a replica each (cluster-node-timeout 1s), every Redis node with appendfsync always; " +
			"each write of the store waits for a replica (redis.wait_replicas 1)"
	}
	if cfg.Partitions > 1 {
		redis += fmt.Sprintf("; the store divided into %d partitions and a catalog (redis.partitions %d)", cfg.Partitions, cfg.Partitions)
	}
	fmt.Fprintf(&b, "- three nodes: lock TTL %s, heartbeat cycle %s (tick %s), recovery sweep every %s, %d workers and %d guests per plugin version each; %s\n",
		cfg.LockTTL, cfg.Cycle, cfg.Tick, cfg.Recovery, cfg.Workers, cfg.Pool, redis)
	if cfg.Redis == redisCluster {
		fmt.Fprintf(&b, "- master kills, from the SIGKILL to the replica's promotion as the cluster agrees, and to the dead master's return as a replica in sync: %s\n",
			strings.Join(res.failovers(), "; "))
	}
	fmt.Fprintf(&b, "- instance i in group i %% %d, the workflow's concurrency key, limit %d\n", cfg.Groups, cfg.Limit)
	fmt.Fprintf(&b, "- work step %d–%d ms, heartbeat every %d ms; a quarter of the events sent up to %s before their instance exists, the others up to %s after its start; each sent twice, to random nodes, with one id\n",
		cfg.WorkMS[0], cfg.WorkMS[1], cfg.BeatMS, cfg.Lead, cfg.EventLag)
	lo, med, p99, hi := quantiles(res.durations)
	fmt.Fprintf(&b, "- instance start to end: min %s, median %s, p99 %s, max %s\n\n", ms(lo), ms(med), ms(p99), ms(hi))

	b.WriteString("## Invariants\n\n| invariant | checked | violations |\n|---|---|---|\n")
	for _, v := range res.verdicts {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", v.name, v.checked, v.failed)
	}
	for _, v := range res.verdicts {
		if v.failed > 0 {
			fmt.Fprintf(&b, "\n### %s: examples\n\n```\n%s\n```\n", v.name, strings.Join(v.examples, "\n"))
		}
	}
	if len(res.harness) > 0 {
		fmt.Fprintf(&b, "\n### What the driver could not do (%d)\n\n```\n%s\n```\n", len(res.harness), strings.Join(res.harness[:min(len(res.harness), 20)], "\n"))
	}

	b.WriteString("\n## Takeovers\n\nFrom the fault to the `attempt_abandoned` event of the node that took the instance over.\n\n| cause | takeovers | min | median | p99 | max |\n|---|---|---|---|---|---|\n")
	for _, kinds := range [][]string{{"kill"}, {"pause"}, {"kill", "pause"}, {cfg.redisFault()}} {
		ds := res.latencies(kinds...)
		lo, med, p99, hi := quantiles(ds)
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", strings.Join(kinds, " or "), len(ds), ms(lo), ms(med), ms(p99), ms(hi))
	}
	details := 0
	var unexplained []string
	for _, tk := range res.takeovers {
		if tk.Details {
			details++
		}
		if tk.Cause == nil {
			unexplained = append(unexplained, fmt.Sprintf("%s %s attempt %d: ran on %s from %s, taken over by %s at %s",
				tk.Instance, tk.Path, tk.Attempt, tk.From, tk.Scheduled.Format("15:04:05.000"), tk.By, tk.At.Format("15:04:05.000")))
		}
	}
	fmt.Fprintf(&b, "\n%d takeovers, %d of them resuming from heartbeat details; %d explained by no fault (a lease that lapsed on a live node)\n",
		len(res.takeovers), details, len(unexplained))
	var timed []takeover
	for _, tk := range res.takeovers {
		if tk.Cause != nil {
			timed = append(timed, tk)
		}
	}
	slices.SortFunc(timed, func(a, b takeover) int { return int(a.Latency - b.Latency) })
	line := func(tk takeover) string {
		return fmt.Sprintf("%s %s attempt %d: ran on %s from %s; %s %s at %s; taken over by %s at %s, after %s; CPU contended %s of that time", tk.Instance, tk.Path, tk.Attempt,
			tk.From, tk.Scheduled.Format("15:04:05.000"), tk.Cause.Kind, tk.Cause.Node, tk.Cause.At.Format("15:04:05.000"),
			tk.By, tk.At.Format("15:04:05.000"), ms(tk.Latency), share(tk.Stall))
	}
	if len(res.starved) > 0 {
		fmt.Fprintf(&b, "\n%d takeovers came later than the bound while the CPU was saturated (some task waited for a CPU %.0f%% of the time or more, /proc/pressure/cpu); they are not counted against the host:\n\n```\n", len(res.starved), 100*starvedShare)
		for _, tk := range res.starved[:min(20, len(res.starved))] {
			b.WriteString(line(tk) + "\n")
		}
		b.WriteString("```\n")
	}
	if len(res.unbounded) > 0 {
		fmt.Fprintf(&b, "\n%d takeovers came later than the bound while the CPU was not saturated (or its pressure unknown); the short variant reports them without failing (`make chaos` bounds them):\n\n```\n", len(res.unbounded))
		for _, tk := range res.unbounded[:min(20, len(res.unbounded))] {
			b.WriteString(line(tk) + "\n")
		}
		b.WriteString("```\n")
	}
	if len(timed) > 0 {
		b.WriteString("\nThe fastest and the slowest:\n\n```\n")
		for _, tk := range timed[:min(3, len(timed))] {
			b.WriteString(line(tk) + "\n")
		}
		b.WriteString("…\n")
		for _, tk := range timed[max(3, len(timed)-10):] {
			b.WriteString(line(tk) + "\n")
		}
		b.WriteString("```\n")
	}
	if len(unexplained) > 0 {
		fmt.Fprintf(&b, "\n```\n%s\n```\n", strings.Join(unexplained[:min(len(unexplained), 20)], "\n"))
	}

	fmt.Fprintf(&b, "\n## Concurrency limit\n\nThe workflow lets %d instances of a group (its concurrency key) run at once. From the histories: the most of a group's spans, from `instance_started` to the instance's end, open at one moment, and the instances that waited for a slot (a `slot_waiting` entry).\n\n| group | instances | waited | most at once |\n|---|---|---|---|\n", cfg.Limit)
	for i, g := range res.groups {
		fmt.Fprintf(&b, "| %d | %d | %d | %d |\n", i, g.instances, g.waited, g.most)
	}
	wlo, wmed, wp99, whi := quantiles(slices.Clone(res.slotWaits))
	fmt.Fprintf(&b, "\n%d instances waited for a slot: min %s, median %s, p99 %s, max %s (`slot_acquired`'s `waited_ms`)\n", res.waited(), ms(wlo), ms(wmed), ms(wp99), ms(whi))

	b.WriteString("\n## Counts\n\n| what | count |\n|---|---|\n")
	keys := make([]string, 0, len(res.counts))
	for k := range res.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| %s | %d |\n", k, res.counts[k])
	}
	var att []int
	for a := range res.attempts {
		att = append(att, a)
	}
	slices.Sort(att)
	for _, a := range att {
		fmt.Fprintf(&b, "| work step completed by attempt %d | %d |\n", a, res.attempts[a])
	}
	var why []string
	for k := range res.retries {
		why = append(why, k)
	}
	slices.Sort(why)
	for _, k := range why {
		fmt.Fprintf(&b, "| client calls retried on another node (%s) | %d |\n", k, res.retries[k])
	}

	redisFaults := fmt.Sprintf("%d Redis kill", res.faultCount("redis-kill"))
	if cfg.Redis == redisCluster {
		redisFaults = fmt.Sprintf("%d master kills", res.faultCount("master-kill"))
	}
	fmt.Fprintf(&b, "\n## Faults (%d kills, %d pause, %s)\n\n| time | since start | what | node |\n|---|---|---|---|\n",
		res.faultCount("kill"), res.faultCount("pause"), redisFaults)
	for _, f := range res.faults {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", f.At.Format("15:04:05.000"), f.At.Sub(res.t0).Round(time.Millisecond), f.Kind, f.Node)
	}
	return b.String()
}

// causeOf attributes a takeover to the fault that made the attempt's node
// lose it, as the chaos report counts them.
func TestChaosCauseOf(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	single := []fault{
		{at(1), "kill", "node1"}, {at(2), "restart", "node1"},
		{at(10), "pause", "node2"}, {at(15), "resume", "node2"},
		{at(20), "redis-kill", ""}, {at(21), "redis-up", ""},
		{at(30), "kill", "node2"},
	}
	// On a Redis Cluster, a master's outage lasts from its kill to its
	// return as a replica: its replica's promotion does not end it.
	cluster := []fault{
		{at(1), "kill", "node1"}, {at(2), "restart", "node1"},
		{at(20), "master-kill", "store 127.0.0.1:7001"}, {at(22), "master-promoted", "store 127.0.0.1:7004"},
		{at(25), "master-rejoined", "store 127.0.0.1:7001"},
		{at(40), "master-kill", "queue 127.0.0.1:7002"}, {at(42), "master-promoted", "queue 127.0.0.1:7005"},
		{at(44), "master-rejoined", "queue 127.0.0.1:7002"},
	}
	tests := []struct {
		name                 string
		faults               []fault
		node                 string
		scheduled, takenOver float64
		want                 string // "" for none
	}{
		{"killed after scheduling", single, "node1", 0.5, 5, "kill node1"},
		{"killed before scheduling: another process", single, "node1", 3, 5, ""},
		{"another node's kill", single, "node3", 0.5, 5, ""},
		{"paused while running", single, "node2", 9, 14, "pause node2"},
		{"recorded after waking up from the pause", single, "node2", 16, 17, "pause node2"},
		{"long after the pause", single, "node2", 25, 26, ""},
		{"a kill after the scheduling wins over an earlier pause", single, "node2", 16, 31, "redis-kill "},
		{"Redis killed while running", single, "node3", 19, 24, "redis-kill "},
		{"recorded during the Redis outage", single, "node3", 20.5, 24, "redis-kill "},
		{"the node's kill after the outage", single, "node2", 26, 33, "kill node2"},
		{"the store's master killed while running", cluster, "node3", 19, 24, "master-kill store 127.0.0.1:7001"},
		{"recorded after the promotion, before the rejoin", cluster, "node3", 23, 27, "master-kill store 127.0.0.1:7001"},
		{"recorded within a TTL of the rejoin", cluster, "node2", 28.5, 30, "master-kill store 127.0.0.1:7001"},
		{"recorded long after the rejoin", cluster, "node2", 30, 31, ""},
		{"the queue's master killed while running", cluster, "node2", 39, 45, "master-kill queue 127.0.0.1:7002"},
		{"a node's kill before a master's", cluster, "node1", 0.5, 21, "kill node1"},
	}
	for _, tt := range tests {
		got := ""
		if f := causeOf(tt.faults, tt.node, at(tt.scheduled), at(tt.takenOver), 4*time.Second); f != nil {
			got = f.Kind + " " + f.Node
		}
		if got != tt.want {
			t.Errorf("%s: cause %q, want %q", tt.name, got, tt.want)
		}
	}
}

// indexRanges names the partitions a killed master held in the chaos
// report's fault lines.
func TestChaosIndexRanges(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ix   []int
		want string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{0, 1, 2, 3, 4}, "0-4"},
		{[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"},
		{[]int{10, 12, 14, 15}, "10,12,14-15"},
	} {
		if got := indexRanges(tt.ix); got != tt.want {
			t.Errorf("indexRanges(%v) = %q, want %q", tt.ix, got, tt.want)
		}
	}
}
