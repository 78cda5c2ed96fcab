package definition

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/ratelimit"
)

// withActivity is a valid definition whose one step, an activity step,
// has the given fields (YAML lines, indented here) after its kind: the
// first is at line 5, column 5.
func withActivity(fields string) string {
	var b strings.Builder
	b.WriteString("name: wf\nsteps:\n  - id: a\n    activity: p.q\n")
	for _, line := range strings.Split(fields, "\n") {
		if line != "" {
			b.WriteString("    " + line + "\n")
		}
	}
	return b.String()
}

// inLoop is a valid definition whose activity step, inside a foreach
// over input.items with the loop variable it, has the given fields.
func inLoop(fields string) string {
	return "name: wf\nsteps:\n  - id: l\n    foreach: \"${ input.items }\"\n    as: it\n    do:\n      - id: a\n        activity: p.q\n        " + fields + "\n"
}

// stepLimits writes an activity step's limits as the tests compare
// them: "c=KEY/LIMIT r=KEY/COUNT/PER/BURST", a key "-" when absent, a
// limit "-" when nil.
func stepLimits(a *Activity) string {
	key := func(v Value) string {
		if v.IsZero() {
			return "-"
		}
		return fmt.Sprint(v.Source())
	}
	c, r := "-", "-"
	if a.Concurrency != nil {
		c = fmt.Sprintf("%s/%d", key(a.Concurrency.Key), a.Concurrency.Limit)
	}
	if l := a.RateLimit; l != nil {
		r = fmt.Sprintf("%s/%d/%s/%d", key(l.Key), l.Limit.Count, l.Limit.Per, l.Limit.Burst)
	}
	return "c=" + c + " r=" + r
}

// TestStepLimitsParse: what an activity step's concurrency and rate_limit
// hold once parsed, with the defaults; absent, they are nil.
func TestStepLimitsParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string // the step's fields, or a whole document
		want string // as stepLimits writes it
	}{
		{"", "c=- r=-"},
		{"concurrency: {limit: 2}", "c=-/2 r=-"},
		{"concurrency: {limit: 1, policy: queue}", "c=-/1 r=-"},
		{"concurrency: {limit: 1, policy: ''}", "c=-/1 r=-"},
		{"concurrency: {limit: 10000, key: acme}", "c=acme/10000 r=-"},
		{`concurrency: {limit: 3, key: ""}`, "c=/3 r=-"},
		{`concurrency: {limit: 2, key: "${ input.customer }"}`, "c=${ input.customer }/2 r=-"},
		{`concurrency: {limit: 2, key: "${ vars.account.id }"}`, "c=${ vars.account.id }/2 r=-"},
		{`concurrency: {limit: 2, key: "c-${ input.id }-${ vars.n }"}`, "c=c-${ input.id }-${ vars.n }/2 r=-"},
		{"rate_limit: {limit: 10, per: 1s}", "c=- r=-/10/1s/1"},
		{"rate_limit: {limit: 10, per: 1s, burst: 20, key: partner}", "c=- r=partner/10/1s/20"},
		{"rate_limit: {limit: 1, per: 1ms, burst: 1}", "c=- r=-/1/1ms/1"},
		{"rate_limit: {limit: 1000000, per: 24h, burst: 1000000}", "c=- r=-/1000000/24h0m0s/1000000"},
		{"rate_limit: {limit: 5, per: 1d}", "c=- r=-/5/24h0m0s/1"},
		{"rate_limit: {limit: 5, per: 1.5s}", "c=- r=-/5/1.5s/1"},
		{"rate_limit:\n  key: \"${ input.account }\"\n  limit: 10\n  per: 1m\n  burst: 3",
			"c=- r=${ input.account }/10/1m0s/3"},
		{"concurrency: {key: \"${ input.customer }\", limit: 2}\nrate_limit: {key: \"${ input.account }\", limit: 10, per: 1s, burst: 20}",
			"c=${ input.customer }/2 r=${ input.account }/10/1s/20"},
		{inLoop(`concurrency: {limit: 2, key: "${ it.host }"}`), "c=${ it.host }/2 r=-"},
		{inLoop(`rate_limit: {limit: 2, per: 1s, key: "${ it.host + '/' + vars.x }"}`), "c=- r=${ it.host + '/' + vars.x }/2/1s/1"},
		{`{"name": "wf", "steps": [{"id": "a", "activity": "p.q", "concurrency": {"key": "k", "limit": 5}, "rate_limit": {"limit": 2, "per": "500ms"}}]}`,
			"c=k/5 r=-/2/500ms/1"},
	}
	for _, tt := range tests {
		doc := tt.doc
		if !strings.HasPrefix(doc, "{") && !strings.HasPrefix(doc, "name:") {
			doc = withActivity(doc)
		}
		d := mustParse(t, doc)
		s, ok := d.Step("a")
		if !ok || s.Activity == nil {
			t.Fatalf("%s: no activity step a", tt.doc)
		}
		if got := stepLimits(s.Activity); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.doc, got, tt.want)
		}
	}
}

// TestStepLimitsProblems: every problem of an activity step's concurrency
// and rate_limit, at its path and line, when loaded; a misspelt field is
// one problem with its suggestion, not also a missing one; the fields
// belong to activity steps only.
func TestStepLimitsProblems(t *testing.T) {
	t.Parallel()
	const (
		cLimitRequired = "steps[0].concurrency.limit: required: how many attempts of one key may run at once, from 1 to 10000"
		rLimitRequired = "steps[0].rate_limit.limit: required: how many attempts of one key may start per period, from 1 to 1000000"
		perRequired    = "steps[0].rate_limit.per: required: the period, a duration from 1ms to 24h0m0s such as 1s or 1m"
		cNotMap        = "want a map with a limit and an optional key, such as {limit: 2}"
		rNotMap        = "want a map with a limit, a per, an optional key and an optional burst, such as {limit: 10, per: 1s}"
		keyType        = "want a string or a ${ } expression (quote a number to use it as a key)"
		cancels        = "applies to workflows only: it cancels whole instances, and a step's attempts can only wait their turn (queue, the default); set it on the workflow's concurrency"
	)
	tests := []struct {
		name, doc string // the step's fields, or a whole document
		want      []string
	}{
		{"concurrency a number", "concurrency: 2",
			[]string{"steps[0].concurrency: got a number, " + cNotMap + " (line 5, column 18)"}},
		{"concurrency null", "concurrency:",
			[]string{"steps[0].concurrency: got null, " + cNotMap + " (line 5, column 17)"}},
		{"concurrency empty", "concurrency: {}",
			[]string{cLimitRequired + " (line 5, column 18)"}},
		{"concurrency misspelt", "concurency: {limit: 2}",
			[]string{`steps[0].concurency: unknown field "concurency"; did you mean concurrency? (line 5, column 5)`}},
		{"concurrency fields misspelt", "concurrency: {kye: k, limt: 2, scope: global}",
			[]string{
				`steps[0].concurrency.kye: unknown field "kye"; did you mean key? (line 5, column 19)`,
				`steps[0].concurrency.limt: unknown field "limt"; did you mean limit? (line 5, column 27)`,
				`steps[0].concurrency.scope: unknown field "scope" (line 5, column 36)`,
			}},
		{"concurrency limit zero", "concurrency: {limit: 0}",
			[]string{"steps[0].concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000 (line 5, column 26)"}},
		{"concurrency limit too large", "concurrency: {limit: 10001}",
			[]string{"steps[0].concurrency.limit: limit 10001 is out of range: want an integer from 1 to 10000 (line 5, column 26)"}},
		{"concurrency limit a string", `concurrency: {limit: "2"}`,
			[]string{"steps[0].concurrency.limit: got a string, want an integer from 1 to 10000 (line 5, column 26)"}},
		{"concurrency limit an expression", `concurrency: {limit: "${ input.n }"}`,
			[]string{"steps[0].concurrency.limit: got an expression, want an integer from 1 to 10000: a limit is a literal, the same for every attempt (line 5, column 26)"}},
		{"cancel_newest", "concurrency: {limit: 2, policy: cancel_newest}",
			[]string{"steps[0].concurrency.policy: policy cancel_newest " + cancels + " (line 5, column 37)"}},
		{"cancel_oldest", "concurrency: {limit: 2, policy: cancel_oldest}",
			[]string{"steps[0].concurrency.policy: policy cancel_oldest " + cancels + " (line 5, column 37)"}},
		{"policy misspelt", "concurrency: {limit: 2, policy: Queue}",
			[]string{`steps[0].concurrency.policy: unknown policy "Queue"; did you mean queue? (line 5, column 37)`}},
		{"policy unknown", "concurrency: {limit: 2, policy: cancel-newest}",
			[]string{`steps[0].concurrency.policy: unknown policy "cancel-newest"; a step's only policy is queue (the default): cancel_newest and cancel_oldest apply to workflows only (line 5, column 37)`}},
		{"policy a number", "concurrency: {limit: 2, policy: 1}",
			[]string{"steps[0].concurrency.policy: got a number, want a string (line 5, column 37)"}},
		{"concurrency key a number", "concurrency: {limit: 2, key: 42}",
			[]string{"steps[0].concurrency.key: got a number, " + keyType + " (line 5, column 34)"}},
		{"concurrency key too long", fmt.Sprintf("concurrency: {limit: 2, key: %s}", strings.Repeat("k", 257)),
			[]string{"steps[0].concurrency.key: the key is 257 bytes long; the limit is 256 (line 5, column 34)"}},
		{"concurrency key names no such thing", `concurrency: {limit: 2, key: "${ it.host }"}`,
			[]string{`steps[0].concurrency.key: expression "it.host" does not compile: unknown name it (at character 2) (line 5, column 34)`}},
		{"concurrency key yields a list", `concurrency: {limit: 2, key: "${ [vars.a] }"}`,
			[]string{`steps[0].concurrency.key: expression "[vars.a]" yields []interface {}, want a string, a number or a boolean (line 5, column 34)`}},

		{"rate_limit a string", "rate_limit: 10/s",
			[]string{"steps[0].rate_limit: got a string, " + rNotMap + " (line 5, column 17)"}},
		{"rate_limit empty", "rate_limit: {}",
			[]string{rLimitRequired + " (line 5, column 17)", perRequired + " (line 5, column 17)"}},
		{"rate_limit without per", "rate_limit: {limit: 10}",
			[]string{perRequired + " (line 5, column 17)"}},
		{"rate_limit without limit", "rate_limit:\n  per: 1s\n  burst: 2",
			[]string{rLimitRequired + " (line 6, column 7)"}},
		{"rate_limit misspelt", "ratelimit: {limit: 10, per: 1s}",
			[]string{`steps[0].ratelimit: unknown field "ratelimit"; did you mean rate_limit? (line 5, column 5)`}},
		{"rate_limit fields misspelt", "rate_limit: {limt: 10, pr: 1s, brust: 2, max_wait: 1s}",
			[]string{
				`steps[0].rate_limit.limt: unknown field "limt"; did you mean limit? (line 5, column 18)`,
				`steps[0].rate_limit.pr: unknown field "pr"; did you mean per? (line 5, column 28)`,
				`steps[0].rate_limit.brust: unknown field "brust"; did you mean burst? (line 5, column 36)`,
				`steps[0].rate_limit.max_wait: unknown field "max_wait" (line 5, column 46)`,
			}},
		{"rate_limit limit zero", "rate_limit: {limit: 0, per: 1s}",
			[]string{"steps[0].rate_limit.limit: limit 0 is out of range: want 1 to 1000000 (line 5, column 25)"}},
		{"rate_limit limit too large", "rate_limit: {limit: 1000001, per: 1s}",
			[]string{"steps[0].rate_limit.limit: limit 1000001 is out of range: want 1 to 1000000 (line 5, column 25)"}},
		{"rate_limit limit a fraction", "rate_limit: {limit: 0.5, per: 1s}",
			[]string{"steps[0].rate_limit.limit: got a number, want an integer from 1 to 1000000 (line 5, column 25)"}},
		{"rate_limit limit an expression", `rate_limit: {limit: "${ input.n }", per: 1s}`,
			[]string{"steps[0].rate_limit.limit: got an expression, want an integer from 1 to 1000000: a limit is a literal, the same for every attempt (line 5, column 25)"}},
		{"per zero", "rate_limit: {limit: 1, per: 0s}",
			[]string{"steps[0].rate_limit.per: per 0s is out of range: want 1ms to 24h0m0s (line 5, column 33)"}},
		{"per negative", "rate_limit: {limit: 1, per: -1s}",
			[]string{"steps[0].rate_limit.per: per -1s is out of range: want 1ms to 24h0m0s (line 5, column 33)"}},
		{"per too short", "rate_limit: {limit: 1, per: 999us}",
			[]string{"steps[0].rate_limit.per: per 999µs is out of range: want 1ms to 24h0m0s (line 5, column 33)"}},
		{"per too long", "rate_limit: {limit: 1, per: 1d1ns}",
			[]string{"steps[0].rate_limit.per: per 24h0m0.000000001s is out of range: want 1ms to 24h0m0s (line 5, column 33)"}},
		{"per a bare number", "rate_limit: {limit: 1, per: 1}",
			[]string{"steps[0].rate_limit.per: got a number, want a duration such as 500ms, 30s, 72h or 7d (line 5, column 33)"}},
		{"per no duration", "rate_limit: {limit: 1, per: second}",
			[]string{`steps[0].rate_limit.per: invalid duration "second": want a number and a unit, e.g. 500ms, 30s, 72h or 7d (line 5, column 33)`}},
		{"per an expression", `rate_limit: {limit: 1, per: "${ input.per }"}`,
			[]string{"steps[0].rate_limit.per: got an expression, want a duration from 1ms to 24h0m0s: a period is a literal, the same for every attempt (line 5, column 33)"}},
		{"burst zero", "rate_limit: {limit: 1, per: 1s, burst: 0}",
			[]string{"steps[0].rate_limit.burst: burst 0 is out of range: want 1 to 1000000 (1, the default, spaces every start) (line 5, column 44)"}},
		{"burst negative", "rate_limit: {limit: 1, per: 1s, burst: -3}",
			[]string{"steps[0].rate_limit.burst: burst -3 is out of range: want 1 to 1000000 (1, the default, spaces every start) (line 5, column 44)"}},
		{"burst too large", "rate_limit: {limit: 1, per: 1s, burst: 1000001}",
			[]string{"steps[0].rate_limit.burst: burst 1000001 is out of range: want 1 to 1000000 (line 5, column 44)"}},
		{"burst null", "rate_limit: {limit: 1, per: 1s, burst: null}",
			[]string{"steps[0].rate_limit.burst: got null, want an integer from 1 to 1000000 (line 5, column 44)"}},
		{"burst an expression", `rate_limit: {limit: 1, per: 1s, burst: "${ input.b }"}`,
			[]string{"steps[0].rate_limit.burst: got an expression, want an integer from 1 to 1000000: a burst is a literal, the same for every attempt (line 5, column 44)"}},
		{"rate_limit key a boolean", "rate_limit: {limit: 1, per: 1s, key: true}",
			[]string{"steps[0].rate_limit.key: got a boolean, " + keyType + " (line 5, column 42)"}},
		{"rate_limit key does not compile", `rate_limit: {limit: 1, per: 1s, key: "${ input.a + }"}`,
			[]string{`steps[0].rate_limit.key: expression "input.a +" does not compile: unexpected token EOF (at character 11) (line 5, column 42)`}},

		{"everything at once", "concurrency: {key: 7, limit: 0, policy: cancel_oldest}\nrate_limit: {limit: 2000000, per: 2d, burst: 0}",
			[]string{
				"steps[0].concurrency.key: got a number, " + keyType + " (line 5, column 24)",
				"steps[0].concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000 (line 5, column 34)",
				"steps[0].concurrency.policy: policy cancel_oldest " + cancels + " (line 5, column 45)",
				"steps[0].rate_limit.limit: limit 2000000 is out of range: want 1 to 1000000 (line 6, column 25)",
				"steps[0].rate_limit.per: per 48h0m0s is out of range: want 1ms to 24h0m0s (line 6, column 39)",
				"steps[0].rate_limit.burst: burst 0 is out of range: want 1 to 1000000 (1, the default, spaces every start) (line 6, column 50)",
			}},
		{"on a wait step", "name: wf\nsteps:\n  - id: w\n    wait: {event: e, key: k}\n    rate_limit: {limit: 1, per: 1s}\n",
			[]string{`steps[0].rate_limit: field "rate_limit" does not apply to wait steps (line 5, column 5)`}},
		{"on a workflow step", "name: wf\nsteps:\n  - id: w\n    workflow: other\n    concurrency: {limit: 1}\n",
			[]string{`steps[0].concurrency: field "concurrency" does not apply to workflow steps (line 5, column 5)`}},
		{"a foreach's is an integer", "name: wf\nsteps:\n  - id: l\n    foreach: [1]\n    as: it\n    concurrency: {limit: 1}\n    do: [{id: a, activity: p.q}]\n",
			[]string{`steps[0].concurrency: got a map, want an integer (line 6, column 18)`}},
		{"a loop variable out of its loop", "name: wf\nsteps:\n  - id: l\n    foreach: [1]\n    as: it\n    do: [{id: a, activity: p.q}]\n  - id: b\n    activity: p.q\n    rate_limit: {limit: 1, per: 1s, key: \"${ it }\"}\n",
			[]string{`steps[1].rate_limit.key: expression "it" does not compile: unknown name it (at character 2) (line 9, column 42)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := tt.doc
			if !strings.HasPrefix(doc, "name:") {
				doc = withActivity(doc)
			}
			_, err := Load([]byte(doc), nil)
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) {
				t.Fatalf("Load = %v, want a *weft.DefinitionError", err)
			}
			if got, want := problemLines(err), strings.Join(tt.want, "\n")+"\n"; got != want {
				t.Errorf("problems:\n%swant:\n%s", got, want)
			}
		})
	}
}

// TestStepLimitsValidate: limits built in code, not parsed, are checked
// as parsed ones are; a burst of 0 is 1, as package ratelimit reads it.
func TestStepLimitsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    *StepConcurrency
		r    *StepRateLimit
		want string // the problems, one a line; "" for none
	}{
		{"none", nil, nil, ""},
		{"the least", &StepConcurrency{Limit: 1}, &StepRateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Millisecond}}, ""},
		{"the most", &StepConcurrency{Limit: MaxConcurrencyLimit},
			&StepRateLimit{Limit: ratelimit.Limit{Count: ratelimit.MaxCount, Per: 24 * time.Hour, Burst: ratelimit.MaxCount}}, ""},
		{"zero values", &StepConcurrency{}, &StepRateLimit{},
			"steps[0].concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000\n" +
				"steps[0].rate_limit.limit: limit 0 is out of range: want 1 to 1000000\n" +
				"steps[0].rate_limit.per: per 0s is out of range: want 1ms to 24h0m0s\n"},
		{"burst too large", nil, &StepRateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Second, Burst: ratelimit.MaxCount + 1}},
			"steps[0].rate_limit.burst: burst 1000001 is out of range: want 1 to 1000000\n"},
		{"burst negative", nil, &StepRateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Second, Burst: -1}},
			"steps[0].rate_limit.burst: burst -1 is out of range: want 1 to 1000000\n"},
	}
	for _, tt := range tests {
		def := mustParse(t, withActivity(""))
		def.Steps[0].Activity.Concurrency, def.Steps[0].Activity.RateLimit = tt.c, tt.r
		got := ""
		if err := validateDefinition(def, nil); err != nil {
			got = problemLines(err)
		}
		if got != tt.want {
			t.Errorf("%s: problems\n%swant\n%s", tt.name, got, tt.want)
		}
	}
}

// TestStepLimitsEvalKey: the key an attempt's environment yields, for
// both limits, with literals, expressions over input, vars and loop
// variables, templates and no key at all, and how it fails.
func TestStepLimitsEvalKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", weft.MaxFairnessKey)
	env := Env{
		Input:  map[string]any{"customer": "c-42", "id": 7.0, "long": long, "list": []any{"a"}},
		Vars:   map[string]any{"account": map[string]any{"id": "acct-9"}, "vip": true},
		Locals: map[string]any{"it": map[string]any{"host": "api.example.com"}},
	}
	tests := []struct {
		name string
		key  string // the key field as written; "" for none
		want string // the key quoted, or the error
	}{
		{"no key: the step's own", "", `""`},
		{"an empty literal: the step's own", `""`, `""`},
		{"a literal", "partner-api", `"partner-api"`},
		{"an escaped literal", `"$${ customer }"`, `"${ customer }"`},
		{"over input", `"${ input.customer }"`, `"c-42"`},
		{"over vars", `"${ vars.account.id }"`, `"acct-9"`},
		{"over a loop variable", `"${ it.host }"`, `"api.example.com"`},
		{"a template over all three", `"${ input.customer }/${ vars.account.id }/${ it.host }"`, `"c-42/acct-9/api.example.com"`},
		{"a number", `"${ input.id }"`, `"7"`},
		{"a boolean", `"${ vars.vip }"`, `"true"`},
		{"null: the step's own", `"${ vars.missing }"`, `""`},
		{"the longest", `"${ input.long }"`, fmt.Sprintf("%q", long)},

		{"too long", `"${ input.long + 'y' }"`,
			`expression "${ input.long + 'y' }": the key is 257 bytes long; the limit is 256`},
		{"a list", `"${ input.list }"`,
			`expression "${ input.list }": got a list, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"a map", `"${ vars.account }"`,
			`expression "${ vars.account }": got a map, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"fails", `"${ vars.missing.id }"`,
			`expression "${ vars.missing.id }": cannot fetch id from <nil> (at character 15)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := ""
			if tt.key != "" {
				key = ", key: " + tt.key
			}
			d := mustParse(t, inLoop("concurrency: {limit: 2"+key+"}\n        rate_limit: {limit: 2, per: 1s"+key+"}"))
			s, _ := d.Step("a")
			for _, eval := range []struct {
				field string
				f     func(Env) (string, error)
			}{
				{"concurrency", s.Activity.Concurrency.EvalKey},
				{"rate_limit", s.Activity.RateLimit.EvalKey},
			} {
				key, err := eval.f(env)
				got := fmt.Sprintf("%q", key)
				if err != nil {
					var ee *EvalError
					switch {
					case !errors.As(err, &ee) || !errors.Is(err, ErrEval):
						t.Errorf("%s: error %v is not an *EvalError", eval.field, err)
					case key != "":
						t.Errorf("%s: with an error, EvalKey also returned %s", eval.field, got)
					}
					got = err.Error()
				}
				if got != tt.want {
					t.Errorf("%s: EvalKey\ngot  %s\nwant %s", eval.field, got, tt.want)
				}
			}
		})
	}
}

// TestStepLimitsHash: definitions without step limits keep the hash they
// had before the fields existed; the same limits written otherwise (the
// default burst or policy spelt out, a key of "", a per in other units)
// hash the same; any other value makes a new version; the canonical form
// parses back to the same limits.
func TestStepLimitsHash(t *testing.T) {
	t.Parallel()
	// What the code before the fields computed.
	for _, tt := range []struct{ doc, before string }{
		{"name: wf\nsteps:\n  - id: a\n    activity: p.q\n    input: \"${ input }\"\n    timeout: 10s\n",
			"18b98014bba4b4fb39445740cd152852f23f35903a3d5184f174b377f2e17c9b"},
		{"name: wf\nsteps:\n  - id: l\n    foreach: \"${ input.items }\"\n    as: it\n    concurrency: 3\n    do:\n      - id: a\n        activity: p.q\n        input: \"${ it }\"\n",
			"b0c6bd3588fa9293006bba8ec5ed85f344a14c656a167f30fb5d952a0e38c9f8"},
	} {
		if got := mustParse(t, tt.doc).Hash(); got != tt.before {
			t.Errorf("a definition without step limits hashes %s; before the fields it hashed %s:\n%s", got, tt.before, tt.doc)
		}
	}

	same := [][]string{
		{"concurrency: {limit: 2}", "concurrency: {limit: 2, policy: queue}", `concurrency: {limit: 2, key: ""}`, "concurrency: {policy: '', key: '', limit: 2}"},
		{"rate_limit: {limit: 10, per: 1s}", "rate_limit: {limit: 10, per: 1000ms, burst: 1}", `rate_limit: {key: "", per: 1s, limit: 10}`},
		{"rate_limit: {limit: 10, per: 1d, key: k}", "rate_limit:\n  key: 'k'\n  per: 24h\n  limit: 10"},
	}
	for _, group := range same {
		first := mustParse(t, withActivity(group[0]))
		for _, f := range group[1:] {
			if d := mustParse(t, withActivity(f)); d.Hash() != first.Hash() {
				t.Errorf("%q and %q hash differently:\n%s\n%s", group[0], f, first.Canonical(), d.Canonical())
			}
		}
	}

	differ := []string{
		"",
		"concurrency: {limit: 1}",
		"concurrency: {limit: 2}",
		"concurrency: {limit: 2, key: acme}",
		`concurrency: {limit: 2, key: "${ input.c }"}`,
		`concurrency: {limit: 2, key: "${input.c}"}`,
		`concurrency: {limit: 2, key: "$${ input.c }"}`,
		"rate_limit: {limit: 10, per: 1s}",
		"rate_limit: {limit: 10, per: 2s}",
		"rate_limit: {limit: 11, per: 1s}",
		"rate_limit: {limit: 10, per: 1s, burst: 2}",
		"rate_limit: {limit: 10, per: 1s, key: acme}",
		"rate_limit: {limit: 10, per: 1s, key: \"${ vars.c }\"}",
		"concurrency: {limit: 2, key: acme}\nrate_limit: {limit: 10, per: 1s, key: acme}",
		"concurrency: {limit: 10, key: acme}\nrate_limit: {limit: 2, per: 1s, key: acme}",
	}
	env := Env{Input: map[string]any{"c": "customer-7"}, Vars: map[string]any{"c": "v"}}
	seen := map[string]string{}
	for _, f := range differ {
		d := mustParse(t, withActivity(f))
		if other, dup := seen[d.Hash()]; dup {
			t.Errorf("%q and %q hash the same", f, other)
		}
		seen[d.Hash()] = f
		again := mustParse(t, string(d.Canonical()))
		if again.Hash() != d.Hash() {
			t.Errorf("%q: the canonical form does not parse back the same: %s", f, again.Canonical())
		}
		a1, a2 := d.Steps[0].Activity, again.Steps[0].Activity
		if got, want := stepLimits(a2), stepLimits(a1); got != want {
			t.Errorf("%q: the canonical form's limits are %s, the original's %s", f, got, want)
		}
		if a1.Concurrency != nil {
			k1, err1 := a1.Concurrency.EvalKey(env)
			k2, err2 := a2.Concurrency.EvalKey(env)
			if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Errorf("%q: the canonical form's concurrency key is %q %v, the original's %q %v", f, k2, err2, k1, err1)
			}
		}
		if a1.RateLimit != nil {
			k1, err1 := a1.RateLimit.EvalKey(env)
			k2, err2 := a2.RateLimit.EvalKey(env)
			if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Errorf("%q: the canonical form's rate limit key is %q %v, the original's %q %v", f, k2, err2, k1, err1)
			}
		}
	}
	if got, want := string(mustParse(t, withActivity("concurrency: {key: \"${ input.customer }\", limit: 2}\nrate_limit: {key: \"${ input.account }\", limit: 10, per: 1s, burst: 20}")).Canonical()),
		`{"name":"wf","persistence":"lazy","steps":[{"activity":"p.q","concurrency":{"key":"${ input.customer }","limit":2},"id":"a","rate_limit":{"burst":20,"key":"${ input.account }","limit":10,"per":"1s"},"retry":{"backoff":2,"initial_interval":"1s","jitter":false,"max_attempts":3,"max_interval":"1m40s"}}]}`; got != want {
		t.Errorf("canonical\n%s\nwant\n%s", got, want)
	}
}
