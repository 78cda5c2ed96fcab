package node

import (
	"context"
	"encoding/json"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
)

// The node is the one door into the core: the API, the console's answers
// and the commands reach instances through these methods, so a rule about
// an instance (a cancel of a finished one, say) is decided once, behind
// them, and not in a handler.

// Start creates an instance of the latest version of a workflow with the
// given input (JSON, nil for none) and id (empty: one is chosen), and
// hands it to a worker. created is false when an instance with that id
// existed already (it is returned as it is).
func (n *Node) Start(ctx context.Context, workflow string, input json.RawMessage, id string) (inst *weft.Instance, created bool, err error) {
	return n.engine.Start(ctx, workflow, input, id)
}

// Watch is a wait for one instance, registered before the instance could
// change, so that its first look needs no read of the store. It waits
// once: for the instance to stop running (Wait, as Node.Wait) or to
// finish (WaitFinished, as Node.WaitFinished); Stop unregisters one that
// was not waited on.
type Watch interface {
	Wait(ctx context.Context) (*weft.Instance, error)
	WaitFinished(ctx context.Context) (*weft.Instance, error)
	Stop()
}

// StartWatched is Start with a Watch registered before the instance can
// change, so that a wait for its end needs no first read. The Watch is
// nil when the start failed.
func (n *Node) StartWatched(ctx context.Context, workflow string, input json.RawMessage, opts weft.StartOptions) (*weft.Instance, bool, Watch, error) {
	inst, created, w, err := n.engine.StartWatched(ctx, workflow, input, opts)
	if w == nil {
		// A nil *engine.Watch in the interface would not be nil.
		return inst, created, nil, err
	}
	return inst, created, w, err
}

// Instance returns an instance, or an error matching weft.ErrNotFound.
func (n *Node) Instance(ctx context.Context, id string) (*weft.Instance, error) {
	return n.store.GetInstance(ctx, id)
}

// Instances returns a page of the instances f selects, and the cursor of
// the next page ("" after the last).
func (n *Node) Instances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	return n.store.ListInstances(ctx, f)
}

// SearchInstances is Instances with a query (docs/operations.md,
// "Search"): the instances f selects that the query text q matches. A
// query that does not parse or type is an error matching weft.ErrInvalid
// that wraps a *query.Error (where, and what is wrong). A page may be
// shorter than f.Limit, even empty, with a cursor to read on.
func (n *Node) SearchInstances(ctx context.Context, q string, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	return n.engine.SearchInstances(ctx, q, f)
}

// SearchAttributes returns the registered search attributes: every name
// a saved definition declared, with its type, ordered by name.
func (n *Node) SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error) {
	return n.store.SearchAttributes(ctx)
}

// CountInstances counts the instances in each status, of one workflow or
// ("") of all.
func (n *Node) CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error) {
	return n.store.CountInstances(ctx, workflow)
}

// History returns up to limit entries of an instance's history after seq
// afterSeq.
func (n *Node) History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error) {
	return n.store.History(ctx, id, afterSeq, limit)
}

// WaitingOn returns what a suspended or running instance waits for: its
// bookmarks and its timers.
func (n *Node) WaitingOn(ctx context.Context, id string) ([]weft.Bookmark, []weft.Timer, error) {
	bms, err := n.store.Bookmarks(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	tms, err := n.store.Timers(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return bms, tms, nil
}

// FindBookmarks returns the bookmarks, of any instance, waiting for an
// event with that name and key.
func (n *Node) FindBookmarks(ctx context.Context, event, key string) ([]weft.Bookmark, error) {
	return n.store.FindBookmarks(ctx, event, key)
}

// WaitedEvents returns the names of the events the stored definitions
// wait for, sorted.
func (n *Node) WaitedEvents(ctx context.Context) ([]string, error) {
	return n.engine.WaitedEvents(ctx)
}

// Wait waits until the instance is suspended or finished, and returns it
// as it is then.
func (n *Node) Wait(ctx context.Context, id string) (*weft.Instance, error) {
	return n.engine.Wait(ctx, id)
}

// WaitFinished waits until the instance completed, failed or was
// cancelled, and returns it as it is then.
func (n *Node) WaitFinished(ctx context.Context, id string) (*weft.Instance, error) {
	return n.engine.WaitFinished(ctx, id)
}

// OnChange calls fn with the id of each instance that changes on this node
// until stop is called.
func (n *Node) OnChange(fn func(id string)) (stop func()) { return n.engine.OnChange(fn) }

// ChangesComplete reports whether OnChange reports every change of every
// instance: true on a node alone, false in a cluster.
func (n *Node) ChangesComplete() bool { return n.engine.ChangesComplete() }

// Cancel cancels an instance, applied when it runs next, and records op
// (who asked, why, when) in its instance_cancelled entry; it returns the
// instance as it was before, an error matching weft.ErrNotFound, or a
// *weft.FinishedError for one that finished already.
func (n *Node) Cancel(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	return n.engine.Cancel(ctx, id, op)
}

// Retry makes a failed instance continue from the step that failed, and
// records op in its instance_retried entry.
func (n *Node) Retry(ctx context.Context, id string, op weft.Operation) error {
	return n.engine.Retry(ctx, id, op)
}

// Pause pauses an instance (docs/operations.md, "Pause and resume"),
// applied when it runs next, and records op in its instance_paused entry:
// it begins no step from then on, and keeps the timers and events that
// come for it until resumed. It returns the instance as it was before, an
// error matching weft.ErrNotFound, or a *weft.FinishedError for one that
// finished already. A pause of a paused instance changes nothing.
func (n *Node) Pause(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	return n.engine.Pause(ctx, id, op)
}

// Resume resumes a paused instance, applied when it runs next, and
// records op in its instance_resumed entry; it returns the instance as it
// was before, or an error matching weft.ErrNotPaused (neither paused nor
// with a pause on its way), weft.ErrNotFound or weft.ErrFinished.
func (n *Node) Resume(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	return n.engine.Resume(ctx, id, op)
}

// Paused returns the pause of inst (read with its state, as Instance
// reads it) and how many timers' fires and events it holds for its
// resume; nil when it is not paused. It reads nothing: the pause is in
// the state.
func (n *Node) Paused(inst *weft.Instance) (*weft.Pause, int, error) {
	return n.engine.Paused(inst)
}

// Delete deletes a finished instance with everything it left; op is
// logged ("instance deleted"), since the history goes with the instance.
func (n *Node) Delete(ctx context.Context, id string, op weft.Operation) error {
	return n.engine.Delete(ctx, id, op)
}

// Export returns an instance's whole state, to import elsewhere.
func (n *Node) Export(ctx context.Context, id string) (*weft.Snapshot, error) {
	return n.engine.Export(ctx, id)
}

// Import recreates an instance from a snapshot: under id (empty: the id
// it was exported with; another makes a copy), over an instance that
// exists with that id only when replace is set (weft.ErrInstanceExists
// otherwise); its instance_imported entry records op.
func (n *Node) Import(ctx context.Context, s *weft.Snapshot, id string, replace bool, op weft.Operation) (*weft.Instance, bool, error) {
	return n.engine.Import(ctx, s, engine.ImportOptions{ID: id, Replace: replace, Op: op})
}

// ResetPoints returns the steps an instance can be reset to
// (docs/operations.md, "Reset"): the top-level steps it began, each at its
// last beginning, in the order of its definition, with whether the
// variables it began with were recorded. An error matching
// weft.ErrNotFound for no such instance.
func (n *Node) ResetPoints(ctx context.Context, id string) ([]weft.ResetPoint, error) {
	return n.engine.ResetPoints(ctx, id)
}

// Reset runs an instance again from step, a top-level step it began,
// with the variables it had when that step last began: applied when it
// runs next, and recorded with op in its instance_reset entry. A step it
// cannot be reset to is an error matching weft.ErrNotResettable that says
// why; no such instance, weft.ErrNotFound.
func (n *Node) Reset(ctx context.Context, id, step string, op weft.Operation) error {
	return n.engine.Reset(ctx, id, step, op)
}

// PlanMigration is a migration's dry run (docs/operations.md, "Migrate"):
// whether the instance can move to target, and how, with nothing changed.
// An error matching weft.ErrNotFound for no such instance or no such
// target version.
func (n *Node) PlanMigration(ctx context.Context, id string, target weft.MigrationTarget) (*weft.MigrationPlan, error) {
	return n.engine.PlanMigration(ctx, id, target)
}

// Migrate moves an instance to target when it can: the move is sent to
// its inbox and applied when it is at rest (instance_migrated, or
// migration_refused should it no longer fit then), with op. then is "",
// "retry" (a failed instance continues from its failed step once moved)
// or "resume" (a paused one resumes). It returns the plan of the move
// sent; a *weft.MigrationError carrying the plan (matching
// weft.ErrNotMigratable) when the instance cannot move, and nothing is
// sent.
func (n *Node) Migrate(ctx context.Context, id string, target weft.MigrationTarget, then string, op weft.Operation) (*weft.MigrationPlan, error) {
	return n.engine.Migrate(ctx, id, target, then, op)
}
