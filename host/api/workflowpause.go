package api

import (
	"context"
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// A workflow's pause (docs/operations.md, "Pause a workflow"): while it is
// paused its starts are accepted and held, pending; its resume releases
// them, oldest first, through a batch job of the host's own (op release),
// answered with it so that a client follows the release as any batch.
// Who pauses or resumes is the request's token's name.

// pauseWorkflow pauses the workflow of the path: 200 with the pause, the
// first one's when it was paused already. The workflow need not be saved
// yet; its name must be one a definition could have.
func (s *Server) pauseWorkflow(c *fiber.Ctx) error {
	var req apiv1.WorkflowPauseRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "paused through the API"
	}
	name := param(c, "name")
	if err := checkWorkflowName(name); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	p, err := s.node.PauseWorkflow(ctx, name, operation(c, req.Reason))
	if err != nil {
		return err
	}
	return c.JSON(viewWorkflowPause(p))
}

// resumeWorkflow resumes the workflow of the path and releases what it
// held: 200 with the pause removed and the release batch; 404 when it is
// not paused. A release batch that could not be started leaves the
// workflow resumed: 200 all the same, with release null and why.
func (s *Server) resumeWorkflow(c *fiber.Ctx) error {
	var req apiv1.WorkflowResumeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "resumed through the API"
	}
	name := param(c, "name")
	if err := checkWorkflowName(name); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	p, b, err := s.node.ResumeWorkflow(ctx, name, operation(c, req.Reason), req.Rate)
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return notFoundf("workflow %q is not paused", name)
	case err != nil:
		return err
	}
	out := apiv1.WorkflowResume{Pause: viewWorkflowPause(p)}
	if b != nil {
		v := viewBatch(b)
		out.Release = &v
	}
	return c.JSON(out)
}

// listWorkflowPauses answers every paused workflow, by name, saved or
// not, in one page: there are few.
func (s *Server) listWorkflowPauses(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	ps, err := s.node.WorkflowPauses(ctx)
	if err != nil {
		return err
	}
	items := make([]apiv1.WorkflowPause, len(ps))
	for i := range ps {
		items[i] = viewWorkflowPause(&ps[i])
	}
	return c.JSON(newPage(items, ""))
}

// checkWorkflowName refuses a name no definition can have (abi.ValidName,
// the rule of a definition's name): a pause of it would hold nothing.
func checkWorkflowName(name string) error {
	if !abi.ValidName(name) {
		return invalidField("name", "%q cannot name a workflow: 1 to %d characters from a-z, 0-9, _ and -, starting with a letter", name, abi.MaxNameLen)
	}
	return nil
}

// viewWorkflowPause is a workflow's pause as answered, without its count
// of held starts.
func viewWorkflowPause(p *weft.WorkflowPause) apiv1.WorkflowPause {
	return apiv1.WorkflowPause{Workflow: p.Workflow, Since: p.Since, Actor: p.Op.Actor, Reason: p.Op.Reason}
}

// workflowPaused is the pause of the workflow name as GET
// /v1/workflows/{name} shows it, with its held starts counted; nil when
// it is not paused.
func (s *Server) workflowPaused(ctx context.Context, name string) (*apiv1.WorkflowPause, error) {
	p, err := s.node.WorkflowPause(ctx, name)
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	held, more, err := s.node.HeldStarts(ctx, name)
	if err != nil {
		return nil, err
	}
	v := viewWorkflowPause(p)
	v.Held, v.HeldMore = &held, more
	return &v, nil
}

// pausedByName reads every workflow's pause, for a list of workflows.
func (s *Server) pausedByName(ctx context.Context) (map[string]*apiv1.WorkflowPause, error) {
	ps, err := s.node.WorkflowPauses(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*apiv1.WorkflowPause, len(ps))
	for i := range ps {
		v := viewWorkflowPause(&ps[i])
		out[v.Workflow] = &v
	}
	return out, nil
}

// viewHold is an instance's hold as answered; nil for none.
func viewHold(h *weft.Hold) *apiv1.Hold {
	if h == nil {
		return nil
	}
	return &apiv1.Hold{Since: h.Since}
}
