package api

import (
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

func (s *Server) sendEvent(c *fiber.Ctx) error {
	if err := requireType(c, false, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	var req apiv1.EventRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var errs []apiv1.FieldError
	if req.Name == "" {
		errs = append(errs, apiv1.FieldError{Path: "name", Message: "must not be empty"})
	} else if err := node.CheckEventName(req.Name); err != nil {
		// The rule of the definitions: an event they cannot name would
		// only wait for its TTL, then die.
		errs = append(errs, apiv1.FieldError{Path: "name", Message: err.Error()})
	}
	if req.ID != "" {
		if err := weft.CheckID("id", req.ID); err != nil {
			errs = append(errs, apiv1.FieldError{Path: "id", Message: clean(err)})
		}
	}
	if msg := checkPriority(req.Priority); msg != "" {
		errs = append(errs, apiv1.FieldError{Path: "priority", Message: msg})
	}
	if len(errs) > 0 {
		return unprocessable("the event cannot be sent", errs...)
	}
	var payload any
	if len(req.Payload) > 0 {
		payload = req.Payload
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	out, err := s.node.Signal(ctx, weft.Event{ID: req.ID, Name: req.Name, Key: req.Key, Payload: payload, Priority: req.Priority})
	if err != nil {
		return err
	}
	v := apiv1.EventOutcome{ID: out.ID, Resumed: out.Resumed, Started: out.Started, Queued: out.Queued, Warning: out.Warning}
	if v.Resumed == nil {
		v.Resumed = []string{}
	}
	if v.Started == nil {
		v.Started = []string{}
	}
	return c.Status(fiber.StatusAccepted).JSON(v)
}

func (s *Server) deadLetters(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	items, next, err := s.node.DeadLetters(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(newPage(viewStimuli(items), next))
}

// queuedStimuli answers GET /v1/events/queued: the stimuli waiting for an
// instance to wait for them, soonest to expire first.
func (s *Server) queuedStimuli(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	items, next, err := s.node.QueuedStimuli(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(newPage(viewStimuli(items), next))
}

// viewStimuli is a page of queued or dead stimuli as answered: neither was
// delivered, so neither has the record of a delivery.
func viewStimuli(ss []weft.Stimulus) []apiv1.Stimulus {
	out := make([]apiv1.Stimulus, len(ss))
	for i, s := range ss {
		out[i] = apiv1.Stimulus{ID: s.ID, Name: s.Name, Key: s.Key, Payload: s.Payload, CreatedAt: s.CreatedAt,
			ExpiresAt: s.ExpiresAt, State: string(s.State), SettledAt: s.SettledAt}
	}
	return out
}

func (s *Server) refresh(c *fiber.Ctx) error {
	var req apiv1.RefreshRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	for i, n := range req.Workflows {
		if n == "" {
			return invalidField(fmt.Sprintf("workflows[%d]", i), "must not be empty")
		}
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.node.Refresh(ctx, req.Workflows)
	if err != nil {
		return err
	}
	v := apiv1.RefreshResult{Status: apiv1.RefreshStatus(res.Status), Files: make([]apiv1.RefreshedFile, 0, len(res.Files))}
	for _, f := range res.Files {
		file := apiv1.RefreshedFile{File: f.File, Name: f.Name, Version: f.Version, Created: f.Created, Error: f.Error}
		for _, p := range f.Problems {
			file.Problems = append(file.Problems, apiv1.FieldError{Path: p.Path, Message: p.Message, Line: p.Line, Column: p.Column})
		}
		v.Files = append(v.Files, file)
	}
	return c.JSON(v)
}
