package query

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// String prints the query canonically: keywords upper-case, one space
// around operators and keywords, parentheses only where the precedence
// needs them, strings re-quoted with JSON's escapes and numbers as a JSON
// encoder writes them. Parse(q.String()) gives an equal tree, so the
// canonical form is what logs show and what a batch job keeps of its
// query.
func (q *Query) String() string { return q.text }

// writeNode writes n canonically.
func writeNode(b *strings.Builder, n node) {
	switch n := n.(type) {
	case *or:
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(" OR ")
			}
			writeNode(b, k)
		}
	case *and:
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(" AND ")
			}
			writeGrouped(b, k, false)
		}
	case *not:
		b.WriteString("NOT ")
		writeGrouped(b, n.kid, true)
	case *comparison:
		b.WriteString(n.field)
		b.WriteByte(' ')
		b.WriteString(n.op.String())
		b.WriteByte(' ')
		if n.op == opIn || n.op == opNotIn {
			b.WriteByte('(')
			for i, v := range n.vals {
				if i > 0 {
					b.WriteString(", ")
				}
				writeLiteral(b, v)
			}
			b.WriteByte(')')
			return
		}
		writeLiteral(b, n.vals[0])
	}
}

// writeGrouped writes n in parentheses when it binds less tightly than
// its parent: an OR under an AND, an AND or an OR under a NOT.
func writeGrouped(b *strings.Builder, n node, underNot bool) {
	_, isOr := n.(*or)
	_, isAnd := n.(*and)
	if isOr || underNot && isAnd {
		b.WriteByte('(')
		writeNode(b, n)
		b.WriteByte(')')
		return
	}
	writeNode(b, n)
}

// writeLiteral writes a value canonically.
func writeLiteral(b *strings.Builder, v literal) {
	switch v.kind {
	case litString:
		writeString(b, v.str)
	case litNumber:
		b.WriteString(formatNumber(v.num))
	case litBool:
		b.WriteString(strconv.FormatBool(v.b))
	}
}

// writeString writes s double-quoted with JSON's escapes: \" \\ and the
// control characters (short forms where JSON has them); everything else
// as it is.
func writeString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := range len(s) {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// quote returns s as writeString writes it.
func quote(s string) string {
	var b strings.Builder
	writeString(&b, s)
	return b.String()
}

// formatNumber writes f as encoding/json does (and JavaScript): plain
// decimals from 1e-6 to 1e21, an exponent beyond.
func formatNumber(f float64) string {
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// 1e-07 → 1e-7, as encoding/json writes it.
		if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// formatValue writes a typed value (a string, a float64, a bool or a
// time.Time) as the query language would.
func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		return quote(v)
	case float64:
		return formatNumber(v)
	case bool:
		return strconv.FormatBool(v)
	case time.Time:
		return quote(v.Format(time.RFC3339Nano))
	}
	return "?"
}

// sortedSet returns the strings sorted, each once.
func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// compareValues orders two typed values of one type: strings byte-wise,
// numbers, false before true, instants.
func compareValues(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case float64:
		return cmp.Compare(a, b.(float64))
	case bool:
		bb := b.(bool)
		switch {
		case a == bb:
			return 0
		case !a:
			return -1
		}
		return 1
	case time.Time:
		return a.Compare(b.(time.Time))
	}
	return 0
}
