package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

func viewParent(p *weft.ParentRef) *apiv1.Parent {
	if p == nil {
		return nil
	}
	return &apiv1.Parent{InstanceID: p.InstanceID, StepID: p.StepID}
}

func viewInstance(in *weft.Instance) apiv1.Instance {
	v := apiv1.Instance{
		ID: in.ID, Workflow: in.Workflow, Version: in.Version, Status: apiv1.Status(in.Status),
		Input: in.Input, Output: in.Output, Vars: in.Vars, Error: viewFailure(in.Error),
		Plugins: in.Plugins, Parent: viewParent(in.Parent), CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
		DeleteAfter: in.DeleteAfter,
	}
	v.Priority, v.FairnessKey, v.FairnessWeight = viewOrder(in.Order)
	v.Concurrency = viewConcurrency(in.Concurrency)
	v.Search = viewSearch(in.Search)
	v.Hold = viewHold(in.Hold)
	v.TraceID = viewTraceID(in.Trace)
	if in.Status == weft.StatusCancelled && in.Error == nil {
		// Cancelled before the engine kept the reason as the error (or
		// imported so): the answer says so all the same, so that every
		// instance that ended without completing has an error.
		v.Error = &apiv1.Failure{Code: string(weft.StatusCancelled), Message: "cancelled; the reason, if one was given, is in the instance's history"}
	}
	return v
}

// viewTraceID is the trace id of an instance's trace as answered: its
// span's trace id when the trace is sampled, "" when it has no trace
// (created with tracing off) or an unsampled one, whose id would lead an
// operator to a trace no collector has. A traceparent that does not
// parse (written by a later version, or damaged) shows none either.
func viewTraceID(tr *weft.Trace) string {
	if tr == nil || tr.Span == "" {
		return ""
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": tr.Span})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// viewOrder is an instance's order as answered: its priority always (the
// default for 0, which an instance created before priorities, or whose
// start and definition set none, keeps), and its fairness key with its
// weight only when it has a key of its own ("" is the shared lane, whose
// weight says nothing to a reader).
func viewOrder(o weft.Order) (priority int, key string, weight int) {
	priority = o.Priority
	if priority == 0 {
		priority = weft.DefaultPriority
	}
	if o.FairnessKey == "" {
		return priority, "", 0
	}
	weight = o.FairnessWeight
	if weight == 0 {
		weight = weft.DefaultFairnessWeight
	}
	return priority, o.FairnessKey, weight
}

// checkPriority is the problem with a start's or an event's priority, ""
// when there is none: 0 (the definition's) or one from
// weft.HighestPriority to weft.LowestPriority.
func checkPriority(p int) string {
	if p == 0 || p >= weft.HighestPriority && p <= weft.LowestPriority {
		return ""
	}
	return fmt.Sprintf("must be from %d (served first) to %d (served last), got %d; leave it out for the workflow's own",
		weft.HighestPriority, weft.LowestPriority, p)
}

func viewFailure(f *weft.Failure) *apiv1.Failure {
	if f == nil {
		return nil
	}
	return &apiv1.Failure{Code: f.Code, Message: f.Message, Details: f.Details, Step: f.Step}
}

// detail is one instance as answered alone: withWaiting's view, and its
// pause while it is paused (read from its state, which lists do not
// read: their instances have none). A state that does not decode is
// logged and shows no pause: the rest of the instance is still answered,
// for an operator to look into it.
func (s *Server) detail(ctx context.Context, in *weft.Instance) (apiv1.Instance, error) {
	v, err := s.withWaiting(ctx, in)
	if err != nil {
		return v, err
	}
	p, held, err := s.node.Paused(in)
	if err != nil {
		s.log.Warn("instance state does not decode; its pause is not shown", "instance", in.ID, "err", err)
		return v, nil
	}
	v.Paused = viewPaused(p, held)
	return v, nil
}

// viewPaused is a pause as answered; nil for none.
func viewPaused(p *weft.Pause, held int) *apiv1.Paused {
	if p == nil {
		return nil
	}
	return &apiv1.Paused{Since: p.Since, Actor: p.Op.Actor, Reason: p.Op.Reason, Batch: p.Op.Batch, Held: held}
}

// withWaiting is viewInstance with waiting_on, read from the store: what
// a list shows of a suspended instance. A finished instance waits on
// nothing, whatever records it left.
func (s *Server) withWaiting(ctx context.Context, in *weft.Instance) (apiv1.Instance, error) {
	v := viewInstance(in)
	if in.Status.Terminal() {
		v.WaitingOn = &apiv1.WaitingOn{Bookmarks: []apiv1.Bookmark{}, Timers: []apiv1.Timer{}}
		return v, nil
	}
	bms, tms, err := s.node.WaitingOn(ctx, in.ID)
	if err != nil {
		return v, err
	}
	w := &apiv1.WaitingOn{Bookmarks: make([]apiv1.Bookmark, 0, len(bms)), Timers: make([]apiv1.Timer, 0, len(tms))}
	for _, b := range bms {
		w.Bookmarks = append(w.Bookmarks, apiv1.Bookmark{Event: b.Event, Key: b.Key, StepPath: b.StepPath})
	}
	for _, t := range tms {
		w.Timers = append(w.Timers, apiv1.Timer{ID: t.ID, Due: t.Due, Kind: apiv1.TimerKind(t.Kind)})
	}
	v.WaitingOn = w
	return v, nil
}

func (s *Server) startInstance(c *fiber.Ctx) error {
	w, err := waitParams(c)
	if err != nil {
		return err
	}
	var req apiv1.StartRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.ID != "" {
		if err := weft.CheckID("id", req.ID); err != nil {
			return invalidField("id", "%s", clean(err))
		}
	}
	if msg := checkPriority(req.Priority); msg != "" {
		return invalidField("priority", "%s", msg)
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name := param(c, "name")
	// The engine decides, atomically, whether this start created the
	// instance: of two concurrent starts with one id, one answers 201. A
	// wait watches from before the instance is queued. Only StartWatched
	// takes a start's options (node.Start takes an id alone), so a start
	// without a wait takes it too, and drops the watch at once.
	inst, isNew, watch, err := s.node.StartWatched(ctx, name, req.Input, weft.StartOptions{ID: req.ID, Priority: req.Priority})
	switch {
	case watch != nil && w.d > 0:
		w.watch = watch
		defer watch.Stop()
	case watch != nil:
		watch.Stop()
	}
	switch {
	case errors.Is(err, weft.ErrNoSuchWorkflow):
		return notFoundf("no workflow %q", name)
	case errors.Is(err, weft.ErrIDInUse):
		return conflictf("%s", clean(err))
	case errors.Is(err, weft.ErrNotFound):
		// The workflow is saved: what is missing is a plugin it uses.
		return conflictf("cannot start workflow %q: %s", name, clean(err))
	}
	if err != nil {
		return err
	}
	return s.answerInstance(c, inst, w, func(v apiv1.Instance) error { return created(c, isNew, v) })
}

// answerInstance answers with inst, after waiting for it as w asks (not at
// all when w.d is 0). Its view is read within a request timeout of its
// own: the wait may have outlasted the handler's.
func (s *Server) answerInstance(c *fiber.Ctx, inst *weft.Instance, w waitFor, answer func(apiv1.Instance) error) error {
	if w.d > 0 {
		now, gone, err := s.await(c, inst, w)
		if err != nil {
			return err
		}
		if gone {
			return hungUp(c)
		}
		inst = now
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	v, err := s.detail(ctx, inst)
	if err != nil {
		return err
	}
	return answer(v)
}

// waitFor is what ?wait= and ?until= ask for: how long to wait at most
// (0: not at all), and whether a suspension ends the wait too.
type waitFor struct {
	d         time.Duration
	suspended bool
	// watch, when set, was registered before the instance was queued
	// (a start's): the wait uses it instead of a first read.
	watch node.Watch
}

// waitParams reads ?wait= (a duration up to apiv1.MaxWait) and ?until= (ended,
// the default, or suspended; only with wait, which it qualifies).
func waitParams(c *fiber.Ctx) (waitFor, error) {
	var w waitFor
	raw := c.Query("wait")
	if raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 || d > apiv1.MaxWait {
			return w, invalidField("wait", "must be a duration from 0s to %s, such as 10s, got %q", apiv1.MaxWait, raw)
		}
		w.d = d
	}
	switch u := apiv1.Until(c.Query("until")); u {
	case "", apiv1.UntilEnded:
	case apiv1.UntilSuspended:
		w.suspended = true
	default:
		return w, invalidField("until", "must be %s or %s, got %q", apiv1.UntilEnded, apiv1.UntilSuspended, u)
	}
	if c.Query("until") != "" && raw == "" {
		return w, invalidField("until", "says what a wait waits for and needs wait, such as ?wait=10s&until=suspended")
	}
	return w, nil
}

// statusHungUp is the status logged (and counted) for a request whose
// client hung up during its wait; nobody reads the answer. The number is
// nginx's "client closed request".
const statusHungUp = 499

// hungUp ends a request whose client is gone, with nothing to send.
func hungUp(c *fiber.Ctx) error {
	return c.SendStatus(statusHungUp)
}

// await waits up to w.d for the instance to end (completed, failed or
// cancelled), or with w.suspended to suspend or end, and returns it as it
// is then. A suspended instance may be only sleeping through a delay or a
// retry's backoff, so a wait for the outcome must not stop there.
//
// The wait also ends when Shutdown starts, so that the client gets an
// answer at once instead of holding the shutdown, and when the client
// hangs up (gone is true; there is no one to answer). The engine's wait
// learns of the instance's changes from this node's executions and, in a
// cluster, from the other nodes' notifications. An instance deleted during
// the wait is a 404.
func (s *Server) await(c *fiber.Ctx, inst *weft.Instance, w waitFor) (now *weft.Instance, gone bool, err error) {
	ctx, hangUp, done := s.holdRequest(c, w.d)
	defer done()
	wait := func(ctx context.Context) (*weft.Instance, error) { return s.node.WaitFinished(ctx, inst.ID) }
	switch {
	case w.watch != nil && w.suspended:
		wait = w.watch.Wait
	case w.watch != nil:
		wait = w.watch.WaitFinished
	case w.suspended:
		wait = func(ctx context.Context) (*weft.Instance, error) { return s.node.Wait(ctx, inst.ID) }
	}
	got, err := wait(ctx)
	if err == nil {
		return got, false, nil
	}
	select {
	case <-hangUp:
		return inst, true, nil
	default:
	}
	// The wait ended first: answer with the instance as it is now.
	rctx, rcancel := requestContext(c, s.cfg.RequestTimeout)
	defer rcancel()
	now, err = s.node.Instance(rctx, inst.ID)
	switch {
	case err == nil:
		return now, false, nil
	case errors.Is(err, weft.ErrNotFound):
		return nil, false, notFoundf("instance %q was deleted during the wait", inst.ID)
	case got != nil:
		return got, false, nil
	}
	return inst, false, nil
}

func (s *Server) getInstance(c *fiber.Ctx) error {
	w, err := waitParams(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	in, err := s.instance(ctx, param(c, "id"))
	if err != nil {
		return err
	}
	return s.answerInstance(c, in, w, func(v apiv1.Instance) error { return c.JSON(v) })
}

// instance reads an instance, answering 404 when there is none.
func (s *Server) instance(ctx context.Context, id string) (*weft.Instance, error) {
	in, err := s.node.Instance(ctx, id)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, notFoundf("no instance %q", id)
	}
	return in, err
}

func (s *Server) listInstances(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	f := weft.InstanceFilter{Workflow: c.Query("workflow"), Status: weft.Status(c.Query("status")), Limit: limit, Cursor: c.Query("cursor"), NewestFirst: true}
	if f.Status != "" && !f.Status.Valid() {
		return invalidField("status", "must be one of %s, got %q", statusList(), f.Status)
	}
	switch o := c.Query("order"); o {
	case "", "newest":
	case "oldest":
		f.NewestFirst = false
	default:
		return invalidField("order", "must be newest or oldest, got %q", o)
	}
	if f.CreatedFrom, err = timeParam(c, "created_after"); err != nil {
		return err
	}
	if f.CreatedBefore, err = timeParam(c, "created_before"); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	var items []weft.Instance
	var next string
	id, event, key := c.Query("id"), c.Query("event"), c.Query("key")
	q := c.Query("q")
	switch {
	case q != "" && (id != "" || event != "" || key != "" || c.Query("plugin") != "" || c.Query("plugin_version") != ""):
		return invalidField("q", "takes no id, event, key or plugin: a query filters the list of instances (write id = \"…\" in it for one)")
	case q != "":
		items, next, err = s.searchInstances(ctx, q, f)
	case id != "" && (event != "" || key != "" || f.Cursor != "" || c.Query("plugin") != ""):
		return invalidField("id", "takes no event, key, plugin or cursor: it names one instance")
	case (event != "" || key != "") && c.Query("plugin") != "":
		return invalidField("plugin", "takes no event or key")
	case id != "":
		items, err = s.oneInstance(ctx, id, f)
	case event != "" || key != "":
		if f.Cursor != "" {
			return invalidField("cursor", "lists by event and key are not paged")
		}
		events := []string{event}
		if event == "" {
			// A key alone: under every event a saved workflow waits for.
			if events, err = s.node.WaitedEvents(ctx); err != nil {
				return err
			}
		}
		items, err = s.waitingFor(ctx, events, key, f)
	case c.Query("plugin") != "":
		items, next, err = s.pinning(ctx, c.Query("plugin"), c.Query("plugin_version"), f)
	case c.Query("plugin_version") != "":
		return invalidField("plugin_version", "needs plugin: a version is a plugin's")
	default:
		items, next, err = s.node.Instances(ctx, f)
	}
	if err != nil {
		return err
	}
	views := make([]apiv1.Instance, 0, len(items))
	for i := range items {
		// What a suspended instance waits on is what a person listing
		// instances asks next; two reads each, for a page of at most
		// limit instances.
		if items[i].Status == weft.StatusSuspended {
			v, err := s.withWaiting(ctx, &items[i])
			if err != nil {
				return err
			}
			views = append(views, v)
			continue
		}
		views = append(views, viewInstance(&items[i]))
	}
	return c.JSON(newPage(views, next))
}

// statusList names the statuses, for a message about one that is not.
func statusList() string {
	names := make([]string, 0, len(weft.Statuses()))
	for _, st := range weft.Statuses() {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}

// timeParam reads an RFC 3339 time from the query; absent is zero.
func timeParam(c *fiber.Ctx, name string) (time.Time, error) {
	v := c.Query(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, invalidField(name, "must be an RFC 3339 time such as 2026-11-25T10:00:00Z, got %q", v)
	}
	return t, nil
}

// matches reports whether in passes f's workflow, status and time range.
func matches(in *weft.Instance, f weft.InstanceFilter) bool {
	return (f.Workflow == "" || in.Workflow == f.Workflow) &&
		(f.Status == "" || in.Status == f.Status) &&
		(f.CreatedFrom.IsZero() || !in.CreatedAt.Before(f.CreatedFrom)) &&
		(f.CreatedBefore.IsZero() || in.CreatedAt.Before(f.CreatedBefore))
}

// oneInstance is the list ?id= answers: the instance, when it passes f.
func (s *Server) oneInstance(ctx context.Context, id string, f weft.InstanceFilter) ([]weft.Instance, error) {
	in, err := s.node.Instance(ctx, id)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, nil
	}
	if err != nil || !matches(in, f) {
		return nil, err
	}
	in.State = nil
	return []weft.Instance{*in}, nil
}

// waitingFor is the list ?event=&key= answers: the instances waiting for
// that event with that key (an empty key is a key too), that pass f, in
// f's order, at most f.Limit.
func (s *Server) waitingFor(ctx context.Context, events []string, key string, f weft.InstanceFilter) ([]weft.Instance, error) {
	var bms []weft.Bookmark
	for _, event := range events {
		found, err := s.node.FindBookmarks(ctx, event, key)
		if err != nil {
			return nil, err
		}
		bms = append(bms, found...)
	}
	seen := map[string]bool{}
	var items []weft.Instance
	for _, b := range bms {
		if seen[b.InstanceID] {
			continue
		}
		seen[b.InstanceID] = true
		one, err := s.oneInstance(ctx, b.InstanceID, f)
		if err != nil {
			return nil, err
		}
		items = append(items, one...)
	}
	slices.SortFunc(items, func(a, b weft.Instance) int {
		c := a.CreatedAt.Compare(b.CreatedAt)
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if f.NewestFirst {
			return -c
		}
		return c
	})
	return items[:min(len(items), weft.ClampLimit(f.Limit))], nil
}

// countInstances answers GET /v1/counts/instances.
func (s *Server) countInstances(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	counts, err := s.node.CountInstances(ctx, c.Query("workflow"))
	if err != nil {
		return err
	}
	v := apiv1.Counts{ByStatus: map[apiv1.Status]int{}}
	for _, st := range weft.Statuses() {
		v.ByStatus[apiv1.Status(st)] = counts[st]
		v.Total += counts[st]
	}
	return c.JSON(v)
}

func (s *Server) history(c *fiber.Ctx) error {
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
	evs, err := s.node.History(ctx, id, afterSeq, limit)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no instance %q", id)
	}
	if err != nil {
		return err
	}
	next := ""
	if len(evs) == limit {
		next = strconv.FormatUint(evs[len(evs)-1].Seq, 10)
	}
	return c.JSON(newPage(viewHistory(evs), next))
}

// viewHistory is a page of history entries as answered.
func viewHistory(evs []weft.HistoryEntry) []apiv1.HistoryEntry {
	out := make([]apiv1.HistoryEntry, len(evs))
	for i, e := range evs {
		out[i] = apiv1.HistoryEntry{Seq: e.Seq, Time: e.Time, Type: apiv1.HistoryType(e.Type), StepPath: e.StepPath,
			Attempt: e.Attempt, Node: e.Node, Actor: e.Actor, Data: e.Data}
	}
	return out
}

func (s *Server) cancelInstance(c *fiber.Ctx) error {
	var req apiv1.CancelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "cancelled through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	in, err := s.node.Cancel(ctx, id, operation(c, req.Reason))
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return notFoundf("no instance %q", id)
	case errors.Is(err, weft.ErrFinished):
		return conflictf("%s", err)
	case err != nil:
		return err
	}
	v, err := s.detail(ctx, in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(v)
}

// retryInstance makes a failed instance continue from the step that
// failed. 202: like a cancel, the retry is applied when the instance next
// runs.
func (s *Server) retryInstance(c *fiber.Ctx) error {
	var req apiv1.RetryRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "retried through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	err := s.node.Retry(ctx, id, operation(c, req.Reason))
	switch {
	case errors.Is(err, weft.ErrNotFailed):
		return conflictf("instance %q cannot be retried: only a failed instance can (%s)", id, clean(err))
	case errors.Is(err, weft.ErrNotRetryable):
		return conflictf("instance %q cannot be retried: it failed before its first step or after its last, and would fail the same way (%s)", id, clean(err))
	case errors.Is(err, weft.ErrNotFound):
		return conflictf("%s", clean(err))
	case err != nil:
		return err
	}
	return s.accepted(ctx, c, id)
}

// accepted answers 202 with instance id as it is now: an action sent to
// its inbox (a retry, a reset) applies when it next runs.
func (s *Server) accepted(ctx context.Context, c *fiber.Ctx, id string) error {
	in, err := s.instance(ctx, id)
	if err != nil {
		return err
	}
	v, err := s.detail(ctx, in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(v)
}

// pauseInstance pauses an instance (docs/operations.md, "Pause and
// resume"). 202: like a cancel, the pause is applied when the instance
// next runs (at once when it runs here); the answer shows the instance as
// it was, with its pause when it was paused already.
func (s *Server) pauseInstance(c *fiber.Ctx) error {
	var req apiv1.InstancePauseRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "paused through the API"
	}
	return s.pauseOrResume(c, req.Reason, s.node.Pause)
}

// resumeInstance resumes a paused instance: 202 as a pause; 409 when it
// is neither paused nor has a pause on its way.
func (s *Server) resumeInstance(c *fiber.Ctx) error {
	var req apiv1.InstanceResumeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "resumed through the API"
	}
	return s.pauseOrResume(c, req.Reason, s.node.Resume)
}

// pauseOrResume asks act (Node.Pause or Node.Resume) to apply to the
// instance of the path, and answers 202 with the instance as it was.
func (s *Server) pauseOrResume(c *fiber.Ctx, reason string, act func(context.Context, string, weft.Operation) (*weft.Instance, error)) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	in, err := act(ctx, id, operation(c, reason))
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return notFoundf("no instance %q", id)
	case errors.Is(err, weft.ErrFinished):
		return conflictf("%s", err)
	case errors.Is(err, weft.ErrNotPaused):
		if now, err := s.node.Instance(ctx, id); err == nil {
			return conflictf("instance %q is not paused: it is %s", id, now.Status)
		}
		return conflictf("instance %q is not paused", id)
	case err != nil:
		return err
	}
	v, err := s.detail(ctx, in)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(v)
}

// cancelInstances cancels each instance named, as POST
// /v1/instances/{id}/cancel would, and answers what became of each: one
// that fails does not stop the others.
func (s *Server) cancelInstances(c *fiber.Ctx) error {
	var req apiv1.BulkCancelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case len(req.IDs) == 0:
		return invalidField("ids", "must name at least one instance")
	case len(req.IDs) > apiv1.MaxBulk:
		return invalidField("ids", "names %d instances; at most %d at once", len(req.IDs), apiv1.MaxBulk)
	}
	for i, id := range req.IDs {
		if err := weft.CheckID(fmt.Sprintf("ids[%d]", i), id); err != nil {
			return invalidField(fmt.Sprintf("ids[%d]", i), "%s", clean(err))
		}
	}
	if req.Reason == "" {
		req.Reason = "cancelled through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	// One operation for all: one request, one actor, one time.
	op := operation(c, req.Reason)
	items := make([]apiv1.BulkOutcome, 0, len(req.IDs))
	for _, id := range req.IDs {
		if ctx.Err() != nil {
			// Out of time: what was done is answered, and the rest is said
			// not to have been tried, so the client can send it again.
			items = append(items, apiv1.BulkOutcome{ID: id, Outcome: apiv1.OutcomeError, Detail: "not tried: the request ran out of time (http.request_timeout)"})
			continue
		}
		items = append(items, s.cancelOne(ctx, c, id, op))
	}
	return c.JSON(newPage(items, ""))
}

// cancelOne cancels one instance of a bulk request. Its error is told as
// the error handler would answer it alone: an internal one is logged
// under the request's id, not shown.
func (s *Server) cancelOne(ctx context.Context, c *fiber.Ctx, id string, op weft.Operation) apiv1.BulkOutcome {
	failed := func(err error) apiv1.BulkOutcome {
		p, internal := problemFor(err)
		if internal {
			s.logger(c).Error("bulk cancel failed", "instance", id, "err", err)
		}
		return apiv1.BulkOutcome{ID: id, Outcome: apiv1.OutcomeError, Detail: p.Detail}
	}
	_, err := s.node.Cancel(ctx, id, op)
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return apiv1.BulkOutcome{ID: id, Outcome: apiv1.OutcomeNotFound, Detail: fmt.Sprintf("no instance %q", id)}
	case errors.Is(err, weft.ErrFinished):
		return apiv1.BulkOutcome{ID: id, Outcome: apiv1.OutcomeFinished, Detail: err.Error()}
	case err != nil:
		return failed(err)
	}
	return apiv1.BulkOutcome{ID: id, Outcome: apiv1.OutcomeCancelled}
}

func (s *Server) deleteInstance(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	// The request has no body: the reason is the API's, as a cancel's
	// default is.
	err := s.node.Delete(ctx, id, operation(c, "deleted through the API"))
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no instance %q", id)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (s *Server) exportState(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	st, err := s.node.Export(ctx, id)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no instance %q", id)
	}
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (s *Server) importState(c *fiber.Ctx) error {
	if err := requireType(c, false, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	replace := false
	switch r := c.Query("replace"); r {
	case "", "false":
	case "true":
		replace = true
	default:
		return invalidField("replace", "must be true or false, got %q", r)
	}
	var st weft.Snapshot
	if err := decodeJSON(c, &st); err != nil {
		return err
	}
	// The URL's id is the instance written: the state's own, or another,
	// which makes a copy of the exported instance (engine.Import).
	id := param(c, "id")
	var errs []apiv1.FieldError
	if st.Format != weft.SnapshotFormat {
		errs = append(errs, apiv1.FieldError{Path: "format", Message: fmt.Sprintf("this host reads state format %d, got %d", weft.SnapshotFormat, st.Format)})
	}
	if st.Instance.Workflow == "" {
		errs = append(errs, apiv1.FieldError{Path: "instance.workflow", Message: "must not be empty"})
	}
	if !st.Instance.Status.Valid() {
		errs = append(errs, apiv1.FieldError{Path: "instance.status", Message: fmt.Sprintf("must be one of %s, got %q", statusList(), st.Instance.Status)})
	}
	if in := st.Instance; !in.DeleteAfter.IsZero() && in.Status.Valid() && !in.Status.Terminal() {
		errs = append(errs, apiv1.FieldError{Path: "instance.delete_after", Message: fmt.Sprintf("is set on a %s instance; only a finished one is deleted after a time", in.Status)})
	}
	if len(errs) > 0 {
		return unprocessable("the state cannot be imported", errs...)
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	in, isNew, err := s.node.Import(ctx, &st, id, replace, operation(c, ""))
	switch {
	case errors.Is(err, weft.ErrInstanceExists):
		return problemf(fiber.StatusConflict, "instance-exists",
			"instance %q exists; import with ?replace=true to replace it, or under another id", id)
	case errors.Is(err, weft.ErrSlotsTaken):
		return problemf(fiber.StatusConflict, "slots-taken", "%s; import it when one is free", clean(err))
	case errors.Is(err, weft.ErrChildInFlight):
		return unprocessable("the state cannot be imported under another id", apiv1.FieldError{Path: "runner", Message: clean(err)})
	case errors.Is(err, weft.ErrNotFound):
		return unprocessable("the state refers to something this host does not have",
			apiv1.FieldError{Path: "instance", Message: clean(err)})
	case errors.Is(err, weft.ErrInvalid):
		return unprocessable("the state is malformed", apiv1.FieldError{Path: "$", Message: clean(err)})
	case err != nil:
		return err
	}
	v, err := s.detail(ctx, in)
	if err != nil {
		return err
	}
	return created(c, isNew, v)
}

// afterParam reads ?after= (or ?cursor=, the name every other list's
// next page has), the sequence number a page of history entries or
// schedule events starts after; 0 when absent.
func afterParam(c *fiber.Ctx) (uint64, error) {
	after := c.Query("after", c.Query("cursor"))
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		return 0, invalidField("after", "must be an event sequence number, got %q", after)
	}
	return n, nil
}
