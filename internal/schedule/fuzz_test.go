package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// FuzzCompile: no cron expression, zone or interval crashes the
// compiler; one it refuses is an *weft.ScheduleError matching weft.ErrInvalid; and a
// calendar it accepts answers fires that move forward, each after the
// time asked about.
func FuzzCompile(f *testing.F) {
	for _, seed := range []struct {
		cron, zone    string
		every, offset int64
	}{
		{"0 9 * * MON-FRI", "Europe/Berlin", 0, 0},
		{"30 2 * * *", "America/New_York", 0, 0},
		{"*/15 2,3 * * *", "Europe/Berlin", 900, 120},
		{"0 0 29 2 *", "", 0, 0},
		{"0 0 30 2 *", "", 0, 0},
		{"@daily", "Australia/Lord_Howe", 0, 0},
		{"*/10 * * * * *", "UTC", 1, 0},
		{"TZ=Europe/Berlin", "", 0, 0},
		{"0 0 13 * FRI", "Asia/Kathmandu", 3600, 1800},
		{"59 23 31 12 SUN", "Pacific/Apia", 86400, 3599},
		{"1-59/0 * * * *", "Local", 0, 0},
		{"? ? ? ? ?", "Antarctica/Troll", 0, 0},
	} {
		f.Add(seed.cron, seed.zone, seed.every, seed.offset)
	}
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, cron, zone string, every, offset int64) {
		spec := Spec{Cron: []string{cron}, TimeZone: zone}
		if every != 0 {
			spec.Every = []Interval{{Every: time.Duration(every) * time.Second, Offset: time.Duration(offset) * time.Second}}
		}
		cal, err := Compile(spec, "spec")
		if err != nil {
			var e *weft.ScheduleError
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) || len(e.Problems) == 0 {
				t.Fatalf("Compile(%q, %q) = %v, want an *weft.ScheduleError", cron, zone, err)
			}
			return
		}
		after := from
		for range 5 {
			next, ok := cal.Next(after)
			if !ok {
				return
			}
			if !next.After(after) {
				t.Fatalf("Next(%s) = %s, not after it (%q in %q)", after, next, cron, zone)
			}
			after = next
		}
	})
}

// FuzzParseDocument: no document crashes the parser; a refused one is an
// *weft.ScheduleError with problems; an accepted one has a canonical form that parses
// to the same canonical form.
func FuzzParseDocument(f *testing.F) {
	f.Add([]byte(nightly))
	f.Add([]byte(`{"id": "a", "workflow": "w", "spec": {"cron": "@daily"}}`))
	f.Add([]byte("id: a\nworkflow: w\nspec: {every: [1m, {every: 1h, offset: 5m}]}\ninput: {t: '${ schedule.time }'}\n"))
	f.Add([]byte("id: &a a\nworkflow: *a\nspec: {cron: [*a]}\n"))
	f.Add([]byte("id: a\n---\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDocument(data)
		if err != nil {
			var e *weft.ScheduleError
			if !errors.As(err, &e) || len(e.Problems) == 0 {
				t.Fatalf("ParseDocument = %v, want an *weft.ScheduleError with problems", err)
			}
			return
		}
		canon, err := d.Canonical()
		if err != nil {
			t.Fatalf("Canonical of an accepted document: %v", err)
		}
		again, err := ParseDocument(canon)
		if err != nil {
			t.Fatalf("the canonical form %s does not parse: %v", canon, err)
		}
		if c2, err := again.Canonical(); err != nil || string(c2) != string(canon) {
			t.Fatalf("canonical forms differ: %s and %s (%v)", canon, c2, err)
		}
	})
}
