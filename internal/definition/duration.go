package definition

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxDays keeps days × 24h within time.Duration.
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// ParseDuration parses a duration as time.ParseDuration does ("500ms",
// "30s", "1h30m"), and also accepts a leading whole number of days: "7d",
// "1d12h". A day is always 24 hours.
func ParseDuration(s string) (time.Duration, error) {
	invalid := func() error {
		return fmt.Errorf("invalid duration %q: want a number and a unit, e.g. 500ms, 30s, 72h or 7d", s)
	}
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || days < 0 || days > maxDays {
			return 0, invalid()
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 || d+r < d {
				return 0, invalid()
			}
			d += r
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, invalid()
	}
	return d, nil
}

// durationSyntax is the syntax ParseDuration reads, without its range: a
// string that matches it and does not parse is too long.
var durationSyntax = regexp.MustCompile(`^(?:[0-9]+d)?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))*$`)

// maxMillis is the longest duration in whole milliseconds.
const maxMillis = int64(1<<63-1) / int64(time.Millisecond)

// tooLong is the reason a computed duration beyond time.Duration's range
// is refused.
const tooLong = "beyond the longest duration (about 106751d, 292 years)"

// computedDuration reads a computed duration's result: a string as
// ParseDuration reads a literal, with an optional sign ("-2d": a time
// already past); a number as seconds, rounded to the millisecond; a
// time.Duration (expr's duration()) as itself.
func computedDuration(x any) (time.Duration, error) {
	switch x := x.(type) {
	case string:
		return signedDuration(x)
	case time.Duration:
		return x, nil
	}
	rv := reflect.ValueOf(x)
	var secs float64
	switch {
	case !rv.IsValid():
		return 0, fmt.Errorf("got null, want a duration: a string such as 90s or 7d, or a number of seconds")
	case rv.CanInt():
		secs = float64(rv.Int())
	case rv.CanUint():
		secs = float64(rv.Uint())
	case rv.CanFloat():
		secs = rv.Float()
	default:
		return 0, fmt.Errorf("got %s, want a duration: a string such as 90s or 7d, or a number of seconds", typeName(x))
	}
	ms := math.Round(secs * 1000)
	if math.IsNaN(ms) || math.Abs(ms) > float64(maxMillis) {
		return 0, fmt.Errorf("%s seconds is %s", formatFloat(secs), tooLong)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// signedDuration is ParseDuration with an optional leading sign.
func signedDuration(s string) (time.Duration, error) {
	rest, neg := strings.CutPrefix(s, "-")
	if !neg {
		rest = strings.TrimPrefix(s, "+")
	}
	d, err := ParseDuration(rest)
	switch {
	case rest != "" && rest[0] != '-' && rest[0] != '+' && err == nil:
		if neg {
			d = -d
		}
		return d, nil
	case rest != "" && durationSyntax.MatchString(rest):
		return 0, fmt.Errorf("%q is %s", s, tooLong)
	}
	return 0, fmt.Errorf("%q is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds", s)
}

// parseTime parses an absolute time: RFC 3339, whose zone offset (Z or
// ±hh:mm) is required, so that no time depends on the host's zone.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid time %q: want RFC 3339 with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00", s)
	}
	if !writable(t) {
		return time.Time{}, fmt.Errorf("invalid time %q: %s", s, unwritable)
	}
	return t, nil
}

// unwritable is why a time that JSON and RFC 3339 cannot hold is refused.
const unwritable = "in UTC it is outside the years 0000 to 9999 that RFC 3339 can write"

// writable reports whether t is within the years RFC 3339 (and so JSON,
// the history and the stores) can write in UTC: 9999-12-31T23:30:00-01:00
// parses, and is in the year 10000.
func writable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// EvalDuration evaluates a computed duration (a delay's): a string is read
// as a literal duration is ("90s", "7d", "1d12h"), and may be negative
// ("-2d"); a number is seconds, rounded to the millisecond (90, 1.5); a
// duration (expr's duration()) is itself. Errors are *EvalError, naming
// the value as written.
func (v Value) EvalDuration(env Env) (time.Duration, error) {
	x, err := v.Eval(env)
	if err != nil {
		return 0, err
	}
	d, err := computedDuration(x)
	if err != nil {
		return 0, &EvalError{Source: sourceString(v.src), Err: err}
	}
	return d, nil
}

// EvalTimeout is EvalDuration for a timeout, which cannot be negative: 0
// means none. Errors are *EvalError.
func (v Value) EvalTimeout(env Env) (time.Duration, error) {
	d, err := v.EvalDuration(env)
	if err == nil && d < 0 {
		err = &EvalError{Source: sourceString(v.src), Err: fmt.Errorf("%s is negative; want 0 (no timeout) or more", d)}
	}
	return d, err
}

// EvalTime evaluates an absolute time (a delay's until): a string in RFC
// 3339 with a zone offset, or a time (expr's date()). Errors are
// *EvalError.
func (v Value) EvalTime(env Env) (time.Time, error) {
	x, err := v.Eval(env)
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	switch x := x.(type) {
	case string:
		if t, err = time.Parse(time.RFC3339, x); err != nil {
			err = fmt.Errorf("%q is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00", x)
		}
	case time.Time:
		t = x
	default:
		err = fmt.Errorf("got %s, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z", typeName(x))
	}
	if err == nil && !writable(t) {
		err = fmt.Errorf("%s: %s", t.Format(time.RFC3339Nano), unwritable)
	}
	if err != nil {
		return time.Time{}, &EvalError{Source: sourceString(v.src), Err: err}
	}
	return t, nil
}
