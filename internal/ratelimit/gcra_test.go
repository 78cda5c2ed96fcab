package ratelimit_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/internal/ratelimit"
)

// epoch is the scripts' time zero: times in them are offsets from it.
var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// TestScripts runs each testdata/*.txt script: reservations on a few keys
// at given times, each printing its decision and every key's TAT after
// it. testdata/README.md describes the format; `go test
// ./internal/ratelimit -rewrite` writes what the core does now as the
// expected outputs.
func TestScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			s := &script{
				tats: map[string]time.Time{},
				lims: map[string]ratelimit.Limit{},
				l:    ratelimit.Limit{Count: 10, Per: time.Second},
			}
			datadriven.RunTest(t, path, s.run)
		})
	}
}

// script is a few keys driven through the directives of a file:
//
//	params [limit=N/PER] [burst=N] [max_wait=D]         the defaults of later calls
//	reserve [KEY] at=D [limit=N/PER] [burst=N] [max_wait=D]
//	backlog [KEY] at=D
//
// KEY defaults to "k". A reservation prints its decision and the TATs; a
// backlog, the KeyState.Backlog of the key's state (its TAT, and the
// terms of its last granted event) at the time.
type script struct {
	tats    map[string]time.Time       // the keys' states; absent: never reserved
	lims    map[string]ratelimit.Limit // the terms of each key's last granted event
	l       ratelimit.Limit
	maxWait time.Duration
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	key, l, maxWait := "k", s.l, s.maxWait
	var at time.Time
	for i, arg := range d.CmdArgs {
		if len(arg.Vals) == 0 {
			if (d.Cmd != "reserve" && d.Cmd != "backlog") || i != 0 {
				d.Fatalf(t, "%s: unexpected word %q", d.Cmd, arg.Key)
			}
			key = arg.Key
			continue
		}
		arg.ExpectNumVals(t, 1)
		if d.Cmd == "backlog" && arg.Key != "at" {
			d.Fatalf(t, "backlog: %s=: only KEY and at= apply", arg.Key)
		}
		v := arg.Vals[0]
		switch arg.Key {
		case "at":
			at = epoch.Add(dur(t, d, v))
		case "limit":
			count, per, ok := strings.Cut(v, "/")
			n, err := strconv.Atoi(count)
			if !ok || err != nil {
				d.Fatalf(t, "limit=%s: want N/PER", v)
			}
			l.Count, l.Per = n, dur(t, d, per)
		case "burst":
			arg.Scan(t, 0, &l.Burst)
		case "max_wait":
			maxWait = dur(t, d, v)
		default:
			d.Fatalf(t, "%s: unknown option %q", d.Cmd, arg.Key)
		}
	}
	switch d.Cmd {
	case "params":
		s.l, s.maxWait = l, maxWait
		return fmt.Sprintf("limit=%d/%s burst=%d max_wait=%s\n", l.Count, l.Per, l.Burst, maxWait)
	case "backlog":
		if at.IsZero() {
			d.Fatalf(t, "backlog: at= is missing")
		}
		st := ratelimit.KeyState{Key: key, Limit: s.lims[key], TAT: s.tats[key]}
		ahead, next := st.Backlog(at)
		return fmt.Sprintf("ahead=%d next=%s\n", ahead, offset(next))
	case "reserve":
		if at.IsZero() {
			d.Fatalf(t, "reserve: at= is missing")
		}
		tat := s.tats[key]
		dec, err := l.Reserve(tat, at, maxWait)
		var out strings.Builder
		switch {
		case err != nil:
			if !errors.Is(err, ratelimit.ErrLimit) {
				t.Errorf("%s: error %v does not match ErrLimit", d.Pos, err)
			}
			fmt.Fprintf(&out, "error: %v\n", err)
		case dec.OK:
			fmt.Fprintf(&out, "granted wait=%s (at %s)\n", dec.Wait, offset(at.Add(dec.Wait)))
			s.tats[key], s.lims[key] = dec.TAT, l
		default:
			fmt.Fprintf(&out, "refused wait=%s\n", dec.Wait)
		}
		if !dec.OK && !dec.TAT.Equal(tat) {
			t.Errorf("%s: a refusal returned TAT %s, not the one given (%s)", d.Pos, offset(dec.TAT), offset(tat))
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range s.tats {
				if !yield(k) {
					return
				}
			}
		})
		var tats []string
		for _, k := range keys {
			tats = append(tats, k+"="+offset(s.tats[k]))
		}
		fmt.Fprintf(&out, "tat: %s\n", strings.Join(tats, " "))
		return out.String()
	}
	d.Fatalf(t, "unknown directive %q", d.Cmd)
	return ""
}

// dur parses a duration of a script.
func dur(t *testing.T, d *datadriven.TestData, v string) time.Duration {
	dd, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "bad duration %q: %v", v, err)
	}
	return dd
}

// offset prints a time as its offset from epoch.
func offset(at time.Time) string { return at.Sub(epoch).String() }

// TestLimit checks Limit's validation, Interval, EffectiveBurst and
// String.
func TestLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		l        ratelimit.Limit
		err      string // "" for valid
		interval time.Duration
		burst    int
		str      string
	}{
		{l: ratelimit.Limit{Count: 10, Per: time.Second}, interval: 100 * time.Millisecond, burst: 1, str: "10/1s burst 1"},
		{l: ratelimit.Limit{Count: 10, Per: time.Second, Burst: 20}, interval: 100 * time.Millisecond, burst: 20, str: "10/1s burst 20"},
		{l: ratelimit.Limit{Count: 3, Per: time.Second}, interval: 333333333, burst: 1, str: "3/1s burst 1"},
		{l: ratelimit.Limit{Count: ratelimit.MaxCount, Per: ratelimit.MinPer}, interval: time.Nanosecond, burst: 1, str: "1000000/1ms burst 1"},
		{l: ratelimit.Limit{Count: 1, Per: ratelimit.MaxPer, Burst: ratelimit.MaxCount}, interval: 24 * time.Hour, burst: ratelimit.MaxCount, str: "1/24h0m0s burst 1000000"},
		{l: ratelimit.Limit{}, err: "invalid rate limit: limit 0 is out of range: want 1 to 1000000"},
		{l: ratelimit.Limit{Count: ratelimit.MaxCount + 1, Per: time.Second}, err: "invalid rate limit: limit 1000001 is out of range: want 1 to 1000000"},
		{l: ratelimit.Limit{Count: 1, Per: time.Millisecond - 1}, err: "invalid rate limit: per 999.999µs is out of range: want 1ms to 24h0m0s"},
		{l: ratelimit.Limit{Count: 1, Per: ratelimit.MaxPer + 1}, err: "invalid rate limit: per 24h0m0.000000001s is out of range: want 1ms to 24h0m0s"},
		{l: ratelimit.Limit{Count: 1, Per: time.Second, Burst: -1}, err: "invalid rate limit: burst -1 is out of range: want 1 to 1000000"},
		{l: ratelimit.Limit{Count: 1, Per: time.Second, Burst: ratelimit.MaxCount + 1}, err: "invalid rate limit: burst 1000001 is out of range: want 1 to 1000000"},
	}
	for _, tt := range tests {
		err := tt.l.Check()
		if tt.err != "" {
			if err == nil || err.Error() != tt.err || !errors.Is(err, ratelimit.ErrLimit) {
				t.Errorf("%+v.Check() = %v, want %q matching ErrLimit", tt.l, err, tt.err)
			}
			if _, rerr := tt.l.Reserve(time.Time{}, epoch, time.Hour); !errors.Is(rerr, ratelimit.ErrLimit) {
				t.Errorf("%+v.Reserve: error %v, want one matching ErrLimit", tt.l, rerr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v.Check() = %v, want nil", tt.l, err)
		}
		if got := tt.l.Interval(); got != tt.interval {
			t.Errorf("%+v.Interval() = %s, want %s", tt.l, got, tt.interval)
		}
		if got := tt.l.EffectiveBurst(); got != tt.burst {
			t.Errorf("%+v.EffectiveBurst() = %d, want %d", tt.l, got, tt.burst)
		}
		if got := tt.l.String(); got != tt.str {
			t.Errorf("%+v.String() = %q, want %q", tt.l, got, tt.str)
		}
	}
}
