package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// TestClientSchedules walks the schedules' routes through the client: a
// schedule saved, shown, listed, paused, triggered and backfilled, its
// runs and its record, its deletion, and the errors.
func TestClientSchedules(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()

	if _, _, err := c.PutWorkflow(ctx, "tick", []byte("name: tick\nsteps:\n  - { id: at, set: { at: \"${ input.at }\" } }\noutput: \"${ vars.at }\"\n")); err != nil {
		t.Fatal(err)
	}
	doc := []byte("id: minutely\nworkflow: tick\ninput: { at: \"${ schedule.time }\" }\nspec: { every: 1m }\n")
	s, created, err := c.PutSchedule(ctx, "minutely", doc)
	if err != nil || !created || s.ID != "minutely" || s.Workflow != "tick" || len(s.NextFires) != 10 {
		t.Fatalf("PutSchedule: %+v, %v, %v", s, created, err)
	}
	if _, created, err := c.PutSchedule(ctx, "minutely", []byte(`{"id": "minutely", "workflow": "tick", "input": {"at": "${ schedule.time }"}, "spec": {"every": "1m"}}`)); err != nil || created {
		t.Fatalf("PutSchedule again, as JSON: created %v, %v", created, err)
	}
	if got, err := c.Schedule(ctx, "minutely"); err != nil || string(got.Document) != string(s.Document) {
		t.Fatalf("Schedule: %+v, %v", got, err)
	}
	if p, err := c.Schedules(ctx, client.ListOptions{Limit: 10}); err != nil || len(p.Items) != 1 || p.NextCursor != "" {
		t.Fatalf("Schedules: %+v, %v", p, err)
	}

	if s, err = c.PauseSchedule(ctx, "minutely", "quiet hours"); err != nil || !s.Paused || s.Note != "quiet hours" || len(s.NextFires) != 0 {
		t.Fatalf("PauseSchedule: %+v, %v", s, err)
	}
	if s, err = c.UnpauseSchedule(ctx, "minutely", ""); err != nil || s.Paused {
		t.Fatalf("UnpauseSchedule: %+v, %v", s, err)
	}
	// A trigger runs while paused or not; its run is named by its second.
	if s, err = c.TriggerSchedule(ctx, "minutely", "allow_all"); err != nil || s.Triggers != 1 {
		t.Fatalf("TriggerSchedule: %+v, %v", s, err)
	}
	from := time.Now().UTC().Truncate(time.Minute).Add(-2 * time.Minute)
	res, err := c.BackfillSchedule(ctx, "minutely", from, from.Add(time.Minute), "allow_all")
	if err != nil || res.Fires != 2 || res.Schedule.Backfills != 1 {
		t.Fatalf("BackfillSchedule: %+v, %v", res, err)
	}
	for _, nominal := range []time.Time{from, from.Add(time.Minute)} {
		awaitRun(t, c, "minutely@"+nominal.Format(time.RFC3339))
	}

	evs, err := c.ScheduleEvents(ctx, "minutely", 0, 0)
	if err != nil || len(evs.Items) < 5 {
		t.Fatalf("ScheduleEvents: %+v, %v", evs, err)
	}
	// The operator's changes, by the admin token's name, between the
	// sweep's (run_started by scheduler).
	var types []apiv1.ScheduleEventType
	for _, e := range evs.Items {
		if e.Actor == "ci" {
			types = append(types, e.Type)
		}
	}
	if !slices.Equal(types, []apiv1.ScheduleEventType{"created", "paused", "unpaused", "triggered", "backfill"}) {
		t.Fatalf("the events by ci are %v", types)
	}
	page, err := c.ScheduleEvents(ctx, "minutely", 2, 1)
	if err != nil || len(page.Items) != 1 || page.Items[0].Seq != 3 || page.NextCursor != "3" {
		t.Fatalf("ScheduleEvents after 2, 1 of them: %+v, %v", page, err)
	}

	// The errors: a document refused with its problems, an id that is not
	// the document's, a reader who may not, a schedule that is not.
	_, _, err = c.PutSchedule(ctx, "minutely", []byte("id: minutely\nworkflow: nope\nspec: { every: 1m }\n"))
	var e *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Status != 422 || len(e.Errors) != 1 || e.Errors[0].Path != "workflow" {
		t.Fatalf("PutSchedule of an unknown workflow: %v", err)
	}
	if _, _, err := c.PutSchedule(ctx, "other", doc); !errors.As(err, &e) || e.Status != 422 || e.Errors[0].Path != "id" || e.Errors[0].Line != 1 {
		t.Fatalf("PutSchedule under another id: %v", err)
	}
	if _, err := c.BackfillSchedule(ctx, "minutely", from, from.Add(-time.Minute), ""); !errors.As(err, &e) || e.Status != 422 || e.Errors[0].Path != "to" {
		t.Fatalf("BackfillSchedule of a reversed range: %v", err)
	}
	reader := newClient(t, url, readerToken)
	if _, err := reader.PauseSchedule(ctx, "minutely", ""); !errors.Is(err, client.ErrForbidden) {
		t.Fatalf("PauseSchedule as a reader: %v", err)
	}
	if err := c.DeleteSchedule(ctx, "minutely"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Schedule(ctx, "minutely"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Schedule after DeleteSchedule: %v", err)
	}
	if _, err := c.TriggerSchedule(ctx, "minutely", ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("TriggerSchedule after DeleteSchedule: %v", err)
	}
}

// awaitRun waits, up to a minute, for a schedule's run to exist and
// complete: the host's schedules sweep starts it at its next turn.
func awaitRun(t *testing.T, c *client.Client, id string) *apiv1.Instance {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		in, err := c.Await(context.Background(), id, time.Second, apiv1.UntilEnded)
		switch {
		case err == nil && in.Status == apiv1.StatusCompleted:
			return in
		case err != nil && !errors.Is(err, client.ErrNotFound):
			t.Fatalf("the run %s: %v", id, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run %s has not completed after a minute: %+v, %v", id, in, err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
