package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/schedule"
)

// Schedules: the engine keeps them in the store with the scheduler's state
// (internal/schedule.State), and a singleton sweep steps every schedule
// that is due (docs/schedules.md). Every write of a schedule is a
// compare-and-set of its revision, so an operator's change and the sweep
// never lose each other's; a fire's run has an instance id derived from
// the schedule and the fire's nominal time, so a fire that two writers
// both compute starts one instance.

// scheduleWrites bounds the attempts of a read-modify-write of one
// schedule that keeps losing its compare-and-set.
const scheduleWrites = 5

// scheduleDocs caches parsed schedule documents by id, for the sweep:
// a document changes only when an operator changes it.
type scheduleDocs struct {
	mu   sync.Mutex
	docs map[string]cachedDoc
}

type cachedDoc struct {
	raw string
	doc *schedule.Document
}

// get returns the parsed document of a stored schedule.
func (c *scheduleDocs) get(s *weft.Schedule) (*schedule.Document, error) {
	c.mu.Lock()
	if d, ok := c.docs[s.ID]; ok && d.raw == string(s.Document) {
		c.mu.Unlock()
		return d.doc, nil
	}
	c.mu.Unlock()
	doc, err := schedule.ParseDocument(s.Document)
	if err != nil {
		return nil, fmt.Errorf("engine: schedule %s: the stored document does not parse: %w", s.ID, err)
	}
	c.mu.Lock()
	if c.docs == nil {
		c.docs = map[string]cachedDoc{}
	}
	c.docs[s.ID] = cachedDoc{raw: string(s.Document), doc: doc}
	c.mu.Unlock()
	return doc, nil
}

// forget drops a deleted schedule's document.
func (c *scheduleDocs) forget(id string) {
	c.mu.Lock()
	delete(c.docs, id)
	c.mu.Unlock()
}

// scheduleState decodes a stored schedule's state.
func scheduleState(s *weft.Schedule) (schedule.State, error) {
	var st schedule.State
	if err := json.Unmarshal(s.State, &st); err != nil {
		return st, fmt.Errorf("engine: schedule %s: the stored state does not decode: %w", s.ID, err)
	}
	return st, nil
}

// scheduleEvent builds an event with data.
func scheduleEvent(typ weft.ScheduleEventType, actor string, data any) (weft.ScheduleEvent, error) {
	ev := weft.ScheduleEvent{Type: typ, Actor: actor}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return ev, fmt.Errorf("engine: %s event: %w", typ, err)
		}
		ev.Data = b
	}
	return ev, nil
}

// SaveSchedule checks a schedule document and stores it (when id is not
// empty, the document must be that schedule's): a new schedule
// starts from now (no fire before it runs); a changed one keeps its
// state (its cursor, runs and pause) under the new document. changed is
// false when the stored document is the same. Problems come back as a
// *weft.ScheduleError (matching weft.ErrInvalid) with their paths: the
// workflow must exist and the spec must fire after now.
func (e *Engine) SaveSchedule(ctx context.Context, source []byte, id, actor string) (s *weft.Schedule, created, changed bool, err error) {
	doc, err := schedule.ParseDocumentAs(source, id)
	if err != nil {
		return nil, false, false, err
	}
	now := e.cfg.Now()
	var problems []weft.Problem
	if _, err := e.store.GetDefinition(ctx, doc.Workflow, 0); errors.Is(err, weft.ErrNotFound) {
		problems = append(problems, weft.Problem{Path: "workflow", Message: fmt.Sprintf("no workflow named %q is saved", doc.Workflow)})
	} else if err != nil {
		return nil, false, false, fmt.Errorf("engine: schedule %s: reading workflow %s: %w", doc.ID, doc.Workflow, err)
	}
	if _, ok := doc.Calendar().Next(now); !ok {
		problems = append(problems, weft.Problem{Path: "spec", Message: "names no time after now: the schedule would never fire (see spec.end)"})
	}
	if len(problems) > 0 {
		return nil, false, false, &weft.ScheduleError{ID: doc.ID, Problems: problems}
	}
	canon, err := doc.Canonical()
	if err != nil {
		return nil, false, false, err
	}
	for range scheduleWrites {
		old, err := e.store.GetSchedule(ctx, doc.ID)
		if errors.Is(err, weft.ErrNotFound) {
			state, err := json.Marshal(schedule.State{Cursor: now})
			if err != nil {
				return nil, false, false, fmt.Errorf("engine: schedule %s: %w", doc.ID, err)
			}
			ev, err := scheduleEvent(weft.ScheduleCreated, actor, nil)
			if err != nil {
				return nil, false, false, err
			}
			s, err := e.store.CreateSchedule(ctx, &weft.Schedule{ID: doc.ID, Document: canon, State: state, Wake: now}, []weft.ScheduleEvent{ev})
			if errors.Is(err, weft.ErrExists) {
				continue // created meanwhile: update it
			}
			if err != nil {
				return nil, false, false, fmt.Errorf("engine: creating schedule %s: %w", doc.ID, err)
			}
			return s, true, true, nil
		}
		if err != nil {
			return nil, false, false, fmt.Errorf("engine: reading schedule %s: %w", doc.ID, err)
		}
		if string(old.Document) == string(canon) {
			return old, false, false, nil
		}
		ev, err := scheduleEvent(weft.ScheduleUpdated, actor, nil)
		if err != nil {
			return nil, false, false, err
		}
		old.Document, old.Wake = canon, now // the sweep steps it under the new document
		s, err := e.store.UpdateSchedule(ctx, old, []weft.ScheduleEvent{ev})
		if errors.Is(err, weft.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, false, false, fmt.Errorf("engine: updating schedule %s: %w", doc.ID, err)
		}
		e.schedules.forget(doc.ID)
		return s, false, true, nil
	}
	return nil, false, false, fmt.Errorf("engine: schedule %s: %w: written by others %d times in a row", doc.ID, weft.ErrConflict, scheduleWrites)
}

// DeleteSchedule removes a schedule and its events; the runs it started
// go on. ErrNotFound when there is none.
func (e *Engine) DeleteSchedule(ctx context.Context, id string) error {
	if err := e.store.DeleteSchedule(ctx, id); err != nil {
		return fmt.Errorf("engine: deleting schedule %s: %w", id, err)
	}
	e.schedules.forget(id)
	return nil
}

// changeSchedule is the read-modify-write of an operator's change: f
// changes the state and returns the events to record; the schedule is
// then due at once, so that the sweep acts on the change.
func (e *Engine) changeSchedule(ctx context.Context, id string, f func(doc *schedule.Document, s *weft.Schedule, st schedule.State) (schedule.State, []weft.ScheduleEvent, error)) (*weft.Schedule, error) {
	for range scheduleWrites {
		s, err := e.store.GetSchedule(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("engine: reading schedule %s: %w", id, err)
		}
		doc, err := e.schedules.get(s)
		if err != nil {
			return nil, err
		}
		st, err := scheduleState(s)
		if err != nil {
			return nil, err
		}
		st, events, err := f(doc, s, st)
		if err != nil {
			return nil, err
		}
		if s.State, err = json.Marshal(st); err != nil {
			return nil, fmt.Errorf("engine: schedule %s: %w", id, err)
		}
		s.Wake = e.cfg.Now()
		up, err := e.store.UpdateSchedule(ctx, s, events)
		if errors.Is(err, weft.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("engine: updating schedule %s: %w", id, err)
		}
		return up, nil
	}
	return nil, fmt.Errorf("engine: schedule %s: %w: written by others %d times in a row", id, weft.ErrConflict, scheduleWrites)
}

// skippedEvent records skipped fires, when there are any.
func skippedEvent(events []weft.ScheduleEvent, actor string, skipped []schedule.Skip) ([]weft.ScheduleEvent, error) {
	if len(skipped) == 0 {
		return events, nil
	}
	ev, err := scheduleEvent(weft.ScheduleSkipped, actor, map[string]any{"skipped": skipped})
	if err != nil {
		return nil, err
	}
	return append(events, ev), nil
}

// MaxScheduleNote bounds the note of a pause or an unpause, in bytes: it
// is kept with the schedule and in each event of its record.
const MaxScheduleNote = 1024

// checkNote refuses a note longer than MaxScheduleNote.
func checkNote(id, note string) error {
	if len(note) > MaxScheduleNote {
		return &weft.ScheduleError{ID: id, Problems: []weft.Problem{{Path: "note", Message: fmt.Sprintf("is %d bytes, more than %d", len(note), MaxScheduleNote)}}}
	}
	return nil
}

// PauseSchedule pauses a schedule with a note: its scheduled fires stop
// until UnpauseSchedule (triggers and backfills still run).
func (e *Engine) PauseSchedule(ctx context.Context, id, note, actor string) (*weft.Schedule, error) {
	if err := checkNote(id, note); err != nil {
		return nil, err
	}
	return e.changeSchedule(ctx, id, func(_ *schedule.Document, s *weft.Schedule, st schedule.State) (schedule.State, []weft.ScheduleEvent, error) {
		if st.Paused {
			return st, nil, nil
		}
		st, skipped := schedule.Pause(st)
		s.Note = note
		ev, err := scheduleEvent(weft.SchedulePaused, actor, map[string]string{"note": note})
		if err != nil {
			return st, nil, err
		}
		events, err := skippedEvent([]weft.ScheduleEvent{ev}, actor, skipped)
		return st, events, err
	})
}

// UnpauseSchedule resumes a paused schedule from now: the fires that came
// due while it was paused are recorded as skipped.
func (e *Engine) UnpauseSchedule(ctx context.Context, id, note, actor string) (*weft.Schedule, error) {
	if err := checkNote(id, note); err != nil {
		return nil, err
	}
	return e.changeSchedule(ctx, id, func(doc *schedule.Document, s *weft.Schedule, st schedule.State) (schedule.State, []weft.ScheduleEvent, error) {
		if !st.Paused {
			return st, nil, nil
		}
		st, skipped := schedule.Unpause(doc.Calendar(), id, st, e.cfg.Now())
		s.Note = note
		ev, err := scheduleEvent(weft.ScheduleUnpaused, actor, map[string]string{"note": note})
		if err != nil {
			return st, nil, err
		}
		events, err := skippedEvent([]weft.ScheduleEvent{ev}, actor, skipped)
		return st, events, err
	})
}

// TriggerSchedule asks for a run now, under overlap (empty: the
// schedule's policy); the sweep starts it at once. Its run's id is the
// schedule's and this second's.
func (e *Engine) TriggerSchedule(ctx context.Context, id string, overlap schedule.Overlap, actor string) (*weft.Schedule, error) {
	return e.changeSchedule(ctx, id, func(_ *schedule.Document, _ *weft.Schedule, st schedule.State) (schedule.State, []weft.ScheduleEvent, error) {
		now := e.cfg.Now()
		st, err := schedule.Trigger(st, now, overlap)
		if err != nil {
			return st, nil, err
		}
		ev, err := scheduleEvent(weft.ScheduleTriggered, actor, map[string]any{"nominal": now.Truncate(time.Second), "overlap": overlap})
		return st, []weft.ScheduleEvent{ev}, err
	})
}

// BackfillSchedule asks for the runs of the times the spec names from
// from to to (both included, in the past), under overlap (empty: the
// schedule's policy), and returns how many there are.
func (e *Engine) BackfillSchedule(ctx context.Context, id string, from, to time.Time, overlap schedule.Overlap, actor string) (*weft.Schedule, int, error) {
	var fires int
	s, err := e.changeSchedule(ctx, id, func(doc *schedule.Document, _ *weft.Schedule, st schedule.State) (schedule.State, []weft.ScheduleEvent, error) {
		st, n, err := schedule.AddBackfill(doc.Calendar(), st, from, to, e.cfg.Now(), overlap)
		if err != nil {
			return st, nil, err
		}
		fires = n
		ev, err := scheduleEvent(weft.ScheduleBackfill, actor, map[string]any{"from": from, "to": to, "overlap": overlap, "fires": n})
		return st, []weft.ScheduleEvent{ev}, err
	})
	return s, fires, err
}

// sweepSchedules steps the schedules that are due, several at a time, up
// to a batch per turn and for half the turn's lock TTL at most: the rest
// are due still at the next turn, which this node or another takes. The
// batch's records are read at once, and what became of their runs a chunk
// at a time (stepSchedules).
func (e *Engine) sweepSchedules(ctx context.Context) {
	stopAt := time.Now().Add(singletonTTL(e.cfg.ScheduleInterval) / 2)
	due, err := e.store.DueSchedules(ctx, e.cfg.Now(), scheduleBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("finding due schedules", "err", err)
		}
		return
	}
	e.stepSchedules(ctx, due, stopAt)
}

// stepSchedules steps due, ScheduleSteppers at a time, until stopAt. The
// statuses of the runs are read a chunk of ScheduleSteppers schedules at a
// time, just before the chunk is stepped: a turn that stops at stopAt has
// read those of the schedules it stepped, not of the whole batch.
func (e *Engine) stepSchedules(ctx context.Context, due []weft.Schedule, stopAt time.Time) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, ScheduleSteppers)
	for start := 0; start < len(due); start += ScheduleSteppers {
		if time.Now().After(stopAt) || ctx.Err() != nil {
			break
		}
		chunk := due[start:min(start+ScheduleSteppers, len(due))]
		statuses, err := e.runStatuses(ctx, chunk)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("reading the statuses of schedules' runs", "err", err)
			}
			break
		}
		for i := range chunk {
			if time.Now().After(stopAt) || ctx.Err() != nil {
				break
			}
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-slots; wg.Done() }()
				if err := e.stepSchedule(ctx, &chunk[i], statuses); err != nil && ctx.Err() == nil {
					e.log.Warn("stepping a schedule", "schedule", chunk[i].ID, "err", err)
				}
			}()
		}
	}
	wg.Wait()
}

// runStatuses reads the status of the running runs of schedules, in one
// read; a schedule whose state does not decode is left to its step, which
// reports it.
func (e *Engine) runStatuses(ctx context.Context, scs []weft.Schedule) (map[string]weft.Status, error) {
	var ids []string
	for i := range scs {
		st, err := scheduleState(&scs[i])
		if err != nil {
			continue
		}
		for _, r := range st.Running {
			ids = append(ids, r.InstanceID)
		}
	}
	if len(ids) == 0 {
		return map[string]weft.Status{}, nil
	}
	return e.store.InstanceStatuses(ctx, ids)
}

// scheduleBatch is how many due schedules a sweep's turn steps at most.
const scheduleBatch = 1000

// ScheduleSteppers is how many schedules the sweep steps at once: a step
// waits on the store a few times, and the store serves many callers at
// once (the embedded one commits the writes that wait together in one
// transaction, so more at once is fewer, larger transactions). A Redis
// client's pool needs as many connections on top of the workers' (see
// host/node).
const ScheduleSteppers = 128

// stepSchedule decides (schedule.Step) from a schedule's record s and the
// statuses of its runs, starts and cancels runs, and writes the new state
// with what it did; when another write came first, it reads both again
// and decides again. A start that fails for good (the workflow is gone,
// the input does not evaluate) is recorded and not retried; any other
// error leaves the schedule as it was, due still, for the next turn, whose
// starts of the same fires find the instances this turn created.
func (e *Engine) stepSchedule(ctx context.Context, s *weft.Schedule, statuses map[string]weft.Status) error {
	id := s.ID
	// The runs that tries whose write was lost started: their instances
	// exist, so a later try's state tracks them (schedule.Adopt).
	var started []schedule.Fire
	for attempt := range scheduleWrites {
		if attempt > 0 {
			var err error
			if s, err = e.store.GetSchedule(ctx, id); errors.Is(err, weft.ErrNotFound) {
				return nil // deleted meanwhile
			} else if err != nil {
				return err
			}
			statuses = nil
		}
		doc, err := e.schedules.get(s)
		if err != nil {
			return err
		}
		st, err := scheduleState(s)
		if err != nil {
			return err
		}
		if statuses == nil {
			if statuses, err = e.runStatuses(ctx, []weft.Schedule{*s}); err != nil {
				return err
			}
		}
		for i := range st.Running {
			r := &st.Running[i]
			if status, ok := statuses[r.InstanceID]; ok {
				r.Status = status
			} else {
				r.Gone = true
			}
		}
		now := e.cfg.Now()
		d := schedule.Step(schedule.Input{ID: id, Calendar: doc.Calendar(), Policy: doc.Policy, State: st, Now: now, RunCheck: time.Second})
		events, ran, err := e.applySchedule(ctx, doc, &d)
		if err != nil {
			return err
		}
		if events, err = e.adoptRuns(doc, &d, started, ran, events, now); err != nil {
			return err
		}
		if d.Paused != "" {
			s.Note = d.Paused
		}
		if s.State, err = json.Marshal(d.State); err != nil {
			return fmt.Errorf("engine: schedule %s: %w", id, err)
		}
		s.Wake = d.Wake
		_, err = e.store.UpdateSchedule(ctx, s, events)
		if errors.Is(err, weft.ErrConflict) || errors.Is(err, weft.ErrNotFound) {
			started = append(started, ran...)
			continue // an operator's change came first: decide again
		}
		return err
	}
	return fmt.Errorf("engine: schedule %s: %w: written by others %d times in a row", id, weft.ErrConflict, scheduleWrites)
}

// adoptRuns takes into d.State the runs of started (by earlier tries of
// this step) that this try did not start again (ran), with an event for
// each it had not tracked, and has the schedule stepped again soon, when
// the runs' ends are looked at.
func (e *Engine) adoptRuns(doc *schedule.Document, d *schedule.Decision, started, ran []schedule.Fire, events []weft.ScheduleEvent, now time.Time) ([]weft.ScheduleEvent, error) {
	for _, f := range started {
		if slices.ContainsFunc(ran, func(g schedule.Fire) bool { return g.Kind == f.Kind && g.Nominal.Equal(f.Nominal) }) {
			continue
		}
		var ok bool
		if d.State, ok = schedule.Adopt(doc.Calendar(), doc.ID, d.State, f, now); !ok {
			continue
		}
		ev, err := scheduleEvent(weft.ScheduleRunStarted, weft.ActorScheduler, map[string]any{"instance_id": schedule.InstanceID(doc.ID, f.Nominal), "nominal": f.Nominal, "kind": f.Kind})
		if err != nil {
			return nil, err
		}
		events = append(events, ev)
		if soon := now.Add(time.Second); d.Wake.IsZero() || soon.Before(d.Wake) {
			d.Wake = soon
		}
	}
	return events, nil
}

// applySchedule does what a Step decided and returns the events that
// record it, and the fires whose runs it started. A start that fails for
// good leaves d.State without its run.
func (e *Engine) applySchedule(ctx context.Context, doc *schedule.Document, d *schedule.Decision) ([]weft.ScheduleEvent, []schedule.Fire, error) {
	var (
		events []weft.ScheduleEvent
		ran    []schedule.Fire
	)
	add := func(typ weft.ScheduleEventType, data any) error {
		ev, err := scheduleEvent(typ, weft.ActorScheduler, data)
		events = append(events, ev)
		return err
	}
	for _, r := range d.Ended {
		status := string(r.Status)
		if r.Gone {
			status = "gone"
		}
		if err := add(weft.ScheduleRunEnded, map[string]any{"instance_id": r.InstanceID, "nominal": r.Nominal, "status": status}); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range d.Start {
		runID := schedule.InstanceID(doc.ID, f.Nominal)
		// An input that does not evaluate would not the next time either.
		input, err := doc.RunInput(f)
		if err == nil {
			err = e.startFire(ctx, doc.Workflow, input, runID, doc.Priority)
			if err != nil && !startFailsForGood(err) {
				return nil, nil, fmt.Errorf("engine: schedule %s: starting run %s: %w", doc.ID, runID, err)
			}
		}
		data := map[string]any{"instance_id": runID, "nominal": f.Nominal, "kind": f.Kind}
		if err != nil {
			data["error"] = err.Error()
			d.State.Running = dropRun(d.State.Running, runID)
			e.log.WarnContext(ctx, "a schedule's fire could not start its run", "schedule", doc.ID, "instance", runID, "workflow", doc.Workflow, "err", err)
			e.cfg.Observer.ScheduleFired(string(f.Kind), false, 0)
			if err := add(weft.ScheduleStartFailed, data); err != nil {
				return nil, nil, err
			}
			continue
		}
		var late time.Duration
		if f.Kind == weft.FireScheduled {
			late = e.cfg.Now().Sub(doc.Calendar().Due(doc.ID, f.Nominal))
		}
		e.cfg.Observer.ScheduleFired(string(f.Kind), true, late)
		ran = append(ran, f)
		if err := add(weft.ScheduleRunStarted, data); err != nil {
			return nil, nil, err
		}
	}
	for _, runID := range d.Cancel {
		_, err := e.Cancel(ctx, runID, weft.Operation{Actor: weft.ActorScheduler, Reason: fmt.Sprintf("schedule %s: a later fire replaces it (overlap cancel_other)", doc.ID)})
		if err != nil && !errors.Is(err, weft.ErrFinished) && !errors.Is(err, weft.ErrNotFound) {
			return nil, nil, fmt.Errorf("engine: schedule %s: cancelling run %s: %w", doc.ID, runID, err)
		}
		if err := add(weft.ScheduleRunCancelled, map[string]any{"instance_id": runID}); err != nil {
			return nil, nil, err
		}
	}
	events, err := skippedEvent(events, weft.ActorScheduler, d.Skipped)
	if err != nil {
		return nil, nil, err
	}
	for _, sk := range d.Skipped {
		e.cfg.Observer.SchedulesSkipped(string(sk.Reason), sk.Count)
	}
	if d.Paused != "" {
		if err := add(weft.SchedulePaused, map[string]string{"note": d.Paused}); err != nil {
			return nil, nil, err
		}
	}
	return events, ran, nil
}

// startFailsForGood reports a start error that the same start would meet
// again: the schedule records it instead of retrying.
func startFailsForGood(err error) bool {
	return errors.Is(err, weft.ErrNoSuchWorkflow) || errors.Is(err, weft.ErrIDInUse) || errors.Is(err, weft.ErrInvalid) ||
		errors.Is(err, weft.ErrNotFound)
}

// dropRun removes the run of instance id from runs.
func dropRun(runs []weft.ScheduleRun, id string) []weft.ScheduleRun {
	out := runs[:0]
	for _, r := range runs {
		if r.InstanceID != id {
			out = append(out, r)
		}
	}
	return out
}
