package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// batchesTests are the subtests of the batch methods, run by Exercise.
var batchesTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"BatchCreateAndGet", testBatchCreateAndGet},
	{"BatchInvalid", testBatchInvalid},
	{"BatchUpdate", testBatchUpdate},
	{"ListBatches", testListBatches},
	{"DueBatches", testDueBatches},
	{"AddBatchItems", testAddBatchItems},
	{"BatchItemsPages", testBatchItemsPages},
	{"ApplyBatchItems", testApplyBatchItems},
	{"ApplyBatchItemsRefused", testApplyBatchItemsRefused},
	{"ApplyBatchItemsRace", testApplyBatchItemsRace},
	{"DeleteBatch", testDeleteBatch},
	{"BatchDurability", testBatchDurability},
	{"BatchCancelledContext", testBatchCancelledContext},
	{"BatchClosed", testBatchClosed},
}

// newBatch is a batch to create: a small document and state, by alice.
func newBatch(id string, wake time.Time) *weft.Batch {
	doc, _ := json.Marshal(map[string]string{"op": "cancel", "query": fmt.Sprintf("workflow = %q", id)})
	return &weft.Batch{
		ID:       id,
		Document: doc,
		State:    json.RawMessage(`{"phase":"selecting"}`),
		Actor:    "alice",
		Wake:     wake,
	}
}

// opMessage is the message of a batch's operation for instance's inbox.
func opMessage(instance, id string) weft.Message {
	return weft.Message{InstanceID: instance, ID: id, Kind: "cancel", Payload: json.RawMessage(`{"reason":"bad release"}`)}
}

// change is a batch change of instance to outcome with reason and msgs.
func change(instance string, outcome weft.BatchOutcome, reason string, msgs ...weft.Message) weft.BatchChange {
	return weft.BatchChange{InstanceID: instance, Outcome: outcome, Reason: reason, Messages: msgs}
}

// counts builds BatchCounts from outcome, n pairs.
func counts(kv ...any) weft.BatchCounts {
	c := weft.BatchCounts{}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i].(weft.BatchOutcome)] = kv[i+1].(int)
	}
	return c
}

func (h *harness) createBatch(t *testing.T, b *weft.Batch, ids ...string) *weft.Batch {
	t.Helper()
	got, err := h.s.CreateBatch(ctx(t), b, ids)
	if err != nil {
		t.Fatalf("CreateBatch(%s): %v", b.ID, err)
	}
	return got
}

func (h *harness) getBatch(t *testing.T, id string) *weft.Batch {
	t.Helper()
	got, err := h.s.GetBatch(ctx(t), id)
	if err != nil {
		t.Fatalf("GetBatch(%s): %v", id, err)
	}
	return got
}

// apply calls ApplyBatchItems and fails the test on error.
func (h *harness) apply(t *testing.T, b *weft.Batch, changes ...weft.BatchChange) *weft.Batch {
	t.Helper()
	got, err := h.s.ApplyBatchItems(ctx(t), b, changes)
	if err != nil {
		t.Fatalf("ApplyBatchItems(%s at revision %d): %v", b.ID, b.Revision, err)
	}
	return got
}

// wantBatch fails unless got is want as stored at revision rev with c as
// its counts (the Document and Actor are those want was created with).
func wantBatch(t *testing.T, what string, got, want *weft.Batch, rev uint64, created, updated time.Time, c weft.BatchCounts) {
	t.Helper()
	if got.ID != want.ID || got.Revision != rev || got.Actor != want.Actor {
		t.Errorf("%s = {id %q, revision %d, actor %q}, want {%q, %d, %q}", what, got.ID, got.Revision, got.Actor, want.ID, rev, want.Actor)
	}
	wantJSON(t, what+": Document", got.Document, want.Document)
	wantJSON(t, what+": State", got.State, want.State)
	if !got.Wake.Equal(want.Wake) {
		t.Errorf("%s: Wake = %v, want %v", what, got.Wake, want.Wake)
	}
	wantTime(t, what+": CreatedAt", got.CreatedAt, created)
	wantTime(t, what+": UpdatedAt", got.UpdatedAt, updated)
	if !maps.Equal(got.Counts, c) {
		t.Errorf("%s: Counts = %v, want %v", what, got.Counts, c)
	}
}

// itemsOf returns a page of a batch's items as "seq:instance:outcome",
// with ":reason" when there is one, and checks that each names the batch.
func itemsOf(t *testing.T, h *harness, id string, f weft.BatchItemFilter) []string {
	t.Helper()
	items, err := h.s.BatchItems(ctx(t), id, f)
	if err != nil {
		t.Fatalf("BatchItems(%s, %+v): %v", id, f, err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		if it.Batch != id {
			t.Errorf("item %d of batch %s names batch %q", it.Seq, id, it.Batch)
		}
		out[i] = fmt.Sprintf("%d:%s:%s", it.Seq, it.InstanceID, it.Outcome)
		if it.Reason != "" {
			out[i] += ":" + it.Reason
		}
	}
	return out
}

// itemTimes returns the Time of each item of a batch by instance.
func itemTimes(t *testing.T, h *harness, id string) map[string]time.Time {
	t.Helper()
	items, err := h.s.BatchItems(ctx(t), id, weft.BatchItemFilter{Limit: weft.MaxListLimit})
	if err != nil {
		t.Fatalf("BatchItems(%s): %v", id, err)
	}
	out := map[string]time.Time{}
	for _, it := range items {
		out[it.InstanceID] = it.Time
	}
	return out
}

func batchIDs(bs []weft.Batch) []string {
	var ids []string
	for _, b := range bs {
		ids = append(ids, b.ID)
	}
	return ids
}

// seqIDs returns n instance ids, i00001 and on.
func seqIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("i%05d", i+1)
	}
	return ids
}

func testBatchCreateAndGet(t *testing.T, h *harness) {
	b := newBatch("b-1", Epoch.Add(time.Minute))
	// An id given twice is one item, at its first place.
	got := h.createBatch(t, b, "i3", "i1", "i2", "i1", "i3")
	pending3 := counts(weft.BatchPending, 3)
	wantBatch(t, "created", got, b, 1, Epoch, Epoch, pending3)
	wantBatch(t, "read", h.getBatch(t, "b-1"), b, 1, Epoch, Epoch, pending3)
	wantStrings(t, "items", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:i3:pending", "2:i1:pending", "3:i2:pending"})
	for inst, at := range itemTimes(t, h, "b-1") {
		wantTime(t, "time of pending item "+inst, at, Epoch)
	}

	h.clock.Advance(time.Second)
	_, err := h.s.CreateBatch(ctx(t), newBatch("b-1", Epoch), []string{"i9"})
	wantErr(t, "CreateBatch of a taken id", err, weft.ErrExists)
	wantBatch(t, "after the refused create", h.getBatch(t, "b-1"), b, 1, Epoch, Epoch, pending3)
	wantStrings(t, "items after the refused create", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:i3:pending", "2:i1:pending", "3:i2:pending"})

	// Ids that extend one another name batches of their own.
	for _, id := range []string{"b-1:items", "b-1\x00", "b-"} {
		h.createBatch(t, newBatch(id, time.Time{}), "i1")
		wantStrings(t, "items of batch "+id, itemsOf(t, h, id, weft.BatchItemFilter{}), []string{"1:i1:pending"})
	}
	wantStrings(t, "items of b-1 after the others", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:i3:pending", "2:i1:pending", "3:i2:pending"})

	_, err = h.s.GetBatch(ctx(t), "b-none")
	wantErr(t, "GetBatch of no batch", err, weft.ErrNotFound)
	_, err = h.s.BatchItems(ctx(t), "b-none", weft.BatchItemFilter{})
	wantErr(t, "BatchItems of no batch", err, weft.ErrNotFound)

	// A batch without items, state, actor or wake is a batch.
	bare := &weft.Batch{ID: "b-bare", Document: json.RawMessage(`{}`)}
	wantBatch(t, "a bare batch", h.createBatch(t, bare), bare, 1, Epoch.Add(time.Second), Epoch.Add(time.Second), counts())
	wantBatch(t, "a bare batch read", h.getBatch(t, "b-bare"), bare, 1, Epoch.Add(time.Second), Epoch.Add(time.Second), counts())
	wantStrings(t, "items of a bare batch", itemsOf(t, h, "b-bare", weft.BatchItemFilter{}), nil)
}

func testBatchInvalid(t *testing.T, h *harness) {
	long := strings.Repeat("a", weft.MaxIDLen+1)
	for _, tt := range []struct {
		name string
		b    *weft.Batch
		ids  []string
	}{
		{"no batch", nil, nil},
		{"no id", newBatch("", time.Time{}), nil},
		{"a long id", newBatch(long, time.Time{}), nil},
		{"no document", &weft.Batch{ID: "x", State: json.RawMessage(`{}`)}, nil},
		{"a document that is not JSON", &weft.Batch{ID: "x", Document: json.RawMessage(`{nope`)}, nil},
		{"a state that is not JSON", &weft.Batch{ID: "x", Document: json.RawMessage(`{}`), State: json.RawMessage(`nope`)}, nil},
		{"an empty instance id", newBatch("x", time.Time{}), []string{"a", ""}},
		{"a long instance id", newBatch("x", time.Time{}), []string{long}},
		{"too many ids", newBatch("x", time.Time{}), seqIDs(weft.MaxBatchIDs + 1)},
	} {
		_, err := h.s.CreateBatch(ctx(t), tt.b, tt.ids)
		wantErr(t, "CreateBatch with "+tt.name, err, weft.ErrInvalid)
	}
	_, err := h.s.GetBatch(ctx(t), "x")
	wantErr(t, "GetBatch after the refused creates", err, weft.ErrNotFound)
	_, err = h.s.GetBatch(ctx(t), long)
	wantErr(t, "GetBatch of a long id", err, weft.ErrInvalid)
	_, _, err = h.s.ListBatches(ctx(t), "!!bad!!", 2)
	wantErr(t, "ListBatches with a bad cursor", err, weft.ErrInvalid)

	h.create(t, instance("a", "w"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "a")
	bad := *b
	bad.State = json.RawMessage(`nope`)
	_, err = h.s.UpdateBatch(ctx(t), &bad)
	wantErr(t, "UpdateBatch with a state that is not JSON", err, weft.ErrInvalid)
	_, _, err = h.s.AddBatchItems(ctx(t), b, seqIDs(weft.MaxBatchIDs+1))
	wantErr(t, "AddBatchItems with too many ids", err, weft.ErrInvalid)
	_, _, err = h.s.AddBatchItems(ctx(t), b, []string{""})
	wantErr(t, "AddBatchItems with an empty id", err, weft.ErrInvalid)
	_, err = h.s.BatchItems(ctx(t), "b-1", weft.BatchItemFilter{Outcome: "bogus"})
	wantErr(t, "BatchItems of an unknown outcome", err, weft.ErrInvalid)

	tooMany := make([]weft.BatchChange, weft.MaxBatchChanges+1)
	for i := range tooMany {
		tooMany[i] = change("a", weft.BatchDone, "")
	}
	for _, tt := range []struct {
		name    string
		changes []weft.BatchChange
	}{
		{"too many changes", tooMany},
		{"a pending outcome", []weft.BatchChange{change("a", weft.BatchPending, "")}},
		{"an unknown outcome", []weft.BatchChange{change("a", "bogus", "")}},
		{"no outcome", []weft.BatchChange{change("a", "", "")}},
		{"no instance", []weft.BatchChange{change("", weft.BatchDone, "")}},
		{"a message for another instance", []weft.BatchChange{change("a", weft.BatchDone, "", opMessage("b", "op:b-1"))}},
		{"a message without a kind", []weft.BatchChange{change("a", weft.BatchDone, "", weft.Message{ID: "op:b-1"})}},
		{"a message without an id", []weft.BatchChange{change("a", weft.BatchDone, "", weft.Message{Kind: "cancel"})}},
		{"a message whose payload is not JSON", []weft.BatchChange{change("a", weft.BatchDone, "", weft.Message{ID: "op:b-1", Kind: "cancel", Payload: json.RawMessage(`{`)})}},
	} {
		_, err := h.s.ApplyBatchItems(ctx(t), b, tt.changes)
		wantErr(t, "ApplyBatchItems with "+tt.name, err, weft.ErrInvalid)
	}
	wantBatch(t, "after the refused writes", h.getBatch(t, "b-1"), b, 1, Epoch, Epoch, counts(weft.BatchPending, 1))
	wantStrings(t, "items after the refused writes", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:a:pending"})
	wantStrings(t, "inbox after the refused writes", h.inbox(t, "a"), nil)

	// A message without an instance is for the change's.
	h.apply(t, b, change("a", weft.BatchDone, "", weft.Message{ID: "op:b-1", Kind: "cancel"}))
	wantStrings(t, "inbox of a message without an instance", h.inbox(t, "a"), []string{"op:b-1"})
}

func testBatchUpdate(t *testing.T, h *harness) {
	b := newBatch("b-1", Epoch.Add(time.Hour))
	h.createBatch(t, b, "i1", "i2")
	at := h.clock.Advance(time.Minute)
	up := *h.getBatch(t, "b-1")
	up.State = json.RawMessage(`{"phase":"applying","after":2}`)
	up.Wake = Epoch.Add(2 * time.Hour)
	// Neither the document nor the actor is written.
	up.Document = json.RawMessage(`{"op":"delete"}`)
	up.Actor = "mallory"
	got, err := h.s.UpdateBatch(ctx(t), &up)
	must(t, "UpdateBatch", err)
	want := *b
	want.State, want.Wake = up.State, up.Wake
	pending2 := counts(weft.BatchPending, 2)
	wantBatch(t, "updated", got, &want, 2, Epoch, at, pending2)
	wantBatch(t, "read after the update", h.getBatch(t, "b-1"), &want, 2, Epoch, at, pending2)

	// A write from revision 1 again lost the race: nothing changes.
	h.clock.Advance(time.Minute)
	stale := up
	stale.Revision = 1
	stale.State = json.RawMessage(`{"phase":"stale"}`)
	_, err = h.s.UpdateBatch(ctx(t), &stale)
	wantErr(t, "UpdateBatch from a stale revision", err, weft.ErrConflict)
	wantBatch(t, "after the refused update", h.getBatch(t, "b-1"), &want, 2, Epoch, at, pending2)

	// No wake and no state are a state and a wake.
	got.Wake, got.State = time.Time{}, nil
	got, err = h.s.UpdateBatch(ctx(t), got)
	must(t, "UpdateBatch without a wake", err)
	want.Wake, want.State = time.Time{}, nil
	wantBatch(t, "without a wake", h.getBatch(t, "b-1"), &want, 3, Epoch, at.Add(time.Minute), pending2)
	if got.Revision != 3 {
		t.Errorf("UpdateBatch returned revision %d, want 3", got.Revision)
	}

	_, err = h.s.UpdateBatch(ctx(t), newBatch("b-none", time.Time{}))
	wantErr(t, "UpdateBatch of no batch", err, weft.ErrNotFound)
}

// batchPages lists every batch from cursor by pages of limit, as
// "id@revision", checking the counts each has against GetBatch's.
func batchPages(t *testing.T, h *harness, cursor string, limit int) (ids []string, pages int) {
	t.Helper()
	for range 100 {
		page, next, err := h.s.ListBatches(ctx(t), cursor, limit)
		must(t, "ListBatches", err)
		pages++
		for _, b := range page {
			ids = append(ids, fmt.Sprintf("%s@%d", b.ID, b.Revision))
			if len(b.Document) == 0 || len(b.State) == 0 {
				t.Errorf("listed batch %s without its document or state", b.ID)
			}
			if want := h.getBatch(t, b.ID).Counts; !maps.Equal(b.Counts, want) {
				t.Errorf("listed batch %s with counts %v, want %v", b.ID, b.Counts, want)
			}
		}
		if next == "" {
			return ids, pages
		}
		cursor = next
	}
	t.Fatalf("ListBatches: more than 100 pages")
	return nil, 0
}

func testListBatches(t *testing.T, h *harness) {
	h.createBatch(t, newBatch("b-a", time.Time{}), "i1")
	h.clock.Advance(time.Second)
	// Created at the same time: the later id first.
	h.createBatch(t, newBatch("b-c", time.Time{}), "i1", "i2")
	h.createBatch(t, newBatch("b-b", time.Time{}))
	h.clock.Advance(time.Second)
	d := h.createBatch(t, newBatch("b-d", time.Time{}), "i1", "i2", "i3")
	_, err := h.s.UpdateBatch(ctx(t), d)
	must(t, "UpdateBatch", err)
	h.clock.Advance(time.Second)
	h.createBatch(t, newBatch("b-e", time.Time{}))

	want := []string{"b-e@1", "b-d@2", "b-c@1", "b-b@1", "b-a@1"}
	got, pages := batchPages(t, h, "", 2)
	wantStrings(t, "batches by pages of 2", got, want)
	if pages != 3 {
		t.Errorf("%d pages of 2 for %d batches", pages, len(want))
	}
	got, _ = batchPages(t, h, "", 0)
	wantStrings(t, "batches with the default limit", got, want)

	// The cursor is a place in the order: a batch created since is before
	// it, one deleted is not listed.
	page, next, err := h.s.ListBatches(ctx(t), "", 2)
	must(t, "ListBatches", err)
	wantStrings(t, "first page", batchIDs(page), []string{"b-e", "b-d"})
	h.clock.Advance(time.Second)
	h.createBatch(t, newBatch("b-f", time.Time{}))
	must(t, "DeleteBatch", h.s.DeleteBatch(ctx(t), "b-c"))
	got, _ = batchPages(t, h, next, 2)
	wantStrings(t, "batches after the cursor", got, []string{"b-b@1", "b-a@1"})
}

func testDueBatches(t *testing.T, h *harness) {
	// due returns the ids of the due batches, each checked against
	// GetBatch's.
	due := func(now time.Time, limit int) []string {
		t.Helper()
		bs, err := h.s.DueBatches(ctx(t), now, limit)
		must(t, "DueBatches", err)
		var ids []string
		for i := range bs {
			got := &bs[i]
			want := h.getBatch(t, got.ID)
			wantBatch(t, "due batch "+got.ID, got, want, want.Revision, want.CreatedAt, want.UpdatedAt, want.Counts)
			ids = append(ids, got.ID)
		}
		return ids
	}
	h.createBatch(t, newBatch("later", Epoch.Add(2*time.Hour)), "i1")
	h.createBatch(t, newBatch("soon-b", Epoch.Add(time.Minute)), "i1", "i2")
	h.createBatch(t, newBatch("soon-a", Epoch.Add(time.Minute)))
	h.createBatch(t, newBatch("past", Epoch.Add(-24*time.Hour)))
	h.createBatch(t, newBatch("never", time.Time{}))
	h.createBatch(t, newBatch("far", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)))

	wantStrings(t, "due now", due(Epoch, 10), []string{"past"})
	wantStrings(t, "due in a minute", due(Epoch.Add(time.Minute), 10), []string{"past", "soon-a", "soon-b"})
	wantStrings(t, "due in a minute, two", due(Epoch.Add(time.Minute), 2), []string{"past", "soon-a"})
	wantStrings(t, "due in a day", due(Epoch.Add(24*time.Hour), 10), []string{"past", "soon-a", "soon-b", "later"})

	// A new wake moves the batch (an apply writes one too); a zero wake
	// takes it out; a delete too.
	b := h.getBatch(t, "past")
	b.Wake = Epoch.Add(3 * time.Hour)
	_, err := h.s.UpdateBatch(ctx(t), b)
	must(t, "UpdateBatch", err)
	b = h.getBatch(t, "soon-a")
	b.Wake = time.Time{}
	_, _, err = h.s.AddBatchItems(ctx(t), b, []string{"i1"})
	must(t, "AddBatchItems", err)
	b = h.getBatch(t, "soon-b")
	b.Wake = Epoch.Add(4 * time.Hour)
	h.apply(t, b, change("i1", weft.BatchDone, ""))
	must(t, "DeleteBatch", h.s.DeleteBatch(ctx(t), "later"))
	wantStrings(t, "due in a day after the changes", due(Epoch.Add(24*time.Hour), 10), []string{"past", "soon-b"})
	if got := due(Epoch.Add(24*time.Hour), 0); len(got) != 2 {
		t.Errorf("due with the default limit: %v", got)
	}
}

func testAddBatchItems(t *testing.T, h *harness) {
	h.create(t, instance("i1", "w"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "i1", "i2")
	at := h.clock.Advance(time.Second)
	b.State = json.RawMessage(`{"phase":"selecting","cursor":"c1"}`)
	b.Wake = at
	// i2 is an item already; i3 is listed twice.
	b2, added, err := h.s.AddBatchItems(ctx(t), b, []string{"i2", "i3", "i4", "i3"})
	must(t, "AddBatchItems", err)
	want := *newBatch("b-1", at)
	want.State = b.State
	if added != 2 {
		t.Errorf("AddBatchItems added %d, want 2", added)
	}
	wantBatch(t, "after adding", b2, &want, 2, Epoch, at, counts(weft.BatchPending, 4))
	wantBatch(t, "read after adding", h.getBatch(t, "b-1"), &want, 2, Epoch, at, counts(weft.BatchPending, 4))
	all := []string{"1:i1:pending", "2:i2:pending", "3:i3:pending", "4:i4:pending"}
	wantStrings(t, "items after adding", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), all)
	times := itemTimes(t, h, "b-1")
	wantTime(t, "time of a first item", times["i2"], Epoch)
	wantTime(t, "time of an added item", times["i3"], at)

	// From a stale revision: nothing is added.
	_, _, err = h.s.AddBatchItems(ctx(t), b, []string{"i5"})
	wantErr(t, "AddBatchItems from a stale revision", err, weft.ErrConflict)
	wantStrings(t, "items after the refused add", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), all)
	wantBatch(t, "after the refused add", h.getBatch(t, "b-1"), &want, 2, Epoch, at, counts(weft.BatchPending, 4))

	// A page read again after a crash adds nothing, and still writes the
	// state.
	b3, added, err := h.s.AddBatchItems(ctx(t), b2, []string{"i1", "i4"})
	must(t, "AddBatchItems again", err)
	if added != 0 || b3.Revision != 3 {
		t.Errorf("AddBatchItems of items already: added %d, revision %d; want 0, 3", added, b3.Revision)
	}

	// An item applied stays as it is.
	b4 := h.apply(t, b3, change("i1", weft.BatchDone, "", opMessage("i1", "op:b-1")))
	b5, added, err := h.s.AddBatchItems(ctx(t), b4, []string{"i1", "i5"})
	must(t, "AddBatchItems after an apply", err)
	if added != 1 {
		t.Errorf("AddBatchItems after an apply added %d, want 1", added)
	}
	if c := counts(weft.BatchPending, 4, weft.BatchDone, 1); !maps.Equal(b5.Counts, c) {
		t.Errorf("counts after an apply and an add = %v, want %v", b5.Counts, c)
	}
	wantStrings(t, "items after an apply and an add", itemsOf(t, h, "b-1", weft.BatchItemFilter{}),
		[]string{"1:i1:done", "2:i2:pending", "3:i3:pending", "4:i4:pending", "5:i5:pending"})
	wantStrings(t, "inbox after an apply and an add", h.inbox(t, "i1"), []string{"op:b-1"})

	_, _, err = h.s.AddBatchItems(ctx(t), newBatch("b-none", time.Time{}), []string{"i1"})
	wantErr(t, "AddBatchItems to no batch", err, weft.ErrNotFound)
}

func testBatchItemsPages(t *testing.T, h *harness) {
	ids := seqIDs(weft.MaxBatchIDs)
	b := h.createBatch(t, newBatch("b-big", time.Time{}), ids...)
	if c := counts(weft.BatchPending, weft.MaxBatchIDs); !maps.Equal(b.Counts, c) {
		t.Fatalf("counts of a batch of %d = %v", weft.MaxBatchIDs, b.Counts)
	}
	page := itemsOf(t, h, "b-big", weft.BatchItemFilter{})
	if len(page) != weft.DefaultListLimit || page[0] != "1:i00001:pending" || page[99] != "100:i00100:pending" {
		t.Errorf("default page: %d items, from %q", len(page), page[:min(len(page), 1)])
	}
	if page := itemsOf(t, h, "b-big", weft.BatchItemFilter{Limit: 5000}); len(page) != weft.MaxListLimit {
		t.Errorf("a page of 5000 has %d items, want the cap, %d", len(page), weft.MaxListLimit)
	}
	wantStrings(t, "after 9997", itemsOf(t, h, "b-big", weft.BatchItemFilter{AfterSeq: 9997}), []string{"9998:i09998:pending", "9999:i09999:pending", "10000:i10000:pending"})
	wantStrings(t, "after the last", itemsOf(t, h, "b-big", weft.BatchItemFilter{AfterSeq: 10000}), nil)
	wantStrings(t, "after the greatest seq", itemsOf(t, h, "b-big", weft.BatchItemFilter{AfterSeq: math.MaxUint64}), nil)

	for _, id := range []string{"i00002", "i00005", "i00007"} {
		h.create(t, instance(id, "w"))
	}
	at := h.clock.Advance(time.Second)
	h.apply(t, b,
		change("i00002", weft.BatchDone, ""),
		change("i00005", weft.BatchFailed, "cancel refused: boom | twice"),
		change("i00007", weft.BatchSkipped, "finished"),
		change("i00009", weft.BatchDone, ""), // no such instance
	)
	skipped := weft.BatchItemFilter{Outcome: weft.BatchSkipped}
	wantStrings(t, "skipped", itemsOf(t, h, "b-big", skipped), []string{"7:i00007:skipped:finished", "9:i00009:skipped:not found"})
	skipped.AfterSeq = 7
	wantStrings(t, "skipped after 7", itemsOf(t, h, "b-big", skipped), []string{"9:i00009:skipped:not found"})
	wantStrings(t, "done", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchDone}), []string{"2:i00002:done"})
	wantStrings(t, "failed", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchFailed}), []string{"5:i00005:failed:cancel refused: boom | twice"})
	wantStrings(t, "can", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchCan}), nil)
	wantStrings(t, "pending, five", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchPending, Limit: 5}),
		[]string{"1:i00001:pending", "3:i00003:pending", "4:i00004:pending", "6:i00006:pending", "8:i00008:pending"})
	wantStrings(t, "pending after 9998", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchPending, AfterSeq: 9998}),
		[]string{"9999:i09999:pending", "10000:i10000:pending"})
	wantStrings(t, "all, from 4", itemsOf(t, h, "b-big", weft.BatchItemFilter{AfterSeq: 4, Limit: 6}),
		[]string{"5:i00005:failed:cancel refused: boom | twice", "6:i00006:pending", "7:i00007:skipped:finished",
			"8:i00008:pending", "9:i00009:skipped:not found", "10:i00010:pending"})
	times := itemTimes(t, h, "b-big")
	wantTime(t, "time of an applied item", times["i00005"], at)
	wantTime(t, "time of a pending item", times["i00006"], Epoch)
	want := counts(weft.BatchPending, weft.MaxBatchIDs-4, weft.BatchDone, 1, weft.BatchFailed, 1, weft.BatchSkipped, 2)
	if got := h.getBatch(t, "b-big").Counts; !maps.Equal(got, want) {
		t.Errorf("counts = %v, want %v", got, want)
	}
}

// testApplyBatchItems: only pending items of the batch change, and only
// their messages are written, as Deliver writes them; an item whose
// instance is gone is skipped; the same changes applied again change
// nothing but the batch's state.
func testApplyBatchItems(t *testing.T, h *harness) {
	for _, id := range []string{"a", "b", "c", "x"} {
		h.create(t, instance(id, "w"))
	}
	// c holds the operation's message already (sent by the API, say).
	h.deliver(t, nil, opMessage("c", "op:b-1"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "a", "b", "c", "d")
	at := h.clock.Advance(time.Second)
	b.State = json.RawMessage(`{"phase":"applying","after":4}`)
	b.Wake = at.Add(time.Second)
	changes := []weft.BatchChange{
		change("a", weft.BatchDone, "", opMessage("a", "op:b-1")),
		change("b", weft.BatchSkipped, "finished"),
		change("c", weft.BatchDone, "", opMessage("c", "op:b-1")),
		change("d", weft.BatchDone, "", opMessage("d", "op:b-1")), // no such instance
		change("x", weft.BatchDone, "", opMessage("x", "op:b-1")), // not an item
		change("a", weft.BatchFailed, "again"),                    // applied just before
	}
	got := h.apply(t, b, changes...)
	want := *newBatch("b-1", b.Wake)
	want.State = b.State
	c := counts(weft.BatchDone, 2, weft.BatchSkipped, 2)
	wantBatch(t, "applied", got, &want, 2, Epoch, at, c)
	wantBatch(t, "read after the apply", h.getBatch(t, "b-1"), &want, 2, Epoch, at, c)
	items := []string{"1:a:done", "2:b:skipped:finished", "3:c:done", "4:d:skipped:not found"}
	wantStrings(t, "items", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), items)
	for inst, tm := range itemTimes(t, h, "b-1") {
		wantTime(t, "time of item "+inst, tm, at)
	}

	msgs, err := h.s.Inbox(ctx(t), "a")
	must(t, "Inbox", err)
	if len(msgs) != 1 || msgs[0].ID != "op:b-1" || msgs[0].Kind != "cancel" || msgs[0].Seq == 0 {
		t.Fatalf("inbox of a = %+v, want the one message", msgs)
	}
	wantTime(t, "message's CreatedAt", msgs[0].CreatedAt, at)
	wantJSON(t, "message's payload", msgs[0].Payload, opMessage("a", "").Payload)
	wantStrings(t, "inbox of b (skipped, no message)", h.inbox(t, "b"), nil)
	wantStrings(t, "inbox of c (held the message)", h.inbox(t, "c"), []string{"op:b-1"})
	wantStrings(t, "inbox of x (not an item)", h.inbox(t, "x"), nil)
	// The inbox waits, for recovery to find a lost wake-up.
	waiting, err := h.s.WaitingInboxes(ctx(t), at.Add(time.Millisecond), 10)
	must(t, "WaitingInboxes", err)
	wantStrings(t, "waiting inboxes", waiting, []string{"c", "a"})

	// The same changes again, from the new revision (a stepper that
	// re-read the batch), with other message ids: only the state moves.
	later := h.clock.Advance(time.Second)
	got.State = json.RawMessage(`{"phase":"applying","after":4,"again":true}`)
	for i := range changes {
		for j := range changes[i].Messages {
			changes[i].Messages[j].ID = "op:b-1:again"
		}
	}
	again := h.apply(t, got, changes...)
	want.State = got.State
	wantBatch(t, "applied again", again, &want, 3, Epoch, later, c)
	wantStrings(t, "items after the second apply", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), items)
	for inst, tm := range itemTimes(t, h, "b-1") {
		wantTime(t, "time of item "+inst+" after the second apply", tm, at)
	}
	for _, id := range []string{"a", "c"} {
		wantStrings(t, "inbox of "+id+" after the second apply", h.inbox(t, id), []string{"op:b-1"})
	}
	for _, id := range []string{"b", "x"} {
		wantStrings(t, "inbox of "+id+" after the second apply", h.inbox(t, id), nil)
	}
}

// testApplyBatchItemsRefused: an apply from a stale revision, or to no
// batch, writes nothing: no item, no message, no state.
func testApplyBatchItemsRefused(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "a")
	moved, err := h.s.UpdateBatch(ctx(t), b)
	must(t, "UpdateBatch", err)
	h.clock.Advance(time.Second)
	stale := *b
	stale.State = json.RawMessage(`{"phase":"stale"}`)
	_, err = h.s.ApplyBatchItems(ctx(t), &stale, []weft.BatchChange{change("a", weft.BatchDone, "", opMessage("a", "op:b-1"))})
	wantErr(t, "ApplyBatchItems from a stale revision", err, weft.ErrConflict)
	wantBatch(t, "after the refused apply", h.getBatch(t, "b-1"), b, 2, Epoch, Epoch, counts(weft.BatchPending, 1))
	wantStrings(t, "items after the refused apply", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:a:pending"})
	wantStrings(t, "inbox after the refused apply", h.inbox(t, "a"), nil)

	none := newBatch("b-none", time.Time{})
	_, err = h.s.ApplyBatchItems(ctx(t), none, []weft.BatchChange{change("a", weft.BatchDone, "", opMessage("a", "op:b-none"))})
	wantErr(t, "ApplyBatchItems to no batch", err, weft.ErrNotFound)
	wantStrings(t, "inbox after an apply to no batch", h.inbox(t, "a"), nil)

	// No change is a write of the state.
	got := h.apply(t, moved)
	if got.Revision != 3 || !maps.Equal(got.Counts, counts(weft.BatchPending, 1)) {
		t.Errorf("an apply without changes: revision %d, counts %v", got.Revision, got.Counts)
	}
}

// testApplyBatchItemsRace: steppers racing over overlapping chunks, each
// re-reading the batch when it loses, apply each item once: each instance
// gets one message (each stepper sends its own id), and the counts are
// exact.
func testApplyBatchItemsRace(t *testing.T, h *harness) {
	const n, steppers, chunk = 120, 8, 45
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%03d", i)
		h.create(t, instance(ids[i], "w"))
	}
	h.createBatch(t, newBatch("b-race", Epoch), ids...)
	var wg sync.WaitGroup
	for w := range steppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Two rounds of chunks: stepper w starts at item 15w, so each
			// chunk overlaps the next two steppers'.
			for round := range 2 {
				var changes []weft.BatchChange
				for k := range chunk {
					id := ids[(w*15+round*40+k)%n]
					changes = append(changes, change(id, weft.BatchDone, "", opMessage(id, fmt.Sprintf("op:b-race:%d", w))))
				}
				for attempt := 0; ; attempt++ {
					if attempt == 10000 {
						t.Errorf("stepper %d: no apply won in %d attempts", w, attempt)
						return
					}
					b, err := h.s.GetBatch(ctx(t), "b-race")
					if err != nil {
						t.Errorf("stepper %d: GetBatch: %v", w, err)
						return
					}
					b.State = json.RawMessage(fmt.Sprintf(`{"by":%d}`, w))
					_, err = h.s.ApplyBatchItems(ctx(t), b, changes)
					if errors.Is(err, weft.ErrConflict) {
						continue
					}
					if err != nil {
						t.Errorf("stepper %d: ApplyBatchItems: %v", w, err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	b := h.getBatch(t, "b-race")
	if c := counts(weft.BatchDone, n); !maps.Equal(b.Counts, c) {
		t.Errorf("counts after the race = %v, want %v", b.Counts, c)
	}
	if pending := itemsOf(t, h, "b-race", weft.BatchItemFilter{Outcome: weft.BatchPending}); len(pending) != 0 {
		t.Errorf("items left pending: %v", pending)
	}
	if done := itemsOf(t, h, "b-race", weft.BatchItemFilter{Outcome: weft.BatchDone, Limit: n}); len(done) != n {
		t.Errorf("%d items done, want %d", len(done), n)
	}
	for _, id := range ids {
		if got := h.inbox(t, id); len(got) != 1 {
			t.Errorf("inbox of %s = %v, want one message", id, got)
		}
	}
}

func testDeleteBatch(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "a", "b", "c")
	h.apply(t, b, change("a", weft.BatchDone, "", opMessage("a", "op:b-1")))
	must(t, "DeleteBatch", h.s.DeleteBatch(ctx(t), "b-1"))
	_, err := h.s.GetBatch(ctx(t), "b-1")
	wantErr(t, "GetBatch after delete", err, weft.ErrNotFound)
	_, err = h.s.BatchItems(ctx(t), "b-1", weft.BatchItemFilter{})
	wantErr(t, "BatchItems after delete", err, weft.ErrNotFound)
	wantErr(t, "DeleteBatch twice", h.s.DeleteBatch(ctx(t), "b-1"), weft.ErrNotFound)
	due, err := h.s.DueBatches(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueBatches", err)
	wantStrings(t, "due after delete", batchIDs(due), nil)
	all, _, err := h.s.ListBatches(ctx(t), "", 10)
	must(t, "ListBatches", err)
	wantStrings(t, "listed after delete", batchIDs(all), nil)
	// The instances stay, with their messages.
	wantStrings(t, "inbox of an instance of a deleted batch", h.inbox(t, "a"), []string{"op:b-1"})

	// The id can be used again; the new batch has its own items only.
	h.createBatch(t, newBatch("b-1", time.Time{}), "c", "z")
	wantStrings(t, "items of the new batch", itemsOf(t, h, "b-1", weft.BatchItemFilter{}), []string{"1:c:pending", "2:z:pending"})
	wantStrings(t, "items done of the new batch", itemsOf(t, h, "b-1", weft.BatchItemFilter{Outcome: weft.BatchDone}), nil)

	// A batch of more items than one call writes goes whole.
	big := h.createBatch(t, newBatch("b-big", Epoch), seqIDs(weft.MaxBatchIDs)...)
	_, added, err := h.s.AddBatchItems(ctx(t), big, []string{"x1", "x2"})
	must(t, "AddBatchItems", err)
	if added != 2 {
		t.Fatalf("AddBatchItems added %d, want 2", added)
	}
	must(t, "DeleteBatch of a big batch", h.s.DeleteBatch(ctx(t), "b-big"))
	h.createBatch(t, newBatch("b-big", time.Time{}), "x2")
	wantStrings(t, "items of the new big batch", itemsOf(t, h, "b-big", weft.BatchItemFilter{}), []string{"1:x2:pending"})
	wantStrings(t, "items of the new big batch, by outcome", itemsOf(t, h, "b-big", weft.BatchItemFilter{Outcome: weft.BatchPending}), []string{"1:x2:pending"})
}

func testBatchDurability(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	b := h.createBatch(t, newBatch("kept", Epoch.Add(time.Minute)), "a", "b")
	at := h.clock.Advance(time.Second)
	b.State = json.RawMessage(`{"phase":"applying"}`)
	b = h.apply(t, b, change("a", weft.BatchDone, "", opMessage("a", "op:kept")))
	h.createBatch(t, newBatch("dropped", Epoch), "a")
	must(t, "DeleteBatch", h.s.DeleteBatch(ctx(t), "dropped"))

	h.s = h.reopen()
	want := *newBatch("kept", Epoch.Add(time.Minute))
	want.State = b.State
	c := counts(weft.BatchDone, 1, weft.BatchPending, 1)
	wantBatch(t, "after reopen", h.getBatch(t, "kept"), &want, 2, Epoch, at, c)
	wantStrings(t, "items after reopen", itemsOf(t, h, "kept", weft.BatchItemFilter{}), []string{"1:a:done", "2:b:pending"})
	wantStrings(t, "inbox after reopen", h.inbox(t, "a"), []string{"op:kept"})
	due, err := h.s.DueBatches(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueBatches", err)
	wantStrings(t, "due after reopen", batchIDs(due), []string{"kept"})
	_, err = h.s.GetBatch(ctx(t), "dropped")
	wantErr(t, "GetBatch of a deleted batch after reopen", err, weft.ErrNotFound)
	got, added, err := h.s.AddBatchItems(ctx(t), b, []string{"b", "c"})
	must(t, "AddBatchItems after reopen", err)
	if added != 1 || got.Revision != 3 {
		t.Errorf("AddBatchItems after reopen: added %d, revision %d; want 1, 3", added, got.Revision)
	}
	wantStrings(t, "items after reopen and an add", itemsOf(t, h, "kept", weft.BatchItemFilter{}), []string{"1:a:done", "2:b:pending", "3:c:pending"})
}

func testBatchCancelledContext(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	b := h.createBatch(t, newBatch("b-1", Epoch), "a")
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateBatch", func() error { _, err := h.s.CreateBatch(c, newBatch("b-2", Epoch), []string{"a"}); return err }},
		{"GetBatch", func() error { _, err := h.s.GetBatch(c, "b-1"); return err }},
		{"ListBatches", func() error { _, _, err := h.s.ListBatches(c, "", 1); return err }},
		{"UpdateBatch", func() error { _, err := h.s.UpdateBatch(c, b); return err }},
		{"DeleteBatch", func() error { return h.s.DeleteBatch(c, "b-1") }},
		{"DueBatches", func() error { _, err := h.s.DueBatches(c, Epoch, 1); return err }},
		{"AddBatchItems", func() error { _, _, err := h.s.AddBatchItems(c, b, []string{"b"}); return err }},
		{"BatchItems", func() error { _, err := h.s.BatchItems(c, "b-1", weft.BatchItemFilter{}); return err }},
		{"ApplyBatchItems", func() error {
			_, err := h.s.ApplyBatchItems(c, b, []weft.BatchChange{change("a", weft.BatchDone, "", opMessage("a", "op:b-1"))})
			return err
		}},
	}
	for _, tt := range calls {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	wantBatch(t, "after the cancelled calls", h.getBatch(t, "b-1"), b, 1, Epoch, Epoch, counts(weft.BatchPending, 1))
	wantStrings(t, "inbox after the cancelled calls", h.inbox(t, "a"), nil)
	_, err := h.s.GetBatch(ctx(t), "b-2")
	wantErr(t, "cancelled CreateBatch", err, weft.ErrNotFound)
}

func testBatchClosed(t *testing.T, h *harness) {
	b := h.createBatch(t, newBatch("b-1", Epoch), "a")
	must(t, "Close", h.s.Close())
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateBatch", func() error { _, err := h.s.CreateBatch(ctx(t), newBatch("b-2", Epoch), nil); return err }},
		{"GetBatch", func() error { _, err := h.s.GetBatch(ctx(t), "b-1"); return err }},
		{"ListBatches", func() error { _, _, err := h.s.ListBatches(ctx(t), "", 1); return err }},
		{"UpdateBatch", func() error { _, err := h.s.UpdateBatch(ctx(t), b); return err }},
		{"DeleteBatch", func() error { return h.s.DeleteBatch(ctx(t), "b-1") }},
		{"DueBatches", func() error { _, err := h.s.DueBatches(ctx(t), Epoch, 1); return err }},
		{"AddBatchItems", func() error { _, _, err := h.s.AddBatchItems(ctx(t), b, nil); return err }},
		{"BatchItems", func() error { _, err := h.s.BatchItems(ctx(t), "b-1", weft.BatchItemFilter{}); return err }},
		{"ApplyBatchItems", func() error { _, err := h.s.ApplyBatchItems(ctx(t), b, nil); return err }},
	}
	for _, tt := range calls {
		wantErr(t, tt.name+" after Close", tt.call(), weft.ErrClosed)
	}
}
