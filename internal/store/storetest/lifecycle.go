package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// testDurability: everything a write reported done is there after the
// store is closed and opened again, and writing continues where it was.
func testDurability(t *testing.T, h *harness) {
	_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v1", Activities: []string{"charge"}})
	must(t, "PutPlugin", err)
	_, _, err = h.s.PutDefinition(ctx(t), "order", "h1", []byte("steps: []"))
	must(t, "PutDefinition", err)
	in := leased("i", "n1", "b1", Epoch.Add(time.Minute))
	in.Plugins = map[string]string{"pay": "v1"}
	in.State = []byte("runner state")
	in.Vars = json.RawMessage(`{"a": 1}`)
	h.commit(t, store.Commit{
		Instance: in, Fence: 4,
		History:   []weft.HistoryEntry{{Type: "created"}, {Type: "step_started", StepPath: "charge"}},
		Bookmarks: []weft.Bookmark{{StepPath: "wait", Event: "approved", Key: "o1"}},
		Timers:    []weft.Timer{{ID: "t1", Due: Epoch.Add(time.Hour), Kind: "delay"}},
	})
	h.enqueue(t, stimulus("q1", "paid", "o1", time.Hour))
	h.enqueue(t, stimulus("dead", "paid", "o1", time.Second))
	direct := stimulus("direct", "paid", "o1", time.Hour)
	h.deliver(t, &direct, message("i", "m1"), message("i", "m2"))
	_, err = h.s.ExpireStimuli(ctx(t), Epoch.Add(time.Second), 10)
	must(t, "ExpireStimuli", err)

	s := h.reopen()
	h.s = s
	got := h.get(t, "i")
	if got.Rev != 1 || got.Fence != 4 || string(got.State) != "runner state" || !jsonEq(got.Vars, in.Vars) || got.Lease.Node != "n1" {
		t.Errorf("instance after reopen = %+v", got)
	}
	evs, err := s.History(ctx(t), "i", 0, 0)
	must(t, "History", err)
	if len(evs) != 2 || evs[1].StepPath != "charge" {
		t.Errorf("history after reopen = %+v", evs)
	}
	bms, err := s.FindBookmarks(ctx(t), "approved", "o1")
	must(t, "FindBookmarks", err)
	wantStrings(t, "bookmarks", bookmarkPaths(bms), []string{"i/wait"})
	ts, err := s.DueTimers(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueTimers", err)
	wantStrings(t, "timers", timerIDs(ts), []string{"i/t1"})
	ids, err := s.ExpiredLeases(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "ExpiredLeases", err)
	wantStrings(t, "expired leases", ids, []string{"i"})
	pending, err := s.PendingStimuli(ctx(t), "paid", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending", stimulusIDs(pending), []string{"q1"})
	dead, _, err := s.DeadLetters(ctx(t), "", 10)
	must(t, "DeadLetters", err)
	wantStrings(t, "dead", stimulusIDs(dead), []string{"dead"})
	if st, err := s.GetStimulus(ctx(t), "direct"); err != nil || st.State != weft.StimulusDelivered || st.DeliveredTo != "i" {
		t.Errorf("delivered stimulus after reopen = %+v, %v", st, err)
	}
	wantStrings(t, "inbox after reopen", h.inbox(t, "i"), []string{"m1", "m2"})
	d, err := s.GetDefinition(ctx(t), "order", 0)
	must(t, "GetDefinition", err)
	if d.Version != 1 || string(d.Source) != "steps: []" {
		t.Errorf("definition after reopen = %+v", d)
	}
	p, err := s.GetPlugin(ctx(t), "pay")
	must(t, "GetPlugin", err)
	if p.Current.Version != "v1" {
		t.Errorf("plugin after reopen = %+v", p)
	}
	wantErr(t, "DeletePlugin pinned after reopen", s.DeletePlugin(ctx(t), "pay"), weft.ErrInUse)

	// Writing goes on from where it was.
	h.enqueue(t, stimulus("q2", "paid", "o1", time.Hour))
	pending, err = s.PendingStimuli(ctx(t), "paid", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending after reopen", stimulusIDs(pending), []string{"q1", "q2"})
	h.deliver(t, nil, message("i", "m3"), message("i", "m1"))
	wantStrings(t, "inbox written after reopen", h.inbox(t, "i"), []string{"m1", "m2", "m3"})
	rev := h.commit(t, store.Commit{Instance: got, Fence: 4, History: []weft.HistoryEntry{{Type: "resumed"}}, DeliveredStimulus: "q1", Consumed: []string{"m2"}})
	if rev != 2 {
		t.Errorf("rev after reopen = %d, want 2", rev)
	}
	wantStrings(t, "inbox after consuming after reopen", h.inbox(t, "i"), []string{"m1", "m3"})
	evs, err = s.History(ctx(t), "i", 2, 0)
	must(t, "History", err)
	if len(evs) != 1 || evs[0].Seq != 3 {
		t.Errorf("history after reopen = %+v, want seq 3", evs)
	}
	v, created, err := s.PutDefinition(ctx(t), "order", "h2", nil)
	must(t, "PutDefinition", err)
	if v != 2 || !created {
		t.Errorf("PutDefinition after reopen = %d, %v", v, created)
	}
}

// testCancelledContext: every method returns ctx.Err() for a done context,
// and writes nothing.
func testCancelledContext(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	h.enqueue(t, stimulus("s", "e", "k", time.Hour))
	_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "p", Version: "v"})
	must(t, "PutPlugin", err)
	_, _, err = h.s.PutDefinition(ctx(t), "d", "h", nil)
	must(t, "PutDefinition", err)

	c, cancel := context.WithCancel(ctx(t))
	cancel()
	upd := instance("i", "w")
	upd.Rev = 1
	calls := []struct {
		name string
		call func() error
	}{
		{"Commit create", func() error {
			_, err := h.s.Commit(c, store.Commit{Instance: instance("new", "w")})
			return err
		}},
		{"Commit update", func() error { _, err := h.s.Commit(c, store.Commit{Instance: upd}); return err }},
		{"GetInstance", func() error { _, err := h.s.GetInstance(c, "i"); return err }},
		{"InstanceStatuses", func() error { _, err := h.s.InstanceStatuses(c, []string{"i"}); return err }},
		{"ListInstances", func() error { _, _, err := h.s.ListInstances(c, weft.InstanceFilter{}); return err }},
		{"DeleteInstance", func() error { return h.s.DeleteInstance(c, "i", 0) }},
		{"History", func() error { _, err := h.s.History(c, "i", 0, 0); return err }},
		{"Deliver", func() error {
			s := stimulus("new", "e", "k", time.Hour)
			_, err := h.s.Deliver(c, &s, []weft.Message{message("i", "m")})
			return err
		}},
		{"Deliver without stimulus", func() error { _, err := h.s.Deliver(c, nil, []weft.Message{message("i", "m")}); return err }},
		{"Inbox", func() error { _, err := h.s.Inbox(c, "i"); return err }},
		{"WaitingInboxes", func() error { _, err := h.s.WaitingInboxes(c, Epoch, 10); return err }},
		{"Bookmarks", func() error { _, err := h.s.Bookmarks(c, "i"); return err }},
		{"FindBookmarks", func() error { _, err := h.s.FindBookmarks(c, "e", "k"); return err }},
		{"Timers", func() error { _, err := h.s.Timers(c, "i"); return err }},
		{"DueTimers", func() error { _, err := h.s.DueTimers(c, Epoch, 1); return err }},
		{"RenewLeases", func() error {
			_, err := h.s.RenewLeases(c, store.LeaseRenewal{Node: "n", Boot: "b", IDs: []string{"i"}, Expiry: Epoch})
			return err
		}},
		{"Heartbeats", func() error { _, err := h.s.Heartbeats(c, "i"); return err }},
		{"ExpiredLeases", func() error { _, err := h.s.ExpiredLeases(c, Epoch, 1); return err }},
		{"ExpiredInstances", func() error { _, err := h.s.ExpiredInstances(c, Epoch, 1); return err }},
		{"EnqueueStimulus", func() error { _, err := h.s.EnqueueStimulus(c, stimulus("new", "e", "k", time.Hour)); return err }},
		{"GetStimulus", func() error { _, err := h.s.GetStimulus(c, "s"); return err }},
		{"PendingStimuli", func() error { _, err := h.s.PendingStimuli(c, "e", "k"); return err }},
		{"ExpireStimuli", func() error { _, err := h.s.ExpireStimuli(c, Epoch.Add(24*time.Hour), 10); return err }},
		{"DeadLetters", func() error { _, _, err := h.s.DeadLetters(c, "", 1); return err }},
		{"PutDefinition", func() error { _, _, err := h.s.PutDefinition(c, "d", "h2", nil); return err }},
		{"GetDefinition", func() error { _, err := h.s.GetDefinition(c, "d", 0); return err }},
		{"ListDefinitions", func() error { _, _, err := h.s.ListDefinitions(c, "", 1); return err }},
		{"DeleteDefinition", func() error { return h.s.DeleteDefinition(c, "d") }},
		{"PutPlugin", func() error { _, err := h.s.PutPlugin(c, weft.PluginRecord{Name: "p", Version: "v2"}); return err }},
		{"GetPlugin", func() error { _, err := h.s.GetPlugin(c, "p"); return err }},
		{"ListPlugins", func() error { _, _, err := h.s.ListPlugins(c, "", 1); return err }},
		{"DeletePlugin", func() error { return h.s.DeletePlugin(c, "p") }},
	}
	for _, tt := range calls {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	// Nothing was written.
	if got := h.get(t, "i"); got.Rev != 1 {
		t.Errorf("instance rev = %d", got.Rev)
	}
	if _, err := h.s.GetInstance(ctx(t), "new"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("cancelled create: %v", err)
	}
	if s, err := h.s.GetStimulus(ctx(t), "s"); err != nil || s.State != weft.StimulusQueued {
		t.Errorf("stimulus = %+v, %v", s, err)
	}
	if _, err := h.s.GetStimulus(ctx(t), "new"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("cancelled enqueue or deliver: %v", err)
	}
	wantStrings(t, "inbox", h.inbox(t, "i"), nil)
	if d, err := h.s.GetDefinition(ctx(t), "d", 0); err != nil || d.Version != 1 {
		t.Errorf("definition = %+v, %v", d, err)
	}
	if p, err := h.s.GetPlugin(ctx(t), "p"); err != nil || p.Current.Version != "v" {
		t.Errorf("plugin = %+v, %v", p, err)
	}
}

// testClosed: calls after Close return ErrClosed; Close twice is harmless.
func testClosed(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	must(t, "Close", h.s.Close())
	must(t, "Close again", h.s.Close())
	_, err := h.s.GetInstance(ctx(t), "i")
	wantErr(t, "GetInstance after Close", err, weft.ErrClosed)
	_, err = h.s.InstanceStatuses(ctx(t), []string{"i"})
	wantErr(t, "InstanceStatuses after Close", err, weft.ErrClosed)
	_, err = h.s.Commit(ctx(t), store.Commit{Instance: instance("j", "w")})
	wantErr(t, "Commit after Close", err, weft.ErrClosed)
}
