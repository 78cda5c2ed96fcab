package api

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// Search attributes (docs/operations.md, "Search"): GET /v1/instances?q=
// lists the instances a query matches, through the node, and GET
// /v1/search-attributes shows the registry of the attributes' names and
// types that the queries are checked against.

// queryError is what the node's error for a query that does not parse or
// type carries in its chain (internal/query's *Error, which this package
// may not import): where the query is wrong, and how.
type queryError interface {
	error
	Located() (pos int, token, msg string)
}

// searchInstances is a page of the instances f selects that the query
// text q matches, and the cursor of the next page. A query that does not
// parse or type is an invalid-query problem.
func (s *Server) searchInstances(ctx context.Context, q string, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	items, next, err := s.node.SearchInstances(ctx, q, f)
	if qe := queryError(nil); errors.As(err, &qe) {
		return nil, "", invalidQuery(qe)
	}
	return items, next, err
}

// viewSearch is an instance's search attributes as answered, their
// values as JSON has them (a time as an RFC 3339 string in UTC); nil when
// it has none.
func viewSearch(attrs weft.SearchAttributes) map[string]any {
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]any, len(attrs))
	for name, v := range attrs {
		if v.Type == weft.SearchTime {
			out[name] = v.Time.UTC().Format(time.RFC3339Nano)
			continue
		}
		out[name] = v.Native()
	}
	return out
}

// listSearchAttributes answers GET /v1/search-attributes: every
// registered search attribute, by name.
func (s *Server) listSearchAttributes(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	attrs, err := s.node.SearchAttributes(ctx)
	if err != nil {
		return err
	}
	items := make([]apiv1.SearchAttribute, len(attrs))
	for i, a := range attrs {
		items[i] = apiv1.SearchAttribute{Name: a.Name, Type: apiv1.SearchType(a.Type), Workflow: a.Workflow}
	}
	return c.JSON(apiv1.SearchAttributes{Items: items})
}
