package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// InstrumentStore returns s decorated to time each of its operations
// (weft_store_operation_duration_seconds{operation}) and count those that
// failed (weft_store_operation_errors_total{operation}). The operation
// label is the method's name in snake case ("commit", "due_timers"): at
// most one value per method of store.Store, whatever the arguments.
//
// The decorator keeps the optional interfaces the engine looks for on its
// store, so that decorating changes no behaviour: when s has BarrierOf
// (redisstore waiting for replicas) the result has it too, timed as
// "barrier_of", and when s has SweepStripes (redisstore.Partitioned) the
// result has it too and its stripes are decorated alike. A decorator that
// dropped them would silently turn off the replicas' barrier and the
// sharing of the sweeps between nodes.
//
// Errors that are answers (store refusals: not found, conflict, fenced,
// exists, in use, invalid, not queued, inbox not empty, catalog changed)
// and cancellations by the caller are not counted as errors: they are
// how a healthy store says no, and counting them would make the error
// rate follow the traffic.
func InstrumentStore(s store.Store, m *Metrics) store.Store {
	t := &timedStore{inner: s, m: m}
	// Every operation's error series exists from the start, at 0, so that
	// the first error is an increase that rate() and increase() see.
	for _, op := range storeOperations {
		m.storeErrors.WithLabelValues(op)
	}
	b, hasBarrier := s.(durabilityBarrier)
	sp, hasStripes := s.(stripeStore)
	switch {
	case hasBarrier && hasStripes:
		return &timedBarrierStripes{timedStore: t, barrier: barrier{t, b}, stripes: stripes{t, sp}}
	case hasBarrier:
		return &timedBarrier{timedStore: t, barrier: barrier{t, b}}
	case hasStripes:
		return &timedStripes{timedStore: t, stripes: stripes{t, sp}}
	default:
		return t
	}
}

// durabilityBarrier is the engine's optional interface of a store whose
// writes can be applied before they are durable.
type durabilityBarrier interface {
	BarrierOf(ctx context.Context, id string) error
}

// stripeStore is the engine's optional interface of a store divided into
// partitions that hands out views of shares of them.
type stripeStore interface {
	SweepStripes() []store.Store
}

// timedStore times every method of store.Store.
type timedStore struct {
	inner store.Store
	m     *Metrics
}

// barrier forwards BarrierOf, timed.
type barrier struct {
	t     *timedStore
	inner durabilityBarrier
}

// BarrierOf implements the engine's durabilityBarrier.
func (b barrier) BarrierOf(ctx context.Context, id string) error {
	start := time.Now()
	err := b.inner.BarrierOf(ctx, id)
	b.t.track("barrier_of", start, err)
	return err
}

// stripes forwards SweepStripes, decorating each stripe.
type stripes struct {
	t     *timedStore
	inner stripeStore
}

// SweepStripes implements the engine's sweepStripes.
func (st stripes) SweepStripes() []store.Store {
	in := st.inner.SweepStripes()
	out := make([]store.Store, len(in))
	for i, s := range in {
		out[i] = InstrumentStore(s, st.t.m)
	}
	return out
}

// timedBarrier is a timedStore with BarrierOf.
type timedBarrier struct {
	*timedStore
	barrier
}

// timedStripes is a timedStore with SweepStripes.
type timedStripes struct {
	*timedStore
	stripes
}

// timedBarrierStripes is a timedStore with BarrierOf and SweepStripes.
type timedBarrierStripes struct {
	*timedStore
	barrier
	stripes
}

// refusals are the store's errors that answer a call rather than fail it.
var refusals = []error{
	weft.ErrNotFound, weft.ErrConflict, weft.ErrFenced, weft.ErrExists, weft.ErrInUse, weft.ErrInvalid,
	store.ErrNotQueued, store.ErrInboxNotEmpty, store.ErrCatalogChanged, context.Canceled,
}

// storeFailed reports whether err is a failure of the store, not an
// answer nor the caller's cancellation.
func storeFailed(err error) bool {
	if err == nil {
		return false
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return false
		}
	}
	return true
}

// track records an operation that started at start and returned err.
func (t *timedStore) track(op string, start time.Time, err error) {
	t.m.storeDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if storeFailed(err) {
		t.m.storeErrors.WithLabelValues(op).Inc()
	}
}

// Commit implements store.Store.
func (t *timedStore) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	start := time.Now()
	r0, err := t.inner.Commit(ctx, c)
	t.track("commit", start, err)
	return r0, err
}

// GetInstance implements store.Store.
func (t *timedStore) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	start := time.Now()
	r0, err := t.inner.GetInstance(ctx, id)
	t.track("get_instance", start, err)
	return r0, err
}

// InstanceStatuses implements store.Store.
func (t *timedStore) InstanceStatuses(ctx context.Context, ids []string) (map[string]weft.Status, error) {
	start := time.Now()
	r0, err := t.inner.InstanceStatuses(ctx, ids)
	t.track("instance_statuses", start, err)
	return r0, err
}

// ListInstances implements store.Store.
func (t *timedStore) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListInstances(ctx, f)
	t.track("list_instances", start, err)
	return r0, r1, err
}

// CountInstances implements store.Store.
func (t *timedStore) CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error) {
	start := time.Now()
	r0, err := t.inner.CountInstances(ctx, workflow)
	t.track("count_instances", start, err)
	return r0, err
}

// DeleteInstance implements store.Store.
func (t *timedStore) DeleteInstance(ctx context.Context, id string, fence uint64) error {
	start := time.Now()
	err := t.inner.DeleteInstance(ctx, id, fence)
	t.track("delete_instance", start, err)
	return err
}

// History implements store.Store.
func (t *timedStore) History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error) {
	start := time.Now()
	r0, err := t.inner.History(ctx, id, afterSeq, limit)
	t.track("history", start, err)
	return r0, err
}

// Deliver implements store.Store.
func (t *timedStore) Deliver(ctx context.Context, s *weft.Stimulus, msgs []weft.Message) (*weft.Stimulus, error) {
	start := time.Now()
	r0, err := t.inner.Deliver(ctx, s, msgs)
	t.track("deliver", start, err)
	return r0, err
}

// Inbox implements store.Store.
func (t *timedStore) Inbox(ctx context.Context, id string) ([]weft.Message, error) {
	start := time.Now()
	r0, err := t.inner.Inbox(ctx, id)
	t.track("inbox", start, err)
	return r0, err
}

// WaitingInboxes implements store.Store.
func (t *timedStore) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	start := time.Now()
	r0, err := t.inner.WaitingInboxes(ctx, before, limit)
	t.track("waiting_inboxes", start, err)
	return r0, err
}

// Bookmarks implements store.Store.
func (t *timedStore) Bookmarks(ctx context.Context, id string) ([]weft.Bookmark, error) {
	start := time.Now()
	r0, err := t.inner.Bookmarks(ctx, id)
	t.track("bookmarks", start, err)
	return r0, err
}

// FindBookmarks implements store.Store.
func (t *timedStore) FindBookmarks(ctx context.Context, event, key string) ([]weft.Bookmark, error) {
	start := time.Now()
	r0, err := t.inner.FindBookmarks(ctx, event, key)
	t.track("find_bookmarks", start, err)
	return r0, err
}

// Timers implements store.Store.
func (t *timedStore) Timers(ctx context.Context, id string) ([]weft.Timer, error) {
	start := time.Now()
	r0, err := t.inner.Timers(ctx, id)
	t.track("timers", start, err)
	return r0, err
}

// DueTimers implements store.Store.
func (t *timedStore) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	start := time.Now()
	r0, err := t.inner.DueTimers(ctx, now, limit)
	t.track("due_timers", start, err)
	return r0, err
}

// RenewLeases implements store.Store.
func (t *timedStore) RenewLeases(ctx context.Context, r store.LeaseRenewal) ([]string, error) {
	start := time.Now()
	r0, err := t.inner.RenewLeases(ctx, r)
	t.track("renew_leases", start, err)
	return r0, err
}

// Heartbeats implements store.Store.
func (t *timedStore) Heartbeats(ctx context.Context, id string) ([]store.Heartbeat, error) {
	start := time.Now()
	r0, err := t.inner.Heartbeats(ctx, id)
	t.track("heartbeats", start, err)
	return r0, err
}

// ExpiredLeases implements store.Store.
func (t *timedStore) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	start := time.Now()
	r0, err := t.inner.ExpiredLeases(ctx, now, limit)
	t.track("expired_leases", start, err)
	return r0, err
}

// ExpiredInstances implements store.Store.
func (t *timedStore) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	start := time.Now()
	r0, err := t.inner.ExpiredInstances(ctx, now, limit)
	t.track("expired_instances", start, err)
	return r0, err
}

// EnqueueStimulus implements store.Store.
func (t *timedStore) EnqueueStimulus(ctx context.Context, s weft.Stimulus) (*weft.Stimulus, error) {
	start := time.Now()
	r0, err := t.inner.EnqueueStimulus(ctx, s)
	t.track("enqueue_stimulus", start, err)
	return r0, err
}

// GetStimulus implements store.Store.
func (t *timedStore) GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error) {
	start := time.Now()
	r0, err := t.inner.GetStimulus(ctx, id)
	t.track("get_stimulus", start, err)
	return r0, err
}

// PendingStimuli implements store.Store.
func (t *timedStore) PendingStimuli(ctx context.Context, name, key string) ([]weft.Stimulus, error) {
	start := time.Now()
	r0, err := t.inner.PendingStimuli(ctx, name, key)
	t.track("pending_stimuli", start, err)
	return r0, err
}

// QueuedStimuli implements store.Store.
func (t *timedStore) QueuedStimuli(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.QueuedStimuli(ctx, cursor, limit)
	t.track("queued_stimuli", start, err)
	return r0, r1, err
}

// ExpireStimuli implements store.Store.
func (t *timedStore) ExpireStimuli(ctx context.Context, now time.Time, limit int) ([]weft.Stimulus, error) {
	start := time.Now()
	r0, err := t.inner.ExpireStimuli(ctx, now, limit)
	t.track("expire_stimuli", start, err)
	return r0, err
}

// DeadLetters implements store.Store.
func (t *timedStore) DeadLetters(ctx context.Context, cursor string, limit int) ([]weft.Stimulus, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.DeadLetters(ctx, cursor, limit)
	t.track("dead_letters", start, err)
	return r0, r1, err
}

// PutDefinition implements store.Store.
func (t *timedStore) PutDefinition(ctx context.Context, name, hash string, source []byte) (int, bool, error) {
	start := time.Now()
	r0, r1, err := t.inner.PutDefinition(ctx, name, hash, source)
	t.track("put_definition", start, err)
	return r0, r1, err
}

// GetDefinition implements store.Store.
func (t *timedStore) GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error) {
	start := time.Now()
	r0, err := t.inner.GetDefinition(ctx, name, version)
	t.track("get_definition", start, err)
	return r0, err
}

// ListDefinitions implements store.Store.
func (t *timedStore) ListDefinitions(ctx context.Context, cursor string, limit int) ([]weft.Definition, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListDefinitions(ctx, cursor, limit)
	t.track("list_definitions", start, err)
	return r0, r1, err
}

// ListDefinitionVersions implements store.Store.
func (t *timedStore) ListDefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error) {
	start := time.Now()
	r0, err := t.inner.ListDefinitionVersions(ctx, name)
	t.track("list_definition_versions", start, err)
	return r0, err
}

// DeleteDefinition implements store.Store.
func (t *timedStore) DeleteDefinition(ctx context.Context, name string) error {
	start := time.Now()
	err := t.inner.DeleteDefinition(ctx, name)
	t.track("delete_definition", start, err)
	return err
}

// RegisterSearchAttributes implements store.Store.
func (t *timedStore) RegisterSearchAttributes(ctx context.Context, workflow string, attrs map[string]weft.SearchType) error {
	start := time.Now()
	err := t.inner.RegisterSearchAttributes(ctx, workflow, attrs)
	t.track("register_search_attributes", start, err)
	return err
}

// SearchAttributes implements store.Store.
func (t *timedStore) SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error) {
	start := time.Now()
	r0, err := t.inner.SearchAttributes(ctx)
	t.track("search_attributes", start, err)
	return r0, err
}

// PutPlugin implements store.Store.
func (t *timedStore) PutPlugin(ctx context.Context, rec weft.PluginRecord) (bool, error) {
	start := time.Now()
	r0, err := t.inner.PutPlugin(ctx, rec)
	t.track("put_plugin", start, err)
	return r0, err
}

// GetPlugin implements store.Store.
func (t *timedStore) GetPlugin(ctx context.Context, name string) (*weft.Plugin, error) {
	start := time.Now()
	r0, err := t.inner.GetPlugin(ctx, name)
	t.track("get_plugin", start, err)
	return r0, err
}

// CurrentPlugin implements store.Store.
func (t *timedStore) CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error) {
	start := time.Now()
	r0, err := t.inner.CurrentPlugin(ctx, name)
	t.track("current_plugin", start, err)
	return r0, err
}

// ResolveStart implements store.Store.
func (t *timedStore) ResolveStart(ctx context.Context, workflow string, uses func(*weft.Definition) ([]string, error), cached bool) (*store.StartCatalog, error) {
	start := time.Now()
	r0, err := t.inner.ResolveStart(ctx, workflow, uses, cached)
	t.track("resolve_start", start, err)
	return r0, err
}

// ListPlugins implements store.Store.
func (t *timedStore) ListPlugins(ctx context.Context, cursor string, limit int) ([]weft.PluginRecord, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListPlugins(ctx, cursor, limit)
	t.track("list_plugins", start, err)
	return r0, r1, err
}

// DeletePlugin implements store.Store.
func (t *timedStore) DeletePlugin(ctx context.Context, name string) error {
	start := time.Now()
	err := t.inner.DeletePlugin(ctx, name)
	t.track("delete_plugin", start, err)
	return err
}

// PutGrants implements store.Store.
func (t *timedStore) PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (uint64, error) {
	start := time.Now()
	r0, err := t.inner.PutGrants(ctx, plugin, doc, ifRevision)
	t.track("put_grants", start, err)
	return r0, err
}

// GetGrants implements store.Store.
func (t *timedStore) GetGrants(ctx context.Context, plugin string) (*weft.Grants, error) {
	start := time.Now()
	r0, err := t.inner.GetGrants(ctx, plugin)
	t.track("get_grants", start, err)
	return r0, err
}

// ListGrants implements store.Store.
func (t *timedStore) ListGrants(ctx context.Context, cursor string, limit int) ([]weft.Grants, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListGrants(ctx, cursor, limit)
	t.track("list_grants", start, err)
	return r0, r1, err
}

// DeleteGrants implements store.Store.
func (t *timedStore) DeleteGrants(ctx context.Context, plugin string) error {
	start := time.Now()
	err := t.inner.DeleteGrants(ctx, plugin)
	t.track("delete_grants", start, err)
	return err
}

// CreateSchedule implements store.Store.
func (t *timedStore) CreateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	start := time.Now()
	r0, err := t.inner.CreateSchedule(ctx, s, events)
	t.track("create_schedule", start, err)
	return r0, err
}

// GetSchedule implements store.Store.
func (t *timedStore) GetSchedule(ctx context.Context, id string) (*weft.Schedule, error) {
	start := time.Now()
	r0, err := t.inner.GetSchedule(ctx, id)
	t.track("get_schedule", start, err)
	return r0, err
}

// ListSchedules implements store.Store.
func (t *timedStore) ListSchedules(ctx context.Context, cursor string, limit int) ([]weft.Schedule, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListSchedules(ctx, cursor, limit)
	t.track("list_schedules", start, err)
	return r0, r1, err
}

// UpdateSchedule implements store.Store.
func (t *timedStore) UpdateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error) {
	start := time.Now()
	r0, err := t.inner.UpdateSchedule(ctx, s, events)
	t.track("update_schedule", start, err)
	return r0, err
}

// DeleteSchedule implements store.Store.
func (t *timedStore) DeleteSchedule(ctx context.Context, id string) error {
	start := time.Now()
	err := t.inner.DeleteSchedule(ctx, id)
	t.track("delete_schedule", start, err)
	return err
}

// DueSchedules implements store.Store.
func (t *timedStore) DueSchedules(ctx context.Context, now time.Time, limit int) ([]weft.Schedule, error) {
	start := time.Now()
	r0, err := t.inner.DueSchedules(ctx, now, limit)
	t.track("due_schedules", start, err)
	return r0, err
}

// ScheduleEvents implements store.Store.
func (t *timedStore) ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error) {
	start := time.Now()
	r0, err := t.inner.ScheduleEvents(ctx, id, afterSeq, limit)
	t.track("schedule_events", start, err)
	return r0, err
}

// CreateBatch implements store.Store.
func (t *timedStore) CreateBatch(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, error) {
	start := time.Now()
	r0, err := t.inner.CreateBatch(ctx, b, ids)
	t.track("create_batch", start, err)
	return r0, err
}

// GetBatch implements store.Store.
func (t *timedStore) GetBatch(ctx context.Context, id string) (*weft.Batch, error) {
	start := time.Now()
	r0, err := t.inner.GetBatch(ctx, id)
	t.track("get_batch", start, err)
	return r0, err
}

// ListBatches implements store.Store.
func (t *timedStore) ListBatches(ctx context.Context, cursor string, limit int) ([]weft.Batch, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.ListBatches(ctx, cursor, limit)
	t.track("list_batches", start, err)
	return r0, r1, err
}

// UpdateBatch implements store.Store.
func (t *timedStore) UpdateBatch(ctx context.Context, b *weft.Batch) (*weft.Batch, error) {
	start := time.Now()
	r0, err := t.inner.UpdateBatch(ctx, b)
	t.track("update_batch", start, err)
	return r0, err
}

// DeleteBatch implements store.Store.
func (t *timedStore) DeleteBatch(ctx context.Context, id string) error {
	start := time.Now()
	err := t.inner.DeleteBatch(ctx, id)
	t.track("delete_batch", start, err)
	return err
}

// DueBatches implements store.Store.
func (t *timedStore) DueBatches(ctx context.Context, now time.Time, limit int) ([]weft.Batch, error) {
	start := time.Now()
	r0, err := t.inner.DueBatches(ctx, now, limit)
	t.track("due_batches", start, err)
	return r0, err
}

// AddBatchItems implements store.Store.
func (t *timedStore) AddBatchItems(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, int, error) {
	start := time.Now()
	r0, r1, err := t.inner.AddBatchItems(ctx, b, ids)
	t.track("add_batch_items", start, err)
	return r0, r1, err
}

// BatchItems implements store.Store.
func (t *timedStore) BatchItems(ctx context.Context, batch string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	start := time.Now()
	r0, err := t.inner.BatchItems(ctx, batch, f)
	t.track("batch_items", start, err)
	return r0, err
}

// ApplyBatchItems implements store.Store.
func (t *timedStore) ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error) {
	start := time.Now()
	r0, err := t.inner.ApplyBatchItems(ctx, b, changes)
	t.track("apply_batch_items", start, err)
	return r0, err
}

// PauseWorkflow implements store.Store.
func (t *timedStore) PauseWorkflow(ctx context.Context, p weft.WorkflowPause) (*weft.WorkflowPause, error) {
	start := time.Now()
	r0, err := t.inner.PauseWorkflow(ctx, p)
	t.track("pause_workflow", start, err)
	return r0, err
}

// UnpauseWorkflow implements store.Store.
func (t *timedStore) UnpauseWorkflow(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	start := time.Now()
	r0, err := t.inner.UnpauseWorkflow(ctx, name)
	t.track("unpause_workflow", start, err)
	return r0, err
}

// WorkflowPauses implements store.Store.
func (t *timedStore) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	start := time.Now()
	r0, err := t.inner.WorkflowPauses(ctx)
	t.track("workflow_pauses", start, err)
	return r0, err
}

// GetWorkflowPause implements store.Store.
func (t *timedStore) GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	start := time.Now()
	r0, err := t.inner.GetWorkflowPause(ctx, name)
	t.track("get_workflow_pause", start, err)
	return r0, err
}

// UpdateSlots implements store.Store.
func (t *timedStore) UpdateSlots(ctx context.Context, key, id string, p slots.Params, now time.Time, op store.SlotOp) (slots.Decision, error) {
	start := time.Now()
	r0, err := t.inner.UpdateSlots(ctx, key, id, p, now, op)
	t.track("update_slots", start, err)
	return r0, err
}

// SlotKeys implements store.Store.
func (t *timedStore) SlotKeys(ctx context.Context, prefix, cursor string, limit int) ([]store.SlotKey, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.SlotKeys(ctx, prefix, cursor, limit)
	t.track("slot_keys", start, err)
	return r0, r1, err
}

// SlotLine implements store.Store.
func (t *timedStore) SlotLine(ctx context.Context, key, cursor string, limit int) ([]slots.Waiter, string, error) {
	start := time.Now()
	r0, r1, err := t.inner.SlotLine(ctx, key, cursor, limit)
	t.track("slot_line", start, err)
	return r0, r1, err
}

// PutTape implements store.Store.
func (t *timedStore) PutTape(ctx context.Context, rec weft.TapeRecord, data []byte) error {
	start := time.Now()
	err := t.inner.PutTape(ctx, rec, data)
	t.track("put_tape", start, err)
	return err
}

// GetTape implements store.Store.
func (t *timedStore) GetTape(ctx context.Context, key weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	start := time.Now()
	r0, r1, err := t.inner.GetTape(ctx, key)
	t.track("get_tape", start, err)
	return r0, r1, err
}

// ListTapes implements store.Store.
func (t *timedStore) ListTapes(ctx context.Context, instanceID string) ([]weft.TapeRecord, error) {
	start := time.Now()
	r0, err := t.inner.ListTapes(ctx, instanceID)
	t.track("list_tapes", start, err)
	return r0, err
}

// FindTapes implements store.Store.
func (t *timedStore) FindTapes(ctx context.Context, q weft.TapeQuery) ([]weft.TapeRecord, error) {
	start := time.Now()
	r0, err := t.inner.FindTapes(ctx, q)
	t.track("find_tapes", start, err)
	return r0, err
}

// Close implements store.Store.
func (t *timedStore) Close() error {
	start := time.Now()
	err := t.inner.Close()
	t.track("close", start, err)
	return err
}

// storeOperations are the values of the operation label: the methods of
// store.Store and BarrierOf, in snake case.
var storeOperations = []string{
	"commit",
	"get_instance",
	"instance_statuses",
	"list_instances",
	"count_instances",
	"delete_instance",
	"history",
	"deliver",
	"inbox",
	"waiting_inboxes",
	"bookmarks",
	"find_bookmarks",
	"timers",
	"due_timers",
	"renew_leases",
	"heartbeats",
	"expired_leases",
	"expired_instances",
	"enqueue_stimulus",
	"get_stimulus",
	"pending_stimuli",
	"queued_stimuli",
	"expire_stimuli",
	"dead_letters",
	"put_definition",
	"get_definition",
	"list_definitions",
	"list_definition_versions",
	"delete_definition",
	"register_search_attributes",
	"search_attributes",
	"put_plugin",
	"get_plugin",
	"current_plugin",
	"resolve_start",
	"list_plugins",
	"delete_plugin",
	"put_grants",
	"get_grants",
	"list_grants",
	"delete_grants",
	"create_schedule",
	"get_schedule",
	"list_schedules",
	"update_schedule",
	"delete_schedule",
	"due_schedules",
	"schedule_events",
	"create_batch",
	"get_batch",
	"list_batches",
	"update_batch",
	"delete_batch",
	"due_batches",
	"add_batch_items",
	"batch_items",
	"apply_batch_items",
	"pause_workflow",
	"unpause_workflow",
	"workflow_pauses",
	"get_workflow_pause",
	"update_slots",
	"slot_keys",
	"slot_line",
	"put_tape",
	"get_tape",
	"list_tapes",
	"find_tapes",
	"close",
	"barrier_of",
}
