package query

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weftworks/weft/host/weft"
)

// Range is what the comparisons of a query's top-level AND say of one
// field, in the form a store reads from an index of that field: a set of
// values, or an interval. Every instance the query matches has the field,
// with a value in the Range (for keywords: a list that holds one of the
// Values); the store picks one Range to drive its scan and filters what it
// reads with Eval.
//
// Values are typed as Record's: string, float64, bool or time.Time (UTC).
type Range struct {
	// Field is the field's name: a built-in field or a search attribute.
	Field string
	// Type is the field's type.
	Type weft.SearchType
	// Values, when not nil, is the set the value must be one of, sorted
	// and each once (for keywords: the list must hold one of them, so an
	// index of keywords may hold one instance under several of them). Lo
	// and Hi are then nil.
	Values []any
	// Lo and Hi bound the value when Values is nil; nil is unbounded. A
	// STARTS_WITH is the interval of the strings with its prefix: from the
	// prefix, inclusive, to the prefix with its last byte below 0xff
	// incremented (and what follows cut), exclusive.
	Lo, Hi any
	// LoInclusive and HiInclusive say whether Lo and Hi are in the range.
	LoInclusive, HiInclusive bool
	// Empty says that no value satisfies the comparisons: the query
	// matches nothing, and a store need read nothing. Values, Lo and Hi
	// are then nil.
	Empty bool
	// Exact says that the Range is all the top-level comparisons on the
	// field say: an instance read from it satisfies them all. It is false
	// when one was left out (!= and NOT IN, a second comparison on a
	// keyword list), whose Eval must then decide.
	Exact bool
}

// Plan picks what a store can read from an index: the comparisons of
// the query's top-level AND (or the query's one comparison) that are =,
// IN, <, <=, >, >= or STARTS_WITH, merged per field into a Range, sorted
// by field. A query that is neither an AND nor a comparison at the top
// (an OR, a NOT) has no plan: nil, and the store scans everything. An
// unchecked query has no plan either.
//
// Comparisons under an OR or a NOT are never in a Range: a Range is a
// necessary condition of the whole query, and only the top-level AND's
// terms are.
func (q *Query) Plan() []Range {
	if q == nil || !q.checked {
		return nil
	}
	var kids []node
	switch n := q.root.(type) {
	case *and:
		kids = n.kids
	case *comparison:
		kids = []node{n}
	default:
		return nil
	}
	var merged []*merger
	for _, k := range kids {
		c, ok := k.(*comparison)
		if !ok {
			continue
		}
		i := slices.IndexFunc(merged, func(m *merger) bool { return m.field == c.field })
		if i < 0 {
			i = len(merged)
			merged = append(merged, &merger{field: c.field, typ: c.typ})
		}
		merged[i].add(c)
	}
	var ranges []Range
	for _, m := range merged {
		if r, ok := m.result(); ok {
			ranges = append(ranges, r)
		}
	}
	slices.SortFunc(ranges, func(a, b Range) int { return strings.Compare(a.Field, b.Field) })
	return ranges
}

// merger merges the comparisons on one field into a Range.
type merger struct {
	field        string
	typ          weft.SearchType
	set          []any // sorted, each once; nil with hasSet: empty
	hasSet       bool
	lo, hi       any
	loInc, hiInc bool
	planned      int // comparisons merged
	skipped      int // comparisons left out
}

// add merges c.
func (m *merger) add(c *comparison) {
	if c.op.negative() {
		m.skipped++
		return
	}
	m.planned++
	vals := c.values()
	if m.typ == weft.SearchKeywords {
		// Two comparisons on a list (holds a, holds b) do not intersect:
		// keep the one of fewest values.
		if !m.hasSet || len(vals) < len(m.set) {
			m.set, m.hasSet = vals, true
		}
		return
	}
	switch c.op {
	case opEq, opIn:
		if !m.hasSet {
			m.set, m.hasSet = vals, true
			return
		}
		m.set = slices.DeleteFunc(m.set, func(v any) bool {
			return !slices.ContainsFunc(vals, func(w any) bool { return compareValues(v, w) == 0 })
		})
	case opLt:
		m.upper(vals[0], false)
	case opLe:
		m.upper(vals[0], true)
	case opGt:
		m.lower(vals[0], false)
	case opGe:
		m.lower(vals[0], true)
	case opStartsWith:
		p := vals[0].(string)
		m.lower(p, true)
		if end, ok := prefixEnd(p); ok {
			m.upper(end, false)
		}
	}
}

// lower raises the lower bound to v when that narrows the range.
func (m *merger) lower(v any, inclusive bool) {
	if m.lo == nil {
		m.lo, m.loInc = v, inclusive
		return
	}
	switch c := compareValues(v, m.lo); {
	case c > 0:
		m.lo, m.loInc = v, inclusive
	case c == 0:
		m.loInc = m.loInc && inclusive
	}
}

// upper lowers the upper bound to v when that narrows the range.
func (m *merger) upper(v any, inclusive bool) {
	if m.hi == nil {
		m.hi, m.hiInc = v, inclusive
		return
	}
	switch c := compareValues(v, m.hi); {
	case c < 0:
		m.hi, m.hiInc = v, inclusive
	case c == 0:
		m.hiInc = m.hiInc && inclusive
	}
}

// within reports whether v is within the bounds.
func (m *merger) within(v any) bool {
	if m.lo != nil {
		if c := compareValues(v, m.lo); c < 0 || c == 0 && !m.loInc {
			return false
		}
	}
	if m.hi != nil {
		if c := compareValues(v, m.hi); c > 0 || c == 0 && !m.hiInc {
			return false
		}
	}
	return true
}

// result is the Range, or false when no comparison could be merged.
func (m *merger) result() (Range, bool) {
	if m.planned == 0 {
		return Range{}, false
	}
	r := Range{Field: m.field, Type: m.typ, Exact: m.skipped == 0}
	switch {
	case m.typ == weft.SearchKeywords:
		r.Values = m.set
		r.Exact = r.Exact && m.planned == 1
	case m.hasSet:
		r.Values = slices.DeleteFunc(m.set, func(v any) bool { return !m.within(v) })
		if len(r.Values) == 0 {
			r.Values, r.Empty = nil, true
		}
	default:
		r.Lo, r.LoInclusive, r.Hi, r.HiInclusive = m.lo, m.loInc, m.hi, m.hiInc
		if m.lo != nil && m.hi != nil {
			if c := compareValues(m.lo, m.hi); c > 0 || c == 0 && !(m.loInc && m.hiInc) {
				r = Range{Field: m.field, Type: m.typ, Empty: true, Exact: r.Exact}
			}
		}
	}
	return r, true
}

// values returns the comparison's values typed as Record's, sorted and
// each once.
func (c *comparison) values() []any {
	vals := make([]any, 0, len(c.vals))
	for i := range c.vals {
		l := &c.vals[i]
		switch {
		case c.typ == weft.SearchNumber:
			vals = append(vals, l.num)
		case c.typ == weft.SearchBool:
			vals = append(vals, l.b)
		case c.typ == weft.SearchTime:
			vals = append(vals, l.t)
		default:
			vals = append(vals, l.str)
		}
	}
	slices.SortFunc(vals, compareValues)
	return slices.CompactFunc(vals, func(a, b any) bool { return compareValues(a, b) == 0 })
}

// prefixEnd returns the least string above every string that starts with
// p: p with its last byte below 0xff incremented and what follows cut; or
// false when there is none (p is empty or all 0xff).
func prefixEnd(p string) (string, bool) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] < 0xff {
			return p[:i] + string([]byte{p[i] + 1}), true
		}
	}
	return "", false
}

// String prints the Range for logs and tests: the field, its type, then
// the set ({"a", "b"}), the interval ([100, +inf)) or "empty", and
// "exact" when it is.
func (r Range) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s ", r.Field, r.Type)
	switch {
	case r.Empty:
		b.WriteString("empty")
	case r.Values != nil:
		b.WriteByte('{')
		for i, v := range r.Values {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(formatValue(v))
		}
		b.WriteByte('}')
	default:
		lo, hi := "(-inf", "+inf)"
		if r.Lo != nil {
			lo = "(" + formatValue(r.Lo)
			if r.LoInclusive {
				lo = "[" + formatValue(r.Lo)
			}
		}
		if r.Hi != nil {
			hi = formatValue(r.Hi) + ")"
			if r.HiInclusive {
				hi = formatValue(r.Hi) + "]"
			}
		}
		b.WriteString(lo + ", " + hi)
	}
	if r.Exact {
		b.WriteString(" exact")
	}
	return b.String()
}
