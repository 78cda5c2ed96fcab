package schedule

import (
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// ErrBusy: a schedule holds as many triggers or backfills waiting as it
// may; it matches weft.ErrConflict, for the caller to retry later.
var ErrBusy error = busyError{}

// busyError is ErrBusy: a conflict in its own words.
type busyError struct{}

func (busyError) Error() string        { return "the schedule has too many requests waiting" }
func (busyError) Is(target error) bool { return target == weft.ErrConflict }

// Trigger asks for a run now, under overlap (empty: the schedule's
// policy). Its nominal time is now to the second, so two triggers in one
// second are one run. The next Step takes it, paused or not.
func Trigger(st State, now time.Time, overlap Overlap) (State, error) {
	if err := checkOverlap(overlap); err != nil {
		return st, err
	}
	if len(st.Triggers) >= MaxTriggers {
		return st, fmt.Errorf("%w: %d triggers", ErrBusy, len(st.Triggers))
	}
	st = st.clone()
	st.Triggers = append(st.Triggers, Fire{Nominal: now.Truncate(time.Second), Kind: weft.FireTrigger, Overlap: overlap})
	return st, nil
}

// AddBackfill asks for the runs of the times the calendar names from from
// to to (both included; to not after now), under overlap (empty: the
// schedule's policy). A backfill's runs have the ids the scheduled runs of
// those times had, so a time that ran already does not run again while
// that instance is kept. It returns how many fires the range holds.
func AddBackfill(cal *Calendar, st State, from, to, now time.Time, overlap Overlap) (State, int, error) {
	var errs problems
	if err := checkOverlap(overlap); err != nil {
		errs = append(errs, err.(*weft.ScheduleError).Problems...)
	}
	switch {
	case from.IsZero() || to.IsZero():
		errs.add("from", "a backfill needs both from and to")
	case to.Before(from):
		errs.add("to", "must not be before from (%s), got %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	case to.After(now):
		errs.add("to", "must not be in the future (now is %s), got %s: a backfill runs past times", now.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if len(errs) > 0 {
		return st, 0, errs.err()
	}
	n := 0
	for t, ok := cal.Next(from.Add(-time.Nanosecond)); ok && !t.After(to); t, ok = cal.Next(t) {
		if n++; n > MaxBackfillFires {
			return st, 0, &weft.ScheduleError{Problems: []weft.Problem{{Path: "to", Message: fmt.Sprintf("the range holds more than %d fires: backfill it in parts", MaxBackfillFires)}}}
		}
	}
	if n == 0 {
		return st, 0, &weft.ScheduleError{Problems: []weft.Problem{{Path: "from", Message: "the schedule names no time in the range"}}}
	}
	if len(st.Backfills) >= MaxBackfills {
		return st, 0, fmt.Errorf("%w: %d backfills", ErrBusy, len(st.Backfills))
	}
	st = st.clone()
	st.Backfills = append(st.Backfills, Backfill{From: from, To: to, Overlap: overlap})
	return st, n, nil
}

// Pause pauses a schedule: scheduled fires stop (triggers and backfills
// still run), and scheduled fires waiting in the buffer are dropped and
// recorded. Pausing a paused schedule changes nothing.
func Pause(st State) (State, []Skip) {
	if st.Paused {
		return st, nil
	}
	s := stepper{st: st.clone()}
	s.pause()
	return s.st, s.d.Skipped
}

// Unpause resumes a paused schedule from now: the fires that came due
// while it was paused are recorded as skipped, not run. Unpausing a
// running schedule changes nothing.
func Unpause(cal *Calendar, id string, st State, now time.Time) (State, []Skip) {
	if !st.Paused {
		return st, nil
	}
	s := stepper{in: Input{ID: id, Calendar: cal, Now: now}, st: st.clone()}
	s.st.Paused = false
	for {
		nominal, ok := cal.Next(s.st.Cursor)
		if !ok || nominal.After(now) {
			break
		}
		s.st.Cursor = nominal
		s.skip(Fire{Nominal: nominal, Kind: weft.FireScheduled}, SkipPaused)
		if last := &s.d.Skipped[len(s.d.Skipped)-1]; last.Count >= maxCounted {
			s.st.Cursor, last.Last, last.More = now, now, true
			break
		}
	}
	return s.st, s.d.Skipped
}

// Adopt takes into st the run of fire f that an earlier try of the same
// Step started, whose write was lost to another that came first (an
// operator's pause, say): the instance exists, so the state tracks it as
// running, and the fire is taken (out of the buffer and the triggers, the
// cursor past it when it is the calendar's or a backfill's next fire). It
// reports false, with st as it was, when st has the run already (the
// write that came first recorded it, or the run ended since).
//
// A fire that is not its cursor's next (the lost try had taken fires
// before it as well) leaves the cursor where it is: that fire comes again
// and is skipped as a duplicate while its run goes on.
func Adopt(cal *Calendar, id string, st State, f Fire, now time.Time) (State, bool) {
	run := InstanceID(id, f.Nominal)
	for _, r := range st.Running {
		if r.InstanceID == run {
			return st, false
		}
	}
	for _, r := range st.Recent {
		if r.InstanceID == run {
			return st, false
		}
	}
	st = st.clone()
	st.Running = append(st.Running, weft.ScheduleRun{InstanceID: run, Nominal: f.Nominal, Kind: f.Kind, StartedAt: now, Status: weft.StatusPending})
	same := func(g Fire) bool { return g.Kind == f.Kind && g.Nominal.Equal(f.Nominal) }
	st.Buffer = slices.DeleteFunc(st.Buffer, same)
	st.Triggers = slices.DeleteFunc(st.Triggers, same)
	switch f.Kind {
	case weft.FireScheduled:
		st.Runs++
		if next, ok := cal.Next(st.Cursor); ok && next.Equal(f.Nominal) {
			st.Cursor = f.Nominal
		}
	case weft.FireBackfill:
		for i := range st.Backfills {
			b := &st.Backfills[i]
			after := b.Cursor
			if after.IsZero() {
				after = b.From.Add(-time.Nanosecond)
			}
			if next, ok := cal.Next(after); ok && next.Equal(f.Nominal) {
				b.Cursor = f.Nominal
				break
			}
		}
	}
	return st, true
}
