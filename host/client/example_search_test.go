package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/hosttest"
)

// Find instances by what they are about: a workflow declares search
// attributes, and a query compares them. A query with a mistake is an
// error that says where it is, for a caret under the offending token.
func ExampleClient_Instances_query() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "invoice", []byte(`
name: invoice
search:
  customer: { type: string, value: "${ input.customer }" }
  amount:   { type: number, value: "${ input.amount }" }
steps:
  - { id: mark, set: { sent: true } }
`)); err != nil {
		log.Fatal(err)
	}
	for i, in := range []string{`{"customer": "acme", "amount": 120}`, `{"customer": "acme", "amount": 4800}`, `{"customer": "globex", "amount": 9000}`} {
		req := apiv1.StartRequest{ID: fmt.Sprintf("invoice-%d", i+1), Input: json.RawMessage(in)}
		if _, _, err := c.Start(ctx, "invoice", req, 30*time.Second); err != nil {
			log.Fatal(err)
		}
	}

	attrs, err := c.SearchAttributes(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attrs {
		fmt.Printf("%s is a %s\n", a.Name, a.Type)
	}

	// A page may be short, with a cursor to read on: read until there
	// is none.
	f := client.InstanceFilter{Query: `customer = "acme" AND amount > 1000`}
	for {
		page, err := c.Instances(ctx, f)
		if err != nil {
			log.Fatal(err)
		}
		for _, in := range page.Items {
			fmt.Println(in.ID, in.Search["customer"], in.Search["amount"])
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}

	q := `customer = "acme" AND amout > 1000`
	_, err = c.Instances(ctx, client.InstanceFilter{Query: q})
	var e *client.Error
	if errors.Is(err, client.ErrInvalidQuery) && errors.As(err, &e) {
		fmt.Println(q)
		fmt.Println(strings.Repeat(" ", *e.Position) + "^ " + e.Errors[0].Message)
	}
	// Output:
	// amount is a number
	// customer is a string
	// invoice-2 acme 4800
	// customer = "acme" AND amout > 1000
	//                       ^ unknown field; did you mean "amount"?
}
