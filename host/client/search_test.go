package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// TestClientSearch: Instances with a Query finds the instances it
// matches, with the filter's other fields and page after page; each
// instance has its search attributes; a query that does not parse is an
// *Error matching ErrInvalidQuery and ErrInvalid, with the position and
// token of the mistake, and a query with an ID is an ErrInvalid that is
// not ErrInvalidQuery; SearchAttributes lists the registry to a reader.
func TestClientSearch(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "invoice", []byte(`
name: invoice
search:
  customer: { type: string,   value: "${ input.customer }" }
  amount:   { type: number,   value: "${ input.amount }" }
  tags:     { type: keywords, value: "${ input.tags }" }
steps:
  - { id: mark, set: { sent: true } }
`)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct{ id, input string }{
		{"i-1", `{"customer": "acme", "amount": 10, "tags": ["eu"]}`},
		{"i-2", `{"customer": "acme", "amount": 20}`},
		{"i-3", `{"customer": "globex", "amount": 30, "tags": "eu"}`},
		{"i-4", `{"customer": "acme", "amount": 40, "tags": ["us", "eu"]}`},
	} {
		if _, _, err := c.Start(ctx, "invoice", apiv1.StartRequest{ID: in.id, Input: json.RawMessage(in.input)}, 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	list := func(f client.InstanceFilter) []string {
		t.Helper()
		var ids []string
		for range 20 {
			page, err := c.Instances(ctx, f)
			if err != nil {
				t.Fatalf("Instances(%+v): %v", f, err)
			}
			for _, in := range page.Items {
				ids = append(ids, in.ID)
			}
			if page.NextCursor == "" {
				return ids
			}
			f.Cursor = page.NextCursor
		}
		t.Fatalf("Instances(%+v): more than 20 pages", f)
		return nil
	}
	for _, tt := range []struct {
		f    client.InstanceFilter
		want []string
	}{
		{client.InstanceFilter{Query: `customer = "acme"`}, []string{"i-4", "i-2", "i-1"}},
		{client.InstanceFilter{Query: `customer = "acme"`, Oldest: true, ListOptions: client.ListOptions{Limit: 1}}, []string{"i-1", "i-2", "i-4"}},
		{client.InstanceFilter{Query: `tags = "eu" AND amount >= 20`, Workflow: "invoice", Status: apiv1.StatusCompleted}, []string{"i-4", "i-3"}},
		{client.InstanceFilter{Query: `tags = "eu"`, Status: apiv1.StatusFailed}, nil},
	} {
		if got := list(tt.f); !slices.Equal(got, tt.want) {
			t.Errorf("Instances(%+v): %v, want %v", tt.f, got, tt.want)
		}
	}
	in, err := c.Instance(ctx, "i-4")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"customer": "acme", "amount": 40.0, "tags": []any{"us", "eu"}}; !equalJSON(in.Search, want) {
		t.Errorf("i-4's search: %v, want %v", in.Search, want)
	}

	_, err = c.Instances(ctx, client.InstanceFilter{Query: `amount > 1 AND customer == "acme"`})
	var e *client.Error
	if !errors.Is(err, client.ErrInvalidQuery) || !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) {
		t.Fatalf("a bad query: %v, want an *Error matching ErrInvalidQuery and ErrInvalid", err)
	}
	if e.Position == nil || *e.Position != 24 || e.Token != "==" || e.Status != 400 {
		t.Errorf("a bad query: %+v, want position 24, token ==", e.Problem)
	}
	_, err = c.Instances(ctx, client.InstanceFilter{Query: `amount > 1`, ID: "i-1"})
	if !errors.Is(err, client.ErrInvalid) || errors.Is(err, client.ErrInvalidQuery) {
		t.Errorf("a query with an id: %v, want an ErrInvalid, not an ErrInvalidQuery", err)
	}

	attrs, err := newClient(t, url, readerToken).SearchAttributes(ctx)
	want := []apiv1.SearchAttribute{
		{Name: "amount", Type: apiv1.SearchNumber, Workflow: "invoice"},
		{Name: "customer", Type: apiv1.SearchString, Workflow: "invoice"},
		{Name: "tags", Type: apiv1.SearchKeywords, Workflow: "invoice"},
	}
	if err != nil || !slices.Equal(attrs, want) {
		t.Errorf("SearchAttributes: %+v, %v; want %+v", attrs, err, want)
	}
}

// equalJSON reports whether a and b encode to the same JSON.
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}
