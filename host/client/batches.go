package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/weftworks/weft/host/api/apiv1"
)

// StartBatch starts a batch job (docs/operations.md, "Batch operations"):
// req.Op applied to the instances req.Query matches, or to req.IDs, on the
// host, at req.Rate. It returns the batch as started; follow it with
// Batch. A document with problems is an *Error with Status 422 listing
// each with its path (args.event, ids[3]); a delete or migrate batch
// needs an admin's token (ErrForbidden otherwise).
func (c *Client) StartBatch(ctx context.Context, req apiv1.BatchRequest) (*apiv1.Batch, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var b apiv1.Batch
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/batches", body: body, ctype: "application/json"}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// Batches lists a page of batches, newest first.
func (c *Client) Batches(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Batch], error) {
	var p apiv1.Page[apiv1.Batch]
	if err := c.getJSON(ctx, "/v1/batches", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Batch returns a batch as it is now: its phase and its counts by
// outcome.
func (c *Client) Batch(ctx context.Context, id string) (*apiv1.Batch, error) {
	var b apiv1.Batch
	if err := c.getJSON(ctx, "/v1/batches/"+seg(id), nil, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// BatchItemFilter selects a page of a batch's items.
type BatchItemFilter struct {
	// Outcome keeps the items with it; empty keeps every one.
	Outcome apiv1.BatchOutcome
	// After keeps the items with a greater seq: a previous page's
	// NextCursor, parsed, or 0 for the first page.
	After uint64
	// Limit is the most items; 0 lets the server choose.
	Limit int
}

// BatchItems returns a page of a batch's items, in the order they were
// selected. The page's NextCursor is the seq to pass as f.After for the
// next page, empty after the last.
func (c *Client) BatchItems(ctx context.Context, id string, f BatchItemFilter) (*apiv1.Page[apiv1.BatchItem], error) {
	q := pageQuery(ListOptions{Limit: f.Limit})
	if f.Outcome != "" {
		q.Set("outcome", string(f.Outcome))
	}
	if f.After > 0 {
		q.Set("after", strconv.FormatUint(f.After, 10))
	}
	var p apiv1.Page[apiv1.BatchItem]
	if err := c.getJSON(ctx, "/v1/batches/"+seg(id)+"/items", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ConfirmBatch applies a batch started with Hold, which waits once its
// instances are selected; an *Error matching ErrConflict for a batch in
// another phase.
func (c *Client) ConfirmBatch(ctx context.Context, id string) (*apiv1.Batch, error) {
	var b apiv1.Batch
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/batches/" + seg(id) + "/confirm"}, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// CancelBatch stops a batch, with a reason (empty: the server's default):
// nothing more is applied, and the items not applied stay pending. A
// finished batch is returned as it is.
func (c *Client) CancelBatch(ctx context.Context, id, reason string) (*apiv1.Batch, error) {
	r := request{method: http.MethodPost, path: "/v1/batches/" + seg(id) + "/cancel"}
	if reason != "" {
		body, err := jsonBody(apiv1.BatchCancelRequest{Reason: reason})
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = body, "application/json"
	}
	var b apiv1.Batch
	if _, err := c.do(ctx, r, &b); err != nil {
		return nil, err
	}
	return &b, nil
}

// ResetPoints returns the steps an instance can be reset to: the
// top-level steps it began, in the order of its definition, each with
// whether its variables were recorded (docs/operations.md, "Reset").
func (c *Client) ResetPoints(ctx context.Context, id string) ([]apiv1.ResetPoint, error) {
	var p apiv1.Page[apiv1.ResetPoint]
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id)+"/reset-points", nil, &p); err != nil {
		return nil, err
	}
	return p.Items, nil
}

// Reset runs an instance again from step, a top-level step it began, with
// the variables it had then, and returns the instance as it is before the
// reset applies. An *Error matching ErrConflict, saying why, for a step
// it cannot be reset to.
func (c *Client) Reset(ctx context.Context, id, step, reason string) (*apiv1.Instance, error) {
	return c.instanceAction(ctx, id, "reset", true, apiv1.ResetRequest{Step: step, Reason: reason})
}

// PlanMigration is a migration's dry run (docs/operations.md, "Migrate"):
// whether the instance can move to req's target, and how; nothing is
// sent. req.DryRun is set.
func (c *Client) PlanMigration(ctx context.Context, id string, req apiv1.MigrateRequest) (*apiv1.MigrationPlan, error) {
	req.DryRun = true
	return c.Migrate(ctx, id, req)
}

// Migrate moves an instance to req's target (another workflow version,
// other plugin versions), or with req.DryRun says whether it could, and
// returns the plan. An instance that cannot move is an *Error matching
// ErrConflict whose Migration is the plan, saying why; nothing is sent.
// It needs an admin's token.
func (c *Client) Migrate(ctx context.Context, id string, req apiv1.MigrateRequest) (*apiv1.MigrationPlan, error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, err
	}
	var p apiv1.MigrationPlan
	r := request{method: http.MethodPost, path: "/v1/instances/" + seg(id) + "/migrate", body: body, ctype: "application/json"}
	if _, err := c.do(ctx, r, &p); err != nil {
		return nil, err
	}
	return &p, nil
}
