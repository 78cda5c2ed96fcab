package definition

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// FuzzParse checks that no input makes Parse, Load, Validate, Order,
// ConcurrencyKey, a step limit's EvalKey or SearchValues panic, that
// every problem has a path, that every search value is one of its
// attribute's type within the limits, and that an accepted definition's
// canonical encoding parses back to the same hash, the same order, the
// same concurrency key, the same step limits and the same search
// values.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: wf\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nsteps: [{id: a, activity: p.q, input: {x: '${ input.x }'}, retry: {max_attempts: 2}}]",
		"name: wf\nsteps: [{id: a, if: '${ true }', then: [{id: b, wait: {event: e, key: k}}]}]",
		"name: wf\nsteps: [{id: a, foreach: '${ input.items }', as: it, do: [{id: b, set: {x: 'n ${ it }'}}]}]",
		"name: wf\nsteps: [{id: a, parallel: [{steps: [{id: b, fail: {code: c}}]}]}]",
		"a: &x [*x]",
		"{\"name\": \"wf\", \"steps\": [{\"id\": \"a\", \"workflow\": \"wf\"}]}",
		"name: wf\npriority: 2\nfairness: {key: '${ input.tenant }', weight: '${ input.w }'}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\npriority: 3\nfairness: {key: ''}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nconcurrency: {key: '${ input.customer }', limit: 2, policy: cancel_oldest}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nsteps: [{id: a, activity: p.q, concurrency: {key: '${ input.customer }', limit: 2}, rate_limit: {key: '${ vars.a }', limit: 10, per: 1s, burst: 20}}]",
		"name: wf\nsteps: [{id: l, foreach: '${ input.items }', as: it, do: [{id: a, activity: p.q, rate_limit: {key: 'h-${ it }', limit: 1, per: 1d}}]}]",
		"name: wf\nsearch: {customer: {type: string, value: '${ input.customer }'}, seats: {type: number, value: '${ input.seats }'}, tags: {type: keywords, value: [x, '${ input.plan }']}}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nrecord: 5%\nsteps: [{id: a, activity: p.q, record: off}, {id: b, activity: p.q, record: all}]",
		"name: wf\nsearch:\n  due: {type: time, value: '${ vars.a?.due }'}\n  vip: {type: bool, value: \"${ input.plan == 'pro' }\"}\nsteps: [{id: a, set: {a: '${ input }'}}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := Load(data, fakeCatalog{})
		if err != nil {
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Load error %v is not a *weft.DefinitionError with problems", err)
			}
			for _, p := range ve.Problems {
				if p.Path == "" || p.Message == "" {
					t.Fatalf("problem without a path or message: %+v", p)
				}
			}
			return
		}
		again, err := Parse(def.Canonical())
		if err != nil {
			t.Fatalf("canonical encoding does not parse: %v\n%s", err, def.Canonical())
		}
		if again.Hash() != def.Hash() {
			t.Fatalf("canonical round trip changed the hash:\n%s\n%s", def.Canonical(), again.Canonical())
		}
		_ = validateDefinition(def, nil)
		inputs := []any{nil, map[string]any{"tenant": "acme", "w": 2.0, "plan": "pro", "seats": 500.0, "customer": "c-42", "items": []any{"x"}}}
		checkStepLimits(t, def, again, inputs)
		checkSearch(t, def, again, inputs)
		for _, in := range inputs {
			o1, err1 := def.Order(in, 0)
			o2, err2 := again.Order(in, 0)
			if o1 != o2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Fatalf("Order(%v) is %+v %v, and %+v %v after the canonical round trip", in, o1, err1, o2, err2)
			}
			if def.Concurrency == nil {
				continue
			}
			k1, err1 := def.ConcurrencyKey(in)
			k2, err2 := again.ConcurrencyKey(in)
			if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Fatalf("ConcurrencyKey(%v) is %q %v, and %q %v after the canonical round trip", in, k1, err1, k2, err2)
			}
		}
	})
}

// checkStepLimits fails t when an activity step's limits differ between
// def and again, its canonical round trip, or their keys do for one of
// inputs (with vars and every loop variable set to the input too).
func checkStepLimits(t *testing.T, def, again *Definition, inputs []any) {
	t.Helper()
	type limits struct {
		c *StepConcurrency
		r *StepRateLimit
	}
	var before []limits
	def.Walk(func(_ string, s *Step) bool {
		if s.Activity != nil {
			before = append(before, limits{s.Activity.Concurrency, s.Activity.RateLimit})
		}
		return true
	})
	i := 0
	again.Walk(func(path string, s *Step) bool {
		if s.Activity == nil {
			return true
		}
		if i >= len(before) {
			t.Fatalf("%s: an activity step the original has not", path)
		}
		b, a := before[i], limits{s.Activity.Concurrency, s.Activity.RateLimit}
		i++
		if (b.c == nil) != (a.c == nil) || (b.r == nil) != (a.r == nil) {
			t.Fatalf("%s: step limits %+v, and %+v after the canonical round trip", path, b, a)
		}
		if b.c != nil && b.c.Limit != a.c.Limit || b.r != nil && b.r.Limit.String() != a.r.Limit.String() {
			t.Fatalf("%s: step limits %+v %+v, and %+v %+v after the canonical round trip", path, b.c, b.r, a.c, a.r)
		}
		for _, in := range inputs {
			env := Env{Input: in, Vars: map[string]any{}, Locals: map[string]any{}}
			for _, name := range []string{"a", "b", "c", "x", "it", "item"} {
				env.Vars[name], env.Locals[name] = in, in
			}
			if b.c != nil {
				k1, err1 := b.c.EvalKey(env)
				k2, err2 := a.c.EvalKey(env)
				if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("%s: concurrency key %q %v, and %q %v after the canonical round trip", path, k1, err1, k2, err2)
				}
			}
			if b.r != nil {
				k1, err1 := b.r.EvalKey(env)
				k2, err2 := a.r.EvalKey(env)
				if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
					t.Fatalf("%s: rate limit key %q %v, and %q %v after the canonical round trip", path, k1, err1, k2, err2)
				}
			}
		}
		return true
	})
}

// checkSearch fails t when def's search values for one of inputs (with
// every variable set to the input too) differ from again's, its
// canonical round trip, or one is not of its attribute's type within the
// limits, or a problem names no attribute.
func checkSearch(t *testing.T, def, again *Definition, inputs []any) {
	t.Helper()
	types := def.SearchTypes()
	if fmt.Sprint(types) != fmt.Sprint(again.SearchTypes()) {
		t.Fatalf("search types %v, and %v after the canonical round trip", types, again.SearchTypes())
	}
	for _, in := range inputs {
		env := Env{Input: in, Vars: map[string]any{}}
		for _, name := range []string{"a", "b", "c", "x"} {
			env.Vars[name] = in
		}
		a1, p1 := def.SearchValues(env)
		a2, p2 := again.SearchValues(env)
		if fmt.Sprint(a1, p1) != fmt.Sprint(a2, p2) {
			t.Fatalf("SearchValues(%v) is %v %v, and %v %v after the canonical round trip", in, a1, p1, a2, p2)
		}
		for name, v := range a1 {
			if v.Type != types[name] {
				t.Fatalf("search value %s is a %s, declared a %s", name, v.Type, types[name])
			}
			for _, s := range append([]string{v.String}, v.Keywords...) {
				if searchString(s) != nil {
					t.Fatalf("search value %s holds %q", name, s)
				}
			}
			if len(v.Keywords) > weft.MaxSearchKeywords || v.Type == weft.SearchKeywords && len(v.Keywords) == 0 {
				t.Fatalf("search value %s has %d keywords", name, len(v.Keywords))
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("search value %s does not encode: %v", name, err)
			}
		}
		for _, p := range p1 {
			if _, ok := types[p.Name]; !ok || p.Err == nil {
				t.Fatalf("search problem %v", p)
			}
		}
	}
}
