package embedded_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store/embedded"
)

func schedule(id string) *weft.Schedule {
	return &weft.Schedule{ID: id, Document: json.RawMessage(`{"workflow":"w"}`), State: json.RawMessage(`{}`)}
}

func skipped(n int) []weft.ScheduleEvent {
	evs := make([]weft.ScheduleEvent, n)
	for i := range evs {
		evs[i] = weft.ScheduleEvent{Type: weft.ScheduleSkipped, Actor: "scheduler", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}
	}
	return evs
}

// TestScheduleEventsBound: whatever the sizes of the writes, a schedule
// keeps its last weft.MaxScheduleEvents events, numbered on from its
// first, including when one write brings more than the bound.
func TestScheduleEventsBound(t *testing.T) {
	t.Parallel()
	const bound = weft.MaxScheduleEvents
	for _, tt := range []struct {
		name   string
		writes []int // events of the create, then of each update
		first  uint64
		last   uint64
	}{
		{"none", []int{0, 0}, 0, 0},
		{"the bound", []int{bound}, 1, bound},
		{"one past the bound in one write", []int{bound + 1}, 2, bound + 1},
		{"twice the bound in one write", []int{2*bound + 3}, bound + 4, 2*bound + 3},
		{"one past the bound in two writes", []int{bound, 1}, 2, bound + 1},
		{"a large write after a few", []int{3, 2 * bound}, bound + 4, 2*bound + 3},
		{"small writes after a large one", []int{2 * bound, 1, 1}, bound + 3, 2*bound + 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEngines(t, func(t *testing.T, e embedded.Engine) { testScheduleEventsBound(t, e, tt.writes, tt.first, tt.last) })
		})
	}
}

func testScheduleEventsBound(t *testing.T, e embedded.Engine, writes []int, first, last uint64) {
	s := openE(t, e, storePath(t.TempDir(), e), nil)
	ctx := t.Context()
	sc, err := s.CreateSchedule(ctx, schedule("s"), skipped(writes[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range writes[1:] {
		if sc, err = s.UpdateSchedule(ctx, sc, skipped(n)); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []uint64
	for after := uint64(0); ; {
		page, err := s.ScheduleEvents(ctx, "s", after, weft.MaxListLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			seqs = append(seqs, e.Seq)
		}
		after = page[len(page)-1].Seq
	}
	if last == 0 {
		if len(seqs) != 0 {
			t.Fatalf("events %v, want none", seqs)
		}
		return
	}
	if uint64(len(seqs)) != last-first+1 || seqs[0] != first || seqs[len(seqs)-1] != last {
		t.Errorf("%d events from %d to %d, want %d to %d", len(seqs), seqs[0], seqs[len(seqs)-1], first, last)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("events %d then %d: not consecutive", seqs[i-1], seqs[i])
		}
	}
}

// TestScheduleNotJSON: the embedded store keeps a schedule in a JSON
// record, so a document, state or event data that is not JSON is refused
// as invalid, before anything is written.
func TestScheduleNotJSON(t *testing.T) {
	t.Parallel()
	forEngines(t, testScheduleNotJSON)
}

func testScheduleNotJSON(t *testing.T, e embedded.Engine) {
	s := openE(t, e, storePath(t.TempDir(), e), nil)
	ctx := t.Context()
	good, err := s.CreateSchedule(ctx, schedule("s"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		edit   func(*weft.Schedule)
		events []weft.ScheduleEvent
	}{
		{"document", func(sc *weft.Schedule) { sc.Document = json.RawMessage(`{"workflow":`) }, nil},
		{"state", func(sc *weft.Schedule) { sc.State = json.RawMessage(`nope`) }, nil},
		{"event data", func(*weft.Schedule) {}, []weft.ScheduleEvent{{Type: weft.ScheduleCreated, Data: json.RawMessage(`{`)}}},
	} {
		sc := schedule("t")
		tt.edit(sc)
		if _, err := s.CreateSchedule(ctx, sc, tt.events); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("CreateSchedule with a %s that is not JSON: %v, want ErrInvalid", tt.name, err)
		}
		up := *good
		tt.edit(&up)
		if _, err := s.UpdateSchedule(ctx, &up, tt.events); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("UpdateSchedule with a %s that is not JSON: %v, want ErrInvalid", tt.name, err)
		}
	}
	if got, err := s.GetSchedule(ctx, "s"); err != nil || got.Revision != 1 {
		t.Errorf("after the refused writes: %+v, %v; want revision 1", got, err)
	}
}

// TestOpenAddsSchedules: a file written before the schedule buckets
// existed (same schema version) opens, and takes schedules.
func TestOpenAddsSchedules(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft.db")
	if err := openBoltFile(t, path, nil).Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"schedules", "schedules_by_wake", "schedule_events"} {
			if err := tx.DeleteBucket([]byte(name)); err != nil {
				return fmt.Errorf("delete bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	s := openBoltFile(t, path, nil)
	ctx := t.Context()
	sc := schedule("s")
	sc.Wake = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreateSchedule(ctx, sc, skipped(1)); err != nil {
		t.Fatal(err)
	}
	due, err := s.DueSchedules(ctx, sc.Wake, 10)
	if err != nil || len(due) != 1 || due[0].ID != "s" {
		t.Errorf("DueSchedules = %v, %v; want [s]", due, err)
	}
}
