package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/redistest"
)

// storeKey is a key of the store's slot. Every key of the store shares the
// hash tag {weft:} (docs/cluster.md, "Where things live"), so that slot's
// master takes every commit: the busy slot whose master the failover
// test kills.
const storeKey = "{weft:}schema"

// failoverWorkflow is what the failover test starts: two activities, the
// instance persisted after each, so that every instance commits three
// times after its creation while the master may die.
const failoverWorkflow = `
name: ff
persistence: activity
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input.text }" }, output: up }
  - { id: echo, activity: kit.echo, input: "${ vars.up.text }", output: echo }
output: "${ vars.echo }"
`

// The failover test's load: loadWorkers goroutines per node, each starting
// an instance every loadEvery (about 30 starts a second over three nodes
// when the machine keeps up).
const (
	loadWorkers = 4
	loadEvery   = 400 * time.Millisecond
)

// TestClusterFailover kills, with SIGKILL, the master of the store's slot
// of a Redis Cluster of three masters with a replica each
// (cluster-node-timeout 1s), under a steady load of starts through the
// HTTP API of three Weft nodes; the replica is promoted, the load goes on,
// then the killed master is restarted and rejoins as a replica, and the
// load goes on until every node has had starts acknowledged again. A start
// is acknowledged when the API answered 201; every other answer (503
// while the store's master is down or a write is not confirmed by a
// replica, an error of the connection) is a failed start, which the test
// allows and counts.
//
// With wait_replicas 1 every acknowledged start exists afterwards and
// completes exactly once: one instance_created, one instance_started, one
// instance_completed, and each activity step completed once. Writes then
// fail from the kill until the restarted master is a replica again: the
// promoted replica has none, so no write can be confirmed, and no start
// sent after the promotion is acknowledged before the restart. Without it,
// the test asserts only what always holds — every instance that exists,
// acknowledged or not, completes, and nothing is applied twice — and logs
// the window it measured: the acknowledged starts lost, and the
// replication lag at the kill (the master's replication offset, read just
// before the kill, against what the promoted replica had received of it).
//
// The third case divides the store into eight partitions
// (RedisPartitions), with wait_replicas 1, and kills a master that serves
// partitions but neither the catalog nor the ready queue: the same
// promises hold for every acknowledged start, and the masters that live
// on go on alone. What no write can be confirmed on, from the kill until
// the old master is back, is the killed master's partitions only: starts
// whose instance lives in another partition are acknowledged meanwhile.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	// One after the other: each starts six redis-servers and three nodes.
	for _, tc := range []struct {
		name         string
		waitReplicas int
		partitions   int
	}{
		{"wait_replicas=1", 1, 0},
		{"no_wait", 0, 0},
		{"partitions=8,wait_replicas=1", 1, 8},
	} {
		t.Run(tc.name, func(t *testing.T) { failover(t, tc.waitReplicas, tc.partitions) })
	}
}

// queueKey is a key of the ready queue's slot, with one shard.
const queueKey = "{weft:queue}:queued"

// failover runs TestClusterFailover with waitReplicas, and the store in
// partitions (0: the whole store).
func failover(t *testing.T, waitReplicas, partitions int) {
	cl := redistest.StartClusterOf(t, 3, 1)
	ctx := context.Background()
	hosts := make([]*hosttest.Host, 3)
	for i := range hosts {
		cfg := clusterConfig(t, fmt.Sprintf("n%d", i))
		cfg.RedisCluster = cl.Addrs()
		cfg.RedisWaitReplicas = waitReplicas
		cfg.RedisPartitions = partitions
		cfg.RedisWaitTimeout = 2 * time.Second
		// Runs that failed during the failover back off from this.
		cfg.Engine.RecoveryInterval = 250 * time.Millisecond
		hosts[i] = hosttest.New(t, hosttest.Options{Node: cfg})
	}
	hosts[0].PushPlugin(t, "kit")
	hosts[0].PutWorkflow(t, "ff", failoverWorkflow)
	for i, h := range hosts {
		within(t, 2*time.Minute, fmt.Sprintf("node n%d ready", i), func() bool { return h.Node.Ready(ctx) == nil })
	}
	// The master to kill: the store's, or with partitions one that
	// serves some and neither the catalog nor the ready queue, whose
	// masters the cases of the whole store kill (the catalog's is the
	// store's). killKey is a key of its slots; down says whether an
	// instance lives on it.
	killKey, down := storeKey, func(string) bool { return true }
	var layout *storeLayout
	if partitions > 1 {
		layout = layoutOf(t, cl, partitions)
		queue := cl.MasterOf(t, queueKey)
		for _, m := range cl.Masters(t) {
			if parts := layout.partsOn(m); len(parts) > 0 && m != layout.catalog && m != queue {
				killKey = layout.tags[parts[0]] + "schema"
				down = func(id string) bool { return layout.master(id) == m }
				t.Logf("the store's layout: %s; the queue on %s; killing %s, which serves partitions %v", layout, layout.name(queue), layout.name(m), parts)
				break
			}
		}
		if killKey == storeKey {
			t.Fatalf("no master serves partitions without the catalog or the queue: %s; the queue on %s", layout, layout.name(queue))
		}
	}
	master := cl.MasterOf(t, killKey)
	replicas := cl.ReplicasOf(t, master)
	if len(replicas) != 1 {
		t.Fatalf("the master %s of %s has %d replicas, want 1", master.Addr(), killKey, len(replicas))
	}

	l := &failoverLoad{hosts: hosts}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopLoad(); wg.Wait() }() // before the nodes close
	for i := range hosts {
		for w := range loadWorkers {
			wg.Go(func() { l.run(loadCtx, i, w) })
		}
	}
	begun := time.Now()
	within(t, time.Minute, "five acknowledged starts per node", func() bool { return l.everyNode(begun, 5, true) })

	// The master's replication offset just before the kill: how much of
	// its stream it had written, at least, when it died.
	masterOffset := replOffset(t, master, "master_repl_offset")
	killedAt := time.Now()
	if killed := cl.KillMasterOf(t, killKey); killed != master {
		t.Fatalf("killed %s, the master of %s was %s", killed.Addr(), killKey, master.Addr())
	}
	promoted := cl.WaitFailover(t, killKey)
	promotedAt := time.Now()
	if promoted != replicas[0] {
		t.Errorf("the slot of %s went to %s, not to the master's replica %s", killKey, promoted.Addr(), replicas[0].Addr())
	}
	// A promoted replica keeps the old master's stream up to its
	// second_repl_offset (exclusive): what it had received when promoted.
	received := replOffset(t, promoted, "second_repl_offset") - 1
	// The load goes on after the promotion: every worker has had a few
	// starts answered since.
	within(t, 2*time.Minute, "four starts per worker answered after the promotion", func() bool {
		return l.everyWorker(promotedAt, 4)
	})
	restartAt := time.Now()
	master.Restart(t)
	cl.WaitHealthy(t)
	healthyAt := time.Now()
	within(t, 2*time.Minute, "three starts per node acknowledged once the old master is a replica", func() bool {
		return l.everyNode(healthyAt, 3, true)
	})
	stopLoad()
	wg.Wait()

	attempts := l.snapshot()
	var acked, failed []failoverAttempt
	answers := map[string]int{}
	firstProblem := map[string]string{}
	for _, a := range attempts {
		answers[a.answer()]++
		if a.status == http.StatusCreated {
			acked = append(acked, a)
			continue
		}
		failed = append(failed, a)
		if _, ok := firstProblem[a.answer()]; !ok {
			firstProblem[a.answer()] = a.problem
		}
	}
	t.Logf("master %s of %s killed; replica %s promoted %s later; old master back as a replica %s after the kill",
		master.Addr(), killKey, promoted.Addr(), promotedAt.Sub(killedAt).Round(time.Millisecond), healthyAt.Sub(killedAt).Round(time.Millisecond))
	if missed := masterOffset - received; missed > 0 {
		t.Logf("replication at the kill: the promoted replica had received the master's stream up to offset %d, %d bytes short of the %d the master had written when last read before the kill",
			received, missed, masterOffset)
	} else {
		t.Logf("replication at the kill: the promoted replica had received the master's stream up to offset %d, all the master had written when last read before the kill (%d) and %d bytes after",
			received, masterOffset, -missed)
	}
	t.Logf("%d starts: %d acknowledged, %d failed; answers %v", len(attempts), len(acked), len(failed), answers)
	for answer, problem := range firstProblem {
		t.Logf("first %s answer: %s", answer, problem)
	}
	t.Logf("writes failed: %s", failureWindow(attempts, killedAt))
	// Between the promotion and the old master's restart the promoted
	// replica has no replica: with wait_replicas, no write of its slots
	// can be confirmed, so no start sent then whose instance lives there
	// is acknowledged.
	alone := 0
	for _, a := range acked {
		if down(a.id) && !a.sent.Before(promotedAt) && a.answered.Before(restartAt) {
			alone++
		}
	}
	t.Logf("%d starts on the killed master's slots sent after the promotion were acknowledged before the old master restarted", alone)
	if waitReplicas > 0 && alone > 0 {
		t.Errorf("with wait_replicas %d, %d starts were acknowledged while the master of their slot had no replica", waitReplicas, alone)
	}
	if layout != nil {
		// The other masters' partitions went on: starts whose instance
		// lives there were acknowledged from the kill until the old
		// master restarted, and every one sent once the replica was
		// promoted. Before that, from when the cluster marks the master
		// failed, the cluster refuses every slot (CLUSTERDOWN, with
		// Redis's default cluster-require-full-coverage).
		upAnswers, downAnswers := map[string]int{}, map[string]int{}
		upProblem := map[string]string{}
		var refused []string
		for _, a := range attempts {
			if a.sent.Before(killedAt) || !a.answered.Before(restartAt) {
				continue
			}
			if down(a.id) {
				downAnswers[a.answer()]++
				continue
			}
			upAnswers[a.answer()]++
			if a.status == http.StatusCreated {
				continue
			}
			if _, ok := upProblem[a.answer()]; !ok {
				upProblem[a.answer()] = a.problem
			}
			if !a.sent.Before(promotedAt) {
				refused = append(refused, fmt.Sprintf("%s, sent %s after the promotion: %s %s", a.id, a.sent.Sub(promotedAt).Round(time.Millisecond), a.answer(), a.problem))
			}
		}
		t.Logf("starts sent once the kill began and answered before the old master restarted: on the killed master's partitions %v, on the others %v", downAnswers, upAnswers)
		for answer, problem := range upProblem {
			t.Logf("first %s answer on the others: %s", answer, problem)
		}
		if upAnswers["201"] == 0 {
			t.Errorf("no start on the partitions of the masters that lived on was acknowledged while the killed master's were down: %v", upAnswers)
		}
		if len(refused) > 0 {
			t.Errorf("%d starts on the partitions of the masters that lived on, sent after the promotion, failed; the first: %s", len(refused), strings.Join(refused[:min(len(refused), 3)], "\n"))
		}
	}
	for answer := range answers {
		switch answer {
		case "201", "503", "no answer":
		default:
			// Unavailability must say so (503), for clients to retry.
			t.Errorf("%d starts answered %s during the failover, want 201 or 503: %s", answers[answer], answer, firstProblem[answer])
		}
	}

	// Every instance that exists completes once: the acknowledged ones,
	// and the failed starts whose instance was created all the same.
	store := hosts[0].Node.Store()
	check := make([]string, 0, len(attempts))
	for _, a := range acked {
		check = append(check, a.id)
	}
	createdAnyway := 0
	for _, a := range failed {
		if _, err := store.GetInstance(ctx, a.id); err == nil {
			check = append(check, a.id)
			createdAnyway++
		} else if !errors.Is(err, weft.ErrNotFound) {
			t.Fatalf("reading %s: %v", a.id, err)
		}
	}
	t.Logf("%d failed starts created their instance all the same", createdAnyway)
	lost, finished := awaitFinished(t, store, check, 3*time.Minute)
	ackedIDs := map[string]bool{}
	for _, a := range acked {
		ackedIDs[a.id] = true
	}
	var lostAcked []string
	for _, id := range lost {
		if ackedIDs[id] {
			lostAcked = append(lostAcked, id)
		}
	}
	if waitReplicas > 0 && len(lostAcked) > 0 {
		t.Errorf("with wait_replicas %d, %d acknowledged starts were lost in the failover: %v",
			waitReplicas, len(lostAcked), lostAcked[:min(len(lostAcked), 10)])
	}
	if waitReplicas == 0 {
		t.Logf("without wait_replicas: %d of %d acknowledged starts lost in the failover %v",
			len(lostAcked), len(acked), lostAcked[:min(len(lostAcked), 10)])
	}
	retried := 0
	for _, inst := range finished {
		retried += checkOnce(t, store, inst)
	}
	t.Logf("%d instances completed exactly once; %d activity attempts beyond the first", len(finished), retried)
	// After the failover the nodes work: the starts acknowledged once the
	// old master was back completed (above), on every node.
	for i := range hosts {
		if n := l.count(i, healthyAt, true); n == 0 {
			t.Errorf("node n%d acknowledged no start after the cluster was healthy again", i)
		}
	}
}

// failoverAttempt is one start of the failover test's load.
type failoverAttempt struct {
	id             string
	host, worker   int
	sent, answered time.Time
	status         int    // 0 when no answer came
	problem        string // the body of an answer other than 201, or the error
}

// answer names what the attempt was answered: its status, or "no answer".
func (a failoverAttempt) answer() string {
	if a.status == 0 {
		return "no answer"
	}
	return strconv.Itoa(a.status)
}

// failoverLoad starts instances of failoverWorkflow through the nodes'
// APIs and records every attempt.
type failoverLoad struct {
	hosts []*hosttest.Host

	mu       sync.Mutex
	attempts []failoverAttempt
}

// run starts an instance through host every loadEvery until ctx ends.
func (l *failoverLoad) run(ctx context.Context, host, worker int) {
	tick := time.NewTicker(loadEvery)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		id := fmt.Sprintf("ff-%d-%d-%d", host, worker, seq)
		a := failoverAttempt{id: id, host: host, worker: worker, sent: time.Now()}
		a.status, a.problem = l.start(ctx, l.hosts[host], id)
		a.answered = time.Now()
		l.mu.Lock()
		l.attempts = append(l.attempts, a)
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// start asks h to start instance id (POST /v1/workflows/ff/instances) and
// returns the answer's status, with its body unless it is 201; 0 and the
// error when no answer came.
func (l *failoverLoad) start(ctx context.Context, h *hosttest.Host, id string) (int, string) {
	body, err := json.Marshal(map[string]any{"id": id, "input": map[string]string{"text": id}})
	if err != nil {
		return 0, err.Error()
	}
	// The load's end does not cut a start in flight: its answer counts.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.URL+"/v1/workflows/ff/instances", bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := h.HTTP.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, fmt.Sprintf("reading the answer %d: %v", res.StatusCode, err)
	}
	if res.StatusCode == http.StatusCreated {
		return res.StatusCode, ""
	}
	return res.StatusCode, string(b)
}

// snapshot returns the attempts so far, in the order they were sent.
func (l *failoverLoad) snapshot() []failoverAttempt {
	l.mu.Lock()
	out := slices.Clone(l.attempts)
	l.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].sent.Before(out[j].sent) })
	return out
}

// count returns how many starts through host sent at or after since were
// answered: acknowledged ones only when acked.
func (l *failoverLoad) count(host int, since time.Time, acked bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.attempts {
		if a.host == host && !a.sent.Before(since) && (!acked || a.status == http.StatusCreated) {
			n++
		}
	}
	return n
}

// everyNode reports whether every node has had n starts sent at or after
// since answered (acknowledged, when acked).
func (l *failoverLoad) everyNode(since time.Time, n int, acked bool) bool {
	for host := range l.hosts {
		if l.count(host, since, acked) < n {
			return false
		}
	}
	return true
}

// everyWorker reports whether every worker of every node has had n starts
// sent at or after since answered, whatever the answer.
func (l *failoverLoad) everyWorker(since time.Time, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	per := map[[2]int]int{}
	for _, a := range l.attempts {
		if !a.sent.Before(since) {
			per[[2]int{a.host, a.worker}]++
		}
	}
	for host := range l.hosts {
		for w := range loadWorkers {
			if per[[2]int{host, w}] < n {
				return false
			}
		}
	}
	return true
}

// failureWindow says when, relative to the kill, starts failed, and the
// longest time between two acknowledged starts' answers.
func failureWindow(attempts []failoverAttempt, killedAt time.Time) string {
	var first, last time.Time
	n := 0
	for _, a := range attempts {
		if a.status == http.StatusCreated {
			continue
		}
		n++
		if first.IsZero() || a.sent.Before(first) {
			first = a.sent
		}
		if a.answered.After(last) {
			last = a.answered
		}
	}
	var acks []time.Time
	for _, a := range attempts {
		if a.status == http.StatusCreated {
			acks = append(acks, a.answered)
		}
	}
	slices.SortFunc(acks, time.Time.Compare)
	var gap time.Duration
	var gapFrom time.Time
	for i := 1; i < len(acks); i++ {
		if d := acks[i].Sub(acks[i-1]); d > gap {
			gap, gapFrom = d, acks[i-1]
		}
	}
	rel := func(at time.Time) string {
		d := at.Sub(killedAt).Round(10 * time.Millisecond)
		if d < 0 {
			return d.String()
		}
		return "+" + d.String()
	}
	if n == 0 {
		return fmt.Sprintf("none; the longest time without an acknowledged start was %s, from %s after the kill", gap.Round(time.Millisecond), rel(gapFrom))
	}
	return fmt.Sprintf("%d starts, sent from %s to answered at %s after the kill; no start was acknowledged for %s, from %s",
		n, rel(first), rel(last), gap.Round(time.Millisecond), rel(gapFrom))
}

// replOffset reads a replication offset (field of INFO replication) of s.
func replOffset(t *testing.T, s *redistest.Server, field string) int64 {
	t.Helper()
	info, err := s.Client(t).Info(context.Background(), "replication").Result()
	if err != nil {
		t.Fatalf("INFO replication on %s: %v", s.Addr(), err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO replication on %s: %s: %v", s.Addr(), line, err)
			}
			return n
		}
	}
	t.Fatalf("INFO replication on %s has no %s:\n%s", s.Addr(), field, info)
	return 0
}

// failoverStore is what the checks of the failover test read.
type failoverStore interface {
	GetInstance(ctx context.Context, id string) (*weft.Instance, error)
	History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error)
}

// awaitFinished polls the instances ids until each has finished or is
// found missing (lost: a missing instance never comes back), and returns
// the lost ids and the finished instances; it fails the test, naming the
// instances and what they are doing, when some have not finished within
// limit.
func awaitFinished(t *testing.T, store failoverStore, ids []string, limit time.Duration) (lost []string, finished []*weft.Instance) {
	t.Helper()
	ctx := context.Background()
	pending := slices.Clone(ids)
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		var still []string
		for _, id := range pending {
			inst, err := store.GetInstance(ctx, id)
			switch {
			case errors.Is(err, weft.ErrNotFound):
				lost = append(lost, id)
			case err != nil:
				t.Fatalf("reading %s: %v", id, err)
			case inst.Status.Terminal():
				finished = append(finished, inst)
			default:
				still = append(still, id)
			}
		}
		pending = still
		if len(pending) == 0 {
			return lost, finished
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, id := range pending[:min(len(pending), 5)] {
				inst, err := store.GetInstance(ctx, id)
				hist, herr := store.History(ctx, id, 0, 1000)
				if err != nil || herr != nil {
					fmt.Fprintf(&b, "\n%s: %v %v", id, err, herr)
					continue
				}
				fmt.Fprintf(&b, "\n%s: %s, lease %+v\n%s", id, inst.Status, inst.Lease, dump(hist))
			}
			t.Fatalf("%d instances did not finish within %s; the first:%s", len(pending), limit, b.String())
		}
		<-tick.C
	}
}

// checkOnce checks that inst completed exactly once with the output of
// failoverWorkflow: one instance_created, instance_started and
// instance_completed, and each activity step completed once. It returns
// how many activity attempts there were beyond the first of each step.
func checkOnce(t *testing.T, store failoverStore, inst *weft.Instance) (retried int) {
	t.Helper()
	hist, err := store.History(context.Background(), inst.ID, 0, 1000)
	if err != nil {
		t.Fatalf("history of %s: %v", inst.ID, err)
	}
	want := `"` + strings.ToUpper(inst.ID) + `"`
	if inst.Status != weft.StatusCompleted || string(inst.Output) != want {
		t.Errorf("%s: %s with %s (%+v), want completed with %s\n%s", inst.ID, inst.Status, inst.Output, inst.Error, want, dump(hist))
		return 0
	}
	steps := map[string]int{}
	for _, ev := range hist {
		switch ev.Type {
		case weft.HistoryActivityCompleted:
			steps[ev.StepPath]++
		case weft.HistoryActivityScheduled:
			if ev.Attempt > 1 {
				retried++
			}
		}
	}
	ok := count(hist, weft.HistoryInstanceCreated) == 1 && count(hist, weft.HistoryInstanceStarted) == 1 &&
		count(hist, weft.HistoryInstanceCompleted) == 1 && len(steps) == 2
	for _, n := range steps {
		ok = ok && n == 1
	}
	if !ok {
		t.Errorf("%s was not applied exactly once: activity completions by step %v\n%s", inst.ID, steps, dump(hist))
	}
	return retried
}
