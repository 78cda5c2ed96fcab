package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// at parses an RFC 3339 time for the tables.
func at(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("bad time %q in the table: %v", s, err)
	}
	return v
}

// TestNext: the next fire of a calendar after a time, with the calendar
// rules of the package doc: daylight-saving gaps fire once at the end of
// the gap, repeats once at their first pass, month ends and leap days
// only when they exist.
func TestNext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		spec  Spec
		after string
		want  []string // the next fires in order (TestUpcoming checks an end)
	}{
		{"weekdays at nine in Berlin, over a weekend and the spring change",
			Spec{Cron: []string{"0 9 * * MON-FRI"}, TimeZone: "Europe/Berlin"}, "2026-03-27T08:00:00Z",
			[]string{"2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"}},
		{"Berlin spring gap: 02:30 fires once at 03:00 CEST",
			Spec{Cron: []string{"30 2 * * *"}, TimeZone: "Europe/Berlin"}, "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Berlin spring gap: every quarter hour of 02:xx and 03:00 fire once at 03:00, then 03:15",
			Spec{Cron: []string{"*/15 2,3 * * *"}, TimeZone: "Europe/Berlin"}, "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-29T01:15:00Z", "2026-03-29T01:30:00Z", "2026-03-29T01:45:00Z", "2026-03-30T00:00:00Z"}},
		{"Berlin autumn repeat: 02:30 fires once, at its first pass (CEST)",
			Spec{Cron: []string{"30 2 * * *"}, TimeZone: "Europe/Berlin"}, "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Berlin autumn repeat: from inside the second pass, the repeated time does not fire again",
			Spec{Cron: []string{"30 2 * * *"}, TimeZone: "Europe/Berlin"}, "2026-10-25T01:00:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
		{"Berlin autumn repeat: hourly fires each hour of the instant line once",
			Spec{Cron: []string{"0 * * * *"}, TimeZone: "Europe/Berlin"}, "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T02:00:00Z", "2026-10-25T03:00:00Z"}},
		{"New York spring gap: 02:30 fires at 03:00 EDT",
			Spec{Cron: []string{"30 2 * * *"}, TimeZone: "America/New_York"}, "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"New York autumn repeat: 01:30 fires once, EDT",
			Spec{Cron: []string{"30 1 * * *"}, TimeZone: "America/New_York"}, "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"day 31 only in months that have one",
			Spec{Cron: []string{"0 0 31 * *"}}, "2026-04-01T00:00:00Z",
			[]string{"2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"}},
		{"29 February only in leap years",
			Spec{Cron: []string{"0 12 29 2 *"}}, "2026-03-01T00:00:00Z",
			[]string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		{"@daily is midnight in the zone",
			Spec{Cron: []string{"@daily"}, TimeZone: "Europe/Berlin"}, "2026-06-01T12:00:00Z",
			[]string{"2026-06-01T22:00:00Z"}},
		{"@hourly", Spec{Cron: []string{"@hourly"}}, "2026-06-01T12:00:00Z",
			[]string{"2026-06-01T13:00:00Z", "2026-06-01T14:00:00Z"}},
		{"six fields: seconds first", Spec{Cron: []string{"*/10 * * * * *"}}, "2026-06-01T00:00:05Z",
			[]string{"2026-06-01T00:00:10Z", "2026-06-01T00:00:20Z"}},
		{"day of month and day of week both restricted: either matches",
			Spec{Cron: []string{"0 0 13 * FRI"}}, "2026-02-10T00:00:00Z",
			[]string{"2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z"}},
		{"interval with a phase", Spec{Every: []Interval{{Every: 15 * time.Minute, Offset: 2 * time.Minute}}}, "2026-06-01T10:05:00Z",
			[]string{"2026-06-01T10:17:00Z", "2026-06-01T10:32:00Z"}},
		{"interval: a fire exactly at after is not after it", Spec{Every: []Interval{{Every: 15 * time.Minute, Offset: 2 * time.Minute}}}, "2026-06-01T10:17:00Z",
			[]string{"2026-06-01T10:32:00Z"}},
		{"interval: sub-second after", Spec{Every: []Interval{{Every: time.Second}}}, "2026-06-01T10:17:00.5Z",
			[]string{"2026-06-01T10:17:01Z"}},
		{"union of a cron expression and an interval",
			Spec{Cron: []string{"0 9 * * *"}, Every: []Interval{{Every: 6 * time.Hour, Offset: time.Hour}}}, "2026-06-01T06:00:00Z",
			[]string{"2026-06-01T07:00:00Z", "2026-06-01T09:00:00Z", "2026-06-01T13:00:00Z"}},
		{"a time in both is one fire",
			Spec{Cron: []string{"0 * * * *"}, Every: []Interval{{Every: 30 * time.Minute}}}, "2026-06-01T06:10:00Z",
			[]string{"2026-06-01T06:30:00Z", "2026-06-01T07:00:00Z", "2026-06-01T07:30:00Z"}},
		{"start: the first fire is the first at or after it",
			Spec{Every: []Interval{{Every: time.Hour}}, Start: time.Date(2026, 6, 1, 3, 0, 0, 0, time.UTC)}, "2026-05-01T00:00:00Z",
			[]string{"2026-06-01T03:00:00Z", "2026-06-01T04:00:00Z"}},
		{"end: included, nothing after",
			Spec{Every: []Interval{{Every: time.Hour}}, End: time.Date(2026, 6, 1, 3, 0, 0, 0, time.UTC)}, "2026-06-01T01:30:00Z",
			[]string{"2026-06-01T02:00:00Z", "2026-06-01T03:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cal, err := Compile(tt.spec, "spec")
			if err != nil {
				t.Fatal(err)
			}
			after := at(t, tt.after)
			var got []string
			for range tt.want {
				next, ok := cal.Next(after)
				if !ok {
					break
				}
				got = append(got, next.UTC().Format(time.RFC3339))
				after = next
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("fires after %s:\n got %v\nwant %v", tt.after, got, tt.want)
			}
		})
	}
}

// TestCompileRefuses: each malformed spec is refused with the path of the
// field at fault and a message that says what is wrong.
func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		spec      Spec
		path, msg string
	}{
		{"nothing", Spec{}, "spec", "would never fire"},
		{"malformed cron", Spec{Cron: []string{"a b c"}}, "spec.cron[0]", "expected 5 to 6 fields"},
		{"a field out of range", Spec{Cron: []string{"0 0 * * *", "61 * * * *"}}, "spec.cron[1]", "above maximum"},
		{"a day that never comes", Spec{Cron: []string{"0 0 30 2 *"}}, "spec.cron[0]", "never fire"},
		{"a zone inside the expression", Spec{Cron: []string{"TZ=Europe/Berlin 0 9 * * *"}}, "spec.cron[0]", "time_zone"},
		{"a zone prefix without a space", Spec{Cron: []string{"TZ=Europe/Berlin"}}, "spec.cron[0]", "time_zone"},
		{"@every", Spec{Cron: []string{"@every 5m"}}, "spec.cron[0]", "every: 15m"},
		{"empty expression", Spec{Cron: []string{"  "}}, "spec.cron[0]", "empty"},
		{"unknown descriptor", Spec{Cron: []string{"@fortnightly"}}, "spec.cron[0]", "unrecognized descriptor"},
		{"unknown zone", Spec{Cron: []string{"@daily"}, TimeZone: "Mars/Olympus_Mons"}, "spec.time_zone", "not an IANA time zone"},
		{"the node's zone", Spec{Cron: []string{"@daily"}, TimeZone: "Local"}, "spec.time_zone", "differ between nodes"},
		{"interval under a second", Spec{Every: []Interval{{Every: 500 * time.Millisecond}}}, "spec.every[0].every", "at least 1s"},
		{"interval not whole seconds", Spec{Every: []Interval{{Every: 1500 * time.Millisecond}}}, "spec.every[0].every", "whole number of seconds"},
		{"offset past the interval", Spec{Every: []Interval{{Every: time.Minute, Offset: time.Minute}}}, "spec.every[0].offset", "up to the interval"},
		{"negative offset", Spec{Every: []Interval{{Every: time.Minute, Offset: -time.Second}}}, "spec.every[0].offset", "up to the interval"},
		{"end before start", Spec{Cron: []string{"@daily"}, Start: time.Date(2026, 6, 2, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)}, "spec.end", "after start"},
		{"negative jitter", Spec{Cron: []string{"@daily"}, Jitter: -time.Second}, "spec.jitter", "from 0s"},
		{"jitter over a day", Spec{Cron: []string{"@daily"}, Jitter: 25 * time.Hour}, "spec.jitter", "from 0s to 24h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.spec, "spec")
			var e *weft.ScheduleError
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) {
				t.Fatalf("Compile = %v, want an *weft.ScheduleError matching weft.ErrInvalid", err)
			}
			for _, p := range e.Problems {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) {
					return
				}
			}
			t.Errorf("problems %+v, want one at %s containing %q", e.Problems, tt.path, tt.msg)
		})
	}
}

// TestCompileListsEveryProblem: one answer names every problem.
func TestCompileListsEveryProblem(t *testing.T) {
	t.Parallel()
	_, err := Compile(Spec{Cron: []string{"x", "@every 1m"}, TimeZone: "Nowhere/Else", Jitter: -1}, "spec")
	var e *weft.ScheduleError
	if !errors.As(err, &e) || len(e.Problems) != 4 {
		t.Fatalf("Compile = %v, want four problems", err)
	}
}

// TestJitter: a fire's jitter is in [0, jitter), the same on every call
// (every node), and spreads the fires of one calendar.
func TestJitter(t *testing.T) {
	t.Parallel()
	const jitter = 30 * time.Second
	cal, err := Compile(Spec{Every: []Interval{{Every: time.Minute}}, Jitter: jitter}, "spec")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	nominal := at(t, "2026-06-01T00:00:00Z")
	for i := range 1000 {
		n := nominal.Add(time.Duration(i) * time.Minute)
		j := cal.Jitter("nightly", n)
		if j < 0 || j >= jitter {
			t.Fatalf("jitter of %s is %s, outside [0, %s)", n, j, jitter)
		}
		if again := cal.Jitter("nightly", n); again != j {
			t.Fatalf("jitter of %s is %s then %s", n, j, again)
		}
		if cal.Due("nightly", n) != n.Add(j) {
			t.Fatalf("Due is not nominal + jitter")
		}
		seen[j.Truncate(time.Second)] = true
	}
	if len(seen) < 20 {
		t.Errorf("1000 fires' jitter fell in %d distinct seconds of 30", len(seen))
	}
	if a, b := cal.Jitter("a", nominal), cal.Jitter("b", nominal); a == b {
		t.Errorf("two schedules firing together have the same jitter %s", a)
	}
	none, err := Compile(Spec{Every: []Interval{{Every: time.Minute}}}, "spec")
	if err != nil || none.Jitter("x", nominal) != 0 {
		t.Errorf("no jitter configured, got %v", none.Jitter("x", nominal))
	}
}

// TestInstanceID: a run's id names its schedule and nominal time, and
// reads back.
func TestInstanceID(t *testing.T) {
	t.Parallel()
	n := time.Date(2026, 3, 31, 9, 0, 0, 0, time.FixedZone("CEST", 2*3600))
	id := InstanceID("nightly", n)
	if id != "nightly@2026-03-31T07:00:00Z" {
		t.Fatalf("InstanceID = %q", id)
	}
	if got, ok := Nominal("nightly", id); !ok || !got.Equal(n) {
		t.Errorf("Nominal(%q) = %v, %v", id, got, ok)
	}
	if _, ok := Nominal("night", id); ok {
		t.Errorf("Nominal took another schedule's run")
	}
	if _, ok := Nominal("nightly", "nightly@yesterday"); ok {
		t.Errorf("Nominal read a malformed time")
	}
}

// TestUpcoming lists the next fires.
func TestUpcoming(t *testing.T) {
	t.Parallel()
	cal, err := Compile(Spec{Cron: []string{"0 9 * * *"}, End: at(t, "2026-06-03T09:00:00Z")}, "spec")
	if err != nil {
		t.Fatal(err)
	}
	got := cal.Upcoming(at(t, "2026-06-01T00:00:00Z"), 10)
	if len(got) != 3 || !got[2].Equal(at(t, "2026-06-03T09:00:00Z")) {
		t.Errorf("Upcoming = %v, want the three fires up to the end", got)
	}
}
