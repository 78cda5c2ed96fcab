package slots_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/slots"
)

// TestWindow checks that the window a store hands an operation is exact
// (window.go): for random sequences of operations, each applied to the
// whole State and, as a store applies it, to the window of the State
// (holders, the first WindowFront waiters, the caller's own entry further
// back) merged back with LineChanges, the States and the Decisions are
// equal after every step. The first runs are FuzzSlots's (decode's ids
// and params); the others build lines of hundreds of waiters.
func TestWindow(t *testing.T) {
	t.Parallel()
	all := []slots.Policy{slots.Queue, slots.CancelNewest, slots.CancelOldest}
	// Mostly queue, so that the line grows between the acquisitions of
	// the other policies.
	mostlyQueue := []slots.Policy{slots.Queue, slots.Queue, slots.Queue, slots.Queue, slots.Queue, slots.Queue, slots.CancelNewest, slots.CancelOldest}
	hour := []time.Duration{time.Hour}
	// The kinds of fuzzOp: 0 acquire, 1 release, 2 renew, 3 expire.
	acquiring := []int{0, 0, 0, 0, 0, 0, 1, 1, 2, 3}
	tests := []struct {
		name string
		gen  generator
		runs int
		// longest is the length of line the runs must reach, to show
		// that they test what they are meant to.
		longest int
	}{
		{name: "fuzz's sequences", runs: 300, longest: 4, gen: fuzzGenerator{}},
		{name: "a long queue, limit 1", runs: 3, longest: 250, gen: longGenerator{
			ids: 400, count: 1000, kinds: acquiring, limits: []int{1}, policies: []slots.Policy{slots.Queue},
			leases: hour, steps: []time.Duration{0, time.Second}, fixed: true,
		}},
		{name: "a long queue, limit 3", runs: 3, longest: 250, gen: longGenerator{
			ids: 400, count: 1000, kinds: acquiring, limits: []int{3}, policies: []slots.Policy{slots.Queue},
			leases: hour, steps: []time.Duration{0, time.Second}, fixed: true,
		}},
		{name: "limits 1 to 3 changing at every call", runs: 3, longest: 250, gen: longGenerator{
			ids: 400, count: 1000, kinds: acquiring, limits: []int{1, 2, 3}, policies: []slots.Policy{slots.Queue},
			leases: hour, steps: []time.Duration{0, time.Second},
		}},
		{name: "policies changing on a long line", runs: 6, longest: 30, gen: longGenerator{
			ids: 300, count: 1500, kinds: acquiring, limits: []int{1, 2, 3}, policies: mostlyQueue,
			leases: []time.Duration{5 * time.Second, time.Hour}, steps: []time.Duration{0, 0, time.Second, -2 * time.Second},
		}},
		{name: "expiring leases promote from a long line", runs: 3, longest: 100, gen: longGenerator{
			ids: 300, count: 1000, kinds: acquiring, limits: []int{1, 3}, policies: []slots.Policy{slots.Queue},
			leases: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, steps: []time.Duration{0, 0, 0, 0, 0, time.Second, -time.Second},
		}},
		{name: "every policy, few ids", runs: 20, longest: 4, gen: longGenerator{
			ids: 8, count: 500, kinds: []int{0, 0, 1, 2, 3}, limits: []int{1, 2, 3}, policies: all,
			leases: []time.Duration{time.Second, 10 * time.Second, time.Hour}, steps: []time.Duration{0, time.Second, 5 * time.Second, -2 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			longest := 0
			for seed := range uint64(tt.runs) {
				r := rand.New(rand.NewPCG(seed, 3535))
				longest = max(longest, runWindowed(t, fmt.Sprintf("run %d", seed), tt.gen.ops(r, seed)))
			}
			if longest < tt.longest {
				t.Errorf("the longest line was %d waiters, want at least %d: the runs do not test what they should", longest, tt.longest)
			}
		})
	}
}

// generator makes the operations of one run.
type generator interface {
	ops(r *rand.Rand, seed uint64) []fuzzOp
}

// fuzzGenerator makes runs as TestRandomRuns does: random bytes read by
// decode, half of them keeping one limit and policy.
type fuzzGenerator struct{}

func (fuzzGenerator) ops(r *rand.Rand, seed uint64) []fuzzOp {
	data := make([]byte, 4*(1+r.IntN(200)))
	for i := range data {
		data[i] = byte(r.UintN(256))
	}
	if seed%2 == 0 {
		for i := 2; i < len(data); i += 4 {
			data[i] = data[2]
		}
	}
	return decode(data)
}

// longGenerator makes runs over many ids, so that lines grow long: each
// step draws its kind, limit, policy, lease and time step from the lists
// (repeat an entry to weigh it). A fixed run draws the limit and policy
// once. count is the number of steps.
type longGenerator struct {
	ids, count int
	kinds      []int
	limits     []int
	policies   []slots.Policy
	leases     []time.Duration
	steps      []time.Duration
	fixed      bool
}

func (g longGenerator) ops(r *rand.Rand, _ uint64) []fuzzOp {
	pick := func(n int) int { return r.IntN(n) }
	limit, policy := g.limits[pick(len(g.limits))], g.policies[pick(len(g.policies))]
	ops := make([]fuzzOp, g.count)
	for i := range ops {
		if !g.fixed {
			limit, policy = g.limits[pick(len(g.limits))], g.policies[pick(len(g.policies))]
		}
		ops[i] = fuzzOp{
			kind: g.kinds[pick(len(g.kinds))],
			id:   fmt.Sprintf("i%03d", pick(g.ids)),
			p:    slots.Params{Limit: limit, Policy: policy, Lease: g.leases[pick(len(g.leases))]},
			step: g.steps[pick(len(g.steps))],
		}
	}
	return ops
}

// runWindowed applies ops to one key, whole and windowed, compares them
// after every step, and returns the length of the longest line.
func runWindowed(t *testing.T, run string, ops []fuzzOp) int {
	t.Helper()
	whole := slots.State{Key: key}
	now := epoch
	longest := 0
	for i, o := range ops {
		now = now.Add(o.step)
		op := operation(o.kind)
		want, wantD, err := op(whole, o.id, o.p, now)
		if err != nil {
			t.Fatalf("%s step %d (%+v): %v", run, i, o, err)
		}
		got, gotD, err := windowed(op, whole, o.id, o.p, now)
		if err != nil {
			t.Fatalf("%s step %d (%+v), windowed: %v", run, i, o, err)
		}
		if !sameState(got, want) || !reflect.DeepEqual(gotD, wantD) {
			t.Fatalf("%s step %d (%+v at %s) on\n%s\nwindowed:\n%s\nwhole:\n%s",
				run, i, o, offset(now), trace(whole, nil), trace(got, &gotD), trace(want, &wantD))
		}
		whole = want
		longest = max(longest, len(whole.Waiters))
	}
	return longest
}

// sameState reports whether a and b are equal, as reflect.DeepEqual
// would (nil and empty lists apart), in a fraction of its time: the long
// lines are compared after every step.
func sameState(a, b slots.State) bool {
	return a.Key == b.Key && (a.Holders == nil) == (b.Holders == nil) && (a.Waiters == nil) == (b.Waiters == nil) &&
		slices.EqualFunc(a.Holders, b.Holders, func(x, y slots.Holder) bool {
			return x.ID == y.ID && x.Since.Equal(y.Since) && x.Expiry.Equal(y.Expiry) && x.Cancelling == y.Cancelling
		}) &&
		slices.EqualFunc(a.Waiters, b.Waiters, func(x, y slots.Waiter) bool { return x.ID == y.ID && x.Since.Equal(y.Since) })
}

// trace prints st, and d when given, as the scripts do.
func trace(st slots.State, d *slots.Decision) string {
	var out strings.Builder
	if d != nil {
		printDecision(&out, *d)
	}
	printState(&out, st)
	return out.String()
}

// operation is the operation of a fuzzOp's kind, with one signature.
func operation(kind int) func(slots.State, string, slots.Params, time.Time) (slots.State, slots.Decision, error) {
	switch kind {
	case 0:
		return slots.Acquire
	case 1:
		return slots.Release
	case 2:
		return slots.Renew
	}
	return func(st slots.State, _ string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		return slots.Expire(st, p, now)
	}
}

// window is the part of whole a store hands an operation for id under p:
// the holders, the first WindowFront(p) waiters, and id's own entry when
// it waits further back, in line order.
func window(whole slots.State, id string, p slots.Params) slots.State {
	n := slots.WindowFront(p)
	if n < 0 || n > len(whole.Waiters) {
		n = len(whole.Waiters)
	}
	w := slots.State{Key: whole.Key, Holders: slices.Clone(whole.Holders), Waiters: slices.Clone(whole.Waiters[:n])}
	for _, x := range whole.Waiters[n:] {
		if x.ID == id {
			w.Waiters = append(w.Waiters, x)
		}
	}
	return w
}

// windowed applies op as a store does: to the window of whole, then the
// holders it returns replace whole's, the waiters that left the window
// leave the whole line, and those that joined it are appended at its end.
func windowed(op func(slots.State, string, slots.Params, time.Time) (slots.State, slots.Decision, error),
	whole slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
	w := window(whole, id, p)
	next, d, err := op(w, id, p, now)
	if err != nil {
		return whole, d, err
	}
	left, joined := slots.LineChanges(w.Waiters, next.Waiters)
	gone := make(map[string]bool, len(left))
	for _, id := range left {
		gone[id] = true
	}
	merged := slots.State{Key: whole.Key, Holders: next.Holders}
	for _, x := range whole.Waiters {
		if !gone[x.ID] {
			merged.Waiters = append(merged.Waiters, x)
		}
	}
	merged.Waiters = append(merged.Waiters, joined...)
	if len(merged.Holders) == 0 {
		merged.Holders = nil
	}
	return merged, d, nil
}

// TestLineChanges: what a store removes from its line and appends to it,
// for the windows the operations return.
func TestLineChanges(t *testing.T) {
	t.Parallel()
	w := func(ids ...string) []slots.Waiter {
		var ws []slots.Waiter
		for i, id := range ids {
			ws = append(ws, slots.Waiter{ID: id, Since: epoch.Add(time.Duration(i) * time.Second)})
		}
		return ws
	}
	tests := []struct {
		name          string
		before, after []slots.Waiter
		left          []string
		joined        []slots.Waiter
	}{
		{"nothing waits", nil, nil, nil, nil},
		{"nothing changes", w("a", "b"), w("a", "b"), nil, nil},
		{"a newcomer joins an empty line", nil, w("a"), nil, w("a")},
		{"a newcomer joins", w("a", "b"), w("a", "b", "c"), nil, w("a", "b", "c")[2:]},
		{"promotions take the front", w("a", "b", "c"), w("c"), []string{"a", "b"}, nil},
		{"a waiter far back leaves", w("a", "b", "z"), w("a", "b"), []string{"z"}, nil},
		{"a waiter far back stays", w("a", "z"), w("a", "z"), nil, nil},
		{"cancel_oldest: the front leaves, a newcomer joins", w("a", "b"), append(w("a", "b")[1:], slots.Waiter{ID: "c", Since: epoch}), []string{"a"}, []slots.Waiter{{ID: "c", Since: epoch}}},
		{"the whole line is promoted", w("a"), nil, []string{"a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			left, joined := slots.LineChanges(tt.before, tt.after)
			if !slices.Equal(left, tt.left) || !reflect.DeepEqual(joined, tt.joined) {
				t.Errorf("LineChanges = %v, %v; want %v, %v", left, joined, tt.left, tt.joined)
			}
		})
	}
}
