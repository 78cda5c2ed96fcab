package definition

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// SearchAttr is one search attribute a workflow declares in its `search`
// block: a typed value, computed from an instance's input and variables,
// that operators search instances by (docs/workflows.md, "Search
// attributes"; the query language is internal/query's).
type SearchAttr struct {
	// Name is what a query names: [a-z][a-z0-9_]*, at most
	// weft.MaxSearchNameLen bytes, neither a built-in field of the query
	// language (id, workflow, version, status, created_at, updated_at)
	// nor one of its keywords (and, or, not, in, starts_with, true,
	// false).
	Name string
	// Type is one of weft.SearchTypes(); a name's type is the same in
	// every workflow of a host, for good (the engine checks it when a
	// definition is saved).
	Type weft.SearchType
	// Value is a literal, checked against Type when the definition is
	// validated, or an expression or template over input and vars,
	// evaluated at every commit of an instance (use
	// Definition.SearchValues).
	Value Value
	// nameReported: the parser reported the name, at its key, so
	// validation does not report it again. typeReported and
	// valueReported: the field is absent or malformed, and the parser
	// reported it (or a field that is likely it misspelt).
	nameReported, typeReported, valueReported bool
	// path is Value's when it is a plain path of names from input or
	// vars (`${ input.customer }`, `${ vars.invoice?.due }`), which
	// SearchValues reads without running the expression; nil otherwise.
	path *memberPath
}

// SearchProblem is why one search attribute has no value for an
// instance: its expression failed, or yielded what the attribute's type
// cannot take. The engine logs it and leaves the attribute out, as an
// operator's index must not fail a workflow. A null (or a missing field,
// or an empty list of keywords) is no problem: the attribute is absent.
type SearchProblem struct {
	// Name is the attribute's.
	Name string
	// Err is an *EvalError naming the value as written and what is
	// wrong: the expression failed, or it yielded a value of another
	// type, a string too long, with a NUL byte or not valid UTF-8, too
	// many keywords, a number that is not finite, a string that is not
	// an RFC 3339 time.
	Err error
}

// Error implements error: `amount: expression "${ input.total }": got a
// string, want a number`.
func (p SearchProblem) Error() string { return p.Name + ": " + p.Err.Error() }

// Unwrap returns Err.
func (p SearchProblem) Unwrap() error { return p.Err }

// searchBuiltins are the built-in fields of the query language, which
// every instance has, and which a search attribute may not be named
// (internal/query's Builtins; a test keeps the two lists the same).
var searchBuiltins = []string{"id", "workflow", "version", "status", "created_at", "updated_at"}

// searchKeywords are the keywords of the query language, which cannot
// name a field in a query (internal/query's keyword).
var searchKeywords = []string{"and", "or", "not", "in", "starts_with", "true", "false"}

// searchTypeAliases are names of types that other systems use, with the
// search type that is likely meant: a suggestion edit distance cannot
// find ("integer" is far from "number").
var searchTypeAliases = map[string]weft.SearchType{
	"int": weft.SearchNumber, "integer": weft.SearchNumber, "float": weft.SearchNumber,
	"double": weft.SearchNumber, "decimal": weft.SearchNumber, "numeric": weft.SearchNumber,
	"boolean": weft.SearchBool, "datetime": weft.SearchTime, "timestamp": weft.SearchTime,
	"date": weft.SearchTime, "text": weft.SearchString, "keyword": weft.SearchKeywords,
	"list": weft.SearchKeywords, "tags": weft.SearchKeywords, "array": weft.SearchKeywords,
}

// SearchTypes returns the type of each search attribute by name, for the
// host's registry of attribute types; nil when the definition declares
// none.
func (d *Definition) SearchTypes() map[string]weft.SearchType {
	if len(d.Search) == 0 {
		return nil
	}
	m := make(map[string]weft.SearchType, len(d.Search))
	for _, a := range d.Search {
		m[a.Name] = a.Type
	}
	return m
}

// SearchValues evaluates the search attributes of an instance in env, its
// input and its variables as they are at a commit (no loop variables: the
// attributes belong to the workflow, not to a step). The engine calls it
// at every commit, so an attribute over vars follows the instance's
// progress.
//
// # Results
//
// The values of the attributes that yield a value of their type, by
// name: nil when the definition declares none, or when none has a value.
// An attribute whose value is null (a missing field too) is absent, and
// is no problem. Each type takes:
//
//	string    a string, valid UTF-8 without a NUL byte, of at most
//	          weft.MaxSearchStringLen bytes (a number is not written as
//	          one: it is a problem)
//	number    a finite number: of any Go numeric type, or a json.Number
//	bool      a boolean
//	time      an RFC 3339 string with a zone offset, or a time.Time
//	          (expr's date()); in UTC
//	keywords  a list of strings, each as a string attribute's, duplicates
//	          dropped (the first kept, in order), nulls skipped, at most
//	          weft.MaxSearchKeywords of them; or a string, one keyword; an
//	          empty list is absent
//
// Every other attribute is a SearchProblem, in the order of d.Search.
//
// # Notes
//
// A value that is a path of names from input or vars (`${ input.customer
// }`, `${ vars.invoice?.due }`), the common case, is read from the maps
// without running its expression, and allocates nothing but its place in
// the result map (and a keyword list's). The other expressions share one
// expression machine and one environment per call, made when the first
// of them runs.
func (d *Definition) SearchValues(env Env) (weft.SearchAttributes, []SearchProblem) {
	if len(d.Search) == 0 {
		return nil, nil
	}
	var ev *searchEval // made when an expression must run
	var out weft.SearchAttributes
	var problems []SearchProblem
	for i := range d.Search {
		a := &d.Search[i]
		x, ok := a.path.read(env)
		var err error
		if !ok {
			if ev == nil {
				ev = &searchEval{env: env.exprEnv()}
			}
			if x, err = ev.eval(a.Value.n); err == nil {
				x, err = plain(x, a.Value.src)
			}
		}
		if err != nil {
			problems = append(problems, SearchProblem{Name: a.Name, Err: err})
			continue
		}
		sv, ok, err := searchValue(a.Type, x)
		if err != nil {
			problems = append(problems, SearchProblem{Name: a.Name, Err: &EvalError{Source: sourceString(a.Value.src), Err: err}})
			continue
		}
		if !ok {
			continue
		}
		if out == nil {
			out = make(weft.SearchAttributes, len(d.Search))
		}
		out[a.Name] = sv
	}
	return out, problems
}

// memberPath is an expression that is a path of names from input or
// vars, such as `input.customer` or `vars.invoice?.due`: the values the
// engine's SearchValues reads most, which it reads from the maps
// themselves, without the expression machine and without its
// allocations.
type memberPath struct {
	vars  bool     // the path starts at vars; at input otherwise
	names []string // the members, in order
	// optional[i] is set when names[i] is read with ?.: from null, it
	// yields null for the whole path, where . fails.
	optional []bool
}

// pathOf returns the path that v is, or nil when it is anything else: a
// constant, a template, another expression.
func pathOf(v Value) *memberPath {
	n, ok := v.n.(exprNode)
	if !ok {
		return nil
	}
	root := n.prog.Node()
	if c, ok := root.(*ast.ChainNode); ok {
		root = c.Node
	}
	p := &memberPath{}
	for {
		m, ok := root.(*ast.MemberNode)
		if !ok {
			break
		}
		s, ok := m.Property.(*ast.StringNode)
		if !ok || m.Method {
			return nil
		}
		p.names = append(p.names, s.Value)
		p.optional = append(p.optional, m.Optional)
		root = m.Node
	}
	id, ok := root.(*ast.IdentifierNode)
	if !ok || (id.Value != "input" && id.Value != "vars") {
		return nil
	}
	p.vars = id.Value == "vars"
	slices.Reverse(p.names)
	slices.Reverse(p.optional)
	return p
}

// read returns the value the path names in env, and true; false when
// the path is nil, or when reading it takes more than maps of JSON (a
// member of null without ?., of a string, of a typed map, or a value
// JSON cannot hold): the expression machine then says what it yields or
// why it fails, as for any other expression. A document the path ends at
// is yielded decoded.
func (p *memberPath) read(env Env) (any, bool) {
	x, ok, err := p.readDocs(env)
	if !ok || err != nil {
		return nil, false
	}
	if x, err = jsonv.Plain(x); err != nil {
		return nil, false
	}
	return x, true
}

// readDocs is read, yielding a document (*jsonv.Doc) the path ends at as
// it is; one the path goes into is decoded, and the error is one that
// does not decode.
func (p *memberPath) readDocs(env Env) (any, bool, error) {
	if p == nil {
		return nil, false, nil
	}
	x := env.Input
	if p.vars {
		if env.Vars == nil && len(p.names) == 0 {
			return nil, false, nil // expressions see an empty map
		}
		x = env.Vars // nil: a member of it is null, as of an empty map
	}
	for i, name := range p.names {
		if d, ok := x.(*jsonv.Doc); ok {
			// A member of a document is a slice of its bytes, found
			// without decoding it.
			m, found, object, err := d.Member(name)
			switch {
			case err != nil:
				return nil, false, fmt.Errorf("%s: %w", p.prefix(i), err)
			case object && !found:
				x = nil // a missing key is null
			case object:
				x = m
				if string(m.Bytes()) == "null" {
					x = nil
				}
			case string(d.Bytes()) == "null":
				return nil, p.optional[i], nil
			default:
				return nil, false, nil // the machine says what a member of it is
			}
			continue
		}
		switch m := x.(type) {
		case map[string]any:
			x = m[name]
		case nil:
			return nil, p.optional[i], nil
		default:
			return nil, false, nil
		}
	}
	if _, ok := x.(*jsonv.Doc); ok {
		return x, true, nil
	}
	if what, _ := unencodable(x, ""); what != "" {
		return nil, false, nil
	}
	return x, true, nil
}

// prefix is the path's first n names, as written: input.a.b.
func (p *memberPath) prefix(n int) string {
	s := "input"
	if p.vars {
		s = "vars"
	}
	for _, name := range p.names[:n] {
		s += "." + name
	}
	return s
}

// searchEval evaluates the values of one SearchValues call with one
// expression machine, reused from one expression to the next, and one
// environment.
type searchEval struct {
	env     map[string]any
	machine vm.VM
}

// eval evaluates n as n.eval would, running its expressions on the
// shared machine.
func (e *searchEval) eval(n node) (any, error) {
	switch n := n.(type) {
	case nil:
		return nil, nil
	case exprNode:
		return n.run(&e.machine, e.env)
	case templateNode:
		return n.run(&e.machine, e.env)
	case listNode:
		l := make([]any, len(n.items))
		for i, it := range n.items {
			x, err := e.eval(it)
			if err == nil {
				x, err = jsonv.Plain(x)
			}
			if err != nil {
				return nil, err
			}
			l[i] = x
		}
		return l, nil
	}
	return n.eval(e.env)
}

// searchTypeError is a value of another type than its attribute's.
type searchTypeError struct {
	got  string // typeName of the value
	want weft.SearchType
}

func (e *searchTypeError) Error() string {
	return "got " + e.got + ", want " + searchWant(e.want)
}

// searchWant names what a search type takes, for messages.
func searchWant(t weft.SearchType) string {
	switch t {
	case weft.SearchString:
		return "a string"
	case weft.SearchNumber:
		return "a number"
	case weft.SearchBool:
		return "a boolean"
	case weft.SearchTime:
		return "a time: an RFC 3339 string such as 2026-03-01T09:00:00Z"
	case weft.SearchKeywords:
		return "a string or a list of strings"
	}
	return "a value of type " + string(t)
}

// searchValue converts x, what an attribute's value yielded, to a value
// of type t. ok is false, without an error, when the attribute is absent:
// x is null, or an empty list of keywords (or one of nulls only).
func searchValue(t weft.SearchType, x any) (v weft.SearchValue, ok bool, err error) {
	if x == nil {
		return weft.SearchValue{}, false, nil
	}
	v.Type = t
	switch t {
	case weft.SearchString:
		s, isString := x.(string)
		if !isString {
			return v, false, &searchTypeError{got: typeName(x), want: t}
		}
		if err := searchString(s); err != nil {
			return v, false, err
		}
		v.String = s
	case weft.SearchNumber:
		f, err := searchNumber(x)
		if err != nil {
			return v, false, err
		}
		v.Number = f
	case weft.SearchBool:
		b, isBool := x.(bool)
		if !isBool {
			return v, false, &searchTypeError{got: typeName(x), want: t}
		}
		v.Bool = b
	case weft.SearchTime:
		tm, err := searchTime(x)
		if err != nil {
			return v, false, err
		}
		v.Time = tm
	case weft.SearchKeywords:
		ks, err := searchKeywordList(x)
		if err != nil || len(ks) == 0 {
			return v, false, err
		}
		v.Keywords = ks
	default:
		return v, false, fmt.Errorf("unknown search attribute type %q", t)
	}
	return v, true, nil
}

// searchString checks a string value or a keyword.
func searchString(s string) error {
	switch {
	case len(s) > weft.MaxSearchStringLen:
		return fmt.Errorf("the string is %d bytes long; the limit is %d", len(s), weft.MaxSearchStringLen)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("the string %q holds a NUL byte", s)
	case !utf8.ValidString(s):
		return fmt.Errorf("the string %q is not valid UTF-8", s)
	}
	return nil
}

// searchNumber converts a number of any Go numeric type, or a
// json.Number, to a finite float64.
func searchNumber(x any) (float64, error) {
	var f float64
	switch x := x.(type) {
	case float64:
		f = x
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case float32:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(x), 64); err != nil {
			return 0, fmt.Errorf("got the JSON number %q, which is not a number a search can hold", string(x))
		}
	default:
		rv := reflect.ValueOf(x)
		switch {
		case rv.CanInt():
			return float64(rv.Int()), nil
		case rv.CanUint():
			return float64(rv.Uint()), nil
		case rv.CanFloat():
			f = rv.Float()
		default:
			return 0, &searchTypeError{got: typeName(x), want: weft.SearchNumber}
		}
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("got %s, want a finite number", formatFloat(f))
	}
	return f, nil
}

// searchTime converts an RFC 3339 string with a zone offset, or a
// time.Time, to a time in UTC that RFC 3339 can write.
func searchTime(x any) (time.Time, error) {
	var t time.Time
	switch x := x.(type) {
	case string:
		var err error
		if t, err = time.Parse(time.RFC3339, x); err != nil {
			if len(x) > 64 {
				x = x[:64] + "…"
			}
			return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time with a zone offset, e.g. 2026-03-01T09:00:00Z or 2026-03-01T09:00:00+01:00", x)
		}
	case time.Time:
		t = x
	default:
		return time.Time{}, &searchTypeError{got: typeName(x), want: weft.SearchTime}
	}
	if !writable(t) {
		return time.Time{}, fmt.Errorf("%s: %s", t.Format(time.RFC3339Nano), unwritable)
	}
	return t.UTC(), nil
}

// searchKeywordList converts a list of strings, or one string, to
// keywords: nulls skipped, duplicates dropped (the first kept), each
// checked as a string value, at most weft.MaxSearchKeywords. An empty
// result is the attribute absent.
func searchKeywordList(x any) ([]string, error) {
	switch x := x.(type) {
	case string:
		if err := searchString(x); err != nil {
			return nil, err
		}
		return []string{x}, nil
	case []string:
		var ks []string
		for i, s := range x {
			var err error
			if ks, err = addKeyword(ks, i, s, len(x)); err != nil {
				return nil, err
			}
		}
		return ks, nil
	}
	l, isList := toList(x)
	if !isList {
		return nil, &searchTypeError{got: typeName(x), want: weft.SearchKeywords}
	}
	var ks []string
	for i, item := range l {
		if item == nil {
			continue
		}
		s, isString := item.(string)
		if !isString {
			return nil, fmt.Errorf("item %d: got %s, want a string", i, typeName(item))
		}
		var err error
		if ks, err = addKeyword(ks, i, s, len(l)); err != nil {
			return nil, err
		}
	}
	return ks, nil
}

// addKeyword appends s, item i of a list of n, to ks unless ks holds it.
func addKeyword(ks []string, i int, s string, n int) ([]string, error) {
	if err := searchString(s); err != nil {
		return nil, fmt.Errorf("item %d: %w", i, err)
	}
	for _, k := range ks {
		if k == s {
			return ks, nil
		}
	}
	if len(ks) == weft.MaxSearchKeywords {
		return nil, fmt.Errorf("more than %d distinct keywords (the list has %d items); the limit is %d", weft.MaxSearchKeywords, n, weft.MaxSearchKeywords)
	}
	if ks == nil {
		ks = make([]string, 0, min(n, weft.MaxSearchKeywords))
	}
	return append(ks, s), nil
}

// search decodes a workflow's search: a map of attribute names to maps
// with a type and a value. The attributes are sorted by name; the type is
// kept as written, for validate to check, and the value is compiled over
// input and vars.
func (d *decoder) search(f field) []SearchAttr {
	sfs, order, ok := d.fields(f.val, f.path, "a map of search attribute names to {type, value}")
	if !ok {
		return nil
	}
	sort.Strings(order)
	out := make([]SearchAttr, 0, len(order))
	fields := []string{"type", "value"}
	for _, name := range order {
		af := sfs[name]
		a := SearchAttr{Name: name}
		if msg := searchNameProblem(name); msg != "" {
			d.problem(af.key, af.path, "%s", msg)
			a.nameReported = true
		}
		afs, aorder, ok := d.fields(af.val, af.path, `a map with a type and a value, e.g. {type: string, value: "${ input.customer }"}`)
		if !ok {
			a.typeReported, a.valueReported = true, true
			out = append(out, a)
			continue
		}
		d.unknown(afs, aorder, fields...)
		if tf, ok := afs["type"]; ok {
			s, ok := d.str(tf)
			a.Type, a.typeReported = weft.SearchType(s), !ok
		} else {
			a.typeReported = misspelt(aorder, fields, "type")
		}
		if vf, ok := afs["value"]; ok {
			a.Value = d.compiled(vf, compiler{}, wantAny)
			a.valueReported = a.Value.IsZero()
			a.path = pathOf(a.Value)
		} else {
			a.valueReported = misspelt(aorder, fields, "value")
		}
		out = append(out, a)
	}
	return out
}

// search checks a workflow's search attributes: how many, their names,
// their types, and their values against their types, a literal's as it
// is and an expression's as far as expr's type checker knows it.
func (v *validator) search(attrs []SearchAttr) {
	if len(attrs) > weft.MaxSearchAttributes {
		v.problem("search", "%d search attributes; the limit is %d", len(attrs), weft.MaxSearchAttributes)
	}
	seen := make(map[string]bool, len(attrs))
	for _, a := range attrs {
		path := joinKey("search", a.Name)
		if seen[a.Name] {
			v.problem(path, "duplicate search attribute %q", a.Name)
			continue
		}
		seen[a.Name] = true
		if msg := searchNameProblem(a.Name); msg != "" && !a.nameReported {
			v.problem(path, "%s", msg)
		}
		typeOK := v.searchType(path+".type", a)
		switch {
		case a.valueReported:
		case a.Value.IsZero():
			v.problem(path+".value", "required: a literal or a ${ } expression over input and vars")
		case typeOK:
			v.searchValue(path+".value", a.Type, a.Value.n)
		}
	}
}

// searchNameProblem says what is wrong with an attribute's name, or "":
// it must be what a query can name, and not what a query names already.
func searchNameProblem(name string) string {
	valid := name != "" && name[0] >= 'a' && name[0] <= 'z'
	for i := 0; i < len(name) && valid; i++ {
		c := name[i]
		valid = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'
	}
	switch {
	case len(name) > weft.MaxSearchNameLen:
		return fmt.Sprintf("the search attribute name is %d bytes long; the limit is %d", len(name), weft.MaxSearchNameLen)
	case !valid:
		hint := ""
		if low := strings.ToLower(name); low != name && searchNameProblem(low) == "" {
			hint = "; did you mean " + low + "?"
		}
		return fmt.Sprintf("invalid search attribute name %q: want a lower-case letter, then lower-case letters, digits or _%s", name, hint)
	case contains(searchBuiltins, name):
		return fmt.Sprintf("%q is a built-in field of the query language (%s), which every instance has: name the attribute otherwise", name, strings.Join(searchBuiltins, ", "))
	case contains(searchKeywords, name):
		return fmt.Sprintf("%q is a keyword of the query language (%s): name the attribute otherwise", name, strings.Join(searchKeywords, ", "))
	}
	return ""
}

// searchType checks an attribute's type, and reports whether it is one.
func (v *validator) searchType(path string, a SearchAttr) bool {
	switch {
	case a.Type.Valid():
		return true
	case a.typeReported:
	case a.Type == "":
		v.problem(path, "required: one of %s", searchTypeList())
	default:
		hint := didYouMean(string(a.Type), searchTypeNames())
		if t, ok := searchTypeAliases[strings.ToLower(string(a.Type))]; hint == "" && ok {
			hint = "; did you mean " + string(t) + "?"
		}
		if hint == "" {
			hint = "; want one of " + searchTypeList()
		}
		v.problem(path, "unknown type %q%s", a.Type, hint)
	}
	return false
}

// searchTypeNames lists the search types, for suggestions and messages.
func searchTypeNames() []string {
	ts := weft.SearchTypes()
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = string(t)
	}
	return names
}

// searchTypeList is "string, number, bool, time or keywords".
func searchTypeList() string {
	names := searchTypeNames()
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// searchValue checks an attribute's value, compiled into n, against its
// type t: a literal wholly, as SearchValues would convert it; an
// expression by the type expr's checker gives it, when it knows one; a
// template yields a string; a map is never a value, nor a list but of
// keywords, whose items are checked one by one.
func (v *validator) searchValue(path string, t weft.SearchType, n node) {
	want := searchWant(t) + " or a ${ } expression"
	if t == weft.SearchString {
		want += " (quote a number or a boolean to use it as a string)"
	}
	switch n := n.(type) {
	case constNode:
		// A constant is a string, a number, a boolean or null: never
		// absent but for null.
		x, _ := n.eval(nil)
		_, _, err := searchValue(t, x)
		switch te, isType := err.(*searchTypeError); {
		case x == nil:
			v.problem(path, "got null, want %s", want)
		case isType:
			v.problem(path, "got %s, want %s", te.got, want)
		case err != nil:
			v.problem(path, "%v", err)
		}
	case mapNode:
		v.problem(path, "got a map, want %s", want)
	case listNode:
		if t != weft.SearchKeywords {
			v.problem(path, "got a list, want %s", want)
			return
		}
		literal := true
		for i, it := range n.items {
			ip := joinIndex(path, i)
			switch it := it.(type) {
			case nil:
				return // it did not compile, and the compiler said why
			case constNode:
				if _, isString := it.v.(string); !isString && it.v != nil {
					v.problem(ip, "got %s, want a string or a ${ } expression", typeName(it.v))
					return
				}
			case exprNode:
				literal = false
				v.searchExpr(ip, weft.SearchString, it)
			case templateNode:
				literal = false
			case mapNode:
				v.problem(ip, "got a map, want a string or a ${ } expression")
				return
			case listNode:
				v.problem(ip, "got a list, want a string or a ${ } expression")
				return
			}
		}
		if !literal {
			return
		}
		x, _ := n.eval(nil)
		switch ks, err := searchKeywordList(x); {
		case err != nil:
			v.problem(path, "%v", err)
		case len(ks) == 0:
			v.problem(path, "an empty list of keywords is never a value: want at least one keyword or a ${ } expression")
		}
	case exprNode:
		v.searchExpr(path, t, n)
	case templateNode:
		if t == weft.SearchNumber || t == weft.SearchBool {
			v.problem(path, "a string template always yields a string; want a single ${ } expression yielding %s", searchWant(t))
		}
	}
}

// searchExpr checks the type of a single ${ } expression, when expr's
// type checker knows it, against the search type t.
func (v *validator) searchExpr(path string, t weft.SearchType, n exprNode) {
	rt := n.prog.Node().Type()
	if rt == nil || rt.Kind() == reflect.Interface {
		return
	}
	k := rt.Kind()
	numeric := (k >= reflect.Int && k <= reflect.Uint64) || k == reflect.Float32 || k == reflect.Float64
	var ok bool
	switch t {
	case weft.SearchString:
		ok = k == reflect.String
	case weft.SearchNumber:
		ok = numeric
	case weft.SearchBool:
		ok = k == reflect.Bool
	case weft.SearchTime:
		ok = k == reflect.String || rt == reflect.TypeOf(time.Time{})
	case weft.SearchKeywords:
		ok = k == reflect.String || ((k == reflect.Slice || k == reflect.Array) &&
			(rt.Elem().Kind() == reflect.String || rt.Elem().Kind() == reflect.Interface))
	}
	if !ok {
		v.problem(path, "expression %q yields %s, want %s", strings.TrimSpace(n.src), rt, searchWant(t))
	}
}

// canonicalSearch writes a workflow's search attributes into its
// canonical form m, only when there are some, so that the versions saved
// before the field existed keep their hash; values as written.
func canonicalSearch(m map[string]any, attrs []SearchAttr) {
	if len(attrs) == 0 {
		return
	}
	sm := make(map[string]any, len(attrs))
	for _, a := range attrs {
		sm[a.Name] = map[string]any{"type": string(a.Type), "value": a.Value.src}
	}
	m["search"] = sm
}
