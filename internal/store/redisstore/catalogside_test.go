package redisstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// csOpen opens a store of role r under hash tag tag on c, with clock now
// and a DeliveredRetention of retention (0: the default): as the router
// opens its catalog and its partitions, several on one server.
func csOpen(t *testing.T, c redis.UniversalClient, tag string, r role, now func() time.Time, retention time.Duration) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{Client: c, Now: now, DeliveredRetention: retention, tag: tag, role: r})
	if err != nil {
		t.Fatalf("open %s store %s: %v", r, tag, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// csEntry is an outbox entry as P ob holds it, decoded.
type csEntry struct {
	at          time.Time
	target, mid string
	msg         weft.Message
}

// csOutbox reads store s's outbox: P ob decoded by entry id, and the
// members of P obx, checked to be (time, id) of exactly those entries.
func csOutbox(t *testing.T, s *Store) map[string]csEntry {
	t.Helper()
	ctx := t.Context()
	raw, err := s.c.HGetAll(ctx, s.p+"ob").Result()
	if err != nil {
		t.Fatalf("HGETALL %sob: %v", s.p, err)
	}
	out := make(map[string]csEntry, len(raw))
	var want []string
	for eid, v := range raw {
		e := csEntry{}
		if len(v) < 16 {
			t.Fatalf("outbox entry %s: %q", eid, v)
		}
		at, err := parseHexTime(v[:16])
		if err != nil {
			t.Fatalf("outbox entry %s: time: %v", eid, err)
		}
		e.at = at
		rest := v[16:]
		for _, f := range []*string{&e.target, &e.mid} {
			n, after, ok := strings.Cut(rest, ":")
			l, err := strconv.Atoi(n)
			if !ok || err != nil || l > len(after) {
				t.Fatalf("outbox entry %s: %q", eid, v)
			}
			*f, rest = after[:l], after[l:]
		}
		if err := json.Unmarshal([]byte(rest), &e.msg); err != nil {
			t.Fatalf("outbox entry %s: message %q: %v", eid, rest, err)
		}
		out[eid] = e
		want = append(want, v[:16]+eid)
	}
	got, err := s.c.ZRange(ctx, s.p+"obx", 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE %sobx: %v", s.p, err)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%sobx = %q, want the entries of ob %q", s.p, got, want)
	}
	return out
}

// csInboxKeys lists the keys of inboxes and of their wait index in store
// s (KEYS: a test's own server).
func csInboxKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"m:*", "mw"} {
		ks, err := s.c.Keys(t.Context(), s.p+pat).Result()
		if err != nil {
			t.Fatalf("KEYS %s%s: %v", s.p, pat, err)
		}
		out = append(out, ks...)
	}
	return out
}

// csMessage is a message of kind note to instance to.
func csMessage(to, id string) weft.Message {
	return weft.Message{InstanceID: to, ID: id, Kind: "note", Payload: json.RawMessage(`{"n":"` + id + `"}`)}
}

// Deliver writes into the inboxes in the whole store, as before, and into
// the outbox in a catalog: one entry per message, in order, with the
// message as the inbox would hold it, and no inbox. A second Deliver of
// the same stimulus answers the record and writes nothing.
func TestCatalogDeliverWritesOutbox(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	tests := []struct {
		name   string
		role   role
		outbox bool
	}{
		{"whole", roleWhole, false},
		{"catalog", roleCatalog, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := csOpen(t, c, "{t:deliver-"+tt.name+"}", tt.role, clock.Now, 0)
			if !tt.outbox {
				// The whole store drops messages for instances it lacks.
				for _, id := range []string{"i1", "i2"} {
					if _, err := s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusSuspended}}); err != nil {
						t.Fatal(err)
					}
				}
			}
			st := &weft.Stimulus{ID: "s1", Name: "sig", ExpiresAt: storetest.Epoch.Add(time.Hour), Outcome: json.RawMessage(`{"ok":true}`)}
			msgs := []weft.Message{csMessage("i2", "m1"), csMessage("i1", "m2"), csMessage("i2", "m3")}
			old, eids, err := s.deliverTo(ctx, st, msgs)
			if err != nil || old != nil {
				t.Fatalf("deliverTo: %+v, %v", old, err)
			}
			got, err := s.GetStimulus(ctx, "s1")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != weft.StimulusDelivered || got.DeliveredTo != "i2" {
				t.Errorf("stimulus: state %s to %q, want delivered to i2", got.State, got.DeliveredTo)
			}
			ob := csOutbox(t, s)
			inboxes := csInboxKeys(t, s)
			if !tt.outbox {
				if len(eids) != 0 || len(ob) != 0 {
					t.Errorf("outbox ids %q and entries %v, want none", eids, ob)
				}
				if len(inboxes) != 3 { // m:i1, m:i2, mw
					t.Errorf("inbox keys %q, want m:i1, m:i2 and mw", inboxes)
				}
				return
			}
			if len(inboxes) != 0 {
				t.Errorf("inbox keys %q in a catalog, want none", inboxes)
			}
			if len(eids) != len(msgs) || len(ob) != len(msgs) {
				t.Fatalf("outbox ids %q, entries %v: want one per message", eids, ob)
			}
			for i, eid := range eids {
				e, ok := ob[eid]
				m := msgs[i]
				if !ok || e.target != m.InstanceID || e.mid != m.ID || e.msg.ID != m.ID || e.msg.InstanceID != m.InstanceID ||
					string(e.msg.Payload) != string(m.Payload) || !e.at.Equal(storetest.Epoch) || !e.msg.CreatedAt.Equal(storetest.Epoch) {
					t.Errorf("entry %d (%s): %+v, want message %+v at %s", i, eid, e, m, storetest.Epoch)
				}
			}
			again, eids2, err := s.deliverTo(ctx, st, msgs)
			if err != nil || again == nil || again.State != weft.StimulusDelivered || len(eids2) != 0 {
				t.Errorf("deliverTo again: %+v, %q, %v: want the record and no entry", again, eids2, err)
			}
			if n := len(csOutbox(t, s)); n != len(msgs) {
				t.Errorf("after the second deliver: %d entries, want %d", n, len(msgs))
			}
			// Messages alone: entries, no stimulus.
			_, eids3, err := s.deliverTo(ctx, nil, []weft.Message{csMessage("i9", "m9")})
			if err != nil || len(eids3) != 1 {
				t.Fatalf("deliverTo messages alone: %q, %v", eids3, err)
			}
			if e := csOutbox(t, s)[eids3[0]]; e.target != "i9" || e.mid != "m9" {
				t.Errorf("entry of the message alone: %+v", e)
			}
		})
	}
}

// ApplyBatchItems in a catalog applies each pending item without looking
// for its instance (there is none: the router skipped the missing ones)
// and writes its messages into the outbox, answering their ids in order;
// in the whole store the messages go to the inboxes and an item of a
// missing instance is skipped, as before. An item applied already writes
// nothing again.
func TestCatalogApplyBatchWritesOutbox(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	tests := []struct {
		name     string
		role     role
		outbox   bool
		outcomes map[string]weft.BatchOutcome
	}{
		{"whole", roleWhole, false, map[string]weft.BatchOutcome{"a": weft.BatchDone, "b": weft.BatchSkipped, "c": weft.BatchSkipped}},
		{"catalog", roleCatalog, true, map[string]weft.BatchOutcome{"a": weft.BatchDone, "b": weft.BatchDone, "c": weft.BatchSkipped}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			s := csOpen(t, c, "{t:batch-"+tt.name+"}", tt.role, clock.Now, 0)
			if !tt.outbox {
				if _, err := s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: "a", Workflow: "w", Version: 1, Status: weft.StatusSuspended}}); err != nil {
					t.Fatal(err)
				}
			}
			b, err := s.CreateBatch(ctx, &weft.Batch{ID: "b-1", Document: json.RawMessage(`{"op":"note"}`)}, []string{"a", "b", "c"})
			if err != nil {
				t.Fatal(err)
			}
			changes := []weft.BatchChange{
				{InstanceID: "a", Outcome: weft.BatchDone, Messages: []weft.Message{csMessage("a", "op:1"), csMessage("a", "op:2")}},
				{InstanceID: "b", Outcome: weft.BatchDone, Messages: []weft.Message{csMessage("b", "op:1")}},
				{InstanceID: "c", Outcome: weft.BatchSkipped, Reason: weft.BatchNotFound},
			}
			b, eids, err := s.applyBatchItems(ctx, b, changes)
			if err != nil {
				t.Fatal(err)
			}
			items, err := s.BatchItems(ctx, "b-1", weft.BatchItemFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if it.Outcome != tt.outcomes[it.InstanceID] {
					t.Errorf("item %s: %s, want %s", it.InstanceID, it.Outcome, tt.outcomes[it.InstanceID])
				}
			}
			ob := csOutbox(t, s)
			inboxes := csInboxKeys(t, s)
			if !tt.outbox {
				if len(eids) != 0 || len(ob) != 0 {
					t.Errorf("outbox ids %q and entries %v, want none", eids, ob)
				}
				if len(inboxes) != 2 { // m:a and mw
					t.Errorf("inbox keys %q, want m:a and mw", inboxes)
				}
				return
			}
			if len(inboxes) != 0 {
				t.Errorf("inbox keys %q in a catalog, want none", inboxes)
			}
			want := [][2]string{{"a", "op:1"}, {"a", "op:2"}, {"b", "op:1"}}
			if len(eids) != len(want) || len(ob) != len(want) {
				t.Fatalf("outbox ids %q, entries %v: want %v", eids, ob, want)
			}
			for i, eid := range eids {
				if e := ob[eid]; e.target != want[i][0] || e.mid != want[i][1] || e.msg.InstanceID != want[i][0] {
					t.Errorf("entry %d (%s): %+v, want %v", i, eid, e, want[i])
				}
			}
			_, again, err := s.applyBatchItems(ctx, b, changes)
			if err != nil || len(again) != 0 {
				t.Errorf("applied again: %q, %v; want no entry", again, err)
			}
			if n := len(csOutbox(t, s)); n != len(want) {
				t.Errorf("after applying again: %d entries, want %d", n, len(want))
			}
		})
	}
}

// csOrder is genOrder (the scripts' prelude) for a test's checks.
func csOrder(t *testing.T, g string) int {
	t.Helper()
	n, _, ok := strings.Cut(g, ".")
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n)
	if err != nil {
		t.Fatalf("generation %q: order %q: %v", g, n, err)
	}
	return v
}

// csGeneration reads store s's catalog generation.
func csGeneration(t *testing.T, s *Store) string {
	t.Helper()
	g, err := s.generation(t.Context())
	if err != nil {
		t.Fatalf("read %scg: %v", s.p, err)
	}
	return g
}

// csGen is a generation of order n.
func csGen(n int) string { return fmt.Sprintf("%015d.x", n) }
