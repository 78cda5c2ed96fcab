package query_test

import (
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// benchQuery is a query as an operator writes one: a few attributes, a
// time, an OR and an IN.
const benchQuery = `customer = "acme" AND status IN ("failed", "cancelled") AND created_at > "2026-11-01" AND (amount >= 100 OR tags = "vip") AND NOT region = "us"`

// benchSchema declares the query's attributes.
func benchSchema() query.Schema {
	return query.Schema{"customer": weft.SearchString, "amount": weft.SearchNumber,
		"region": weft.SearchString, "tags": weft.SearchKeywords}
}

// BenchmarkParseCheck is what the API pays per request with a query:
// parse it and check it against the workflows' attributes.
func BenchmarkParseCheck(b *testing.B) {
	s := benchSchema()
	b.ReportAllocs()
	for b.Loop() {
		q, err := query.Parse(benchQuery)
		if err != nil {
			b.Fatal(err)
		}
		if err := q.Check(s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEval is what a store pays per instance it filters: one Eval
// on a record that matches (every comparison is evaluated).
func BenchmarkEval(b *testing.B) {
	q, err := query.Parse(benchQuery)
	if err != nil {
		b.Fatal(err)
	}
	if err := q.Check(benchSchema()); err != nil {
		b.Fatal(err)
	}
	r := mapRecord{
		"id": "order-1", "workflow": "billing", "version": 3.0, "status": "failed",
		"created_at": time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC), "updated_at": time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC),
		"customer": "acme", "amount": 250.0, "region": "eu", "tags": []string{"vip"},
	}
	if !q.Eval(r) {
		b.Fatal("the record does not match")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !q.Eval(r) {
			b.Fatal("no match")
		}
	}
}
