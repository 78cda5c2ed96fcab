package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// tapesTests are the subtests of recorded attempts (PutTape, GetTape,
// ListTapes, FindTapes), run by Exercise.
var tapesTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"TapePutGet", testTapePutGet},
	{"TapeWrittenOnce", testTapeWrittenOnce},
	{"TapeList", testTapeList},
	{"TapeRefused", testTapeRefused},
	{"TapeDeletedWithInstance", testTapeDeletedWithInstance},
	{"TapeCancelledAndClosed", testTapeCancelledAndClosed},
	{"TapeFind", testTapeFind},
	{"TapeFindSameTime", testTapeFindSameTime},
	{"TapeFindDeleted", testTapeFindDeleted},
	{"TapeFindRefused", testTapeFindRefused},
}

// tapeRec is the summary of a tape of instance id.
func tapeRec(id, path, exec string, attempt int, outcome weft.TapeOutcome) weft.TapeRecord {
	return weft.TapeRecord{
		Key:     weft.TapeKey{InstanceID: id, StepPath: path, Exec: exec, Attempt: attempt},
		Outcome: outcome, Plugin: "kit", PluginVersion: "sha256:0123", Activity: "charge",
	}
}

// tapeBytes returns n bytes of every value, NUL and bytes that are not
// UTF-8 included, seeded so that tapes differ.
func tapeBytes(seed byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) + seed
	}
	return b
}

// wantTape fails unless the tape of rec.Key is stored with rec's summary,
// data, and the store's Size and RecordedAt.
func (h *harness) wantTape(t *testing.T, rec weft.TapeRecord, data []byte, at time.Time) {
	t.Helper()
	got, gotData, err := h.s.GetTape(ctx(t), rec.Key)
	if err != nil {
		t.Fatalf("GetTape(%s): %v", rec.Key, err)
	}
	if !bytes.Equal(gotData, data) {
		t.Errorf("GetTape(%s): %d bytes, want the %d written", rec.Key, len(gotData), len(data))
	}
	rec.Size, rec.RecordedAt = len(data), at
	wantTapeRecord(t, "GetTape("+rec.Key.String()+")", *got, rec)
}

func wantTapeRecord(t *testing.T, what string, got, want weft.TapeRecord) {
	t.Helper()
	wantTime(t, what+": RecordedAt", got.RecordedAt, want.RecordedAt)
	got.RecordedAt, want.RecordedAt = time.Time{}, time.Time{}
	if got != want {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// testTapePutGet: a tape is stored with its summary, whose Size and
// RecordedAt the store sets; its bytes come back exactly, NUL and
// non-UTF-8 bytes included, after a restart too.
func testTapePutGet(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	at := h.clock.Advance(time.Second)
	rec := tapeRec("i", "steps[0]", "e3", 1, weft.TapeFailed)
	rec.Truncated, rec.FailureCode = true, "card_declined"
	rec.Size, rec.RecordedAt = 7, Epoch.Add(-time.Hour) // the store's to set
	data := tapeBytes(0, 70_000)
	must(t, "PutTape", h.s.PutTape(ctx(t), rec, data))
	h.wantTape(t, rec, data, at)

	h.s = h.reopen()
	h.wantTape(t, rec, data, at)
}

// testTapeWrittenOnce: a second write of a key, a retry after a lost
// answer, changes nothing and succeeds.
func testTapeWrittenOnce(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	rec := tapeRec("i", "steps[0]", "e3", 1, weft.TapeCompleted)
	data := tapeBytes(1, 100)
	must(t, "PutTape", h.s.PutTape(ctx(t), rec, data))
	h.clock.Advance(time.Second)
	again := rec
	again.Outcome = weft.TapeFailed
	must(t, "PutTape again", h.s.PutTape(ctx(t), again, tapeBytes(2, 50)))
	h.wantTape(t, rec, data, Epoch)
	all, err := h.s.ListTapes(ctx(t), "i")
	must(t, "ListTapes", err)
	if len(all) != 1 {
		t.Errorf("ListTapes after a second write: %d tapes, want 1", len(all))
	}
}

// testTapeList: an instance's tapes are listed by step, execution and
// attempt, numbers compared as numbers, without another instance's (an
// id that is a prefix of the other's included).
func testTapeList(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	h.create(t, instance("i2", "w"))
	all, err := h.s.ListTapes(ctx(t), "i")
	must(t, "ListTapes of an instance without tapes", err)
	if len(all) != 0 {
		t.Fatalf("ListTapes of an instance without tapes: %d", len(all))
	}
	want := []weft.TapeKey{
		{InstanceID: "i", StepPath: "steps[2]", Exec: "e9", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[2]", Exec: "e9", Attempt: 2},
		{InstanceID: "i", StepPath: "steps[2]", Exec: "e9", Attempt: 10},
		{InstanceID: "i", StepPath: "steps[2]", Exec: "e10", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[2].do[0]", Exec: "e11", Attempt: 1},
		{InstanceID: "i", StepPath: "steps[10]", Exec: "e4", Attempt: 1},
	}
	for _, i := range []int{5, 2, 0, 4, 3, 1} {
		rec := weft.TapeRecord{Key: want[i], Outcome: weft.TapeCompleted}
		must(t, "PutTape "+want[i].String(), h.s.PutTape(ctx(t), rec, tapeBytes(byte(i), 10+i)))
	}
	must(t, "PutTape of i2", h.s.PutTape(ctx(t), tapeRec("i2", "steps[0]", "e1", 1, weft.TapeFailed), []byte{1}))

	all, err = h.s.ListTapes(ctx(t), "i")
	must(t, "ListTapes", err)
	var got, keys []string
	for _, rec := range all {
		got = append(got, rec.Key.String())
	}
	for i, k := range want {
		keys = append(keys, k.String())
		if i < len(all) && all[i].Key == k && all[i].Size != 10+i {
			t.Errorf("ListTapes: %s has Size %d, want %d", k, all[i].Size, 10+i)
		}
	}
	wantStrings(t, "ListTapes", got, keys)

	other, err := h.s.ListTapes(ctx(t), "i2")
	must(t, "ListTapes of i2", err)
	if len(other) != 1 || other[0].Key.InstanceID != "i2" {
		t.Errorf("ListTapes of i2 = %+v, want its one tape", other)
	}
}

// testTapeRefused: a tape of an instance that does not exist is
// ErrNotFound, and so is a tape not stored; a malformed key, no data and
// an unknown outcome are ErrInvalid, and write nothing.
func testTapeRefused(t *testing.T, h *harness) {
	err := h.s.PutTape(ctx(t), tapeRec("nope", "steps[0]", "e1", 1, weft.TapeFailed), []byte{1})
	wantErr(t, "PutTape of a missing instance", err, weft.ErrNotFound)
	_, err = h.s.ListTapes(ctx(t), "nope")
	wantErr(t, "ListTapes of a missing instance", err, weft.ErrNotFound)

	h.create(t, instance("i", "w"))
	_, _, err = h.s.GetTape(ctx(t), weft.TapeKey{InstanceID: "i", StepPath: "steps[0]", Exec: "e1", Attempt: 1})
	wantErr(t, "GetTape of a tape not stored", err, weft.ErrNotFound)

	ok := tapeRec("i", "steps[0]", "e1", 1, weft.TapeFailed)
	for _, tt := range []struct {
		name string
		edit func(*weft.TapeRecord)
		data []byte
	}{
		{"no step path", func(r *weft.TapeRecord) { r.Key.StepPath = "" }, []byte{1}},
		{"no exec", func(r *weft.TapeRecord) { r.Key.Exec = "" }, []byte{1}},
		{"NUL in the step path", func(r *weft.TapeRecord) { r.Key.StepPath = "steps[0]\x00" }, []byte{1}},
		{"attempt 0", func(r *weft.TapeRecord) { r.Key.Attempt = 0 }, []byte{1}},
		{"no instance id", func(r *weft.TapeRecord) { r.Key.InstanceID = "" }, []byte{1}},
		{"unknown outcome", func(r *weft.TapeRecord) { r.Outcome = "great" }, []byte{1}},
		{"no data", func(*weft.TapeRecord) {}, nil},
	} {
		rec := ok
		tt.edit(&rec)
		wantErr(t, "PutTape with "+tt.name, h.s.PutTape(ctx(t), rec, tt.data), weft.ErrInvalid)
	}
	all, err := h.s.ListTapes(ctx(t), "i")
	must(t, "ListTapes", err)
	if len(all) != 0 {
		t.Errorf("refused writes stored %d tapes", len(all))
	}
}

// testTapeDeletedWithInstance: deleting an instance, as the API and the
// retention sweep do, deletes its tapes, and an instance created again
// with the same id has none; another instance's tapes stay.
func testTapeDeletedWithInstance(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	h.create(t, instance("j", "w"))
	rec := tapeRec("i", "steps[0]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape", h.s.PutTape(ctx(t), rec, tapeBytes(0, 1000)))
	must(t, "PutTape 2", h.s.PutTape(ctx(t), tapeRec("i", "steps[1]", "e2", 1, weft.TapeCompleted), tapeBytes(1, 10)))
	keep := tapeRec("j", "steps[0]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape of j", h.s.PutTape(ctx(t), keep, []byte("j")))

	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "i", 0))
	_, _, err := h.s.GetTape(ctx(t), rec.Key)
	wantErr(t, "GetTape after DeleteInstance", err, weft.ErrNotFound)
	_, err = h.s.ListTapes(ctx(t), "i")
	wantErr(t, "ListTapes after DeleteInstance", err, weft.ErrNotFound)
	err = h.s.PutTape(ctx(t), rec, []byte{1})
	wantErr(t, "PutTape after DeleteInstance", err, weft.ErrNotFound)

	h.create(t, instance("i", "w"))
	all, err := h.s.ListTapes(ctx(t), "i")
	must(t, "ListTapes of the new i", err)
	if len(all) != 0 {
		t.Errorf("an instance created again has %d tapes of the deleted one", len(all))
	}
	_, _, err = h.s.GetTape(ctx(t), rec.Key)
	wantErr(t, "GetTape of the new i", err, weft.ErrNotFound)
	h.wantTape(t, keep, []byte("j"), Epoch)
}

// testTapeCancelledAndClosed: the tape methods return ctx.Err() for a
// done context and ErrClosed after Close, writing nothing.
func testTapeCancelledAndClosed(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	rec := tapeRec("i", "steps[0]", "e1", 1, weft.TapeFailed)
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	wantErr(t, "PutTape, cancelled", h.s.PutTape(c, rec, []byte{1}), context.Canceled)
	_, _, err := h.s.GetTape(c, rec.Key)
	wantErr(t, "GetTape, cancelled", err, context.Canceled)
	_, err = h.s.ListTapes(c, "i")
	wantErr(t, "ListTapes, cancelled", err, context.Canceled)
	_, _, err = h.s.GetTape(ctx(t), rec.Key)
	wantErr(t, "GetTape after a cancelled PutTape", err, weft.ErrNotFound)

	must(t, "Close", h.s.Close())
	wantErr(t, "PutTape after Close", h.s.PutTape(ctx(t), rec, []byte{1}), weft.ErrClosed)
	_, _, err = h.s.GetTape(ctx(t), rec.Key)
	wantErr(t, "GetTape after Close", err, weft.ErrClosed)
	_, err = h.s.ListTapes(ctx(t), "i")
	wantErr(t, "ListTapes after Close", err, weft.ErrClosed)
}

// findTapes calls FindTapes and returns the keys found, in order.
func (h *harness) findTapes(t *testing.T, q weft.TapeQuery) ([]string, []weft.TapeRecord) {
	t.Helper()
	found, err := h.s.FindTapes(ctx(t), q)
	if err != nil {
		t.Fatalf("FindTapes(%+v): %v", q, err)
	}
	keys := make([]string, 0, len(found))
	for _, rec := range found {
		keys = append(keys, rec.Key.String())
	}
	return keys, found
}

// wantFound fails unless FindTapes(q) finds the tapes of want, in that
// order.
func (h *harness) wantFound(t *testing.T, what string, q weft.TapeQuery, want ...weft.TapeRecord) {
	t.Helper()
	got, _ := h.findTapes(t, q)
	keys := make([]string, 0, len(want))
	for _, rec := range want {
		keys = append(keys, rec.Key.String())
	}
	wantStrings(t, what, got, keys)
}

// testTapeFind: FindTapes finds a plugin's tapes across instances (not
// those of a plugin whose name it is a prefix of), newest first, with
// their summaries as stored; filtered by workflow, by a time, and cut at
// a limit; a plugin without tapes finds none.
func testTapeFind(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	h.create(t, instance("b", "v"))
	h.create(t, instance("c", "w"))
	var kit []weft.TapeRecord // newest first
	put := func(plugin, wf, id, path string, attempt int) weft.TapeRecord {
		t.Helper()
		rec := tapeRec(id, path, "e1", attempt, weft.TapeFailed)
		rec.Plugin, rec.Workflow, rec.FailureCode = plugin, wf, "busy"
		data := tapeBytes(byte(attempt), 10+attempt)
		must(t, "PutTape "+rec.Key.String(), h.s.PutTape(ctx(t), rec, data))
		rec.Size, rec.RecordedAt = len(data), h.clock.Now()
		h.clock.Advance(time.Second)
		if plugin == "kit" {
			kit = append([]weft.TapeRecord{rec}, kit...)
		}
		return rec
	}
	put("kit", "w", "a", "steps[0]", 1)
	put("kitchen", "w", "a", "steps[1]", 1)
	put("kit", "v", "b", "steps[0]", 1)
	put("kit", "w", "c", "steps[0]", 1)
	put("kit", "w", "a", "steps[0]", 2)
	put("kitchen", "v", "b", "steps[1]", 1)
	put("kit", "v", "b", "steps[0]", 2)

	all := weft.TapeQuery{Plugin: "kit", Limit: weft.MaxShadowAttempts}
	_, found := h.findTapes(t, all)
	if len(found) != len(kit) {
		t.Fatalf("FindTapes(kit) found %d tapes, want %d: %+v", len(found), len(kit), found)
	}
	for i := range kit {
		wantTapeRecord(t, "FindTapes(kit)["+kit[i].Key.String()+"]", found[i], kit[i])
	}
	h.wantFound(t, "FindTapes(kitchen)", weft.TapeQuery{Plugin: "kitchen", Limit: 10},
		weft.TapeRecord{Key: weft.TapeKey{InstanceID: "b", StepPath: "steps[1]", Exec: "e1", Attempt: 1}},
		weft.TapeRecord{Key: weft.TapeKey{InstanceID: "a", StepPath: "steps[1]", Exec: "e1", Attempt: 1}})
	h.wantFound(t, "FindTapes(ki)", weft.TapeQuery{Plugin: "ki", Limit: 10})

	// kit, newest first: b/2 (v), a/2 (w), c/1 (w), b/1 (v), a/1 (w).
	wf := all
	wf.Workflow = "w"
	h.wantFound(t, "FindTapes(kit, workflow w)", wf, kit[1], kit[2], kit[4])
	wf.Workflow = "x"
	h.wantFound(t, "FindTapes(kit, workflow x)", wf)

	since := all
	since.Since = kit[2].RecordedAt
	h.wantFound(t, "FindTapes(kit, since the third newest)", since, kit[0], kit[1], kit[2])
	since.Since = kit[2].RecordedAt.Add(time.Nanosecond)
	h.wantFound(t, "FindTapes(kit, since just after the third newest)", since, kit[0], kit[1])
	since.Since = h.clock.Now()
	h.wantFound(t, "FindTapes(kit, since now)", since)

	limit := all
	limit.Limit = 2
	h.wantFound(t, "FindTapes(kit, limit 2)", limit, kit[0], kit[1])
	limit.Workflow, limit.Since = "w", kit[4].RecordedAt
	h.wantFound(t, "FindTapes(kit, workflow w, since the oldest, limit 2)", limit, kit[1], kit[2])
	limit.Limit = 1
	limit.Workflow = "v"
	h.wantFound(t, "FindTapes(kit, workflow v, limit 1)", limit, kit[0])

	h.s = h.reopen()
	h.wantFound(t, "FindTapes(kit) after a restart", all, kit...)
}

// testTapeFindSameTime: tapes recorded at the same time are found in
// weft.TapeKey.Compare's order (instance, then step and attempt with
// numbers compared as numbers), and a limit cuts among them in that
// order.
func testTapeFindSameTime(t *testing.T, h *harness) {
	for _, id := range []string{"b", "a", "c"} {
		h.create(t, instance(id, "w"))
	}
	older := tapeRec("c", "steps[0]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape older", h.s.PutTape(ctx(t), older, []byte{1}))
	h.clock.Advance(time.Millisecond)
	var recs []weft.TapeRecord
	for _, k := range []weft.TapeKey{
		{InstanceID: "b", StepPath: "steps[10]", Exec: "e1", Attempt: 1},
		{InstanceID: "a", StepPath: "steps[10]", Exec: "e1", Attempt: 1},
		{InstanceID: "b", StepPath: "steps[2]", Exec: "e1", Attempt: 10},
		{InstanceID: "b", StepPath: "steps[2]", Exec: "e1", Attempt: 9},
		{InstanceID: "c", StepPath: "steps[0]", Exec: "e2", Attempt: 1},
	} {
		rec := tapeRec(k.InstanceID, k.StepPath, k.Exec, k.Attempt, weft.TapeCompleted)
		must(t, "PutTape "+k.String(), h.s.PutTape(ctx(t), rec, []byte{2}))
		recs = append(recs, rec)
	}
	// a/steps[10], b/steps[2]/9, b/steps[2]/10, b/steps[10], c/e2; then
	// the older.
	want := []weft.TapeRecord{recs[1], recs[3], recs[2], recs[0], recs[4], older}
	q := weft.TapeQuery{Plugin: "kit", Limit: 10}
	h.wantFound(t, "FindTapes of tapes of one time", q, want...)
	q.Limit = 2
	h.wantFound(t, "FindTapes of tapes of one time, limit 2", q, want[:2]...)
	q.Limit = 5
	h.wantFound(t, "FindTapes of tapes of one time, limit 5", q, want[:5]...)
}

// testTapeFindDeleted: deleting an instance removes its tapes from
// FindTapes; an instance created again with its id, and a tape at the
// same key of another plugin, is found under that plugin only.
func testTapeFindDeleted(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	h.create(t, instance("j", "w"))
	gone := tapeRec("i", "steps[0]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape", h.s.PutTape(ctx(t), gone, []byte{1}))
	h.clock.Advance(time.Second)
	gone2 := tapeRec("i", "steps[1]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape 2", h.s.PutTape(ctx(t), gone2, []byte{1}))
	h.clock.Advance(time.Second)
	keep := tapeRec("j", "steps[0]", "e1", 1, weft.TapeFailed)
	must(t, "PutTape of j", h.s.PutTape(ctx(t), keep, []byte{1}))
	q := weft.TapeQuery{Plugin: "kit", Limit: 10}
	h.wantFound(t, "FindTapes before the delete", q, keep, gone2, gone)

	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "i", 0))
	h.wantFound(t, "FindTapes after DeleteInstance", q, keep)

	h.create(t, instance("i", "v"))
	again := gone
	again.Plugin, again.Workflow = "other", "v"
	must(t, "PutTape of the new i", h.s.PutTape(ctx(t), again, []byte{3}))
	h.wantFound(t, "FindTapes(kit) with the new i", q, keep)
	h.wantFound(t, "FindTapes(other)", weft.TapeQuery{Plugin: "other", Workflow: "v", Limit: 10}, again)
}

// testTapeFindRefused: a query without a plugin, or with a limit outside
// 1 to weft.MaxShadowAttempts, is ErrInvalid; FindTapes returns
// ctx.Err() for a done context and ErrClosed after Close.
func testTapeFindRefused(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	must(t, "PutTape", h.s.PutTape(ctx(t), tapeRec("i", "steps[0]", "e1", 1, weft.TapeFailed), []byte{1}))
	for _, q := range []weft.TapeQuery{
		{Limit: 10},
		{Plugin: "kit"},
		{Plugin: "kit", Limit: -1},
		{Plugin: "kit", Limit: weft.MaxShadowAttempts + 1},
	} {
		_, err := h.s.FindTapes(ctx(t), q)
		wantErr(t, fmt.Sprintf("FindTapes(%+v)", q), err, weft.ErrInvalid)
	}
	q := weft.TapeQuery{Plugin: "kit", Limit: 1}
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	_, err := h.s.FindTapes(c, q)
	wantErr(t, "FindTapes, cancelled", err, context.Canceled)
	must(t, "Close", h.s.Close())
	_, err = h.s.FindTapes(ctx(t), q)
	wantErr(t, "FindTapes after Close", err, weft.ErrClosed)
}
