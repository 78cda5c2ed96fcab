package client

import (
	"context"

	"github.com/weftworks/weft/host/api/apiv1"
)

// ConcurrencyKeys lists a page of the keys of the workflows' concurrency
// limits (docs/flow-control.md) that have running or waiting instances,
// ordered by workflow and key: those of workflow, or of every workflow
// when it is empty. Each shows its limit and policy, its holders and how
// many instances wait in its line, and since when.
func (c *Client) ConcurrencyKeys(ctx context.Context, workflow string, opts ListOptions) (*apiv1.Page[apiv1.ConcurrencyKey], error) {
	q := pageQuery(opts)
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	var p apiv1.Page[apiv1.ConcurrencyKey]
	if err := c.getJSON(ctx, "/v1/concurrency", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ConcurrencyKey returns one key of a workflow's concurrency limit (""
// for a workflow-wide limit) with a page of its line, first in line
// first; the answer's NextCursor, passed as opts.Cursor, selects the
// line's next page. An *Error matching ErrNotFound when nothing runs or
// waits under the key.
func (c *Client) ConcurrencyKey(ctx context.Context, workflow, key string, opts ListOptions) (*apiv1.ConcurrencyLine, error) {
	q := pageQuery(opts)
	if key != "" {
		q.Set("key", key)
	}
	var l apiv1.ConcurrencyLine
	if err := c.getJSON(ctx, "/v1/concurrency/"+seg(workflow), q, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// StepConcurrencyKey returns one key of the activity steps' concurrency
// limits (docs/flow-control.md, "Step limits"), which the steps of any
// workflow that name it share, with a page of its line, first in line
// first, as ConcurrencyKey does a workflow's: its holders and waiters are
// attempts, each shown as its instance (which may appear more than once).
// An *Error matching ErrNotFound when nothing runs or waits under the key;
// ErrInvalid for an empty key, which no step has.
func (c *Client) StepConcurrencyKey(ctx context.Context, key string, opts ListOptions) (*apiv1.ConcurrencyLine, error) {
	q := pageQuery(opts)
	q.Set("key", key)
	var l apiv1.ConcurrencyLine
	if err := c.getJSON(ctx, "/v1/step-concurrency", q, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
