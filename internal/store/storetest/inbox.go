package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// message returns a message for instance id's inbox.
func message(instance, id string) weft.Message {
	payload, _ := json.MarshalIndent(map[string]string{"msg": id}, "", " ")
	return weft.Message{InstanceID: instance, ID: id, Kind: "stimulus", Token: "tok-" + id, Payload: payload}
}

// inbox returns the ids of instance id's messages, in order, and checks
// that their Seq increases and that they belong to the instance.
func (h *harness) inbox(t *testing.T, id string) []string {
	t.Helper()
	msgs, err := h.s.Inbox(ctx(t), id)
	must(t, "Inbox "+id, err)
	var out []string
	for i, m := range msgs {
		if m.InstanceID != id {
			t.Errorf("Inbox(%q)[%d] is for instance %q", id, i, m.InstanceID)
		}
		if m.Seq == 0 || i > 0 && m.Seq <= msgs[i-1].Seq {
			t.Errorf("Inbox(%q): seq %d after %d", id, m.Seq, msgs[max(i-1, 0)].Seq)
		}
		out = append(out, m.ID)
	}
	return out
}

// deliver calls Deliver and fails unless it wrote (found no existing
// stimulus).
func (h *harness) deliver(t *testing.T, s *weft.Stimulus, msgs ...weft.Message) {
	t.Helper()
	existing, err := h.s.Deliver(ctx(t), s, msgs)
	must(t, "Deliver", err)
	if existing != nil {
		t.Fatalf("Deliver: found existing %+v", existing)
	}
}

// testDeliver: Deliver records a stimulus as delivered and writes its
// messages in one step; a known stimulus id makes it write nothing.
func testDeliver(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	h.create(t, instance("b", "w"))
	at := h.clock.Advance(time.Second)

	s := stimulus("s1", "approved", "o1", time.Hour)
	s.Outcome = json.RawMessage(`{"resumed": ["a", "b"]}`)
	h.deliver(t, &s,
		message("ghost", "m1"), // no such instance: dropped
		message("a", "m1"),
		message("b", "m1"),
		message("a", "m1"), // already in a's inbox by now
	)
	got, err := h.s.GetStimulus(ctx(t), "s1")
	must(t, "GetStimulus", err)
	if got.State != weft.StimulusDelivered || got.Name != "approved" || got.Key != "o1" {
		t.Errorf("delivered stimulus = %+v", got)
	}
	if got.DeliveredTo != "a" {
		t.Errorf("DeliveredTo = %q, want the instance of the first message written, %q", got.DeliveredTo, "a")
	}
	wantJSON(t, "Outcome", got.Outcome, s.Outcome)
	wantJSON(t, "Payload", got.Payload, s.Payload)
	wantTime(t, "CreatedAt", got.CreatedAt, at)
	wantTime(t, "SettledAt", got.SettledAt, at)
	wantTime(t, "ExpiresAt", got.ExpiresAt, s.ExpiresAt)
	pending, err := h.s.PendingStimuli(ctx(t), "approved", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "a delivered stimulus is not queued", stimulusIDs(pending), nil)

	msgs, err := h.s.Inbox(ctx(t), "a")
	must(t, "Inbox", err)
	if len(msgs) != 1 {
		t.Fatalf("a's inbox = %+v, want m1 once", msgs)
	}
	m := msgs[0]
	if m.InstanceID != "a" || m.ID != "m1" || m.Kind != "stimulus" || m.Token != "tok-m1" || m.Seq == 0 {
		t.Errorf("message = %+v", m)
	}
	if string(m.Payload) != `{"msg":"m1"}` {
		t.Errorf("payload = %s, want it compacted", m.Payload)
	}
	wantTime(t, "message CreatedAt", m.CreatedAt, at)
	wantStrings(t, "b's inbox", h.inbox(t, "b"), []string{"m1"})
	if _, err := h.s.GetInstance(ctx(t), "ghost"); err == nil {
		t.Error("Deliver created the instance of a dropped message")
	}

	// The same stimulus again: answered from the record, nothing written.
	h.clock.Advance(time.Second)
	again := stimulus("s1", "other", "o2", 2*time.Hour)
	existing, err := h.s.Deliver(ctx(t), &again, []weft.Message{message("a", "m2"), message("b", "m2")})
	must(t, "Deliver again", err)
	if existing == nil || existing.State != weft.StimulusDelivered || existing.Name != "approved" || !jsonEq(existing.Outcome, s.Outcome) {
		t.Errorf("existing = %+v, want the delivered record", existing)
	}
	wantStrings(t, "a's inbox after a repeated Deliver", h.inbox(t, "a"), []string{"m1"})
	wantStrings(t, "b's inbox after a repeated Deliver", h.inbox(t, "b"), []string{"m1"})

	// A queued or dead stimulus is known too; so is one delivered by a
	// Commit, and EnqueueStimulus knows one delivered by Deliver.
	h.enqueue(t, stimulus("queued", "approved", "o1", time.Hour))
	h.enqueue(t, stimulus("dead", "approved", "o1", time.Second))
	h.enqueue(t, stimulus("committed", "approved", "o1", time.Hour))
	h.commit(t, store.Commit{Instance: instance("c", "w"), DeliveredStimulus: "committed"})
	_, err = h.s.ExpireStimuli(ctx(t), h.clock.Now(), 10)
	must(t, "ExpireStimuli", err)
	for id, state := range map[string]weft.StimulusState{
		"queued": weft.StimulusQueued, "dead": weft.StimulusDead, "committed": weft.StimulusDelivered,
	} {
		s := stimulus(id, "approved", "o1", time.Hour)
		existing, err := h.s.Deliver(ctx(t), &s, []weft.Message{message("a", "from-"+id)})
		must(t, "Deliver "+id, err)
		if existing == nil || existing.State != state {
			t.Errorf("Deliver %s: existing = %+v, want the %s record", id, existing, state)
		}
	}
	wantStrings(t, "a's inbox after Deliver of known stimuli", h.inbox(t, "a"), []string{"m1"})
	existing, err = h.s.EnqueueStimulus(ctx(t), stimulus("s1", "approved", "o1", time.Hour))
	must(t, "EnqueueStimulus", err)
	if existing == nil || existing.State != weft.StimulusDelivered {
		t.Errorf("EnqueueStimulus of a stimulus Deliver recorded: existing = %+v", existing)
	}

	// DeliveredTo skips dropped messages, and is empty when none is written.
	s2 := stimulus("s2", "approved", "o1", time.Hour)
	h.deliver(t, &s2, message("ghost", "m"), message("b", "m"))
	s3 := stimulus("s3", "approved", "o1", time.Hour)
	h.deliver(t, &s3, message("ghost", "m"))
	for id, want := range map[string]string{"s2": "b", "s3": ""} {
		got, err := h.s.GetStimulus(ctx(t), id)
		must(t, "GetStimulus "+id, err)
		if got.State != weft.StimulusDelivered || got.DeliveredTo != want {
			t.Errorf("%s = %+v, want delivered to %q", id, got, want)
		}
	}
}

// testDeliverWithoutStimulus: Deliver(nil, msgs) only writes messages; a
// message whose id the inbox holds is not written twice.
func testDeliverWithoutStimulus(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	h.deliver(t, nil, message("a", "m1"), message("a", "m2"), message("a", "m1"), message("nope", "m3"))
	h.clock.Advance(time.Second)
	h.deliver(t, nil, message("a", "m2"), message("a", "m3"))
	h.deliver(t, nil)
	msgs, err := h.s.Inbox(ctx(t), "a")
	must(t, "Inbox", err)
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	wantStrings(t, "inbox", ids, []string{"m1", "m2", "m3"})
	if len(msgs) == 3 {
		wantTime(t, "m2's CreatedAt is its first write", msgs[1].CreatedAt, Epoch)
		wantTime(t, "m3's CreatedAt", msgs[2].CreatedAt, Epoch.Add(time.Second))
	}
	if _, err := h.s.GetInstance(ctx(t), "nope"); err == nil {
		t.Error("Deliver created the instance of a dropped message")
	}
	// Message ids may be longer than other ids, to be made of them.
	long := strings.Repeat("l", store.MaxMessageIDLen)
	h.deliver(t, nil, message("a", long))
	h.commit(t, store.Commit{Instance: &weft.Instance{ID: "a", Workflow: "w", Status: weft.StatusRunning, Rev: 1}, Consumed: []string{long}})

	bad := []struct {
		name string
		s    *weft.Stimulus
		msgs []weft.Message
	}{
		{"stimulus without id", &weft.Stimulus{Name: "n", ExpiresAt: Epoch}, nil},
		{"stimulus without name", &weft.Stimulus{ID: "x", ExpiresAt: Epoch}, nil},
		{"stimulus without expiry", &weft.Stimulus{ID: "x", Name: "n"}, nil},
		{"stimulus with a bad payload", &weft.Stimulus{ID: "x", Name: "n", ExpiresAt: Epoch, Payload: json.RawMessage(`{`)}, nil},
		{"stimulus with a bad outcome", &weft.Stimulus{ID: "x", Name: "n", ExpiresAt: Epoch, Outcome: json.RawMessage(`{`)}, nil},
		{"message without instance", nil, []weft.Message{{ID: "m", Kind: "k"}}},
		{"message without id", nil, []weft.Message{{InstanceID: "a", Kind: "k"}}},
		{"message without kind", nil, []weft.Message{{InstanceID: "a", ID: "m"}}},
		{"message id too long", nil, []weft.Message{{InstanceID: "a", ID: strings.Repeat("m", store.MaxMessageIDLen+1), Kind: "k"}}},
		{"message with a bad payload", nil, []weft.Message{{InstanceID: "a", ID: "m", Kind: "k", Payload: json.RawMessage(`[`)}}},
		{"a bad message after a good one", nil, []weft.Message{message("a", "ok"), {InstanceID: "a", ID: "m"}}},
	}
	for _, tt := range bad {
		s := tt.s
		if s == nil { // a valid stimulus that must not be recorded either
			st := stimulus("valid", "n", "k", time.Hour)
			s = &st
		}
		_, err := h.s.Deliver(ctx(t), s, tt.msgs)
		wantErr(t, tt.name, err, weft.ErrInvalid)
	}
	wantStrings(t, "inbox after invalid Delivers", h.inbox(t, "a"), []string{"m1", "m2", "m3"})
	for _, id := range []string{"valid", "x"} {
		_, err := h.s.GetStimulus(ctx(t), id)
		wantErr(t, "stimulus of an invalid Deliver", err, weft.ErrNotFound)
	}
}

// testInbox: an inbox is ordered by Seq (the order of writing), holds only
// its instance's messages, and is not found without its instance.
func testInbox(t *testing.T, h *harness) {
	ids := []string{"a", "ab", "a\x00", "b"}
	for _, id := range ids {
		h.create(t, instance(id, "w"))
	}
	wantStrings(t, "empty inbox", h.inbox(t, "a"), nil)
	// Interleaved writes, ids that do not sort in writing order.
	for i, mid := range []string{"z", "y", "m\x00", "x", "m"} {
		h.clock.Advance(time.Millisecond)
		var msgs []weft.Message
		for _, id := range ids {
			msgs = append(msgs, message(id, fmt.Sprint(mid, "-", id)))
		}
		if i%2 == 0 {
			h.deliver(t, nil, msgs...)
		} else {
			st := stimulus(fmt.Sprint("s", i), "e", "k", time.Hour)
			h.deliver(t, &st, msgs...)
		}
	}
	for _, id := range ids {
		var want []string
		for _, mid := range []string{"z", "y", "m\x00", "x", "m"} {
			want = append(want, fmt.Sprint(mid, "-", id))
		}
		wantStrings(t, fmt.Sprintf("inbox of %q", id), h.inbox(t, id), want)
	}
	_, err := h.s.Inbox(ctx(t), "nope")
	wantErr(t, "Inbox of a missing instance", err, weft.ErrNotFound)
}

// testCommitConsumed: a Commit removes the messages it names from its
// instance's inbox, ignores ids the inbox does not hold, and a refused
// Commit removes nothing.
func testCommitConsumed(t *testing.T, h *harness) {
	in := instance("i", "w")
	h.commit(t, store.Commit{Instance: in, Fence: 2})
	h.create(t, instance("other", "w"))
	h.deliver(t, nil, message("i", "m1"), message("i", "m2"), message("i", "m3"), message("other", "m2"))

	in.Rev = 1
	h.enqueue(t, stimulus("gone", "e", "k", time.Hour))
	h.commit(t, store.Commit{Instance: instance("taker", "w"), DeliveredStimulus: "gone"})
	refused := []struct {
		name string
		c    store.Commit
		want error
	}{
		{"stale rev", store.Commit{Instance: &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusRunning, Rev: 7}, Fence: 2}, weft.ErrConflict},
		{"lower fence", store.Commit{Instance: in, Fence: 1}, weft.ErrFenced},
		{"stimulus not queued", store.Commit{Instance: in, Fence: 2, DeliveredStimulus: "gone"}, store.ErrNotQueued},
	}
	for _, tt := range refused {
		tt.c.Consumed = []string{"m1", "m2", "m3"}
		_, err := h.s.Commit(ctx(t), tt.c)
		wantErr(t, tt.name, err, tt.want)
		wantStrings(t, tt.name+": inbox", h.inbox(t, "i"), []string{"m1", "m2", "m3"})
	}

	h.commit(t, store.Commit{Instance: in, Fence: 2, Consumed: []string{"m2", "unknown", "m2"}})
	wantStrings(t, "inbox after consuming m2", h.inbox(t, "i"), []string{"m1", "m3"})
	wantStrings(t, "another inbox's m2 stays", h.inbox(t, "other"), []string{"m2"})

	// The inbox no longer holds m2, so the id may be written again; m1 is
	// still held and is not.
	in.Rev = 2
	h.deliver(t, nil, message("i", "m2"), message("i", "m1"))
	wantStrings(t, "inbox after writing m2 again", h.inbox(t, "i"), []string{"m1", "m3", "m2"})

	h.commit(t, store.Commit{Instance: in, Fence: 2, Consumed: []string{"m1", "m2", "m3"}})
	wantStrings(t, "inbox after consuming all", h.inbox(t, "i"), nil)
}

// testCommitSend: a Commit writes messages to other instances' inboxes in
// its transaction; missing targets and ids already held are skipped, and
// a refused Commit sends nothing.
func testCommitSend(t *testing.T, h *harness) {
	h.create(t, instance("parent", "w"))
	h.create(t, instance("sibling", "w"))
	child := instance("child", "w")
	child.Parent = &weft.ParentRef{InstanceID: "parent", StepID: "call"}
	h.commit(t, store.Commit{Instance: child, Fence: 1})

	end := func(rev uint64, fence uint64) store.Commit {
		c := instance("child", "w")
		c.Rev, c.Status, c.Output = rev, weft.StatusCompleted, json.RawMessage(`{"ok": true}`)
		return store.Commit{Instance: c, Fence: fence, Send: []weft.Message{
			{InstanceID: "parent", ID: "child:child", Kind: "child", Token: "call", Payload: json.RawMessage(`{"output": {"ok": true}}`)},
			{InstanceID: "gone", ID: "child:child", Kind: "child"},
			{InstanceID: "sibling", ID: "hello", Kind: "stimulus"},
		}}
	}
	for _, tt := range []struct {
		name string
		c    store.Commit
		want error
	}{
		{"stale rev", end(2, 1), weft.ErrConflict},
		{"lower fence", end(1, 0), weft.ErrFenced},
		{"create existing", end(0, 1), weft.ErrExists},
	} {
		_, err := h.s.Commit(ctx(t), tt.c)
		wantErr(t, tt.name, err, tt.want)
		wantStrings(t, tt.name+": parent's inbox", h.inbox(t, "parent"), nil)
		wantStrings(t, tt.name+": sibling's inbox", h.inbox(t, "sibling"), nil)
	}

	at := h.clock.Advance(time.Second)
	h.commit(t, end(1, 1))
	msgs, err := h.s.Inbox(ctx(t), "parent")
	must(t, "Inbox", err)
	if len(msgs) != 1 {
		t.Fatalf("parent's inbox = %+v, want the child's end", msgs)
	}
	m := msgs[0]
	if m.InstanceID != "parent" || m.ID != "child:child" || m.Kind != "child" || m.Token != "call" || m.Seq == 0 {
		t.Errorf("message = %+v", m)
	}
	wantJSON(t, "payload", m.Payload, json.RawMessage(`{"output":{"ok":true}}`))
	wantTime(t, "CreatedAt", m.CreatedAt, at)
	wantStrings(t, "sibling's inbox", h.inbox(t, "sibling"), []string{"hello"})
	if _, err := h.s.GetInstance(ctx(t), "gone"); err == nil {
		t.Error("Send created the instance of a dropped message")
	}

	// Sent again (a retried end): not written twice.
	h.commit(t, end(2, 1))
	wantStrings(t, "parent's inbox after sending again", h.inbox(t, "parent"), []string{"child:child"})
	wantStrings(t, "sibling's inbox after sending again", h.inbox(t, "sibling"), []string{"hello"})
}

// testDeleteInstanceClearsInbox: DeleteInstance removes the inbox; an
// instance created again with the id starts with an empty one.
func testDeleteInstanceClearsInbox(t *testing.T, h *harness) {
	h.create(t, instance("d", "w"))
	h.create(t, instance("keep", "w"))
	h.deliver(t, nil, message("d", "m1"), message("d", "m2"), message("keep", "m1"))
	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "d", 0))
	_, err := h.s.Inbox(ctx(t), "d")
	wantErr(t, "Inbox after delete", err, weft.ErrNotFound)
	wantStrings(t, "another inbox", h.inbox(t, "keep"), []string{"m1"})

	h.create(t, instance("d", "w"))
	wantStrings(t, "inbox of the re-created instance", h.inbox(t, "d"), nil)
	h.deliver(t, nil, message("d", "m2"))
	wantStrings(t, "inbox after writing a deleted id", h.inbox(t, "d"), []string{"m2"})
}

// testBookmarkToken: a bookmark's Token is stored and returned.
func testBookmarkToken(t *testing.T, h *harness) {
	h.commit(t, store.Commit{Instance: instance("i", "w"), Bookmarks: []weft.Bookmark{
		{StepPath: "a", Event: "e", Key: "k", Token: "tok-a"},
		{StepPath: "b", Event: "e", Key: "k"},
	}})
	check := func(what string, bms []weft.Bookmark, err error) {
		t.Helper()
		must(t, what, err)
		var got []string
		for _, b := range bms {
			got = append(got, b.StepPath+"="+b.Token)
		}
		wantStrings(t, what, got, []string{"a=tok-a", "b="})
	}
	bms, err := h.s.Bookmarks(ctx(t), "i")
	check("Bookmarks", bms, err)
	bms, err = h.s.FindBookmarks(ctx(t), "e", "k")
	check("FindBookmarks", bms, err)
}

// testWaitingInboxes: an inbox with messages waits from its oldest message,
// or from the last commit that consumed some; an emptied or deleted inbox
// waits no more. Recovery reads this to requeue lost wake-ups.
func testWaitingInboxes(t *testing.T, h *harness) {
	for _, id := range []string{"a", "b", "c"} {
		h.create(t, instance(id, "w"))
	}
	msg := func(to, id string) weft.Message {
		return weft.Message{InstanceID: to, ID: id, Kind: "stimulus", Token: "b1", Payload: json.RawMessage(`{}`)}
	}
	waiting := func(before time.Time) []string {
		t.Helper()
		ids, err := h.s.WaitingInboxes(ctx(t), before, 10)
		must(t, "WaitingInboxes", err)
		return ids
	}
	deliver := func(msgs ...weft.Message) {
		t.Helper()
		_, err := h.s.Deliver(ctx(t), nil, msgs)
		must(t, "Deliver", err)
	}
	deliver(msg("a", "m1"))                 // a waits since Epoch
	t0 := h.clock.Advance(time.Second)      // Epoch+1s
	deliver(msg("b", "m1"), msg("a", "m2")) // b waits since +1s; a still since Epoch
	t1 := h.clock.Advance(time.Second)      // Epoch+2s
	deliver(msg("missing", "m1"))           // no such instance: nothing waits
	wantStrings(t, "before any message", waiting(Epoch), nil)
	wantStrings(t, "just after a's first", waiting(Epoch.Add(time.Millisecond)), []string{"a"})
	wantStrings(t, "longest waiting first", waiting(t1), []string{"a", "b"})
	wantStrings(t, "before is exclusive", waiting(t0), []string{"a"})

	// a consumes one of its two messages at +2s: it waits from then on.
	in := h.get(t, "a")
	in.Rev = h.commit(t, store.Commit{Instance: in, Consumed: []string{"m1"}})
	wantStrings(t, "a restarted its wait", waiting(t1), []string{"b"})
	later := h.clock.Advance(time.Second)
	wantStrings(t, "both waiting again", waiting(later), []string{"b", "a"})
	// a consumes the other: its inbox is empty and waits no more.
	h.commit(t, store.Commit{Instance: in, Consumed: []string{"m2"}})
	wantStrings(t, "a emptied", waiting(later.Add(time.Hour)), []string{"b"})
	// A deleted instance waits no more; a commit consuming nothing changes
	// nothing.
	c := h.get(t, "c")
	deliver(msg("c", "m1"))
	h.commit(t, store.Commit{Instance: c})
	wantStrings(t, "c's message waits", waiting(later.Add(time.Hour)), []string{"b", "c"})
	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "b", 0))
	wantStrings(t, "b deleted", waiting(later.Add(time.Hour)), []string{"c"})
	wantStrings(t, "limit", waiting(later.Add(time.Hour))[:1], []string{"c"})
}

// testCommitDrains: a commit that drains the inbox is refused, changing
// nothing, while the inbox holds a message it does not consume; consuming
// every message, or an empty inbox, lets it through.
func testCommitDrains(t *testing.T, h *harness) {
	in := instance("i", "w")
	h.commit(t, store.Commit{Instance: in, Fence: 2})
	in.Rev = 1
	in.Status = weft.StatusRunning
	h.commit(t, store.Commit{Instance: in, Fence: 2, Drains: true}) // empty inbox
	in.Rev = 2
	h.deliver(t, nil, message("i", "m1"), message("i", "m2"))
	in.Status = weft.StatusCompleted
	for _, consumed := range [][]string{nil, {"m1"}, {"m1", "m1", "unknown"}} {
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in, Fence: 2, Drains: true, Consumed: consumed})
		wantErr(t, fmt.Sprintf("drains, consuming %q", consumed), err, store.ErrInboxNotEmpty)
		var ce *store.CommitError
		if !errors.As(err, &ce) || ce.Rev != 2 {
			t.Errorf("consuming %q: %v is not a *CommitError saying rev 2", consumed, err)
		}
		wantStrings(t, "inbox after a refused drain", h.inbox(t, "i"), []string{"m1", "m2"})
		if got := h.get(t, "i"); got.Rev != 2 || got.Status != weft.StatusRunning {
			t.Errorf("a refused drain changed the instance: rev %d, %s", got.Rev, got.Status)
		}
	}
	// Without Drains the same commit goes through.
	in2 := *in
	in2.Status = weft.StatusRunning
	h.commit(t, store.Commit{Instance: &in2, Fence: 2, Consumed: []string{"m1"}})
	in.Rev = 3
	h.commit(t, store.Commit{Instance: in, Fence: 2, Drains: true, Consumed: []string{"m2"}})
	wantStrings(t, "inbox after the drain", h.inbox(t, "i"), nil)
	if got := h.get(t, "i"); got.Status != weft.StatusCompleted {
		t.Errorf("after the drain the instance is %s", got.Status)
	}
}

// testInboxWaiting: GetInstance says whether the inbox holds a message,
// with a lease and without; other reads and commits do not carry it.
func testInboxWaiting(t *testing.T, h *harness) {
	waiting := func(what, id string, want bool) {
		t.Helper()
		if got := h.get(t, id).InboxWaiting; got != want {
			t.Errorf("%s: InboxWaiting = %v, want %v", what, got, want)
		}
	}
	h.create(t, instance("i", "w"))
	h.create(t, leased("l", "n1", "b1", Epoch.Add(time.Hour)))
	waiting("new", "i", false)
	waiting("new, leased", "l", false)
	h.deliver(t, nil, message("i", "m1"), message("i", "m2"), message("l", "m3"))
	waiting("two messages", "i", true)
	waiting("a message, leased", "l", true)
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{})
	must(t, "ListInstances", err)
	for _, it := range items {
		if it.InboxWaiting {
			t.Errorf("ListInstances: %s says InboxWaiting", it.ID)
		}
	}
	in := h.get(t, "i")
	h.commit(t, store.Commit{Instance: in, Consumed: []string{"m1"}})
	waiting("one consumed", "i", true)
	in = h.get(t, "i")
	h.commit(t, store.Commit{Instance: in, Consumed: []string{"m2"}})
	waiting("all consumed", "i", false)
	l := h.get(t, "l")
	h.commit(t, store.Commit{Instance: l, Consumed: []string{"m3"}})
	waiting("all consumed, leased", "l", false)
}
