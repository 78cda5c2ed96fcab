package schedule

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	// The zone database goes into every binary that schedules, so that a
	// minimal container without /usr/share/zoneinfo names zones as a full
	// system does.
	_ "time/tzdata"
)

// Spec says when a schedule fires: at every time one of its cron
// expressions or intervals names (their union), in TimeZone, from Start
// to End, each fire delayed by up to Jitter.
type Spec struct {
	// Cron lists cron expressions: five fields (minute, hour, day of
	// month, month, day of week), or six with seconds first, or a
	// descriptor (@yearly, @monthly, @weekly, @daily, @hourly).
	Cron []string
	// Every lists intervals.
	Every []Interval
	// TimeZone is an IANA zone name (Europe/Berlin) that the cron
	// expressions read their fields in; empty means UTC.
	TimeZone string
	// Start and End bound the fires (both included); zero means none.
	Start, End time.Time
	// Jitter delays each fire by a duration from [0, Jitter), the same on
	// every node for a given schedule and fire (see Calendar.Jitter).
	Jitter time.Duration
}

// Interval fires every Every, Offset after each multiple of Every since
// the Unix epoch: every 15m with offset 2m fires at :02, :17, :32 and :47,
// whatever the time zone and whenever the schedule was made.
type Interval struct {
	Every  time.Duration
	Offset time.Duration
}

// The bounds of a Spec.
const (
	// MaxSpecs bounds the cron expressions and intervals of one schedule.
	MaxSpecs = 100
	// MaxJitter bounds Spec.Jitter.
	MaxJitter = 24 * time.Hour
	// searchYears bounds the search for a cron expression's next fire:
	// 29 February is at most eight years from the last (2096 to 2104).
	searchYears = 9
)

// Calendar is a compiled Spec: it answers when the schedule fires.
type Calendar struct {
	crons      []cronSpec
	every      []Interval
	loc        *time.Location
	start, end time.Time
	jitter     time.Duration
}

// Compile checks s and compiles it. Its problems come back together as an
// *weft.ScheduleError, each with the path of the field at fault (spec.cron[1],
// spec.time_zone); prefix names the spec's own path ("spec").
func Compile(s Spec, prefix string) (*Calendar, error) {
	var errs problems
	at := func(field string) string { return prefix + "." + field }
	c := &Calendar{start: s.Start, end: s.End, jitter: s.Jitter, loc: time.UTC}
	if len(s.Cron)+len(s.Every) == 0 {
		errs.add(prefix, "names no cron expression and no interval: the schedule would never fire")
	}
	if n := len(s.Cron) + len(s.Every); n > MaxSpecs {
		errs.add(prefix, "has %d cron expressions and intervals, more than %d", n, MaxSpecs)
	}
	if s.TimeZone != "" {
		loc, err := loadZone(s.TimeZone)
		if err != nil {
			errs.add(at("time_zone"), "%v", err)
		} else {
			c.loc = loc
		}
	}
	for i, expr := range s.Cron {
		cs, err := parseCron(expr)
		if err == nil && !cs.canFire() {
			err = fmt.Errorf("%q names no day that exists (such as 30 February): it would never fire", expr)
		}
		if err != nil {
			errs.add(fmt.Sprintf("%s[%d]", at("cron"), i), "%v", err)
			continue
		}
		c.crons = append(c.crons, cs)
	}
	for i, iv := range s.Every {
		path := fmt.Sprintf("%s[%d]", at("every"), i)
		switch {
		case iv.Every < time.Second:
			errs.add(path+".every", "must be at least 1s, got %s", iv.Every)
		case iv.Every%time.Second != 0:
			errs.add(path+".every", "must be a whole number of seconds, got %s", iv.Every)
		case iv.Offset < 0 || iv.Offset >= iv.Every:
			errs.add(path+".offset", "must be from 0s up to the interval (%s), got %s", iv.Every, iv.Offset)
		case iv.Offset%time.Second != 0:
			errs.add(path+".offset", "must be a whole number of seconds, got %s", iv.Offset)
		default:
			c.every = append(c.every, iv)
		}
	}
	if !s.Start.IsZero() && !s.End.IsZero() && !s.End.After(s.Start) {
		errs.add(at("end"), "must be after start (%s), got %s", s.Start.Format(time.RFC3339), s.End.Format(time.RFC3339))
	}
	if s.Jitter < 0 || s.Jitter > MaxJitter {
		errs.add(at("jitter"), "must be from 0s to %s, got %s", MaxJitter, s.Jitter)
	}
	if len(errs) > 0 {
		return nil, errs.err()
	}
	return c, nil
}

// loadZone loads an IANA zone, refusing the names that would mean a
// different zone on each node.
func loadZone(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, fmt.Errorf("%q is each node's own zone, which may differ between nodes: name an IANA zone such as Europe/Berlin, or UTC", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name (such as Europe/Berlin or America/New_York)", name)
	}
	return loc, nil
}

// Location is the zone the calendar reads its cron expressions in.
func (c *Calendar) Location() *time.Location { return c.loc }

// Next returns the first nominal fire time after after, or false when the
// schedule never fires again (past its end, or its expressions name no
// later time within the search bound).
func (c *Calendar) Next(after time.Time) (time.Time, bool) {
	if !c.start.IsZero() && after.Before(c.start) {
		after = c.start.Add(-time.Nanosecond)
	}
	var best time.Time
	for _, cs := range c.crons {
		if t, ok := cs.next(after, c.loc); ok && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	for _, iv := range c.every {
		if t := iv.next(after); best.IsZero() || t.Before(best) {
			best = t
		}
	}
	if best.IsZero() || !c.end.IsZero() && best.After(c.end) {
		return time.Time{}, false
	}
	return best, true
}

// Upcoming returns up to n nominal fire times after after, in order.
func (c *Calendar) Upcoming(after time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		t, ok := c.Next(after)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}

// Jitter is the delay of the fire at nominal of the schedule id: a
// duration from [0, Spec.Jitter) drawn from a hash of both, so that every
// node computes the same, and the fires of many schedules with one
// calendar spread out.
func (c *Calendar) Jitter(id string, nominal time.Time) time.Duration {
	if c.jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	// Writes to a hash do not fail.
	h.Write([]byte(id))
	h.Write([]byte{0})
	h.Write([]byte(nominal.UTC().Format(time.RFC3339Nano)))
	return time.Duration(h.Sum64() % uint64(c.jitter))
}

// Due is when the fire at nominal of schedule id is due: nominal and its
// jitter.
func (c *Calendar) Due(id string, nominal time.Time) time.Time {
	return nominal.Add(c.Jitter(id, nominal))
}

// next returns the first time after after that the interval names.
func (iv Interval) next(after time.Time) time.Time {
	every, offset := int64(iv.Every/time.Second), int64(iv.Offset/time.Second)
	// The first whole second after after (Unix rounds down).
	lo := after.Unix() + 1
	k := ceilDiv(lo-offset, every)
	return time.Unix(k*every+offset, 0).UTC()
}

// ceilDiv is a/b rounded up, for b > 0.
func ceilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// InstanceID is the instance id of the run of schedule id at nominal:
// the id, "@", and the nominal time in UTC to the second
// (nightly@2026-03-31T07:00:00Z). Every node derives the same id for a
// fire, so a fire starts one instance however many nodes take it, and an
// operator finds the run of a given time by its id.
func InstanceID(id string, nominal time.Time) string {
	return id + "@" + nominal.UTC().Format(time.RFC3339)
}

// Nominal reads the nominal time back from an instance id InstanceID made
// for schedule id; false when the instance is not one of its runs.
func Nominal(id, instanceID string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(instanceID, id+"@")
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, rest)
	return t, err == nil
}
