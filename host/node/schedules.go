package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/schedule"
)

// Schedules (docs/schedules.md): the node checks and stores them through
// the engine, whose schedules sweep fires them. actor names who makes a
// change (an API token's name, "schedules_file"), for the schedule's
// record.

// upcoming is how many next fire times a ScheduleView lists.
const upcoming = 10

// SaveSchedule checks a schedule document (YAML or JSON) and stores it:
// created when its id is new, changed when its document is. When id is
// not empty the document must be that schedule's. Problems come back
// together as a *weft.ScheduleError with their paths.
func (n *Node) SaveSchedule(ctx context.Context, source []byte, id, actor string) (v *weft.ScheduleView, created, changed bool, err error) {
	s, created, changed, err := n.engine.SaveSchedule(ctx, source, id, actor)
	if err != nil {
		return nil, false, false, err
	}
	v, err = n.view(ctx, s)
	return v, created, changed, err
}

// Schedule returns a schedule as it is now, or an error matching
// weft.ErrNotFound.
func (n *Node) Schedule(ctx context.Context, id string) (*weft.ScheduleView, error) {
	s, err := n.store.GetSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return n.view(ctx, s)
}

// Schedules returns a page of schedules ordered by id, and the cursor of
// the next page.
func (n *Node) Schedules(ctx context.Context, cursor string, limit int) ([]weft.ScheduleView, string, error) {
	page, next, err := n.store.ListSchedules(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]weft.ScheduleView, 0, len(page))
	for i := range page {
		v, err := n.view(ctx, &page[i])
		if err != nil {
			return nil, "", err
		}
		out = append(out, *v)
	}
	return out, next, nil
}

// DeleteSchedule removes a schedule and its record; its runs go on.
func (n *Node) DeleteSchedule(ctx context.Context, id string) error {
	return n.engine.DeleteSchedule(ctx, id)
}

// PauseSchedule pauses a schedule's fires, with a note; pausing a paused
// one changes nothing.
func (n *Node) PauseSchedule(ctx context.Context, id, note, actor string) (*weft.ScheduleView, error) {
	s, err := n.engine.PauseSchedule(ctx, id, note, actor)
	return n.viewOf(ctx, s, err)
}

// UnpauseSchedule resumes a paused schedule from now.
func (n *Node) UnpauseSchedule(ctx context.Context, id, note, actor string) (*weft.ScheduleView, error) {
	s, err := n.engine.UnpauseSchedule(ctx, id, note, actor)
	return n.viewOf(ctx, s, err)
}

// TriggerSchedule asks for a run of the schedule now, under overlap
// (empty: the schedule's policy).
func (n *Node) TriggerSchedule(ctx context.Context, id, overlap, actor string) (*weft.ScheduleView, error) {
	s, err := n.engine.TriggerSchedule(ctx, id, schedule.Overlap(overlap), actor)
	return n.viewOf(ctx, s, err)
}

// BackfillSchedule asks for the runs of the past range from to to (both
// included) under overlap (empty: the schedule's policy), and returns how
// many fires the range holds.
func (n *Node) BackfillSchedule(ctx context.Context, id string, from, to time.Time, overlap, actor string) (*weft.ScheduleView, int, error) {
	s, fires, err := n.engine.BackfillSchedule(ctx, id, from, to, schedule.Overlap(overlap), actor)
	v, err := n.viewOf(ctx, s, err)
	return v, fires, err
}

// ScheduleEvents returns up to limit events of a schedule's record after
// seq afterSeq.
func (n *Node) ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error) {
	return n.store.ScheduleEvents(ctx, id, afterSeq, limit)
}

func (n *Node) viewOf(ctx context.Context, s *weft.Schedule, err error) (*weft.ScheduleView, error) {
	if err != nil {
		return nil, err
	}
	return n.view(ctx, s)
}

// view reads what a stored schedule's state says.
func (n *Node) view(ctx context.Context, s *weft.Schedule) (*weft.ScheduleView, error) {
	doc, err := schedule.ParseDocument(s.Document)
	if err != nil {
		return nil, fmt.Errorf("node: schedule %s: the stored document does not parse: %w", s.ID, err)
	}
	var st schedule.State
	if err := json.Unmarshal(s.State, &st); err != nil {
		return nil, fmt.Errorf("node: schedule %s: the stored state does not decode: %w", s.ID, err)
	}
	v := &weft.ScheduleView{Schedule: *s, Paused: st.Paused, Recent: st.Recent, Runs: st.Runs,
		Waiting: len(st.Buffer), Triggers: len(st.Triggers), Backfills: len(st.Backfills)}
	// The sweep looks at its runs when a decision needs them, or within a
	// minute: the view reads how they are now.
	for _, r := range st.Running {
		inst, err := n.store.GetInstance(ctx, r.InstanceID)
		switch {
		case errors.Is(err, weft.ErrNotFound):
			r.Gone = true
		case err != nil:
			return nil, fmt.Errorf("node: schedule %s: reading run %s: %w", s.ID, r.InstanceID, err)
		default:
			r.Status = inst.Status
		}
		v.Running = append(v.Running, r)
	}
	if !st.Paused && (doc.Policy.MaxRuns == 0 || st.Runs < doc.Policy.MaxRuns) {
		after := n.now()
		if st.Cursor.After(after) {
			after = st.Cursor // a clock that went back
		}
		v.NextFires = doc.Calendar().Upcoming(after, upcoming)
	}
	return v, nil
}
