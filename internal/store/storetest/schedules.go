package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// schedulesTests are the subtests of the schedule methods, run by
// Exercise.
var schedulesTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"ScheduleCreateAndGet", testScheduleCreateAndGet},
	{"ScheduleInvalid", testScheduleInvalid},
	{"ScheduleUpdate", testScheduleUpdate},
	{"ScheduleUpdateRace", testScheduleUpdateRace},
	{"ListSchedules", testListSchedules},
	{"DueSchedules", testDueSchedules},
	{"ScheduleEvents", testScheduleEvents},
	{"ScheduleEventsTrimmed", testScheduleEventsTrimmed},
	{"DeleteSchedule", testDeleteSchedule},
	{"ScheduleDurability", testScheduleDurability},
	{"ScheduleCancelledContext", testScheduleCancelledContext},
	{"ScheduleClosed", testScheduleClosed},
}

// newSchedule is a schedule to create: a small document and state.
func newSchedule(id string, wake time.Time) *weft.Schedule {
	return &weft.Schedule{
		ID:       id,
		Document: json.RawMessage(`{"workflow":"wf-` + id + `"}`),
		State:    json.RawMessage(`{"cursor":"2030-01-01T00:00:00Z"}`),
		Wake:     wake,
	}
}

// event is a scheduler event of type typ with data {"n": n}.
func event(typ weft.ScheduleEventType, n int) weft.ScheduleEvent {
	return weft.ScheduleEvent{Type: typ, Actor: "scheduler", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
}

func (h *harness) createSchedule(t *testing.T, s *weft.Schedule, events ...weft.ScheduleEvent) *weft.Schedule {
	t.Helper()
	got, err := h.s.CreateSchedule(ctx(t), s, events)
	if err != nil {
		t.Fatalf("CreateSchedule(%s): %v", s.ID, err)
	}
	return got
}

func (h *harness) getSchedule(t *testing.T, id string) *weft.Schedule {
	t.Helper()
	got, err := h.s.GetSchedule(ctx(t), id)
	if err != nil {
		t.Fatalf("GetSchedule(%s): %v", id, err)
	}
	return got
}

// wantSchedule fails unless got is want as stored at revision rev.
func wantSchedule(t *testing.T, what string, got, want *weft.Schedule, rev uint64, created, updated time.Time) {
	t.Helper()
	if got.ID != want.ID || got.Revision != rev || got.Note != want.Note {
		t.Errorf("%s = {id %q, revision %d, note %q}, want {%q, %d, %q}", what, got.ID, got.Revision, got.Note, want.ID, rev, want.Note)
	}
	wantJSON(t, what+": Document", got.Document, want.Document)
	wantJSON(t, what+": State", got.State, want.State)
	if !got.Wake.Equal(want.Wake) {
		t.Errorf("%s: Wake = %v, want %v", what, got.Wake, want.Wake)
	}
	wantTime(t, what+": CreatedAt", got.CreatedAt, created)
	wantTime(t, what+": UpdatedAt", got.UpdatedAt, updated)
}

// scheduleIDs returns the ids of schedules.
func scheduleIDs(scs []weft.Schedule) []string {
	var ids []string
	for _, sc := range scs {
		ids = append(ids, sc.ID)
	}
	return ids
}

// eventsOf returns a schedule's events as "seq:type:n" strings.
func eventsOf(t *testing.T, h *harness, id string, after uint64, limit int) []string {
	t.Helper()
	evs, err := h.s.ScheduleEvents(ctx(t), id, after, limit)
	if err != nil {
		t.Fatalf("ScheduleEvents(%s, %d, %d): %v", id, after, limit, err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		var d struct{ N int }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("event %d of %s: data %s: %v", e.Seq, id, e.Data, err)
		}
		out[i] = fmt.Sprintf("%d:%s:%d", e.Seq, e.Type, d.N)
	}
	return out
}

func testScheduleCreateAndGet(t *testing.T, h *harness) {
	wake := Epoch.Add(time.Hour)
	s := newSchedule("nightly", wake)
	s.Note = "made by the suite"
	got := h.createSchedule(t, s, event(weft.ScheduleCreated, 1), event(weft.ScheduleSkipped, 2))
	wantSchedule(t, "created", got, s, 1, Epoch, Epoch)
	wantSchedule(t, "read", h.getSchedule(t, "nightly"), s, 1, Epoch, Epoch)
	evs, err := h.s.ScheduleEvents(ctx(t), "nightly", 0, 0)
	must(t, "ScheduleEvents", err)
	if len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 || evs[0].Actor != "scheduler" || evs[1].Type != weft.ScheduleSkipped {
		t.Fatalf("events = %+v", evs)
	}
	wantTime(t, "event time", evs[0].Time, Epoch)

	_, err = h.s.CreateSchedule(ctx(t), newSchedule("nightly", wake), nil)
	wantErr(t, "CreateSchedule of a taken id", err, weft.ErrExists)
	wantSchedule(t, "after the refused create", h.getSchedule(t, "nightly"), s, 1, Epoch, Epoch)
	_, err = h.s.GetSchedule(ctx(t), "daily")
	wantErr(t, "GetSchedule of no schedule", err, weft.ErrNotFound)
	_, err = h.s.ScheduleEvents(ctx(t), "daily", 0, 10)
	wantErr(t, "ScheduleEvents of no schedule", err, weft.ErrNotFound)
	// A schedule without events and without a wake is a schedule.
	h.createSchedule(t, newSchedule("idle", time.Time{}))
	if got := eventsOf(t, h, "idle", 0, 10); len(got) != 0 {
		t.Errorf("events of a schedule created without any: %v", got)
	}
}

func testScheduleInvalid(t *testing.T, h *harness) {
	long := strings.Repeat("a", weft.MaxIDLen+1)
	for _, tt := range []struct {
		name string
		s    *weft.Schedule
	}{
		{"no id", newSchedule("", time.Time{})},
		{"a long id", newSchedule(long, time.Time{})},
		{"no document", &weft.Schedule{ID: "x", State: json.RawMessage(`{}`)}},
		{"a document that is not JSON", &weft.Schedule{ID: "x", Document: json.RawMessage(`{nope`), State: json.RawMessage(`{}`)}},
		{"a state that is not JSON", &weft.Schedule{ID: "x", Document: json.RawMessage(`{}`), State: json.RawMessage(`nope`)}},
	} {
		_, err := h.s.CreateSchedule(ctx(t), tt.s, nil)
		wantErr(t, "CreateSchedule with "+tt.name, err, weft.ErrInvalid)
	}
	_, err := h.s.GetSchedule(ctx(t), long)
	wantErr(t, "GetSchedule of a long id", err, weft.ErrInvalid)
	_, _, err = h.s.ListSchedules(ctx(t), "!!bad!!", 2)
	wantErr(t, "ListSchedules with a bad cursor", err, weft.ErrInvalid)
	got := h.createSchedule(t, newSchedule("x", time.Time{}))
	got.Document = nil
	_, err = h.s.UpdateSchedule(ctx(t), got, nil)
	wantErr(t, "UpdateSchedule without a document", err, weft.ErrInvalid)
}

func testScheduleUpdate(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("nightly", Epoch.Add(time.Hour)), event(weft.ScheduleCreated, 1))
	at := h.clock.Advance(time.Minute)
	s.Document = json.RawMessage(`{"workflow":"other"}`)
	s.State = json.RawMessage(`{"cursor":"2030-01-02T00:00:00Z"}`)
	s.Note = "paused for the migration"
	s.Wake = time.Time{}
	up, err := h.s.UpdateSchedule(ctx(t), s, []weft.ScheduleEvent{event(weft.SchedulePaused, 2)})
	must(t, "UpdateSchedule", err)
	wantSchedule(t, "updated", up, s, 2, Epoch, at)
	wantSchedule(t, "read after the update", h.getSchedule(t, "nightly"), s, 2, Epoch, at)
	wantStrings(t, "events", eventsOf(t, h, "nightly", 0, 0), []string{"1:created:1", "2:paused:2"})

	// A write from revision 1 again lost the race: nothing changes.
	h.clock.Advance(time.Minute)
	stale := *s
	stale.Revision = 1
	stale.Note = "stale"
	_, err = h.s.UpdateSchedule(ctx(t), &stale, []weft.ScheduleEvent{event(weft.ScheduleUnpaused, 3)})
	wantErr(t, "UpdateSchedule from a stale revision", err, weft.ErrConflict)
	wantSchedule(t, "after the refused update", h.getSchedule(t, "nightly"), s, 2, Epoch, at)
	wantStrings(t, "events after the refused update", eventsOf(t, h, "nightly", 0, 0), []string{"1:created:1", "2:paused:2"})

	_, err = h.s.UpdateSchedule(ctx(t), newSchedule("daily", time.Time{}), nil)
	wantErr(t, "UpdateSchedule of no schedule", err, weft.ErrNotFound)
}

func testScheduleUpdateRace(t *testing.T, h *harness) {
	h.createSchedule(t, newSchedule("hot", Epoch))
	const writers, rounds = 8, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := map[uint64]int{} // revision written → writer
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				s, err := h.s.GetSchedule(ctx(t), "hot")
				if err != nil {
					t.Errorf("writer %d: GetSchedule: %v", w, err)
					return
				}
				s.Note = fmt.Sprintf("writer %d", w)
				up, err := h.s.UpdateSchedule(ctx(t), s, []weft.ScheduleEvent{event(weft.ScheduleUpdated, w)})
				if errors.Is(err, weft.ErrConflict) {
					continue
				}
				if err != nil {
					t.Errorf("writer %d: UpdateSchedule: %v", w, err)
					return
				}
				mu.Lock()
				if other, ok := won[up.Revision]; ok {
					t.Errorf("revision %d written by writers %d and %d", up.Revision, other, w)
				}
				won[up.Revision] = w
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	final := h.getSchedule(t, "hot")
	if int(final.Revision) != 1+len(won) || final.Note != fmt.Sprintf("writer %d", won[final.Revision]) {
		t.Errorf("final revision %d note %q after %d successful writes", final.Revision, final.Note, len(won))
	}
	if got := eventsOf(t, h, "hot", 0, 0); len(got) != len(won) {
		t.Errorf("%d events after %d successful writes", len(got), len(won))
	}
}

// schedulePages lists every schedule from cursor by pages of limit, as
// "id@revision".
func schedulePages(t *testing.T, h *harness, cursor string, limit int) (ids []string, pages int) {
	t.Helper()
	for range 100 {
		page, next, err := h.s.ListSchedules(ctx(t), cursor, limit)
		must(t, "ListSchedules", err)
		pages++
		for _, s := range page {
			ids = append(ids, fmt.Sprintf("%s@%d", s.ID, s.Revision))
			if len(s.Document) == 0 || len(s.State) == 0 {
				t.Errorf("listed schedule %s without its document or state", s.ID)
			}
		}
		if next == "" {
			return ids, pages
		}
		cursor = next
	}
	t.Fatalf("ListSchedules: more than 100 pages")
	return nil, 0
}

func testListSchedules(t *testing.T, h *harness) {
	for _, id := range []string{"c", "a", "b", "ab", "d", "a-b", "a_b"} {
		h.createSchedule(t, newSchedule(id, time.Time{}))
	}
	b := h.getSchedule(t, "b")
	_, err := h.s.UpdateSchedule(ctx(t), b, nil)
	must(t, "UpdateSchedule", err)
	must(t, "DeleteSchedule", h.s.DeleteSchedule(ctx(t), "d"))
	want := []string{"a@1", "a-b@1", "a_b@1", "ab@1", "b@2", "c@1"}
	got, pages := schedulePages(t, h, "", 2)
	wantStrings(t, "schedules by pages of 2", got, want)
	if pages < 3 {
		t.Errorf("%d pages of 2 for %d schedules", pages, len(want))
	}
	got, _ = schedulePages(t, h, "", 0)
	wantStrings(t, "schedules with the default limit", got, want)
	page, next, err := h.s.ListSchedules(ctx(t), "", 3)
	must(t, "ListSchedules", err)
	if len(page) != 3 || page[2].ID != "a_b" || next == "" {
		t.Fatalf("first page of 3 = %v, next %q", page, next)
	}
	must(t, "DeleteSchedule", h.s.DeleteSchedule(ctx(t), "a_b"))
	h.createSchedule(t, newSchedule("aa", time.Time{}))
	got, _ = schedulePages(t, h, next, 3)
	wantStrings(t, "schedules after the cursor", got, []string{"aa@1", "ab@1", "b@2", "c@1"})
}

func testDueSchedules(t *testing.T, h *harness) {
	// due returns the ids of the due schedules, each record checked
	// against GetSchedule's.
	due := func(now time.Time, limit int) []string {
		t.Helper()
		scs, err := h.s.DueSchedules(ctx(t), now, limit)
		must(t, "DueSchedules", err)
		var ids []string
		for i := range scs {
			got := &scs[i]
			want := h.getSchedule(t, got.ID)
			wantSchedule(t, "due schedule "+got.ID, got, want, want.Revision, want.CreatedAt, want.UpdatedAt)
			ids = append(ids, got.ID)
		}
		return ids
	}
	h.createSchedule(t, newSchedule("later", Epoch.Add(2*time.Hour)))
	h.createSchedule(t, newSchedule("soon-b", Epoch.Add(time.Minute)))
	h.createSchedule(t, newSchedule("soon-a", Epoch.Add(time.Minute)))
	h.createSchedule(t, newSchedule("past", Epoch.Add(-24*time.Hour)))
	h.createSchedule(t, newSchedule("never", time.Time{}))
	h.createSchedule(t, newSchedule("far", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)))

	wantStrings(t, "due now", due(Epoch, 10), []string{"past"})
	wantStrings(t, "due in a minute", due(Epoch.Add(time.Minute), 10), []string{"past", "soon-a", "soon-b"})
	wantStrings(t, "due in a minute, two", due(Epoch.Add(time.Minute), 2), []string{"past", "soon-a"})
	wantStrings(t, "due in a day", due(Epoch.Add(24*time.Hour), 10), []string{"past", "soon-a", "soon-b", "later"})

	// A new wake moves the schedule; a zero wake takes it out; a delete
	// too.
	s := h.getSchedule(t, "past")
	s.Wake = Epoch.Add(3 * time.Hour)
	_, err := h.s.UpdateSchedule(ctx(t), s, nil)
	must(t, "UpdateSchedule", err)
	s = h.getSchedule(t, "soon-a")
	s.Wake = time.Time{}
	_, err = h.s.UpdateSchedule(ctx(t), s, nil)
	must(t, "UpdateSchedule", err)
	must(t, "DeleteSchedule", h.s.DeleteSchedule(ctx(t), "later"))
	wantStrings(t, "due in a day after the changes", due(Epoch.Add(24*time.Hour), 10), []string{"soon-b", "past"})
	if got := due(Epoch.Add(24*time.Hour), 0); len(got) != 2 {
		t.Errorf("due with the default limit: %v", got)
	}
}

func testScheduleEvents(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("nightly", time.Time{}), event(weft.ScheduleCreated, 1))
	for i := 2; i <= 6; i++ {
		var err error
		s, err = h.s.UpdateSchedule(ctx(t), s, []weft.ScheduleEvent{event(weft.ScheduleRunStarted, i)})
		must(t, "UpdateSchedule", err)
	}
	wantStrings(t, "all", eventsOf(t, h, "nightly", 0, 0), []string{"1:created:1", "2:run_started:2", "3:run_started:3", "4:run_started:4", "5:run_started:5", "6:run_started:6"})
	wantStrings(t, "after 2, two", eventsOf(t, h, "nightly", 2, 2), []string{"3:run_started:3", "4:run_started:4"})
	wantStrings(t, "after the last", eventsOf(t, h, "nightly", 6, 10), nil)
}

func testScheduleEventsTrimmed(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("chatty", time.Time{}))
	// Past the bound in a few writes of many events each.
	n := 0
	for n < weft.MaxScheduleEvents+50 {
		batch := make([]weft.ScheduleEvent, 0, 300)
		for range 300 {
			n++
			batch = append(batch, event(weft.ScheduleSkipped, n))
		}
		var err error
		s, err = h.s.UpdateSchedule(ctx(t), s, batch)
		must(t, "UpdateSchedule", err)
	}
	var all []string
	var after uint64
	for {
		page, err := h.s.ScheduleEvents(ctx(t), "chatty", after, weft.MaxListLimit)
		must(t, "ScheduleEvents", err)
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			all = append(all, fmt.Sprint(e.Seq))
		}
		after = page[len(page)-1].Seq
	}
	if len(all) != weft.MaxScheduleEvents || all[0] != fmt.Sprint(n-weft.MaxScheduleEvents+1) || all[len(all)-1] != fmt.Sprint(n) {
		t.Errorf("%d events kept of %d, from %s to %s; want the last %d", len(all), n, all[0], all[len(all)-1], weft.MaxScheduleEvents)
	}
}

func testDeleteSchedule(t *testing.T, h *harness) {
	h.createSchedule(t, newSchedule("gone", Epoch), event(weft.ScheduleCreated, 1))
	must(t, "DeleteSchedule", h.s.DeleteSchedule(ctx(t), "gone"))
	_, err := h.s.GetSchedule(ctx(t), "gone")
	wantErr(t, "GetSchedule after delete", err, weft.ErrNotFound)
	_, err = h.s.ScheduleEvents(ctx(t), "gone", 0, 10)
	wantErr(t, "ScheduleEvents after delete", err, weft.ErrNotFound)
	wantErr(t, "DeleteSchedule twice", h.s.DeleteSchedule(ctx(t), "gone"), weft.ErrNotFound)
	scs, err := h.s.DueSchedules(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueSchedules", err)
	wantStrings(t, "due after delete", scheduleIDs(scs), nil)
	// The id can be used again; the new schedule has its own events.
	h.createSchedule(t, newSchedule("gone", time.Time{}), event(weft.ScheduleCreated, 7))
	wantStrings(t, "events of the new schedule", eventsOf(t, h, "gone", 0, 0), []string{"1:created:7"})
}

func testScheduleDurability(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("kept", Epoch.Add(time.Minute)), event(weft.ScheduleCreated, 1))
	at := h.clock.Advance(time.Second)
	s.Note = "after a restart"
	s, err := h.s.UpdateSchedule(ctx(t), s, []weft.ScheduleEvent{event(weft.SchedulePaused, 2)})
	must(t, "UpdateSchedule", err)
	h.createSchedule(t, newSchedule("dropped", Epoch))
	must(t, "DeleteSchedule", h.s.DeleteSchedule(ctx(t), "dropped"))

	h.s = h.reopen()
	wantSchedule(t, "after reopen", h.getSchedule(t, "kept"), s, 2, Epoch, at)
	wantStrings(t, "events after reopen", eventsOf(t, h, "kept", 0, 0), []string{"1:created:1", "2:paused:2"})
	scs, err := h.s.DueSchedules(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueSchedules", err)
	wantStrings(t, "due after reopen", scheduleIDs(scs), []string{"kept"})
	_, err = h.s.UpdateSchedule(ctx(t), s, []weft.ScheduleEvent{event(weft.ScheduleUnpaused, 3)})
	must(t, "UpdateSchedule after reopen", err)
	wantStrings(t, "events after reopen and a write", eventsOf(t, h, "kept", 0, 0), []string{"1:created:1", "2:paused:2", "3:unpaused:3"})
}

func testScheduleCancelledContext(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("nightly", Epoch))
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateSchedule", func() error { _, err := h.s.CreateSchedule(c, newSchedule("daily", Epoch), nil); return err }},
		{"GetSchedule", func() error { _, err := h.s.GetSchedule(c, "nightly"); return err }},
		{"ListSchedules", func() error { _, _, err := h.s.ListSchedules(c, "", 1); return err }},
		{"UpdateSchedule", func() error { _, err := h.s.UpdateSchedule(c, s, nil); return err }},
		{"DeleteSchedule", func() error { return h.s.DeleteSchedule(c, "nightly") }},
		{"DueSchedules", func() error { _, err := h.s.DueSchedules(c, Epoch, 1); return err }},
		{"ScheduleEvents", func() error { _, err := h.s.ScheduleEvents(c, "nightly", 0, 1); return err }},
	}
	for _, tt := range calls {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	wantSchedule(t, "after the cancelled calls", h.getSchedule(t, "nightly"), s, 1, Epoch, Epoch)
	_, err := h.s.GetSchedule(ctx(t), "daily")
	wantErr(t, "cancelled CreateSchedule", err, weft.ErrNotFound)
}

func testScheduleClosed(t *testing.T, h *harness) {
	s := h.createSchedule(t, newSchedule("nightly", Epoch))
	must(t, "Close", h.s.Close())
	_, err := h.s.CreateSchedule(ctx(t), newSchedule("daily", Epoch), nil)
	wantErr(t, "CreateSchedule after Close", err, weft.ErrClosed)
	_, err = h.s.GetSchedule(ctx(t), "nightly")
	wantErr(t, "GetSchedule after Close", err, weft.ErrClosed)
	_, _, err = h.s.ListSchedules(ctx(t), "", 1)
	wantErr(t, "ListSchedules after Close", err, weft.ErrClosed)
	_, err = h.s.UpdateSchedule(ctx(t), s, nil)
	wantErr(t, "UpdateSchedule after Close", err, weft.ErrClosed)
	wantErr(t, "DeleteSchedule after Close", h.s.DeleteSchedule(ctx(t), "nightly"), weft.ErrClosed)
	_, err = h.s.DueSchedules(ctx(t), Epoch, 1)
	wantErr(t, "DueSchedules after Close", err, weft.ErrClosed)
	_, err = h.s.ScheduleEvents(ctx(t), "nightly", 0, 1)
	wantErr(t, "ScheduleEvents after Close", err, weft.ErrClosed)
}
