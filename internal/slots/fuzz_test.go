package slots_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/slots"
)

// FuzzSlots runs random sequences of operations (fuzzOp decodes them from
// the bytes) with random limits, policies and leases on one key, and
// checks the invariants of the package documentation after every step
// (checker.step). The committed corpus is under testdata/fuzz/FuzzSlots.
func FuzzSlots(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0x10, 0, 1, 0, 0x10, 0, 2, 0, 0x10, 1, 0, 0, 0x11})
	f.Add([]byte{0, 0, 1, 0x08, 0, 1, 1, 0x08, 0, 2, 1, 0x08, 0, 3, 9, 0x08, 3, 0, 1, 0x07})
	f.Add([]byte{0, 0, 5, 0x20, 0, 1, 5, 0x20, 0, 2, 4, 0x20, 0, 3, 8, 0x21, 2, 0, 8, 0x22, 1, 1, 8, 0x05})
	f.Fuzz(func(t *testing.T, data []byte) {
		run(t, data)
	})
}

// TestRandomRuns is FuzzSlots's check over many seeded random sequences,
// so that every `go test` explores more than the corpus.
func TestRandomRuns(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 35))
		data := make([]byte, 4*(1+r.IntN(200)))
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		// Half the runs keep one limit and policy throughout, as one
		// definition would; the others change them at every call.
		if seed%2 == 0 {
			for i := 2; i < len(data); i += 4 {
				data[i] = data[2]
			}
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { run(t, data) })
	}
}

// ids are the holders of the runs: few, so that they meet often.
var ids = []string{"a", "b", "c", "d", "e", "f"}

// fuzzOp is one operation decoded from 4 bytes:
//
//	byte 0: the operation (mod 4): acquire, release, renew, expire
//	byte 1: the id (mod 6)
//	byte 2: the limit, 1 + (b mod 4); the policy, (b / 4) mod 3
//	byte 3: the time step, steps[b mod 8] (one of them goes back 2s:
//	        the nodes of a cluster disagree on the time);
//	        the lease, leases[(b / 8) mod 8]
//
// Steps and leases of whole seconds make calls land exactly on expiries;
// most steps are short and most leases long, so that holders stay long
// enough for lines, promotions and cancellations to build up.
type fuzzOp struct {
	kind int
	id   string
	p    slots.Params
	step time.Duration
}

// The time steps and leases that fuzzOp picks from.
var (
	steps  = []time.Duration{0, 0, -2 * time.Second, time.Second, time.Second, 2 * time.Second, 3 * time.Second, 10 * time.Second}
	leases = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute, time.Hour}
)

// decode reads the operations of data, at most 512.
func decode(data []byte) []fuzzOp {
	var ops []fuzzOp
	for i := 0; i+4 <= len(data) && len(ops) < 512; i += 4 {
		b := data[i : i+4]
		ops = append(ops, fuzzOp{
			kind: int(b[0] % 4),
			id:   ids[int(b[1])%len(ids)],
			p: slots.Params{
				Limit:  1 + int(b[2]%4),
				Policy: []slots.Policy{slots.Queue, slots.CancelNewest, slots.CancelOldest}[(b[2]/4)%3],
				Lease:  leases[(b[3]/8)%8],
			},
			step: steps[b[3]%8],
		})
	}
	return ops
}

// run applies the operations of data to one key and checks every step.
func run(t *testing.T, data []byte) {
	c := &checker{t: t, st: slots.State{Key: key}, grantLimit: map[string]int{}, cancelled: map[string]bool{}}
	now := epoch
	for i, op := range decode(data) {
		now = now.Add(op.step)
		c.where = fmt.Sprintf("step %d (%+v at %s)", i, op, offset(now))
		c.step(op, now)
	}
}

// checker follows one key through a run: its State, the limit in force at
// each holder's grant, and who was listed for cancellation while a
// member.
type checker struct {
	t          *testing.T
	where      string
	st         slots.State
	grantLimit map[string]int
	cancelled  map[string]bool
}

// fail stops the run, saying where.
func (c *checker) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("%s: %s\nstate: %+v", c.where, fmt.Sprintf(format, args...), c.st)
}

// step applies op at now and checks the invariants against the State
// before it.
func (c *checker) step(op fuzzOp, now time.Time) {
	c.t.Helper()
	before := clone(c.st)
	var (
		next slots.State
		d    slots.Decision
		err  error
	)
	switch op.kind {
	case 0:
		next, d, err = slots.Acquire(c.st, op.id, op.p, now)
	case 1:
		next, d, err = slots.Release(c.st, op.id, op.p, now)
	case 2:
		next, d, err = slots.Renew(c.st, op.id, op.p, now)
	case 3:
		op.id = ""
		next, d, err = slots.Expire(c.st, op.p, now)
	}
	if err != nil {
		c.fail("refused valid arguments: %v", err)
	}
	if !reflect.DeepEqual(c.st, before) {
		c.fail("the call modified the State it was given")
	}
	lim, lease := op.p.Limit, now.Add(op.p.Lease)

	// No id twice.
	seen := map[string]bool{}
	for _, id := range members(next) {
		if seen[id] {
			c.fail("%s appears twice in %+v", id, next)
		}
		seen[id] = true
	}
	// Every lease ends after now.
	for _, h := range next.Holders {
		if !h.Expiry.After(now) {
			c.fail("holder %s's lease ended at %s, not after now", h.ID, offset(h.Expiry))
		}
	}
	// Nobody waits for a slot the limit allows.
	if len(next.Waiters) > 0 && len(next.Holders) < lim {
		c.fail("%d wait while %d hold a slot under limit %d", len(next.Waiters), len(next.Holders), lim)
	}

	// The sweep expired exactly the leases ended at now, in grant order.
	var expired []string
	for _, h := range before.Holders {
		if !h.Expiry.After(now) {
			expired = append(expired, h.ID)
		}
	}
	if !slices.Equal(d.Expired, expired) {
		c.fail("expired %v, want %v", d.Expired, expired)
	}
	wasHolder := func(id string) bool {
		return slices.ContainsFunc(before.Holders, func(h slots.Holder) bool { return h.ID == id && h.Expiry.After(now) })
	}
	wasWaiter := slices.ContainsFunc(before.Waiters, func(w slots.Waiter) bool { return w.ID == op.id })
	newcomer := op.id != "" && !wasHolder(op.id) && !wasWaiter

	// The holders that stay keep their place, their grant and their flag;
	// only the caller's lease moves, to now+Lease.
	var survivors []slots.Holder
	for _, h := range before.Holders {
		if h.Expiry.After(now) && !(op.kind == 1 && h.ID == op.id) {
			survivors = append(survivors, h)
		}
	}
	if len(next.Holders) < len(survivors) {
		c.fail("holders %v lost some of %v", next.Holders, survivors)
	}
	for i, h := range survivors {
		g := next.Holders[i]
		if g.ID != h.ID || !g.Since.Equal(h.Since) || (h.Cancelling && !g.Cancelling) {
			c.fail("holder %+v became %+v", h, g)
		}
		if !g.Expiry.Equal(h.Expiry) && !(g.ID == op.id && (op.kind == 0 || op.kind == 2) && g.Expiry.Equal(lease)) {
			c.fail("holder %s's lease moved from %s to %s", h.ID, offset(h.Expiry), offset(g.Expiry))
		}
	}
	// The new holders: the front of the line, in order (promotions), and
	// last a newcomer granted at once. A new grant never passes the limit.
	added := next.Holders[len(survivors):]
	for _, h := range added {
		if !h.Since.Equal(now) || !h.Expiry.Equal(lease) {
			c.fail("new holder %+v: want since now and until now+lease", h)
		}
	}
	if len(added) > 0 && len(next.Holders) > lim {
		c.fail("a grant took the holders to %d, past the limit %d", len(next.Holders), lim)
	}
	if newcomer && d.Outcome == slots.Granted {
		if len(added) == 0 || added[len(added)-1].ID != op.id {
			c.fail("the newcomer %s was granted but is not the last holder: %v", op.id, next.Holders)
		}
		added = added[:len(added)-1]
	}
	line := slices.DeleteFunc(slices.Clone(before.Waiters), func(w slots.Waiter) bool {
		return op.kind == 1 && w.ID == op.id
	})
	if len(added) > len(line) {
		c.fail("%d promoted from a line of %d", len(added), len(line))
	}
	var promoted []string
	for i, h := range added {
		if h.ID != line[i].ID {
			c.fail("promoted %s out of turn: line %v", h.ID, line)
		}
		if !(op.kind == 0 && h.ID == op.id) {
			promoted = append(promoted, h.ID)
		}
	}
	var listed []string
	for _, g := range d.Promoted {
		if !g.Expiry.Equal(lease) {
			c.fail("promoted %s until %s, want now+lease", g.ID, offset(g.Expiry))
		}
		listed = append(listed, g.ID)
	}
	if !slices.Equal(listed, promoted) {
		c.fail("decision lists %v as promoted, want %v", listed, promoted)
	}
	// The rest of the line keeps its order: waiters cancelled leave it
	// from the front, a newcomer joins it at the end.
	rest := line[len(added):]
	var cancelledWaiters []slots.Waiter
	for _, cl := range d.Cancel {
		if !cl.Holding {
			cancelledWaiters = append(cancelledWaiters, slots.Waiter{ID: cl.ID})
		}
	}
	if len(cancelledWaiters) > len(rest) {
		c.fail("cancelled %d waiters of %d", len(cancelledWaiters), len(rest))
	}
	for i, w := range cancelledWaiters {
		if rest[i].ID != w.ID {
			c.fail("cancelled waiter %s is not the oldest: line %v", w.ID, rest)
		}
	}
	rest = rest[len(cancelledWaiters):]
	if newcomer && d.Outcome == slots.Waiting {
		rest = append(rest, slots.Waiter{ID: op.id, Since: now})
	}
	if !reflect.DeepEqual(next.Waiters, nilIfEmpty(rest)) {
		c.fail("waiters %v, want %v", next.Waiters, rest)
	}

	// Cancellations: only a CancelOldest newcomer that waits makes them;
	// nobody twice while a member; a holder keeps its slot, flagged.
	if len(d.Cancel) > 0 && !(op.kind == 0 && op.p.Policy == slots.CancelOldest && newcomer && d.Outcome == slots.Waiting) {
		c.fail("cancellations %v without a cancel_oldest newcomer", d.Cancel)
	}
	// A membership ended by the sweep (an expiry) forgets its
	// cancellation: the id may come back as a newcomer in the same call.
	for _, id := range d.Expired {
		delete(c.cancelled, id)
		delete(c.grantLimit, id)
	}
	flagged := map[string]bool{}
	for _, h := range survivors {
		if h.Cancelling {
			flagged[h.ID] = true
		}
	}
	// A CancelOldest newcomer that waits cancels exactly the oldest
	// members not being cancelled beyond the newest Limit, the newcomer
	// counted: holders in grant order first, then the front of the line.
	if op.kind == 0 && op.p.Policy == slots.CancelOldest && newcomer && d.Outcome == slots.Waiting {
		var oldest []slots.Cancellation
		for _, h := range next.Holders {
			if !flagged[h.ID] {
				oldest = append(oldest, slots.Cancellation{ID: h.ID, Holding: true})
			}
		}
		for _, w := range line[len(added):] {
			oldest = append(oldest, slots.Cancellation{ID: w.ID})
		}
		excess := max(len(oldest)+1-lim, 0)
		if !slices.Equal(d.Cancel, oldest[:excess]) {
			c.fail("cancel_oldest listed %v, want the oldest %d of %v", d.Cancel, excess, oldest)
		}
	}
	for _, cl := range d.Cancel {
		if c.cancelled[cl.ID] {
			c.fail("%s is cancelled twice", cl.ID)
		}
		c.cancelled[cl.ID] = true
		i := slices.IndexFunc(next.Holders, func(h slots.Holder) bool { return h.ID == cl.ID })
		if cl.Holding != (i >= 0) || (i >= 0 && !next.Holders[i].Cancelling) || (!cl.Holding && seen[cl.ID]) {
			c.fail("cancellation %+v: holders %v, waiters %v", cl, next.Holders, next.Waiters)
		}
		flagged[cl.ID] = true
	}
	for _, h := range next.Holders {
		if h.Cancelling != flagged[h.ID] {
			c.fail("holder %s is flagged %v, want %v", h.ID, h.Cancelling, flagged[h.ID])
		}
	}
	if len(d.Cancel) > 0 {
		live := len(next.Waiters)
		for _, h := range next.Holders {
			if !h.Cancelling {
				live++
			}
		}
		if live > lim {
			c.fail("after cancel_oldest %d remain not being cancelled, past the limit %d", live, lim)
		}
	}

	// The caller's outcome says where it is.
	at := func(id string) string {
		switch {
		case slices.ContainsFunc(next.Holders, func(h slots.Holder) bool { return h.ID == id }):
			return "holder"
		case slices.ContainsFunc(next.Waiters, func(w slots.Waiter) bool { return w.ID == id }):
			return "waiter"
		}
		return "none"
	}
	want := map[slots.Outcome]string{
		slots.Granted: "holder", slots.Renewed: "holder", slots.Waiting: "waiter",
		slots.Refused: "none", slots.Released: "none", slots.Left: "none", slots.Unknown: "none",
	}
	switch op.kind {
	case 0:
		ok := d.Outcome == slots.Granted || d.Outcome == slots.Waiting ||
			(d.Outcome == slots.Refused && op.p.Policy == slots.CancelNewest && newcomer && len(next.Holders) >= lim)
		if !ok || (wasHolder(op.id) && d.Outcome != slots.Granted) {
			c.fail("acquire: outcome %s", d.Outcome)
		}
	case 1:
		ok := (d.Outcome == slots.Released && wasHolder(op.id)) || (d.Outcome == slots.Left && wasWaiter) ||
			(d.Outcome == slots.Unknown && newcomer)
		if !ok {
			c.fail("release: outcome %s", d.Outcome)
		}
	case 2:
		ok := (d.Outcome == slots.Renewed && wasHolder(op.id)) || (d.Outcome == slots.Waiting && wasWaiter) ||
			(d.Outcome == slots.Unknown && newcomer)
		if !ok {
			c.fail("renew: outcome %s", d.Outcome)
		}
	case 3:
		if d.Outcome != "" {
			c.fail("expire: outcome %s", d.Outcome)
		}
	}
	if op.kind != 3 {
		// A Renew's waiter may be promoted after its step: it is listed.
		where := want[d.Outcome]
		if op.kind == 2 && d.Outcome == slots.Waiting && slices.Contains(listed, op.id) {
			where = "holder"
		}
		if got := at(op.id); got != where {
			c.fail("outcome %s, but %s is %s", d.Outcome, op.id, got)
		}
	}
	if (d.Outcome == slots.Granted || d.Outcome == slots.Renewed) != !d.Expiry.IsZero() ||
		(!d.Expiry.IsZero() && !d.Expiry.Equal(lease)) {
		c.fail("outcome %s with expiry %s", d.Outcome, offset(d.Expiry))
	}
	if i := slices.IndexFunc(next.Holders, func(h slots.Holder) bool { return h.ID == op.id }); i >= 0 &&
		(d.Outcome == slots.Granted || d.Outcome == slots.Renewed) && !next.Holders[i].Expiry.Equal(lease) {
		c.fail("outcome %s, but %s's lease ends at %s, not now+lease", d.Outcome, op.id, offset(next.Holders[i].Expiry))
	}

	// Every holder was granted by a call whose limit was at least its
	// place in grant order.
	for _, h := range added {
		c.grantLimit[h.ID] = lim
	}
	if newcomer && d.Outcome == slots.Granted {
		c.grantLimit[op.id] = lim
	}
	for i, h := range next.Holders {
		if i+1 > c.grantLimit[h.ID] {
			c.fail("holder %s is number %d in grant order, granted under limit %d", h.ID, i+1, c.grantLimit[h.ID])
		}
	}
	// A membership that ended forgets its grant and its cancellation.
	for id := range c.cancelled {
		if !seen[id] {
			delete(c.cancelled, id)
		}
	}
	for id := range c.grantLimit {
		if at(id) != "holder" {
			delete(c.grantLimit, id)
		}
	}

	// The State survives the store's encoding.
	b, err := json.Marshal(next)
	if err != nil {
		c.fail("marshal: %v", err)
	}
	var back slots.State
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, next) {
		c.fail("JSON round trip: %s gave %+v (%v)", b, back, err)
	}
	c.st = next
}

// members lists the ids of st, holders then waiters.
func members(st slots.State) []string {
	var ids []string
	for _, h := range st.Holders {
		ids = append(ids, h.ID)
	}
	for _, w := range st.Waiters {
		ids = append(ids, w.ID)
	}
	return ids
}

// nilIfEmpty returns ws, or nil when it is empty, as the operations
// return an empty line.
func nilIfEmpty(ws []slots.Waiter) []slots.Waiter {
	if len(ws) == 0 {
		return nil
	}
	return ws
}
