package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// testRetention is the DeliveredRetention of the stores these tests open:
// how long a marker lives and a received entry is remembered.
const testRetention = time.Hour

// fakeClock is a store clock the test moves by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}

// Now is the store's clock.
func (c *fakeClock) Now() time.Time { return time.Unix(0, c.ns.Load()).UTC() }

// Advance moves the clock on by d.
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// openRole opens a store of role r on c: under tag (a partition's or the
// catalog's) when tag is set, else under prefix "{<prefix>}" as the whole
// store.
func openRole(t *testing.T, c redis.UniversalClient, tag string, r role, now func() time.Time) *Store {
	t.Helper()
	cfg := Config{Client: c, Prefix: "t-" + t.Name() + ":", Now: now, DeliveredRetention: testRetention, tag: tag, role: r}
	s, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open %s store %q: %v", r, tag, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pendingInstance is a new instance of workflow w.
func pendingInstance(id string) *weft.Instance {
	return &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusPending}
}

// gen is a catalog generation of order n, as bumpGeneration makes them.
func gen(n int, r string) string { return fmt.Sprintf("%015d.%s", n, r) }

// generation reads a store's cg.
func generation(t *testing.T, s *Store) string {
	t.Helper()
	g, err := s.c.Get(t.Context(), s.p+"cg").Result()
	if err != nil {
		t.Fatalf("read %scg: %v", s.p, err)
	}
	return g
}

// A partition's create is refused when the partition holds a later
// catalog generation (and the refusal names it), accepted at the same
// order (the partition's kept), and accepted with a later one, which
// raises the partition's. The whole store keeps its equality check.
func TestPartitionCatalogGeneration(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	held := gen(5, "held")
	tests := []struct {
		name    string
		catalog string
		refused bool
		after   string // the partition's cg after the commit
	}{
		{"older", gen(4, "old"), true, held},
		{"unordered", "random", true, held},
		{"same order", gen(5, "other"), false, held},
		{"same", held, false, held},
		{"newer", gen(7, "new"), false, gen(7, "new")},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := openRole(t, c, "{t:gen"+strconv.Itoa(i)+"}", rolePartition, time.Now)
			if err := p.copyGeneration(t.Context(), held); err != nil {
				t.Fatal(err)
			}
			_, _, err := p.commitTo(t.Context(), store.Commit{Instance: pendingInstance("a"), Catalog: tt.catalog}, nil)
			if tt.refused {
				var ce *store.CommitError
				if !errors.Is(err, store.ErrCatalogChanged) || !errors.As(err, &ce) || ce.InstanceID != "a" {
					t.Fatalf("create with catalog %q: %v, want a CommitError matching ErrCatalogChanged", tt.catalog, err)
				}
				if g, ok := catalogRefusal(err); !ok || g != held {
					t.Errorf("refusal carries generation %q, %v; want %q", g, ok, held)
				}
				if _, err := p.GetInstance(t.Context(), "a"); !errors.Is(err, weft.ErrNotFound) {
					t.Errorf("refused create stored the instance: %v", err)
				}
			} else if err != nil {
				t.Fatalf("create with catalog %q: %v", tt.catalog, err)
			}
			if g := generation(t, p); g != tt.after {
				t.Errorf("partition's cg %q after the commit, want %q", g, tt.after)
			}
		})
	}

	t.Run("whole store compares for equality", func(t *testing.T) {
		t.Parallel()
		w := openRole(t, c, "", roleWhole, time.Now)
		cg := generation(t, w)
		_, err := w.Commit(t.Context(), store.Commit{Instance: pendingInstance("a"), Catalog: gen(999, "later")})
		if !errors.Is(err, store.ErrCatalogChanged) {
			t.Fatalf("whole store's create with another generation: %v, want ErrCatalogChanged", err)
		}
		if _, ok := catalogRefusal(err); ok {
			t.Errorf("whole store's refusal carries a generation: %v", err)
		}
		if g := generation(t, w); g != cg {
			t.Errorf("whole store's cg %q after a refusal, want %q", g, cg)
		}
		if _, err := w.Commit(t.Context(), store.Commit{Instance: pendingInstance("a"), Catalog: cg}); err != nil {
			t.Fatalf("whole store's create with its generation: %v", err)
		}
	})
}

// A partition does not check that the plugins a create pins exist: they
// are in the catalog. The whole store still does.
func TestPartitionTrustsPins(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	tests := []struct {
		role role
		tag  string
		want error
	}{
		{rolePartition, "{t:pins}", nil},
		{roleWhole, "", weft.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.role.String(), func(t *testing.T) {
			t.Parallel()
			s := openRole(t, c, tt.tag, tt.role, time.Now)
			in := pendingInstance("pinning")
			in.Plugins = map[string]string{"kit": "v1"}
			_, err := s.Commit(t.Context(), store.Commit{Instance: in})
			if tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("create pinning a plugin the store lacks: %v, want %v", err, tt.want)
			}
		})
	}
}

// A partition's commit that consumes a stimulus leaves a marker with the
// outcome, living for DeliveredRetention, and touches no stimulus key.
func TestPartitionDeliveredMarker(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	p := openRole(t, c, "{t:marker}", rolePartition, time.Now)
	ctx := t.Context()
	tests := []struct {
		sid, outcome string
	}{
		{"with-outcome", `{"granted": true}`},
		{"without-outcome", ""},
	}
	for _, tt := range tests {
		cm := store.Commit{Instance: pendingInstance("for-" + tt.sid), DeliveredStimulus: tt.sid}
		if tt.outcome != "" {
			cm.DeliveredOutcome = json.RawMessage(tt.outcome)
		}
		if _, err := p.Commit(ctx, cm); err != nil {
			t.Fatalf("commit delivering stimulus %q (not in the partition): %v", tt.sid, err)
		}
		out, ok, err := p.deliveredMarker(ctx, tt.sid)
		want := string(compact(json.RawMessage(tt.outcome)))
		if err != nil || !ok || string(out) != want {
			t.Errorf("marker of %q: %q, %v, %v; want %q", tt.sid, out, ok, err, want)
		}
		ttl, err := p.c.PTTL(ctx, p.p+"sdl:"+tt.sid).Result()
		if err != nil || ttl <= 0 || ttl > testRetention {
			t.Errorf("marker of %q lives %v (%v), want up to %v", tt.sid, ttl, err, testRetention)
		}
		if n, err := p.c.Exists(ctx, p.p+"s:"+tt.sid, p.p+"sf").Result(); err != nil || n != 0 {
			t.Errorf("commit wrote %d stimulus keys (%v), want none", n, err)
		}
	}
	if _, ok, err := p.deliveredMarker(ctx, "never"); ok || err != nil {
		t.Errorf("marker of a stimulus no commit consumed: %v, %v", ok, err)
	}
}

// deliveredMarker reads the marker that a partition's commit consuming
// stimulus sid left (commitScript): the outcome it stored, and whether
// there is one. The stimulus itself is in the catalog, reserved by the
// router before the commit; the marker tells the router, for
// Config.DeliveredRetention, that the commit happened, so that it can
// confirm a reservation whose confirmation a crash lost. Only tests read
// it: the router's sweep settles a reservation with settleMarker.
func (s *Store) deliveredMarker(ctx context.Context, sid string) (outcome []byte, ok bool, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, false, err
	}
	v, err := s.c.Get(ctx, s.p+"sdl:"+sid).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, s.fail(ctx, "delivered marker of stimulus", sid, err)
	}
	return v, true, nil
}

// message is a child's end message for instance to.
func message(to, id string) weft.Message {
	return weft.Message{InstanceID: to, ID: id, Kind: weft.MessageChild, Payload: json.RawMessage(`{"x": 1}`)}
}

// inbox reads an instance's inbox ids.
func inbox(t *testing.T, s *Store, id string) []string {
	t.Helper()
	ms, err := s.Inbox(t.Context(), id)
	if err != nil {
		t.Fatalf("inbox of %q in %s: %v", id, s.p, err)
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// A commit's messages flagged remote go into its store's outbox, and
// nowhere else; relayed (pendingOutbox, receive) they reach the target's
// inbox in the other partition, and the acknowledgement empties the
// outbox.
func TestOutboxRoundTrip(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	p1 := openRole(t, c, "{t:p1}", rolePartition, clock.Now)
	p2 := openRole(t, c, "{t:p2}", rolePartition, clock.Now)
	ctx := t.Context()
	for _, x := range []struct {
		s  *Store
		id string
	}{{p1, "sibling"}, {p2, "parent"}} {
		if _, err := x.s.Commit(ctx, store.Commit{Instance: pendingInstance(x.id)}); err != nil {
			t.Fatal(err)
		}
	}

	if _, _, err := p1.commitTo(ctx, store.Commit{Instance: pendingInstance("child"), Send: []weft.Message{message("parent", "m")}}, []bool{true, false}); err == nil {
		t.Fatal("commit with 2 remote flags for 1 message accepted")
	}

	sent := clock.Now()
	_, eids, err := p1.commitTo(ctx, store.Commit{
		Instance: pendingInstance("child"),
		Send:     []weft.Message{message("parent", "child:end"), message("sibling", "child:note"), message("parent", "child:more")},
	}, []bool{true, false, true})
	if err != nil {
		t.Fatal(err)
	}
	if len(eids) != 2 || eids[0] == eids[1] {
		t.Fatalf("entry ids %q, want two distinct", eids)
	}
	if got := inbox(t, p1, "sibling"); len(got) != 1 || got[0] != "child:note" {
		t.Errorf("local message: sibling's inbox %q, want [child:note]", got)
	}
	if got := inbox(t, p2, "parent"); len(got) != 0 {
		t.Errorf("parent's inbox %q before the relay, want empty", got)
	}
	if n, err := c.Exists(ctx, p1.p+"m:parent", p1.p+"i:parent").Result(); err != nil || n != 0 {
		t.Errorf("the sending partition holds %d keys of the target (%v), want none", n, err)
	}

	clock.Advance(time.Second)
	if got, err := p1.pendingOutbox(ctx, sent, 10); err != nil || len(got) != 0 {
		t.Errorf("entries before the send: %v, %v; want none", got, err)
	}
	pending, err := p1.pendingOutbox(ctx, clock.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 2 {
		t.Fatalf("pending %+v, want 2 entries", pending)
	}
	for i, e := range pending {
		var m weft.Message
		if err := json.Unmarshal([]byte(e.Doc), &m); err != nil {
			t.Fatalf("entry %q doc %q: %v", e.ID, e.Doc, err)
		}
		if e.Source != p1.p || e.ID != eids[i] || e.Target != "parent" || !e.At.Equal(sent) || m.ID != e.MsgID || m.InstanceID != "parent" {
			t.Errorf("entry %d: %+v (message %+v), want entry %q from %s to parent at %v", i, e, m, eids[i], p1.p, sent)
		}
	}
	if pending[0].MsgID != "child:end" || pending[1].MsgID != "child:more" {
		t.Errorf("entries in order %q, %q; want child:end, child:more", pending[0].MsgID, pending[1].MsgID)
	}
	if got, err := p1.pendingOutbox(ctx, clock.Now(), 1); err != nil || len(got) != 1 || got[0].ID != eids[0] {
		t.Errorf("pending with limit 1: %+v, %v; want the oldest", got, err)
	}
	if got, err := p1.outboxEntries(ctx, []string{eids[1], "404", eids[0]}); err != nil || len(got) != 2 || got[0] != pending[1] || got[1] != pending[0] {
		t.Errorf("entries by id (one unknown): %+v, %v; want the two, in the order asked", got, err)
	}

	if err := p2.receive(ctx, pending); err != nil {
		t.Fatal(err)
	}
	msgs, err := p2.Inbox(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != "child:end" || msgs[1].ID != "child:more" || msgs[0].Kind != weft.MessageChild || string(msgs[0].Payload) != `{"x":1}` || !msgs[0].CreatedAt.Equal(sent) {
		t.Errorf("parent's inbox after the relay: %+v", msgs)
	}
	if in, err := p2.GetInstance(ctx, "parent"); err != nil || !in.InboxWaiting {
		t.Errorf("parent after the relay: waiting %v, %v; want its inbox waiting", in != nil && in.InboxWaiting, err)
	}

	if err := p2.ackOutbox(ctx, pending); err == nil {
		t.Error("acknowledging another store's entries succeeded")
	}
	if err := p1.ackOutbox(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if err := p1.ackOutbox(ctx, pending); err != nil {
		t.Errorf("acknowledging twice: %v", err)
	}
	if got, err := p1.pendingOutbox(ctx, clock.Now(), 10); err != nil || len(got) != 0 {
		t.Errorf("pending after the acknowledgement: %+v, %v", got, err)
	}
	for _, k := range []string{"ob", "obx"} {
		if n, err := c.Exists(ctx, p1.p+k).Result(); err != nil || n != 0 {
			t.Errorf("%s%s left after the acknowledgement (%v)", p1.p, k, err)
		}
	}
}

// entry is an outbox entry of source for instance target.
func entry(source, id, target, mid string) outboxEntry {
	doc, _ := json.Marshal(message(target, mid))
	return outboxEntry{Source: source, ID: id, Target: target, MsgID: mid, Doc: string(doc)}
}

// An entry received twice, in one call or two, and again after its
// message was consumed, is written once. The same id from another source
// is another entry.
func TestReceiveAppliesOnce(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	p := openRole(t, c, "{t:once}", rolePartition, time.Now)
	ctx := t.Context()
	if _, err := p.Commit(ctx, store.Commit{Instance: pendingInstance("parent")}); err != nil {
		t.Fatal(err)
	}
	e := entry("{t:src}", "1", "parent", "child:a")
	for range 2 {
		if err := p.receive(ctx, []outboxEntry{e, e}); err != nil {
			t.Fatal(err)
		}
	}
	if got := inbox(t, p, "parent"); len(got) != 1 {
		t.Fatalf("inbox %q after receiving one entry four times, want one message", got)
	}

	in, err := p.GetInstance(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(ctx, store.Commit{Instance: in, Consumed: []string{"child:a"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.receive(ctx, []outboxEntry{e}); err != nil {
		t.Fatal(err)
	}
	if got := inbox(t, p, "parent"); len(got) != 0 {
		t.Errorf("inbox %q after the entry came again once consumed, want empty", got)
	}

	// Another source's entry 1, to an instance the store lacks too: the
	// first is written, the second dropped.
	other := entry("{t:src2}", "1", "parent", "child:b")
	if err := p.receive(ctx, []outboxEntry{other, entry("{t:src2}", "2", "nobody", "child:c")}); err != nil {
		t.Fatal(err)
	}
	if got := inbox(t, p, "parent"); len(got) != 1 || got[0] != "child:b" {
		t.Errorf("inbox %q after another source's entry, want [child:b]", got)
	}
	if n, err := c.Exists(ctx, p.p+"m:nobody", p.p+"i:nobody").Result(); err != nil || n != 0 {
		t.Errorf("an entry for a missing instance wrote %d keys (%v)", n, err)
	}
}

// receive forgets at most 100 entries whose retention passed per call,
// oldest first; a forgotten entry received again is applied again.
func TestReceiveForgets(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	p := openRole(t, c, "{t:forget}", rolePartition, clock.Now)
	ctx := t.Context()
	if _, err := p.Commit(ctx, store.Commit{Instance: pendingInstance("parent")}); err != nil {
		t.Fatal(err)
	}
	var old []outboxEntry
	for i := range 150 {
		old = append(old, entry("{t:src}", strconv.Itoa(i), "parent", "m"+strconv.Itoa(i)))
	}
	if err := p.receive(ctx, old); err != nil {
		t.Fatal(err)
	}
	remembered := func() int64 {
		t.Helper()
		n, err := c.HLen(ctx, p.p+"rcv").Result()
		if err != nil {
			t.Fatal(err)
		}
		if x, err := c.ZCard(ctx, p.p+"rcvx").Result(); err != nil || x != n {
			t.Fatalf("%d entries in rcv, %d in rcvx (%v)", n, x, err)
		}
		return n
	}
	if n := remembered(); n != 150 {
		t.Fatalf("remembers %d entries, want 150", n)
	}

	// Not yet: retention has not passed.
	clock.Advance(testRetention - time.Nanosecond)
	if err := p.receive(ctx, []outboxEntry{entry("{t:src}", "new1", "parent", "n1")}); err != nil {
		t.Fatal(err)
	}
	if n := remembered(); n != 151 {
		t.Fatalf("remembers %d entries before retention passed, want 151", n)
	}

	clock.Advance(time.Nanosecond)
	if err := p.receive(ctx, []outboxEntry{entry("{t:src}", "new2", "parent", "n2")}); err != nil {
		t.Fatal(err)
	}
	if n := remembered(); n != 52 {
		t.Fatalf("remembers %d entries after one call past retention, want 52 (100 forgotten)", n)
	}
	if err := p.receive(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// An empty call runs no script: the rest goes with the next entry.
	if err := p.receive(ctx, []outboxEntry{entry("{t:src}", "new3", "parent", "n3")}); err != nil {
		t.Fatal(err)
	}
	if n := remembered(); n != 3 {
		t.Fatalf("remembers %d entries after the second call, want the 3 new ones", n)
	}

	// Entry 0 forgotten, and its message consumed: received again, it is
	// written again.
	in, err := p.GetInstance(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Commit(ctx, store.Commit{Instance: in, Consumed: []string{"m0"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.receive(ctx, old[:1]); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.HExists(ctx, p.p+"rcv", "{t:src}/0").Result(); err != nil || !ok {
		t.Errorf("entry 0 received again is not remembered (%v)", err)
	}
	ms, err := p.Inbox(ctx, "parent")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		found = found || m.ID == "m0"
	}
	if !found {
		t.Error("a forgotten entry received again was not written")
	}
}

// copyGeneration raises a partition's cg to a later generation only.
func TestCopyGenerationOnlyRaises(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	p := openRole(t, c, "{t:copy}", rolePartition, time.Now)
	first := generation(t, p) // Open's, of order 0
	steps := []struct {
		copy, want string
	}{
		{"random", first},
		{gen(3, "a"), gen(3, "a")},
		{gen(2, "b"), gen(3, "a")},
		{gen(3, "c"), gen(3, "a")},
		{"plain", gen(3, "a")},
		{gen(4, "d"), gen(4, "d")},
		{gen(123456789012345, "e"), gen(123456789012345, "e")},
		{gen(123456789012344, "f"), gen(123456789012345, "e")},
	}
	for _, st := range steps {
		if err := p.copyGeneration(t.Context(), st.copy); err != nil {
			t.Fatal(err)
		}
		if g := generation(t, p); g != st.want {
			t.Errorf("after copying %q: cg %q, want %q", st.copy, g, st.want)
		}
	}
}

// A closed store refuses the partition-side calls, as it does every
// other.
func TestOutboxClosed(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	p := openRole(t, c, "{t:closed}", rolePartition, time.Now)
	_ = p.Close()
	ctx := context.Background()
	e := []outboxEntry{entry(p.p, "1", "x", "m")}
	for name, err := range map[string]error{
		"pendingOutbox":  func() error { _, err := p.pendingOutbox(ctx, time.Now(), 1); return err }(),
		"ackOutbox":      p.ackOutbox(ctx, e),
		"receive":        p.receive(ctx, e),
		"copyGeneration": p.copyGeneration(ctx, gen(1, "x")),
		"deliveredMarker": func() error {
			_, _, err := p.deliveredMarker(ctx, "s")
			return err
		}(),
	} {
		if !errors.Is(err, weft.ErrClosed) {
			t.Errorf("%s on a closed store: %v, want ErrClosed", name, err)
		}
	}
}
