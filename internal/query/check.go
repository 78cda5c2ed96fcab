package query

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Schema says the type of each declared search attribute, by name: the
// fields a query may name besides the built-ins.
type Schema map[string]weft.SearchType

// The built-in fields: every instance has them, and a declared attribute
// may not take their names.
const (
	FieldID        = "id"         // string: the instance's id
	FieldWorkflow  = "workflow"   // string: its workflow's name
	FieldVersion   = "version"    // number: its workflow's version
	FieldStatus    = "status"     // string: one of weft.Statuses()
	FieldCreatedAt = "created_at" // time: when it was created
	FieldUpdatedAt = "updated_at" // time: when it last changed
)

// builtinType returns the type of a built-in field.
func builtinType(name string) (weft.SearchType, bool) {
	switch name {
	case FieldID, FieldWorkflow, FieldStatus:
		return weft.SearchString, true
	case FieldVersion:
		return weft.SearchNumber, true
	case FieldCreatedAt, FieldUpdatedAt:
		return weft.SearchTime, true
	}
	return "", false
}

// Builtins returns the built-in fields and their types, in a new map each
// call: what a query may name on any instance.
func Builtins() Schema {
	return Schema{
		FieldID: weft.SearchString, FieldWorkflow: weft.SearchString, FieldVersion: weft.SearchNumber,
		FieldStatus: weft.SearchString, FieldCreatedAt: weft.SearchTime, FieldUpdatedAt: weft.SearchTime,
	}
}

// Validate reports the first attribute, in name order, that a query could
// not name: a name that is not a field name ([a-z][a-z0-9_]*, at most
// MaxNameBytes bytes), a keyword, a built-in field's name, or a type that
// is not one of weft.SearchTypes(). Errors are *SchemaError.
func (s Schema) Validate() error {
	for _, name := range sortedKeys(s) {
		if msg := nameError(name); msg != "" {
			return &SchemaError{Attribute: name, Msg: msg}
		}
		if _, ok := builtinType(name); ok {
			return &SchemaError{Attribute: name, Msg: "shadows the built-in field of that name"}
		}
		if t := s[name]; !t.Valid() {
			return &SchemaError{Attribute: name, Msg: fmt.Sprintf("unknown type %q: want one of %s", t, joinTypes())}
		}
	}
	return nil
}

// sortedKeys returns the names of s, sorted.
func sortedKeys(s Schema) []string {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// joinTypes lists the search attribute types.
func joinTypes() string {
	var names []string
	for _, t := range weft.SearchTypes() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// Check types q against the built-in fields and the schema s, and returns
// an *Error pointing at the first offending token: an unknown field (with
// a "did you mean" when a field is one edit away), an operator the field's
// type does not allow, a value of the wrong type, a status that is not
// one. A schema that is not valid (Schema.Validate) is a *SchemaError.
//
// Check also reads each value as its field's type (a time's string as an
// instant in UTC), so that Eval and Plan parse nothing. Checking again,
// against another schema, types the query anew; a query whose Check
// failed is unchecked.
//
// # Type rules
//
//	string     = != < <= > >= IN, NOT IN, STARTS_WITH (byte-wise order)
//	number     = != < <= > >= IN, NOT IN
//	time       = != < <= > >= IN, NOT IN (a string: RFC 3339, or a date at midnight UTC)
//	bool       = !=
//	keywords   = (holds) != (does not hold) IN (holds one of) NOT IN (holds none of)
//	status     = != IN, NOT IN, with values from weft.Statuses()
func (q *Query) Check(s Schema) error {
	q.checked = false
	if err := s.Validate(); err != nil {
		return err
	}
	var err *Error
	walk(q.root, func(c *comparison) {
		if err == nil {
			err = checkComparison(c, s)
		}
	})
	if err != nil {
		return err
	}
	q.checked = true
	return nil
}

// checkComparison types c's field, operator and values.
func checkComparison(c *comparison, s Schema) *Error {
	typ, builtin := builtinType(c.field)
	if !builtin {
		var ok bool
		if typ, ok = s[c.field]; !ok {
			return &Error{Pos: c.pos, Token: c.field, Msg: "unknown field" + suggest(c.field, s)}
		}
	}
	c.typ, c.status = typ, c.field == FieldStatus
	if msg := opError(c); msg != "" {
		return &Error{Pos: c.opPos, Token: c.opText, Msg: msg}
	}
	for i := range c.vals {
		v := &c.vals[i]
		if msg := valueError(c, v); msg != "" {
			return &Error{Pos: v.pos, Token: v.text, Msg: msg}
		}
	}
	return nil
}

// opError says why c's type does not allow its operator, or "".
func opError(c *comparison) string {
	var allowed string
	switch {
	case c.status:
		if c.op.ordering() || c.op == opStartsWith {
			return fmt.Sprintf("%s is not allowed on status: use =, !=, IN or NOT IN", c.op)
		}
		return ""
	case c.typ == weft.SearchString:
		return ""
	case c.typ == weft.SearchNumber || c.typ == weft.SearchTime:
		if c.op != opStartsWith {
			return ""
		}
		allowed = "only strings have prefixes"
	case c.typ == weft.SearchBool:
		if c.op == opEq || c.op == opNe {
			return ""
		}
		allowed = "use = or !="
	case c.typ == weft.SearchKeywords:
		if !c.op.ordering() && c.op != opStartsWith {
			return ""
		}
		allowed = "use = (holds), != (does not hold), IN (holds one of) or NOT IN (holds none of)"
	}
	return fmt.Sprintf("%s is not allowed on %s, %s: %s", c.op, c.field, typeName(c.typ), allowed)
}

// valueError says why v is not a value of c's field, or "", and reads a
// time.
func valueError(c *comparison, v *literal) string {
	want := litString
	switch c.typ {
	case weft.SearchNumber:
		want = litNumber
	case weft.SearchBool:
		want = litBool
	}
	if v.kind != want {
		return fmt.Sprintf("%s is %s: %s is %s", c.field, typeName(c.typ), v.text, kindName(v.kind))
	}
	switch {
	case c.status:
		if !weft.Status(v.str).Valid() {
			return "unknown status" + suggestStatus(v.str)
		}
	case c.typ == weft.SearchTime:
		t, ok := parseTime(v.str)
		if !ok {
			return fmt.Sprintf("%s is a time: %s is neither an RFC 3339 time (2026-11-01T09:00:00Z) nor a date (2026-11-01)", c.field, v.text)
		}
		v.t = t
	}
	return ""
}

// parseTime reads an instant: RFC 3339, with an offset or Z, or a date,
// midnight UTC. It returns it in UTC.
func parseTime(s string) (time.Time, bool) {
	if len(s) == len(time.DateOnly) {
		t, err := time.Parse(time.DateOnly, s)
		return t, err == nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// typeName names a type with its article, for messages.
func typeName(t weft.SearchType) string {
	switch t {
	case weft.SearchString:
		return "a string"
	case weft.SearchNumber:
		return "a number"
	case weft.SearchBool:
		return "a bool"
	case weft.SearchTime:
		return "a time"
	case weft.SearchKeywords:
		return "a keyword list"
	}
	return string(t)
}

// kindName names a literal's kind with its article, for messages.
func kindName(k litKind) string {
	switch k {
	case litNumber:
		return "a number"
	case litBool:
		return "a bool"
	}
	return "a string"
}

// suggest is `; did you mean "x"?` when fields are one edit (an insertion,
// a deletion, a substitution or a swap of two neighbours) from name, the
// built-ins and the schema's, or a hint that names them all when none is.
func suggest(name string, s Schema) string {
	names := sortedKeys(s)
	for n := range Builtins() {
		names = append(names, n)
	}
	names = sortedSet(names)
	var near []string
	for _, n := range names {
		if oneEdit(name, n) {
			near = append(near, fmt.Sprintf("%q", n))
		}
	}
	switch len(near) {
	case 0:
		return ": not a built-in field (id, workflow, version, status, created_at, updated_at) nor a search attribute of the workflows"
	case 1:
		return "; did you mean " + near[0] + "?"
	}
	return "; did you mean " + strings.Join(near[:len(near)-1], ", ") + " or " + near[len(near)-1] + "?"
}

// oneEdit reports whether a and b differ by exactly one edit: a byte
// inserted, deleted or replaced, or two neighbouring bytes swapped.
func oneEdit(a, b string) bool {
	if a == b {
		return false
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) < len(b) { // one insertion
		return a[i:] == b[i+1:]
	}
	if a[i+1:] == b[i+1:] { // one replacement
		return true
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}

// suggestStatus is `; did you mean "failed"?` when one status is near
// what was written (the same but for case, one edit away, or starting
// with it), or the list of statuses.
func suggestStatus(s string) string {
	var names []string
	low := strings.ToLower(s)
	for _, st := range weft.Statuses() {
		if low == string(st) || oneEdit(low, string(st)) || len(low) >= 3 && strings.HasPrefix(string(st), low) {
			return fmt.Sprintf("; did you mean %q?", st)
		}
		names = append(names, string(st))
	}
	return ": want one of " + strings.Join(names, ", ")
}
