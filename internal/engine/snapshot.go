package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/store"
)

// Export returns a snapshot of an instance. Like every read, it takes no
// lock: it reads one committed state, and never waits for a run.
func (e *Engine) Export(ctx context.Context, id string) (*weft.Snapshot, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &weft.Snapshot{Format: weft.SnapshotFormat, Instance: *inst, Runner: inst.State}
	st.Instance.State = nil
	if st.Bookmarks, err = e.store.Bookmarks(ctx, id); err != nil {
		return nil, err
	}
	if st.Timers, err = e.store.Timers(ctx, id); err != nil {
		return nil, err
	}
	if st.Inbox, err = e.store.Inbox(ctx, id); err != nil {
		return nil, err
	}
	return st, nil
}

// ImportOptions says how Import writes a snapshot.
type ImportOptions struct {
	// ID is the id to import the state as; empty is the id it was
	// exported with. Another id makes a copy of that instance: the state
	// is rewritten to name ID wherever it named the exported one.
	ID string
	// Replace allows the import to replace an instance that exists with
	// that id; without it Import refuses with ErrInstanceExists.
	Replace bool
	// Op is who imports, why and when it was asked: the
	// instance_imported entry records it.
	Op weft.Operation
}

// Import writes an exported state as an instance's state, under the
// instance lock: the instance it was exported from, or a copy under
// opts.ID. It creates the instance, or replaces an existing one when
// opts.Replace allows it (ErrInstanceExists otherwise); created says
// which. The instance keeps its definition version and pinned plugins,
// which must exist here; it is queued to carry on. A copy names its new
// id in its bookmarks, timers and inbox, and its activities get
// idempotency keys of their own (they are made from the id); it is no
// child of the exported instance's parent (that parent waits for the
// original), and a state that waits for a child of its own is refused
// (ErrChildInFlight): the child reports to the original. A finished
// instance keeps the DeleteAfter it was exported with; one exported
// without (by a host that kept finished instances forever) gets this
// host's, counted from the import, as if it finished now.
func (e *Engine) Import(ctx context.Context, s *weft.Snapshot, opts ImportOptions) (inst *weft.Instance, created bool, err error) {
	if s.Format != weft.SnapshotFormat {
		return nil, false, fmt.Errorf("engine: state format %d, this host reads %d", s.Format, weft.SnapshotFormat)
	}
	from, id := s.Instance.ID, opts.ID
	if id == "" {
		id = from
	}
	if id == "" {
		return nil, false, fmt.Errorf("engine: %w: the state names no instance id, and none was given", weft.ErrInvalid)
	}
	copied := from != "" && from != id
	if copied {
		if err := childrenFinished(s); err != nil {
			return nil, false, fmt.Errorf("engine: importing instance %s as %s: %w", from, id, err)
		}
	}
	prog, err := e.program(ctx, s.Instance.Workflow, s.Instance.Version)
	if err != nil {
		return nil, false, err
	}
	if err := s.Instance.Order.Check(); err != nil {
		return nil, false, fmt.Errorf("engine: importing instance %s: %w", id, err)
	}
	actx, cancel := context.WithTimeout(ctx, e.cfg.AcquireTimeout)
	lease, err := e.locks.Acquire(actx, InstanceLockKey(id), e.cfg.LockTTL)
	cancel()
	if err != nil {
		return nil, false, fmt.Errorf("engine: locking instance %s: %w", id, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	in := s.Instance
	in.ID = id
	in.State = s.Runner
	in.Lease = weft.Lease{}
	in.Rev = 0
	if in.Status.Terminal() && in.DeleteAfter.IsZero() {
		in.DeleteAfter = e.deleteAfter(prog.Definition(), e.cfg.Now())
	}
	if err := e.importSlot(ctx, &in, prog.Definition().Concurrency); err != nil {
		return nil, false, err
	}
	cur, err := e.store.GetInstance(ctx, id)
	existed := err == nil
	switch {
	case existed && !opts.Replace:
		return nil, false, fmt.Errorf("engine: %w: instance %s (%s, %s); replacing it must be asked for", weft.ErrInstanceExists, id, cur.Workflow, cur.Status)
	case existed:
		in.Rev = cur.Rev
	case !errors.Is(err, weft.ErrNotFound):
		return nil, false, err
	}
	bookmarks := slices.Clone(s.Bookmarks)
	if bookmarks == nil {
		bookmarks = []weft.Bookmark{}
	}
	timers := slices.Clone(s.Timers)
	if timers == nil {
		timers = []weft.Timer{}
	}
	// They carry the instance's order (a snapshot's may predate it).
	for i := range bookmarks {
		bookmarks[i].Order = in.Order
	}
	for i := range timers {
		timers[i].Order = in.Order
	}
	inbox := slices.Clone(s.Inbox)
	// The entry's time is the import's: op.At is recorded only as given.
	op := opts.Op
	data := op.Data(nil)
	imported := weft.HistoryEntry{Type: weft.HistoryInstanceImported, Node: e.cfg.NodeID, Actor: op.Actor}
	if copied {
		in.Parent = nil
		for i := range bookmarks {
			bookmarks[i].InstanceID = id
		}
		for i := range timers {
			timers[i].InstanceID = id
		}
		for i := range inbox {
			inbox[i].InstanceID = id
		}
		data["from"] = from
	}
	if len(data) > 0 {
		if imported.Data, err = json.Marshal(data); err != nil {
			return nil, false, fmt.Errorf("engine: importing instance %s: its history entry: %w", id, err)
		}
	}
	if _, err := e.store.Commit(ctx, store.Commit{
		Instance: &in, Fence: lease.Token(), Bookmarks: bookmarks, Timers: timers, Send: inbox,
		History: []weft.HistoryEntry{imported},
	}); errors.Is(err, weft.ErrExists) {
		// Started with this id since the read: Start takes no lock.
		return nil, false, fmt.Errorf("engine: %w: instance %s was created meanwhile; replacing it must be asked for", weft.ErrInstanceExists, id)
	} else if err != nil {
		return nil, false, fmt.Errorf("engine: importing instance %s: %w", id, err)
	}
	// Its runs start afresh: a backoff of the instance it replaced on
	// this node must not hold the imported state back.
	e.ranWell(id)
	e.changed(id)
	e.push(ctx, itemOf(id, "import", in.Order))
	inst, err = e.store.GetInstance(ctx, id)
	return inst, !existed, err
}

// childrenFinished returns ErrChildInFlight, naming the child, when s
// waits for a child instance whose end is not in its inbox.
func childrenFinished(s *weft.Snapshot) error {
	if len(s.Runner) == 0 {
		return nil
	}
	var st runner.State
	if err := json.Unmarshal(s.Runner, &st); err != nil {
		return fmt.Errorf("%w: the runner state does not decode: %w", weft.ErrInvalid, err)
	}
	ended := map[string]bool{}
	for _, m := range s.Inbox {
		if m.Kind == weft.MessageChild {
			ended[m.Token] = true
		}
	}
	var waiting func(f *runner.Frame) string
	waiting = func(f *runner.Frame) string {
		if f == nil || f.Run == nil {
			return ""
		}
		if f.Run.Pending == runner.PendingChild && !ended[f.Run.Token] {
			return f.Run.Token
		}
		for _, c := range f.Run.Children {
			if t := waiting(c); t != "" {
				return t
			}
		}
		return ""
	}
	if t := waiting(st.Root); t != "" {
		return fmt.Errorf("%w (%s, which reports its end to %s alone): import it under its own id, or once the child has ended", weft.ErrChildInFlight, runner.ChildID(s.Instance.ID, t), s.Instance.ID)
	}
	return nil
}

// Delete removes an instance with its history, bookmarks, timers and inbox,
// under the instance lock, which every write of an instance holds: a
// running instance is deleted when its run ends, never under it. (The
// retention sweep deletes finished instances the same way.)
//
// The history goes with the instance, so op (who deletes, why) cannot be
// recorded there: it is logged, the Info line "instance deleted" with the
// instance, its workflow and status, and op's actor and reason (its batch
// when set).
func (e *Engine) Delete(ctx context.Context, id string, op weft.Operation) error {
	actx, cancel := context.WithTimeout(ctx, e.cfg.AcquireTimeout)
	lease, err := e.locks.Acquire(actx, InstanceLockKey(id), e.cfg.LockTTL)
	cancel()
	if err != nil {
		return fmt.Errorf("engine: locking instance %s: %w", id, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	// Read first for its concurrency key: a deleted instance gives back
	// its slot, or its place in the line.
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	if err := e.store.DeleteInstance(ctx, id, lease.Token()); err != nil {
		return err
	}
	if inst.Concurrency != nil {
		var dc *definition.Concurrency
		if prog, err := e.program(ctx, inst.Workflow, inst.Version); err == nil {
			dc = prog.Definition().Concurrency
		}
		e.releaseSlot(ctx, ctx, inst, dc)
	}
	e.changed(id)
	e.cfg.Observer.InstancesDeleted(DeletedOnRequest, 1)
	attrs := []any{"instance", id, "workflow", inst.Workflow, "status", inst.Status, "actor", op.Actor, "reason", op.Reason}
	if op.Batch != "" {
		attrs = append(attrs, "batch", op.Batch)
	}
	e.log.InfoContext(ctx, "instance deleted", attrs...)
	return nil
}
