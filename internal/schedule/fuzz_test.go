package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// FuzzCompile: no cron expression, zone or interval crashes the
// compiler; one it refuses is an *Error matching weft.ErrInvalid; and a
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
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) || len(e.Problems) == 0 {
				t.Fatalf("Compile(%q, %q) = %v, want an *Error", cron, zone, err)
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
