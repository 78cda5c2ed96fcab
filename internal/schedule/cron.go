package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser reads five fields, or six with seconds first, and the
// descriptors (@daily …).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit marks a field written as * (or ?) in robfig/cron's bit sets: a
// day of month and a day of week both restricted match either, as in
// cron; with either a star, both must match.
const starBit = 1 << 63

// cronSpec is a parsed cron expression: one bit per allowed value of each
// field. The parsing is robfig/cron's; the search for the next time is
// ours, because its rules for daylight-saving changes are not the ones
// users expect (package doc).
type cronSpec struct {
	second, minute, hour, dom, month, dow uint64
}

// parseCron parses one cron expression. The zone is the schedule's, so an
// expression that names one (TZ=…) is refused, as is @every, which
// intervals say better.
func parseCron(expr string) (cs cronSpec, err error) {
	e := strings.TrimSpace(expr)
	switch {
	case e == "":
		return cs, fmt.Errorf("is empty")
	case strings.HasPrefix(e, "TZ=") || strings.HasPrefix(e, "CRON_TZ="):
		return cs, fmt.Errorf("%q names a time zone: give it as the schedule's time_zone instead", expr)
	case strings.HasPrefix(e, "@every"):
		return cs, fmt.Errorf("%q: write an interval as every (every: 15m) instead", expr)
	}
	// The parser's own errors; a panic on input it did not foresee is one
	// too, not a crashed host.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%q cannot be parsed", expr)
		}
	}()
	s, err := cronParser.Parse(e)
	if err != nil {
		return cs, fmt.Errorf("%q: %v", expr, err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return cs, fmt.Errorf("%q is not a calendar expression", expr)
	}
	return cronSpec{second: spec.Second, minute: spec.Minute, hour: spec.Hour, dom: spec.Dom, month: spec.Month, dow: spec.Dow}, nil
}

// has reports whether bit v of set is on.
func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

// dayMatches reports whether the date matches the month, day-of-month and
// day-of-week fields.
func (cs cronSpec) dayMatches(date time.Time) bool {
	if !has(cs.month, int(date.Month())) {
		return false
	}
	dom, dow := has(cs.dom, date.Day()), has(cs.dow, int(date.Weekday()))
	if cs.dom&starBit != 0 || cs.dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// canFire reports whether some date matches: 31 April and 30 February
// never come.
func (cs cronSpec) canFire() bool {
	// Eight years from a leap year's first day hold every date of the
	// calendar on every weekday.
	d := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 366*8; i++ {
		if cs.dayMatches(d.AddDate(0, 0, i)) {
			return true
		}
	}
	return false
}

// last returns the highest value set in set among [0, max].
func last(set uint64, max int) int {
	for v := max; v >= 0; v-- {
		if has(set, v) {
			return v
		}
	}
	return 0
}

// next returns the first time after after that the expression names, read
// in loc.
func (cs cronSpec) next(after time.Time, loc *time.Location) (time.Time, bool) {
	y, m, d := after.In(loc).Date()
	// Dates are walked in UTC, where every day has 24 hours; each time of
	// a matching date is then resolved in loc.
	first := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	lastH, lastM, lastS := last(cs.hour, 23), last(cs.minute, 59), last(cs.second, 59)
	for i := 0; i < searchYears*366; i++ {
		date := first.AddDate(0, 0, i)
		if !cs.dayMatches(date) {
			continue
		}
		// Resolved times grow with the wall clock (a gap's times all
		// resolve to its end, a repeat's to its first pass), so a day,
		// an hour or a minute whose last time is not after after has no
		// time that is.
		if !resolve(loc, date, lastH, lastM, lastS).After(after) {
			continue
		}
		for h := 0; h < 24; h++ {
			if !has(cs.hour, h) || !resolve(loc, date, h, lastM, lastS).After(after) {
				continue
			}
			for mi := 0; mi < 60; mi++ {
				if !has(cs.minute, mi) || !resolve(loc, date, h, mi, lastS).After(after) {
					continue
				}
				for s := 0; s < 60; s++ {
					if !has(cs.second, s) {
						continue
					}
					if t := resolve(loc, date, h, mi, s); t.After(after) {
						return t, true
					}
				}
			}
		}
	}
	return time.Time{}, false
}

// resolve returns the instant of a wall-clock time on a date in loc. A
// time that a daylight-saving change skips resolves to the first instant
// after the gap; a time that a change repeats resolves to its first
// occurrence. (time.Date guarantees neither.)
func resolve(loc *time.Location, date time.Time, h, mi, s int) time.Time {
	y, m, d := date.Date()
	wall := time.Date(y, m, d, h, mi, s, 0, time.UTC)
	// The offsets in force a day and a half either side; zones do not
	// change twice within three days.
	before, after := offset(wall.Add(-36*time.Hour), loc), offset(wall.Add(36*time.Hour), loc)
	early, late := wall.Add(-before), wall.Add(-after)
	if early.After(late) {
		early, late = late, early
	}
	if before == after {
		return early
	}
	is := func(t time.Time) bool {
		l := t.In(loc)
		ly, lm, ld := l.Date()
		return ly == y && lm == m && ld == d && l.Hour() == h && l.Minute() == mi && l.Second() == s
	}
	switch {
	case is(early):
		return early
	case is(late):
		return late
	}
	// In the gap: the first instant after it is where the zone in force
	// at the later candidate begins.
	if start, _ := late.In(loc).ZoneBounds(); !start.IsZero() {
		return start
	}
	return late
}

// offset is loc's offset from UTC at the instant t (t's fields read as
// UTC).
func offset(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}
