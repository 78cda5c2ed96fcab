package query

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind is the kind of a token.
type kind uint8

// The kinds of token.
const (
	kEOF kind = iota
	kName
	kString
	kNumber
	kTrue
	kFalse
	kAnd
	kOr
	kNot
	kIn
	kStartsWith
	kOp
	kLParen
	kRParen
	kComma
)

// token is one token of a query: its kind, where it starts, its text as
// written, and its meaning (a string's decoded value, a number's value,
// an operator).
type token struct {
	kind kind
	pos  int
	text string
	str  string  // kString: the decoded value
	num  float64 // kNumber
	op   op      // kOp
}

// keyword returns the kind of word when it is a keyword of the language
// (AND, OR, NOT, IN, STARTS_WITH, TRUE, FALSE), matched without regard to
// case. No keyword can name a field.
func keyword(word string) (kind, bool) {
	switch {
	case strings.EqualFold(word, "and"):
		return kAnd, true
	case strings.EqualFold(word, "or"):
		return kOr, true
	case strings.EqualFold(word, "not"):
		return kNot, true
	case strings.EqualFold(word, "in"):
		return kIn, true
	case strings.EqualFold(word, "starts_with"):
		return kStartsWith, true
	case strings.EqualFold(word, "true"):
		return kTrue, true
	case strings.EqualFold(word, "false"):
		return kFalse, true
	}
	return 0, false
}

// Keywords returns the keywords of the language, lower-case: matched
// without regard to case, none can name a field or a search attribute.
func Keywords() []string {
	return []string{"and", "or", "not", "in", "starts_with", "true", "false"}
}

// lexer reads a query's tokens one at a time, so that the first error
// reported is the first in the text whether it is a token's or the
// grammar's.
type lexer struct {
	src string
	at  int
}

// next returns the next token, or the *Error of the first malformed one.
func (l *lexer) next() (token, *Error) {
	for l.at < len(l.src) && isSpace(l.src[l.at]) {
		l.at++
	}
	start := l.at
	if start == len(l.src) {
		return token{kind: kEOF, pos: start}, nil
	}
	c := l.src[start]
	switch {
	case c == '(':
		l.at++
		return token{kind: kLParen, pos: start, text: "("}, nil
	case c == ')':
		l.at++
		return token{kind: kRParen, pos: start, text: ")"}, nil
	case c == ',':
		l.at++
		return token{kind: kComma, pos: start, text: ","}, nil
	case c == '"':
		return l.string()
	case c == '-' || isDigit(c):
		return l.number()
	case c == '=' || c == '!' || c == '<' || c == '>':
		return l.operator()
	case isLetter(c) || c == '_':
		return l.word()
	}
	r, size := utf8.DecodeRuneInString(l.src[start:])
	if r == utf8.RuneError && size <= 1 {
		return token{}, &Error{Pos: start, Token: l.src[start : start+1], Msg: "the query is not valid UTF-8"}
	}
	tok := token{pos: start, text: l.src[start : start+size]}
	switch c {
	case '\'':
		return token{}, errAt(tok, "strings are double-quoted")
	case '`':
		return token{}, errAt(tok, "field names are not quoted, and strings are double-quoted")
	}
	return token{}, errAt(tok, "unexpected character %q", r)
}

// isSpace reports whether c is whitespace between tokens.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isLetter reports whether c is an ASCII letter.
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isLower reports whether c is an ASCII lower-case letter.
func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// word reads a keyword or a field name.
func (l *lexer) word() (token, *Error) {
	start := l.at
	for l.at < len(l.src) && (isLetter(l.src[l.at]) || isDigit(l.src[l.at]) || l.src[l.at] == '_') {
		l.at++
	}
	tok := token{kind: kName, pos: start, text: l.src[start:l.at]}
	if k, ok := keyword(tok.text); ok {
		tok.kind = k
		return tok, nil
	}
	if err := nameError(tok.text); err != "" {
		return token{}, errAt(tok, "%s", err)
	}
	return tok, nil
}

// nameError says why name is not a field name, or "" when it is one:
// [a-z][a-z0-9_]*, at most MaxNameBytes bytes, and not a keyword.
func nameError(name string) string {
	if name == "" {
		return "a field name is empty"
	}
	if len(name) > MaxNameBytes {
		return fmt.Sprintf("a field name is %d bytes, more than %d", len(name), MaxNameBytes)
	}
	lower := true
	for i := range len(name) {
		c := name[i]
		switch {
		case isLower(c):
		case 'A' <= c && c <= 'Z':
			lower = false
		case isDigit(c) || c == '_':
			if i == 0 {
				return "a field name starts with a lower-case letter"
			}
		default:
			return fmt.Sprintf("a field name has only lower-case letters, digits and _, not %q", c)
		}
	}
	if !lower {
		if low := strings.ToLower(name); nameError(low) == "" {
			return fmt.Sprintf("field names are lower case; did you mean %q?", low)
		}
		return "field names are lower case"
	}
	if _, ok := keyword(name); ok {
		return "a keyword is not a field name"
	}
	return ""
}

// operator reads a comparison operator: = != < <= > >=.
func (l *lexer) operator() (token, *Error) {
	start := l.at
	for l.at < len(l.src) && strings.IndexByte("=!<>", l.src[l.at]) >= 0 {
		l.at++
	}
	tok := token{kind: kOp, pos: start, text: l.src[start:l.at]}
	switch tok.text {
	case "=":
		tok.op = opEq
	case "!=":
		tok.op = opNe
	case "<":
		tok.op = opLt
	case "<=":
		tok.op = opLe
	case ">":
		tok.op = opGt
	case ">=":
		tok.op = opGe
	case "==":
		return token{}, errAt(tok, "unknown operator: equality is =")
	case "<>":
		return token{}, errAt(tok, "unknown operator: inequality is !=")
	case "=<":
		return token{}, errAt(tok, "unknown operator; did you mean <=?")
	case "=>":
		return token{}, errAt(tok, "unknown operator; did you mean >=?")
	case "!":
		return token{}, errAt(tok, "unknown operator: negation is NOT, inequality is !=")
	default:
		return token{}, errAt(tok, "unknown operator: the operators are =, !=, <, <=, >, >=")
	}
	return tok, nil
}

// number reads a number in JSON's syntax: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
// It reads as far as a number could reach (letters too), so that "12abc"
// and "1.2.3" are one malformed number rather than a number followed by
// something else.
func (l *lexer) number() (token, *Error) {
	start := l.at
	for l.at < len(l.src) {
		c := l.src[l.at]
		if isDigit(c) || isLetter(c) || c == '.' || c == '_' || c == '-' && l.at == start ||
			(c == '+' || c == '-') && l.at > start && (l.src[l.at-1] == 'e' || l.src[l.at-1] == 'E') {
			l.at++
			continue
		}
		break
	}
	tok := token{kind: kNumber, pos: start, text: l.src[start:l.at]}
	if !isJSONNumber(tok.text) {
		return token{}, errAt(tok, "invalid number: want JSON's syntax, such as 12, -0.5 or 1e6 (no leading zeros, digits on both sides of a point)")
	}
	f, err := strconv.ParseFloat(tok.text, 64)
	if err != nil || math.IsInf(f, 0) {
		return token{}, errAt(tok, "number out of range")
	}
	tok.num = f
	return tok, nil
}

// isJSONNumber reports whether s is a number in JSON's syntax.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

// string reads a double-quoted string with JSON's escapes, valid UTF-8
// and no raw control characters, whose value is at most MaxStringBytes
// bytes.
func (l *lexer) string() (token, *Error) {
	start := l.at
	l.at++ // the opening quote
	var b strings.Builder
	plain := l.at // the start of the run not yet copied to b
	escaped := false
	for {
		if l.at == len(l.src) {
			return token{}, &Error{Pos: start, Token: l.src[start:], Msg: "unterminated string: a string ends with \""}
		}
		c := l.src[l.at]
		switch {
		case c == '"':
			tok := token{kind: kString, pos: start}
			if escaped {
				b.WriteString(l.src[plain:l.at])
				tok.str = b.String()
			} else {
				tok.str = l.src[plain:l.at]
			}
			l.at++
			tok.text = l.src[start:l.at]
			if len(tok.str) > MaxStringBytes {
				return token{}, errAt(tok, "a string is %d bytes, more than %d", len(tok.str), MaxStringBytes)
			}
			return tok, nil
		case c == '\\':
			escaped = true
			b.WriteString(l.src[plain:l.at])
			if err := l.escape(&b); err != nil {
				return token{}, err
			}
			plain = l.at
		case c < 0x20:
			return token{}, &Error{Pos: l.at, Token: l.src[l.at : l.at+1],
				Msg: fmt.Sprintf("a control character (U+%04X) in a string: write it escaped", c)}
		case c < utf8.RuneSelf:
			l.at++
		default:
			r, size := utf8.DecodeRuneInString(l.src[l.at:])
			if r == utf8.RuneError && size <= 1 {
				return token{}, &Error{Pos: l.at, Token: l.src[l.at : l.at+1], Msg: "a string is not valid UTF-8"}
			}
			l.at += size
		}
	}
}

// escape reads the escape at l.at (a backslash) into b.
func (l *lexer) escape(b *strings.Builder) *Error {
	start := l.at
	bad := func(n int) *Error {
		end := min(start+n, len(l.src))
		return &Error{Pos: start, Token: l.src[start:end],
			Msg: `invalid escape: the escapes are \" \\ \/ \b \f \n \r \t and \uXXXX`}
	}
	if start+1 == len(l.src) {
		return bad(1)
	}
	switch l.src[start+1] {
	case '"', '\\', '/':
		b.WriteByte(l.src[start+1])
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		r, ok := hex4(l.src, start+2)
		if !ok {
			return bad(6)
		}
		l.at = start + 6
		if utf16IsSurrogate(r) {
			// A surrogate pair is two escapes; a lone surrogate is
			// invalid, as encoding/json would read it: U+FFFD.
			if r < 0xdc00 && l.at+1 < len(l.src) && l.src[l.at] == '\\' && l.src[l.at+1] == 'u' {
				if lo, ok := hex4(l.src, l.at+2); ok && 0xdc00 <= lo && lo <= 0xdfff {
					b.WriteRune(0x10000 + (r-0xd800)<<10 + (lo - 0xdc00))
					l.at += 6
					return nil
				}
			}
			return &Error{Pos: start, Token: l.src[start:l.at],
				Msg: `a lone UTF-16 surrogate: a character above U+FFFF is written as a pair, such as \ud83d\ude00`}
		}
		b.WriteRune(r)
		return nil
	default:
		r, size := utf8.DecodeRuneInString(l.src[start+1:])
		if r == utf8.RuneError {
			size = 1
		}
		return bad(1 + size)
	}
	l.at = start + 2
	return nil
}

// hex4 reads the four hexadecimal digits at s[i:].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case isDigit(c):
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// utf16IsSurrogate reports whether r is half of a UTF-16 surrogate pair.
func utf16IsSurrogate(r rune) bool { return 0xd800 <= r && r <= 0xdfff }
