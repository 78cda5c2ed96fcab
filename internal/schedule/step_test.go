package schedule

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// day is the date the step tables run on.
var day = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// clock reads "HH:MM" or "HH:MM:SS" on day; a leading "-" is the day
// before.
func clock(t testing.TB, s string) time.Time {
	t.Helper()
	base := day
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		base, s = day.AddDate(0, 0, -1), rest
	}
	layout := "15:04"
	if strings.Count(s, ":") == 2 {
		layout = "15:04:05"
	}
	v, err := time.Parse(layout, s)
	if err != nil {
		t.Fatalf("bad clock %q in the table: %v", s, err)
	}
	return base.Add(time.Duration(v.Hour())*time.Hour + time.Duration(v.Minute())*time.Minute + time.Duration(v.Second())*time.Second + time.Duration(v.Nanosecond()))
}

// hm formats a time of the step tables back.
func hm(t time.Time) string {
	s := t.UTC().Format("15:04")
	if t.Second() != 0 {
		s = t.UTC().Format("15:04:05")
	}
	if t.Before(day) {
		s = "-" + s
	}
	return s
}

// look is one Step of a scenario: the time, the runs that ended since
// (by their nominal time), an operation before the Step, and what the
// Step must decide.
type look struct {
	at    string
	ended map[string]weft.Status
	op    func(t *testing.T, cal *Calendar, st State, now time.Time) State

	start  []string // nominal times started, in order
	cancel []string // nominal times of the runs cancelled
	skip   []string // "reason nominal" or "reason first..last xN"
	paused bool     // the Step paused the schedule
	wake   string   // "" for none
}

// scenario runs looks against one schedule "s" whose state starts with
// its cursor at 00:00.
type scenario struct {
	name   string
	spec   Spec
	policy Policy
	looks  []look
}

func (sc scenario) run(t *testing.T) {
	cal, err := Compile(sc.spec, "spec")
	if err != nil {
		t.Fatal(err)
	}
	st := State{Cursor: day}
	for i, l := range sc.looks {
		now := clock(t, l.at)
		for j := range st.Running {
			if s, ok := l.ended[hm(st.Running[j].Nominal)]; ok {
				st.Running[j].Status = s
			}
		}
		if l.op != nil {
			st = l.op(t, cal, st, now)
		}
		d := Step(Input{ID: "s", Calendar: cal, Policy: sc.policy, State: st, Now: now})
		var got []string
		for _, f := range d.Start {
			got = append(got, hm(f.Nominal))
		}
		check(t, i, l.at, "started", got, l.start)
		got = nil
		for _, id := range d.Cancel {
			n, ok := Nominal("s", id)
			if !ok {
				t.Fatalf("look %d: cancel of %q, not a run of s", i, id)
			}
			got = append(got, hm(n))
		}
		check(t, i, l.at, "cancelled", got, l.cancel)
		got = nil
		for _, s := range d.Skipped {
			if s.Count > 1 || s.More {
				more := ""
				if s.More {
					more = "+"
				}
				got = append(got, fmt.Sprintf("%s %s..%s x%d%s", s.Reason, hm(s.Nominal), hm(s.Last), s.Count, more))
				continue
			}
			got = append(got, fmt.Sprintf("%s %s", s.Reason, hm(s.Nominal)))
		}
		check(t, i, l.at, "skipped", got, l.skip)
		if (d.Paused != "") != l.paused {
			t.Errorf("look %d at %s: paused %q, want paused %v", i, l.at, d.Paused, l.paused)
		}
		wake := ""
		if !d.Wake.IsZero() {
			wake = hm(d.Wake)
		}
		if wake != l.wake {
			t.Errorf("look %d at %s: wake at %q, want %q", i, l.at, wake, l.wake)
		}
		st = d.State
	}
}

func check(t *testing.T, i int, at, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("look %d at %s: %s %q, want %q", i, at, what, got, want)
	}
}

// done marks the run of nominal time n ended with status s.
func done(n string, s weft.Status) map[string]weft.Status { return map[string]weft.Status{n: s} }

// everyMinute is the calendar of most scenarios.
var everyMinute = Spec{Every: []Interval{{Every: time.Minute}}}

// TestStep: every overlap policy with a run that outlives the interval,
// catching up inside and outside the window, pausing, the run limit,
// triggers, backfills, jitter and a clock that jumps back.
func TestStep(t *testing.T) {
	t.Parallel()
	completed, failed, cancelled := weft.StatusCompleted, weft.StatusFailed, weft.StatusCancelled
	scenarios := []scenario{
		{name: "skip", spec: everyMinute, looks: []look{
			{at: "00:00:30", wake: "00:01"},
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:02", skip: []string{"overlap 00:02"}, wake: "00:03"},
			{at: "00:03", ended: done("00:01", completed), start: []string{"00:03"}, wake: "00:04"},
		}},
		{name: "buffer one", spec: everyMinute, policy: Policy{Overlap: OverlapBufferOne}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:02", wake: "00:02:05"}, // buffered; a run check is due
			{at: "00:02:05", wake: "00:02:10"},
			{at: "00:03", skip: []string{"buffer_full 00:03"}, wake: "00:03:05"},
			{at: "00:03:30", ended: done("00:01", completed), start: []string{"00:02"}, wake: "00:04"},
		}},
		{name: "buffer all", spec: everyMinute, policy: Policy{Overlap: OverlapBufferAll}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:03", wake: "00:03:05"}, // 00:02 and 00:03 wait
			{at: "00:03:30", ended: done("00:01", completed), start: []string{"00:02"}, wake: "00:03:35"},
			{at: "00:03:40", ended: done("00:02", failed), start: []string{"00:03"}, wake: "00:04"},
		}},
		{name: "cancel other", spec: everyMinute, policy: Policy{Overlap: OverlapCancelOther}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:02", cancel: []string{"00:01"}, wake: "00:02:05"},
			{at: "00:02:10", wake: "00:02:15"}, // asked once; still going
			{at: "00:03", skip: []string{"replaced 00:02"}, wake: "00:03:05"},
			{at: "00:03:10", ended: done("00:01", cancelled), start: []string{"00:03"}, wake: "00:04"},
		}},
		{name: "allow all", spec: everyMinute, policy: Policy{Overlap: OverlapAllowAll}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:02", start: []string{"00:02"}, wake: "00:03"},
		}},
		{name: "catch up inside the window runs each missed fire", spec: everyMinute,
			policy: Policy{Overlap: OverlapAllowAll, CatchUpWindow: 10 * time.Minute}, looks: []look{
				{at: "00:05:30", start: []string{"00:01", "00:02", "00:03", "00:04", "00:05"}, wake: "00:06"},
			}},
		{name: "catch up under skip starts one", spec: everyMinute,
			policy: Policy{CatchUpWindow: 10 * time.Minute}, looks: []look{
				{at: "00:05:30", start: []string{"00:01"}, skip: []string{"overlap 00:02..00:05 x4"}, wake: "00:06"},
			}},
		{name: "catch up outside the window records the missed", spec: everyMinute,
			policy: Policy{Overlap: OverlapAllowAll, CatchUpWindow: 2 * time.Minute}, looks: []look{
				{at: "00:05:30", start: []string{"00:04", "00:05"}, skip: []string{"missed 00:01..00:03 x3"}, wake: "00:06"},
			}},
		{name: "a day down with fires every second jumps, and counts what it can",
			spec:   Spec{Every: []Interval{{Every: time.Second}}},
			policy: Policy{CatchUpWindow: 10 * time.Second}, looks: []look{
				{at: "23:59:59", start: []string{"23:59:49"},
					skip: []string{"missed 00:00:01..23:59:48 x1000+", "overlap 23:59:50..23:59:59 x10"}, wake: "00:00"},
			}},
		{name: "pause on failure", spec: everyMinute, policy: Policy{PauseOnFailure: true, Overlap: OverlapBufferOne}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:01:05"},
			{at: "00:02", wake: "00:02:05"}, // 00:02 buffered
			{at: "00:02:30", ended: done("00:01", failed), skip: []string{"paused 00:02"}, paused: true},
			{at: "00:05"}, // paused: nothing, no wake
			{at: "00:06:30", op: unpause, wake: "00:07"}, // unpause checks its own record
			{at: "00:07", start: []string{"00:07"}, wake: "00:07:05"},
		}},
		{name: "max runs", spec: everyMinute, policy: Policy{MaxRuns: 2}, looks: []look{
			{at: "00:01", start: []string{"00:01"}, wake: "00:02"},
			{at: "00:02", ended: done("00:01", completed), start: []string{"00:02"}, wake: "00:03"},
			{at: "00:09", ended: done("00:02", completed)}, // done: no wake
			{at: "00:09:30", op: trigger(""), start: []string{"00:09:30"}, wake: "00:10:30"},
		}},
		{name: "max runs counts the buffered", spec: everyMinute, policy: Policy{MaxRuns: 2, Overlap: OverlapBufferAll, CatchUpWindow: 10 * time.Minute}, looks: []look{
			{at: "00:03", start: []string{"00:01"}, wake: "00:03:05"},
			{at: "00:04", ended: done("00:01", completed), start: []string{"00:02"}, wake: "00:05"},
		}},
		{name: "triggers run while paused; one per second", spec: everyMinute, looks: []look{
			{at: "00:00:10", op: pause, wake: ""},
			{at: "00:00:20.4", op: trigger(""), start: []string{"00:00:20"}, wake: "00:01:20"},
			{at: "00:00:20.9", op: trigger(OverlapAllowAll), skip: []string{"duplicate 00:00:20"}, wake: "00:01:20"},
			{at: "00:00:40", op: trigger(OverlapAllowAll), start: []string{"00:00:40"}, wake: "00:01:40"},
		}},
		{name: "backfill under skip", spec: everyMinute, looks: []look{
			{at: "00:00:10", op: backfill("-23:50", "-23:55", ""), start: []string{"-23:50"},
				skip: []string{"overlap -23:51..-23:55 x5"}, wake: "00:01"},
		}},
		{name: "backfill all", spec: everyMinute, looks: []look{
			{at: "00:00:10", op: backfill("-23:57", "-23:59:30", OverlapAllowAll), start: []string{"-23:57", "-23:58", "-23:59"}, wake: "00:01"},
		}},
		{name: "a clock that jumps back fires nothing twice", spec: everyMinute, policy: Policy{Overlap: OverlapAllowAll, CatchUpWindow: 10 * time.Minute}, looks: []look{
			{at: "00:05", start: []string{"00:01", "00:02", "00:03", "00:04", "00:05"}, wake: "00:06"},
			{at: "00:03", wake: "00:04"}, // the runs settle within a minute
			{at: "00:06", start: []string{"00:06"}, wake: "00:07"},
		}},
		{name: "a run going on is looked at again within RunSettle", spec: Spec{Every: []Interval{{Every: 2 * time.Minute}}}, looks: []look{
			{at: "00:02", start: []string{"00:02"}, wake: "00:03"},
			{at: "00:03", wake: "00:04"},
		}},
		{name: "or at the next fire, when it is due within 1.5 RunSettle", spec: Spec{Every: []Interval{{Every: 90 * time.Second}}}, looks: []look{
			{at: "00:01:30", start: []string{"00:01:30"}, wake: "00:03"},
			{at: "00:03", ended: done("00:01:30", weft.StatusCompleted), start: []string{"00:03"}, wake: "00:04:30"},
		}},
		{name: "jitter delays the fire, not its name", spec: Spec{Every: []Interval{{Every: time.Hour}}, Jitter: 30 * time.Minute}, looks: []look{
			{at: "01:00", wake: hm(clock(t, "01:00").Add(mustJitter(t, "s", clock(t, "01:00"))))},
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.run(t)
		})
	}
}

func mustJitter(t *testing.T, id string, n time.Time) time.Duration {
	cal, err := Compile(Spec{Every: []Interval{{Every: time.Hour}}, Jitter: 30 * time.Minute}, "spec")
	if err != nil {
		t.Fatal(err)
	}
	j := cal.Jitter(id, n)
	if j == 0 {
		t.Fatal("the jitter scenario needs a jitter that is not zero")
	}
	return j
}

func pause(t *testing.T, _ *Calendar, st State, _ time.Time) State {
	st, _ = Pause(st)
	return st
}

func unpause(t *testing.T, cal *Calendar, st State, now time.Time) State {
	t.Helper()
	st, skipped := Unpause(cal, "s", st, now)
	if len(skipped) != 1 || skipped[0].Reason != SkipPaused || skipped[0].Count != 4 {
		t.Errorf("Unpause skipped %+v, want the four fires of the pause", skipped)
	}
	return st
}

func trigger(o Overlap) func(t *testing.T, cal *Calendar, st State, now time.Time) State {
	return func(t *testing.T, _ *Calendar, st State, now time.Time) State {
		st, err := Trigger(st, now, o)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

func backfill(from, to string, o Overlap) func(t *testing.T, cal *Calendar, st State, now time.Time) State {
	return func(t *testing.T, cal *Calendar, st State, now time.Time) State {
		st, _, err := AddBackfill(cal, st, clock(t, from), clock(t, to), now, o)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}
