package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func stimulus(id, name, key string, ttl time.Duration) weft.Stimulus {
	return weft.Stimulus{ID: id, Name: name, Key: key, Payload: json.RawMessage(`{"from": "` + id + `"}`), ExpiresAt: Epoch.Add(ttl)}
}

func (h *harness) enqueue(t *testing.T, s weft.Stimulus) {
	t.Helper()
	existing, err := h.s.EnqueueStimulus(ctx(t), s)
	must(t, "EnqueueStimulus "+s.ID, err)
	if existing != nil {
		t.Fatalf("EnqueueStimulus %s: found existing %+v", s.ID, existing)
	}
}

func stimulusIDs(ss []weft.Stimulus) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func testStimulusIdempotency(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("s1", "paid", "o1", time.Hour))
	again := stimulus("s1", "other", "o2", 2*time.Hour)
	again.Payload = json.RawMessage(`{"second": true}`)
	h.clock.Advance(time.Second)
	existing, err := h.s.EnqueueStimulus(ctx(t), again)
	must(t, "EnqueueStimulus again", err)
	if existing == nil {
		t.Fatal("second EnqueueStimulus enqueued again")
	}
	if existing.ID != "s1" || existing.Name != "paid" || existing.Key != "o1" || existing.State != weft.StimulusQueued {
		t.Errorf("existing = %+v", existing)
	}
	wantJSON(t, "existing payload", existing.Payload, json.RawMessage(`{"from":"s1"}`))
	wantTime(t, "CreatedAt", existing.CreatedAt, Epoch)
	wantTime(t, "ExpiresAt", existing.ExpiresAt, Epoch.Add(time.Hour))
	pending, err := h.s.PendingStimuli(ctx(t), "paid", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending", stimulusIDs(pending), []string{"s1"})
	pending, err = h.s.PendingStimuli(ctx(t), "other", "o2")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending of the duplicate", stimulusIDs(pending), nil)

	got, err := h.s.GetStimulus(ctx(t), "s1")
	must(t, "GetStimulus", err)
	if got.State != weft.StimulusQueued || got.Name != "paid" {
		t.Errorf("GetStimulus = %+v", got)
	}
	_, err = h.s.GetStimulus(ctx(t), "nope")
	wantErr(t, "GetStimulus missing", err, weft.ErrNotFound)

	for _, bad := range []weft.Stimulus{
		{Name: "n", ExpiresAt: Epoch},
		{ID: "x", ExpiresAt: Epoch},
		{ID: "x", Name: "n"},
		{ID: "x", Name: "n", ExpiresAt: Epoch, Payload: json.RawMessage(`{`)},
	} {
		_, err := h.s.EnqueueStimulus(ctx(t), bad)
		wantErr(t, fmt.Sprintf("EnqueueStimulus(%+v)", bad), err, weft.ErrInvalid)
	}
}

func testPendingStimuli(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("b", "paid", "o1", time.Hour))
	h.clock.Advance(time.Second)
	h.enqueue(t, stimulus("a", "paid", "o1", 10*time.Second))
	h.clock.Advance(time.Second)
	h.enqueue(t, stimulus("c", "paid", "o1", time.Hour))
	h.enqueue(t, stimulus("d", "paid", "o2", time.Hour))
	h.enqueue(t, stimulus("e", "shipped", "o1", time.Hour))
	h.enqueue(t, stimulus("f", "paid", "", time.Hour))
	h.enqueue(t, stimulus("g", "pai", "do1", time.Hour))

	pending := func(name, key string) []string {
		t.Helper()
		ss, err := h.s.PendingStimuli(ctx(t), name, key)
		must(t, "PendingStimuli", err)
		return stimulusIDs(ss)
	}
	wantStrings(t, "paid/o1, oldest first", pending("paid", "o1"), []string{"b", "a", "c"})
	wantStrings(t, "paid/o2", pending("paid", "o2"), []string{"d"})
	wantStrings(t, "paid/empty key", pending("paid", ""), []string{"f"})
	wantStrings(t, "pai/do1", pending("pai", "do1"), []string{"g"})
	wantStrings(t, "none", pending("refunded", "o1"), nil)
	// By the store's clock, "a" has expired even before a sweep.
	h.clock.Advance(10 * time.Second)
	wantStrings(t, "expired excluded", pending("paid", "o1"), []string{"b", "c"})
}

func testDeliverStimulus(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("s1", "approved", "o1", time.Hour))
	h.enqueue(t, stimulus("s2", "approved", "o1", time.Hour))
	h.enqueue(t, stimulus("late", "approved", "o9", time.Second))
	in := instance("i", "w")
	h.commit(t, store.Commit{Instance: in, Bookmarks: []weft.Bookmark{{StepPath: "review", Event: "approved", Key: "o1"}}})

	// The instance resumes: it consumes s1 and drops its bookmark, atomically.
	h.clock.Advance(time.Second / 2)
	in.Rev = 1
	in.Status = weft.StatusRunning
	outcome := json.RawMessage(`{"resumed": ["i"]}`)
	h.commit(t, store.Commit{Instance: in, Bookmarks: []weft.Bookmark{}, DeliveredStimulus: "s1", DeliveredOutcome: outcome})
	pending, err := h.s.PendingStimuli(ctx(t), "approved", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending after delivery", stimulusIDs(pending), []string{"s2"})
	got, err := h.s.GetStimulus(ctx(t), "s1")
	must(t, "GetStimulus", err)
	if got.State != weft.StimulusDelivered || got.DeliveredTo != "i" {
		t.Errorf("delivered stimulus = %+v", got)
	}
	wantJSON(t, "Outcome", got.Outcome, outcome)
	wantTime(t, "SettledAt", got.SettledAt, Epoch.Add(time.Second/2))

	// A redelivery of s1 is answered from the record.
	existing, err := h.s.EnqueueStimulus(ctx(t), stimulus("s1", "approved", "o1", time.Hour))
	must(t, "EnqueueStimulus delivered", err)
	if existing == nil || existing.State != weft.StimulusDelivered || !jsonEq(existing.Outcome, outcome) {
		t.Errorf("existing = %+v, want the delivered record", existing)
	}
	pending, err = h.s.PendingStimuli(ctx(t), "approved", "o1")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending after redelivery", stimulusIDs(pending), []string{"s2"})

	// Consuming a stimulus twice, or one past its TTL, is refused.
	h.clock.Advance(time.Second)
	tests := []struct {
		name, stim string
	}{
		{"delivered twice", "s1"},
		{"expired, not yet swept", "late"},
		{"unknown", "nope"},
	}
	for _, tt := range tests {
		other := instance("other-"+tt.stim, "w")
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: other, DeliveredStimulus: tt.stim})
		wantErr(t, tt.name, err, store.ErrNotQueued)
		var ce *store.CommitError
		if !errors.As(err, &ce) || ce.Stimulus != tt.stim {
			t.Errorf("%s: error %v does not name the stimulus", tt.name, err)
		}
		if _, err := h.s.GetInstance(ctx(t), other.ID); !errors.Is(err, weft.ErrNotFound) {
			t.Errorf("%s: refused commit created the instance", tt.name)
		}
	}
	// A create can consume a stimulus (a trigger starting an instance).
	h.commit(t, store.Commit{Instance: instance("started", "w"), DeliveredStimulus: "s2"})
	got, err = h.s.GetStimulus(ctx(t), "s2")
	must(t, "GetStimulus", err)
	if got.State != weft.StimulusDelivered || got.DeliveredTo != "started" {
		t.Errorf("stimulus consumed by a create = %+v", got)
	}
}

func testExpireStimuli(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("x2", "e", "k", 2*time.Second))
	h.enqueue(t, stimulus("x1", "e", "k", time.Second))
	h.enqueue(t, stimulus("x3", "e", "k", 3*time.Second))
	h.enqueue(t, stimulus("keep", "e", "k", time.Hour))
	h.enqueue(t, stimulus("gone", "e", "k", time.Second))
	h.commit(t, store.Commit{Instance: instance("i", "w"), DeliveredStimulus: "gone"})

	expire := func(now time.Time, limit int) []string {
		t.Helper()
		ss, err := h.s.ExpireStimuli(ctx(t), now, limit)
		must(t, "ExpireStimuli", err)
		for _, s := range ss {
			if s.State != weft.StimulusDead {
				t.Errorf("expired %s in state %s", s.ID, s.State)
			}
		}
		return stimulusIDs(ss)
	}
	wantStrings(t, "nothing expired", expire(Epoch, 10), nil)
	wantStrings(t, "expiry equals now", expire(Epoch.Add(time.Second), 10), []string{"x1"})
	h.clock.Advance(time.Minute)
	wantStrings(t, "limit", expire(h.clock.Now(), 1), []string{"x2"})
	wantStrings(t, "rest", expire(h.clock.Now(), 10), []string{"x3"})
	wantStrings(t, "all swept", expire(h.clock.Now(), 10), nil)

	pending, err := h.s.PendingStimuli(ctx(t), "e", "k")
	must(t, "PendingStimuli", err)
	wantStrings(t, "pending", stimulusIDs(pending), []string{"keep"})

	var dead []string
	cursor := ""
	for range 10 {
		page, next, err := h.s.DeadLetters(ctx(t), cursor, 2)
		must(t, "DeadLetters", err)
		dead = append(dead, stimulusIDs(page)...)
		if cursor = next; cursor == "" {
			break
		}
	}
	wantStrings(t, "dead letters in the order they died", dead, []string{"x1", "x2", "x3"})

	// A dead stimulus's id stays known.
	existing, err := h.s.EnqueueStimulus(ctx(t), stimulus("x1", "e", "k", time.Hour))
	must(t, "EnqueueStimulus dead", err)
	if existing == nil || existing.State != weft.StimulusDead {
		t.Errorf("existing = %+v, want the dead record", existing)
	}
	_, _, err = h.s.DeadLetters(ctx(t), "!!bad!!", 2)
	wantErr(t, "DeadLetters with a bad cursor", err, weft.ErrInvalid)
}

// testForgetSettledStimuli: delivered and dead stimuli are forgotten once
// their retention ends (within 30 days), and their ids can be used again.
func testForgetSettledStimuli(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("dead", "e", "k", time.Second))
	h.enqueue(t, stimulus("delivered", "e", "k", time.Hour))
	h.commit(t, store.Commit{Instance: instance("i", "w"), DeliveredStimulus: "delivered"})
	direct := stimulus("direct", "e", "k", time.Hour)
	h.deliver(t, &direct, message("i", "m"))
	now := h.clock.Advance(time.Minute)
	_, err := h.s.ExpireStimuli(ctx(t), now, 10)
	must(t, "ExpireStimuli", err)
	for _, id := range []string{"dead", "delivered", "direct"} {
		_, err := h.s.GetStimulus(ctx(t), id)
		must(t, "GetStimulus "+id+" within its retention", err)
	}

	now = h.clock.Advance(30 * 24 * time.Hour)
	for range 4 { // forgetting is bounded by limit per call
		_, err := h.s.ExpireStimuli(ctx(t), now, 1)
		must(t, "ExpireStimuli", err)
	}
	for _, id := range []string{"dead", "delivered", "direct"} {
		_, err := h.s.GetStimulus(ctx(t), id)
		wantErr(t, "GetStimulus "+id, err, weft.ErrNotFound)
		s := stimulus(id, "e", "k", 0)
		s.ExpiresAt = now.Add(time.Hour)
		h.enqueue(t, s)
	}
	dead, _, err := h.s.DeadLetters(ctx(t), "", 10)
	must(t, "DeadLetters", err)
	wantStrings(t, "dead letters", stimulusIDs(dead), nil)
	// Forgetting a stimulus leaves the messages it delivered.
	wantStrings(t, "inbox", h.inbox(t, "i"), []string{"m"})
}

func testQueuedStimuli(t *testing.T, h *harness) {
	h.enqueue(t, stimulus("q3", "e", "k", 3*time.Second))
	h.enqueue(t, stimulus("q1", "f", "", time.Second))
	h.enqueue(t, stimulus("q2b", "e", "other", 2*time.Second))
	h.enqueue(t, stimulus("q2a", "e", "k", 2*time.Second))
	h.enqueue(t, stimulus("delivered", "e", "k", time.Second))
	h.enqueue(t, stimulus("dies", "e", "k", time.Millisecond))
	h.commit(t, store.Commit{Instance: instance("i", "w"), DeliveredStimulus: "delivered"})
	_, err := h.s.ExpireStimuli(ctx(t), Epoch.Add(time.Millisecond), 10)
	must(t, "ExpireStimuli", err)

	queued := func(limit int) []string {
		t.Helper()
		var ids []string
		cursor := ""
		for range 10 {
			page, next, err := h.s.QueuedStimuli(ctx(t), cursor, limit)
			must(t, "QueuedStimuli", err)
			if len(page) > limit {
				t.Fatalf("QueuedStimuli returned %d stimuli, limit %d", len(page), limit)
			}
			for _, s := range page {
				if s.State != weft.StimulusQueued {
					t.Errorf("queued %s in state %s", s.ID, s.State)
				}
			}
			ids = append(ids, stimulusIDs(page)...)
			if cursor = next; cursor == "" {
				return ids
			}
		}
		t.Fatal("QueuedStimuli: more than 10 pages")
		return nil
	}
	// By expiry, then id; neither the delivered nor the dead one.
	want := []string{"q1", "q2a", "q2b", "q3"}
	wantStrings(t, "one page", queued(10), want)
	wantStrings(t, "pages of 1", queued(1), want)
	wantStrings(t, "pages of 3", queued(3), want)

	// An expired stimulus not swept yet is still queued, and listed.
	h.clock.Advance(time.Minute)
	wantStrings(t, "expired, not swept", queued(10), want)
	page, _, err := h.s.QueuedStimuli(ctx(t), "", 1)
	must(t, "QueuedStimuli", err)
	if len(page) != 1 || page[0].Name != "f" || page[0].Key != "" || !page[0].ExpiresAt.Equal(Epoch.Add(time.Second)) {
		t.Errorf("first queued = %+v", page)
	}
	wantJSON(t, "payload", page[0].Payload, json.RawMessage(`{"from":"q1"}`))

	_, _, err = h.s.QueuedStimuli(ctx(t), "!!bad!!", 2)
	wantErr(t, "QueuedStimuli with a bad cursor", err, weft.ErrInvalid)
}
