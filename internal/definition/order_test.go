package definition

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// withOrder is a valid definition with the given top-level fields (YAML
// lines) before its steps.
func withOrder(fields string) string {
	return "name: wf\n" + fields + "\nsteps: [{id: a, delay: 1s}]\n"
}

// TestOrder: what Order yields for an input, with literals, expressions
// and the defaults, and how it fails, naming the field and what is wrong.
func TestOrder(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", weft.MaxFairnessKey)
	tests := []struct {
		name   string
		fields string // the top-level fields
		input  any
		// want is "priority key weight" with the key quoted, or the error.
		want string
	}{
		{"defaults", "", nil, `3 "" 1`},
		{"literal priority", "priority: 1", nil, `1 "" 1`},
		{"lowest priority", "priority: 5", nil, `5 "" 1`},
		{"literal key", "fairness: {key: acme}", nil, `3 "acme" 1`},
		{"literal key and weight", "fairness: {key: acme, weight: 1000}", nil, `3 "acme" 1000`},
		{"empty literal key", `fairness: {key: ""}`, nil, `3 "" 1`},
		{"escaped literal key", `fairness: {key: "$${ tenant }"}`, nil, `3 "${ tenant }" 1`},
		{"all three computed",
			"priority: \"${ input.plan == 'pro' ? 2 : 4 }\"\nfairness: {key: \"${ input.tenant }\", weight: \"${ input.seats > 100 ? 10 : 1 }\"}",
			map[string]any{"plan": "pro", "tenant": "acme", "seats": 500.0}, `2 "acme" 10`},
		{"the other branch",
			"priority: \"${ input.plan == 'pro' ? 2 : 4 }\"",
			map[string]any{"plan": "free"}, `4 "" 1`},
		{"a JSON number without a fraction", `priority: "${ input.p }"`, map[string]any{"p": 2.0}, `2 "" 1`},
		{"null is the default priority", `priority: "${ input.p }"`, map[string]any{}, `3 "" 1`},
		{"null is the default weight", `fairness: {key: k, weight: "${ input.w }"}`, map[string]any{}, `3 "k" 1`},
		{"a template key", `fairness: {key: "tenant-${ input.id }"}`, map[string]any{"id": 42.0}, `3 "tenant-42" 1`},
		{"a number key", `fairness: {key: "${ input.id }"}`, map[string]any{"id": 42.0}, `3 "42" 1`},
		{"a boolean key", `fairness: {key: "${ input.vip }"}`, map[string]any{"vip": true}, `3 "true" 1`},
		{"a null key is the shared lane", `fairness: {key: "${ input.tenant }"}`, map[string]any{}, `3 "" 1`},
		{"the longest key", `fairness: {key: "${ input.t }"}`, map[string]any{"t": long}, fmt.Sprintf(`3 %q 1`, long)},
		{"a multibyte key", `fairness: {key: "${ input.t }"}`, map[string]any{"t": "zürich"}, `3 "zürich" 1`},

		{"priority too high", `priority: "${ input.p }"`, map[string]any{"p": 7.0},
			`priority: expression "${ input.p }": got 7, want an integer from 1 to 5`},
		{"priority zero", `priority: "${ input.p - 1 }"`, map[string]any{"p": 1},
			`priority: expression "${ input.p - 1 }": got 0, want an integer from 1 to 5`},
		{"priority with a fraction", `priority: "${ input.p }"`, map[string]any{"p": 2.5},
			`priority: expression "${ input.p }": got 2.5, want an integer from 1 to 5`},
		{"priority a string", `priority: "${ input.p }"`, map[string]any{"p": "2"},
			`priority: expression "${ input.p }": got a string, want an integer from 1 to 5`},
		{"priority a boolean", `priority: "${ input.p }"`, map[string]any{"p": true},
			`priority: expression "${ input.p }": got a boolean, want an integer from 1 to 5`},
		{"priority huge", `priority: "${ input.p }"`, map[string]any{"p": 1e300},
			`priority: expression "${ input.p }": got 1e+300, want an integer from 1 to 5`},
		{"priority fails", `priority: "${ input.a.b }"`, nil,
			`priority: expression "${ input.a.b }": cannot fetch a from <nil> (at character 8)`},
		{"weight zero", `fairness: {key: k, weight: "${ input.w }"}`, map[string]any{"w": 0},
			`fairness.weight: expression "${ input.w }": got 0, want an integer from 1 to 1000`},
		{"weight too large", `fairness: {key: k, weight: "${ input.w * 10 }"}`, map[string]any{"w": 101},
			`fairness.weight: expression "${ input.w * 10 }": got 1010, want an integer from 1 to 1000`},
		{"weight a list", `fairness: {key: k, weight: "${ input.w }"}`, map[string]any{"w": []any{1.0}},
			`fairness.weight: expression "${ input.w }": got a list, want an integer from 1 to 1000`},
		{"key too long", `fairness: {key: "${ input.t }"}`, map[string]any{"t": long + "y"},
			`fairness.key: expression "${ input.t }": the key is 257 bytes long; the limit is 256`},
		{"key too long in a template", `fairness: {key: "t-${ input.t }"}`, map[string]any{"t": strings.Repeat("x", 299)},
			`fairness.key: expression "t-${ input.t }": the key is 301 bytes long; the limit is 256`},
		{"key a map", `fairness: {key: "${ input.t }"}`, map[string]any{"t": map[string]any{"id": 1.0}},
			`fairness.key: expression "${ input.t }": got a map, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"key a list", `fairness: {key: "${ input.t }"}`, map[string]any{"t": []any{}},
			`fairness.key: expression "${ input.t }": got a list, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"key not UTF-8", `fairness: {key: "${ input.t }"}`, map[string]any{"t": "\xff"},
			`fairness.key: expression "${ input.t }": the key "\xff" is not valid UTF-8`},
		{"key fails", `fairness: {key: "${ input.a.b }"}`, nil,
			`fairness.key: expression "${ input.a.b }": cannot fetch a from <nil> (at character 8)`},
		{"priority is evaluated first", "priority: \"${ input.p }\"\nfairness: {key: \"${ input.a.b }\"}", map[string]any{"p": 9},
			`priority: expression "${ input.p }": got 9, want an integer from 1 to 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := mustParse(t, withOrder(tt.fields))
			o, err := def.Order(tt.input, 0)
			got := fmt.Sprintf("%d %q %d", o.Priority, o.FairnessKey, o.FairnessWeight)
			if err != nil {
				var oe *OrderError
				var ee *EvalError
				switch {
				case !errors.As(err, &oe) || !strings.HasPrefix(err.Error(), oe.Field+": "):
					t.Errorf("error %v is not an *OrderError naming its field", err)
				case !errors.As(err, &ee) || !errors.Is(err, ErrEval):
					t.Errorf("error %v does not wrap an *EvalError", err)
				case o != (weft.Order{}):
					t.Errorf("with an error, Order also returned %s", got)
				}
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Order(%v)\ngot  %s\nwant %s", tt.input, got, tt.want)
			}
		})
	}
}

// TestOrderParses: what each field holds once parsed; absent ones are
// zero.
func TestOrderParses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fields string
		want   string // priority=SRC key=SRC weight=SRC, "-" when zero; "fairness=nil"
	}{
		{"", "priority=- fairness=nil"},
		{"priority: 2", "priority=2 fairness=nil"},
		{`priority: "${ input.p }"`, "priority=${ input.p } fairness=nil"},
		{"fairness: {key: acme}", "priority=- key=acme weight=-"},
		{"fairness: {key: acme, weight: 4}", "priority=- key=acme weight=4"},
		{"fairness: {key: 2026-03-01}", "priority=- key=2026-03-01 weight=-"},
		{`fairness: {key: "${ input.t }", weight: "${ input.w }"}`, "priority=- key=${ input.t } weight=${ input.w }"},
		{`{"name": "wf", "priority": 1, "fairness": {"key": "k", "weight": 2}, "steps": [{"id": "a", "delay": "1s"}]}`, "priority=1 key=k weight=2"},
	}
	src := func(v Value) string {
		if v.IsZero() {
			return "-"
		}
		return fmt.Sprint(v.Source())
	}
	for _, tt := range tests {
		doc := tt.fields
		if !strings.HasPrefix(doc, "{") {
			doc = withOrder(doc)
		}
		d := mustParse(t, doc)
		got := "priority=" + src(d.Priority)
		if d.Fairness == nil {
			got += " fairness=nil"
		} else {
			got += " key=" + src(d.Fairness.Key) + " weight=" + src(d.Fairness.Weight)
		}
		if got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.fields, got, tt.want)
		}
	}
}

// TestOrderProblems: every problem of priority and fairness, at its path
// and line, when parsed; expressions see input only; a misspelt key is
// one problem with its suggestion, not also a missing key.
func TestOrderProblems(t *testing.T) {
	t.Parallel()
	const onlyInput = "; only input is in scope here: priority, fairness and concurrency are decided when the instance is created, before any step runs"
	tests := []struct {
		name, fields string
		want         []string // every problem, as Problem.String writes it
	}{
		{"priority too high", "priority: 9",
			[]string{"priority: priority 9 is out of range: want an integer from 1 (served first) to 5 (served last) (line 2, column 11)"}},
		{"priority zero", "priority: 0",
			[]string{"priority: priority 0 is out of range: want an integer from 1 (served first) to 5 (served last) (line 2, column 11)"}},
		{"priority negative", "priority: -1",
			[]string{"priority: priority -1 is out of range: want an integer from 1 (served first) to 5 (served last) (line 2, column 11)"}},
		{"priority a word", "priority: high",
			[]string{"priority: got a string, want an integer from 1 to 5 or a ${ } expression (line 2, column 11)"}},
		{"priority a quoted number", `priority: "2"`,
			[]string{"priority: got a string, want an integer from 1 to 5 or a ${ } expression (line 2, column 11)"}},
		{"priority a fraction", "priority: 2.5",
			[]string{"priority: got a number, want an integer from 1 to 5 or a ${ } expression (line 2, column 11)"}},
		{"priority null", "priority:",
			[]string{"priority: got null, want an integer from 1 to 5 or a ${ } expression (line 2, column 10)"}},
		{"priority a map", "priority: {level: 1}",
			[]string{"priority: got a map, want an integer from 1 to 5 or a ${ } expression (line 2, column 11)"}},
		{"priority a template", `priority: "p${ input.p }"`,
			[]string{"priority: a string template always yields a string; want a single ${ } expression yielding an integer (line 2, column 11)"}},
		{"priority yields a string", `priority: "${ 'high' }"`,
			[]string{`priority: expression "'high'" yields string, want an integer (line 2, column 11)`}},
		{"priority yields a boolean", `priority: "${ input.vip == true }"`,
			[]string{`priority: expression "input.vip == true" yields bool, want an integer (line 2, column 11)`}},
		{"priority names vars", `priority: "${ vars.tier }"`,
			[]string{`priority: expression "vars.tier" does not compile: unknown name vars (at character 2)` + onlyInput + " (line 2, column 11)"}},
		{"priority names vars through $env", `priority: "${ $env.vars.tier }"`,
			[]string{`priority: expression "$env.vars.tier" does not compile: unknown name vars (at character 7)` + onlyInput + " (line 2, column 11)"}},
		{"priority names a loop variable", `priority: "${ item }"`,
			[]string{`priority: expression "item" does not compile: unknown name item (at character 2) (line 2, column 11)`}},
		{"priority does not compile", `priority: "${ input.p + }"`,
			[]string{`priority: expression "input.p +" does not compile: unexpected token EOF (at character 11) (line 2, column 11)`}},
		{"priority unterminated", `priority: "${ input.p"`,
			[]string{"priority: unterminated ${ at character 1: no matching } (line 2, column 11)"}},
		{"misspelt priority", "priorty: 2",
			[]string{`priorty: unknown field "priorty"; did you mean priority? (line 2, column 1)`}},

		{"fairness not a map", "fairness: acme",
			[]string{"fairness: got a string, want a map with a key and an optional weight (line 2, column 11)"}},
		{"fairness without a key", "fairness: {weight: 2}",
			[]string{`fairness.key: required: the lane's key, e.g. "${ input.tenant }" (line 2, column 11)`}},
		{"fairness empty", "fairness: {}",
			[]string{`fairness.key: required: the lane's key, e.g. "${ input.tenant }" (line 2, column 11)`}},
		{"misspelt fields", "fairness:\n  kye: acme\n  wieght: 2\n  share: 3",
			[]string{
				`fairness.kye: unknown field "kye"; did you mean key? (line 3, column 3)`,
				`fairness.wieght: unknown field "wieght"; did you mean weight? (line 4, column 3)`,
				`fairness.share: unknown field "share" (line 5, column 3)`,
			}},
		{"key a number", "fairness: {key: 42}",
			[]string{"fairness.key: got a number, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 17)"}},
		{"key a boolean", "fairness: {key: true}",
			[]string{`fairness.key: got a boolean, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 17)`}},
		{"key null", "fairness:\n  key:\n  weight: 2",
			[]string{"fairness.key: got null, want a string or a ${ } expression (quote a number to use it as a key) (line 3, column 7)"}},
		{"key a list", "fairness: {key: [a]}",
			[]string{"fairness.key: got a list, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 17)"}},
		{"key too long", fmt.Sprintf("fairness: {key: %s}", strings.Repeat("k", 257)),
			[]string{"fairness.key: the key is 257 bytes long; the limit is 256 (line 2, column 17)"}},
		{"key yields a list", `fairness: {key: "${ [input.t] }"}`,
			[]string{`fairness.key: expression "[input.t]" yields []interface {}, want a string, a number or a boolean (line 2, column 17)`}},
		{"key yields a map", `fairness: {key: "${ {'id': input.t} }"}`,
			[]string{`fairness.key: expression "{'id': input.t}" yields map[string]interface {}, want a string, a number or a boolean (line 2, column 17)`}},
		{"key names vars", `fairness: {key: "t-${ vars.tenant }"}`,
			[]string{`fairness.key: expression "vars.tenant" does not compile: unknown name vars (at character 2)` + onlyInput + " (line 2, column 17)"}},
		{"weight zero", "fairness: {key: k, weight: 0}",
			[]string{"fairness.weight: weight 0 is out of range: want an integer from 1 to 1000 (line 2, column 28)"}},
		{"weight too large", "fairness: {key: k, weight: 1001}",
			[]string{"fairness.weight: weight 1001 is out of range: want an integer from 1 to 1000 (line 2, column 28)"}},
		{"weight a string", "fairness: {key: k, weight: heavy}",
			[]string{"fairness.weight: got a string, want an integer from 1 to 1000 or a ${ } expression (line 2, column 28)"}},
		{"weight names vars", `fairness: {key: k, weight: "${ vars.w }"}`,
			[]string{`fairness.weight: expression "vars.w" does not compile: unknown name vars (at character 2)` + onlyInput + " (line 2, column 28)"}},
		{"everything at once", "priority: 6\nfairness: {key: 1, weight: -2}",
			[]string{
				"priority: priority 6 is out of range: want an integer from 1 (served first) to 5 (served last) (line 2, column 11)",
				"fairness.key: got a number, want a string or a ${ } expression (quote a number to use it as a key) (line 3, column 17)",
				"fairness.weight: weight -2 is out of range: want an integer from 1 to 1000 (line 3, column 28)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(withOrder(tt.fields)), nil)
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

// TestOrderHash: definitions without priority and fairness keep the hash
// they had before the fields existed (the hashes below are what the code
// before computed), and so do those that spell out the defaults; any
// other value makes a new version; the canonical form parses back to the
// same fields.
func TestOrderHash(t *testing.T) {
	t.Parallel()
	const before = "f9a6842f69a4cf441f5461229fe91c3c8ef71167860b1c4384408b8ad81152f7"
	base := "name: wf\nsteps: [{id: a, delay: 1d12h}]\n"
	for _, fields := range []string{"", "priority: 3", `fairness: {key: ""}`, `fairness: {key: "", weight: 1}`, "priority: 3\nfairness: {key: ''}"} {
		if got := mustParse(t, "name: wf\n"+fields+"\nsteps: [{id: a, delay: 1d12h}]\n").Hash(); got != before {
			t.Errorf("%q hashes %s; without the fields it hashed %s", fields, got, before)
		}
	}
	if mustParse(t, base).Hash() != before {
		t.Fatal("the base definition's hash changed")
	}

	same := [][2]string{
		{"fairness: {key: acme}", "fairness: {key: acme, weight: 1}"},
		{"fairness: {key: acme, weight: 2}", "fairness:\n  weight: 2\n  key: 'acme'"},
	}
	for _, p := range same {
		if a, b := mustParse(t, withOrder(p[0])), mustParse(t, withOrder(p[1])); a.Hash() != b.Hash() {
			t.Errorf("%s and %s hash differently:\n%s\n%s", p[0], p[1], a.Canonical(), b.Canonical())
		}
	}
	differ := []string{
		"",
		"priority: 1",
		"priority: 5",
		`priority: "${ 3 }"`,
		`priority: "${ input.p }"`,
		`priority: "${input.p}"`,
		"fairness: {key: acme}",
		"fairness: {key: acme, weight: 2}",
		"fairness: {key: acme2}",
		`fairness: {key: "", weight: 2}`,
		`fairness: {key: "${ input.t }"}`,
		`fairness: {key: "${ input.t }", weight: "${ input.w }"}`,
		"priority: 1\nfairness: {key: acme}",
	}
	seen := map[string]string{}
	for _, f := range differ {
		d := mustParse(t, withOrder(f))
		if other, dup := seen[d.Hash()]; dup {
			t.Errorf("%q and %q hash the same", f, other)
		}
		seen[d.Hash()] = f
		again := mustParse(t, string(d.Canonical()))
		if again.Hash() != d.Hash() {
			t.Errorf("%q: the canonical form does not parse back the same: %s", f, again.Canonical())
		}
		o1, err1 := d.Order(map[string]any{"p": 2.0, "t": "x", "w": 3.0}, 0)
		o2, err2 := again.Order(map[string]any{"p": 2.0, "t": "x", "w": 3.0}, 0)
		if o1 != o2 || (err1 == nil) != (err2 == nil) {
			t.Errorf("%q: the canonical form orders otherwise: %+v %v, then %+v %v", f, o1, err1, o2, err2)
		}
	}
	if got, want := string(mustParse(t, withOrder("priority: 2\nfairness: {key: \"${ input.t }\"}")).Canonical()),
		`{"fairness":{"key":"${ input.t }","weight":1},"name":"wf","persistence":"lazy","priority":2,"steps":[{"delay":"1s","id":"a"}]}`; got != want {
		t.Errorf("canonical\n%s\nwant\n%s", got, want)
	}
}
