package query_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// TestScripts runs each testdata/*.txt script: queries parsed, checked
// against a schema and evaluated on records, each printing what it gave.
// testdata/README.md describes the format; `go test ./internal/query
// -rewrite` writes what the package does now as the expected outputs.
func TestScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			s := &script{schema: query.Schema{}}
			datadriven.RunTest(t, path, s.run)
		})
	}
}

// script is the schema and the records of one file:
//
//	schema [NAME=TYPE …]          the schema of later directives
//	parse                         a query: its canonical form, fields and plan
//	check                         a query: ok or the error
//	record NAME                   a record, as JSON
//	eval                          a query: the records it matches
type script struct {
	schema  query.Schema
	records []namedRecord
}

// namedRecord is a record of a script.
type namedRecord struct {
	name string
	r    mapRecord
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "schema":
		s.schema = query.Schema{}
		for _, arg := range d.CmdArgs {
			arg.ExpectNumVals(t, 1)
			s.schema[arg.Key] = weft.SearchType(arg.Vals[0])
		}
		if err := s.schema.Validate(); err != nil {
			if !errors.Is(err, query.ErrSchema) {
				t.Errorf("%s: %v does not match ErrSchema", d.Pos, err)
			}
			return "error: " + err.Error() + "\n"
		}
		return "ok\n"
	case "parse":
		q, err := parse(t, d)
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var out strings.Builder
		fmt.Fprintf(&out, "%s\nfields: %s\n", q, strings.Join(q.Fields(), " "))
		if err := q.Check(s.schema); err != nil {
			fmt.Fprintf(&out, "plan: unchecked: %v\n", err)
			return out.String()
		}
		ranges := q.Plan()
		if ranges == nil {
			out.WriteString("plan: none\n")
		}
		for _, r := range ranges {
			fmt.Fprintf(&out, "plan: %s\n", r)
		}
		return out.String()
	case "check":
		q, err := parse(t, d)
		if err == nil {
			err = q.Check(s.schema)
		}
		if err != nil {
			if !errors.Is(err, query.ErrQuery) && !errors.Is(err, query.ErrSchema) {
				t.Errorf("%s: %v matches neither ErrQuery nor ErrSchema", d.Pos, err)
			}
			return "error: " + err.Error() + "\n"
		}
		return "ok\n"
	case "record":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "record NAME")
		}
		r, err := decodeRecord(d.Input, s.schema)
		if err != nil {
			d.Fatalf(t, "record: %v", err)
		}
		s.records = append(s.records, namedRecord{name: d.CmdArgs[0].Key, r: r})
		return "ok\n"
	case "eval":
		q, err := parse(t, d)
		if err == nil {
			err = q.Check(s.schema)
		}
		if err != nil {
			return "error: " + err.Error() + "\n"
		}
		var matched []string
		for _, nr := range s.records {
			if q.Eval(nr.r) {
				matched = append(matched, nr.name)
			}
			if msg := invariants(q, s.schema, nr.r); msg != "" {
				t.Errorf("%s: record %s: %s", d.Pos, nr.name, msg)
			}
		}
		if matched == nil {
			return "match: none\n"
		}
		return "match: " + strings.Join(matched, " ") + "\n"
	}
	d.Fatalf(t, "unknown directive %q", d.Cmd)
	return ""
}

// repeat is the scripts' macro for long inputs: {N*TEXT} is TEXT N times.
var repeat = regexp.MustCompile(`\{(\d+)\*([^}]*)\}`)

// parse parses the directive's input, its macros expanded, and checks
// what every parsed query must do: print into a query that parses again
// and prints the same.
func parse(t *testing.T, d *datadriven.TestData) (*query.Query, error) {
	t.Helper()
	text := repeat.ReplaceAllStringFunc(d.Input, func(m string) string {
		sub := repeat.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[1])
		return strings.Repeat(sub[2], n)
	})
	q, err := query.Parse(text)
	if err != nil {
		if !errors.Is(err, query.ErrQuery) {
			t.Errorf("%s: %v does not match ErrQuery", d.Pos, err)
		}
		return nil, err
	}
	if msg := roundTrip(q); msg != "" {
		t.Errorf("%s: %s", d.Pos, msg)
	}
	return q, nil
}

// roundTrip says how q's canonical form fails to parse into the same
// query, or "".
func roundTrip(q *query.Query) string {
	again, err := query.Parse(q.String())
	switch {
	case err != nil:
		return fmt.Sprintf("the canonical form %q does not parse: %v", q.String(), err)
	case again.String() != q.String():
		return fmt.Sprintf("the canonical form %q parses into %q", q.String(), again.String())
	}
	return ""
}

// mapRecord is a record as a map of typed values.
type mapRecord map[string]any

// Field implements query.Record.
func (m mapRecord) Field(name string) (any, bool) {
	v, ok := m[name]
	return v, ok
}

// decodeRecord reads a record from JSON, giving each field of a known
// type its Go type: a time from an RFC 3339 string, keywords from a list
// of strings. A value that does not fit its field's type is kept as JSON
// decodes it, which Eval counts as missing.
func decodeRecord(text string, schema query.Schema) (mapRecord, error) {
	var raw map[string]any
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	types := query.Builtins()
	for k, v := range schema {
		types[k] = v
	}
	r := mapRecord{}
	for k, v := range raw {
		r[k] = v
		switch types[k] {
		case weft.SearchTime:
			if s, ok := v.(string); ok {
				tm, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					return nil, fmt.Errorf("decode record: %s: %w", k, err)
				}
				r[k] = tm
			}
		case weft.SearchKeywords:
			if list, ok := v.([]any); ok {
				strs := make([]string, 0, len(list))
				for _, e := range list {
					s, ok := e.(string)
					if !ok {
						return nil, fmt.Errorf("decode record: %s: %v is not a string", k, e)
					}
					strs = append(strs, s)
				}
				r[k] = strs
			}
		}
	}
	return r, nil
}

// invariants says how a checked query breaks a promise on the record r,
// or "": NOT q matches exactly what q does not, and every Range of the
// plan holds the value of a record that q matches (a plan never loses an
// instance).
func invariants(q *query.Query, s query.Schema, r query.Record) string {
	match := q.Eval(r)
	if neg, err := query.Parse("NOT (" + q.String() + ")"); err == nil {
		if err := neg.Check(s); err != nil {
			return fmt.Sprintf("NOT (%s) does not check: %v", q, err)
		}
		if neg.Eval(r) == match {
			return fmt.Sprintf("%s and its NOT both give %v", q, match)
		}
	}
	for _, rg := range q.Plan() {
		if rg.Empty && match {
			return fmt.Sprintf("the plan says %s is empty, but the record matches", rg.Field)
		}
		if v, ok := r.Field(rg.Field); match && !inRange(rg, v, ok) {
			return fmt.Sprintf("the record matches, but its %s (%v) is not in the plan's %s", rg.Field, v, rg)
		}
	}
	return ""
}

// inRange is the model of a Range: whether an instance with the value v
// (ok: it has the field) can be read from it.
func inRange(rg query.Range, v any, ok bool) bool {
	if !ok || rg.Empty {
		return false
	}
	if list, isList := v.([]string); isList && rg.Type == weft.SearchKeywords {
		for _, e := range list {
			for _, w := range rg.Values {
				if e == w {
					return true
				}
			}
		}
		return false
	}
	if st, isStatus := v.(weft.Status); isStatus {
		v = string(st)
	}
	if rg.Values != nil {
		for _, w := range rg.Values {
			if compare(v, w) == 0 {
				return true
			}
		}
		return false
	}
	if rg.Lo != nil {
		if c := compare(v, rg.Lo); c < 0 || c == 0 && !rg.LoInclusive {
			return false
		}
	}
	if rg.Hi != nil {
		if c := compare(v, rg.Hi); c > 0 || c == 0 && !rg.HiInclusive {
			return false
		}
	}
	return true
}

// compare orders two values of one Go type (or says 2 when their types
// differ).
func compare(a, b any) int {
	switch a := a.(type) {
	case string:
		if b, ok := b.(string); ok {
			return strings.Compare(a, b)
		}
	case float64:
		if b, ok := b.(float64); ok {
			switch {
			case a < b:
				return -1
			case a > b:
				return 1
			}
			return 0
		}
	case bool:
		if b, ok := b.(bool); ok {
			switch {
			case a == b:
				return 0
			case !a:
				return -1
			}
			return 1
		}
	case time.Time:
		if b, ok := b.(time.Time); ok {
			return a.Compare(b)
		}
	}
	return 2
}

// TestErrors checks the errors' types and their message format.
func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
		is   error
	}{
		{&query.Error{Pos: 17, Token: "custmer", Msg: `unknown field; did you mean "customer"?`},
			`query: at 17 ("custmer"): unknown field; did you mean "customer"?`, query.ErrQuery},
		{&query.Error{Pos: 9, Token: `"abc"`, Msg: "m"}, `query: at 9 ("abc"): m`, query.ErrQuery},
		{&query.Error{Pos: 4, Msg: "m"}, `query: at 4: m`, query.ErrQuery},
		{&query.Error{Pos: 0, Token: strings.Repeat("é", 30), Msg: "m"},
			`query: at 0 ("` + strings.Repeat("é", 20) + `"…): m`, query.ErrQuery},
		{&query.Error{Pos: 0, Token: "\"a\nb\"", Msg: "m"}, `query: at 0 ("\"a\nb\""): m`, query.ErrQuery},
		{&query.SchemaError{Attribute: "status", Msg: "m"}, `query: search attribute "status": m`, query.ErrSchema},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
		if !errors.Is(tt.err, tt.is) {
			t.Errorf("%v does not match %v", tt.err, tt.is)
		}
	}
}

// TestUnchecked checks that an unchecked query, or one whose Check
// failed, matches nothing and has no plan.
func TestUnchecked(t *testing.T) {
	t.Parallel()
	q, err := query.Parse(`id = "a"`)
	if err != nil {
		t.Fatal(err)
	}
	r := mapRecord{"id": "a"}
	if q.Eval(r) || q.Plan() != nil {
		t.Errorf("unchecked: Eval %v, Plan %v; want false, nil", q.Eval(r), q.Plan())
	}
	if err := q.Check(nil); err != nil {
		t.Fatal(err)
	}
	if !q.Eval(r) || len(q.Plan()) != 1 {
		t.Errorf("checked: Eval %v, Plan %v; want true and one range", q.Eval(r), q.Plan())
	}
	if err := q.Check(query.Schema{"In": weft.SearchString}); !errors.Is(err, query.ErrSchema) {
		t.Fatalf("Check with a bad schema: %v, want ErrSchema", err)
	}
	if q.Eval(r) || q.Plan() != nil {
		t.Errorf("after a failed Check: Eval %v, Plan %v; want false, nil", q.Eval(r), q.Plan())
	}
	var none *query.Query
	if none.Eval(r) || none.Plan() != nil {
		t.Error("a nil query matches or plans")
	}
}

// TestBuiltins checks that Builtins returns a new map each call, so that a
// caller may add its attributes to it.
func TestBuiltins(t *testing.T) {
	t.Parallel()
	b := query.Builtins()
	b["customer"] = weft.SearchString
	if _, ok := query.Builtins()["customer"]; ok {
		t.Error("Builtins shares its map")
	}
	if len(query.Builtins()) != 6 {
		t.Errorf("Builtins: %v, want the six built-in fields", query.Builtins())
	}
}

// TestRecordTypes checks which Go types Eval reads a record's values as:
// the documented ones (and a weft.Status for the status), every other one
// as a missing value, NaN too.
func TestRecordTypes(t *testing.T) {
	t.Parallel()
	schema := query.Schema{"amount": weft.SearchNumber, "tags": weft.SearchKeywords}
	tests := []struct {
		query string
		value any
		match bool
	}{
		{`status = "failed"`, weft.StatusFailed, true},
		{`status = "failed"`, "failed", true},
		{`status != "failed"`, []byte("failed"), true},
		{`amount = 1`, 1.0, true},
		{`amount = 1`, 1, false},
		{`amount != 1`, 1, true},
		{`amount >= 0`, math.NaN(), false},
		{`amount != 0`, math.NaN(), true},
		{`created_at = "2026-11-01"`, time.Date(2026, 11, 1, 1, 0, 0, 0, time.FixedZone("", 3600)), true},
		{`created_at = "2026-11-01"`, "2026-11-01", false},
		{`tags = "a"`, []string{"a"}, true},
		{`tags = "a"`, []any{"a"}, false},
		{`tags NOT IN ("a")`, "a", true},
	}
	for _, tt := range tests {
		q, err := query.Parse(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Check(schema); err != nil {
			t.Fatal(err)
		}
		field := q.Fields()[0]
		if got := q.Eval(mapRecord{field: tt.value}); got != tt.match {
			t.Errorf("%s on %s = %#v: %v, want %v", tt.query, field, tt.value, got, tt.match)
		}
	}
}

// TestKeywords checks that every keyword is one, in any case, and that
// none can name a search attribute.
func TestKeywords(t *testing.T) {
	t.Parallel()
	for _, k := range query.Keywords() {
		for _, spelt := range []string{k, strings.ToUpper(k)} {
			if _, err := query.Parse(spelt + ` = "a"`); err == nil {
				t.Errorf("%s parses as a field name", spelt)
			}
		}
		if err := (query.Schema{k: weft.SearchString}).Validate(); !errors.Is(err, query.ErrSchema) {
			t.Errorf("a search attribute named %s: %v, want ErrSchema", k, err)
		}
	}
}

// TestConcurrentUse runs Eval, Plan, String and Fields of one checked
// query from several goroutines, for the race detector: a checked query
// is read-only.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	q, err := query.Parse(`id STARTS_WITH "order-" AND version IN (1, 2) AND (status = "failed" OR NOT created_at < "2026-11-01")`)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Check(nil); err != nil {
		t.Fatal(err)
	}
	r := mapRecord{"id": "order-1", "version": 2.0, "status": "failed", "created_at": time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 200 {
				ok = ok && q.Eval(r) && len(q.Plan()) == 2 && q.String() != "" && len(q.Fields()) == 4
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("a concurrent Eval, Plan, String or Fields gave another answer")
		}
	}
}
