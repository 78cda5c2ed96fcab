package query_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// FuzzParse checks that Parse never panics, that its errors are *Error
// within the text, and that a query it reads prints (String) within
// MaxBytes into a query that parses and prints the same. The committed
// corpus is under testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`customer = "acme" AND status = "failed" AND created_at > "2026-11-01"`,
		`(amount >= 100 AND amount < 1e6) OR tags = "vip"`,
		`region IN ("eu", "us") AND NOT paid = true`,
		`id STARTS_WITH "order-" AND workflow != "billing"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		q, err := query.Parse(text)
		if err != nil {
			var qe *query.Error
			if !errors.As(err, &qe) || !errors.Is(err, query.ErrQuery) {
				t.Fatalf("Parse(%q): %v is not an *Error matching ErrQuery", text, err)
			}
			if qe.Pos < 0 || qe.Pos > len(text) && qe.Pos != query.MaxBytes {
				t.Fatalf("Parse(%q): %v: position out of the text", text, err)
			}
			if qe.Pos <= len(text) && !strings.HasPrefix(text[qe.Pos:], qe.Token) {
				t.Fatalf("Parse(%q): %v: the token is not the text's at its position", text, err)
			}
			return
		}
		if len(q.String()) > query.MaxBytes {
			t.Fatalf("Parse(%q) prints in %d bytes", text, len(q.String()))
		}
		if msg := roundTrip(q); msg != "" {
			t.Fatalf("Parse(%q): %s", text, msg)
		}
		_ = q.Fields()
	})
}

// FuzzCheckEval checks a query against the built-in fields alone, then
// evaluates it on a record of built-in fields (some missing, some of the
// wrong Go type): nothing panics, and the promises that invariants checks
// hold (NOT is the complement; a plan never loses a match).
func FuzzCheckEval(f *testing.F) {
	f.Add(`status = "failed" AND version >= 2`, "order-1", 3.0, "failed", int64(1_793_000_000_000_000_000), uint8(0))
	f.Add(`id STARTS_WITH "order-" OR NOT created_at < "2026-11-01"`, "order-", 0.0, "running", int64(0), uint8(2))
	f.Add(`id IN ("a", "b") AND id > "a" AND version != 1`, "b", math.NaN(), "completed", int64(-1), uint8(0))
	f.Add(`updated_at >= "2026-11-01T09:00:00+02:00" AND status NOT IN ("pending")`, "", 1e21, "weird", int64(1), uint8(0x3f))
	f.Fuzz(func(t *testing.T, text, id string, version float64, status string, unixNanos int64, drop uint8) {
		q, err := query.Parse(text)
		if err != nil {
			return
		}
		if err := q.Check(nil); err != nil {
			if !errors.Is(err, query.ErrQuery) {
				t.Fatalf("Check(%q): %v does not match ErrQuery", text, err)
			}
			return
		}
		r := mapRecord{
			"id": id, "workflow": id, "version": version, "status": weft.Status(status),
			"created_at": time.Unix(0, unixNanos).UTC(), "updated_at": time.Unix(0, unixNanos),
		}
		for i, name := range []string{"id", "workflow", "version", "status", "created_at", "updated_at"} {
			switch drop >> (i % 8) & 3 {
			case 1:
				delete(r, name)
			case 2:
				r[name] = int64(1) // a Go type no field has: missing
			}
		}
		if msg := invariants(q, nil, r); msg != "" {
			t.Fatalf("%q on %v: %s", text, r, msg)
		}
	})
}

// TestRandomQueries is the fuzz targets' checks over random queries on
// every type of field, evaluated on random records whose values collide
// with the queries' often: every `go test` explores beyond the corpus.
func TestRandomQueries(t *testing.T) {
	t.Parallel()
	schema := query.Schema{"customer": weft.SearchString, "amount": weft.SearchNumber,
		"paid": weft.SearchBool, "due": weft.SearchTime, "tags": weft.SearchKeywords}
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 36))
		text := genQuery(r, 3)
		q, err := query.Parse(text)
		if err != nil {
			t.Fatalf("seed %d: Parse(%q): %v", seed, text, err)
		}
		if err := q.Check(schema); err != nil {
			t.Fatalf("seed %d: Check(%q): %v", seed, text, err)
		}
		if msg := roundTrip(q); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
		again, _ := query.Parse(q.String())
		if err := again.Check(schema); err != nil {
			t.Fatalf("seed %d: the canonical form does not check: %v", seed, err)
		}
		for range 30 {
			rec := genRecord(r)
			if q.Eval(rec) != again.Eval(rec) {
				t.Fatalf("seed %d: %q and its canonical form %q differ on %v", seed, text, q, rec)
			}
			if msg := invariants(q, schema, rec); msg != "" {
				t.Fatalf("seed %d: %q on %v: %s", seed, q, rec, msg)
			}
		}
	}
}

// The random queries' and records' values: few, so that they meet.
var (
	genStrings = []string{"", "a", "ab", "abc", "b", "acme", "é"}
	genNumbers = []float64{-1, 0, 1, 2.5, 100}
	genTimes   = []string{"2026-11-01", "2026-11-01T00:00:00Z", "2026-11-01T12:00:00+02:00", "2026-11-02"}
	genFields  = []string{"id", "status", "version", "created_at", "customer", "amount", "paid", "due", "tags"}
)

// genQuery writes a random query with every type's operators, nested at
// most depth deep, in random case and spacing.
func genQuery(r *rand.Rand, depth int) string {
	if depth == 0 || r.IntN(3) == 0 {
		return genComparison(r)
	}
	switch r.IntN(4) {
	case 0:
		return genKeyword(r, "NOT") + " " + genQuery(r, depth-1)
	case 1:
		return "(" + genQuery(r, depth-1) + ")"
	case 2:
		return genQuery(r, depth-1) + " " + genKeyword(r, "AND") + " " + genQuery(r, depth-1)
	}
	return genQuery(r, depth-1) + " " + genKeyword(r, "OR") + " " + genQuery(r, depth-1)
}

// genKeyword writes a keyword in a random case.
func genKeyword(r *rand.Rand, k string) string {
	if r.IntN(2) == 0 {
		return strings.ToLower(k)
	}
	return k
}

// genComparison writes a random comparison that checks.
func genComparison(r *rand.Rand) string {
	field := genFields[r.IntN(len(genFields))]
	var ops []string
	var value func() string
	switch field {
	case "id", "customer":
		ops = []string{"=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN", "STARTS_WITH"}
		value = func() string { return strconv.Quote(genStrings[r.IntN(len(genStrings))]) }
	case "status":
		ops = []string{"=", "!=", "IN", "NOT IN"}
		value = func() string { return strconv.Quote(string(weft.Statuses()[r.IntN(6)])) }
	case "version", "amount":
		ops = []string{"=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN"}
		value = func() string { return strconv.FormatFloat(genNumbers[r.IntN(len(genNumbers))], 'g', -1, 64) }
	case "created_at", "due":
		ops = []string{"=", "!=", "<", "<=", ">", ">=", "IN", "NOT IN"}
		value = func() string { return strconv.Quote(genTimes[r.IntN(len(genTimes))]) }
	case "paid":
		ops = []string{"=", "!="}
		value = func() string { return strconv.FormatBool(r.IntN(2) == 0) }
	case "tags":
		ops = []string{"=", "!=", "IN", "NOT IN"}
		value = func() string { return strconv.Quote(genStrings[r.IntN(len(genStrings))]) }
	}
	op := ops[r.IntN(len(ops))]
	if op == "IN" || op == "NOT IN" {
		vals := make([]string, 1+r.IntN(3))
		for i := range vals {
			vals[i] = value()
		}
		return fmt.Sprintf("%s %s (%s)", field, genKeyword(r, op), strings.Join(vals, ","))
	}
	return fmt.Sprintf("%s %s %s", field, genKeyword(r, op), value())
}

// genRecord makes a random record whose values are the queries' values,
// each field present two times in three.
func genRecord(r *rand.Rand) mapRecord {
	rec := mapRecord{}
	present := func() bool { return r.IntN(3) > 0 }
	str := func() string { return genStrings[r.IntN(len(genStrings))] }
	num := func() float64 { return genNumbers[r.IntN(len(genNumbers))] }
	tm := func() time.Time {
		t, err := time.Parse(time.RFC3339, genTimes[1+r.IntN(2)])
		if err != nil {
			panic(err)
		}
		return t.Add(time.Duration(r.IntN(3)-1) * 12 * time.Hour)
	}
	if present() {
		rec["id"] = str()
	}
	if present() {
		rec["status"] = string(weft.Statuses()[r.IntN(6)])
	}
	if present() {
		rec["version"] = num()
	}
	if present() {
		rec["created_at"] = tm()
	}
	if present() {
		rec["customer"] = str()
	}
	if present() {
		rec["amount"] = num()
	}
	if present() {
		rec["paid"] = r.IntN(2) == 0
	}
	if present() {
		rec["due"] = tm()
	}
	if present() {
		tags := []string{}
		for range r.IntN(3) {
			tags = append(tags, str())
		}
		rec["tags"] = tags
	}
	return rec
}

// TestPlanExact checks the other half of a plan's promise on random
// conjunctions of comparisons on one field: when its Range is Exact, a
// record is in the Range exactly when it matches (the Range is as tight
// as the comparisons), and when it is Empty, no record matches.
func TestPlanExact(t *testing.T) {
	t.Parallel()
	schema := query.Schema{"customer": weft.SearchString, "amount": weft.SearchNumber,
		"paid": weft.SearchBool, "due": weft.SearchTime, "tags": weft.SearchKeywords}
	exact := 0
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 37))
		field := genFields[r.IntN(len(genFields))]
		var terms []string
		for range 1 + r.IntN(4) {
			c := genComparison(r)
			for !strings.HasPrefix(c, field+" ") {
				c = genComparison(r)
			}
			terms = append(terms, c)
		}
		text := strings.Join(terms, " AND ")
		q, err := query.Parse(text)
		if err == nil {
			err = q.Check(schema)
		}
		if err != nil {
			t.Fatalf("seed %d: %q: %v", seed, text, err)
		}
		plan := q.Plan()
		if len(plan) > 1 {
			t.Fatalf("seed %d: %q: a plan of %d ranges on one field", seed, q, len(plan))
		}
		if len(plan) == 0 || !plan[0].Exact {
			continue
		}
		exact++
		for range 30 {
			rec := genRecord(r)
			v, ok := rec.Field(field)
			if in := inRange(plan[0], v, ok); in != q.Eval(rec) {
				t.Fatalf("seed %d: %q on %v: matches %v, but in its exact range %s: %v", seed, q, rec, q.Eval(rec), plan[0], in)
			}
		}
	}
	if exact < 500 {
		t.Errorf("only %d exact plans in 2000 queries: the test checks too little", exact)
	}
}
