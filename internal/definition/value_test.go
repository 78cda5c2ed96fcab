package definition

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

func TestValueTypes(t *testing.T) {
	t.Parallel()
	env := Env{
		Input:  map[string]any{"total": 1200, "id": "o-1", "items": []any{"a", "b"}, "price": 9.5},
		Vars:   map[string]any{"charge": map[string]any{"id": "ch_1"}},
		Locals: map[string]any{"item": "a"},
	}
	tests := []struct {
		name string
		src  any
		want any
	}{
		{"number stays number", "${ input.total }", 1200},
		{"arithmetic", "${ input.total * 2 }", 2400},
		{"float", "${ input.price }", 9.5},
		{"list stays list", "${ input.items }", []any{"a", "b"}},
		{"map stays map", "${ vars.charge }", map[string]any{"id": "ch_1"}},
		{"bool", "${ input.total > 1000 }", true},
		{"null", "${ input.missing }", nil},
		{"interpolation makes a string", "order ${ input.id } for ${ input.total }", "order o-1 for 1200"},
		{"two expressions", "${ input.id }${ input.total }", "o-11200"},
		{"float in template", "${ input.price } EUR", "9.5 EUR"},
		{"list in template", "items: ${ input.items }", `items: ["a","b"]`},
		{"null in template", "[${ input.missing }]", "[]"},
		{"escape", "$${ not an expression }", "${ not an expression }"},
		{"braces inside", "${ {a: 1}.a }", 1},
		{"brace in string literal", `${ "}" + input.id }`, "}o-1"},
		{"loop variable", "${ item }", "a"},
		{"nested", map[string]any{"amount": "${ input.total }", "list": []any{"${ item }", 2, true, nil}},
			map[string]any{"amount": 1200, "list": []any{"a", 2, true, nil}}},
		{"constant string", "plain", "plain"},
		{"constant number", 3.5, 3.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, err := newValue(tt.src, "item")
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Eval(env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestValueEvalFresh(t *testing.T) {
	t.Parallel()
	v, err := newValue(map[string]any{"a": []any{1}})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := v.Eval(Env{})
	first.(map[string]any)["a"].([]any)[0] = 99
	second, _ := v.Eval(Env{})
	if second.(map[string]any)["a"].([]any)[0] != 1 {
		t.Errorf("Eval returned shared state: %v", second)
	}
}

func TestConditionsAndLists(t *testing.T) {
	t.Parallel()
	def := mustParse(t, `name: wf
steps:
  - id: big
    if: "${ input.total > 1000 }"
    then: [{id: a, delay: 1s}]
  - id: loop
    foreach: "${ input.items }"
    as: item
    do: [{id: b, set: {last: "${ item }"}}]
  - id: dyn
    if: "${ input.flag }"
    then: [{id: c, delay: 1s}]
`)
	env := Env{Input: map[string]any{"total": 5, "items": []any{1, 2}, "flag": "yes"}}
	if b, err := def.Steps[0].If.Cond.EvalBool(env); err != nil || b {
		t.Errorf("EvalBool = %v, %v", b, err)
	}
	if l, err := def.Steps[1].Foreach.Items.EvalList(env); err != nil || len(l) != 2 {
		t.Errorf("EvalList = %v, %v", l, err)
	}
	set := def.Steps[1].Foreach.Do[0].Set[0].Value
	if got, err := set.Eval(env.With("item", 7)); err != nil || got != 7 {
		t.Errorf("set in loop = %v, %v", got, err)
	}
	_, err := def.Steps[2].If.Cond.EvalBool(env)
	var ee *EvalError
	if !errors.As(err, &ee) || !errors.Is(err, ErrEval) || ee.Source != "${ input.flag }" {
		t.Errorf("EvalBool of a string = %v, want an *EvalError", err)
	}
	_, err = def.Steps[1].Foreach.Items.EvalList(Env{Input: map[string]any{"items": 3}})
	if !errors.Is(err, ErrEval) {
		t.Errorf("EvalList of a number = %v", err)
	}
	key, _ := newValue("${ input.items }")
	if s, err := key.EvalString(env); err != nil || s != "[1,2]" {
		t.Errorf("EvalString = %q, %v", s, err)
	}
	bad, _ := newValue("${ input.a.b }")
	if _, err := bad.Eval(Env{Input: map[string]any{}}); !errors.Is(err, ErrEval) {
		t.Errorf("runtime error = %v", err)
	}
}

// TestNonFiniteResultsAreEvalErrors: expr's / divides as floats, so 1/0 is
// +Inf and 0/0 NaN. JSON holds neither, and every result goes into JSON,
// so an expression yielding one, at any depth or inside a template, fails
// with an *EvalError naming the expression, the value and where it is.
// Finite floats and other JSON values pass.
func TestNonFiniteResultsAreEvalErrors(t *testing.T) {
	t.Parallel()
	env := Env{Input: map[string]any{"n": 1.0, "zero": 0}}
	tests := []struct {
		src  any
		want string // in the error; "" for no error
	}{
		{"${ 1/0 }", `expression "${ 1/0 }": yields +Inf, which JSON cannot hold`},
		{"${ -input.n / input.zero }", `yields -Inf,`},
		{"${ 0/0 }", `yields NaN,`},
		{"${ [1, 2/0] }", `yields +Inf at [1],`},
		{"${ {b: 1/0, a: {c: [0/0]}} }", `yields NaN at a.c[0],`},
		{map[string]any{"ok": 1, "bad": "${ 1/0 }"}, `expression "${ 1/0 }": yields +Inf,`},
		{"ratio ${ 1/0 }", `expression "${ 1/0 }": yields +Inf,`},
		{"${ 1/4 }", ""},
		{"${ [1.5, {a: input.n / 2}] }", ""},
		{"${ now() }", ""},
	}
	for _, tt := range tests {
		v, err := newValue(tt.src)
		if err != nil {
			t.Fatalf("newValue(%v): %v", tt.src, err)
		}
		got, err := v.Eval(env)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Eval(%v) = %v", tt.src, err)
			}
			continue
		}
		var ee *EvalError
		if !errors.As(err, &ee) || !errors.Is(err, ErrEval) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Eval(%v) = %v, %v; want an *EvalError containing %q", tt.src, got, err, tt.want)
		}
	}
}

// newValue compiles src, a JSON-like Go value (nil, bool, int, float64,
// string, []any, map[string]any) whose strings may hold `${ expr }`
// expressions. locals names the loop variables in scope besides `input` and
// `vars`. The error lists every expression that does not compile.
func newValue(src any, locals ...string) (Value, error) {
	var c compiler
	c.scope = locals
	v := c.value(src, "value", wantAny)
	if len(c.problems) > 0 {
		return Value{}, &weft.DefinitionError{Problems: c.problems}
	}
	return v, nil
}
