package api

import (
	"encoding/json"
	"fmt"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/definition"
	"github.com/weftworks/weft/host/engine"
	"github.com/weftworks/weft/host/store"
)

// eventRequest is the body of POST /v1/events.
type eventRequest struct {
	Name    string          `json:"name"`
	Key     string          `json:"key"`
	Payload json.RawMessage `json:"payload"`
	ID      string          `json:"id"`
}

// eventView is what a stimulus did.
type eventView struct {
	ID      string   `json:"id"`
	Resumed []string `json:"resumed"`
	Started []string `json:"started"`
	Queued  bool     `json:"queued"`
	Warning string   `json:"warning,omitempty"`
}

func (s *Server) sendEvent(c *fiber.Ctx) error {
	if err := requireType(c, false, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	var req eventRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var errs []FieldError
	if req.Name == "" {
		errs = append(errs, FieldError{Path: "name", Message: "must not be empty"})
	} else if err := definition.CheckEventName(req.Name); err != nil {
		// The rule of the definitions: an event they cannot name would
		// only wait for its TTL, then die.
		errs = append(errs, FieldError{Path: "name", Message: err.Error()})
	}
	if req.ID != "" {
		if err := store.CheckID("id", req.ID); err != nil {
			errs = append(errs, FieldError{Path: "id", Message: clean(err)})
		}
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
	out, err := s.node.Engine().Signal(ctx, engine.Stimulus{ID: req.ID, Name: req.Name, Key: req.Key, Payload: payload})
	if err != nil {
		return err
	}
	v := eventView{ID: out.ID, Resumed: out.Resumed, Started: out.Started, Queued: out.Queued, Warning: out.Warning}
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
	items, next, err := s.node.Engine().DeadLetters(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(newPage(items, next))
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
	items, next, err := s.node.Store().QueuedStimuli(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	return c.JSON(newPage(items, next))
}

// refreshRequest is the optional body of POST /v1/admin/refresh.
type refreshRequest struct {
	Workflows []string `json:"workflows"`
}

// refreshView is what a refresh did.
type refreshView struct {
	Status string                 `json:"status"`
	Files  []engine.RefreshedFile `json:"files"`
}

func (s *Server) refresh(c *fiber.Ctx) error {
	var req refreshRequest
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
	v := refreshView{Status: res.Status, Files: res.Files}
	if v.Files == nil {
		v.Files = []engine.RefreshedFile{}
	}
	return c.JSON(v)
}
