package client

import (
	"context"
	"net/http"

	"github.com/weftworks/weft/host/api/apiv1"
)

// PauseWorkflow pauses a workflow (docs/operations.md, "Pause a
// workflow"): from then on its starts are accepted and held, pending,
// until ResumeWorkflow; its instances already started go on. It returns
// the pause, the first one's when the workflow was paused already. An
// empty reason leaves the server's default. The workflow need not be
// saved yet.
func (c *Client) PauseWorkflow(ctx context.Context, name, reason string) (*apiv1.WorkflowPause, error) {
	r := request{method: http.MethodPost, path: "/v1/workflows/" + seg(name) + "/pause"}
	if reason != "" {
		body, err := jsonBody(apiv1.WorkflowPauseRequest{Reason: reason})
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = body, "application/json"
	}
	var p apiv1.WorkflowPause
	if _, err := c.do(ctx, r, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// ResumeWorkflow resumes a paused workflow and releases the starts it
// held, oldest first, at req.Rate a second (nil: the server's default),
// through a batch job: the answer's Release, to follow with Batch. An
// *Error matching ErrNotFound when the workflow is not paused.
func (c *Client) ResumeWorkflow(ctx context.Context, name string, req apiv1.WorkflowResumeRequest) (*apiv1.WorkflowResume, error) {
	r := request{method: http.MethodPost, path: "/v1/workflows/" + seg(name) + "/resume"}
	if req != (apiv1.WorkflowResumeRequest{}) {
		body, err := jsonBody(req)
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = body, "application/json"
	}
	var out apiv1.WorkflowResume
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// WorkflowPauses lists the paused workflows, by name, saved or not.
func (c *Client) WorkflowPauses(ctx context.Context) ([]apiv1.WorkflowPause, error) {
	var p apiv1.Page[apiv1.WorkflowPause]
	if err := c.getJSON(ctx, "/v1/workflow-pauses", nil, &p); err != nil {
		return nil, err
	}
	return p.Items, nil
}
