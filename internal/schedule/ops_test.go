package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// TestOperationsRefuse: a trigger or backfill the schedule cannot take is
// refused with what is wrong, and leaves the state as it was.
func TestOperationsRefuse(t *testing.T) {
	t.Parallel()
	cal, err := Compile(everyMinute, "spec")
	if err != nil {
		t.Fatal(err)
	}
	now := clock(t, "12:00")
	st := State{Cursor: day}
	tests := []struct {
		name     string
		do       func() (State, error)
		is       error
		path     string
		contains string
	}{
		{"a trigger with an unknown policy", func() (State, error) { return Trigger(st, now, "sometimes") }, weft.ErrInvalid, "overlap", "must be one of"},
		{"a backfill into the future", func() (State, error) {
			s, _, err := AddBackfill(cal, st, clock(t, "11:00"), clock(t, "13:00"), now, "")
			return s, err
		}, weft.ErrInvalid, "to", "past times"},
		{"a backfill ending before it starts", func() (State, error) {
			s, _, err := AddBackfill(cal, st, clock(t, "11:00"), clock(t, "10:00"), now, "")
			return s, err
		}, weft.ErrInvalid, "to", "before from"},
		{"a backfill of too many fires", func() (State, error) {
			s, _, err := AddBackfill(cal, st, clock(t, "-00:00").AddDate(0, 0, -7), now, now, "")
			return s, err
		}, weft.ErrInvalid, "to", "more than 10000 fires"},
		{"a backfill of a range the calendar names no time in", func() (State, error) {
			s, _, err := AddBackfill(cal, st, clock(t, "11:00:10"), clock(t, "11:00:50"), now, "")
			return s, err
		}, weft.ErrInvalid, "from", "no time in the range"},
		{"a backfill with an unknown policy", func() (State, error) {
			s, _, err := AddBackfill(cal, st, clock(t, "11:00"), clock(t, "11:10"), now, "often")
			return s, err
		}, weft.ErrInvalid, "overlap", "must be one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.do()
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want one matching %v", err, tt.is)
			}
			var e *weft.ScheduleError
			if !errors.As(err, &e) || e.Problems[0].Path != tt.path || !strings.Contains(e.Problems[0].Message, tt.contains) {
				t.Errorf("err = %v, want a problem at %s containing %q", err, tt.path, tt.contains)
			}
			if len(got.Triggers)+len(got.Backfills) != 0 {
				t.Errorf("the state changed: %+v", got)
			}
		})
	}
}

// TestOperationsBounded: triggers and backfills waiting are bounded, and
// the bound is a conflict to retry, not a malformed request.
func TestOperationsBounded(t *testing.T) {
	t.Parallel()
	cal, err := Compile(everyMinute, "spec")
	if err != nil {
		t.Fatal(err)
	}
	now := clock(t, "12:00")
	st := State{Cursor: day}
	for i := range MaxTriggers {
		if st, err = Trigger(st, now.Add(time.Duration(i)*time.Second), ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Trigger(st, now, ""); !errors.Is(err, ErrBusy) || !errors.Is(err, weft.ErrConflict) {
		t.Errorf("trigger %d: %v, want ErrBusy", MaxTriggers+1, err)
	}
	for range MaxBackfills {
		var n int
		if st, n, err = AddBackfill(cal, st, clock(t, "11:00"), clock(t, "11:10"), now, ""); err != nil || n != 11 {
			t.Fatalf("backfill of 11:00..11:10: %d fires, %v", n, err)
		}
	}
	if _, _, err := AddBackfill(cal, st, clock(t, "11:00"), clock(t, "11:10"), now, ""); !errors.Is(err, ErrBusy) {
		t.Errorf("backfill %d: %v, want ErrBusy", MaxBackfills+1, err)
	}
}

// TestRecent: ended runs are remembered newest first, RecentRuns of them.
func TestRecent(t *testing.T) {
	t.Parallel()
	cal, err := Compile(everyMinute, "spec")
	if err != nil {
		t.Fatal(err)
	}
	st := State{Cursor: day}
	for i := 1; i <= RecentRuns+3; i++ {
		for j := range st.Running {
			st.Running[j].Status = weft.StatusCompleted
		}
		d := Step(Input{ID: "s", Calendar: cal, State: st, Now: day.Add(time.Duration(i) * time.Minute)})
		if i > 1 && (len(d.Ended) != 1 || !d.Ended[0].EndedAt.Equal(day.Add(time.Duration(i)*time.Minute))) {
			t.Fatalf("minute %d: ended %+v", i, d.Ended)
		}
		st = d.State
	}
	if len(st.Recent) != RecentRuns || !st.Recent[0].Nominal.Equal(day.Add(time.Duration(RecentRuns+2)*time.Minute)) {
		t.Errorf("recent runs %d, the newest %v", len(st.Recent), st.Recent[0].Nominal)
	}
}

// TestPolicyCheck: a policy's problems name their fields.
func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	err := Policy{Overlap: "never", CatchUpWindow: time.Millisecond, MaxRuns: -1}.Check("policy")
	var e *weft.ScheduleError
	if !errors.As(err, &e) || len(e.Problems) != 3 {
		t.Fatalf("Check = %v, want three problems", err)
	}
	for i, path := range []string{"policy.overlap", "policy.catch_up_window", "policy.max_runs"} {
		if e.Problems[i].Path != path {
			t.Errorf("problem %d at %s, want %s", i, e.Problems[i].Path, path)
		}
	}
	if err := (Policy{}).Check("policy"); err != nil {
		t.Errorf("the zero policy: %v", err)
	}
	if p := (Policy{}).WithDefaults(); p.Overlap != OverlapSkip || p.CatchUpWindow != DefaultCatchUpWindow {
		t.Errorf("defaults %+v", p)
	}
}

// TestStepDoesNotMutateItsInput: Step and the operations return a new
// state; the caller's is untouched (it may be retried after a failed
// save).
func TestStepDoesNotMutateItsInput(t *testing.T) {
	t.Parallel()
	cal, err := Compile(everyMinute, "spec")
	if err != nil {
		t.Fatal(err)
	}
	st := State{Cursor: day, Running: []weft.ScheduleRun{{InstanceID: InstanceID("s", day), Nominal: day, Status: weft.StatusRunning}}, Buffer: []Fire{{Nominal: day.Add(time.Minute), Kind: weft.FireScheduled}}}
	d := Step(Input{ID: "s", Calendar: cal, Policy: Policy{Overlap: OverlapCancelOther, PauseOnFailure: true}, State: st, Now: day.Add(2 * time.Minute)})
	if len(d.Cancel) != 1 || st.Running[0].CancelRequested || len(st.Buffer) != 1 || !st.Buffer[0].Nominal.Equal(day.Add(time.Minute)) {
		t.Errorf("Step changed its input: %+v (decision %+v)", st, d)
	}
}

// TestAdopt: a run an earlier try started, whose write was lost, is
// tracked and its fire taken; one the state has already is left alone.
func TestAdopt(t *testing.T) {
	t.Parallel()
	cal, err := Compile(everyMinute, "spec")
	if err != nil {
		t.Fatal(err)
	}
	now := day.Add(3 * time.Minute)
	at := func(m int) time.Time { return day.Add(time.Duration(m) * time.Minute) }
	scheduled := func(m int) Fire { return Fire{Nominal: at(m), Kind: weft.FireScheduled} }
	tests := []struct {
		name    string
		st      State
		f       Fire
		adopted bool
		// what the state holds after
		cursor    time.Time
		runs      int
		running   int
		buffer    int
		triggers  int
		backfillC time.Time
	}{
		{"the next scheduled fire of a paused schedule: tracked, the cursor past it",
			State{Cursor: at(1), Paused: true, Runs: 1}, scheduled(2), true, at(2), 2, 1, 0, 0, time.Time{}},
		{"a scheduled fire after one the lost try took too: tracked, the cursor kept",
			State{Cursor: at(0)}, scheduled(2), true, at(0), 1, 1, 0, 0, time.Time{}},
		{"a fire the state runs already",
			State{Cursor: at(2), Runs: 1, Running: []weft.ScheduleRun{{InstanceID: InstanceID("s", at(2)), Nominal: at(2)}}}, scheduled(2), false, at(2), 1, 1, 0, 0, time.Time{}},
		{"a fire whose run ended since",
			State{Cursor: at(2), Recent: []weft.ScheduleRun{{InstanceID: InstanceID("s", at(2)), Nominal: at(2)}}}, scheduled(2), false, at(2), 0, 0, 0, 0, time.Time{}},
		{"a buffered fire: out of the buffer",
			State{Cursor: at(2), Buffer: []Fire{scheduled(2)}}, scheduled(2), true, at(2), 1, 1, 0, 0, time.Time{}},
		{"a trigger: out of the triggers",
			State{Cursor: at(2), Triggers: []Fire{{Nominal: at(2).Add(5 * time.Second), Kind: weft.FireTrigger}}}, Fire{Nominal: at(2).Add(5 * time.Second), Kind: weft.FireTrigger}, true, at(2), 0, 1, 0, 0, time.Time{}},
		{"a backfill's next fire: its cursor past it",
			State{Cursor: at(2), Backfills: []Backfill{{From: at(-10), To: at(-5)}}}, Fire{Nominal: at(-10), Kind: weft.FireBackfill}, true, at(2), 0, 1, 0, 0, at(-10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.st.clone()
			got, ok := Adopt(cal, "s", tt.st, tt.f, now)
			if ok != tt.adopted {
				t.Fatalf("adopted = %v, want %v", ok, tt.adopted)
			}
			if !got.Cursor.Equal(tt.cursor) || got.Runs != tt.runs || len(got.Running) != tt.running || len(got.Buffer) != tt.buffer || len(got.Triggers) != tt.triggers {
				t.Errorf("state = cursor %s runs %d running %d buffer %d triggers %d, want %s %d %d %d %d",
					got.Cursor.Format(time.TimeOnly), got.Runs, len(got.Running), len(got.Buffer), len(got.Triggers),
					tt.cursor.Format(time.TimeOnly), tt.runs, tt.running, tt.buffer, tt.triggers)
			}
			if len(got.Backfills) > 0 && !got.Backfills[0].Cursor.Equal(tt.backfillC) {
				t.Errorf("backfill cursor = %s, want %s", got.Backfills[0].Cursor, tt.backfillC)
			}
			if ok {
				r := got.Running[len(got.Running)-1]
				if r.InstanceID != InstanceID("s", tt.f.Nominal) || r.Status != weft.StatusPending || !r.StartedAt.Equal(now) {
					t.Errorf("run = %+v, want %s pending, started at now", r, InstanceID("s", tt.f.Nominal))
				}
			}
			if len(tt.st.Running) != len(before.Running) || len(tt.st.Buffer) != len(before.Buffer) || !tt.st.Cursor.Equal(before.Cursor) {
				t.Errorf("Adopt changed its input: %+v", tt.st)
			}
		})
	}
}
