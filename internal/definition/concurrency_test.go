package definition

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// TestConcurrencyParses: what a workflow's concurrency holds once parsed,
// with the defaults; absent, it is nil.
func TestConcurrencyParses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string // the top-level fields, or a whole JSON document
		want string // key=SRC limit=N policy=P, key "-" when zero; "nil"
	}{
		{"", "nil"},
		{"concurrency: {limit: 2}", "key=- limit=2 policy=queue"},
		{"concurrency: {limit: 1, policy: queue}", "key=- limit=1 policy=queue"},
		{"concurrency: {limit: 1, policy: ''}", "key=- limit=1 policy=queue"},
		{"concurrency: {limit: 10000, policy: cancel_newest}", "key=- limit=10000 policy=cancel_newest"},
		{"concurrency: {limit: 3, policy: cancel_oldest, key: acme}", "key=acme limit=3 policy=cancel_oldest"},
		{"concurrency: {limit: 3, key: 2026-03-01}", "key=2026-03-01 limit=3 policy=queue"},
		{`concurrency: {limit: 3, key: ""}`, "key= limit=3 policy=queue"},
		{"concurrency:\n  key: \"${ input.customer }\"\n  limit: 2\n  policy: queue", "key=${ input.customer } limit=2 policy=queue"},
		{`concurrency: {limit: 2, key: "customer-${ input.id }"}`, "key=customer-${ input.id } limit=2 policy=queue"},
		{`{"name": "wf", "concurrency": {"key": "k", "limit": 5, "policy": "cancel_oldest"}, "steps": [{"id": "a", "delay": "1s"}]}`,
			"key=k limit=5 policy=cancel_oldest"},
	}
	for _, tt := range tests {
		doc := tt.doc
		if !strings.HasPrefix(doc, "{") {
			doc = withOrder(doc)
		}
		d := mustParse(t, doc)
		got := "nil"
		if c := d.Concurrency; c != nil {
			key := "-"
			if !c.Key.IsZero() {
				key = fmt.Sprint(c.Key.Source())
			}
			got = fmt.Sprintf("key=%s limit=%d policy=%s", key, c.Limit, c.Policy)
		}
		if got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.doc, got, tt.want)
		}
	}
}

// TestConcurrencyProblems: every problem of a workflow's concurrency, at
// its path and line, when loaded; the key sees input only; a misspelt
// field is one problem with its suggestion, not also a missing limit.
func TestConcurrencyProblems(t *testing.T) {
	t.Parallel()
	const onlyInput = "; only input is in scope here: priority, fairness and concurrency are decided when the instance is created, before any step runs"
	const limitRequired = "concurrency.limit: required: how many instances of one key may run at once, from 1 to 10000"
	tests := []struct {
		name, fields string
		want         []string // every problem, as Problem.String writes it
	}{
		{"not a map", "concurrency: 2",
			[]string{"concurrency: got a number, want a map with a limit, an optional key and an optional policy (line 2, column 14)"}},
		{"a list", "concurrency: [2]",
			[]string{"concurrency: got a list, want a map with a limit, an optional key and an optional policy (line 2, column 14)"}},
		{"null", "concurrency:",
			[]string{"concurrency: got null, want a map with a limit, an optional key and an optional policy (line 2, column 13)"}},
		{"empty", "concurrency: {}",
			[]string{limitRequired + " (line 2, column 14)"}},
		{"no limit", "concurrency:\n  key: acme\n  policy: queue",
			[]string{limitRequired + " (line 3, column 3)"}},
		{"misspelt concurrency", "concurency: {limit: 2}",
			[]string{`concurency: unknown field "concurency"; did you mean concurrency? (line 2, column 1)`}},
		{"misspelt limit", "concurrency: {limt: 2}",
			[]string{`concurrency.limt: unknown field "limt"; did you mean limit? (line 2, column 15)`}},
		{"misspelt fields", "concurrency:\n  kye: acme\n  limit: 2\n  polciy: queue\n  burst: 3",
			[]string{
				`concurrency.kye: unknown field "kye"; did you mean key? (line 3, column 3)`,
				`concurrency.polciy: unknown field "polciy"; did you mean policy? (line 5, column 3)`,
				`concurrency.burst: unknown field "burst" (line 6, column 3)`,
			}},
		{"unknown field, no limit", "concurrency: {key: k, per: 1s}",
			[]string{
				limitRequired + " (line 2, column 14)",
				`concurrency.per: unknown field "per" (line 2, column 23)`,
			}},

		{"limit zero", "concurrency: {limit: 0}",
			[]string{"concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit negative", "concurrency: {limit: -1}",
			[]string{"concurrency.limit: limit -1 is out of range: want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit too large", "concurrency: {limit: 10001}",
			[]string{"concurrency.limit: limit 10001 is out of range: want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit beyond int64", "concurrency: {limit: 9223372036854775808}",
			[]string{"concurrency.limit: integer 9223372036854775808 is out of range (line 2, column 22)"}},
		{"limit a fraction", "concurrency: {limit: 2.5}",
			[]string{"concurrency.limit: got a number, want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit a quoted number", `concurrency: {limit: "2"}`,
			[]string{"concurrency.limit: got a string, want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit a boolean", "concurrency: {limit: true}",
			[]string{"concurrency.limit: got a boolean, want an integer from 1 to 10000 (line 2, column 22)"}},
		{"limit null", "concurrency:\n  limit:",
			[]string{"concurrency.limit: got null, want an integer from 1 to 10000 (line 3, column 9)"}},
		{"limit an expression", `concurrency: {limit: "${ input.n }"}`,
			[]string{"concurrency.limit: got an expression, want an integer from 1 to 10000: a limit is a literal, the same for every instance (line 2, column 22)"}},

		{"unknown policy", "concurrency: {limit: 2, policy: drop}",
			[]string{`concurrency.policy: unknown policy "drop"; want queue (the default), cancel_newest or cancel_oldest (line 2, column 33)`}},
		{"misspelt policy", "concurrency: {limit: 2, policy: cancel-newest}",
			[]string{`concurrency.policy: unknown policy "cancel-newest"; did you mean cancel_newest? (line 2, column 33)`}},
		{"policy in capitals", "concurrency: {limit: 2, policy: Queue}",
			[]string{`concurrency.policy: unknown policy "Queue"; did you mean queue? (line 2, column 33)`}},
		{"policy a number", "concurrency: {limit: 2, policy: 1}",
			[]string{"concurrency.policy: got a number, want a string (line 2, column 33)"}},
		{"policy an expression", `concurrency: {limit: 2, policy: "${ input.p }"}`,
			[]string{`concurrency.policy: unknown policy "${ input.p }"; want queue (the default), cancel_newest or cancel_oldest (line 2, column 33)`}},

		{"key a number", "concurrency: {limit: 2, key: 42}",
			[]string{"concurrency.key: got a number, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 30)"}},
		{"key a boolean", "concurrency: {limit: 2, key: true}",
			[]string{"concurrency.key: got a boolean, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 30)"}},
		{"key null", "concurrency:\n  key:\n  limit: 2",
			[]string{"concurrency.key: got null, want a string or a ${ } expression (quote a number to use it as a key) (line 3, column 7)"}},
		{"key a map", "concurrency: {limit: 2, key: {id: 1}}",
			[]string{"concurrency.key: got a map, want a string or a ${ } expression (quote a number to use it as a key) (line 2, column 30)"}},
		{"key too long", fmt.Sprintf("concurrency: {limit: 2, key: %s}", strings.Repeat("k", 257)),
			[]string{"concurrency.key: the key is 257 bytes long; the limit is 256 (line 2, column 30)"}},
		{"key yields a list", `concurrency: {limit: 2, key: "${ [input.c] }"}`,
			[]string{`concurrency.key: expression "[input.c]" yields []interface {}, want a string, a number or a boolean (line 2, column 30)`}},
		{"key names vars", `concurrency: {limit: 2, key: "c-${ vars.customer }"}`,
			[]string{`concurrency.key: expression "vars.customer" does not compile: unknown name vars (at character 2)` + onlyInput + " (line 2, column 30)"}},
		{"key does not compile", `concurrency: {limit: 2, key: "${ input.c + }"}`,
			[]string{`concurrency.key: expression "input.c +" does not compile: unexpected token EOF (at character 11) (line 2, column 30)`}},
		{"key unterminated", `concurrency: {limit: 2, key: "${ input.c"}`,
			[]string{"concurrency.key: unterminated ${ at character 1: no matching } (line 2, column 30)"}},

		{"everything at once", "concurrency:\n  key: 7\n  limit: 0\n  policy: fifo",
			[]string{
				"concurrency.key: got a number, want a string or a ${ } expression (quote a number to use it as a key) (line 3, column 8)",
				"concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000 (line 4, column 10)",
				`concurrency.policy: unknown policy "fifo"; want queue (the default), cancel_newest or cancel_oldest (line 5, column 11)`,
			}},
		{"beside fairness", "fairness: {key: '${ vars.t }'}\nconcurrency: {limit: 20000}",
			[]string{
				`fairness.key: expression "vars.t" does not compile: unknown name vars (at character 2)` + onlyInput + " (line 2, column 17)",
				"concurrency.limit: limit 20000 is out of range: want an integer from 1 to 10000 (line 3, column 22)",
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

// TestConcurrencyValidates: a Concurrency built in code, not parsed, is
// checked as a parsed one is; an empty policy is the default.
func TestConcurrencyValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		c    Concurrency
		want string // the problems, one a line; "" for none
	}{
		{"the least", Concurrency{Limit: 1}, ""},
		{"the most", Concurrency{Limit: MaxConcurrencyLimit, Policy: slots.CancelOldest}, ""},
		{"no limit", Concurrency{Policy: slots.Queue}, "concurrency.limit: limit 0 is out of range: want an integer from 1 to 10000\n"},
		{"unknown policy", Concurrency{Limit: 2, Policy: "lifo"},
			`concurrency.policy: unknown policy "lifo"; want queue (the default), cancel_newest or cancel_oldest` + "\n"},
	}
	for _, tt := range tests {
		def := mustParse(t, withOrder(""))
		def.Concurrency = &tt.c
		got := ""
		if err := validateDefinition(def, nil); err != nil {
			got = problemLines(err)
		}
		if got != tt.want {
			t.Errorf("%s: problems\n%swant\n%s", tt.name, got, tt.want)
		}
	}
}

// TestConcurrencyKey: the key an input yields, with literals, expressions,
// templates and no key at all, and how it fails, naming the field.
func TestConcurrencyKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", weft.MaxFairnessKey)
	tests := []struct {
		name string
		key  string // the key field of `concurrency: {limit: 2, key: …}`; "" for none
		// input is the instance input; want the key quoted, or the error.
		input any
		want  string
	}{
		{"no key", "", map[string]any{"customer": "c-1"}, `""`},
		{"no key, no input", "", nil, `""`},
		{"a literal", "acme", nil, `"acme"`},
		{"an empty literal", `""`, nil, `""`},
		{"an escaped literal", `"$${ customer }"`, nil, `"${ customer }"`},
		{"an expression", `"${ input.customer }"`, map[string]any{"customer": "c-42"}, `"c-42"`},
		{"a template", `"customer-${ input.id }"`, map[string]any{"id": 42.0}, `"customer-42"`},
		{"a number", `"${ input.id }"`, map[string]any{"id": 42.0}, `"42"`},
		{"a fraction", `"${ input.id }"`, map[string]any{"id": 4.5}, `"4.5"`},
		{"a boolean", `"${ input.vip }"`, map[string]any{"vip": false}, `"false"`},
		{"null is the one key", `"${ input.customer }"`, map[string]any{}, `""`},
		{"the longest", `"${ input.c }"`, map[string]any{"c": long}, fmt.Sprintf("%q", long)},
		{"multibyte", `"${ input.c }"`, map[string]any{"c": "zürich"}, `"zürich"`},
		{"computed", `"${ input.plan == 'pro' ? input.customer : 'shared' }"`, map[string]any{"plan": "free", "customer": "c-1"}, `"shared"`},

		{"too long", `"${ input.c }"`, map[string]any{"c": long + "y"},
			`concurrency.key: expression "${ input.c }": the key is 257 bytes long; the limit is 256`},
		{"too long in a template", `"c-${ input.c }"`, map[string]any{"c": long},
			`concurrency.key: expression "c-${ input.c }": the key is 258 bytes long; the limit is 256`},
		{"a map", `"${ input.c }"`, map[string]any{"c": map[string]any{"id": 1.0}},
			`concurrency.key: expression "${ input.c }": got a map, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"a list", `"${ input.c }"`, map[string]any{"c": []any{"a"}},
			`concurrency.key: expression "${ input.c }": got a list, want a string (a number or a boolean is written as in JSON, null as "")`},
		{"not UTF-8", `"${ input.c }"`, map[string]any{"c": "\xfe"},
			`concurrency.key: expression "${ input.c }": the key "\xfe" is not valid UTF-8`},
		{"fails", `"${ input.a.b }"`, nil,
			`concurrency.key: expression "${ input.a.b }": cannot fetch a from <nil> (at character 8)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fields := "concurrency: {limit: 2}"
			if tt.key != "" {
				fields = "concurrency: {limit: 2, key: " + tt.key + "}"
			}
			def := mustParse(t, withOrder(fields))
			key, err := def.ConcurrencyKey(tt.input)
			got := fmt.Sprintf("%q", key)
			if err != nil {
				var oe *OrderError
				var ee *EvalError
				switch {
				case !errors.As(err, &oe) || oe.Field != FieldConcurrencyKey:
					t.Errorf("error %v is not an *OrderError naming %s", err, FieldConcurrencyKey)
				case !errors.As(err, &ee) || !errors.Is(err, ErrEval):
					t.Errorf("error %v does not wrap an *EvalError", err)
				case key != "":
					t.Errorf("with an error, ConcurrencyKey also returned %s", got)
				}
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("ConcurrencyKey(%v)\ngot  %s\nwant %s", tt.input, got, tt.want)
			}
		})
	}
}

// TestConcurrencyHash: a definition without concurrency keeps the hash it
// had before the field existed; the same limit written otherwise (the
// default policy spelt out, a key of "") hashes the same; any other
// value makes a new version; the canonical form parses back to the same
// concurrency.
func TestConcurrencyHash(t *testing.T) {
	t.Parallel()
	// What the code before the field computed (TestOrderHash's base).
	const before = "f9a6842f69a4cf441f5461229fe91c3c8ef71167860b1c4384408b8ad81152f7"
	if got := mustParse(t, "name: wf\nsteps: [{id: a, delay: 1d12h}]\n").Hash(); got != before {
		t.Fatalf("a definition without concurrency hashes %s; before the field it hashed %s", got, before)
	}

	same := [][]string{
		{"concurrency: {limit: 2}", "concurrency: {limit: 2, policy: queue}", `concurrency: {limit: 2, key: ""}`, "concurrency: {policy: '', key: '', limit: 2}"},
		{"concurrency: {limit: 2, key: acme}", "concurrency:\n  policy: queue\n  key: 'acme'\n  limit: 2"},
	}
	for _, group := range same {
		first := mustParse(t, withOrder(group[0]))
		for _, f := range group[1:] {
			if d := mustParse(t, withOrder(f)); d.Hash() != first.Hash() {
				t.Errorf("%q and %q hash differently:\n%s\n%s", group[0], f, first.Canonical(), d.Canonical())
			}
		}
	}

	differ := []string{
		"",
		"concurrency: {limit: 1}",
		"concurrency: {limit: 2}",
		"concurrency: {limit: 2, policy: cancel_newest}",
		"concurrency: {limit: 2, policy: cancel_oldest}",
		"concurrency: {limit: 2, key: acme}",
		"concurrency: {limit: 2, key: acme2}",
		`concurrency: {limit: 2, key: "${ input.c }"}`,
		`concurrency: {limit: 2, key: "${input.c}"}`,
		`concurrency: {limit: 2, key: "$${ input.c }"}`,
		"fairness: {key: acme}",
		"fairness: {key: acme}\nconcurrency: {limit: 2, key: acme}",
	}
	input := map[string]any{"c": "customer-7"}
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
		if (d.Concurrency == nil) != (again.Concurrency == nil) {
			t.Errorf("%q: the canonical form has concurrency %+v, the original %+v", f, again.Concurrency, d.Concurrency)
			continue
		}
		if d.Concurrency == nil {
			continue
		}
		k1, err1 := d.ConcurrencyKey(input)
		k2, err2 := again.ConcurrencyKey(input)
		c1, c2 := d.Concurrency, again.Concurrency
		if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) || c1.Limit != c2.Limit || c1.Policy != c2.Policy {
			t.Errorf("%q: the canonical form's concurrency is %d %s %q %v, the original's %d %s %q %v",
				f, c2.Limit, c2.Policy, k2, err2, c1.Limit, c1.Policy, k1, err1)
		}
	}
	if got, want := string(mustParse(t, withOrder("concurrency: {key: \"${ input.customer }\", limit: 2}")).Canonical()),
		`{"concurrency":{"key":"${ input.customer }","limit":2,"policy":"queue"},"name":"wf","persistence":"lazy","steps":[{"delay":"1s","id":"a"}]}`; got != want {
		t.Errorf("canonical\n%s\nwant\n%s", got, want)
	}
}
