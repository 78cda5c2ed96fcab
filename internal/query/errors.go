package query

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinels matched by errors.Is.
var (
	// ErrQuery is matched by every *Error: the query's text is wrong, and
	// the API answers 400 with the error's message.
	ErrQuery = errors.New("invalid query")
	// ErrSchema is matched by every *SchemaError: the search attributes a
	// query is checked against are wrong, which is the host's bug (or a
	// definition the definition package should have refused), not the
	// query writer's.
	ErrSchema = errors.New("invalid search schema")
)

// Error is what is wrong with a query, and where: the byte offset in the
// query's text (counted from 0) and the token found there, so that a
// console or a CLI can point at it. Parse and Check return it; it matches
// ErrQuery.
type Error struct {
	// Pos is the byte offset of the offending token in the query's text.
	Pos int
	// Token is the offending token as written, or "" when the problem is
	// at the end of the query or concerns the whole text.
	Token string
	// Msg says what is wrong, and what would be right when that is known.
	Msg string
}

// maxShownToken bounds how much of a token an error message repeats, so
// that a 256-byte string does not drown the message.
const maxShownToken = 40

// Error implements error: `query: at 17 ("custmer"): unknown field; did
// you mean "customer"?`. A string literal is shown as written (it has its
// own quotes); another token is quoted; a long token is cut.
func (e *Error) Error() string {
	if e.Token == "" {
		return fmt.Sprintf("query: at %d: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("query: at %d (%s): %s", e.Pos, showToken(e.Token), e.Msg)
}

// Is makes an *Error match ErrQuery.
func (e *Error) Is(target error) bool { return target == ErrQuery }

// Located returns Pos, Token and Msg: how a package that may not import
// this one (host/api, which reaches the core through the node alone)
// finds an *Error in an error's chain, with errors.As to an interface of
// its own, to point at the offending token.
func (e *Error) Located() (pos int, token, msg string) { return e.Pos, e.Token, e.Msg }

// showToken is how an error message shows a token: a string literal as
// written, since it has its quotes (cut after maxShownToken bytes, and
// then followed by …), anything else quoted.
func showToken(tok string) string {
	cut := false
	if len(tok) > maxShownToken {
		n := maxShownToken
		for n > 0 && !utf8.RuneStart(tok[n]) {
			n--
		}
		tok, cut = tok[:n], true
	}
	literal := len(tok) >= 2 && tok[0] == '"' && (cut || tok[len(tok)-1] == '"') &&
		utf8.ValidString(tok) && !strings.ContainsFunc(tok, func(r rune) bool { return r < 0x20 })
	s := tok
	if !literal {
		s = strconv.Quote(tok)
	}
	if cut {
		s += "…"
	}
	return s
}

// errAt is an *Error at tok.
func errAt(tok token, format string, args ...any) *Error {
	return &Error{Pos: tok.pos, Token: tok.text, Msg: fmt.Sprintf(format, args...)}
}

// SchemaError is a search attribute that a query cannot be checked
// against: its name is not a field name, is a keyword, or shadows a
// built-in field, or its type is unknown. It matches ErrSchema.
type SchemaError struct {
	// Attribute is the attribute's name as declared.
	Attribute string
	// Msg says what is wrong with it.
	Msg string
}

// Error implements error.
func (e *SchemaError) Error() string {
	return fmt.Sprintf("query: search attribute %q: %s", e.Attribute, e.Msg)
}

// Is makes a *SchemaError match ErrSchema.
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }
