package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// slotsTests are the subtests of the concurrency slots (UpdateSlots,
// SlotKeys, SlotLine), run by Exercise. The operations are internal/slots'
// own, so the suite checks the store against that package as its model:
// what UpdateSlots returns and keeps must be what the operation gives on
// the key's whole State, and the window the store hands the operation must
// be the one Store.UpdateSlots documents.
//
// Where the interface leaves a choice, the suite holds every store to one
// answer: SlotKey's Limit and Policy are those of the last UpdateSlots
// that returned no error, even one that changed nothing else; the
// operation is not called for refused arguments or a done context; a
// SlotLine cursor goes on after the waiter it ended with, though that
// waiter or others left the line since; a cursor that is not one of the
// store's (and SlotLine's empty key) is ErrInvalid.
var slotsTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"SlotsModel", testSlotsModel},
	{"SlotsWithCommit", testSlotsWithCommit},
	{"SlotsRace", testSlotsRace},
	{"SlotsLongLine", testSlotsLongLine},
	{"SlotsLineCursor", testSlotsLineCursor},
	{"SlotKeys", testSlotKeys},
	{"SlotsDurability", testSlotsDurability},
	{"SlotsInvalid", testSlotsInvalid},
	{"SlotsOpError", testSlotsOpError},
	{"SlotsCancelledContext", testSlotsCancelledContext},
	{"SlotsClosed", testSlotsClosed},
}

// slotModel is what a store must keep of the keys a test drove: each
// key's whole State, as the operations of internal/slots left it, and the
// Params of its last UpdateSlots.
type slotModel struct {
	st map[string]slots.State
	p  map[string]slots.Params
}

func newSlotModel() *slotModel {
	return &slotModel{st: map[string]slots.State{}, p: map[string]slots.Params{}}
}

// state returns the model's State of key (the zero State of key when it
// has none).
func (m *slotModel) state(key string) slots.State {
	if st, ok := m.st[key]; ok {
		return st
	}
	return slots.State{Key: key}
}

// window is the part of st that Store.UpdateSlots hands an operation for
// id under p: the holders, the first slots.WindowFront(p) waiters, and
// id's own entry when it waits further back, in line order.
func window(st slots.State, id string, p slots.Params) slots.State {
	w := slots.State{Key: st.Key, Holders: slices.Clone(st.Holders)}
	n := slots.WindowFront(p)
	if n < 0 || n > len(st.Waiters) {
		n = len(st.Waiters)
	}
	w.Waiters = slices.Clone(st.Waiters[:n])
	for _, x := range st.Waiters[n:] {
		if x.ID == id {
			w.Waiters = append(w.Waiters, x)
		}
	}
	return normState(w)
}

// apply runs op for id on key through h's store and on the model, and
// fails unless the Decisions are equal and op was handed exactly its
// window of the model's State. It returns the Decision.
func (m *slotModel) apply(t *testing.T, h *harness, key, id string, p slots.Params, now time.Time, op store.SlotOp) slots.Decision {
	t.Helper()
	whole := m.state(key)
	spied := spy(t, fmt.Sprintf("UpdateSlots(%q, %q)", key, id), window(whole, id, p), id, p, now, op)
	got, err := h.s.UpdateSlots(ctx(t), key, id, p, now, spied)
	if err != nil {
		t.Fatalf("UpdateSlots(%q, %q, %+v, %s): %v", key, id, p, at(now), err)
	}
	next, want, err := op(whole, id, p, now)
	if err != nil {
		t.Fatalf("the model refused UpdateSlots(%q, %q, %+v): %v", key, id, p, err)
	}
	if g, w := normDecision(got), normDecision(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("UpdateSlots(%q, %q, %+v, %s) = %s, want %s\nstate before: %s", key, id, p, at(now), showDecision(g), showDecision(w), showState(whole))
	}
	if next.Empty() {
		delete(m.st, key)
		delete(m.p, key)
	} else {
		m.st[key] = normState(next)
		m.p[key] = p
	}
	return got
}

// spy wraps op: every call must be handed want, for id, with p at now (a
// store may call op more than once, as when it retries a transaction).
func spy(t *testing.T, what string, want slots.State, id string, p slots.Params, now time.Time, op store.SlotOp) store.SlotOp {
	return func(st slots.State, gotID string, gotP slots.Params, gotNow time.Time) (slots.State, slots.Decision, error) {
		// Errorf, not Fatalf: op may run on another goroutine.
		if got := normState(st); !reflect.DeepEqual(got, want) {
			t.Errorf("%s handed the operation the window %s, want %s", what, showState(got), showState(want))
		}
		if gotID != id || gotP != p || !gotNow.Equal(now) {
			t.Errorf("%s called the operation with (%q, %+v, %s), want (%q, %+v, %s)", what, gotID, gotP, at(gotNow), id, p, at(now))
		}
		return op(st, gotID, gotP, gotNow)
	}
}

// check fails unless SlotKeys and SlotLine show the model: every key
// (SlotKeys in pages of 3, and under prefix), and the line of each key in
// lines.
func (m *slotModel) check(t *testing.T, h *harness, prefix string, lines ...string) {
	t.Helper()
	var want []store.SlotKey
	for key, st := range m.st {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		k := store.SlotKey{Key: key, Limit: m.p[key].Limit, Policy: m.p[key].Policy, Holders: st.Holders, Waiting: len(st.Waiters)}
		if len(st.Waiters) > 0 {
			k.OldestWait = st.Waiters[0].Since
		}
		want = append(want, normSlotKey(k))
	}
	slices.SortFunc(want, func(a, b store.SlotKey) int { return strings.Compare(a.Key, b.Key) })
	if got := h.slotKeys(t, prefix, 3); !reflect.DeepEqual(got, want) {
		t.Fatalf("SlotKeys(%q) = %s\nwant %s", prefix, showKeys(got), showKeys(want))
	}
	for _, key := range lines {
		got, want := h.slotLine(t, key, 4), normWaiters(m.state(key).Waiters)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("SlotLine(%q) = %s\nwant %s", key, showWaiters(got), showWaiters(want))
		}
	}
}

// slotKeys reads every page of SlotKeys under prefix, limit keys a page.
func (h *harness) slotKeys(t *testing.T, prefix string, limit int) []store.SlotKey {
	t.Helper()
	var out []store.SlotKey
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("SlotKeys(%q): more than 1,000 pages", prefix)
		}
		items, next, err := h.s.SlotKeys(ctx(t), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("SlotKeys(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(items) > limit {
			t.Fatalf("SlotKeys(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(items))
		}
		for _, k := range items {
			out = append(out, normSlotKey(k))
		}
		if next == "" {
			return out
		}
		if len(items) == 0 {
			t.Fatalf("SlotKeys(%q, %q, %d): an empty page with a next cursor %q", prefix, cursor, limit, next)
		}
		cursor = next
	}
}

// slotLine reads every page of key's line, limit waiters a page.
func (h *harness) slotLine(t *testing.T, key string, limit int) []slots.Waiter {
	t.Helper()
	var out []slots.Waiter
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatalf("SlotLine(%q): more than 100,000 pages", key)
		}
		items, next, err := h.s.SlotLine(ctx(t), key, cursor, limit)
		if err != nil {
			t.Fatalf("SlotLine(%q, %q, %d): %v", key, cursor, limit, err)
		}
		if len(items) > limit {
			t.Fatalf("SlotLine(%q, %q, %d) returned %d waiters", key, cursor, limit, len(items))
		}
		out = append(out, items...)
		if next == "" {
			return normWaiters(out)
		}
		if len(items) == 0 {
			t.Fatalf("SlotLine(%q, %q, %d): an empty page with a next cursor %q", key, cursor, limit, next)
		}
		cursor = next
	}
}

// slotKey returns SlotKeys' entry for key, or nil when it lists none.
func (h *harness) slotKey(t *testing.T, key string) *store.SlotKey {
	t.Helper()
	for _, k := range h.slotKeys(t, key, 10) {
		if k.Key == key {
			return &k
		}
	}
	return nil
}

// update runs UpdateSlots and fails the test on error.
func (h *harness) update(t *testing.T, key, id string, p slots.Params, now time.Time, op store.SlotOp) slots.Decision {
	t.Helper()
	d, err := h.s.UpdateSlots(ctx(t), key, id, p, now, op)
	if err != nil {
		t.Fatalf("UpdateSlots(%q, %q, %+v, %s): %v", key, id, p, at(now), err)
	}
	return d
}

// The operations the random runs pick from.
var slotOps = []struct {
	name string
	op   store.SlotOp
}{
	{"acquire", slots.Acquire},
	{"release", slots.Release},
	{"renew", slots.Renew},
	{"expire", store.ExpireSlots},
}

// testSlotsModel drives a few keys with random operations, limits,
// policies, leases and times (whole milliseconds; some steps go back, as
// the clocks of a cluster's nodes disagree), and compares the store with
// the model after every step: the Decisions, the windows, SlotKeys (all
// keys and a prefix) and the line of the key the step touched.
func testSlotsModel(t *testing.T, h *harness) {
	keys := []string{"wf/a", "wf/b", "step/a"}
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	policies := []slots.Policy{slots.Queue, slots.CancelNewest, slots.CancelOldest}
	// Mostly acquisitions and long leases, so that lines grow longer than
	// their windows; short leases and long steps, so that some expire.
	ops := []int{0, 0, 0, 0, 1, 1, 1, 2, 2, 3}
	leases := []time.Duration{2 * time.Second, 5 * time.Second, 30 * time.Second, time.Hour, time.Hour}
	steps := []time.Duration{0, 0, time.Millisecond, 999 * time.Millisecond, time.Second, 2 * time.Second, -2 * time.Second, 10 * time.Second}
	partial := 0 // steps whose window was not the whole State
	for seed := range uint64(4) {
		// Keys of their own for each run, so that the runs are apart.
		m := newSlotModel()
		r := rand.New(rand.NewPCG(seed, 35))
		now := Epoch.Add(time.Duration(seed) * time.Hour)
		// Even runs keep one limit and policy per key, as one definition
		// would (the first key queues); odd runs change them at every
		// call.
		fixed := map[string]slots.Params{}
		for i, k := range keys {
			fixed[k] = slots.Params{Limit: 1 + r.IntN(3), Policy: policies[r.IntN(3)]}
			if i == 0 {
				fixed[k] = slots.Params{Limit: 1 + r.IntN(2), Policy: slots.Queue}
			}
		}
		for step := range 150 {
			k := keys[r.IntN(len(keys))]
			key := fmt.Sprintf("run%d/%s", seed, k)
			id := ids[r.IntN(len(ids))]
			o := slotOps[ops[r.IntN(len(ops))]]
			p := slots.Params{Limit: 1 + r.IntN(3), Policy: policies[r.IntN(3)], Lease: leases[r.IntN(len(leases))]}
			if seed%2 == 0 {
				p.Limit, p.Policy = fixed[k].Limit, fixed[k].Policy
			}
			now = now.Add(steps[r.IntN(len(steps))])
			t.Logf("run %d step %d: %s %q on %q with %+v at %s", seed, step, o.name, id, key, p, at(now))
			if whole := normState(m.state(key)); !reflect.DeepEqual(window(whole, id, p), whole) {
				partial++
			}
			m.apply(t, h, key, id, p, now, o.op)
			m.check(t, h, fmt.Sprintf("run%d/", seed), key)
			m.check(t, h, fmt.Sprintf("run%d/wf/", seed))
		}
	}
	// The runs are seeded: this checks the suite, not the store.
	if partial < 20 {
		t.Errorf("only %d steps were handed less than the whole State: the runs do not test the windows", partial)
	}
}

// testSlotsRace has 200 callers acquire one key of limit 3 at once: 3 are
// granted and 197 wait. Then the holders release one at a time, and each
// release promotes exactly the first of the line, never more than 3
// holding.
func testSlotsRace(t *testing.T, h *harness) {
	const n, limit = 200, 3
	p := slots.Params{Limit: limit, Policy: slots.Queue, Lease: time.Hour}
	const key = "pool"
	ds := make([]slots.Decision, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			ds[i], errs[i] = h.s.UpdateSlots(ctx(t), key, fmt.Sprintf("i%03d", i), p, Epoch, slots.Acquire)
		})
	}
	close(start)
	wg.Wait()
	var granted, waiting []string
	for i, d := range ds {
		id := fmt.Sprintf("i%03d", i)
		if errs[i] != nil {
			t.Fatalf("Acquire %s: %v", id, errs[i])
		}
		if len(d.Promoted) > 0 || len(d.Expired) > 0 || len(d.Cancel) > 0 {
			t.Errorf("Acquire %s = %s: a grant or a wait, nothing else", id, showDecision(d))
		}
		switch d.Outcome {
		case slots.Granted:
			granted = append(granted, id)
		case slots.Waiting:
			waiting = append(waiting, id)
		default:
			t.Fatalf("Acquire %s: outcome %q", id, d.Outcome)
		}
	}
	if len(granted) != limit || len(waiting) != n-limit {
		t.Fatalf("%d granted and %d waiting, want %d and %d", len(granted), len(waiting), limit, n-limit)
	}
	k := h.slotKey(t, key)
	if k == nil || k.Waiting != n-limit || !slices.Equal(sortedIDs(holderIDs(k.Holders)), granted) {
		t.Fatalf("SlotKeys shows %+v, want holders %v and %d waiting", k, granted, n-limit)
	}
	line := waiterIDs(h.slotLine(t, key, 50))
	if !slices.Equal(sortedIDs(line), waiting) {
		t.Fatalf("SlotLine lists %d ids %v, want the %d waiting %v", len(line), line, len(waiting), waiting)
	}

	// Release the holders one at a time, oldest first; each release
	// promotes the first of the line.
	now := Epoch
	for served := 0; ; served++ {
		k := h.slotKey(t, key)
		if k == nil {
			if len(line) > 0 {
				t.Fatalf("the key is gone with %d waiting", len(line))
			}
			if served != n {
				t.Fatalf("%d served, want %d", served, n)
			}
			return
		}
		if len(k.Holders) > limit || (len(line) > 0 && len(k.Holders) != limit) || k.Waiting != len(line) {
			t.Fatalf("after %d releases: %d hold and %d wait (the line lists %d), with limit %d", served, len(k.Holders), k.Waiting, len(line), limit)
		}
		now = now.Add(time.Millisecond)
		first := k.Holders[0].ID
		d := h.update(t, key, first, p, now, slots.Release)
		var want []string
		if len(line) > 0 {
			want, line = line[:1], line[1:]
		}
		if d.Outcome != slots.Released || !slices.Equal(grantIDs(d.Promoted), want) {
			t.Fatalf("Release %s = %s, want released and %v promoted", first, showDecision(d), want)
		}
		if got := waiterIDs(h.slotLine(t, key, 1000)); !slices.Equal(got, line) {
			t.Fatalf("after releasing %s, the line is %v, want %v", first, got, line)
		}
	}
}

// testSlotsLongLine builds a line of 3,000 waiters, pages through it, and
// checks that an operation is handed its window, never the whole line: a
// waiter far back that acquires again waits and changes nothing, a waiter
// in the middle that releases leaves it, a released holder's slot goes to
// the first.
func testSlotsLongLine(t *testing.T, h *harness) {
	const key, waves, perWave = "long", 30, 100
	p := slots.Params{Limit: 2, Policy: slots.Queue, Lease: time.Hour}
	for _, id := range []string{"h1", "h2"} {
		if d := h.update(t, key, id, p, Epoch, slots.Acquire); d.Outcome != slots.Granted {
			t.Fatalf("Acquire %s: %s", id, showDecision(d))
		}
	}
	// The line is built in waves of concurrent callers: the order within
	// a wave is the store's, the waves follow each other.
	waveOf := map[string]int{}
	for w := range waves {
		now := Epoch.Add(time.Duration(1+w) * time.Millisecond)
		var wg sync.WaitGroup
		errs := make([]error, perWave)
		outs := make([]slots.Outcome, perWave)
		for i := range perWave {
			id := fmt.Sprintf("w%02d-%03d", w, i)
			waveOf[id] = w
			wg.Go(func() {
				var d slots.Decision
				d, errs[i] = h.s.UpdateSlots(ctx(t), key, id, p, now, slots.Acquire)
				outs[i] = d.Outcome
			})
		}
		wg.Wait()
		for i := range perWave {
			if errs[i] != nil || outs[i] != slots.Waiting {
				t.Fatalf("Acquire w%02d-%03d: %s, %v", w, i, outs[i], errs[i])
			}
		}
	}

	// Small pages and large ones list the same line: every waiter once,
	// the waves in order, each with its wave's time.
	line := h.slotLine(t, key, 7)
	if big := h.slotLine(t, key, 1000); !reflect.DeepEqual(big, line) {
		t.Fatalf("SlotLine in pages of 1000 differs from pages of 7")
	}
	if len(line) != waves*perWave {
		t.Fatalf("SlotLine lists %d waiters, want %d", len(line), waves*perWave)
	}
	seen := map[string]bool{}
	for i, w := range line {
		wave, ok := waveOf[w.ID]
		if !ok || seen[w.ID] {
			t.Fatalf("waiter %d of the line is %q: unknown or listed twice", i, w.ID)
		}
		seen[w.ID] = true
		if i > 0 && wave < waveOf[line[i-1].ID] {
			t.Fatalf("waiter %d of the line, %s, came before waiter %d, %s", i, w.ID, i-1, line[i-1].ID)
		}
		if !w.Since.Equal(Epoch.Add(time.Duration(1+wave) * time.Millisecond)) {
			t.Fatalf("waiter %s waits since %s, want its wave's time", w.ID, at(w.Since))
		}
	}

	// From here on the model knows the whole State, and checks each
	// window.
	m := newSlotModel()
	now := Epoch.Add(time.Second)
	m.st[key] = normState(slots.State{Key: key, Holders: []slots.Holder{
		{ID: "h1", Since: Epoch, Expiry: Epoch.Add(time.Hour)},
		{ID: "h2", Since: Epoch, Expiry: Epoch.Add(time.Hour)},
	}, Waiters: line})
	m.p[key] = p
	m.check(t, h, key)

	far := line[2900].ID
	if d := m.apply(t, h, key, far, p, now, slots.Acquire); d.Outcome != slots.Waiting {
		t.Fatalf("Acquire of %s, far back: %s", far, showDecision(d))
	}
	if d := m.apply(t, h, key, line[2999].ID, p, now, slots.Renew); d.Outcome != slots.Waiting {
		t.Fatalf("Renew of the last waiter: %s", showDecision(d))
	}
	mid := line[1500].ID
	if d := m.apply(t, h, key, mid, p, now, slots.Release); d.Outcome != slots.Left {
		t.Fatalf("Release of %s, in the middle: %s", mid, showDecision(d))
	}
	if d := m.apply(t, h, key, "h1", p, now, slots.Release); d.Outcome != slots.Released || !slices.Equal(grantIDs(d.Promoted), []string{line[0].ID}) {
		t.Fatalf("Release of h1: %s, want %s promoted", showDecision(d), line[0].ID)
	}
	if d := m.apply(t, h, key, "late", p, now, slots.Acquire); d.Outcome != slots.Waiting {
		t.Fatalf("Acquire of a newcomer: %s", showDecision(d))
	}
	// A raised limit promotes from the front; a lowered one waits.
	up := slots.Params{Limit: 5, Policy: slots.Queue, Lease: time.Hour}
	if d := m.apply(t, h, key, line[1].ID, up, now, slots.Acquire); d.Outcome != slots.Granted || len(d.Promoted) != 2 {
		t.Fatalf("Acquire of %s with limit 5: %s", line[1].ID, showDecision(d))
	}
	m.apply(t, h, key, "h2", p, now, slots.Release)
	m.check(t, h, key, key)
	// The holders' leases end, and the first waiter leaves the line in
	// the same call: the next two are promoted.
	first := m.st[key].Waiters[0].ID
	if d := m.apply(t, h, key, first, p, Epoch.Add(2*time.Hour), slots.Release); d.Outcome != slots.Left || len(d.Expired) != 4 || len(d.Promoted) != 2 {
		t.Fatalf("Release of %s, first in line, as every lease ended: %s", first, showDecision(d))
	}
	m.check(t, h, key, key)
	// The sweep hands the slots of expired leases to the front.
	m.apply(t, h, key, "sweeper", p, Epoch.Add(4*time.Hour), store.ExpireSlots)
	m.check(t, h, key, key)
}

// testSlotsLineCursor checks that a cursor of SlotLine goes on after the
// waiter it ended with, though waiters left the line since.
func testSlotsLineCursor(t *testing.T, h *harness) {
	const key = "cursor"
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	h.update(t, key, "holder", p, Epoch, slots.Acquire)
	var ids []string
	for i := range 30 {
		id := fmt.Sprintf("w%02d", i)
		ids = append(ids, id)
		h.update(t, key, id, p, Epoch.Add(time.Duration(i)*time.Millisecond), slots.Acquire)
	}
	page, next, err := h.s.SlotLine(ctx(t), key, "", 10)
	must(t, "SlotLine", err)
	if !slices.Equal(waiterIDs(page), ids[:10]) || next == "" {
		t.Fatalf("first page = %v, next %q; want %v and a cursor", waiterIDs(page), next, ids[:10])
	}
	// The last waiter of the page, one before it and one after it leave;
	// the holder's release promotes the first; a newcomer joins.
	for _, id := range []string{ids[9], ids[5], ids[12], "holder"} {
		h.update(t, key, id, p, Epoch.Add(time.Second), slots.Release)
	}
	h.update(t, key, "w30", p, Epoch.Add(time.Second), slots.Acquire)
	page, next, err = h.s.SlotLine(ctx(t), key, next, 5)
	must(t, "SlotLine after the cursor", err)
	if want := []string{"w10", "w11", "w13", "w14", "w15"}; !slices.Equal(waiterIDs(page), want) || next == "" {
		t.Fatalf("page after the cursor = %v, next %q; want %v and a cursor", waiterIDs(page), next, want)
	}
	var rest []string
	for next != "" {
		page, next, err = h.s.SlotLine(ctx(t), key, next, 5)
		must(t, "SlotLine", err)
		rest = append(rest, waiterIDs(page)...)
	}
	if want := append(slices.Clone(ids[16:]), "w30"); !slices.Equal(rest, want) {
		t.Fatalf("the rest of the line = %v, want %v", rest, want)
	}
	if got := waiterIDs(h.slotLine(t, key, 100)); got[0] != "w01" || len(got) != 27 {
		t.Fatalf("the line = %v: want 27 waiters from w01", got)
	}
	page, next, err = h.s.SlotLine(ctx(t), "nobody-waits", "", 10)
	if err != nil || len(page) != 0 || next != "" {
		t.Fatalf("SlotLine of an unknown key = %v, %q, %v; want an empty page", page, next, err)
	}
}

// testSlotKeys checks SlotKeys' prefix, order and pages, and that keys
// left empty are gone.
func testSlotKeys(t *testing.T, h *harness) {
	m := newSlotModel()
	p := slots.Params{Limit: 1, Policy: slots.CancelNewest, Lease: time.Minute}
	keys := []string{"wf/b", "wf/a/2", "other", "wf/a", "wf/ab", "wf/a/1", "wf", "wf/é", "wf/a\x00z"}
	for i, key := range keys {
		m.apply(t, h, key, "x", p, Epoch.Add(time.Duration(i)*time.Millisecond), slots.Acquire)
	}
	m.apply(t, h, "wf/a/1", "y", slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Minute}, Epoch.Add(time.Second), slots.Acquire)
	for _, prefix := range []string{"", "wf", "wf/", "wf/a", "wf/a/", "wf/é", "w", "zzz", "wf/a\x00"} {
		m.check(t, h, prefix)
	}
	byKey := func(prefix string, limit int) []string {
		var out []string
		for _, k := range h.slotKeys(t, prefix, limit) {
			out = append(out, k.Key)
		}
		return out
	}
	wantStrings(t, `keys under "wf/a" in pages of 1`, byKey("wf/a", 1), []string{"wf/a", "wf/a\x00z", "wf/a/1", "wf/a/2", "wf/ab"})
	wantStrings(t, "every key in pages of 2", byKey("", 2), []string{"other", "wf", "wf/a", "wf/a\x00z", "wf/a/1", "wf/a/2", "wf/ab", "wf/b", "wf/é"})

	// A cursor goes on after the key it ended with, though keys changed.
	page, next, err := h.s.SlotKeys(ctx(t), "wf/", "", 2)
	must(t, "SlotKeys", err)
	if len(page) != 2 || page[1].Key != "wf/a\x00z" || next == "" {
		t.Fatalf("first page of 2 under wf/ = %v, next %q", page, next)
	}
	m.apply(t, h, "wf/a\x00z", "x", p, Epoch.Add(time.Minute-time.Second), slots.Release)
	m.apply(t, h, "wf/a/2", "x", p, Epoch.Add(time.Minute-time.Second), slots.Release)
	m.apply(t, h, "wf/a/3", "x", p, Epoch.Add(time.Minute-time.Second), slots.Acquire)
	var rest []string
	for next != "" {
		page, next, err = h.s.SlotKeys(ctx(t), "wf/", next, 2)
		must(t, "SlotKeys", err)
		for _, k := range page {
			rest = append(rest, k.Key)
		}
	}
	wantStrings(t, "keys after the cursor", rest, []string{"wf/a/1", "wf/a/3", "wf/ab", "wf/b", "wf/é"})

	// Keys left empty are gone: released, or their leases expired.
	m.apply(t, h, "wf/b", "x", p, Epoch.Add(time.Minute-time.Second), slots.Release)
	m.check(t, h, "")
	// The first sweep promotes the waiter of wf/a/1; the second ends its
	// lease too.
	for _, now := range []time.Time{Epoch.Add(time.Hour), Epoch.Add(2 * time.Hour)} {
		for _, key := range slices.Sorted(maps.Keys(m.st)) {
			m.apply(t, h, key, "sweeper", p, now, store.ExpireSlots)
		}
		m.check(t, h, "")
	}
	if len(m.st) != 0 {
		t.Fatalf("the model keeps %v after every lease ended", m.st)
	}
}

// testSlotsDurability checks that holders (a flagged one among them), the
// line and the terms survive a reopen, and that the line goes on after
// it.
func testSlotsDurability(t *testing.T, h *harness) {
	m := newSlotModel()
	oldest := slots.Params{Limit: 2, Policy: slots.CancelOldest, Lease: time.Hour}
	queue := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	for i, id := range []string{"a", "b", "c", "d"} {
		m.apply(t, h, "latest", id, oldest, Epoch.Add(time.Duration(i)*time.Millisecond), slots.Acquire)
	}
	for i, id := range []string{"a", "b", "c", "d"} {
		m.apply(t, h, "fifo", id, queue, Epoch.Add(time.Duration(i)*time.Millisecond), slots.Acquire)
	}
	m.apply(t, h, "fifo", "b", queue, Epoch.Add(time.Second), slots.Release)
	if st := m.st["latest"]; len(st.Holders) != 2 || !st.Holders[0].Cancelling || len(st.Waiters) != 2 {
		t.Fatalf("the model's cancel_oldest key is %s: want 2 holders, 1 flagged, and 2 waiting", showState(st))
	}
	m.check(t, h, "", "latest", "fifo")

	h.s = h.reopen()
	m.check(t, h, "", "latest", "fifo")
	m.apply(t, h, "fifo", "e", queue, Epoch.Add(2*time.Second), slots.Acquire)
	m.apply(t, h, "fifo", "a", queue, Epoch.Add(2*time.Second), slots.Release)
	m.apply(t, h, "latest", "a", oldest, Epoch.Add(2*time.Second), slots.Release)
	m.check(t, h, "", "latest", "fifo")
}

// testSlotsInvalid checks the arguments UpdateSlots, SlotKeys and
// SlotLine refuse: ErrInvalid, without calling the operation.
func testSlotsInvalid(t *testing.T, h *harness) {
	p := slots.Params{Limit: 1, Lease: time.Minute}
	calls := 0
	op := func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		calls++
		return slots.Acquire(st, id, p, now)
	}
	for _, tt := range []struct{ name, key, id string }{
		{"an empty key", "", "a"},
		{"a key too long", strings.Repeat("k", store.MaxSlotKeyLen+1), "a"},
		{"an empty id", "k", ""},
		{"an id too long", "k", strings.Repeat("i", weft.MaxIDLen+1)},
	} {
		_, err := h.s.UpdateSlots(ctx(t), tt.key, tt.id, p, Epoch, op)
		wantErr(t, "UpdateSlots with "+tt.name, err, weft.ErrInvalid)
	}
	if calls != 0 {
		t.Errorf("the operation ran %d times for refused arguments", calls)
	}
	if ks := h.slotKeys(t, "", 10); len(ks) != 0 {
		t.Errorf("refused calls left keys %s", showKeys(ks))
	}
	// The longest key and id are taken.
	long, longID := strings.Repeat("k", store.MaxSlotKeyLen), strings.Repeat("i", weft.MaxIDLen)
	if d := h.update(t, long, longID, p, Epoch, slots.Acquire); d.Outcome != slots.Granted {
		t.Fatalf("Acquire on the longest key: %s", showDecision(d))
	}
	if k := h.slotKey(t, long); k == nil || len(k.Holders) != 1 || k.Holders[0].ID != longID {
		t.Fatalf("SlotKeys shows %+v for the longest key", k)
	}
	_, _, err := h.s.SlotLine(ctx(t), "", "", 10)
	wantErr(t, "SlotLine of an empty key", err, weft.ErrInvalid)
	_, _, err = h.s.SlotLine(ctx(t), "k", "!!bad!!", 10)
	wantErr(t, "SlotLine with a bad cursor", err, weft.ErrInvalid)
	_, _, err = h.s.SlotKeys(ctx(t), "", "!!bad!!", 10)
	wantErr(t, "SlotKeys with a bad cursor", err, weft.ErrInvalid)
}

// errOp is what testSlotsOpError's operation fails with.
var errOp = errors.New("the operation failed")

// testSlotsOpError checks that an operation's error comes back as it is
// and that nothing is written: not the State the operation returned with
// it, not the terms.
func testSlotsOpError(t *testing.T, h *harness) {
	m := newSlotModel()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	m.apply(t, h, "k", "a", p, Epoch, slots.Acquire)
	m.apply(t, h, "k", "b", p, Epoch, slots.Acquire)
	failing := func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		next, _, _ := slots.Release(st, "a", p, now)
		next, d, _ := slots.Acquire(next, id, p, now)
		return next, d, fmt.Errorf("wrapped: %w", errOp)
	}
	other := slots.Params{Limit: 3, Policy: slots.CancelNewest, Lease: time.Minute}
	for _, key := range []string{"k", "new"} {
		_, err := h.s.UpdateSlots(ctx(t), key, "c", other, Epoch.Add(time.Second), failing)
		wantErr(t, "UpdateSlots of a failing operation on "+key, err, errOp)
	}
	m.check(t, h, "", "k", "new")
	// The operations' own refusals come back the same way.
	_, err := h.s.UpdateSlots(ctx(t), "k", "c", slots.Params{Limit: 0, Lease: time.Hour}, Epoch, slots.Acquire)
	wantErr(t, "Acquire with limit 0", err, slots.ErrLimit)
	_, err = h.s.UpdateSlots(ctx(t), "k", "c", slots.Params{Limit: 1, Policy: "lifo", Lease: time.Hour}, Epoch, slots.Acquire)
	wantErr(t, "Acquire with an unknown policy", err, slots.ErrPolicy)
	m.check(t, h, "", "k")
	m.apply(t, h, "k", "a", p, Epoch.Add(2*time.Second), slots.Release)
	m.check(t, h, "", "k")
}

func testSlotsCancelledContext(t *testing.T, h *harness) {
	m := newSlotModel()
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	m.apply(t, h, "k", "a", p, Epoch, slots.Acquire)
	m.apply(t, h, "k", "b", p, Epoch, slots.Acquire)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := 0
	op := func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		calls++
		return slots.Release(st, id, p, now)
	}
	for _, tt := range []struct {
		name string
		call func() error
	}{
		{"UpdateSlots", func() error { _, err := h.s.UpdateSlots(c, "k", "a", p, Epoch, op); return err }},
		{"SlotKeys", func() error { _, _, err := h.s.SlotKeys(c, "", "", 10); return err }},
		{"SlotLine", func() error { _, _, err := h.s.SlotLine(c, "k", "", 10); return err }},
	} {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	if calls != 0 {
		t.Errorf("the operation ran %d times with a cancelled context", calls)
	}
	m.check(t, h, "", "k")
}

func testSlotsClosed(t *testing.T, h *harness) {
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	h.update(t, "k", "a", p, Epoch, slots.Acquire)
	must(t, "Close", h.s.Close())
	_, err := h.s.UpdateSlots(ctx(t), "k", "b", p, Epoch, slots.Acquire)
	wantErr(t, "UpdateSlots after Close", err, weft.ErrClosed)
	_, _, err = h.s.SlotKeys(ctx(t), "", "", 10)
	wantErr(t, "SlotKeys after Close", err, weft.ErrClosed)
	_, _, err = h.s.SlotLine(ctx(t), "k", "", 10)
	wantErr(t, "SlotLine after Close", err, weft.ErrClosed)
}

// The normal forms the suite compares: times in UTC (a store may return
// them in another location), empty lists as nil.

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func normHolders(hs []slots.Holder) []slots.Holder {
	if len(hs) == 0 {
		return nil
	}
	out := make([]slots.Holder, len(hs))
	for i, h := range hs {
		out[i] = slots.Holder{ID: h.ID, Since: normTime(h.Since), Expiry: normTime(h.Expiry), Cancelling: h.Cancelling}
	}
	return out
}

func normWaiters(ws []slots.Waiter) []slots.Waiter {
	if len(ws) == 0 {
		return nil
	}
	out := make([]slots.Waiter, len(ws))
	for i, w := range ws {
		out[i] = slots.Waiter{ID: w.ID, Since: normTime(w.Since)}
	}
	return out
}

func normState(st slots.State) slots.State {
	return slots.State{Key: st.Key, Holders: normHolders(st.Holders), Waiters: normWaiters(st.Waiters)}
}

func normSlotKey(k store.SlotKey) store.SlotKey {
	k.Holders = normHolders(k.Holders)
	k.OldestWait = normTime(k.OldestWait)
	return k
}

func normDecision(d slots.Decision) slots.Decision {
	out := slots.Decision{Outcome: d.Outcome, Expiry: normTime(d.Expiry)}
	if len(d.Expired) > 0 {
		out.Expired = slices.Clone(d.Expired)
	}
	for _, g := range d.Promoted {
		out.Promoted = append(out.Promoted, slots.Grant{ID: g.ID, Expiry: normTime(g.Expiry)})
	}
	if len(d.Cancel) > 0 {
		out.Cancel = slices.Clone(d.Cancel)
	}
	return out
}

// at prints a time as its offset from Epoch.
func at(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(Epoch).String()
}

func showHolders(hs []slots.Holder) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s[%s..%s", h.ID, at(h.Since), at(h.Expiry))
		if h.Cancelling {
			b.WriteString(" cancelling")
		}
		b.WriteString("]")
	}
	return b.String()
}

func showWaiters(ws []slots.Waiter) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString(" ")
		}
		if i == 20 && len(ws) > 21 {
			fmt.Fprintf(&b, "… %d more", len(ws)-20)
			break
		}
		fmt.Fprintf(&b, "%s@%s", w.ID, at(w.Since))
	}
	return b.String()
}

func showState(st slots.State) string {
	return fmt.Sprintf("{key %q holders [%s] waiters [%s]}", st.Key, showHolders(st.Holders), showWaiters(st.Waiters))
}

func showKeys(ks []store.SlotKey) string {
	var b strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&b, "\n  %q limit %d %s holders [%s] waiting %d oldest %s", k.Key, k.Limit, k.Policy, showHolders(k.Holders), k.Waiting, at(k.OldestWait))
	}
	return b.String()
}

func showDecision(d slots.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{%s", d.Outcome)
	if !d.Expiry.IsZero() {
		fmt.Fprintf(&b, " until %s", at(d.Expiry))
	}
	if len(d.Expired) > 0 {
		fmt.Fprintf(&b, " expired %v", d.Expired)
	}
	for _, g := range d.Promoted {
		fmt.Fprintf(&b, " promoted %s until %s", g.ID, at(g.Expiry))
	}
	for _, c := range d.Cancel {
		fmt.Fprintf(&b, " cancel %s", c.ID)
		if c.Holding {
			b.WriteString(" (holding)")
		}
	}
	b.WriteString("}")
	return b.String()
}

func holderIDs(hs []slots.Holder) []string {
	var ids []string
	for _, h := range hs {
		ids = append(ids, h.ID)
	}
	return ids
}

func waiterIDs(ws []slots.Waiter) []string {
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

func grantIDs(gs []slots.Grant) []string {
	var ids []string
	for _, g := range gs {
		ids = append(ids, g.ID)
	}
	return ids
}

func sortedIDs(ids []string) []string { return slices.Sorted(slices.Values(ids)) }

// testSlotsWithCommit: a Commit's SlotChange is applied when the commit
// succeeds, with its decision set, and not at all when it is refused.
func testSlotsWithCommit(t *testing.T, h *harness) {
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	change := func(id string, op store.SlotOp) *store.SlotChange {
		return &store.SlotChange{Key: "wf/c/k", ID: id, Params: p, Now: Epoch, Op: op}
	}
	holders := func() []string {
		t.Helper()
		page, _, err := h.s.SlotKeys(ctx(t), "wf/c/", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range page {
			for _, hd := range k.Holders {
				ids = append(ids, hd.ID)
			}
		}
		return ids
	}
	// A create that asks for the slot gets it.
	a := instance("a", "c")
	ca := change("a", slots.Acquire)
	h.commit(t, store.Commit{Instance: a, Slot: ca})
	if ca.Decision.Outcome != slots.Granted || ca.Err != nil {
		t.Fatalf("create a: %+v, %v; want granted", ca.Decision, ca.Err)
	}
	// The next waits in the line.
	b := instance("b", "c")
	cb := change("b", slots.Acquire)
	h.commit(t, store.Commit{Instance: b, Slot: cb})
	if cb.Decision.Outcome != slots.Waiting {
		t.Fatalf("create b: %+v; want waiting", cb.Decision)
	}
	// A refused commit (the id exists) changes no slot.
	dup := instance("a", "c")
	cd := change("x", slots.Acquire)
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: dup, Slot: cd}); !errors.Is(err, weft.ErrExists) {
		t.Fatalf("a second create of a: %v, want ErrExists", err)
	}
	if line, _, err := h.s.SlotLine(ctx(t), "wf/c/k", "", 10); err != nil || len(line) != 1 || line[0].ID != "b" {
		t.Fatalf("line after a refused commit: %v, %v; want b alone", line, err)
	}
	// The commit that finishes a gives its slot back, and b is promoted.
	done := h.get(t, "a")
	done.Status = weft.StatusCompleted
	cr := change("a", slots.Release)
	h.commit(t, store.Commit{Instance: done, Slot: cr})
	if cr.Decision.Outcome != slots.Released || len(cr.Decision.Promoted) != 1 || cr.Decision.Promoted[0].ID != "b" {
		t.Fatalf("finishing a: %+v; want released, b promoted", cr.Decision)
	}
	if got := holders(); len(got) != 1 || got[0] != "b" {
		t.Fatalf("holders %v, want b", got)
	}
	// A malformed change refuses the commit, which writes nothing.
	bad := h.get(t, "b")
	bad.Status = weft.StatusRunning
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: bad, Slot: &store.SlotChange{Key: "", ID: "b", Params: p, Op: slots.Release}}); !errors.Is(err, weft.ErrInvalid) {
		t.Fatalf("a commit with an empty slot key: %v, want ErrInvalid", err)
	}
	if got := h.get(t, "b"); got.Status != weft.StatusPending {
		t.Fatalf("b is %s after a refused commit", got.Status)
	}
}
