package redisstore_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/storetest"
)

// contents is snapshot with each hash as its sorted fields rather than its
// DUMP: a hash of long values is a hashtable, whose DUMP follows the
// order of its buckets, which reads change while Redis rehashes it.
func contents(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	out := snapshot(t, c, prefix)
	for k := range out {
		typ, err := c.Type(t.Context(), k).Result()
		if err != nil {
			t.Fatalf("TYPE %q: %v", k, err)
		}
		if typ == "hash" {
			h, err := c.HGetAll(t.Context(), k).Result()
			if err != nil {
				t.Fatalf("HGETALL %q: %v", k, err)
			}
			out[k] = fmt.Sprint(h) // sorted by field
		}
	}
	return out
}

func schedule(id string, wake time.Time) *weft.Schedule {
	return &weft.Schedule{ID: id, Document: json.RawMessage(`{"workflow":"w"}`), State: json.RawMessage(`{}`), Wake: wake}
}

func skipped(n int) []weft.ScheduleEvent {
	evs := make([]weft.ScheduleEvent, n)
	for i := range evs {
		evs[i] = weft.ScheduleEvent{Type: weft.ScheduleSkipped, Actor: "scheduler", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i+1))}
	}
	return evs
}

// TestScheduleWritesAtomic: refused schedule writes leave every key of the
// store byte for byte as it was, and a delete leaves no key of the
// schedule behind (record, events, index entries).
func TestScheduleWritesAtomic(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	s := open(t, c, "sched:", clock.Now)
	ctx := t.Context()
	kept, err := s.CreateSchedule(ctx, schedule("kept", storetest.Epoch), skipped(3))
	if err != nil {
		t.Fatal(err)
	}
	before := contents(t, c, "sched:")

	stale := *kept
	stale.Revision = 7
	for _, tt := range []struct {
		name string
		call func() error
		want error
	}{
		{"create a taken id", func() error {
			_, err := s.CreateSchedule(ctx, schedule("kept", storetest.Epoch.Add(time.Hour)), skipped(1))
			return err
		}, weft.ErrExists},
		{"update from a stale revision", func() error { _, err := s.UpdateSchedule(ctx, &stale, skipped(1)); return err }, weft.ErrConflict},
		{"update from revision 0", func() error {
			zero := *kept
			zero.Revision = 0
			_, err := s.UpdateSchedule(ctx, &zero, skipped(1))
			return err
		}, weft.ErrConflict},
		{"update a missing schedule", func() error {
			_, err := s.UpdateSchedule(ctx, schedule("gone", storetest.Epoch), skipped(1))
			return err
		}, weft.ErrNotFound},
		{"delete a missing schedule", func() error { return s.DeleteSchedule(ctx, "gone") }, weft.ErrNotFound},
		{"an event whose data is not JSON", func() error {
			evs := skipped(2)
			evs[1].Data = json.RawMessage(`{`)
			_, err := s.UpdateSchedule(ctx, kept, evs)
			return err
		}, weft.ErrInvalid},
		{"a state that is not JSON", func() error {
			bad := *kept
			bad.State = json.RawMessage(`nope`)
			_, err := s.UpdateSchedule(ctx, &bad, nil)
			return err
		}, weft.ErrInvalid},
	} {
		if err := tt.call(); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		wantSame(t, tt.name, before, contents(t, c, "sched:"))
	}

	// Create, update (the wake moves) and delete a second schedule: the
	// store is as it was.
	sc, err := s.CreateSchedule(ctx, schedule("gone", storetest.Epoch), skipped(2))
	if err != nil {
		t.Fatal(err)
	}
	sc.Wake = storetest.Epoch.Add(time.Hour)
	if _, err := s.UpdateSchedule(ctx, sc, skipped(5)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSchedule(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	wantSame(t, "create, update and delete", before, contents(t, c, "sched:"))
}

// TestScheduleEventsBeyondTheBound: a write of more events than the store
// keeps keeps the last ones, with the Seqs of all of them, and the next
// write goes on from there.
func TestScheduleEventsBeyondTheBound(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := open(t, srv.Client(t), "bound:", storetest.NewClock(storetest.Epoch).Now)
	ctx := t.Context()
	const max = weft.MaxScheduleEvents
	for i, tt := range []struct {
		name     string
		writes   []int // events per write; the first creates
		from, to uint64
	}{
		{"one create of more than the bound", []int{max + 7}, 8, max + 7},
		{"exactly the bound", []int{0, max}, 1, max},
		{"an update of more than the bound", []int{3, 2*max + 1}, max + 5, 2*max + 4},
		{"one over in the second write", []int{max, 1}, 2, max + 1},
	} {
		id := fmt.Sprintf("s%d", i)
		t.Run(tt.name, func(t *testing.T) {
			sc, err := s.CreateSchedule(ctx, schedule(id, time.Time{}), skipped(tt.writes[0]))
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.writes[1:] {
				if sc, err = s.UpdateSchedule(ctx, sc, skipped(n)); err != nil {
					t.Fatal(err)
				}
			}
			var seqs []uint64
			for after := uint64(0); ; {
				page, err := s.ScheduleEvents(ctx, id, after, weft.MaxListLimit)
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
			if uint64(len(seqs)) != tt.to-tt.from+1 || seqs[0] != tt.from || seqs[len(seqs)-1] != tt.to {
				t.Fatalf("kept %d events, Seq %d to %d; want %d to %d", len(seqs), seqs[0], seqs[len(seqs)-1], tt.from, tt.to)
			}
			for i := 1; i < len(seqs); i++ {
				if seqs[i] != seqs[i-1]+1 {
					t.Fatalf("Seq %d after %d", seqs[i], seqs[i-1])
				}
			}
			// The page after a Seq in the middle starts right after it.
			mid := tt.from + (tt.to-tt.from)/2
			page, err := s.ScheduleEvents(ctx, id, mid, 2)
			if err != nil || len(page) == 0 || page[0].Seq != mid+1 {
				t.Errorf("events after %d: %+v, %v", mid, page, err)
			}
			// After a Seq far past the last, or before the first kept.
			if page, err := s.ScheduleEvents(ctx, id, ^uint64(0), 10); err != nil || len(page) != 0 {
				t.Errorf("events after the largest Seq: %d, %v", len(page), err)
			}
			if page, err := s.ScheduleEvents(ctx, id, 0, 1); err != nil || len(page) != 1 || page[0].Seq != tt.from {
				t.Errorf("first event: %+v, %v; want Seq %d", page, err, tt.from)
			}
		})
	}
}

// TestScheduleWakeOutsideHexTime: a wake outside what the index's hex
// times hold (1678 to 2262) is stored exactly, and is due by its clamped
// time.
func TestScheduleWakeOutsideHexTime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	s := open(t, srv.Client(t), "wake:", storetest.NewClock(storetest.Epoch).Now)
	ctx := t.Context()
	early := time.Date(1500, 1, 1, 0, 0, 0, 1, time.UTC)
	late := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	for id, wake := range map[string]time.Time{"early": early, "late": late} {
		if _, err := s.CreateSchedule(ctx, schedule(id, wake), nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSchedule(ctx, id)
		if err != nil || !got.Wake.Equal(wake) {
			t.Errorf("GetSchedule(%s): wake %v, %v; want %v", id, got.Wake, err, wake)
		}
	}
	for _, tt := range []struct {
		now  time.Time
		want string
	}{
		{storetest.Epoch, "[early]"},
		{late, "[early late]"},
	} {
		due, err := s.DueSchedules(ctx, tt.now, 10)
		var ids []string
		for _, sc := range due {
			ids = append(ids, sc.ID)
		}
		if err != nil || fmt.Sprint(ids) != tt.want {
			t.Errorf("DueSchedules(%v) = %v, %v; want %s", tt.now, ids, err, tt.want)
		}
	}
}
