package metrics_test

import (
	"context"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// failingStore is a store.Store whose every method returns err and zero
// values: what the decorator's tests call through, so that each method's
// timing and error counting are checked without a real store's
// preconditions.
type failingStore struct{ err error }

var _ store.Store = (*failingStore)(nil)

func (f *failingStore) Commit(_ context.Context, _ store.Commit) (_ uint64, err error) {
	err = f.err
	return
}

func (f *failingStore) GetInstance(_ context.Context, _ string) (_ *weft.Instance, err error) {
	err = f.err
	return
}

func (f *failingStore) InstanceStatuses(_ context.Context, _ []string) (_ map[string]weft.Status, err error) {
	err = f.err
	return
}

func (f *failingStore) ListInstances(_ context.Context, _ weft.InstanceFilter) (_ []weft.Instance, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) CountInstances(_ context.Context, _ string) (_ map[weft.Status]int, err error) {
	err = f.err
	return
}

func (f *failingStore) DeleteInstance(_ context.Context, _ string, _ uint64) error {
	return f.err
}

func (f *failingStore) History(_ context.Context, _ string, _ uint64, _ int) (_ []weft.HistoryEntry, err error) {
	err = f.err
	return
}

func (f *failingStore) Deliver(_ context.Context, _ *weft.Stimulus, _ []weft.Message) (_ *weft.Stimulus, err error) {
	err = f.err
	return
}

func (f *failingStore) Inbox(_ context.Context, _ string) (_ []weft.Message, err error) {
	err = f.err
	return
}

func (f *failingStore) WaitingInboxes(_ context.Context, _ time.Time, _ int) (_ []string, err error) {
	err = f.err
	return
}

func (f *failingStore) Bookmarks(_ context.Context, _ string) (_ []weft.Bookmark, err error) {
	err = f.err
	return
}

func (f *failingStore) FindBookmarks(_ context.Context, _, _ string) (_ []weft.Bookmark, err error) {
	err = f.err
	return
}

func (f *failingStore) Timers(_ context.Context, _ string) (_ []weft.Timer, err error) {
	err = f.err
	return
}

func (f *failingStore) DueTimers(_ context.Context, _ time.Time, _ int) (_ []weft.Timer, err error) {
	err = f.err
	return
}

func (f *failingStore) RenewLeases(_ context.Context, _ store.LeaseRenewal) (_ []string, err error) {
	err = f.err
	return
}

func (f *failingStore) Heartbeats(_ context.Context, _ string) (_ []store.Heartbeat, err error) {
	err = f.err
	return
}

func (f *failingStore) ExpiredLeases(_ context.Context, _ time.Time, _ int) (_ []string, err error) {
	err = f.err
	return
}

func (f *failingStore) ExpiredInstances(_ context.Context, _ time.Time, _ int) (_ []string, err error) {
	err = f.err
	return
}

func (f *failingStore) EnqueueStimulus(_ context.Context, _ weft.Stimulus) (_ *weft.Stimulus, err error) {
	err = f.err
	return
}

func (f *failingStore) GetStimulus(_ context.Context, _ string) (_ *weft.Stimulus, err error) {
	err = f.err
	return
}

func (f *failingStore) PendingStimuli(_ context.Context, _, _ string) (_ []weft.Stimulus, err error) {
	err = f.err
	return
}

func (f *failingStore) QueuedStimuli(_ context.Context, _ string, _ int) (_ []weft.Stimulus, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) ExpireStimuli(_ context.Context, _ time.Time, _ int) (_ []weft.Stimulus, err error) {
	err = f.err
	return
}

func (f *failingStore) DeadLetters(_ context.Context, _ string, _ int) (_ []weft.Stimulus, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) PutDefinition(_ context.Context, _, _ string, _ []byte) (_ int, _ bool, err error) {
	err = f.err
	return
}

func (f *failingStore) GetDefinition(_ context.Context, _ string, _ int) (_ *weft.Definition, err error) {
	err = f.err
	return
}

func (f *failingStore) ListDefinitions(_ context.Context, _ string, _ int) (_ []weft.Definition, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) ListDefinitionVersions(_ context.Context, _ string) (_ []weft.Definition, err error) {
	err = f.err
	return
}

func (f *failingStore) DeleteDefinition(_ context.Context, _ string) error {
	return f.err
}

func (f *failingStore) RegisterSearchAttributes(_ context.Context, _ string, _ map[string]weft.SearchType) error {
	return f.err
}

func (f *failingStore) SearchAttributes(_ context.Context) (_ []weft.SearchAttribute, err error) {
	err = f.err
	return
}

func (f *failingStore) PutPlugin(_ context.Context, _ weft.PluginRecord) (_ bool, err error) {
	err = f.err
	return
}

func (f *failingStore) GetPlugin(_ context.Context, _ string) (_ *weft.Plugin, err error) {
	err = f.err
	return
}

func (f *failingStore) CurrentPlugin(_ context.Context, _ string) (_ *weft.PluginRecord, err error) {
	err = f.err
	return
}

func (f *failingStore) ResolveStart(_ context.Context, _ string, _ func(*weft.Definition) ([]string, error), _ bool) (_ *store.StartCatalog, err error) {
	err = f.err
	return
}

func (f *failingStore) ListPlugins(_ context.Context, _ string, _ int) (_ []weft.PluginRecord, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) DeletePlugin(_ context.Context, _ string) error {
	return f.err
}

func (f *failingStore) PutGrants(_ context.Context, _ string, _ []byte, _ uint64) (_ uint64, err error) {
	err = f.err
	return
}

func (f *failingStore) GetGrants(_ context.Context, _ string) (_ *weft.Grants, err error) {
	err = f.err
	return
}

func (f *failingStore) ListGrants(_ context.Context, _ string, _ int) (_ []weft.Grants, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) DeleteGrants(_ context.Context, _ string) error {
	return f.err
}

func (f *failingStore) CreateSchedule(_ context.Context, _ *weft.Schedule, _ []weft.ScheduleEvent) (_ *weft.Schedule, err error) {
	err = f.err
	return
}

func (f *failingStore) GetSchedule(_ context.Context, _ string) (_ *weft.Schedule, err error) {
	err = f.err
	return
}

func (f *failingStore) ListSchedules(_ context.Context, _ string, _ int) (_ []weft.Schedule, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) UpdateSchedule(_ context.Context, _ *weft.Schedule, _ []weft.ScheduleEvent) (_ *weft.Schedule, err error) {
	err = f.err
	return
}

func (f *failingStore) DeleteSchedule(_ context.Context, _ string) error {
	return f.err
}

func (f *failingStore) DueSchedules(_ context.Context, _ time.Time, _ int) (_ []weft.Schedule, err error) {
	err = f.err
	return
}

func (f *failingStore) ScheduleEvents(_ context.Context, _ string, _ uint64, _ int) (_ []weft.ScheduleEvent, err error) {
	err = f.err
	return
}

func (f *failingStore) CreateBatch(_ context.Context, _ *weft.Batch, _ []string) (_ *weft.Batch, err error) {
	err = f.err
	return
}

func (f *failingStore) GetBatch(_ context.Context, _ string) (_ *weft.Batch, err error) {
	err = f.err
	return
}

func (f *failingStore) ListBatches(_ context.Context, _ string, _ int) (_ []weft.Batch, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) UpdateBatch(_ context.Context, _ *weft.Batch) (_ *weft.Batch, err error) {
	err = f.err
	return
}

func (f *failingStore) DeleteBatch(_ context.Context, _ string) error {
	return f.err
}

func (f *failingStore) DueBatches(_ context.Context, _ time.Time, _ int) (_ []weft.Batch, err error) {
	err = f.err
	return
}

func (f *failingStore) AddBatchItems(_ context.Context, _ *weft.Batch, _ []string) (_ *weft.Batch, _ int, err error) {
	err = f.err
	return
}

func (f *failingStore) BatchItems(_ context.Context, _ string, _ weft.BatchItemFilter) (_ []weft.BatchItem, err error) {
	err = f.err
	return
}

func (f *failingStore) ApplyBatchItems(_ context.Context, _ *weft.Batch, _ []weft.BatchChange) (_ *weft.Batch, err error) {
	err = f.err
	return
}

func (f *failingStore) PauseWorkflow(_ context.Context, _ weft.WorkflowPause) (_ *weft.WorkflowPause, err error) {
	err = f.err
	return
}

func (f *failingStore) UnpauseWorkflow(_ context.Context, _ string) (_ *weft.WorkflowPause, err error) {
	err = f.err
	return
}

func (f *failingStore) WorkflowPauses(_ context.Context) (_ []weft.WorkflowPause, err error) {
	err = f.err
	return
}

func (f *failingStore) GetWorkflowPause(_ context.Context, _ string) (_ *weft.WorkflowPause, err error) {
	err = f.err
	return
}

func (f *failingStore) UpdateSlots(_ context.Context, _, _ string, _ slots.Params, _ time.Time, _ store.SlotOp) (_ slots.Decision, err error) {
	err = f.err
	return
}

func (f *failingStore) SlotKeys(_ context.Context, _, _ string, _ int) (_ []store.SlotKey, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) SlotLine(_ context.Context, _, _ string, _ int) (_ []slots.Waiter, _ string, err error) {
	err = f.err
	return
}

func (f *failingStore) Close() error {
	return f.err
}

func (f *failingStore) PutTape(_ context.Context, _ weft.TapeRecord, _ []byte) error {
	return f.err
}

func (f *failingStore) GetTape(_ context.Context, _ weft.TapeKey) (_ *weft.TapeRecord, _ []byte, err error) {
	err = f.err
	return
}

func (f *failingStore) ListTapes(_ context.Context, _ string) (_ []weft.TapeRecord, err error) {
	err = f.err
	return
}

func (f *failingStore) FindTapes(_ context.Context, _ weft.TapeQuery) (_ []weft.TapeRecord, err error) {
	err = f.err
	return
}
