package definition

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
)

// Env is what expressions are evaluated against. Input and the values of
// Vars may be *jsonv.Doc: documents kept as their bytes, which an
// expression decodes only when it computes on them, and which a whole
// reference (`${ input }`, `${ vars.x }`) yields as they are.
type Env struct {
	// Input is the instance input: `input` in expressions.
	Input any
	// Vars holds the values stored by steps: `vars` in expressions.
	Vars map[string]any
	// Locals holds the loop variables of the enclosing foreach steps, by the
	// names given in their `as` fields.
	Locals map[string]any
}

// With returns a copy of e with the local name bound to v. e is not
// modified, so sibling iterations of a foreach can share a parent Env.
func (e Env) With(name string, v any) Env {
	locals := make(map[string]any, len(e.Locals)+1)
	for k, x := range e.Locals {
		locals[k] = x
	}
	locals[name] = v
	e.Locals = locals
	return e
}

func (e Env) exprEnv() map[string]any {
	m := make(map[string]any, 2+len(e.Locals))
	for k, v := range e.Locals {
		m[k] = v
	}
	vars := e.Vars
	if vars == nil {
		vars = map[string]any{}
	}
	m["input"] = e.Input
	m["vars"] = vars
	return m
}

// want is what a Value must evaluate to.
type want int

const (
	wantAny want = iota
	wantBool
	wantList
	// wantDuration: a computed duration, a string or a number of seconds
	// (Value.EvalDuration reads it).
	wantDuration
	// wantTime: an absolute time, an RFC 3339 string (Value.EvalTime reads
	// it).
	wantTime
	// wantInt: an integer (a priority, a weight; Definition.Order reads
	// it).
	wantInt
	// wantKey: a fairness or concurrency key, a scalar written as a
	// string (Definition.Order and Definition.ConcurrencyKey read it).
	wantKey
)

// Value is a compiled value from a definition: a constant, a `${ expr }`
// expression, a string template interpolating several expressions, or a map
// or list nesting any of these. Its expressions were compiled once, when the
// definition was parsed; Eval only runs them. The zero Value is absent and
// evaluates to nil.
//
// A Value is immutable and safe for concurrent use.
type Value struct {
	src  any // source form: nil, bool, int, float64, string, []any, map[string]any
	n    node
	want want
}

// IsZero reports whether the value is absent from the definition.
func (v Value) IsZero() bool { return v.n == nil }

// Source returns the value as written in the definition, with its
// expressions unevaluated.
func (v Value) Source() any { return v.src }

// IsConst reports whether the value holds no expression.
func (v Value) IsConst() bool {
	_, ok := v.n.(constNode)
	return ok || v.n == nil
}

// MarshalJSON encodes the value's source form.
func (v Value) MarshalJSON() ([]byte, error) { return jsonv.Marshal(v.src) }

// Eval evaluates the value against env. Maps and lists are built afresh on
// every call, so the caller may modify the result. A value that is a whole
// document of env (`${ input }`, `${ vars.x }`, a member of either), or a
// map or list holding one, may be a *jsonv.Doc: the document's bytes, not
// decoded (see package jsonv); a value of a typed kind (a condition, a
// list, a duration…) never is. Errors are *EvalError.
func (v Value) Eval(env Env) (any, error) {
	if v.n == nil {
		return nil, nil
	}
	x, err := v.n.eval(env.exprEnv())
	if err != nil {
		return nil, err
	}
	if v.want != wantAny {
		if x, err = plain(x, v.src); err != nil {
			return nil, err
		}
	}
	switch v.want {
	case wantBool:
		if _, ok := x.(bool); !ok {
			return nil, &EvalError{Source: sourceString(v.src), Err: fmt.Errorf("got %s, want a boolean", typeName(x))}
		}
	case wantList:
		l, ok := toList(x)
		if !ok {
			return nil, &EvalError{Source: sourceString(v.src), Err: fmt.Errorf("got %s, want a list", typeName(x))}
		}
		return l, nil
	}
	return x, nil
}

// EvalBool evaluates a condition (an `if`). Errors are *EvalError.
func (v Value) EvalBool(env Env) (bool, error) {
	x, err := v.Eval(env)
	if err != nil {
		return false, err
	}
	b, ok := x.(bool)
	if !ok {
		return false, &EvalError{Source: sourceString(v.src), Err: fmt.Errorf("got %s, want a boolean", typeName(x))}
	}
	return b, nil
}

// EvalList evaluates a list (a `foreach`). Errors are *EvalError.
func (v Value) EvalList(env Env) ([]any, error) {
	x, err := v.Eval(env)
	if err != nil {
		return nil, err
	}
	l, ok := toList(x)
	if !ok {
		return nil, &EvalError{Source: sourceString(v.src), Err: fmt.Errorf("got %s, want a list", typeName(x))}
	}
	return l, nil
}

// EvalString evaluates the value and writes the result as a template
// would: a string as it is, null as nothing, numbers and booleans as in
// JSON, maps and lists as JSON. Use it for a wait's correlation key. Errors
// are *EvalError.
func (v Value) EvalString(env Env) (string, error) {
	x, err := v.Eval(env)
	if err != nil {
		return "", err
	}
	return stringify(x), nil
}

func toList(x any) ([]any, bool) {
	if l, ok := x.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(x)
	if !rv.IsValid() || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
		return nil, false
	}
	l := make([]any, rv.Len())
	for i := range l {
		l[i] = rv.Index(i).Interface()
	}
	return l, true
}

func sourceString(src any) string {
	if s, ok := src.(string); ok {
		return s
	}
	b, _ := jsonv.Marshal(src)
	return string(b)
}

func typeName(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return "a number"
	case map[string]any:
		return "a map"
	}
	if _, ok := toList(x); ok {
		return "a list"
	}
	return fmt.Sprintf("a %T", x)
}

// node is one compiled part of a Value.
type node interface {
	eval(env map[string]any) (any, error)
}

type constNode struct{ v any } // a scalar: nil, bool, int, float64, string

func (n constNode) eval(map[string]any) (any, error) { return n.v, nil }

type exprNode struct {
	src  string
	prog *vm.Program
	// path is set when the expression is a path of names from input or
	// vars (pathOfProgram): run reads it from the maps, and yields a
	// document it ends at as it is, without decoding it.
	path *memberPath
	// uses is what of the environment the expression reads, for the
	// documents decoded before the machine runs it.
	uses uses
}

func (n exprNode) eval(env map[string]any) (any, error) {
	var machine vm.VM
	return n.run(&machine, env)
}

// run evaluates the expression on machine, which it may reuse from a
// previous run (expr.Run takes a new one each time).
func (n exprNode) run(machine *vm.VM, env map[string]any) (any, error) {
	if x, ok, err := n.path.readEnv(env); ok || err != nil {
		if err != nil {
			return nil, &EvalError{Source: "${" + n.src + "}", Err: err}
		}
		return x, nil
	}
	env, err := n.uses.decoded(env)
	if err != nil {
		return nil, &EvalError{Source: "${" + n.src + "}", Err: err}
	}
	x, err := machine.Run(n.prog, env)
	if err != nil {
		return nil, &EvalError{Source: "${" + n.src + "}", Err: errors.New(exprMessage(err))}
	}
	if what, where := unencodable(x, ""); what != "" {
		if where != "" {
			what += " at " + where
		}
		return nil, &EvalError{Source: "${" + n.src + "}", Err: fmt.Errorf("yields %s, which JSON cannot hold (/ divides as floats: x/0 is ±Inf, 0/0 is NaN)", what)}
	}
	return x, nil
}

// unencodable returns what in x JSON cannot hold, and where in it (a path
// such as a.b[1], empty for x itself), or "" when x is a JSON value.
//
// Everything an expression yields goes into JSON: an activity's input, a
// variable, the output, the state the engine persists. A number that is
// not finite (expr's / divides as floats, so 1/0 is +Inf) cannot be
// encoded, and would fail there, the same way at every attempt, where
// nothing names the expression; failing the expression does. Of several
// such values in a map, the one under the least key is named, so that
// the message does not depend on the map's order.
func unencodable(x any, at string) (what, where string) {
	switch x := x.(type) {
	case nil, bool, string, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "", ""
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return formatFloat(x), at
		}
		return "", ""
	case float32:
		return unencodable(float64(x), at)
	case map[string]any:
		var bad []string
		for k, v := range x {
			if w, _ := unencodable(v, ""); w != "" {
				bad = append(bad, k)
			}
		}
		if len(bad) == 0 {
			return "", ""
		}
		slices.Sort(bad)
		return unencodable(x[bad[0]], joinKey(at, bad[0]))
	case []any:
		for i, v := range x {
			if w, wh := unencodable(v, joinIndex(at, i)); w != "" {
				return w, wh
			}
		}
		return "", ""
	}
	// Anything else expr may yield (a time, a duration, a typed slice):
	// encodable or not as encoding/json says.
	if _, err := jsonv.Marshal(x); err != nil {
		return fmt.Sprintf("a %T that does not encode (%v)", x, err), at
	}
	return "", ""
}

type templateNode struct {
	lits  []string // len(lits) == len(exprs)+1
	exprs []exprNode
}

func (n templateNode) eval(env map[string]any) (any, error) {
	var machine vm.VM
	return n.run(&machine, env)
}

// run evaluates the template, its expressions on machine.
func (n templateNode) run(machine *vm.VM, env map[string]any) (any, error) {
	var b strings.Builder
	for i, e := range n.exprs {
		b.WriteString(n.lits[i])
		x, err := e.run(machine, env)
		if err != nil {
			return nil, err
		}
		if x, err = plain(x, "${"+e.src+"}"); err != nil {
			return nil, err
		}
		b.WriteString(stringify(x))
	}
	b.WriteString(n.lits[len(n.lits)-1])
	return b.String(), nil
}

type mapNode struct {
	keys []string
	vals []node
}

func (n mapNode) eval(env map[string]any) (any, error) {
	m := make(map[string]any, len(n.keys))
	docs := false
	for i, k := range n.keys {
		x, err := n.vals[i].eval(env)
		if err != nil {
			return nil, err
		}
		_, doc := x.(*jsonv.Doc)
		docs = docs || doc
		m[k] = x
	}
	if docs {
		// A map holding a document is a document: encoded once, here,
		// the document's bytes copied (package jsonv's invariant).
		b, err := jsonv.EncodeMap(m)
		if err != nil {
			return nil, &EvalError{Source: "a map", Err: err}
		}
		return jsonv.Trusted(b), nil
	}
	return m, nil
}

type listNode struct{ items []node }

func (n listNode) eval(env map[string]any) (any, error) {
	l := make([]any, len(n.items))
	docs := false
	for i, it := range n.items {
		x, err := it.eval(env)
		if err != nil {
			return nil, err
		}
		_, doc := x.(*jsonv.Doc)
		docs = docs || doc
		l[i] = x
	}
	if docs {
		b, err := jsonv.EncodeList(l)
		if err != nil {
			return nil, &EvalError{Source: "a list", Err: err}
		}
		return jsonv.Trusted(b), nil
	}
	return l, nil
}

// stringify is how an interpolated expression's result is written into a
// string: strings as they are, null as nothing, numbers and booleans as in
// JSON, maps and lists as JSON.
func stringify(x any) string {
	switch x := x.(type) {
	case *jsonv.Doc:
		if v, err := x.Value(); err == nil {
			return stringify(v)
		}
		return string(x.Bytes()) // a number beyond float64, as written
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case float32:
		return formatFloat(float64(x))
	}
	if b, err := jsonv.Marshal(x); err == nil {
		return string(b)
	}
	return fmt.Sprint(x)
}

func formatFloat(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// compiler compiles values and collects problems.
type compiler struct {
	scope []string // loop variables in scope
	// inputOnly leaves vars out of scope: for what is evaluated when an
	// instance is created, before any step has set a variable.
	inputOnly bool
	problems  []weft.Problem
}

// inputOnlyHint ends the problem of an expression that names vars where
// only input is in scope.
const inputOnlyHint = "; only input is in scope here: priority, fairness and concurrency are decided when the instance is created, before any step runs"

func (c *compiler) problem(path, format string, args ...any) {
	c.problems = append(c.problems, weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) env() types.Map {
	m := types.Map{"input": types.Any}
	if !c.inputOnly {
		m["vars"] = types.Any
	}
	for _, name := range c.scope {
		m[name] = types.Any
	}
	return m
}

// value compiles src, found at path, into a Value of the wanted kind.
func (c *compiler) value(src any, path string, w want) Value {
	n := c.node(src, path, w)
	if n == nil {
		return Value{}
	}
	return Value{src: src, n: n, want: w}
}

func (c *compiler) node(src any, path string, w want) node {
	switch src := src.(type) {
	case string:
		return c.str(src, path, w)
	case map[string]any:
		if w != wantAny {
			c.problem(path, "got a map, want %s", wantName(w))
			return nil
		}
		keys := make([]string, 0, len(src))
		for k := range src {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		n := mapNode{keys: keys, vals: make([]node, len(keys))}
		for i, k := range keys {
			n.vals[i] = c.node(src[k], joinKey(path, k), wantAny)
		}
		return n
	case []any:
		if w != wantAny && w != wantList {
			c.problem(path, "got a list, want %s", wantName(w))
			return nil
		}
		n := listNode{items: make([]node, len(src))}
		for i, x := range src {
			n.items[i] = c.node(x, joinIndex(path, i), wantAny)
		}
		return n
	case nil, bool, int, float64:
		if _, ok := src.(int); w == wantInt && !ok {
			c.problem(path, "got %s, want %s", typeName(src), wantName(w))
			return nil
		}
		if w == wantKey && src == nil {
			c.problem(path, "got null, want %s", wantName(w))
			return nil
		}
		if w == wantBool {
			if _, ok := src.(bool); !ok {
				c.problem(path, "got %s, want %s", typeName(src), wantName(w))
				return nil
			}
		}
		if w == wantList {
			c.problem(path, "got %s, want %s", typeName(src), wantName(w))
			return nil
		}
		return constNode{src}
	}
	c.problem(path, "unsupported value of type %T", src)
	return nil
}

func wantName(w want) string {
	switch w {
	case wantBool:
		return "a boolean or a ${ } expression"
	case wantList:
		return "a list or a ${ } expression"
	case wantDuration:
		return "a duration or a ${ } expression"
	case wantTime:
		return "a time or a ${ } expression"
	case wantInt:
		return "an integer or a ${ } expression"
	case wantKey:
		return "a string or a ${ } expression"
	}
	return "a value"
}

func (c *compiler) str(s, path string, w want) node {
	lits, srcs, err := splitTemplate(s)
	if err != nil {
		c.problem(path, "%v", err)
		return nil
	}
	// A duration's or a time's string is read when its step runs; a
	// template yields one.
	typed := w == wantBool || w == wantList || w == wantInt
	if len(srcs) == 0 {
		if typed {
			c.problem(path, "got a string, want %s", wantName(w))
			return nil
		}
		return constNode{lits[0]}
	}
	exact := len(srcs) == 1 && lits[0] == "" && lits[1] == "" && strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}")
	if !exact && typed {
		c.problem(path, "a string template always yields a string; want a single ${ } expression yielding %s", map[want]string{wantBool: "a boolean", wantList: "a list", wantInt: "an integer"}[w])
		return nil
	}
	exprs := make([]exprNode, len(srcs))
	ok := true
	for i, src := range srcs {
		opts := []expr.Option{expr.Env(c.env())}
		if exact && w == wantBool {
			opts = append(opts, expr.AsBool())
		}
		if strings.TrimSpace(src) == "" {
			c.problem(path, "empty expression ${}")
			ok = false
			continue
		}
		prog, err := compileExpr(src, opts)
		if err != nil {
			msg := exprMessage(err)
			if c.inputOnly && strings.HasPrefix(msg, "unknown name vars ") {
				msg += inputOnlyHint
			}
			c.problem(path, "expression %q does not compile: %s", strings.TrimSpace(src), msg)
			ok = false
			continue
		}
		if exact && w == wantList {
			if t := prog.Node().Type(); t != nil && t.Kind() != reflect.Slice && t.Kind() != reflect.Array && t.Kind() != reflect.Interface {
				c.problem(path, "expression %q yields %s, want a list", strings.TrimSpace(src), t)
				ok = false
				continue
			}
		}
		if exact && (w == wantInt || w == wantKey) {
			if t := prog.Node().Type(); t != nil && !yields(t, w) {
				what := "an integer"
				if w == wantKey {
					what = "a string, a number or a boolean"
				}
				c.problem(path, "expression %q yields %s, want %s", strings.TrimSpace(src), t, what)
				ok = false
				continue
			}
		}
		if exact && (w == wantDuration || w == wantTime) {
			if t := prog.Node().Type(); t != nil && !yields(t, w) {
				what := "a duration: a string such as 90s or 7d, or a number of seconds"
				if w == wantTime {
					what = "a time: an RFC 3339 string such as 2026-03-01T09:00:00Z"
				}
				c.problem(path, "expression %q yields %s, want %s", strings.TrimSpace(src), t, what)
				ok = false
				continue
			}
		}
		exprs[i] = exprNode{src: src, prog: prog, path: pathOfProgram(prog), uses: usesOf(prog)}
	}
	if !ok {
		return nil
	}
	if exact {
		return exprs[0]
	}
	return templateNode{lits: lits, exprs: exprs}
}

// yields reports whether a value of type t, as expr's type checker knows
// it, may be what w wants: a duration is a string, a number or a
// time.Duration; a time is a string or a time.Time; an integer is a
// number (its fraction and range are checked when evaluated); a key is a
// string, a number or a boolean. An unknown type (interface) may be
// anything, and is checked when evaluated.
func yields(t reflect.Type, w want) bool {
	numeric := func(k reflect.Kind) bool {
		return (k >= reflect.Int && k <= reflect.Uint64) || k == reflect.Float32 || k == reflect.Float64
	}
	switch k := t.Kind(); {
	case k == reflect.Interface:
		return true
	case w == wantInt:
		return numeric(k)
	case w == wantKey:
		return k == reflect.String || k == reflect.Bool || numeric(k)
	case k == reflect.String:
		return true
	case w == wantTime:
		return t == reflect.TypeOf(time.Time{})
	default:
		return numeric(k)
	}
}

// compileExpr compiles one expression, turning a panic inside the expression
// library into an error so that no definition can crash the host.
func compileExpr(src string, opts []expr.Option) (prog *vm.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("expression compiler panicked: %v", r)
		}
	}()
	return expr.Compile(src, opts...)
}

// exprMessage is the one-line message of an expr error, without the source
// snippet that expr appends.
func exprMessage(err error) string {
	var fe *file.Error
	if errors.As(err, &fe) {
		return fmt.Sprintf("%s (at character %d)", fe.Message, fe.From+1)
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}

// splitTemplate splits s into literal text and the sources of its ${ }
// expressions: lits has one more element than srcs and s is lits[0] srcs[0]
// lits[1] … with each src wrapped in ${ }. `$${` is an escaped, literal `${`.
// An expression ends at the `}` that balances its `{`, outside string
// literals, so `${ {a: 1}.a }` and `${ "}" }` work.
func splitTemplate(s string) (lits, srcs []string, err error) {
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end, err := exprEnd(s, i+2)
			if err != nil {
				return nil, nil, err
			}
			lits = append(lits, lit.String())
			lit.Reset()
			srcs = append(srcs, s[i+2:end])
			i = end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	lits = append(lits, lit.String())
	return lits, srcs, nil
}

func exprEnd(s string, start int) (int, error) {
	depth := 1
	for j := start; j < len(s); j++ {
		switch c := s[j]; c {
		case '"', '\'', '`':
			k := j + 1
			for ; k < len(s) && s[k] != c; k++ {
				if s[k] == '\\' && c != '`' {
					k++
				}
			}
			if k >= len(s) {
				return 0, fmt.Errorf("unterminated string literal in expression starting at character %d", start-1)
			}
			j = k
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("unterminated ${ at character %d: no matching }", start-1)
}
