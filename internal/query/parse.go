package query

import (
	"fmt"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// The bounds of a query, enforced by Parse and stated in the package doc.
const (
	// MaxBytes bounds a query's text, and its canonical form (String).
	MaxBytes = 4096
	// MaxComparisons bounds the comparisons of a query.
	MaxComparisons = 64
	// MaxDepth bounds the nesting of a query: the parentheses and NOTs
	// around a comparison.
	MaxDepth = 16
	// MaxStringBytes bounds a string value, once its escapes are decoded:
	// the bound of a search attribute's string or keyword, which no
	// longer value could equal.
	MaxStringBytes = weft.MaxSearchStringLen
	// MaxInValues bounds the values of one IN list.
	MaxInValues = 100
	// MaxNameBytes bounds a field name: the bound of a search
	// attribute's name.
	MaxNameBytes = weft.MaxSearchNameLen
)

// Query is a parsed query: its syntax tree, and once checked (Check) the
// type of each field it names. A checked Query is not changed by Eval,
// Plan, String or Fields, so those are safe for concurrent use; Check is
// not safe to call concurrently with anything else.
type Query struct {
	root    node
	text    string // the canonical form
	checked bool
}

// node is a node of the syntax tree: *and, *or, *not or *comparison.
type node interface{ isNode() }

// and holds when all its kids do (two or more; none is an *and).
type and struct{ kids []node }

// or holds when one of its kids does (two or more; none is an *or).
type or struct{ kids []node }

// not holds when its kid does not.
type not struct{ kid node }

func (*and) isNode()        {}
func (*or) isNode()         {}
func (*not) isNode()        {}
func (*comparison) isNode() {}

// op is a comparison's operator.
type op uint8

// The operators.
const (
	opEq op = iota + 1
	opNe
	opLt
	opLe
	opGt
	opGe
	opIn
	opNotIn
	opStartsWith
)

// String returns the operator as the canonical form writes it.
func (o op) String() string {
	switch o {
	case opEq:
		return "="
	case opNe:
		return "!="
	case opLt:
		return "<"
	case opLe:
		return "<="
	case opGt:
		return ">"
	case opGe:
		return ">="
	case opIn:
		return "IN"
	case opNotIn:
		return "NOT IN"
	case opStartsWith:
		return "STARTS_WITH"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// negative reports whether the operator holds for an instance that lacks
// the field: != and NOT IN, the negations of = and IN (package doc,
// "Missing fields").
func (o op) negative() bool { return o == opNe || o == opNotIn }

// ordering reports whether the operator compares by order.
func (o op) ordering() bool { return o == opLt || o == opLe || o == opGt || o == opGe }

// comparison is `field op values`: one value, or an IN list's.
type comparison struct {
	field  string
	pos    int // the field's
	op     op
	opPos  int    // the operator's first token's
	opText string // the operator as written
	vals   []literal
	typ    weft.SearchType // set by Check
	status bool            // set by Check: the field is the built-in status
}

// litKind is the kind of a literal value.
type litKind uint8

// The kinds of literal value.
const (
	litString litKind = iota + 1
	litNumber
	litBool
)

// literal is a value as written, and its meaning.
type literal struct {
	kind litKind
	pos  int
	text string    // as written
	str  string    // litString: the decoded value
	num  float64   // litNumber
	b    bool      // litBool
	t    time.Time // set by Check for a time field: str read as an instant, in UTC
}

// Parse reads a query's text into its syntax tree, enforcing the bounds
// (MaxBytes and the others). Errors are *Error, at the first offending
// token. A query that parses prints (String) in at most MaxBytes bytes,
// so that Parse(q.String()) always succeeds.
func Parse(text string) (*Query, error) {
	if len(text) > MaxBytes {
		return nil, &Error{Pos: MaxBytes, Msg: fmt.Sprintf("the query is %d bytes, more than %d", len(text), MaxBytes)}
	}
	p := &parser{lx: lexer{src: text}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == kEOF {
		return nil, &Error{Pos: 0, Msg: "the query is empty"}
	}
	root, err := p.or()
	if err != nil {
		return nil, err
	}
	switch p.tok.kind {
	case kEOF:
	case kRParen:
		return nil, errAt(p.tok, "no ( to close")
	default:
		return nil, errAt(p.tok, "expected AND, OR or the end of the query, found %s", describe(p.tok))
	}
	q := &Query{root: root}
	var b strings.Builder
	writeNode(&b, root)
	q.text = b.String()
	if len(q.text) > MaxBytes {
		return nil, &Error{Pos: 0, Msg: fmt.Sprintf(
			"the query is %d bytes once written canonically (spaced, keywords upper-case, values re-quoted), more than %d", len(q.text), MaxBytes)}
	}
	return q, nil
}

// parser is a recursive descent parser over a lexer, with one token of
// lookahead:
//
//	or         = and { OR and }
//	and        = unary { AND unary }
//	unary      = NOT unary | "(" or ")" | comparison
//	comparison = name ( op value | [NOT] IN "(" value { "," value } ")" | STARTS_WITH string )
//	value      = string | number | TRUE | FALSE
type parser struct {
	lx    lexer
	tok   token
	depth int // parentheses and NOTs open around the current token
	cmps  int // comparisons read
}

// advance reads the next token.
func (p *parser) advance() *Error {
	tok, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = tok
	return nil
}

// describe names a token in an error message.
func describe(tok token) string {
	if tok.kind == kEOF {
		return "the end of the query"
	}
	return tok.text
}

// or reads `and { OR and }`.
func (p *parser) or() (node, *Error) {
	first, err := p.and()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != kOr {
		return first, nil
	}
	kids := appendFlat[*or](nil, first)
	for p.tok.kind == kOr {
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.and()
		if err != nil {
			return nil, err
		}
		kids = appendFlat[*or](kids, n)
	}
	return &or{kids: kids}, nil
}

// and reads `unary { AND unary }`.
func (p *parser) and() (node, *Error) {
	first, err := p.unary()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != kAnd {
		return first, nil
	}
	kids := appendFlat[*and](nil, first)
	for p.tok.kind == kAnd {
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.unary()
		if err != nil {
			return nil, err
		}
		kids = appendFlat[*and](kids, n)
	}
	return &and{kids: kids}, nil
}

// appendFlat appends n to kids, or n's kids when n is of the same kind
// (a parenthesised AND in an AND): the tree has no AND directly under an
// AND, nor an OR under an OR, so that it prints as it parses.
func appendFlat[T *and | *or](kids []node, n node) []node {
	switch n := n.(type) {
	case *and:
		if _, ok := any(T(nil)).(*and); ok {
			return append(kids, n.kids...)
		}
	case *or:
		if _, ok := any(T(nil)).(*or); ok {
			return append(kids, n.kids...)
		}
	}
	return append(kids, n)
}

// nest counts one more level of nesting at tok.
func (p *parser) nest(tok token) *Error {
	p.depth++
	if p.depth > MaxDepth {
		return errAt(tok, "nested more than %d deep (parentheses and NOTs)", MaxDepth)
	}
	return nil
}

// unary reads `NOT unary | "(" or ")" | comparison`.
func (p *parser) unary() (node, *Error) {
	switch open := p.tok; open.kind {
	case kNot:
		if err := p.nest(open); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		kid, err := p.unary()
		if err != nil {
			return nil, err
		}
		p.depth--
		return &not{kid: kid}, nil
	case kLParen:
		if err := p.nest(open); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != kRParen {
			return nil, errAt(p.tok, "expected ) to close the ( at %d, found %s", open.pos, describe(p.tok))
		}
		p.depth--
		return n, p.advance()
	case kName:
		return p.comparison()
	}
	return nil, errAt(p.tok, "expected a comparison, found %s", describe(p.tok))
}

// comparison reads `name ( op value | [NOT] IN list | STARTS_WITH string )`.
func (p *parser) comparison() (node, *Error) {
	name := p.tok
	p.cmps++
	if p.cmps > MaxComparisons {
		return nil, errAt(name, "more than %d comparisons", MaxComparisons)
	}
	c := &comparison{field: name.text, pos: name.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	opTok := p.tok
	c.opPos, c.opText = opTok.pos, opTok.text
	switch opTok.kind {
	case kOp:
		c.op = opTok.op
		if err := p.advance(); err != nil {
			return nil, err
		}
		v, err := p.value(opTok)
		if err != nil {
			return nil, err
		}
		c.vals = []literal{v}
		return c, nil
	case kIn:
		c.op = opIn
	case kNot:
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != kIn {
			return nil, errAt(p.tok, "expected IN after NOT, found %s (NOT before a comparison negates it: NOT %s …)", describe(p.tok), name.text)
		}
		c.op = opNotIn
		c.opText = p.lx.src[opTok.pos : p.tok.pos+len(p.tok.text)]
	case kStartsWith:
		c.op = opStartsWith
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != kString {
			return nil, errAt(p.tok, "STARTS_WITH takes a string, found %s", describe(p.tok))
		}
		c.vals = []literal{lit(p.tok)}
		return c, p.advance()
	default:
		return nil, errAt(opTok, "expected an operator after %s (=, !=, <, <=, >, >=, IN, NOT IN or STARTS_WITH), found %s", name.text, describe(opTok))
	}
	// An IN list.
	in := p.tok
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != kLParen {
		return nil, errAt(p.tok, "expected ( after %s, found %s", in.text, describe(p.tok))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == kRParen {
		return nil, errAt(p.tok, "an empty IN list: want 1 to %d values", MaxInValues)
	}
	for {
		if len(c.vals) == MaxInValues {
			return nil, errAt(p.tok, "an IN list of more than %d values", MaxInValues)
		}
		v, err := p.value(in)
		if err != nil {
			return nil, err
		}
		c.vals = append(c.vals, v)
		switch p.tok.kind {
		case kComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
		case kRParen:
			return c, p.advance()
		default:
			return nil, errAt(p.tok, "expected , or ) in the IN list, found %s", describe(p.tok))
		}
	}
}

// value reads a value, after the token given (an operator, IN).
func (p *parser) value(after token) (literal, *Error) {
	switch p.tok.kind {
	case kString, kNumber, kTrue, kFalse:
		v := lit(p.tok)
		return v, p.advance()
	case kName:
		return literal{}, errAt(p.tok, "expected a value, found the name %s: strings are double-quoted (%q)", p.tok.text, p.tok.text)
	}
	return literal{}, errAt(p.tok, "expected a value after %s (a string, a number, true or false), found %s", after.text, describe(p.tok))
}

// lit is the literal of a value's token.
func lit(tok token) literal {
	v := literal{pos: tok.pos, text: tok.text}
	switch tok.kind {
	case kString:
		v.kind, v.str = litString, tok.str
	case kNumber:
		v.kind, v.num = litNumber, tok.num
	case kTrue:
		v.kind, v.b = litBool, true
	case kFalse:
		v.kind = litBool
	}
	return v
}

// Fields lists the fields a query names, sorted, each once.
func (q *Query) Fields() []string {
	var names []string
	walk(q.root, func(c *comparison) { names = append(names, c.field) })
	return sortedSet(names)
}

// walk calls f for each comparison under n, in the order of the text.
func walk(n node, f func(*comparison)) {
	switch n := n.(type) {
	case *and:
		for _, k := range n.kids {
			walk(k, f)
		}
	case *or:
		for _, k := range n.kids {
			walk(k, f)
		}
	case *not:
		walk(n.kid, f)
	case *comparison:
		f(n)
	}
}
