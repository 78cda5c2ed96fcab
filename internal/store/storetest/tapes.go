package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// tapesTests are the subtests of recorded attempts (PutTape, GetTape,
// ListTapes), run by Exercise.
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
