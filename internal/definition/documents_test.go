package definition

import (
	"reflect"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/jsonv"
)

// TestDocuments: values kept as their bytes (*jsonv.Doc) pass whole where a
// definition references them whole or a member of them (a slice of their
// bytes), and decode where an expression computes on them; a map or list
// holding one is one.
func TestDocuments(t *testing.T) {
	t.Parallel()
	in := jsonv.Trusted([]byte(`{"id":"o-1","total":1200,"items":["a","b"],"ok":true}`))
	order := jsonv.Trusted([]byte(`{"lines":[{"sku":"x","n":2}],"note":"<b>"}`))
	label := jsonv.Trusted([]byte(`"urgent"`))
	broken := jsonv.Trusted([]byte(`{"n":1e400}`))
	env := Env{Input: in, Vars: map[string]any{"order": order, "label": label, "broken": broken, "n": 3.0}}
	for _, tt := range []struct {
		name string
		src  any
		// doc, when set, is the bytes of the Doc the value must be;
		// want otherwise the plain value.
		doc  string
		want any
		err  string
	}{
		{name: "input whole", src: "${ input }", doc: string(in.Bytes())},
		{name: "variable whole", src: "${ vars.order }", doc: string(order.Bytes())},
		{name: "variable whole, spaced", src: "${  vars.label  }", doc: `"urgent"`},
		{name: "member of input, a slice of its bytes", src: "${ input.id }", doc: `"o-1"`},
		{name: "member of a variable, a slice of its bytes", src: "${ vars.order.lines }", doc: `[{"sku":"x","n":2}]`},
		{name: "member of a missing member", src: "${ vars.order.none?.x }", want: nil},
		{name: "member of null, optional", src: "${ vars.none?.x }", want: nil},
		{name: "computed", src: "${ input.total * 2 }", want: 2400.0},
		{name: "computed over a variable", src: "${ len(vars.order.lines) + vars.n }", want: 4.0},
		{name: "template", src: "${ vars.label }: ${ input.id }", want: "urgent: o-1"},
		{name: "template of a whole document", src: "order ${ vars.order }", want: `order {"lines":[{"n":2,"sku":"x"}],"note":"<b>"}`},
		{name: "map holding a document", src: map[string]any{"doc": "${ vars.order }", "mode": "fast"}, doc: `{"doc":{"lines":[{"sku":"x","n":2}],"note":"<b>"},"mode":"fast"}`},
		{name: "list holding a document", src: []any{"${ vars.label }", 1}, doc: `["urgent",1]`},
		{name: "nested map holding a document", src: map[string]any{"a": map[string]any{"b": "${ input }"}}, doc: `{"a":{"b":` + string(in.Bytes()) + `}}`},
		{name: "whole vars", src: "${ vars.label == 'urgent' && vars.order.note == '<b>' }", want: true},
		{name: "a number beyond float64, whole", src: "${ vars.broken }", doc: `{"n":1e400}`},
		{name: "a number beyond float64, read whole", src: "${ vars.broken.n }", doc: `1e400`},
		{name: "a number beyond float64, computed", src: "${ vars.broken.n + 1 }", err: "vars.broken: decoding"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v, problems := CompileValue(tt.src, "x")
			if len(problems) > 0 {
				t.Fatalf("compile %v: %v", tt.src, problems)
			}
			got, err := v.Eval(env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Eval(%v) = %v, %v; want an error containing %q", tt.src, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Eval(%v): %v", tt.src, err)
			}
			if tt.doc != "" {
				d, ok := got.(*jsonv.Doc)
				if !ok || string(d.Bytes()) != tt.doc {
					t.Fatalf("Eval(%v) = %#v, want the document %s", tt.src, got, tt.doc)
				}
				return
			}
			if _, ok := got.(*jsonv.Doc); ok || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Eval(%v) = %#v, want %#v", tt.src, got, tt.want)
			}
		})
	}
}

// TestDocumentsTyped: a typed value (a condition, a list, a key) is never
// a document, even when it references one whole.
func TestDocumentsTyped(t *testing.T) {
	t.Parallel()
	env := Env{Vars: map[string]any{"ok": jsonv.Trusted([]byte(`true`)), "items": jsonv.Trusted([]byte(`[1,"a"]`)), "key": jsonv.Trusted([]byte(`"k-1"`))}}
	c := &compiler{}
	if b, err := c.value("${ vars.ok }", "if", wantBool).EvalBool(env); err != nil || !b {
		t.Errorf("EvalBool = %v, %v; want true", b, err)
	}
	if l, err := c.value("${ vars.items }", "foreach", wantList).EvalList(env); err != nil || !reflect.DeepEqual(l, []any{1.0, "a"}) {
		t.Errorf("EvalList = %#v, %v", l, err)
	}
	if s, err := c.value("${ vars.key }", "key", wantAny).EvalString(env); err != nil || s != "k-1" {
		t.Errorf("EvalString = %q, %v; want k-1", s, err)
	}
	if len(c.problems) > 0 {
		t.Fatal(c.problems)
	}
}

// TestDocumentsDecodedOnlyWhenRead: an expression decodes the documents it
// reads and no other (a variable holding a number beyond float64 fails
// only the expressions that read it).
func TestDocumentsDecodedOnlyWhenRead(t *testing.T) {
	t.Parallel()
	env := Env{Vars: map[string]any{"bad": jsonv.Trusted([]byte(`1e400`)), "good": jsonv.Trusted([]byte(`{"n":2}`))}}
	v, problems := CompileValue("${ vars.good.n * 2 }", "x")
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if got, err := v.Eval(env); err != nil || got != 4.0 {
		t.Errorf("Eval = %v, %v; want 4 without decoding vars.bad", got, err)
	}
	v, _ = CompileValue("${ vars[input.which] }", "x")
	if _, err := v.Eval(Env{Input: map[string]any{"which": "good"}, Vars: env.Vars}); err == nil || !strings.Contains(err.Error(), "vars.bad") {
		t.Errorf("a computed name decodes every variable: %v, want the error of vars.bad", err)
	}
}
