package query

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Record gives Eval an instance's field values. Field returns the value of
// a built-in field or a search attribute, and whether the instance has it;
// by the field's type, the value is a string (a weft.Status for status
// will do too), a float64, a bool, a time.Time or a []string (keywords).
// A value of another Go type counts as missing.
type Record interface {
	Field(name string) (any, bool)
}

// Eval reports whether the instance r matches the checked query q. An
// instance without a field matches no comparison on it but != and NOT IN,
// so that `x != v` is always `NOT x = v` (package doc, "Missing fields").
// An unchecked query matches nothing.
func (q *Query) Eval(r Record) bool {
	if q == nil || !q.checked {
		return false
	}
	return eval(q.root, r)
}

// eval reports whether n holds for r.
func eval(n node, r Record) bool {
	switch n := n.(type) {
	case *and:
		for _, k := range n.kids {
			if !eval(k, r) {
				return false
			}
		}
		return true
	case *or:
		for _, k := range n.kids {
			if eval(k, r) {
				return true
			}
		}
		return false
	case *not:
		return !eval(n.kid, r)
	case *comparison:
		return n.eval(r)
	}
	return false
}

// eval reports whether the comparison holds for r.
func (c *comparison) eval(r Record) bool {
	v, ok := r.Field(c.field)
	if !ok {
		return c.op.negative()
	}
	switch c.typ {
	case weft.SearchString:
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case weft.Status:
			s = string(v)
		default:
			return c.op.negative()
		}
		if c.op == opStartsWith {
			return strings.HasPrefix(s, c.vals[0].str)
		}
		return c.decide(func(l *literal) int { return strings.Compare(s, l.str) })
	case weft.SearchNumber:
		f, ok := v.(float64)
		if !ok || f != f { // NaN, which no JSON number is, counts as missing
			return c.op.negative()
		}
		return c.decide(func(l *literal) int { return cmp.Compare(f, l.num) })
	case weft.SearchTime:
		t, ok := v.(time.Time)
		if !ok {
			return c.op.negative()
		}
		return c.decide(func(l *literal) int { return t.Compare(l.t) })
	case weft.SearchBool:
		b, ok := v.(bool)
		if !ok {
			return c.op.negative()
		}
		return c.decide(func(l *literal) int {
			if b == l.b {
				return 0
			}
			return 1
		})
	case weft.SearchKeywords:
		list, ok := v.([]string)
		if !ok {
			return c.op.negative()
		}
		holds := false
		for i := range c.vals {
			if slices.Contains(list, c.vals[i].str) {
				holds = true
				break
			}
		}
		return holds != c.op.negative()
	}
	return false
}

// decide applies the operator to a scalar, given how it compares with
// each of the comparison's values: = and IN hold when it equals one, !=
// and NOT IN when it equals none, the others by order with the one value.
func (c *comparison) decide(compare func(*literal) int) bool {
	switch c.op {
	case opLt:
		return compare(&c.vals[0]) < 0
	case opLe:
		return compare(&c.vals[0]) <= 0
	case opGt:
		return compare(&c.vals[0]) > 0
	case opGe:
		return compare(&c.vals[0]) >= 0
	}
	equal := false
	for i := range c.vals {
		if compare(&c.vals[i]) == 0 {
			equal = true
			break
		}
	}
	return equal != c.op.negative()
}
