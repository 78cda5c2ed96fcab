//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// The batch jobs' chaos test (docs/reliability.md, "The batch chaos
// run"), issue 36's "a batch of 10,000 instances on real Redis with a node
// SIGKILLed mid-job completes with each instance operated on exactly
// once". Three `weft serve --store redis` nodes on the rig's Redis; N
// instances wait for an event; a batch signals them at a rate that makes
// it last about 20 s while the test SIGKILLs, every few seconds, the node
// that steps the batch, caught as it reads the batch's pending items (the
// first thing a chunk does), then another node, restarting each after a
// moment. Then N fresh instances are paused by one batch and resumed by
// another, with the same kills, and signalled. Afterwards it checks every
// batch (done, every item done, each instance once) and every instance's
// history: each operation recorded exactly once, with its batch's id and
// the token's name, nothing refused or ignored, and every instance
// completed with the batch's payload.
//
// `go test -run TestChaosBatch ./cmd/host` runs the short variant (600
// instances a phase); `make chaos-batch` runs 10,000
// (-chaosbatch.instances).
var (
	chaosBatchInstances = flag.Int("chaosbatch.instances", 0, "chaos-batch: instances per phase (0: the short variant's 600)")
	chaosBatchRate      = flag.Float64("chaosbatch.rate", 0, "chaos-batch: the batches' rate, instances per second (0: a twentieth of the instances, so that a batch lasts about 20s)")
	chaosBatchSeed      = flag.Uint64("chaosbatch.seed", 0, "chaos-batch: the seed of the kills (0: from the clock)")
)

// batchChaosConfig is one batch chaos run's shape.
type batchChaosConfig struct {
	Instances int     // per phase
	Rate      float64 // of the batches the kills hit, instances per second
	// FirstKill is when a batch's first kill comes, as a share of the
	// batch's expected length (Instances / Rate).
	FirstKill float64
	KillEvery [2]time.Duration // between two kills of one batch
	DownFor   [2]time.Duration // a killed node stays down this long
	// Hunt bounds a kill's look for the stepper; a kill that does not
	// see it within Hunt kills a random node instead.
	Hunt time.Duration
	// KillDelay: the stepper is killed up to this long after it was seen
	// reading its chunk's items, so that the kill lands anywhere in the
	// chunk: reading the instances, writing the chunk, waking them.
	KillDelay                time.Duration
	LockTTL, Cycle, Recovery time.Duration
	Starters                 int // instances started at once
}

func defaultBatchChaosConfig() batchChaosConfig {
	return batchChaosConfig{
		Instances: 600, FirstKill: 0.2,
		KillEvery: [2]time.Duration{3 * time.Second, 5 * time.Second},
		DownFor:   [2]time.Duration{time.Second, 2500 * time.Millisecond},
		Hunt:      5 * time.Second, KillDelay: 20 * time.Millisecond,
		// The chaos run's times (docs/reliability.md): an instance a
		// killed node was applying a message to is taken over in a lock
		// TTL and a sweep.
		LockTTL: 4 * time.Second, Cycle: time.Second, Recovery: 500 * time.Millisecond,
		Starters: 16,
	}
}

// The workflow under test: one wait for the event go, keyed by the
// instance's own key; its output names the key and the event's payload.
// The token is the host's only one: every request of the harness
// carries it, so every entry of an operator's action names it as its
// actor.
const (
	chaosBatchWorkflow = `
name: chaos-batch
steps:
  - id: wait
    wait: { event: go, key: "${ input.key }", timeout: 2h }
    output: signal
output: { key: "${ input.key }", signal: "${ vars.signal }" }
`
	chaosBatchTokenName = "chaos-batcher"
	chaosBatchToken     = "chaos-batch-token-0123456789"
	// The instance ids of the two phases: the signal's and the
	// pause-and-resume's.
	signalPrefix = "cbs-"
	pausePrefix  = "cbp-"
)

// batchKill is one SIGKILL of a node while a batch applied.
type batchKill struct {
	At    time.Time
	Batch string // the batch's label (signal, pause, resume)
	Node  string
	// Kind is stepper (the node seen reading the batch's pending items),
	// other (a random node but the last one killed) or unseen (a random
	// node: the stepper was not seen within the hunt).
	Kind string
	// Seen is the time from the stepper's read of its chunk's items (as
	// Redis ran it) to the SIGKILL; Chunk says whether the chunk was
	// written before the node died (stepperWatch.written).
	Seen  time.Duration
	Chunk string
	Done  int // the batch's done items last seen before the kill
}

// batchRun is one batch of the run, as it ended.
type batchRun struct {
	label  string
	req    apiv1.BatchRequest
	ids    []string // the instances it must select
	kills  bool     // whether nodes are killed while it applies
	batch  *apiv1.Batch
	items  []apiv1.BatchItem
	killed []batchKill
	err    error // the harness could not follow it
}

// batchChaosResult is what a run did and found.
type batchChaosResult struct {
	cfg      batchChaosConfig
	seed     uint64
	t0       time.Time
	elapsed  time.Duration
	starts   [2]time.Duration // starting each phase's instances
	batches  []*batchRun
	verdicts []*verdict
	harness  []string
	counts   map[string]int // history entries by type
	done     int            // instances completed
	faults   []fault
	retries  map[string]int
	// logs counts the nodes' warnings by message (and, for a lock's, its
	// key): a turn of the batches sweep that outlived its lock, a chunk
	// refused for a stale revision (another stepper wrote first).
	logs map[string]int
}

func TestChaosBatch(t *testing.T) {
	bin := clusterBinary(t)
	cfg := defaultBatchChaosConfig()
	if *chaosBatchInstances > 0 {
		cfg.Instances = *chaosBatchInstances
	}
	cfg.Rate = float64(cfg.Instances) / 20
	if *chaosBatchRate > 0 {
		cfg.Rate = *chaosBatchRate
	}
	seed := *chaosBatchSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	long := cfg.Instances > defaultBatchChaosConfig().Instances
	dir := runDir(t, "chaosbatch", seed)
	t.Logf("chaos-batch: seed %d (-chaosbatch.seed=%d repeats the kills' choices), %d instances a phase, batches at %g/s; logs and report in %s",
		seed, seed, cfg.Instances, cfg.Rate, dir)

	r := startRig(t, bin, 3, dir,
		"--set", "engine.lock_ttl="+cfg.LockTTL.String(),
		"--set", "engine.recovery_interval="+cfg.Recovery.String(),
		"--set", "heartbeat.cycle="+cfg.Cycle.String(),
		"--set", "auth.tokens="+chaosBatchTokenName+":admin:"+chaosBatchToken)
	// Every request of the harness carries the token. The nodes' clients
	// share the rig's HTTP client, which no request has used yet.
	r.hc.Transport = bearerTransport{base: r.hc.Transport, auth: "Bearer " + chaosBatchToken}
	deployBatchWorkflow(t, r)

	res := &batchChaosResult{cfg: cfg, seed: seed, counts: map[string]int{}}
	stats := &callStats{}
	rng := rand.New(rand.NewPCG(seed, 0xba7c))
	res.t0 = time.Now()

	// Phase 1: a signal to N waiting instances, nodes killed under it.
	signalIDs := instanceIDs(signalPrefix, cfg.Instances)
	res.starts[0] = startBatchInstances(t, r, cfg, stats, signalIDs, res)
	res.awaitStatus(t, r, stats, "the first phase's instances suspended", apiv1.StatusSuspended, cfg.Instances, 5*time.Minute)
	signal := &batchRun{label: "signal", ids: signalIDs, kills: true, req: apiv1.BatchRequest{
		Op: apiv1.BatchSignal, Query: `workflow = "chaos-batch"`, Rate: &cfg.Rate, Reason: "the batch chaos run",
		Args: &apiv1.BatchArgs{Event: "go", Payload: json.RawMessage(`{"word":"signalled"}`)},
	}}
	res.runBatch(t, r, stats, rng, signal)
	res.awaitStatus(t, r, stats, "the first phase's instances completed", apiv1.StatusCompleted, cfg.Instances, 5*time.Minute)

	// Phase 2: N fresh waiting instances paused, then resumed, nodes
	// killed under each batch; then signalled, without kills.
	pauseIDs := instanceIDs(pausePrefix, cfg.Instances)
	res.starts[1] = startBatchInstances(t, r, cfg, stats, pauseIDs, res)
	res.awaitStatus(t, r, stats, "the second phase's instances suspended", apiv1.StatusSuspended, cfg.Instances, 5*time.Minute)
	query := `workflow = "chaos-batch" AND id STARTS_WITH "` + pausePrefix + `"`
	pause := &batchRun{label: "pause", ids: pauseIDs, kills: true, req: apiv1.BatchRequest{Op: apiv1.BatchPause, Query: query, Rate: &cfg.Rate, Reason: "the batch chaos run pauses"}}
	res.runBatch(t, r, stats, rng, pause)
	res.awaitStatus(t, r, stats, "the second phase's instances paused", apiv1.StatusPaused, cfg.Instances, 5*time.Minute)
	resume := &batchRun{label: "resume", ids: pauseIDs, kills: true, req: apiv1.BatchRequest{Op: apiv1.BatchResume, Query: query, Rate: &cfg.Rate, Reason: "the batch chaos run resumes"}}
	res.runBatch(t, r, stats, rng, resume)
	res.awaitStatus(t, r, stats, "the second phase's instances resumed (suspended)", apiv1.StatusSuspended, cfg.Instances, 5*time.Minute)
	unlimited := 0.0
	signal2 := &batchRun{label: "signal (no kills, unlimited rate)", ids: pauseIDs, req: apiv1.BatchRequest{
		Op: apiv1.BatchSignal, Query: query, Rate: &unlimited, Reason: "the batch chaos run ends the second phase",
		Args: &apiv1.BatchArgs{Event: "go", Payload: json.RawMessage(`{"word":"resumed"}`)},
	}}
	res.runBatch(t, r, stats, rng, signal2)
	res.awaitStatus(t, r, stats, "every instance completed", apiv1.StatusCompleted, 2*cfg.Instances, 5*time.Minute)
	res.elapsed = time.Since(res.t0)

	res.check(t, r, stats, signal, pause, resume, signal2)
	res.retries = stats.snapshot()
	res.logs = warnings(r)
	path := filepath.Join(dir, "report.md")
	if err := os.WriteFile(path, []byte(res.report()), 0o644); err != nil {
		t.Errorf("writing the report: %v", err)
	}
	summary := res.summary(path)
	t.Log(summary)
	fmt.Println(summary) // the one line `make chaos-batch` prints
	for _, v := range res.verdicts {
		if v.failed > 0 {
			t.Errorf("%s: %d of %d violate it (seed %d), e.g.\n  %s", v.name, v.failed, v.checked, seed, strings.Join(v.examples, "\n  "))
		}
	}
	for _, h := range res.harness {
		t.Errorf("harness: %s", h)
	}
	if t.Failed() {
		r.postMortem(t)
	} else if !long {
		for _, n := range r.nodes {
			_ = os.Remove(n.logPath)
		}
	}
}

// bearerTransport sends every request with an Authorization header.
type bearerTransport struct {
	base http.RoundTripper
	auth string
}

// RoundTrip sends a copy of req with the header.
func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper leaves its request as it is
	req.Header.Set("Authorization", b.auth)
	return b.base.RoundTrip(req)
}

// deployBatchWorkflow saves the workflow through the rig's first node.
func deployBatchWorkflow(t *testing.T, r *rig) {
	t.Helper()
	c, ok := r.nodes[0].client()
	if !ok {
		t.Fatal("node1 is not up")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, _, err := c.PutWorkflow(ctx, "chaos-batch", []byte(chaosBatchWorkflow)); err != nil {
		t.Fatalf("saving the workflow: %v", err)
	}
}

func instanceIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return ids
}

// startBatchInstances starts the instances, cfg.Starters at once, each
// with its id as its key, and returns how long it took. A start is
// idempotent (its id), so a retry on another node is safe.
func startBatchInstances(t *testing.T, r *rig, cfg batchChaosConfig, stats *callStats, ids []string, res *batchChaosResult) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	t0 := time.Now()
	var mu sync.Mutex
	var failed []string
	work := make(chan string)
	var wg sync.WaitGroup
	for w := range cfg.Starters {
		rng := rand.New(rand.NewPCG(uint64(w), 17))
		wg.Go(func() {
			for id := range work {
				input, _ := json.Marshal(map[string]string{"key": id})
				_, err := r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) error {
					_, _, err := c.Start(ctx, "chaos-batch", apiv1.StartRequest{ID: id, Input: input}, 0)
					return err
				})
				if err != nil {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("starting %s: %v", id, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	if len(failed) > 0 {
		res.harness = append(res.harness, fmt.Sprintf("%d starts failed, e.g. %s", len(failed), failed[0]))
	}
	return time.Since(t0)
}

// awaitStatus waits until the workflow has want instances in status; it
// records in the harness's list what it waited for in vain.
func (res *batchChaosResult) awaitStatus(t *testing.T, r *rig, stats *callStats, what string, status apiv1.Status, want int, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	rng := rand.New(rand.NewPCG(uint64(want), 19))
	counts := &apiv1.Counts{}
	for {
		_, err := r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) error {
			got, err := c.Counts(ctx, "chaos-batch")
			if err == nil {
				counts = got
			}
			return err
		})
		if err == nil && counts.ByStatus[status] == want {
			return
		}
		select {
		case <-ctx.Done():
			res.harness = append(res.harness, fmt.Sprintf("waiting for %s: %d of %d %s after %s (counts %+v, %v)", what, counts.ByStatus[status], want, status, limit, counts, err))
			return
		case <-time.After(250 * time.Millisecond): // polling with a deadline
		}
	}
}

// runBatch starts the batch, kills nodes while it applies (b.kills),
// waits until it is finished, brings every node back, and reads its
// items.
func (res *batchChaosResult) runBatch(t *testing.T, r *rig, stats *callStats, rng *rand.Rand, b *batchRun) {
	t.Helper()
	res.batches = append(res.batches, b)
	// One request, to a node that serves, while nothing is killed: a
	// batch's start is not idempotent, and a retry after a lost answer
	// would start a second batch.
	up := r.up()
	if len(up) == 0 {
		t.Fatal("no node serves")
	}
	c, _ := up[0].client()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	started, err := c.StartBatch(ctx, b.req)
	cancel()
	if err != nil {
		t.Fatalf("starting the %s batch: %v", b.label, err)
	}
	b.batch = started
	expected := time.Duration(float64(len(b.ids)) / res.cfg.Rate * float64(time.Second))
	limit := 3*expected + 5*time.Minute

	// Its progress, until it is finished.
	var mu sync.Mutex
	last := *started
	finished := make(chan struct{})
	followed := make(chan error, 1)
	prng := rand.New(rand.NewPCG(rng.Uint64(), 23))
	go func() {
		defer close(finished)
		ctx, cancel := context.WithTimeout(t.Context(), limit)
		defer cancel()
		for {
			var now *apiv1.Batch
			_, err := r.call(ctx, prng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
				now, err = c.Batch(ctx, started.ID)
				return err
			})
			if err != nil {
				followed <- fmt.Errorf("following batch %s: %w", started.ID, err)
				return
			}
			mu.Lock()
			last = *now
			mu.Unlock()
			if now.Phase.Finished() {
				followed <- nil
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond): // polling with a deadline
			}
		}
	}()
	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		return last.Counts[apiv1.ItemDone]
	}
	if b.kills {
		b.killed = res.killDuring(t, r, rng, b, started, expected, finished, done)
	}
	<-finished
	b.err = <-followed
	healRig(t, r, &res.faults)
	mu.Lock()
	b.batch = &last
	mu.Unlock()
	if b.err != nil {
		return
	}
	b.items, b.err = readBatchItems(t, r, stats, started.ID)
}

// killDuring kills nodes while the batch applies, on the test's goroutine
// (the rig fails the test from it), until finished is closed: from
// cfg.FirstKill of the batch's expected length, every cfg.KillEvery,
// alternately the node seen stepping the batch and a random node but the
// last one killed. Each killed node is restarted cfg.DownFor later.
func (res *batchChaosResult) killDuring(t *testing.T, r *rig, rng *rand.Rand, b *batchRun, started *apiv1.Batch, expected time.Duration, finished <-chan struct{}, done func() int) []batchKill {
	t.Helper()
	cfg := res.cfg
	between := func(d [2]time.Duration) time.Duration { return d[0] + time.Duration(rng.Int64N(int64(d[1]-d[0])+1)) }
	type restart struct {
		at   time.Time
		node *rigNode
	}
	var (
		kills      []batchKill
		later      []restart
		lastVictim string
	)
	next := time.Now().Add(time.Duration(cfg.FirstKill * float64(expected)))
	restartDue := func() {
		kept := later[:0]
		for _, p := range later {
			if p.at.After(time.Now()) {
				kept = append(kept, p)
				continue
			}
			if err := p.node.start(); err != nil {
				t.Fatal(err)
			}
			res.faults = append(res.faults, fault{At: time.Now(), Kind: "restart", Node: p.node.id})
		}
		later = kept
	}
	for {
		wake := next
		for _, p := range later {
			if p.at.Before(wake) {
				wake = p.at
			}
		}
		timer := time.NewTimer(time.Until(wake))
		select {
		case <-finished:
			timer.Stop()
			restartDue()
			return kills // healRig restarts the others
		case <-timer.C:
		}
		restartDue()
		if time.Now().Before(next) {
			continue
		}
		if len(r.up()) < 2 {
			next = time.Now().Add(200 * time.Millisecond) // never the last node up
			continue
		}
		k := batchKill{Batch: b.label}
		var victim *rigNode
		var watch *stepperWatch
		drop := func() { // a watch left open would stream MONITOR on
			if watch != nil {
				watch.close()
				watch = nil
			}
		}
		stepper := len(kills)%2 == 0
		if stepper {
			w, err := huntStepper(t.Context(), r, started.ID, cfg.Hunt, finished)
			if err != nil {
				res.harness = append(res.harness, fmt.Sprintf("%s batch: looking for its stepper: %v", b.label, err))
			}
			if w != nil {
				watch = w
				// Pacing: the kill lands anywhere in the chunk, up to
				// KillDelay after its read of the items (at once when
				// the harness saw the read later than that).
				time.Sleep(time.Until(w.readAt.Add(time.Duration(rng.Int64N(int64(cfg.KillDelay) + 1)))))
				victim, k.Kind = w.node, "stepper"
			}
		} else {
			var others []*rigNode
			for _, n := range r.up() {
				if n.id != lastVictim {
					others = append(others, n)
				}
			}
			if len(others) > 0 {
				victim, k.Kind = others[rng.IntN(len(others))], "other"
			}
		}
		select {
		case <-finished:
			drop()
			continue // done meanwhile: nothing left to kill it under
		default:
		}
		if up := r.up(); victim == nil || len(up) < 2 || !slices.Contains(up, victim) {
			drop()
			if len(up) < 2 {
				next = time.Now().Add(200 * time.Millisecond)
				continue
			}
			victim, k.Kind = up[rng.IntN(len(up))], "other"
			if stepper {
				k.Kind = "unseen"
			}
		}
		k.Done, k.At, k.Node = done(), time.Now(), victim.id
		if err := victim.kill(); err != nil {
			t.Fatal(err)
		}
		if watch != nil {
			k.Seen, k.Chunk = k.At.Sub(watch.readAt), watch.written(k.At)
			drop()
		}
		res.faults = append(res.faults, fault{At: k.At, Kind: "kill", Node: victim.id})
		kills = append(kills, k)
		lastVictim = victim.id
		later = append(later, restart{at: time.Now().Add(between(cfg.DownFor)), node: victim})
		next = time.Now().Add(between(cfg.KillEvery))
	}
}

// stepperWatch is a look at the node that steps a batch, through
// Redis's MONITOR stream: huntStepper finds the node as it reads the
// batch's pending items, the start of a chunk, which only the holder of
// the batches sweep's lock does; written then says whether the chunk
// reached the store before the node was killed.
type stepperWatch struct {
	conn   net.Conn
	rd     *bufio.Reader
	batch  string // the batch's id, quoted as MONITOR quotes it
	node   *rigNode
	ports  map[int]bool // the node's sockets' local ports
	readAt time.Time    // when Redis ran the read of the pending items
}

// huntStepper watches Redis's MONITOR stream for the read of the batch's
// pending items (the store's batch items script, its last argument the
// outcome "pending") and maps the connection that sent it to the node
// whose process holds its socket. It returns nil when none was seen
// within limit, when finished was closed meanwhile, or when the node is
// the only one up; the caller closes the watch it returns.
func huntStepper(ctx context.Context, r *rig, batchID string, limit time.Duration, finished <-chan struct{}) (*stepperWatch, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", r.srv.Addr())
	if err != nil {
		return nil, fmt.Errorf("connecting to Redis: %w", err)
	}
	w := &stepperWatch{conn: conn, rd: bufio.NewReaderSize(conn, 1<<20), batch: `"` + batchID + `"`}
	if err := conn.SetDeadline(time.Now().Add(limit)); err != nil {
		conn.Close()
		return nil, err
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, fmt.Errorf("MONITOR: %w", err)
	}
	// The nodes' connections, mapped before the stream is read: a lookup
	// as a line is read would let the chunk go on meanwhile.
	owners := portOwners(r)
	for {
		select {
		case <-finished:
			conn.Close()
			return nil, nil
		default:
		}
		line, err := w.line()
		if err != nil {
			conn.Close()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return nil, nil // not seen in time
			}
			return nil, fmt.Errorf("reading MONITOR: %w", err)
		}
		if !strings.HasSuffix(line, `"pending"`) || !strings.Contains(line, w.batch) {
			continue
		}
		at, port, ok := monitorLine(line)
		if !ok {
			continue
		}
		n := owners[port]
		if n == nil {
			owners = portOwners(r) // a connection opened since
			if n = owners[port]; n == nil {
				continue
			}
		}
		if up := r.up(); len(up) < 2 || !slices.Contains(up, n) {
			continue
		}
		w.node, w.readAt, w.ports = n, at, map[int]bool{}
		for p, o := range owners {
			if o == n {
				w.ports[p] = true
			}
		}
		return w, nil
	}
}

// applyOutcomes is in the arguments of the store's apply script
// (ApplyBatchItems), which lists weft.BatchOutcomes, and of no other
// command that names a batch.
const applyOutcomes = `"pending" "done" "skipped" "failed" "can" "cannot"`

func (w *stepperWatch) line() (string, error) {
	line, err := w.rd.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func (w *stepperWatch) close() { _ = w.conn.Close() }

// written reads the stream on, up to a moment past killedAt, and says
// whether the node wrote its chunk (the store's apply script, which names
// the batch and lists every outcome) before it died: "written",
// "not written" (the next stepper applies the items again), or "unknown"
// when the stream did not reach that moment.
func (w *stepperWatch) written(killedAt time.Time) string {
	if err := w.conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "unknown"
	}
	for {
		line, err := w.line()
		if err != nil {
			return "unknown"
		}
		at, port, ok := monitorLine(line)
		if !ok {
			continue
		}
		if at.After(killedAt.Add(250 * time.Millisecond)) {
			// Redis runs a client's commands in order, and the node sent
			// nothing after it died: had it sent its write, it would have
			// run by now.
			return "not written"
		}
		if w.ports[port] && strings.Contains(line, w.batch) && strings.Contains(line, applyOutcomes) {
			return "written"
		}
	}
}

// monitorLine reads when Redis ran a MONITOR line's command and the
// client's port, from `+1700000000.123456 [0 127.0.0.1:54321] "evalsha" …`;
// false for a command a script ran ([0 lua]) or a line of another form.
func monitorLine(line string) (time.Time, int, bool) {
	stamp, rest, ok := strings.Cut(strings.TrimPrefix(line, "+"), " [")
	if !ok {
		return time.Time{}, 0, false
	}
	sec, frac, _ := strings.Cut(stamp, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	us, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, 0, false
	}
	inside, _, ok := strings.Cut(rest, "] ")
	if !ok {
		return time.Time{}, 0, false
	}
	fields := strings.Fields(inside)
	if len(fields) != 2 {
		return time.Time{}, 0, false
	}
	_, p, err := net.SplitHostPort(fields[1])
	if err != nil {
		return time.Time{}, 0, false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(s, us*1000), port, true
}

// tcpSockets returns the local port of every TCP socket of the machine,
// by the socket's descriptor link ("socket:[inode]"), from /proc/net.
func tcpSockets() map[string]int {
	out := map[string]int{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			_, hex, ok := strings.Cut(fs[1], ":")
			if v, err := strconv.ParseUint(hex, 16, 16); ok && err == nil {
				out["socket:["+fs[9]+"]"] = int(v)
			}
		}
	}
	return out
}

// socketLinks returns the descriptor links of the process pid.
func socketLinks(pid int) []string {
	if pid == 0 {
		return nil
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil
	}
	var links []string
	for _, fd := range fds {
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(link, "socket:[") {
			links = append(links, link)
		}
	}
	return links
}

// portOwners maps the local port of every TCP socket of the rig's
// nodes' processes to its node.
func portOwners(r *rig) map[int]*rigNode {
	socks := tcpSockets()
	owners := map[int]*rigNode{}
	for _, n := range r.nodes {
		for _, l := range socketLinks(n.pid()) {
			if p, ok := socks[l]; ok {
				owners[p] = n
			}
		}
	}
	return owners
}

// pid returns the node's process id, 0 when it has none.
func (n *rigNode) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// readBatchItems reads every item of a batch, a page at a time.
func readBatchItems(t *testing.T, r *rig, stats *callStats, id string) ([]apiv1.BatchItem, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	var items []apiv1.BatchItem
	_, err := r.call(ctx, rand.New(rand.NewPCG(3, 29)), stats, 30*time.Second, func(ctx context.Context, c *client.Client) error {
		items = items[:0]
		for after := uint64(0); ; {
			page, err := c.BatchItems(ctx, id, client.BatchItemFilter{After: after, Limit: 1000})
			if err != nil {
				return err
			}
			items = append(items, page.Items...)
			if page.NextCursor == "" {
				return nil
			}
			if after, err = strconv.ParseUint(page.NextCursor, 10, 64); err != nil {
				return fmt.Errorf("batch %s's items: next cursor %q: %w", id, page.NextCursor, err)
			}
		}
	})
	return items, err
}

// check tallies the invariants: every batch done with each of its
// instances once, done; every instance completed with its signal's
// payload, each operation recorded once with its batch and the token's
// name, nothing refused or ignored.
func (res *batchChaosResult) check(t *testing.T, r *rig, stats *callStats, signal, pause, resume, signal2 *batchRun) {
	t.Helper()
	n := res.cfg.Instances
	vBatch := &verdict{name: fmt.Sprintf("every batch is done: its %d instances selected, each once, and each done (none pending, skipped or failed)", n)}
	vDone := &verdict{name: "every instance completed, with its signal's payload"}
	vSignal := &verdict{name: "every instance's wait was resumed once, by its signal batch, named with the token"}
	vPause := &verdict{name: "every instance of the second phase was paused once and resumed once, each by its batch, named with the token, in that order"}
	vNone := &verdict{name: "no instance refused or ignored an input (an operation applied twice would be)"}
	res.verdicts = []*verdict{vBatch, vDone, vSignal, vPause, vNone}

	for _, b := range res.batches {
		if b.err != nil {
			vBatch.check(false, "%s batch: %v", b.label, b.err)
			continue
		}
		c := b.batch.Counts
		vBatch.check(b.batch.Phase == apiv1.PhaseDone && b.batch.Matched == len(b.ids) && c[apiv1.ItemDone] == len(b.ids) &&
			c[apiv1.ItemPending]+c[apiv1.ItemSkipped]+c[apiv1.ItemFailed] == 0,
			"%s batch %s: phase %s, matched %d, counts %v (error %q); want done, %d matched, all done", b.label, b.batch.ID, b.batch.Phase, b.batch.Matched, c, b.batch.Error, len(b.ids))
		seen := map[string]int{}
		var prev uint64
		for _, it := range b.items {
			seen[it.InstanceID]++
			vBatch.check(it.Outcome == apiv1.ItemDone, "%s batch %s: item %d (%s) is %s: %s", b.label, b.batch.ID, it.Seq, it.InstanceID, it.Outcome, it.Reason)
			vBatch.check(it.Seq > prev, "%s batch %s: item %s's seq %d after %d", b.label, b.batch.ID, it.InstanceID, it.Seq, prev)
			prev = it.Seq
		}
		vBatch.check(len(b.items) == len(b.ids), "%s batch %s: %d items listed, want %d", b.label, b.batch.ID, len(b.items), len(b.ids))
		for _, id := range b.ids {
			vBatch.check(seen[id] == 1, "%s batch %s: instance %s listed %d times", b.label, b.batch.ID, id, seen[id])
		}
	}

	// Every instance and its history.
	type read struct {
		id   string
		inst *apiv1.Instance
		hist []apiv1.HistoryEntry
		err  error
	}
	var reads []read
	for _, id := range signal.ids {
		reads = append(reads, read{id: id})
	}
	for _, id := range pause.ids {
		reads = append(reads, read{id: id})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	for w := range 8 {
		rng := rand.New(rand.NewPCG(uint64(w), 31))
		wg.Go(func() {
			for i := range work {
				rd := &reads[i]
				_, rd.err = r.call(ctx, rng, stats, 30*time.Second, func(ctx context.Context, c *client.Client) (err error) {
					if rd.inst, err = c.Instance(ctx, rd.id); err != nil {
						return err
					}
					rd.hist = nil
					for after := ""; ; {
						page, err := c.History(ctx, rd.id, client.ListOptions{Limit: 1000, Cursor: after})
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
			}
		})
	}
	for i := range reads {
		work <- i
	}
	close(work)
	wg.Wait()

	type opData struct {
		Batch string `json:"batch"`
	}
	for _, rd := range reads {
		if rd.err != nil {
			vDone.check(false, "%s: cannot be read: %v", rd.id, rd.err)
			continue
		}
		second := strings.HasPrefix(rd.id, pausePrefix)
		sig := signal
		if second {
			sig = signal2
		}
		excerpt := func() string { return entriesExcerpt(rd.hist) }
		for _, e := range rd.hist {
			res.counts[string(e.Type)]++
		}

		// Completed, with the payload of its signal.
		var out struct {
			Key    string          `json:"key"`
			Signal json.RawMessage `json:"signal"`
		}
		ok := rd.inst.Status == apiv1.StatusCompleted && json.Unmarshal(rd.inst.Output, &out) == nil && out.Key == rd.id && equalJSON(out.Signal, sig.req.Args.Payload)
		if rd.inst.Status == apiv1.StatusCompleted {
			res.done++
		}
		vDone.check(ok, "%s: %s, output %s; want completed with key %s and signal %s\n%s", rd.id, rd.inst.Status, rd.inst.Output, rd.id, sig.req.Args.Payload, excerpt())

		// Each operation once, by its batch, and in order.
		at := map[apiv1.HistoryType][]int{}
		for i, e := range rd.hist {
			at[e.Type] = append(at[e.Type], i)
		}
		byBatch := func(typ apiv1.HistoryType, b *batchRun) bool {
			if len(at[typ]) != 1 {
				return false
			}
			e := rd.hist[at[typ][0]]
			var d opData
			return json.Unmarshal(e.Data, &d) == nil && d.Batch == b.batch.ID && e.Actor == chaosBatchTokenName
		}
		vSignal.check(byBatch("bookmark_resumed", sig), "%s: %d bookmark_resumed; want one by batch %s, actor %s\n%s",
			rd.id, len(at["bookmark_resumed"]), sig.batch.ID, chaosBatchTokenName, excerpt())
		if second {
			ok := byBatch("instance_paused", pause) && byBatch("instance_resumed", resume) && byBatch("bookmark_resumed", sig) &&
				at["instance_paused"][0] < at["instance_resumed"][0] && at["instance_resumed"][0] < at["bookmark_resumed"][0]
			vPause.check(ok, "%s: %d instance_paused, %d instance_resumed; want one each, by batches %s and %s, actor %s, before the signal\n%s",
				rd.id, len(at["instance_paused"]), len(at["instance_resumed"]), pause.batch.ID, resume.batch.ID, chaosBatchTokenName, excerpt())
		}
		vNone.check(len(at["event_refused"])+len(at["event_ignored"]) == 0, "%s: %d event_refused, %d event_ignored\n%s",
			rd.id, len(at["event_refused"]), len(at["event_ignored"]), excerpt())
	}
}

// The node warnings the summary counts (batchChaosResult.logs).
const (
	lapsedTurn = "lock lease lost before release (weft-batches-sweep)"
	staleChunk = "stepping a batch: stale revision"
)

// warnings counts the warnings and errors of the nodes' logs by message;
// a lock's by its key too, a batch's stepping by whether its error is a
// stale revision.
func warnings(r *rig) map[string]int {
	out := map[string]int{}
	for _, n := range r.nodes {
		f, err := os.Open(n.logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var m struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Key   string `json:"key"`
				Err   string `json:"err"`
			}
			if json.Unmarshal(sc.Bytes(), &m) != nil || m.Level != "WARN" && m.Level != "ERROR" {
				continue
			}
			k := m.Msg
			switch {
			case m.Key != "":
				k += " (" + m.Key + ")"
			case m.Msg == "stepping a batch" && strings.Contains(m.Err, "stale revision"):
				k = staleChunk
			}
			out[k]++
		}
		f.Close()
	}
	return out
}

// equalJSON reports whether two JSON documents are equal as values.
func equalJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// entriesExcerpt is a history, one entry a line, for a report.
func entriesExcerpt(hist []apiv1.HistoryEntry) string {
	var b strings.Builder
	for _, e := range hist {
		fmt.Fprintf(&b, "    %3d %s %-18s %-9s %-6s %-14s %s\n", e.Seq, e.Time.Format("15:04:05.000"), e.Type, e.StepPath, e.Node, e.Actor, e.Data)
	}
	return b.String()
}

func (res *batchChaosResult) failed() bool {
	for _, v := range res.verdicts {
		if v.failed > 0 {
			return true
		}
	}
	return len(res.harness) > 0
}

// applied is how long the batch took to apply, from its start to its
// end, and its rate over that time.
func (b *batchRun) applied() (time.Duration, float64) {
	if b.batch == nil || b.batch.FinishedAt.IsZero() {
		return 0, 0
	}
	d := b.batch.FinishedAt.Sub(b.batch.StartedAt)
	return d, float64(b.batch.Counts[apiv1.ItemDone]) / d.Seconds()
}

func (b *batchRun) killsOf(kind string) int {
	k := 0
	for _, x := range b.killed {
		if x.Kind == kind {
			k++
		}
	}
	return k
}

// summary is the one line a run prints.
func (res *batchChaosResult) summary(path string) string {
	verdict := "PASS"
	if res.failed() {
		verdict = "FAIL"
	}
	var viol, batches []string
	for _, v := range res.verdicts {
		viol = append(viol, fmt.Sprint(v.failed))
	}
	kills, stepper, chunks := 0, 0, map[string]int{}
	for _, b := range res.batches {
		d, rate := b.applied()
		done := 0
		if b.batch != nil {
			done = b.batch.Counts[apiv1.ItemDone]
		}
		batches = append(batches, fmt.Sprintf("%s %d/%d done in %s (%.1f/s, %d kills, %d of the stepper)",
			b.label, done, len(b.ids), d.Round(100*time.Millisecond), rate, len(b.killed), b.killsOf("stepper")))
		kills += len(b.killed)
		stepper += b.killsOf("stepper")
		for _, k := range b.killed {
			if k.Kind == "stepper" {
				chunks[k.Chunk]++
			}
		}
	}
	return fmt.Sprintf("chaos-batch %s: seed %d, %d instances a phase; %s; %d/%d instances completed in %s; %d kills (%d of the stepper as it applied a chunk: %d before its write, %d after, %d unknown); the sweep's lock lapsed in %d turns, %d chunks refused as stale; violations %s (batches/completed/signal/pause-resume/refused); harness problems %d; report %s",
		verdict, res.seed, res.cfg.Instances, strings.Join(batches, "; "), res.done, 2*res.cfg.Instances, res.elapsed.Round(time.Second),
		kills, stepper, chunks["not written"], chunks["written"], chunks["unknown"], res.logs[lapsedTurn], res.logs[staleChunk], strings.Join(viol, "/"), len(res.harness), path)
}

// report is the details of a run, in Markdown.
func (res *batchChaosResult) report() string {
	var b strings.Builder
	cfg := res.cfg
	fmt.Fprintf(&b, "# Batch chaos run, seed %d\n\n", res.seed)
	fmt.Fprintf(&b, "Repeat the kills' choices: `go test -run '^TestChaosBatch$' -timeout 60m ./cmd/host -args -chaosbatch.instances=%d -chaosbatch.rate=%g -chaosbatch.seed=%d`\n\n",
		cfg.Instances, cfg.Rate, res.seed)
	fmt.Fprintf(&b, "- three nodes on one Redis (appendfsync always): lock TTL %s, heartbeat cycle %s, recovery sweep every %s; one admin token, %s\n", cfg.LockTTL, cfg.Cycle, cfg.Recovery, chaosBatchTokenName)
	fmt.Fprintf(&b, "- %d instances a phase, each waiting for the event go keyed by its id; started in %s and %s (%d at once)\n",
		cfg.Instances, res.starts[0].Round(time.Millisecond), res.starts[1].Round(time.Millisecond), cfg.Starters)
	fmt.Fprintf(&b, "- batches at %g/s; a batch's first kill at %.0f%% of its expected length, then every %s–%s, alternately the stepper (caught reading its chunk's items, killed within %s) and another node; a killed node is down %s–%s\n",
		cfg.Rate, 100*cfg.FirstKill, cfg.KillEvery[0], cfg.KillEvery[1], cfg.KillDelay, cfg.DownFor[0], cfg.DownFor[1])
	fmt.Fprintf(&b, "- %d/%d instances completed; the whole run took %s\n\n", res.done, 2*cfg.Instances, res.elapsed.Round(time.Second))

	b.WriteString("## Batches\n\n| batch | id | op | query | rate | matched | done | skipped | failed | pending | applied in | rate seen | kills |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, br := range res.batches {
		if br.batch == nil {
			continue
		}
		d, rate := br.applied()
		c := br.batch.Counts
		fmt.Fprintf(&b, "| %s | %s | %s | `%s` | %g | %d | %d | %d | %d | %d | %s | %.1f/s | %d |\n", br.label, br.batch.ID, br.batch.Op, br.batch.Query,
			br.batch.Rate, br.batch.Matched, c[apiv1.ItemDone], c[apiv1.ItemSkipped], c[apiv1.ItemFailed], c[apiv1.ItemPending],
			d.Round(time.Millisecond), rate, len(br.killed))
	}

	b.WriteString("\n## Invariants\n\n| invariant | checked | violations |\n|---|---|---|\n")
	for _, v := range res.verdicts {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", v.name, v.checked, v.failed)
	}
	for _, v := range res.verdicts {
		if v.failed > 0 {
			fmt.Fprintf(&b, "\n### %s: examples\n\n```\n%s\n```\n", v.name, strings.Join(v.examples, "\n"))
		}
	}
	if len(res.harness) > 0 {
		fmt.Fprintf(&b, "\n### What the harness could not do (%d)\n\n```\n%s\n```\n", len(res.harness), strings.Join(res.harness, "\n"))
	}

	b.WriteString("\n## Kills\n\nA stepper kill is of the node seen reading the batch's pending items, the start of a chunk, through Redis's MONITOR: `seen` is the time from that read, as Redis ran it, to the SIGKILL, and `its chunk` whether the node's write of the chunk reached Redis before it died (not written: the next stepper applied those items).\n\n| time | since start | batch | node | kind | seen | its chunk | done before |\n|---|---|---|---|---|---|---|---|\n")
	for _, br := range res.batches {
		for _, k := range br.killed {
			seen := ""
			if k.Kind == "stepper" {
				seen = ms(k.Seen)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %d of %d |\n", k.At.Format("15:04:05.000"), k.At.Sub(res.t0).Round(time.Millisecond),
				k.Batch, k.Node, k.Kind, seen, k.Chunk, k.Done, len(br.ids))
		}
	}

	b.WriteString("\n## Node warnings\n\nA `lock lease lost before release` of `weft-batches-sweep` is a turn of the sweep that outlived the singleton's lock (engine.batch_interval × 4, at least 1s): another node may step the batch meanwhile, and the store refuses the later of two writes of one chunk (`stepping a batch`: stale revision).\n\n| warning | count |\n|---|---|\n")
	var ws []string
	for k := range res.logs {
		ws = append(ws, k)
	}
	slices.Sort(ws)
	for _, k := range ws {
		fmt.Fprintf(&b, "| %s | %d |\n", k, res.logs[k])
	}

	b.WriteString("\n## Counts\n\n| what | count |\n|---|---|\n")
	keys := make([]string, 0, len(res.counts))
	for k := range res.counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "| history entries %s | %d |\n", k, res.counts[k])
	}
	var why []string
	for k := range res.retries {
		why = append(why, k)
	}
	slices.Sort(why)
	for _, k := range why {
		fmt.Fprintf(&b, "| client calls retried on another node (%s) | %d |\n", k, res.retries[k])
	}
	return b.String()
}

// monitorLine reads when Redis ran a MONITOR line's command, and the
// client's port.
func TestChaosBatchMonitorLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		at   time.Time
		port int
		ok   bool
	}{
		{`+1700000000.123456 [0 127.0.0.1:54321] "evalsha" "abc" "1" "weft:{w}:schema" "weft:{w}:" "b-1" "0" "30" "pending"`, time.Unix(1700000000, 123456000), 54321, true},
		{`+1700000000.5 [0 [::1]:6000] "get" "x"`, time.Unix(1700000000, 500000000), 6000, true},
		{`+1700000000.123456 [0 lua] "HMGET" "weft:{w}:batch-items:b-1" "i"`, time.Time{}, 0, false},
		{`+OK`, time.Time{}, 0, false},
		{`+1700000000.123456 [0 127.0.0.1:notaport] "get" "x"`, time.Time{}, 0, false},
		{`+17000x0000.123456 [0 127.0.0.1:1] "get" "x"`, time.Time{}, 0, false},
	}
	for _, tt := range tests {
		at, port, ok := monitorLine(tt.line)
		if !at.Equal(tt.at) || port != tt.port || ok != tt.ok {
			t.Errorf("monitorLine(%q) = %s, %d, %v; want %s, %d, %v", tt.line, at, port, ok, tt.at, tt.port, tt.ok)
		}
	}
}
