package client

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// PutSchedule saves a schedule document (YAML or JSON source,
// docs/schedules.md) as the schedule id, whose document must name the
// same id. created is false when the schedule existed: it was updated, or
// had that document already. A refused document is an *Error with Status
// 422 listing every problem with its path (spec.cron[1], workflow) and,
// where it has one, its line.
func (c *Client) PutSchedule(ctx context.Context, id string, source []byte) (s *apiv1.Schedule, created bool, err error) {
	ctype := "application/yaml"
	if t := bytes.TrimSpace(source); len(t) > 0 && t[0] == '{' {
		ctype = "application/json"
	}
	s = &apiv1.Schedule{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/schedules/" + seg(id), body: source, ctype: ctype}, s)
	if err != nil {
		return nil, false, err
	}
	return s, status == http.StatusCreated, nil
}

// Schedules lists a page of schedules, by id.
func (c *Client) Schedules(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Schedule], error) {
	var p apiv1.Page[apiv1.Schedule]
	if err := c.getJSON(ctx, "/v1/schedules", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Schedule returns a schedule with its document, its next fire times and
// its runs.
func (c *Client) Schedule(ctx context.Context, id string) (*apiv1.Schedule, error) {
	var s apiv1.Schedule
	if err := c.getJSON(ctx, "/v1/schedules/"+seg(id), nil, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// DeleteSchedule deletes a schedule and its record; the runs it started
// go on.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/schedules/" + seg(id)}, nil)
	return err
}

// PauseSchedule stops a schedule's scheduled fires, with a note saying
// why (empty: none), and returns it paused. Triggers and backfills still
// run.
func (c *Client) PauseSchedule(ctx context.Context, id, note string) (*apiv1.Schedule, error) {
	return c.scheduleAction(ctx, id, "pause", note != "", apiv1.PauseRequest{Note: note})
}

// UnpauseSchedule resumes a paused schedule from now, with a note (empty:
// none); the fires that came due while it was paused do not run.
func (c *Client) UnpauseSchedule(ctx context.Context, id, note string) (*apiv1.Schedule, error) {
	return c.scheduleAction(ctx, id, "unpause", note != "", apiv1.PauseRequest{Note: note})
}

// TriggerSchedule asks for a run of the schedule now, under overlap (skip,
// buffer_one, buffer_all, cancel_other, allow_all; empty: the schedule's
// policy), and returns the schedule with the trigger waiting: the host's
// schedules sweep starts the run, the instance <id>@<the second asked, in
// UTC>, at its next turn. An *Error matching ErrConflict when the schedule
// holds as many triggers as it may; try again once the sweep has taken
// them.
func (c *Client) TriggerSchedule(ctx context.Context, id, overlap string) (*apiv1.Schedule, error) {
	return c.scheduleAction(ctx, id, "trigger", overlap != "", apiv1.TriggerRequest{Overlap: overlap})
}

// BackfillSchedule asks for the runs of the times the schedule's calendar
// names from from to to (both included, in the past), under overlap
// (empty: the schedule's policy), and returns how many fires the range
// holds. The host's schedules sweep starts them; a time whose run exists
// does not run again. A range that is reversed, in the future or holds no
// time is an *Error with Status 422 naming from or to.
func (c *Client) BackfillSchedule(ctx context.Context, id string, from, to time.Time, overlap string) (*apiv1.BackfillResult, error) {
	body, err := jsonBody(apiv1.BackfillRequest{From: from, To: to, Overlap: overlap})
	if err != nil {
		return nil, err
	}
	var res apiv1.BackfillResult
	r := request{method: http.MethodPost, path: "/v1/schedules/" + seg(id) + "/backfill", body: body, ctype: "application/json"}
	if _, err := c.do(ctx, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ScheduleEvents returns up to limit events of a schedule's record (0:
// the server's default) with a seq greater than after, oldest first. The
// page's NextCursor is the seq to pass as after for the next page, empty
// after the last.
func (c *Client) ScheduleEvents(ctx context.Context, id string, after uint64, limit int) (*apiv1.Page[apiv1.ScheduleEvent], error) {
	q := pageQuery(ListOptions{Limit: limit})
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	var p apiv1.Page[apiv1.ScheduleEvent]
	if err := c.getJSON(ctx, "/v1/schedules/"+seg(id)+"/events", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// scheduleAction POSTs to /v1/schedules/{id}/{action}, with req as the
// body when send (none otherwise), and returns the schedule answered.
func (c *Client) scheduleAction(ctx context.Context, id, action string, send bool, req any) (*apiv1.Schedule, error) {
	r := request{method: http.MethodPost, path: "/v1/schedules/" + seg(id) + "/" + action}
	if send {
		body, err := jsonBody(req)
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = body, "application/json"
	}
	var s apiv1.Schedule
	if _, err := c.do(ctx, r, &s); err != nil {
		return nil, err
	}
	return &s, nil
}
