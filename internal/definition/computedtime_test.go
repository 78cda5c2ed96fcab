package definition

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// TestComputedTimeParses: a delay is a literal duration, its long form
// {for: …}, a computed duration, or {until: …}, a literal time or a
// computed one; a wait's timeout is a literal or a computed duration. Each
// lands in its own field, the others zero.
func TestComputedTimeParses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, step string
		// want is what the step holds: delay=D, expr=SOURCE, until=SOURCE,
		// timeout=D, timeout-expr=SOURCE.
		want string
	}{
		{"literal", "id: a\ndelay: 1d12h", "delay=36h0m0s"},
		{"long form", "id: a\ndelay: {for: 90s}", "delay=1m30s"},
		{"days template", `id: a` + "\n" + `delay: "${ input.days }d"`, `expr=${ input.days }d`},
		{"seconds", `id: a` + "\n" + `delay: "${ input.seconds }"`, `expr=${ input.seconds }`},
		{"variable", `id: a` + "\n" + `delay: "${ vars.wait }"`, `expr=${ vars.wait }`},
		{"long form computed", `id: a` + "\n" + `delay: {for: "${ input.hours }h"}`, `expr=${ input.hours }h`},
		{"expr duration()", `id: a` + "\n" + `delay: "${ duration('90m') }"`, `expr=${ duration('90m') }`},
		{"until literal", "id: a\ndelay: {until: '2026-03-01T09:00:00+01:00'}", "until=2026-03-01T09:00:00+01:00"},
		{"until unquoted YAML timestamp", "id: a\ndelay: {until: 2026-03-01T08:00:00Z}", "until=2026-03-01T08:00:00Z"},
		{"until fractional", "id: a\ndelay: {until: '2026-03-01T08:00:00.250Z'}", "until=2026-03-01T08:00:00.250Z"},
		{"until computed", `id: a` + "\n" + `delay: {until: "${ input.starts_at }"}`, "until=${ input.starts_at }"},
		{"until in a loop", `id: a` + "\n" + `foreach: "${ input.dates }"` + "\nas: d\ndo: [{id: b, delay: {until: \"${ d }\"}}]", "until=${ d }"},
		{"wait literal timeout", "id: a\nwait: {event: e, key: k, timeout: 72h}", "timeout=72h0m0s"},
		{"wait zero timeout", "id: a\nwait: {event: e, key: k, timeout: 0s}", "timeout=0s"},
		{"wait computed timeout", `id: a` + "\n" + `wait: {event: e, key: k, timeout: "${ input.hours }h"}`, "timeout-expr=${ input.hours }h"},
		{"wait seconds timeout", `id: a` + "\n" + `wait: {event: e, key: k, timeout: "${ input.sla * 60 }"}`, "timeout-expr=${ input.sla * 60 }"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := mustParse(t, withStep(tt.step))
			s := def.Steps[0]
			if s.Kind == KindForeach {
				s = s.Foreach.Do[0]
			}
			if got := timeFields(s); got != tt.want {
				t.Errorf("step holds %s, want %s", got, tt.want)
			}
		})
	}
}

// timeFields says what a step's time fields hold.
func timeFields(s *Step) string {
	var out []string
	if s.Wait != nil {
		if s.Wait.TimeoutExpr.IsZero() {
			out = append(out, "timeout="+s.Wait.Timeout.String())
		} else {
			out = append(out, fmt.Sprintf("timeout-expr=%v", s.Wait.TimeoutExpr.Source()))
		}
		return strings.Join(out, " ")
	}
	if s.Delay != 0 {
		out = append(out, "delay="+s.Delay.String())
	}
	if !s.DelayExpr.IsZero() {
		out = append(out, fmt.Sprintf("expr=%v", s.DelayExpr.Source()))
	}
	if !s.DelayUntil.IsZero() {
		out = append(out, fmt.Sprintf("until=%v", s.DelayUntil.Source()))
	}
	return strings.Join(out, " ")
}

// TestComputedTimeProblems: the literals are refused as before, with the
// same messages at the same paths; the long forms' problems are at their
// field; an expression is compiled like any other, and refused when the
// type checker knows it cannot be a duration or a time.
func TestComputedTimeProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, step string
		want       []string // every problem, as path: message
	}{
		{"zero literal", "id: a\ndelay: 0s", []string{"steps[0].delay: duration 0s must be greater than zero"}},
		{"negative literal", "id: a\ndelay: -5m", []string{"steps[0].delay: duration -5m0s must be greater than zero"}},
		{"bare number", "id: a\ndelay: 30", []string{"steps[0].delay: got a number, want a duration such as 500ms, 30s, 72h or 7d"}},
		{"bad literal", "id: a\ndelay: 2 days", []string{`steps[0].delay: invalid duration "2 days": want a number and a unit, e.g. 500ms, 30s, 72h or 7d`}},
		{"too long literal", "id: a\ndelay: 106752d", []string{`steps[0].delay: invalid duration "106752d": want a number and a unit, e.g. 500ms, 30s, 72h or 7d`}},
		{"escaped, not an expression", "id: a\ndelay: '$${ x }'", []string{`steps[0].delay: invalid duration "$${ x }": want a number and a unit, e.g. 500ms, 30s, 72h or 7d`}},
		{"list", "id: a\ndelay: [1s]", []string{"steps[0].delay: got a list, want a duration such as 500ms, 30s, 72h or 7d"}},
		{"zero long form", "id: a\ndelay: {for: 0s}", []string{"steps[0].delay.for: duration 0s must be greater than zero"}},
		{"bad long form", "id: a\ndelay: {for: soon}", []string{`steps[0].delay.for: invalid duration "soon": want a number and a unit, e.g. 500ms, 30s, 72h or 7d`}},
		{"for and until", "id: a\ndelay: {for: 1s, until: '2026-03-01T09:00:00Z'}", []string{"steps[0].delay: a delay has for (a duration) or until (a time), not both"}},
		{"empty map", "id: a\ndelay: {}", []string{"steps[0].delay: required: for (a duration) or until (a time)"}},
		{"unknown field", "id: a\ndelay: {for: 1s, at: x}", []string{`steps[0].delay.at: unknown field "at"`}},
		{"until without offset", "id: a\ndelay: {until: '2026-03-01T09:00:00'}", []string{`steps[0].delay.until: invalid time "2026-03-01T09:00:00": want RFC 3339 with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00`}},
		{"until a date", "id: a\ndelay: {until: 2026-03-01}", []string{`steps[0].delay.until: invalid time "2026-03-01": want RFC 3339 with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00`}},
		{"until a YAML timestamp with a space", "id: a\ndelay: {until: 2026-03-01 09:00:00Z}", []string{`steps[0].delay.until: invalid time "2026-03-01 09:00:00Z": want RFC 3339 with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00`}},
		{"until in the year 10000", "id: a\ndelay: {until: '9999-12-31T23:30:00-01:00'}", []string{`steps[0].delay.until: invalid time "9999-12-31T23:30:00-01:00": in UTC it is outside the years 0000 to 9999 that RFC 3339 can write`}},
		{"until in the year -1", "id: a\ndelay: {until: '0000-01-01T00:30:00+01:00'}", []string{`steps[0].delay.until: invalid time "0000-01-01T00:30:00+01:00": in UTC it is outside the years 0000 to 9999 that RFC 3339 can write`}},
		{"until a number", "id: a\ndelay: {until: 1772352000}", []string{"steps[0].delay.until: got a number, want a time such as 2026-03-01T09:00:00Z (RFC 3339 with a zone offset) or a ${ } expression"}},
		{"expression does not compile", "id: a\ndelay: '${ input.days + }d'", []string{`steps[0].delay: expression "input.days +" does not compile: unexpected token EOF (at character 14)`}},
		{"unknown name", "id: a\ndelay: '${ days }d'", []string{`steps[0].delay: expression "days" does not compile: unknown name days (at character 2)`}},
		{"unterminated", "id: a\ndelay: '${ input.days'", []string{"steps[0].delay: unterminated ${ at character 1: no matching }"}},
		{"a boolean", "id: a\ndelay: '${ 1 > 2 }'", []string{`steps[0].delay: expression "1 > 2" yields bool, want a duration: a string such as 90s or 7d, or a number of seconds`}},
		{"a list", "id: a\ndelay: {for: '${ [1] }'}", []string{`steps[0].delay.for: expression "[1]" yields []interface {}, want a duration: a string such as 90s or 7d, or a number of seconds`}},
		{"until a number expression", "id: a\ndelay: {until: '${ 1 + 2 }'}", []string{`steps[0].delay.until: expression "1 + 2" yields int, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z`}},
		{"until out of scope", "id: a\ndelay: {until: '${ item }'}", []string{`steps[0].delay.until: expression "item" does not compile: unknown name item (at character 2)`}},
		{"wait negative literal", "id: a\nwait: {event: e, key: k, timeout: -1h}", []string{"steps[0].wait.timeout: duration -1h0m0s must be greater than zero"}},
		{"wait bad literal", "id: a\nwait: {event: e, key: k, timeout: 2 days}", []string{`steps[0].wait.timeout: invalid duration "2 days": want a number and a unit, e.g. 500ms, 30s, 72h or 7d`}},
		{"wait bad expression", "id: a\nwait: {event: e, key: k, timeout: '${ input.h ** }h'}", []string{`steps[0].wait.timeout: expression "input.h **" does not compile: unexpected token EOF (at character 12)`}},
		{"wait boolean expression", "id: a\nwait: {event: e, key: k, timeout: '${ true }'}", []string{`steps[0].wait.timeout: expression "true" yields bool, want a duration: a string such as 90s or 7d, or a number of seconds`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(withStep(tt.step)), nil)
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) {
				t.Fatalf("Load = %v, want a *weft.DefinitionError", err)
			}
			var got []string
			for _, p := range ve.Problems {
				got = append(got, p.Path+": "+p.Message)
				if p.Line == 0 {
					t.Errorf("problem without a line: %+v", p)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestComputedTimeEval: what a computed duration or time yields, and how
// it fails, with the value as written and what is wrong with its result.
func TestComputedTimeEval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// src is the value as a delay (or a timeout, with timeout set, or
		// until, with until set) writes it.
		src            string
		timeout, until bool
		input          any
		want           string // the duration or time, or the error
	}{
		{"days", "${ input.days }d", false, false, map[string]any{"days": 7.0}, "168h0m0s"},
		{"days and hours", "${ input.days }d${ input.hours }h", false, false, map[string]any{"days": 1, "hours": 12}, "36h0m0s"},
		{"a duration string", "${ input.wait }", false, false, map[string]any{"wait": "1h30m"}, "1h30m0s"},
		{"seconds", "${ input.seconds }", false, false, map[string]any{"seconds": 90.0}, "1m30s"},
		{"an integer", "${ 2 * 60 }", false, false, nil, "2m0s"},
		{"fractional seconds", "${ input.s }", false, false, map[string]any{"s": 1.5}, "1.5s"},
		{"rounded to the millisecond", "${ input.s }", false, false, map[string]any{"s": 0.0012345}, "1ms"},
		{"below a millisecond", "${ input.s }", false, false, map[string]any{"s": 0.0004}, "0s"},
		{"zero", "${ input.s }", false, false, map[string]any{"s": 0}, "0s"},
		{"negative seconds", "${ input.s }", false, false, map[string]any{"s": -30}, "-30s"},
		{"negative days", "${ input.days - 3 }d", false, false, map[string]any{"days": 1}, "-48h0m0s"},
		{"expr duration()", "${ duration('90m') }", false, false, nil, "1h30m0s"},
		{"the longest", "${ input.d }", false, false, map[string]any{"d": "106751d"}, "2562024h0m0s"},
		{"not a duration", "${ input.days }d", false, false, map[string]any{"days": "x"},
			`expression "${ input.days }d": "xd" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{"fractional days", "${ input.days }d", false, false, map[string]any{"days": 1.5},
			`expression "${ input.days }d": "1.5d" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{"empty", "${ input.wait }", false, false, map[string]any{"wait": ""},
			`expression "${ input.wait }": "" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{"a numeric string", "${ input.wait }", false, false, map[string]any{"wait": "90"},
			`expression "${ input.wait }": "90" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{"two signs", "${ input.wait }", false, false, map[string]any{"wait": "--5m"},
			`expression "${ input.wait }": "--5m" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{"too many days", "${ input.days }d", false, false, map[string]any{"days": 106752},
			`expression "${ input.days }d": "106752d" is beyond the longest duration (about 106751d, 292 years)`},
		{"too many hours", "${ input.wait }", false, false, map[string]any{"wait": "-9999999999h"},
			`expression "${ input.wait }": "-9999999999h" is beyond the longest duration (about 106751d, 292 years)`},
		{"too many seconds", "${ input.s }", false, false, map[string]any{"s": 1e10},
			`expression "${ input.s }": 10000000000 seconds is beyond the longest duration (about 106751d, 292 years)`},
		{"null", "${ input.s }", false, false, map[string]any{},
			`expression "${ input.s }": got null, want a duration: a string such as 90s or 7d, or a number of seconds`},
		{"a boolean", "${ input.s }", false, false, map[string]any{"s": true},
			`expression "${ input.s }": got a boolean, want a duration: a string such as 90s or 7d, or a number of seconds`},
		{"a map", "${ input }", false, false, map[string]any{"s": 1},
			`expression "${ input }": got a map, want a duration: a string such as 90s or 7d, or a number of seconds`},
		{"the expression fails", "${ input.a.b }s", false, false, nil,
			`expression "${ input.a.b }": cannot fetch a from <nil> (at character 8)`},

		{"timeout", "${ input.h }h", true, false, map[string]any{"h": 72}, "72h0m0s"},
		{"zero timeout", "${ input.h }h", true, false, map[string]any{"h": 0}, "0s"},
		{"negative timeout", "${ input.s }", true, false, map[string]any{"s": -5},
			`expression "${ input.s }": -5s is negative; want 0 (no timeout) or more`},

		{"until", "${ input.at }", false, true, map[string]any{"at": "2026-03-01T09:00:00+01:00"}, "2026-03-01T09:00:00+01:00"},
		{"until fractional", "${ input.at }", false, true, map[string]any{"at": "2026-03-01T09:00:00.5Z"}, "2026-03-01T09:00:00.5Z"},
		{"until a template", "${ input.day }T09:00:00Z", false, true, map[string]any{"day": "2026-03-01"}, "2026-03-01T09:00:00Z"},
		{"until expr date()", "${ date('2026-03-01T09:00:00Z') }", false, true, nil, "2026-03-01T09:00:00Z"},
		{"until a literal", "2026-03-01T09:00:00-05:00", false, true, nil, "2026-03-01T09:00:00-05:00"},
		{"until without offset", "${ input.at }", false, true, map[string]any{"at": "2026-03-01T09:00:00"},
			`expression "${ input.at }": "2026-03-01T09:00:00" is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00`},
		{"until in the year 10000", "${ input.at }", false, true, map[string]any{"at": "9999-12-31T23:30:00-01:00"},
			`expression "${ input.at }": 9999-12-31T23:30:00-01:00: in UTC it is outside the years 0000 to 9999 that RFC 3339 can write`},
		{"until a number", "${ input.at }", false, true, map[string]any{"at": 1772352000},
			`expression "${ input.at }": got a number, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z`},
		{"until null", "${ input.at }", false, true, map[string]any{},
			`expression "${ input.at }": got null, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var step string
			switch {
			case tt.timeout:
				step = fmt.Sprintf("id: a\nwait: {event: e, key: k, timeout: %q}", tt.src)
			case tt.until:
				step = fmt.Sprintf("id: a\ndelay: {until: %q}", tt.src)
			default:
				step = fmt.Sprintf("id: a\ndelay: %q", tt.src)
			}
			s := mustParse(t, withStep(step)).Steps[0]
			env := Env{Input: tt.input}
			var got any
			var err error
			switch {
			case tt.timeout:
				got, err = s.Wait.TimeoutExpr.EvalTimeout(env)
			case tt.until:
				var at time.Time
				at, err = s.DelayUntil.EvalTime(env)
				got = at.Format(time.RFC3339Nano)
			default:
				got, err = s.DelayExpr.EvalDuration(env)
			}
			if err != nil {
				if !errors.Is(err, ErrEval) {
					t.Errorf("error %v does not match ErrEval", err)
				}
				got = err.Error()
			}
			if fmt.Sprint(got) != tt.want {
				t.Errorf("got  %v\nwant %s", got, tt.want)
			}
		})
	}
}

// TestComputedTimeHash: the versions saved before delays and timeouts
// could be computed keep their hash (the hashes below are what the code
// before computed); the long form {for: D} is the short one; an until
// literal is its instant, whatever its offset; expressions count as
// written.
func TestComputedTimeHash(t *testing.T) {
	t.Parallel()
	before := map[string]string{
		"name: wf\nsteps: [{id: a, delay: 1d12h}]":                                         "f9a6842f69a4cf441f5461229fe91c3c8ef71167860b1c4384408b8ad81152f7",
		"name: wf\nsteps: [{id: a, wait: {event: e, key: '${ input.id }', timeout: 72h}}]": "a31cf0e6afaf9cdcd37502914efe58a5e808965b8eb5428533b96bb2f2567089",
	}
	spec, err := os.ReadFile("testdata/order-fulfilment.yaml") // a delay: 10s and a wait's timeout: 72h
	if err != nil {
		t.Fatal(err)
	}
	before[string(spec)] = "87c6242ebb8aca69ef16cae965f4a1d7565cce63cbf30c11c131acb5821ccfac"
	for src, want := range before {
		if got := mustParse(t, src).Hash(); got != want {
			t.Errorf("%q hashes %s; before computed time it hashed %s", src, got, want)
		}
	}
	same := [][2]string{
		{"delay: 1d12h", "delay: {for: 36h}"},
		{"delay: {until: '2026-03-01T09:00:00+01:00'}", "delay: {until: 2026-03-01T08:00:00Z}"},
		{"delay: {until: '2026-03-01T08:00:00.000Z'}", "delay: {until: '2026-03-01T08:00:00Z'}"},
		{`delay: "${ input.days }d"`, `delay: {for: "${ input.days }d"}`},
	}
	for _, p := range same {
		a, b := mustParse(t, withStep("id: a\n"+p[0])), mustParse(t, withStep("id: a\n"+p[1]))
		if a.Hash() != b.Hash() {
			t.Errorf("%s and %s hash differently:\n%s\n%s", p[0], p[1], a.Canonical(), b.Canonical())
		}
	}
	differ := []string{
		"delay: 36h",
		`delay: "${ input.days }d"`,
		`delay: "${input.days}d"`,
		`delay: "${ input.days }h"`,
		"delay: {until: '2026-03-01T08:00:00Z'}",
		"delay: {until: '2026-03-01T08:00:01Z'}",
		`delay: {until: "${ input.at }"}`,
		`delay: "${ input.at }"`,
	}
	seen := map[string]string{}
	for _, d := range differ {
		h := mustParse(t, withStep("id: a\n"+d)).Hash()
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash the same", d, other)
		}
		seen[h] = d
	}
	for _, w := range []string{"timeout: 72h", `timeout: "${ input.h }h"`, `timeout: "${ input.s }"`} {
		h := mustParse(t, withStep("id: a\nwait: {event: e, key: k, "+w+"}")).Hash()
		if other, dup := seen[h]; dup {
			t.Errorf("%s and %s hash the same", w, other)
		}
		seen[h] = w
	}
}

// TestComputedTimeCanonical: the canonical form of each new form parses
// back to the same step, expressions and until as written (an until
// literal as its instant in UTC).
func TestComputedTimeCanonical(t *testing.T) {
	t.Parallel()
	tests := []struct{ step, want string }{
		{"id: a\ndelay: {for: 90s}", `{"delay":"1m30s","id":"a"}`},
		{`id: a` + "\n" + `delay: "${ input.days }d"`, `{"delay":"${ input.days }d","id":"a"}`},
		{`id: a` + "\n" + `delay: {for: "${ input.s }"}`, `{"delay":"${ input.s }","id":"a"}`},
		{"id: a\ndelay: {until: '2026-03-01T09:00:00.5+01:00'}", `{"delay":{"until":"2026-03-01T08:00:00.5Z"},"id":"a"}`},
		{`id: a` + "\n" + `delay: {until: "${ input.at }"}`, `{"delay":{"until":"${ input.at }"},"id":"a"}`},
		{`id: a` + "\n" + `wait: {event: e, key: k, timeout: "${ input.h }h"}`, `{"id":"a","wait":{"event":"e","key":"k","timeout":"${ input.h }h"}}`},
	}
	for _, tt := range tests {
		def := mustParse(t, withStep(tt.step))
		want := `{"name":"wf","persistence":"lazy","steps":[` + tt.want + `]}`
		if got := string(def.Canonical()); got != want {
			t.Errorf("%s: canonical\n%s\nwant\n%s", tt.step, got, want)
		}
		again := mustParse(t, string(def.Canonical()))
		if again.Hash() != def.Hash() || timeFields(again.Steps[0]) == "" {
			t.Errorf("%s: the canonical form does not parse back the same: %s", tt.step, again.Canonical())
		}
	}
}
