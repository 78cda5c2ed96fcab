package client

import (
	"context"

	"github.com/weftworks/weft/host/api/apiv1"
)

// problemInvalidQuery is the type of the problem a search's query that
// does not parse or type gets (ErrInvalidQuery).
const problemInvalidQuery = "urn:weft:problem:invalid-query"

// SearchAttributes returns the registered search attributes
// (docs/operations.md, "Search"), by name: every name a saved definition
// declared in its search, with its type, which is its type for good, and
// the workflow that declared it first. They are what InstanceFilter.Query
// may compare besides the built-in fields.
func (c *Client) SearchAttributes(ctx context.Context) ([]apiv1.SearchAttribute, error) {
	var r apiv1.SearchAttributes
	if err := c.getJSON(ctx, "/v1/search-attributes", nil, &r); err != nil {
		return nil, err
	}
	return r.Items, nil
}
