package slots_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/internal/slots"
)

// epoch is the test's time zero: times in the scripts are offsets from it.
var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// key is the key every script's State is for.
const key = "customer-42"

// TestScripts runs each testdata/*.txt script on one key, step by step,
// and compares the exact trace: outcomes, expiries, promotions,
// cancellations and the State after each step. testdata/README.md
// describes the format; `go test ./internal/slots -rewrite` writes what
// the core does now as the expected outputs.
func TestScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			s := &script{st: slots.State{Key: key}, p: slots.Params{Limit: 1, Lease: 10 * time.Second}}
			datadriven.RunTest(t, path, s.run)
		})
	}
}

// script is one key driven through the directives of a file:
//
//	params [limit=N] [policy=P] [lease=D]            the defaults of later calls
//	acquire ID at=D [limit=N] [policy=P] [lease=D]
//	release ID at=D [limit=N] [lease=D]
//	renew ID at=D [limit=N] [lease=D]
//	expire at=D [limit=N] [lease=D]
//	stats
//
// A call prints its decision, then the State; a call refused prints
// "error: …" and the State must be unchanged.
type script struct {
	st slots.State
	p  slots.Params
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	// opts reads the arguments: the id (a bare word, when the directive
	// takes one) and the options, over the defaults.
	opts := func(withID bool) (id string, p slots.Params, at time.Time) {
		p = s.p
		seenAt := false
		for i, arg := range d.CmdArgs {
			if len(arg.Vals) == 0 {
				if !withID || i != 0 {
					d.Fatalf(t, "%s: unexpected word %q", d.Cmd, arg.Key)
				}
				id = arg.Key
				continue
			}
			arg.ExpectNumVals(t, 1)
			switch arg.Key {
			case "at":
				at = epoch.Add(dur(t, d, arg.Vals[0]))
				seenAt = true
			case "limit":
				arg.Scan(t, 0, &p.Limit)
			case "policy":
				p.Policy = slots.Policy(arg.Vals[0])
			case "lease":
				p.Lease = dur(t, d, arg.Vals[0])
			default:
				d.Fatalf(t, "%s: unknown option %q", d.Cmd, arg.Key)
			}
		}
		if withID && id == "" {
			d.Fatalf(t, "%s: the id is missing", d.Cmd)
		}
		if d.Cmd != "params" && !seenAt {
			d.Fatalf(t, "%s: at= is missing", d.Cmd)
		}
		return id, p, at
	}
	call := func(do func() (slots.State, slots.Decision, error)) {
		before := clone(s.st)
		next, dec, err := do()
		if !reflect.DeepEqual(s.st, before) {
			t.Fatalf("%s: the call modified the State it was given", d.Pos)
		}
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
			if !reflect.DeepEqual(next, before) {
				t.Fatalf("%s: a refused call changed the State", d.Pos)
			}
		} else {
			printDecision(&out, dec)
		}
		s.st = next
		printState(&out, s.st)
	}
	switch d.Cmd {
	case "params":
		_, s.p, _ = opts(false)
		policy := string(s.p.Policy)
		if policy == "" {
			policy = "(default)"
		}
		fmt.Fprintf(&out, "limit=%d policy=%s lease=%s\n", s.p.Limit, policy, s.p.Lease)
	case "acquire":
		id, p, at := opts(true)
		call(func() (slots.State, slots.Decision, error) { return slots.Acquire(s.st, id, p, at) })
	case "release":
		id, p, at := opts(true)
		call(func() (slots.State, slots.Decision, error) { return slots.Release(s.st, id, p, at) })
	case "renew":
		id, p, at := opts(true)
		call(func() (slots.State, slots.Decision, error) { return slots.Renew(s.st, id, p, at) })
	case "expire":
		_, p, at := opts(false)
		call(func() (slots.State, slots.Decision, error) { return slots.Expire(s.st, p, at) })
	case "stats":
		st := s.st.Stats()
		fmt.Fprintf(&out, "running=%d cancelling=%d waiting=%d oldest-wait=%s next-expiry=%s empty=%v\n",
			st.Running, st.Cancelling, st.Waiting, offset(st.OldestWait), offset(st.NextExpiry), s.st.Empty())
	default:
		d.Fatalf(t, "unknown directive %q", d.Cmd)
	}
	return out.String()
}

// dur parses a duration of a script.
func dur(t *testing.T, d *datadriven.TestData, v string) time.Duration {
	dd, err := time.ParseDuration(v)
	if err != nil {
		d.Fatalf(t, "bad duration %q: %v", v, err)
	}
	return dd
}

// offset prints a time as its offset from epoch; "-" for the zero time.
func offset(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.Sub(epoch).String()
}

// printDecision prints what a call decided, one line per part, the empty
// parts left out.
func printDecision(out *strings.Builder, d slots.Decision) {
	if d.Outcome == "" {
		out.WriteString("swept")
	} else {
		out.WriteString(string(d.Outcome))
	}
	if !d.Expiry.IsZero() {
		fmt.Fprintf(out, " until=%s", offset(d.Expiry))
	}
	out.WriteString("\n")
	if len(d.Expired) > 0 {
		fmt.Fprintf(out, "expired: %s\n", strings.Join(d.Expired, ", "))
	}
	if len(d.Promoted) > 0 {
		var ps []string
		for _, g := range d.Promoted {
			ps = append(ps, fmt.Sprintf("%s until=%s", g.ID, offset(g.Expiry)))
		}
		fmt.Fprintf(out, "promoted: %s\n", strings.Join(ps, ", "))
	}
	if len(d.Cancel) > 0 {
		var cs []string
		for _, c := range d.Cancel {
			what := "waiting"
			if c.Holding {
				what = "holding"
			}
			cs = append(cs, fmt.Sprintf("%s (%s)", c.ID, what))
		}
		fmt.Fprintf(out, "cancel: %s\n", strings.Join(cs, ", "))
	}
}

// printState prints the holders in grant order and the line.
func printState(out *strings.Builder, st slots.State) {
	var hs, ws []string
	for _, h := range st.Holders {
		s := fmt.Sprintf("%s since=%s until=%s", h.ID, offset(h.Since), offset(h.Expiry))
		if h.Cancelling {
			s += " cancelling"
		}
		hs = append(hs, s)
	}
	for _, w := range st.Waiters {
		ws = append(ws, fmt.Sprintf("%s since=%s", w.ID, offset(w.Since)))
	}
	fmt.Fprintf(out, "holders: %s\n", orNone(hs))
	fmt.Fprintf(out, "waiters: %s\n", orNone(ws))
}

// orNone joins parts with "; ", or says "none".
func orNone(parts []string) string {
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// clone returns a deep copy of st, to check that a call leaves its
// argument alone.
func clone(st slots.State) slots.State {
	st.Holders = append([]slots.Holder(nil), st.Holders...)
	st.Waiters = append([]slots.Waiter(nil), st.Waiters...)
	return st
}

// TestErrors: a call with invalid arguments is refused with an *Error that
// names the operation, the key and the id and matches its sentinel, and
// the State comes back as it was.
func TestErrors(t *testing.T) {
	t.Parallel()
	now := epoch
	ok := slots.Params{Limit: 2, Lease: time.Second}
	st := slots.State{Key: key, Holders: []slots.Holder{{ID: "a", Since: now, Expiry: now.Add(time.Second)}}}
	with := func(f func(*slots.Params)) slots.Params { p := ok; f(&p); return p }
	tests := []struct {
		name, op, id string
		call         func() (slots.State, slots.Decision, error)
		is           error
		msg          string
	}{
		{"an empty id", "acquire", "", func() (slots.State, slots.Decision, error) {
			return slots.Acquire(st, "", ok, now)
		}, slots.ErrID, `slots: acquire on key "customer-42": the id is empty`},
		{"a zero limit", "release", "a", func() (slots.State, slots.Decision, error) {
			return slots.Release(st, "a", with(func(p *slots.Params) { p.Limit = 0 }), now)
		}, slots.ErrLimit, `slots: release "a" on key "customer-42": the limit must be at least 1, got 0`},
		{"a negative limit", "expire", "", func() (slots.State, slots.Decision, error) {
			return slots.Expire(st, with(func(p *slots.Params) { p.Limit = -3 }), now)
		}, slots.ErrLimit, `slots: expire on key "customer-42": the limit must be at least 1, got -3`},
		{"a zero lease", "renew", "a", func() (slots.State, slots.Decision, error) {
			return slots.Renew(st, "a", with(func(p *slots.Params) { p.Lease = 0 }), now)
		}, slots.ErrLease, `slots: renew "a" on key "customer-42": the lease must be positive, got 0s`},
		{"an unknown policy", "acquire", "b", func() (slots.State, slots.Decision, error) {
			return slots.Acquire(st, "b", with(func(p *slots.Params) { p.Policy = "cancel_all" }), now)
		}, slots.ErrPolicy, `slots: acquire "b" on key "customer-42": unknown policy (want queue, cancel_newest or cancel_oldest): "cancel_all"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, dec, err := tt.call()
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want one matching %v", err, tt.is)
			}
			var e *slots.Error
			if !errors.As(err, &e) || e.Op != tt.op || e.Key != key || e.ID != tt.id {
				t.Fatalf("err = %#v, want an *Error for %s %q on %q", err, tt.op, tt.id, key)
			}
			if err.Error() != tt.msg {
				t.Errorf("message\n got %s\nwant %s", err, tt.msg)
			}
			if !reflect.DeepEqual(got, st) || !reflect.DeepEqual(dec, slots.Decision{}) {
				t.Errorf("a refused call returned %+v, %+v; want the State unchanged and no decision", got, dec)
			}
		})
	}
}

// TestParsePolicy: the definition layer's reading of a policy.
func TestParsePolicy(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]slots.Policy{
		"":              slots.Queue,
		"queue":         slots.Queue,
		"cancel_newest": slots.CancelNewest,
		"cancel_oldest": slots.CancelOldest,
	} {
		if got, err := slots.ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Queue", "cancel-oldest", " queue", "fifo"} {
		_, err := slots.ParsePolicy(in)
		if !errors.Is(err, slots.ErrPolicy) || !strings.Contains(err.Error(), fmt.Sprintf("%q", in)) {
			t.Errorf("ParsePolicy(%q) = %v, want ErrPolicy quoting the input", in, err)
		}
	}
}
