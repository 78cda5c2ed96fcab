package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// Schedules (docs/schedules.md): the routes under /v1/schedules save,
// show, pause, trigger and backfill them through the node, whose engine's
// schedules sweep fires them. Every change is recorded with its actor: the
// request's token's name.

// viewSchedule is a schedule as answered.
func viewSchedule(v *weft.ScheduleView) apiv1.Schedule {
	// The stored document is canonical JSON, checked when it was saved,
	// and the node parsed it to make v.
	var doc struct {
		Workflow string `json:"workflow"`
	}
	_ = json.Unmarshal(v.Document, &doc)
	next := v.NextFires
	if next == nil {
		next = []time.Time{}
	}
	return apiv1.Schedule{ID: v.ID, Workflow: doc.Workflow, Document: v.Document, Paused: v.Paused, Note: v.Note,
		NextFires: next, Running: viewRuns(v.Running), Recent: viewRuns(v.Recent), Runs: v.Runs,
		Waiting: v.Waiting, Triggers: v.Triggers, Backfills: v.Backfills,
		Revision: v.Revision, Wake: v.Wake, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
}

// viewRuns is a list of a schedule's runs as answered, never null.
func viewRuns(runs []weft.ScheduleRun) []apiv1.ScheduleRun {
	out := make([]apiv1.ScheduleRun, len(runs))
	for i, r := range runs {
		out[i] = apiv1.ScheduleRun{InstanceID: r.InstanceID, Nominal: r.Nominal, Kind: apiv1.FireKind(r.Kind),
			Status: apiv1.Status(r.Status), StartedAt: r.StartedAt, EndedAt: r.EndedAt, Gone: r.Gone}
	}
	return out
}

// problemFields are a document's or a request's problems as field errors.
func problemFields(ps []weft.Problem) []apiv1.FieldError {
	out := make([]apiv1.FieldError, len(ps))
	for i, p := range ps {
		out[i] = apiv1.FieldError{Path: p.Path, Message: p.Message, Line: p.Line, Column: p.Column}
	}
	return out
}

// scheduleError answers the error of an operation on the schedule id: 404
// when there is none, 422 for the request's problems (what, such as "the
// backfill", names the request), 409 when the schedule holds as many
// requests as it may or kept changing under the operation, else as
// problemFor says.
func scheduleError(id, what string, err error) error {
	var se *weft.ScheduleError
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return notFoundf("no schedule %q", id)
	case errors.As(err, &se):
		return unprocessable(fmt.Sprintf("%s has %d problem(s)", what, len(se.Problems)), problemFields(se.Problems)...)
	case errors.Is(err, weft.ErrConflict):
		// weft.ErrConflict's own words are "stale revision", which says
		// nothing to a client whose request found the schedule busy.
		return conflictf("%s; try again later", strings.ReplaceAll(clean(err), weft.ErrConflict.Error()+": ", ""))
	}
	return err
}

// putSchedule saves a schedule document (YAML or JSON) as the schedule
// {id}: 201 when it is new, 200 when it changed or was the same.
func (s *Server) putSchedule(c *fiber.Ctx) error {
	if err := requireType(c, false, definitionTypes...); err != nil {
		return err
	}
	id := param(c, "id")
	body := c.BodyRaw()
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	v, isNew, _, err := s.node.SaveSchedule(ctx, body, id, actor(c))
	if err != nil {
		return err
	}
	return created(c, isNew, viewSchedule(v))
}

func (s *Server) listSchedules(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	views, next, err := s.node.Schedules(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]apiv1.Schedule, 0, len(views))
	for i := range views {
		items = append(items, viewSchedule(&views[i]))
	}
	return c.JSON(newPage(items, next))
}

func (s *Server) getSchedule(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	v, err := s.node.Schedule(ctx, id)
	if err != nil {
		return scheduleError(id, "the request", err)
	}
	return c.JSON(viewSchedule(v))
}

func (s *Server) deleteSchedule(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if err := s.node.DeleteSchedule(ctx, id); err != nil {
		return scheduleError(id, "the request", err)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// pauseSchedule and unpauseSchedule pause and resume a schedule's fires,
// with an optional note; doing it twice changes nothing.
func (s *Server) pauseSchedule(c *fiber.Ctx) error { return s.setPause(c, true) }

func (s *Server) unpauseSchedule(c *fiber.Ctx) error { return s.setPause(c, false) }

func (s *Server) setPause(c *fiber.Ctx, pause bool) error {
	var req apiv1.PauseRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	change := s.node.UnpauseSchedule
	if pause {
		change = s.node.PauseSchedule
	}
	v, err := change(ctx, id, req.Note, actor(c))
	if err != nil {
		return scheduleError(id, "the request", err)
	}
	return c.JSON(viewSchedule(v))
}

// triggerSchedule asks for a run now. 202: the schedules sweep starts it
// at its next turn, so the answer shows it waiting (triggers).
func (s *Server) triggerSchedule(c *fiber.Ctx) error {
	var req apiv1.TriggerRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	v, err := s.node.TriggerSchedule(ctx, id, req.Overlap, actor(c))
	if err != nil {
		return scheduleError(id, "the trigger", err)
	}
	return c.Status(fiber.StatusAccepted).JSON(viewSchedule(v))
}

// backfillSchedule asks for the runs of a past range. 202, with how many
// fires the range holds: the schedules sweep starts them.
func (s *Server) backfillSchedule(c *fiber.Ctx) error {
	// apiv1.BackfillRequest's fields, the times read as strings so that
	// one that does not parse is named (encoding/json's error does not
	// say which field it was).
	var req struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Overlap string `json:"overlap"`
	}
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var from, to time.Time
	for _, f := range []struct {
		name, value string
		t           *time.Time
	}{{"from", req.From, &from}, {"to", req.To, &to}} {
		if f.value == "" {
			continue // the node says that both are needed
		}
		t, err := time.Parse(time.RFC3339, f.value)
		if err != nil {
			return invalidField(f.name, "must be an RFC 3339 time such as 2026-03-31T02:00:00Z, got %q", f.value)
		}
		*f.t = t
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	v, fires, err := s.node.BackfillSchedule(ctx, id, from, to, req.Overlap, actor(c))
	if err != nil {
		return scheduleError(id, "the backfill", err)
	}
	return c.Status(fiber.StatusAccepted).JSON(apiv1.BackfillResult{Fires: fires, Schedule: viewSchedule(v)})
}

// scheduleEvents answers a page of a schedule's record, oldest first;
// next_cursor is the seq to pass as after.
func (s *Server) scheduleEvents(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	afterSeq, err := afterParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	evs, err := s.node.ScheduleEvents(ctx, id, afterSeq, limit)
	if err != nil {
		return scheduleError(id, "the request", err)
	}
	items := make([]apiv1.ScheduleEvent, len(evs))
	for i, e := range evs {
		items[i] = apiv1.ScheduleEvent{Seq: e.Seq, Time: e.Time, Type: apiv1.ScheduleEventType(e.Type), Actor: e.Actor, Data: e.Data}
	}
	next := ""
	if len(evs) == limit {
		next = strconv.FormatUint(evs[len(evs)-1].Seq, 10)
	}
	return c.JSON(newPage(items, next))
}
