package definition

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// searchAttrs writes a definition's search attributes one a line, as
// name:type=source, with "-" for a zero value; "nil" when there are
// none.
func searchAttrs(d *Definition) string {
	if d.Search == nil {
		return "nil"
	}
	var b strings.Builder
	for _, a := range d.Search {
		src := "-"
		if !a.Value.IsZero() {
			j, _ := json.Marshal(a.Value)
			src = string(j)
		}
		fmt.Fprintf(&b, "%s:%s=%s\n", a.Name, a.Type, src)
	}
	return b.String()
}

// TestSearchParses: what a workflow's search holds once parsed, sorted by
// name, values as written; absent, it is nil.
func TestSearchParses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		doc  string // the top-level fields, or a whole JSON document
		want string // searchAttrs
	}{
		{"", "nil"},
		{"search: {}", ""},
		{`search: {customer: {type: string, value: "${ input.customer }"}}`, `customer:string="${ input.customer }"` + "\n"},
		{"search:\n  tags: {value: [a, \"${ vars.t }\"], type: keywords}\n  amount: {type: number, value: 12}\n  vip:\n    type: bool\n    value: true\n",
			"amount:number=12\ntags:keywords=[\"a\",\"${ vars.t }\"]\nvip:bool=true\n"},
		{"search: {due: {type: time, value: 2026-03-01T09:00:00Z}}", `due:time="2026-03-01T09:00:00Z"` + "\n"},
		{`search: {label: {type: string, value: "order ${ input.id } of $${ x }"}}`, `label:string="order ${ input.id } of $${ x }"` + "\n"},
		{`{"name": "wf", "search": {"b": {"type": "string", "value": "x"}, "a": {"type": "number", "value": 1.5}}, "steps": [{"id": "a", "delay": "1s"}]}`,
			"a:number=1.5\nb:string=\"x\"\n"},
	}
	for _, tt := range tests {
		doc := tt.doc
		if !strings.HasPrefix(doc, "{") {
			doc = withOrder(doc)
		}
		if got := searchAttrs(mustParse(t, doc)); got != tt.want {
			t.Errorf("%s:\ngot  %q\nwant %q", tt.doc, got, tt.want)
		}
	}
}

// TestSearchProblems: every problem of a workflow's search, at its path
// and line, when loaded: the shape, the names, the types (with a
// suggestion), the values against their types; a misspelt field is one
// problem with its suggestion, not also a missing one.
func TestSearchProblems(t *testing.T) {
	t.Parallel()
	const quote = " (quote a number or a boolean to use it as a string)"
	tests := []struct {
		name, fields string
		want         []string // every problem, as Problem.String writes it
	}{
		{"not a map", "search: 2",
			[]string{"search: got a number, want a map of search attribute names to {type, value} (line 2, column 9)"}},
		{"a list", "search: [customer]",
			[]string{"search: got a list, want a map of search attribute names to {type, value} (line 2, column 9)"}},
		{"misspelt search", "serach: {}",
			[]string{`serach: unknown field "serach"; did you mean search? (line 2, column 1)`}},
		{"an attribute not a map", `search: {customer: "${ input.customer }"}`,
			[]string{`search.customer: got a string, want a map with a type and a value, e.g. {type: string, value: "${ input.customer }"} (line 2, column 20)`}},
		{"misspelt type", "search: {customer: {typ: string, value: x}}",
			[]string{`search.customer.typ: unknown field "typ"; did you mean type? (line 2, column 21)`}},
		{"misspelt value", "search: {customer: {type: string, vaule: x}}",
			[]string{`search.customer.vaule: unknown field "vaule"; did you mean value? (line 2, column 35)`}},
		{"an unknown field", "search: {customer: {type: string, value: x, index: true}}",
			[]string{`search.customer.index: unknown field "index" (line 2, column 45)`}},
		{"no value", "search: {customer: {type: string}}",
			[]string{"search.customer.value: required: a literal or a ${ } expression over input and vars (line 2, column 20)"}},
		{"no type", "search: {customer: {value: x}}",
			[]string{"search.customer.type: required: one of string, number, bool, time or keywords (line 2, column 20)"}},
		{"empty", "search:\n  customer: {}",
			[]string{
				"search.customer.type: required: one of string, number, bool, time or keywords (line 3, column 13)",
				"search.customer.value: required: a literal or a ${ } expression over input and vars (line 3, column 13)",
			}},

		{"type in capitals", "search: {customer: {type: String, value: x}}",
			[]string{`search.customer.type: unknown type "String"; did you mean string? (line 2, column 27)`}},
		{"type misspelt", "search: {tags: {type: keyword, value: x}}",
			[]string{`search.tags.type: unknown type "keyword"; did you mean keywords? (line 2, column 23)`}},
		{"type of another system", "search: {amount: {type: integer, value: 1}}",
			[]string{`search.amount.type: unknown type "integer"; did you mean number? (line 2, column 25)`}},
		{"type boolean", "search: {vip: {type: boolean, value: true}}",
			[]string{`search.vip.type: unknown type "boolean"; did you mean bool? (line 2, column 22)`}},
		{"type unknown", "search: {blob: {type: bytes, value: x}}",
			[]string{`search.blob.type: unknown type "bytes"; want one of string, number, bool, time or keywords (line 2, column 23)`}},
		{"type a number", "search: {customer: {type: 1, value: x}}",
			[]string{"search.customer.type: got a number, want a string (line 2, column 27)"}},
		{"type an expression", `search: {customer: {type: "${ input.t }", value: x}}`,
			[]string{`search.customer.type: unknown type "${ input.t }"; want one of string, number, bool, time or keywords (line 2, column 27)`}},

		{"name in capitals", "search:\n  Customer:\n    type: string\n    value: x",
			[]string{`search.Customer: invalid search attribute name "Customer": want a lower-case letter, then lower-case letters, digits or _; did you mean customer? (line 3, column 3)`}},
		{"name with a dash", "search: {order-id: {type: string, value: x}}",
			[]string{`search.order-id: invalid search attribute name "order-id": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`}},
		{"name with a dot", "search: {a.b: {type: string, value: x}}",
			[]string{`search["a.b"]: invalid search attribute name "a.b": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`}},
		{"name starting with _", "search: {_x: {type: string, value: x}}",
			[]string{`search._x: invalid search attribute name "_x": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`}},
		{"name starting with a digit", "search: {1x: {type: string, value: x}}",
			[]string{`search.1x: invalid search attribute name "1x": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`}},
		{"name empty", `search: {"": {type: string, value: x}}`,
			[]string{`search[""]: invalid search attribute name "": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`}},
		{"name too long", fmt.Sprintf("search: {%s: {type: string, value: x}}", strings.Repeat("a", 65)),
			[]string{"search." + strings.Repeat("a", 65) + ": the search attribute name is 65 bytes long; the limit is 64 (line 2, column 10)"}},
		{"name built in", "search: {status: {type: string, value: x}}",
			[]string{`search.status: "status" is a built-in field of the query language (id, workflow, version, status, created_at, updated_at), which every instance has: name the attribute otherwise (line 2, column 10)`}},
		{"name a keyword", "search: {starts_with: {type: string, value: x}}",
			[]string{`search.starts_with: "starts_with" is a keyword of the query language (and, or, not, in, starts_with, true, false): name the attribute otherwise (line 2, column 10)`}},
		{"name and shape both wrong", "search: {Id: 1}",
			[]string{
				`search.Id: invalid search attribute name "Id": want a lower-case letter, then lower-case letters, digits or _ (line 2, column 10)`,
				`search.Id: got a number, want a map with a type and a value, e.g. {type: string, value: "${ input.customer }"} (line 2, column 14)`,
			}},
		{"a name twice", "search:\n  a: {type: string, value: x}\n  a: {type: number, value: 1}",
			[]string{`search.a: duplicate key "a": it is already at line 3, column 3 of this map (line 4, column 3)`}},

		{"number from a string", "search: {amount: {type: number, value: abc}}",
			[]string{"search.amount.value: got a string, want a number or a ${ } expression (line 2, column 40)"}},
		{"number from a quoted number", "search: {amount: {type: number, value: '12'}}",
			[]string{"search.amount.value: got a string, want a number or a ${ } expression (line 2, column 40)"}},
		{"string from a number", "search: {code: {type: string, value: 12}}",
			[]string{"search.code.value: got a number, want a string or a ${ } expression" + quote + " (line 2, column 38)"}},
		{"string too long", fmt.Sprintf("search: {code: {type: string, value: %s}}", strings.Repeat("x", 257)),
			[]string{"search.code.value: the string is 257 bytes long; the limit is 256 (line 2, column 38)"}},
		{"bool from a string", "search: {vip: {type: bool, value: 'yes'}}",
			[]string{"search.vip.value: got a string, want a boolean or a ${ } expression (line 2, column 35)"}},
		{"null", "search:\n  code: {type: string, value: null}",
			[]string{"search.code.value: got null, want a string or a ${ } expression" + quote + " (line 3, column 31)"}},
		{"a map", "search: {code: {type: string, value: {a: '${ input.a }'}}}",
			[]string{"search.code.value: got a map, want a string or a ${ } expression" + quote + " (line 2, column 38)"}},
		{"a list, not keywords", "search: {code: {type: string, value: [a]}}",
			[]string{"search.code.value: got a list, want a string or a ${ } expression" + quote + " (line 2, column 38)"}},
		{"time a date", "search: {due: {type: time, value: 2026-03-01}}",
			[]string{`search.due.value: "2026-03-01" is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00 (line 2, column 35)`}},
		{"time without an offset", "search: {due: {type: time, value: '2026-03-01T09:00:00'}}",
			[]string{`search.due.value: "2026-03-01T09:00:00" is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00 (line 2, column 35)`}},
		{"time a number", "search: {due: {type: time, value: 1767225600}}",
			[]string{"search.due.value: got a number, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z or a ${ } expression (line 2, column 35)"}},
		{"keywords empty", "search: {tags: {type: keywords, value: []}}",
			[]string{"search.tags.value: an empty list of keywords is never a value: want at least one keyword or a ${ } expression (line 2, column 40)"}},
		{"keywords of nulls", "search: {tags: {type: keywords, value: [null]}}",
			[]string{"search.tags.value: an empty list of keywords is never a value: want at least one keyword or a ${ } expression (line 2, column 40)"}},
		{"keywords with a number", "search: {tags: {type: keywords, value: [a, 1, b]}}",
			[]string{"search.tags.value[1]: got a number, want a string or a ${ } expression (line 2, column 44)"}},
		{"keywords with a list", "search: {tags: {type: keywords, value: [a, [b]]}}",
			[]string{"search.tags.value[1]: got a list, want a string or a ${ } expression (line 2, column 44)"}},
		{"keywords too many", "search: {tags: {type: keywords, value: [" + strings.Repeat("a,", 10) + keywords(33) + "]}}",
			[]string{"search.tags.value: more than 32 distinct keywords (the list has 43 items); the limit is 32 (line 2, column 40)"}},
		{"keywords with a NUL", `search: {tags: {type: keywords, value: [a, "b\0"]}}`,
			[]string{`search.tags.value: item 1: the string "b\x00" holds a NUL byte (line 2, column 40)`}},

		{"an expression of another type", `search: {code: {type: string, value: "${ input.n > 1 }"}}`,
			[]string{`search.code.value: expression "input.n > 1" yields bool, want a string (line 2, column 38)`}},
		{"a number expression for a time", `search: {due: {type: time, value: "${ 1 + 2 }"}}`,
			[]string{`search.due.value: expression "1 + 2" yields int, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z (line 2, column 35)`}},
		{"a keyword expression of another type", `search: {tags: {type: keywords, value: [a, "${ len(input.a) }"]}}`,
			[]string{`search.tags.value[1]: expression "len(input.a)" yields int, want a string (line 2, column 44)`}},
		{"a list of numbers as keywords", `search: {tags: {type: keywords, value: "${ [1, 2] }"}}`,
			nil},
		{"a template for a number", `search: {amount: {type: number, value: "${ input.a }.00"}}`,
			[]string{"search.amount.value: a string template always yields a string; want a single ${ } expression yielding a number (line 2, column 40)"}},
		{"a template for a bool", `search: {vip: {type: bool, value: "is ${ input.a }"}}`,
			[]string{"search.vip.value: a string template always yields a string; want a single ${ } expression yielding a boolean (line 2, column 35)"}},
		{"a loop variable", `search: {vip: {type: bool, value: "${ item.vip }"}}`,
			[]string{`search.vip.value: expression "item.vip" does not compile: unknown name item (at character 2) (line 2, column 35)`}},
		{"an unterminated expression", `search: {code: {type: string, value: "${ input.a"}}`,
			[]string{"search.code.value: unterminated ${ at character 1: no matching } (line 2, column 38)"}},

		{"everything at once", "search:\n  Amount: {type: integer, value: abc}\n  due: {type: time, vaule: x}\n  status: {type: string, value: 12}",
			[]string{
				`search.Amount: invalid search attribute name "Amount": want a lower-case letter, then lower-case letters, digits or _; did you mean amount? (line 3, column 3)`,
				`search.Amount.type: unknown type "integer"; did you mean number? (line 3, column 18)`,
				`search.due.vaule: unknown field "vaule"; did you mean value? (line 4, column 21)`,
				`search.status: "status" is a built-in field of the query language (id, workflow, version, status, created_at, updated_at), which every instance has: name the attribute otherwise (line 5, column 3)`,
				"search.status.value: got a number, want a string or a ${ } expression" + quote + " (line 5, column 33)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(withOrder(tt.fields)), nil)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
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

// keywords is n distinct keywords, comma-separated: k0,k1,…
func keywords(n int) string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("k%d", i)
	}
	return strings.Join(ks, ",")
}

// TestSearchValidates: search attributes built in code, not parsed, are
// checked as parsed ones are, and so is their number.
func TestSearchValidates(t *testing.T) {
	t.Parallel()
	val := func(src any) Value {
		v, err := newValue(src)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	many := make([]SearchAttr, weft.MaxSearchAttributes+1)
	for i := range many {
		many[i] = SearchAttr{Name: fmt.Sprintf("a%02d", i), Type: weft.SearchNumber, Value: val(i)}
	}
	tests := []struct {
		name  string
		attrs []SearchAttr
		want  string // the problems, one a line; "" for none
	}{
		{"none", nil, ""},
		{"the most", many[:weft.MaxSearchAttributes], ""},
		{"one too many", many, "search: 33 search attributes; the limit is 32\n"},
		{"a name twice", []SearchAttr{
			{Name: "a", Type: weft.SearchString, Value: val("x")},
			{Name: "a", Type: weft.SearchString, Value: val("y")},
		}, "search.a: duplicate search attribute \"a\"\n"},
		{"no type", []SearchAttr{{Name: "a", Value: val("x")}}, "search.a.type: required: one of string, number, bool, time or keywords\n"},
		{"no value", []SearchAttr{{Name: "a", Type: weft.SearchBool}}, "search.a.value: required: a literal or a ${ } expression over input and vars\n"},
		{"a bad name", []SearchAttr{{Name: "updated_at", Type: weft.SearchTime, Value: val("${ input.t }")}},
			`search.updated_at: "updated_at" is a built-in field of the query language (id, workflow, version, status, created_at, updated_at), which every instance has: name the attribute otherwise` + "\n"},
	}
	for _, tt := range tests {
		def := mustParse(t, withOrder(""))
		def.Search = tt.attrs
		got := ""
		if err := validateDefinition(def, nil); err != nil {
			got = problemLines(err)
		}
		if got != tt.want {
			t.Errorf("%s: problems\n%swant\n%s", tt.name, got, tt.want)
		}
	}
}

// TestSearchNamesAreTheQueryLanguages: a name the definition takes is a
// name a query can name, and a name it refuses as the query language's is
// one that internal/query refuses too.
func TestSearchNamesAreTheQueryLanguages(t *testing.T) {
	t.Parallel()
	if got, want := slices.Sorted(maps.Keys(query.Builtins())), slices.Sorted(slices.Values(searchBuiltins)); !slices.Equal(got, want) {
		t.Errorf("query's built-in fields are %v; the definition refuses %v", got, want)
	}
	for _, name := range append(slices.Clone(searchBuiltins), searchKeywords...) {
		if searchNameProblem(name) == "" {
			t.Errorf("the definition takes %q", name)
		}
		if err := (query.Schema{name: weft.SearchString}).Validate(); err == nil {
			t.Errorf("query takes %q, which the definition refuses", name)
		}
	}
	for _, name := range []string{"a", "customer", "order_id", "x9", "ids", "status2", strings.Repeat("a", weft.MaxSearchNameLen), "andor", "true_"} {
		if p := searchNameProblem(name); p != "" {
			t.Errorf("the definition refuses %q: %s", name, p)
		}
		if err := (query.Schema{name: weft.SearchString}).Validate(); err != nil {
			t.Errorf("query refuses %q, which the definition takes: %v", name, err)
		}
	}
}

// TestSearchValues: what each type takes, from literals, expressions and
// templates over input and vars, and why it refuses what it refuses; a
// null is absent, with no problem.
func TestSearchValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", weft.MaxSearchStringLen)
	input := map[string]any{
		"customer": "acme", "total": 12.5, "count": 3.0, "tier": "gold", "paid": true, "n": nil,
		"due": "2026-03-01T09:00:00+01:00", "day": "2026-03-01", "huge": "9999-12-31T23:30:00-01:00",
		"long": long, "longer": long + "y", "nul": "a\x00b", "latin1": "caf\xe9",
		"tags": []any{"b", "a", "b", nil, "c"}, "empty": []any{}, "mixed": []any{"a", 1.0},
		"many": func() []any {
			l := make([]any, 40)
			for i := range l {
				l[i] = fmt.Sprintf("k%d", i%33)
			}
			return l
		}(),
		"num": json.Number("42.5"), "obj": map[string]any{"a": 1.0},
	}
	vars := map[string]any{"invoice": map[string]any{"due": "2026-04-01T00:00:00Z"}, "stage": "shipped"}
	tests := []struct {
		typ   weft.SearchType
		value string // the value field, YAML
		// want is the value as the store writes it ({"type":…,"value":…}),
		// "absent", or the problem's message.
		want string
	}{
		{weft.SearchString, `"${ input.customer }"`, `{"type":"string","value":"acme"}`},
		{weft.SearchString, `"customer ${ input.customer }"`, `{"type":"string","value":"customer acme"}`},
		{weft.SearchString, `"${ vars.stage }"`, `{"type":"string","value":"shipped"}`},
		{weft.SearchString, `acme`, `{"type":"string","value":"acme"}`},
		{weft.SearchString, `""`, `{"type":"string","value":""}`},
		{weft.SearchString, `"${ input.long }"`, `{"type":"string","value":"` + long + `"}`},
		{weft.SearchString, `"${ input.missing }"`, "absent"},
		{weft.SearchString, `"${ input.n }"`, "absent"},
		{weft.SearchString, `"${ vars.nothing }"`, "absent"},
		{weft.SearchString, `"${ input.total }"`, `expression "${ input.total }": got a number, want a string`},
		{weft.SearchString, `"${ input.paid }"`, `expression "${ input.paid }": got a boolean, want a string`},
		{weft.SearchString, `"${ input.longer }"`, `expression "${ input.longer }": the string is 257 bytes long; the limit is 256`},
		{weft.SearchString, `"${ input.nul }"`, `expression "${ input.nul }": the string "a\x00b" holds a NUL byte`},
		{weft.SearchString, `"${ input.latin1 }"`, `expression "${ input.latin1 }": the string "caf\xe9" is not valid UTF-8`},
		{weft.SearchString, `"${ input.obj.a.b }"`, `expression "${ input.obj.a.b }": cannot fetch b from float64 (at character 14)`},
		{weft.SearchString, `"${ vars.nothing.x }"`, `expression "${ vars.nothing.x }": cannot fetch x from <nil> (at character 15)`},
		{weft.SearchString, `"${ vars.nothing?.x }"`, "absent"},
		{weft.SearchString, `"${ input.obj?.a }"`, `expression "${ input.obj?.a }": got a number, want a string`},

		{weft.SearchNumber, `"${ input.total }"`, `{"type":"number","value":12.5}`},
		{weft.SearchNumber, `"${ input.count * 2 }"`, `{"type":"number","value":6}`},
		{weft.SearchNumber, `"${ len(input.tags) }"`, `{"type":"number","value":5}`},
		{weft.SearchNumber, `"${ input.num }"`, `{"type":"number","value":42.5}`},
		{weft.SearchNumber, `12`, `{"type":"number","value":12}`},
		{weft.SearchNumber, `-0.5`, `{"type":"number","value":-0.5}`},
		{weft.SearchNumber, `"${ input.missing }"`, "absent"},
		{weft.SearchNumber, `"${ input.customer }"`, `expression "${ input.customer }": got a string, want a number`},
		{weft.SearchNumber, `"${ input.total / 0 }"`, `expression "${ input.total / 0 }": yields +Inf, which JSON cannot hold (/ divides as floats: x/0 is ±Inf, 0/0 is NaN)`},

		{weft.SearchBool, `"${ input.tier == 'gold' }"`, `{"type":"bool","value":true}`},
		{weft.SearchBool, `"${ input.paid }"`, `{"type":"bool","value":true}`},
		{weft.SearchBool, `false`, `{"type":"bool","value":false}`},
		{weft.SearchBool, `"${ input.missing }"`, "absent"},
		{weft.SearchBool, `"${ input.tier }"`, `expression "${ input.tier }": got a string, want a boolean`},
		{weft.SearchBool, `"${ input.count }"`, `expression "${ input.count }": got a number, want a boolean`},

		{weft.SearchTime, `"${ input.due }"`, `{"type":"time","value":"2026-03-01T08:00:00Z"}`},
		{weft.SearchTime, `"${ vars.invoice.due }"`, `{"type":"time","value":"2026-04-01T00:00:00Z"}`},
		{weft.SearchTime, `"${ input.day }T09:00:00.5+01:00"`, `{"type":"time","value":"2026-03-01T08:00:00.5Z"}`},
		{weft.SearchTime, `2026-03-01T09:00:00+01:00`, `{"type":"time","value":"2026-03-01T08:00:00Z"}`},
		{weft.SearchTime, `"${ date(input.due) }"`, `{"type":"time","value":"2026-03-01T08:00:00Z"}`},
		{weft.SearchTime, `"${ input.missing }"`, "absent"},
		{weft.SearchTime, `"${ input.day }"`, `expression "${ input.day }": "2026-03-01" is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00`},
		{weft.SearchTime, `"${ input.huge }"`, `expression "${ input.huge }": 9999-12-31T23:30:00-01:00: in UTC it is outside the years 0000 to 9999 that RFC 3339 can write`},
		{weft.SearchTime, `"${ input.count }"`, `expression "${ input.count }": got a number, want a time: an RFC 3339 string such as 2026-03-01T09:00:00Z`},

		{weft.SearchKeywords, `"${ input.tags }"`, `{"type":"keywords","value":["b","a","c"]}`},
		{weft.SearchKeywords, `"${ input.tier }"`, `{"type":"keywords","value":["gold"]}`},
		{weft.SearchKeywords, `"${ split('x,y,x', ',') }"`, `{"type":"keywords","value":["x","y"]}`},
		{weft.SearchKeywords, `[vip, "${ input.tier }", "t-${ input.tier }", "${ input.missing }"]`, `{"type":"keywords","value":["vip","gold","t-gold"]}`},
		{weft.SearchKeywords, `"${ input.many[:32] }"`, `{"type":"keywords","value":["k0","k1","k2","k3","k4","k5","k6","k7","k8","k9","k10","k11","k12","k13","k14","k15","k16","k17","k18","k19","k20","k21","k22","k23","k24","k25","k26","k27","k28","k29","k30","k31"]}`},
		{weft.SearchKeywords, `"${ input.many[:33] }"`, `expression "${ input.many[:33] }": more than 32 distinct keywords (the list has 33 items); the limit is 32`},
		{weft.SearchKeywords, `"${ input.empty }"`, "absent"},
		{weft.SearchKeywords, `"${ [input.missing] }"`, "absent"},
		{weft.SearchKeywords, `"${ input.missing }"`, "absent"},
		{weft.SearchKeywords, `"${ input.many }"`, `expression "${ input.many }": more than 32 distinct keywords (the list has 40 items); the limit is 32`},
		{weft.SearchKeywords, `"${ input.mixed }"`, `expression "${ input.mixed }": item 1: got a number, want a string`},
		{weft.SearchKeywords, `"${ [input.customer, input.longer] }"`, `expression "${ [input.customer, input.longer] }": item 1: the string is 257 bytes long; the limit is 256`},
		{weft.SearchKeywords, `"${ input.obj }"`, `expression "${ input.obj }": got a map, want a string or a list of strings`},
		{weft.SearchKeywords, `"${ input.count }"`, `expression "${ input.count }": got a number, want a string or a list of strings`},
	}
	for _, tt := range tests {
		name := string(tt.typ) + " " + tt.value
		if len(name) > 60 {
			name = name[:60]
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			def := mustParse(t, withOrder(fmt.Sprintf("search:\n  attr:\n    type: %s\n    value: %s", tt.typ, tt.value)))
			attrs, problems := def.SearchValues(Env{Input: input, Vars: vars})
			got := "absent"
			switch {
			case len(problems) > 1 || len(problems) == 1 && len(attrs) > 0:
				t.Fatalf("SearchValues = %v, %v; want one value or one problem", attrs, problems)
			case len(problems) == 1:
				p := problems[0]
				if p.Name != "attr" {
					t.Errorf("problem %v names %q, want attr", p, p.Name)
				}
				var ee *EvalError
				if !errors.As(p, &ee) || !errors.Is(p, ErrEval) {
					t.Errorf("problem %v does not wrap an *EvalError", p)
				}
				got = p.Err.Error()
			case attrs == nil:
			default:
				v, ok := attrs["attr"]
				if !ok || len(attrs) != 1 {
					t.Fatalf("SearchValues = %v, want attr alone", attrs)
				}
				// The value as {type, value}, whatever the stores' JSON of it.
				shown, err := json.Marshal(struct {
					Type  weft.SearchType `json:"type"`
					Value any             `json:"value"`
				}{v.Type, v.Native()})
				if err != nil {
					t.Fatal(err)
				}
				got = string(shown)
				if v.Type == weft.SearchTime && (v.Time.Location() != time.UTC || !v.Time.Equal(v.Time.Round(0))) {
					t.Errorf("time %v is not in UTC without a monotonic reading", v.Time)
				}
				stored, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				var back weft.SearchValue
				if err := json.Unmarshal(stored, &back); err != nil || !reflect.DeepEqual(back, v) {
					t.Errorf("the value %s reads back as %+v (%v), want %+v", stored, back, err, v)
				}
			}
			if got != tt.want {
				t.Errorf("\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestSearchValuesOfMany: every attribute is evaluated, those with a
// value returned, the others each a problem in the order of the
// definition; a definition without search yields nil, and so does one
// whose attributes have no value.
func TestSearchValuesOfMany(t *testing.T) {
	t.Parallel()
	def := mustParse(t, withOrder(searchBlock))
	attrs, problems := def.SearchValues(Env{Input: map[string]any{"customer": "acme", "total": "12", "tier": "gold"}, Vars: map[string]any{"tags": []any{"x"}}})
	if got, want := fmt.Sprint(attrs), "map[customer:{string acme 0 false 0001-01-01 00:00:00 +0000 UTC []} tags:{keywords  0 false 0001-01-01 00:00:00 +0000 UTC [x]} vip:{bool  0 true 0001-01-01 00:00:00 +0000 UTC []}]"; got != want {
		t.Errorf("attributes\n%s\nwant\n%s", got, want)
	}
	if got, want := fmt.Sprint(problems), `[amount: expression "${ input.total }": got a string, want a number]`; got != want {
		t.Errorf("problems\n%s\nwant\n%s", got, want)
	}

	// Without input, a member of input fails, as everywhere; a member
	// of a missing variable, with ?., is absent, and so is a missing
	// variable.
	if attrs, problems := def.SearchValues(Env{}); attrs != nil || len(problems) != 3 {
		t.Errorf("with no input: %v %v, want nil and the problems of customer, amount and vip", attrs, problems)
	}
	// ?. reads null only: a member of a string fails (expr's message
	// says it tried the name as an index).
	_, problems = def.SearchValues(Env{Input: map[string]any{}, Vars: map[string]any{"invoice": "late"}})
	if got, want := fmt.Sprint(problems), `[due: expression "${ vars.invoice?.due }": invalid operation: int(string) (at character 16)]`; got != want {
		t.Errorf("problems\n%s\nwant\n%s", got, want)
	}
	none := mustParse(t, withOrder(""))
	if attrs, problems := none.SearchValues(Env{Input: map[string]any{"a": 1.0}}); attrs != nil || problems != nil {
		t.Errorf("without search: %v %v, want nil, nil", attrs, problems)
	}
	if types := none.SearchTypes(); types != nil {
		t.Errorf("without search, SearchTypes = %v, want nil", types)
	}
	if got, want := fmt.Sprint(def.SearchTypes()), "map[amount:number customer:string due:time tags:keywords vip:bool]"; got != want {
		t.Errorf("SearchTypes = %s, want %s", got, want)
	}
}

// TestSearchPathReadsAsTheExpression: a value that is a path of names
// from input or vars is read from the maps, without the expression
// machine, and yields what the machine would; where reading it takes
// more (a member of null without ?., of a string, of a list), the machine
// runs, and fails as it would anywhere.
func TestSearchPathReadsAsTheExpression(t *testing.T) {
	t.Parallel()
	paths := []string{
		"input", "vars", "input.a", "input['a']", "input.a.b", "input.a.b.c", "input.a?.b", "input.a?.b.c",
		"input.a?.b?.c", "input.s.x", "input.l.x", "input.m.x", "vars.v", "vars.v.w", "vars.v?.w", "input.inf",
		"(input.a?.b).c", // expr reads it as input.a?.b.c
	}
	notPaths := []string{"input.a + 1", "input.l[0]", "input.s.x()", "$env.input.a", "input.a ?? 1", "input.a[input.k]"}
	// The machine runs for these, though they yield a value: a member of
	// a typed map, a number JSON cannot hold, and vars without any (the
	// machine's is an empty map).
	machine := map[string]bool{"input.m.x": true, "input.inf": true, "vars": true}
	envs := []Env{
		{},
		{Input: map[string]any{}},
		{Input: map[string]any{"a": nil, "s": "str", "l": []any{1.0}, "m": map[string]string{"x": "y"}}},
		{Input: map[string]any{"a": map[string]any{"b": nil}}},
		{Input: map[string]any{"a": map[string]any{"b": map[string]any{"c": "deep"}}}, Vars: map[string]any{"v": map[string]any{"w": 1.0}}},
		{Input: map[string]any{"a": map[string]any{"b": "x"}, "inf": math.Inf(1)}, Vars: map[string]any{"v": nil}},
		{Input: "not a map", Vars: map[string]any{}},
	}
	for _, src := range append(paths, notPaths...) {
		v, err := newValue("${ " + src + " }")
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		p := pathOf(v)
		if isPath := p != nil; isPath != slices.Contains(paths, src) {
			t.Errorf("%s: pathOf = %+v", src, p)
			continue
		}
		for _, env := range envs {
			want, wantErr := v.Eval(env)
			got, ok := p.read(env)
			if !ok {
				if p != nil && wantErr == nil && !machine[src] {
					t.Errorf("%s in %v: the path is not read, the expression yields %v", src, env, want)
				}
				continue
			}
			if wantErr != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s in %v: the path reads %#v, the expression yields %#v, %v", src, env, got, want, wantErr)
			}
		}
	}
}

// searchBlock is the search of docs/workflows.md's example: one
// attribute of each type.
const searchBlock = `search:
  customer: { type: string,   value: "${ input.customer }" }
  amount:   { type: number,   value: "${ input.total }" }
  vip:      { type: bool,     value: "${ input.tier == 'gold' }" }
  due:      { type: time,     value: "${ vars.invoice?.due }" }
  tags:     { type: keywords, value: "${ vars.tags }" }`

// TestSearchValuesAllocate: the engine calls SearchValues at every
// commit. Without search it allocates nothing; with it, an attribute
// that reads a value of the input or the variables (a path) allocates
// nothing but its place in the result map, and so does one that runs
// the expression machine, once it runs (but for what the expression
// itself builds).
//
// Not parallel: testing.AllocsPerRun counts every goroutine's
// allocations.
func TestSearchValuesAllocate(t *testing.T) {
	env := searchEnv()
	allocs := func(fields string, n int) float64 {
		t.Helper()
		def := mustParse(t, withOrder(fields))
		return testing.AllocsPerRun(100, func() {
			if attrs, problems := def.SearchValues(env); len(attrs) != n || problems != nil {
				t.Fatalf("%s: SearchValues = %v, %v", fields, attrs, problems)
			}
		})
	}
	if n := allocs("", 0); n != 0 {
		t.Errorf("without search, SearchValues allocates %v times, want 0", n)
	}
	// The result map holds up to 8 attributes in one group.
	paths1 := allocs(`search: {a: {type: string, value: "${ input.customer }"}}`, 1)
	paths8 := allocs(`search:
  a: {type: string, value: "${ input.customer }"}
  b: {type: number, value: "${ input.total }"}
  c: {type: string, value: "${ input.tier }"}
  d: {type: time,   value: "${ vars.invoice.due }"}
  e: {type: string, value: "${ vars.invoice.number }"}
  f: {type: string, value: "${ vars.stage }"}
  g: {type: string, value: "${ vars.nothing?.x }"}
  h: {type: keywords, value: "${ vars.stage }"}`, 7)
	if paths8 != paths1+1 { // h's keyword list
		t.Errorf("SearchValues allocates %v times for one path, %v for eight with a keyword", paths1, paths8)
	}
	exprs1 := allocs(`search: {a: {type: bool, value: "${ input.total > 1000 }"}}`, 1)
	exprs4 := allocs(`search:
  a: {type: bool, value: "${ input.total > 1000 }"}
  b: {type: number, value: "${ 2 }"}
  c: {type: bool, value: "${ true && false }"}
  d: {type: string, value: "${ 'x' }"}`, 4)
	if exprs4 != exprs1 {
		t.Errorf("SearchValues allocates %v times for one expression, %v for four", exprs1, exprs4)
	}
}

func searchEnv() Env {
	return Env{
		Input: map[string]any{"customer": "acme", "total": 1250.5, "tier": "gold", "lines": []any{1.0, 2.0}},
		Vars: map[string]any{
			"invoice": map[string]any{"due": "2026-04-01T00:00:00Z", "number": "F-2026-0042"},
			"tags":    []any{"b2b", "eu", "priority"},
			"stage":   "shipped",
		},
	}
}

// BenchmarkSearchValues: the attributes of docs/workflows.md's example,
// one of each type, evaluated as the engine does at each commit.
func BenchmarkSearchValues(b *testing.B) {
	d, err := Parse([]byte(withOrder(searchBlock)))
	if err != nil {
		b.Fatal(err)
	}
	env := searchEnv()
	b.ReportAllocs()
	for b.Loop() {
		if attrs, problems := d.SearchValues(env); len(attrs) != 5 || problems != nil {
			b.Fatalf("SearchValues = %v, %v", attrs, problems)
		}
	}
}

// TestSearchHash: a definition without search keeps the hash it had
// before the field existed; the same attributes written otherwise (in
// another order, in JSON) hash the same; any other value makes a new
// version; the canonical form parses back to the same attributes.
func TestSearchHash(t *testing.T) {
	t.Parallel()
	// What the code before the field computed (TestOrderHash's base).
	const before = "f9a6842f69a4cf441f5461229fe91c3c8ef71167860b1c4384408b8ad81152f7"
	if got := mustParse(t, "name: wf\nsteps: [{id: a, delay: 1d12h}]\n").Hash(); got != before {
		t.Fatalf("a definition without search hashes %s; before the field it hashed %s", got, before)
	}
	same := [][]string{
		{"", "search: {}"},
		{
			"search: {a: {type: string, value: x}, b: {type: number, value: 1}}",
			"search:\n  b: {value: 1, type: number}\n  a:\n    type: string\n    value: 'x'",
		},
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
		"search: {a: {type: string, value: x}}",
		"search: {b: {type: string, value: x}}",
		"search: {a: {type: keywords, value: x}}",
		"search: {a: {type: string, value: y}}",
		"search: {a: {type: keywords, value: [x]}}",
		`search: {a: {type: string, value: "${ input.a }"}}`,
		`search: {a: {type: string, value: "${input.a}"}}`,
		`search: {a: {type: string, value: "${ vars.a }"}}`,
		"search: {a: {type: string, value: x}, b: {type: string, value: x}}",
		searchBlock,
	}
	env := searchEnv()
	seen := map[string]string{}
	for _, f := range differ {
		d := mustParse(t, withOrder(f))
		if other, dup := seen[d.Hash()]; dup {
			t.Errorf("%q and %q hash the same", f, other)
		}
		seen[d.Hash()] = f
		again := mustParse(t, string(d.Canonical()))
		if again.Hash() != d.Hash() || searchAttrs(again) != searchAttrs(d) {
			t.Errorf("%q: the canonical form does not parse back the same: %s", f, again.Canonical())
		}
		a1, p1 := d.SearchValues(env)
		a2, p2 := again.SearchValues(env)
		if fmt.Sprint(a1, p1) != fmt.Sprint(a2, p2) {
			t.Errorf("%q: the canonical form's values are %v %v, the original's %v %v", f, a2, p2, a1, p1)
		}
	}
	if got, want := string(mustParse(t, withOrder(`search: {customer: {type: string, value: "${ input.customer }"}}`)).Canonical()),
		`{"name":"wf","persistence":"lazy","search":{"customer":{"type":"string","value":"${ input.customer }"}},"steps":[{"delay":"1s","id":"a"}]}`; got != want {
		t.Errorf("canonical\n%s\nwant\n%s", got, want)
	}
}
