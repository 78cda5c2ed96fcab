package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weftworks/weft/host/store"
)

// StateFormat versions the document Export writes and Import reads.
const StateFormat = 1

// State is an instance's full state: enough to recreate it on another host
// (or the same one, after a delete) and carry on.
type State struct {
	Format    int              `json:"format"`
	Instance  store.Instance   `json:"instance"`
	Runner    json.RawMessage  `json:"runner"`
	Bookmarks []store.Bookmark `json:"bookmarks"`
	Timers    []store.Timer    `json:"timers"`
	Inbox     []store.Message  `json:"inbox"`
}

// Export returns an instance's full state. Like every read, it takes no
// lock: it reads one committed state, and never waits for a run.
func (e *Engine) Export(ctx context.Context, id string) (*State, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &State{Format: StateFormat, Instance: *inst, Runner: inst.State}
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

// Import writes an exported state as the instance's state, creating the
// instance or replacing the existing one, under the instance lock. The
// instance keeps its id, definition version and pinned plugins, which must
// exist here; it is queued to carry on. A finished instance keeps the
// DeleteAfter it was exported with; one exported without (by a host that
// kept finished instances forever) gets this host's, counted from the
// import, as if it finished now.
func (e *Engine) Import(ctx context.Context, s *State) (*store.Instance, error) {
	if s.Format != StateFormat {
		return nil, fmt.Errorf("engine: state format %d, this host reads %d", s.Format, StateFormat)
	}
	id := s.Instance.ID
	prog, err := e.program(ctx, s.Instance.Workflow, s.Instance.Version)
	if err != nil {
		return nil, err
	}
	actx, cancel := context.WithTimeout(ctx, e.cfg.AcquireTimeout)
	lease, err := e.locks.Acquire(actx, InstanceLockKey(id), e.cfg.LockTTL)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("engine: locking instance %s: %w", id, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	inst := s.Instance
	inst.State = s.Runner
	inst.Lease = store.Lease{}
	inst.Rev = 0
	if inst.Status.Terminal() && inst.DeleteAfter.IsZero() {
		inst.DeleteAfter = e.deleteAfter(prog.Definition(), e.cfg.Now())
	}
	if cur, err := e.store.GetInstance(ctx, id); err == nil {
		inst.Rev = cur.Rev
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	bookmarks, timers := s.Bookmarks, s.Timers
	if bookmarks == nil {
		bookmarks = []store.Bookmark{}
	}
	if timers == nil {
		timers = []store.Timer{}
	}
	if _, err := e.store.Commit(ctx, store.Commit{
		Instance: &inst, Fence: lease.Token(), Bookmarks: bookmarks, Timers: timers, Send: s.Inbox,
		History: []store.HistoryEntry{{Type: store.HistoryInstanceImported, Node: e.cfg.NodeID}},
	}); err != nil {
		return nil, fmt.Errorf("engine: importing instance %s: %w", id, err)
	}
	e.changed(id)
	e.push(ctx, id, "import")
	return e.store.GetInstance(ctx, id)
}

// Delete removes an instance with its history, bookmarks, timers and inbox,
// under the instance lock, which every write of an instance holds: a
// running instance is deleted when its run ends, never under it. (The
// retention sweep deletes finished instances the same way.)
func (e *Engine) Delete(ctx context.Context, id string) error {
	actx, cancel := context.WithTimeout(ctx, e.cfg.AcquireTimeout)
	lease, err := e.locks.Acquire(actx, InstanceLockKey(id), e.cfg.LockTTL)
	cancel()
	if err != nil {
		return fmt.Errorf("engine: locking instance %s: %w", id, err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	if err := e.store.DeleteInstance(ctx, id, lease.Token()); err != nil {
		return err
	}
	e.changed(id)
	e.cfg.Observer.InstancesDeleted(DeletedOnRequest, 1)
	return nil
}
