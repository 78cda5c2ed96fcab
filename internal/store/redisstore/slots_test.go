package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// The conformance suite (storetest's Slots* subtests, run by
// TestConformance and TestConformanceOnCluster) checks UpdateSlots,
// SlotKeys and SlotLine against internal/slots as their model. The tests
// here check what is the Redis store's own: several nodes (Store values)
// on one key, its WATCH retries, that it writes nothing when nothing
// changed, and its key bounds.

// slotEpoch is the tests' clock origin: whole milliseconds.
var slotEpoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// openSlotStore opens a store under prefix on c, closed when the test ends.
func openSlotStore(t testing.TB, c redis.UniversalClient, prefix string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Client: c, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// slotClients are the clients the multi-node tests run on: a plain server
// and a Redis Cluster node (through a ClusterClient, whose Watch requires
// the watched keys in one slot).
var slotClients = []struct {
	name  string
	start func(t *testing.T) redis.UniversalClient
}{
	{"server", func(t *testing.T) redis.UniversalClient { return redistest.Start(t).Client(t) }},
	{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t).ClusterClient(t) }},
}

// TestUpdateSlotsAcrossNodes: two Store values on one Redis — two nodes,
// whose UpdateSlots calls serialize only through WATCH — acquire one key
// of limit 2 at once: exactly 2 are granted. Then both hammer the key
// with acquire-and-release under cancel_newest, counting the holders each
// caller believes it is: never more than 2 at once, and the key ends
// empty.
func TestUpdateSlotsAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range slotClients {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.start(t)
			nodes := []*Store{openSlotStore(t, c, "nodes:"), openSlotStore(t, c, "nodes:")}
			ctx := context.Background()
			const key, callers, limit = "customer-42", 60, 2
			queue := slots.Params{Limit: limit, Policy: slots.Queue, Lease: time.Hour}

			// The op counts its runs: more runs than calls are WATCH
			// conflicts retried.
			var runs atomic.Int64
			counted := func(op store.SlotOp) store.SlotOp {
				return func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
					runs.Add(1)
					return op(st, id, p, now)
				}
			}
			outcomes := make([]slots.Outcome, callers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range callers {
				wg.Go(func() {
					<-start
					d, err := nodes[i%2].UpdateSlots(ctx, key, fmt.Sprintf("i%02d", i), queue, slotEpoch, counted(slots.Acquire))
					if err != nil {
						t.Errorf("Acquire i%02d on node %d: %v", i, i%2, err)
					}
					outcomes[i] = d.Outcome
				})
			}
			close(start)
			wg.Wait()
			if n := countOutcomes(outcomes, slots.Granted); n != limit || countOutcomes(outcomes, slots.Waiting) != callers-limit {
				t.Fatalf("outcomes %v: want %d granted and the others waiting", outcomes, limit)
			}
			t.Logf("%d acquisitions ran their operation %d times", callers, runs.Load())
			ks, _, err := nodes[1].SlotKeys(ctx, "", "", 10)
			if err != nil || len(ks) != 1 || len(ks[0].Holders) != limit || ks[0].Waiting != callers-limit {
				t.Fatalf("SlotKeys = %+v, %v: want %d holders and %d waiting", ks, err, limit, callers-limit)
			}

			// Acquire and release under cancel_newest: a caller refused
			// tries again; one granted counts itself among the holders,
			// uncounts itself and releases.
			const hammerKey, rounds = "hammer", 15
			refuse := slots.Params{Limit: limit, Policy: slots.CancelNewest, Lease: time.Hour}
			var holding, most atomic.Int64
			for i := range 8 {
				wg.Go(func() {
					node, id := nodes[i%2], fmt.Sprintf("h%d", i)
					for r := 0; r < rounds; {
						d, err := node.UpdateSlots(ctx, hammerKey, id, refuse, slotEpoch, slots.Acquire)
						if err != nil {
							t.Errorf("Acquire %s: %v", id, err)
							return
						}
						if d.Outcome != slots.Granted {
							continue
						}
						n := holding.Add(1)
						for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
						}
						holding.Add(-1)
						if _, err := node.UpdateSlots(ctx, hammerKey, id, refuse, slotEpoch, slots.Release); err != nil {
							t.Errorf("Release %s: %v", id, err)
							return
						}
						r++
					}
				})
			}
			wg.Wait()
			if most.Load() > limit || most.Load() < 1 {
				t.Fatalf("%d callers believed they held a slot at once, limit %d", most.Load(), limit)
			}
			if ks, _, err := nodes[0].SlotKeys(ctx, hammerKey, "", 10); err != nil || len(ks) != 0 {
				t.Fatalf("after every release SlotKeys(%q) = %+v, %v; want none", hammerKey, ks, err)
			}
		})
	}
}

func countOutcomes(os []slots.Outcome, o slots.Outcome) int {
	n := 0
	for _, x := range os {
		if x == o {
			n++
		}
	}
	return n
}

// TestUpdateSlotsRetriesAConflict: while node A's operation runs, node B
// grants the key's only slot; A's EXEC fails (WATCH), and A runs its
// operation again on what B left, so that A waits instead of holding a
// second slot.
func TestUpdateSlotsRetriesAConflict(t *testing.T) {
	t.Parallel()
	for _, tc := range slotClients {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.start(t)
			a, b := openSlotStore(t, c, "conflict:"), openSlotStore(t, c, "conflict:")
			ctx := context.Background()
			p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Minute}
			var seen []slots.State
			op := func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
				seen = append(seen, st)
				if len(seen) == 1 {
					if d, err := b.UpdateSlots(ctx, "k", "b", p, now, slots.Acquire); err != nil || d.Outcome != slots.Granted {
						t.Fatalf("node B's Acquire: %+v, %v", d, err)
					}
				}
				return slots.Acquire(st, id, p, now)
			}
			d, err := a.UpdateSlots(ctx, "k", "a", p, slotEpoch, op)
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) != 2 || len(seen[0].Holders) != 0 || len(seen[1].Holders) != 1 || seen[1].Holders[0].ID != "b" {
				t.Fatalf("the operation saw %+v: want an empty key, then b holding", seen)
			}
			if d.Outcome != slots.Waiting {
				t.Fatalf("node A's Acquire = %+v, want waiting", d)
			}
			line, _, err := b.SlotLine(ctx, "k", "", 10)
			if err != nil || len(line) != 1 || line[0].ID != "a" {
				t.Fatalf("SlotLine = %+v, %v; want a waiting", line, err)
			}
		})
	}
}

// TestUpdateSlotsGivesUpOnEndlessConflicts: an operation that another
// node's write always overtakes ends with an error naming the key, after
// maxSlotAttempts tries, and nothing of its own written.
func TestUpdateSlotsGivesUpOnEndlessConflicts(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	a, b := openSlotStore(t, c, "endless:"), openSlotStore(t, c, "endless:")
	ctx := context.Background()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Minute}
	runs := 0
	op := func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		runs++
		// B renews its lease (a write) every time A reads.
		if _, err := b.UpdateSlots(ctx, "k", "b", p, now.Add(time.Duration(runs)*time.Millisecond), slots.Acquire); err != nil {
			t.Fatalf("node B's Acquire: %v", err)
		}
		return slots.Acquire(st, id, p, now)
	}
	_, err := a.UpdateSlots(ctx, "k", "a", p, slotEpoch, op)
	if err == nil || !strings.Contains(err.Error(), `"k"`) {
		t.Fatalf("UpdateSlots = %v, want an error naming the key", err)
	}
	if runs != maxSlotAttempts {
		t.Fatalf("the operation ran %d times, want %d", runs, maxSlotAttempts)
	}
	if line, _, err := a.SlotLine(ctx, "k", "", 10); err != nil || len(line) != 0 {
		t.Fatalf("SlotLine = %+v, %v; want nobody waiting", line, err)
	}
}

// commandCalls returns INFO commandstats' calls per command ("exec",
// "evalsha", ...), INFO's own left out.
func commandCalls(t testing.TB, c redis.UniversalClient) map[string]int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || name == "info" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				out[name] = n
			}
		}
	}
	return out
}

// execCalls counts the MULTI/EXEC blocks the server has run.
func execCalls(t testing.TB, c redis.UniversalClient) int64 { return commandCalls(t, c)["exec"] }

// TestUpdateSlotsWritesOnlyChanges: a call whose operation changes
// nothing runs no transaction; one that changes only the terms (limit,
// policy) writes them; a waiter far back that releases leaves the line
// and the front stays.
func TestUpdateSlotsWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	s := openSlotStore(t, c, "writes:")
	ctx := context.Background()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	update := func(id string, p slots.Params, op store.SlotOp) slots.Decision {
		t.Helper()
		d, err := s.UpdateSlots(ctx, "k", id, p, slotEpoch, op)
		if err != nil {
			t.Fatalf("UpdateSlots(%q): %v", id, err)
		}
		return d
	}
	for _, id := range []string{"h", "w1", "w2", "w3", "w4"} {
		update(id, p, slots.Acquire)
	}
	for _, tt := range []struct {
		name   string
		id     string
		p      slots.Params
		op     store.SlotOp
		writes int64
		want   slots.Outcome
	}{
		{"a waiter at the front acquires again", "w1", p, slots.Acquire, 0, slots.Waiting},
		{"a waiter far back acquires again", "w4", p, slots.Acquire, 0, slots.Waiting},
		{"a waiter renews", "w3", p, slots.Renew, 0, slots.Waiting},
		{"an unknown id releases", "x", p, slots.Release, 0, slots.Unknown},
		{"the sweep finds nothing to do", "x", p, store.ExpireSlots, 0, ""},
		{"an unknown id releases with new terms", "x", slots.Params{Limit: 1, Policy: slots.CancelNewest, Lease: time.Hour}, slots.Release, 1, slots.Unknown},
		{"a waiter far back leaves", "w3", p, slots.Release, 1, slots.Left},
	} {
		before := execCalls(t, c)
		if d := update(tt.id, tt.p, tt.op); d.Outcome != tt.want {
			t.Fatalf("%s: %+v, want %s", tt.name, d, tt.want)
		}
		if got := execCalls(t, c) - before; got != tt.writes {
			t.Errorf("%s: %d transactions, want %d", tt.name, got, tt.writes)
		}
	}
	ks, _, err := s.SlotKeys(ctx, "", "", 10)
	if err != nil || len(ks) != 1 || ks[0].Policy != slots.Queue || ks[0].Waiting != 3 {
		t.Fatalf("SlotKeys = %+v, %v; want the key, queue, 3 waiting", ks, err)
	}
	line, _, err := s.SlotLine(ctx, "k", "", 10)
	if ids := waiterIDs(line); err != nil || !slices.Equal(ids, []string{"w1", "w2", "w4"}) {
		t.Fatalf("SlotLine = %v, %v; want w1 w2 w4", ids, err)
	}
}

func waiterIDs(ws []slots.Waiter) []string {
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

// TestUpdateSlotsReleaseAtTheFront: the first waiter leaves the line when
// the holder's lease has ended: the sweep then promotes the second, which
// the window must hold (slots.WindowFront reads Limit+1 waiters).
func TestUpdateSlotsReleaseAtTheFront(t *testing.T) {
	t.Parallel()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Second}
	c := redistest.Start(t).Client(t)
	s := openSlotStore(t, c, "front:")
	ctx := context.Background()
	for _, id := range []string{"h", "w1", "w2"} {
		if _, err := s.UpdateSlots(ctx, "k", id, p, slotEpoch, slots.Acquire); err != nil {
			t.Fatal(err)
		}
	}
	d, err := s.UpdateSlots(ctx, "k", "w1", p, slotEpoch.Add(time.Minute), slots.Release)
	if err != nil {
		t.Fatal(err)
	}
	if d.Outcome != slots.Left || len(d.Promoted) != 1 || d.Promoted[0].ID != "w2" {
		t.Fatalf("Release of w1 = %+v: want left, h expired and w2 promoted", d)
	}
}

// TestUpdateSlotsLongLinesModel drives one key per run with random
// operations of many ids and small limits, so that most waiters stand
// beyond the front the store reads, and compares every Decision, the
// holders and the whole line with the operations on the whole State.
// (The conformance suite's model test has few ids: short lines.)
func TestUpdateSlotsLongLinesModel(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	s := openSlotStore(t, c, "model:")
	ctx := context.Background()
	ops := []store.SlotOp{slots.Acquire, slots.Acquire, slots.Acquire, slots.Release, slots.Release, slots.Renew, store.ExpireSlots}
	policies := []slots.Policy{slots.Queue, slots.Queue, slots.Queue, slots.CancelNewest, slots.CancelOldest}
	steps := []time.Duration{0, time.Millisecond, time.Second, 3 * time.Second, -time.Second}
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 35))
		key := fmt.Sprintf("run%d", seed)
		whole := slots.State{Key: key}
		now := slotEpoch
		for step := range 150 {
			id := fmt.Sprintf("i%02d", r.IntN(16))
			op := ops[r.IntN(len(ops))]
			p := slots.Params{Limit: 1 + r.IntN(2), Policy: slots.Queue, Lease: time.Duration(2+r.IntN(8)) * time.Second}
			if seed%3 == 0 {
				p.Policy = policies[r.IntN(len(policies))]
			}
			now = now.Add(steps[r.IntN(len(steps))])
			got, err := s.UpdateSlots(ctx, key, id, p, now, op)
			if err != nil {
				t.Fatalf("run %d step %d: %v", seed, step, err)
			}
			next, want, _ := op(whole, id, p, now)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("run %d step %d (%s, %+v): got %+v, want %+v\nbefore: %+v", seed, step, id, p, got, want, whole)
			}
			whole = next
			line, err := readLine(ctx, s, key)
			if err != nil {
				t.Fatal(err)
			}
			ks, _, err := s.SlotKeys(ctx, key, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			var holders []slots.Holder
			if len(ks) == 1 {
				holders = ks[0].Holders
			}
			if fmt.Sprint(line) != fmt.Sprint(whole.Waiters) || fmt.Sprint(holders) != fmt.Sprint(whole.Holders) {
				t.Fatalf("run %d step %d: the store keeps %v and %v, want %v and %v", seed, step, holders, line, whole.Holders, whole.Waiters)
			}
		}
	}
}

// readLine reads key's whole line, 5 waiters a page.
func readLine(ctx context.Context, s *Store, key string) ([]slots.Waiter, error) {
	var out []slots.Waiter
	for cursor := ""; ; {
		page, next, err := s.SlotLine(ctx, key, cursor, 5)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// TestSlotKeyBounds checks the lexical bounds of SlotKeys' prefixes and
// the front that UpdateSlots reads.
func TestSlotKeyBounds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ prefix, want string }{
		{"", "+"},
		{"a", "(b"},
		{"wf/", "(wf0"},
		{"a\xff", "(b"},
		{"a\xff\xff", "(b"},
		{"\xff", "+"},
		{"a\x00", "(a\x01"},
	} {
		if got := lexAfter(tt.prefix); got != tt.want {
			t.Errorf("lexAfter(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}
	for _, tt := range []struct {
		p    slots.Params
		want int
	}{
		{slots.Params{Limit: 1}, slots.WindowFront(slots.Params{Limit: 1}) - 1},
		{slots.Params{Limit: 3, Policy: slots.CancelNewest}, slots.WindowFront(slots.Params{Limit: 3}) - 1},
		{slots.Params{Limit: 2, Policy: slots.CancelOldest}, -1},
		{slots.Params{Limit: 0}, 0},
		{slots.Params{Limit: -3}, 0},
	} {
		if got := slotFront(tt.p); got != tt.want {
			t.Errorf("slotFront(%+v) = %d, want %d", tt.p, got, tt.want)
		}
	}
}

// BenchmarkUpdateSlots measures an Acquire and a Release of a newcomer
// on a key of limit 1 whose line holds 0, 1,000 or 10,000 waiters: the
// newcomer joins the end of the line and leaves it. The cost per
// operation does not grow with the line, which is never read whole.
func BenchmarkUpdateSlots(b *testing.B) {
	c := redistest.Start(b).Client(b)
	ctx := context.Background()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	for _, n := range []int{0, 1000, 10_000} {
		b.Run(fmt.Sprintf("line=%d", n), func(b *testing.B) {
			s := openSlotStore(b, c, fmt.Sprintf("bench-%d:", n))
			key := "k"
			fill := func(ids []string) {
				for _, id := range ids {
					if _, err := s.UpdateSlots(ctx, key, id, p, slotEpoch, slots.Acquire); err != nil {
						b.Fatal(err)
					}
				}
			}
			fill([]string{"holder"})
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("w%05d", i)
			}
			// Eight writers: the order of the line does not matter here.
			var wg sync.WaitGroup
			for w := range 8 {
				wg.Go(func() { fill(ids[w*n/8 : (w+1)*n/8]) })
			}
			wg.Wait()
			before := commandCalls(b, c)
			ops := 0
			for i := 0; b.Loop(); i++ {
				id := "new" + strconv.Itoa(i)
				if d, err := s.UpdateSlots(ctx, key, id, p, slotEpoch, slots.Acquire); err != nil || d.Outcome != slots.Waiting {
					b.Fatalf("Acquire %s: %+v, %v", id, d, err)
				}
				if d, err := s.UpdateSlots(ctx, key, id, p, slotEpoch, slots.Release); err != nil || d.Outcome != slots.Left {
					b.Fatalf("Release %s: %+v, %v", id, d, err)
				}
				ops++
			}
			// The Redis commands of an Acquire and a Release, those the
			// scripts run included: the same for every length of line.
			var calls int64
			for name, n := range commandCalls(b, c) {
				calls += n - before[name]
			}
			b.ReportMetric(float64(calls)/float64(ops), "cmds/op")
		})
	}
}
