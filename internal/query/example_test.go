package query_test

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// A query is parsed, checked against the workflows' search attributes,
// planned for a store's index and evaluated on each instance read.
func Example() {
	q, err := query.Parse(`customer = "acme" and status = "failed" and created_at > "2026-11-01"`)
	if err != nil {
		panic(err)
	}
	if err := q.Check(query.Schema{"customer": weft.SearchString}); err != nil {
		panic(err)
	}
	fmt.Println(q)
	for _, r := range q.Plan() {
		fmt.Println(r)
	}
	instance := mapRecord{"customer": "acme", "status": "failed", "created_at": time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	fmt.Println(q.Eval(instance))
	// Output:
	// customer = "acme" AND status = "failed" AND created_at > "2026-11-01"
	// created_at time ("2026-11-01T00:00:00Z", +inf) exact
	// customer string {"acme"} exact
	// status string {"failed"} exact
	// true
}

// A mistake is reported at its token, with what would be right.
func ExampleQuery_Check() {
	q, err := query.Parse(`status = "failed" AND custmer = "acme"`)
	if err != nil {
		panic(err)
	}
	fmt.Println(q.Check(query.Schema{"customer": weft.SearchString}))
	// Output:
	// query: at 22 ("custmer"): unknown field; did you mean "customer"?
}
