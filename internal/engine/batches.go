package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
)

// Batch jobs (docs/operations.md, "Batch operations"): one operation over
// many instances, selected by a query or listed by id, applied by the
// singleton batches sweep a chunk at a time, at the batch's rate. Each
// item is applied exactly once across nodes' deaths: the store writes an
// item's outcome and the message that carries its operation in one
// transaction, only while the item is pending (store.ApplyBatchItems), and
// the execution that applies the message consumes it with the commit that
// records its effect (internal/batch's package doc).

// Batch terms.
const (
	// selectPage is how many instances one step of a selection reads.
	selectPage = 1000
	// batchesPerTurn is how many due batches one turn of the sweep reads.
	batchesPerTurn = 16
)

// StartBatch creates a batch from its document (internal/batch's
// ParseDocument: a *weft.BatchError, matching weft.ErrInvalid, lists its
// problems), started by actor, and returns it. Its query is checked
// against the search attributes as a search's is. The batches sweep
// selects its instances and applies the operation to each; with hold, it
// stops once they are selected, until ConfirmBatch.
func (e *Engine) StartBatch(ctx context.Context, doc []byte, actor string) (*weft.Batch, error) {
	d, err := batch.ParseDocument(doc)
	if err != nil {
		return nil, err
	}
	if isRelease(d) {
		return nil, &weft.BatchError{Problems: []weft.Problem{{Path: "op", Message: "release is the host's own: it releases the starts a paused workflow held when the workflow is resumed"}}}
	}
	return e.startBatch(ctx, doc, actor)
}

// startBatch is StartBatch for any operation, the host's own release
// included.
func (e *Engine) startBatch(ctx context.Context, doc []byte, actor string) (*weft.Batch, error) {
	d, err := batch.ParseDocument(doc)
	if err != nil {
		return nil, err
	}
	if d.Query != "" {
		if _, err := e.parseQuery(ctx, d.Query); err != nil {
			msg := strings.TrimPrefix(err.Error(), weft.ErrInvalid.Error()+": ")
			return nil, &weft.BatchError{Problems: []weft.Problem{{Path: "query", Message: strings.TrimPrefix(msg, "query: ")}}}
		}
	}
	now := e.cfg.Now()
	st := batch.Initial(d, now)
	state, err := st.Encode()
	if err != nil {
		return nil, err
	}
	b := &weft.Batch{ID: "b-" + newID(now), Document: d.Canonical(), State: state, Actor: actor}
	if st.Phase != batch.PhaseSelected {
		b.Wake = now
	}
	created, err := e.store.CreateBatch(ctx, b, d.IDs)
	if err != nil {
		return nil, fmt.Errorf("engine: creating batch %s: %w", b.ID, err)
	}
	e.log.Info("batch started", "batch", created.ID, "op", d.Op, "actor", actor, "reason", d.Reason)
	return created, nil
}

// GetBatch returns a batch, or an error matching weft.ErrNotFound.
func (e *Engine) GetBatch(ctx context.Context, id string) (*weft.Batch, error) {
	return e.store.GetBatch(ctx, id)
}

// ListBatches returns a page of batches, newest first, and the next
// cursor.
func (e *Engine) ListBatches(ctx context.Context, cursor string, limit int) ([]weft.Batch, string, error) {
	return e.store.ListBatches(ctx, cursor, limit)
}

// BatchItems returns a page of a batch's items, in the order they were
// selected.
func (e *Engine) BatchItems(ctx context.Context, id string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	return e.store.BatchItems(ctx, id, f)
}

// ConfirmBatch starts applying a batch that holds after its selection
// (phase selected). It returns the batch as stored; weft.ErrNotFound for
// no such batch, and a *weft.BatchError for one that does not wait for a
// confirmation.
func (e *Engine) ConfirmBatch(ctx context.Context, id, actor string) (*weft.Batch, error) {
	return e.changeBatch(ctx, id, func(st *batch.State, b *weft.Batch) error {
		if st.Phase != batch.PhaseSelected {
			return &weft.BatchError{Problems: []weft.Problem{{Path: "phase", Message: fmt.Sprintf("batch %s is %s: only a batch that waits for a confirmation (selected) can be confirmed", id, st.Phase)}}}
		}
		st.Phase, b.Wake = batch.PhaseApplying, e.cfg.Now()
		e.log.Info("batch confirmed", "batch", id, "actor", actor)
		return nil
	})
}

// CancelBatch stops a batch: nothing more is applied (a chunk being
// applied when it lands is refused whole), and its pending items stay
// pending. op says who and why. A finished batch is answered as it is.
func (e *Engine) CancelBatch(ctx context.Context, id string, op weft.Operation) (*weft.Batch, error) {
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	return e.changeBatch(ctx, id, func(st *batch.State, b *weft.Batch) error {
		if st.Phase.Finished() {
			return errUnchanged
		}
		st.Phase, st.Cancelled, st.FinishedAt = batch.PhaseCancelled, &op, op.At
		b.Wake = op.At.Add(e.cfg.BatchRetention)
		e.log.Info("batch cancelled", "batch", id, "actor", op.Actor, "reason", op.Reason)
		return nil
	})
}

// errUnchanged: a change that finds nothing to change.
var errUnchanged = errors.New("unchanged")

// changeBatch is the read-modify-write of an operator's change to a
// batch's state.
func (e *Engine) changeBatch(ctx context.Context, id string, change func(*batch.State, *weft.Batch) error) (*weft.Batch, error) {
	for {
		b, err := e.store.GetBatch(ctx, id)
		if err != nil {
			return nil, err
		}
		st, err := batch.ParseState(b.State)
		if err != nil {
			return nil, fmt.Errorf("engine: batch %s: %w", id, err)
		}
		if err := change(&st, b); errors.Is(err, errUnchanged) {
			return b, nil
		} else if err != nil {
			return nil, err
		}
		if b.State, err = st.Encode(); err != nil {
			return nil, err
		}
		updated, err := e.store.UpdateBatch(ctx, b)
		if errors.Is(err, weft.ErrConflict) {
			continue // the stepper wrote first: read it again
		}
		if err != nil {
			return nil, fmt.Errorf("engine: updating batch %s: %w", id, err)
		}
		return updated, nil
	}
}

// sweepBatches steps the due batches, one goroutine each, until half the
// singleton's TTL: a turn that runs late hands over to the next holder
// before its lock runs out.
func (e *Engine) sweepBatches(ctx context.Context) {
	stopAt := time.Now().Add(batchesTTL(e.cfg.BatchInterval) / 2)
	due, err := e.store.DueBatches(ctx, e.cfg.Now(), batchesPerTurn)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("finding due batches", "err", err)
		}
		return
	}
	var wg sync.WaitGroup
	for i := range due {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.stepBatch(ctx, &due[i], stopAt); err != nil && ctx.Err() == nil {
				e.log.Warn("stepping a batch", "batch", due[i].ID, "err", err)
			}
		}()
	}
	wg.Wait()
}

// stepBatch moves a due batch on, until stopAt or its rate says wait: a
// page of its selection, or chunks of its items; a finished one past its
// retention is deleted.
func (e *Engine) stepBatch(ctx context.Context, b *weft.Batch, stopAt time.Time) error {
	d, err := batch.ParseDocument(b.Document)
	if err != nil {
		return fmt.Errorf("batch %s: its document: %w", b.ID, err)
	}
	for time.Now().Before(stopAt) && ctx.Err() == nil {
		st, err := batch.ParseState(b.State)
		if err != nil {
			return fmt.Errorf("batch %s: %w", b.ID, err)
		}
		now := e.cfg.Now()
		switch st.Phase {
		case batch.PhaseDone, batch.PhaseCancelled, batch.PhaseFailed:
			if !b.Wake.IsZero() && !b.Wake.After(now) {
				err := e.store.DeleteBatch(ctx, b.ID)
				if errors.Is(err, weft.ErrNotFound) {
					err = nil
				}
				return err
			}
			return nil
		case batch.PhaseSelected:
			return nil // until confirmed
		case batch.PhaseSelecting:
			b, err = e.selectPage(ctx, b, d, st, now)
		case batch.PhaseApplying:
			var wait bool
			b, wait, err = e.applyChunk(ctx, b, d, st, now, stopAt)
			if wait && err == nil {
				return nil
			}
		}
		if errors.Is(err, weft.ErrConflict) {
			return nil // cancelled meanwhile, or another stepper: next turn
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// selectPage reads a page of the instances the batch's query matches,
// created before the batch (a snapshot: instances created since are not
// its), and adds them to its items.
func (e *Engine) selectPage(ctx context.Context, b *weft.Batch, d *batch.Document, st batch.State, now time.Time) (*weft.Batch, error) {
	items, next, err := e.SearchInstances(ctx, d.Query, weft.InstanceFilter{CreatedBefore: b.CreatedAt, Cursor: st.SelectCursor, Limit: selectPage})
	if err != nil {
		if errors.Is(err, weft.ErrInvalid) {
			// The registry changed since the batch was started (a query
			// that checked then no longer does): the batch cannot go on.
			return e.failBatch(ctx, b, st, now, "the query: "+err.Error())
		}
		return nil, err
	}
	ids := make([]string, len(items))
	for i := range items {
		ids[i] = items[i].ID
	}
	st.SelectCursor = next
	st.Matched = b.Counts.Total() // so far: the items of the pages before
	if b.State, err = st.Encode(); err != nil {
		return nil, err
	}
	b, _, err = e.store.AddBatchItems(ctx, b, ids)
	if err != nil {
		return nil, err
	}
	st.Matched = b.Counts.Total()
	if st.Matched > e.cfg.BatchMaxItems {
		return e.failBatch(ctx, b, st, now, fmt.Sprintf("the query matches more than %d instances (engine.batch_max_items)", e.cfg.BatchMaxItems))
	}
	if next != "" {
		return b, nil
	}
	// Selected, with its count, in one write: a reader never sees the
	// phase without the count.
	st.Phase = batch.PhaseApplying
	if d.Hold {
		st.Phase, b.Wake = batch.PhaseSelected, time.Time{}
	}
	if b.State, err = st.Encode(); err != nil {
		return nil, err
	}
	return e.store.UpdateBatch(ctx, b)
}

// failBatch ends a batch that cannot go on, saying why.
func (e *Engine) failBatch(ctx context.Context, b *weft.Batch, st batch.State, now time.Time, why string) (*weft.Batch, error) {
	st.Phase, st.Error, st.FinishedAt = batch.PhaseFailed, why, now
	var err error
	if b.State, err = st.Encode(); err != nil {
		return nil, err
	}
	b.Wake = now.Add(e.cfg.BatchRetention)
	e.log.Warn("batch failed", "batch", b.ID, "reason", why)
	return e.store.UpdateBatch(ctx, b)
}

// applyChunk applies the operation to the next pending items, as many as
// the rate allows now; wait says the batch waits (for its rate, or it is
// done), until b.Wake.
func (e *Engine) applyChunk(ctx context.Context, b *weft.Batch, d *batch.Document, st batch.State, now, stopAt time.Time) (_ *weft.Batch, wait bool, _ error) {
	n, wake := batch.Budget(d.Limit(), st.LastApply, now, e.cfg.BatchChunk)
	if n == 0 {
		if wake.Equal(b.Wake) {
			return b, true, nil
		}
		b.Wake = wake
		updated, err := e.store.UpdateBatch(ctx, b)
		return updated, true, err
	}
	items, err := e.store.BatchItems(ctx, b.ID, weft.BatchItemFilter{Outcome: weft.BatchPending, AfterSeq: st.ApplyAfter, Limit: n})
	if err != nil {
		return nil, true, err
	}
	if len(items) == 0 {
		st.Phase, st.FinishedAt = batch.PhaseDone, now
		if b.State, err = st.Encode(); err != nil {
			return nil, true, err
		}
		b.Wake = now.Add(e.cfg.BatchRetention)
		updated, err := e.store.UpdateBatch(ctx, b)
		if err == nil {
			e.log.Info("batch done", "batch", b.ID, "op", d.Op, "counts", updated.Counts)
		}
		return updated, true, err
	}
	op := weft.Operation{Actor: b.Actor, Reason: d.Reason, Batch: b.ID, At: b.CreatedAt}
	changes, orders, err := e.batchChanges(ctx, d, items, op, stopAt)
	if errors.Is(err, errStillPaused) {
		b.Wake = now.Add(e.cfg.BatchInterval)
		updated, err := e.store.UpdateBatch(ctx, b)
		return updated, true, err
	}
	if err != nil {
		return nil, true, err
	}
	items = items[:len(changes)]
	st.ApplyAfter, st.LastApply = items[len(items)-1].Seq, now
	if b.State, err = st.Encode(); err != nil {
		return nil, true, err
	}
	b.Wake = wake
	updated, err := e.store.ApplyBatchItems(ctx, b, changes)
	if err != nil {
		return nil, true, err
	}
	// The messages are durable: wake their instances (a wake-up lost here
	// is found by the recovery sweep's look at waiting inboxes).
	for _, c := range changes {
		switch {
		case len(c.Messages) > 0:
			e.notify(ctx, itemOf(c.InstanceID, "batch", orders[c.InstanceID]))
		case isRelease(d) && c.Outcome == weft.BatchDone:
			e.push(ctx, itemOf(c.InstanceID, "release", orders[c.InstanceID]))
		}
	}
	outcomes := map[weft.BatchOutcome]int{}
	for _, c := range changes {
		outcomes[c.Outcome]++
	}
	for o, n := range outcomes {
		e.cfg.Observer.BatchApplied(string(d.Op), string(o), n)
	}
	return updated, false, nil
}

// batchSteppers is how many items of a chunk are looked at at once: each
// costs a round trip or two to the store (the instance, its bookmarks).
const batchSteppers = 8

// batchChanges works out the changes of items, batchSteppers at a time,
// in their order, and their instances' orders. Past stopAt it stops, with
// the changes of a prefix of items (one at least): the sweep's lock must
// outlast the chunk's write.
func (e *Engine) batchChanges(ctx context.Context, d *batch.Document, items []weft.BatchItem, op weft.Operation, stopAt time.Time) ([]weft.BatchChange, map[string]weft.Order, error) {
	changes := make([]weft.BatchChange, 0, len(items))
	orders := make(map[string]weft.Order, len(items))
	for start := 0; start < len(items); start += batchSteppers {
		if start > 0 && time.Now().After(stopAt) {
			break
		}
		group := items[start:min(start+batchSteppers, len(items))]
		got := make([]weft.BatchChange, len(group))
		errs := make([]error, len(group))
		found := make([]map[string]weft.Order, len(group))
		var wg sync.WaitGroup
		for i, it := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				found[i] = map[string]weft.Order{}
				got[i], errs[i] = e.batchChange(ctx, d, it.InstanceID, op, found[i])
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, nil, err
		}
		changes = append(changes, got...)
		for _, f := range found {
			maps.Copy(orders, f)
		}
	}
	return changes, orders, nil
}

// batchChange is what the batch does to one instance: the messages of
// its operation, or why it skips it. An error is one of the store (the
// chunk is tried again); an instance that cannot take the operation is
// an outcome, not an error. It notes the instance's order in orders, for
// its wake-up.
func (e *Engine) batchChange(ctx context.Context, d *batch.Document, id string, op weft.Operation, orders map[string]weft.Order) (weft.BatchChange, error) {
	c := weft.BatchChange{InstanceID: id, Outcome: weft.BatchDone}
	skip := func(reason string) (weft.BatchChange, error) {
		c.Outcome, c.Reason = weft.BatchSkipped, reason
		return c, nil
	}
	inst, err := e.store.GetInstance(ctx, id)
	if errors.Is(err, weft.ErrNotFound) {
		return skip(weft.BatchNotFound)
	}
	if err != nil {
		return c, err
	}
	orders[id] = inst.Order
	view := batch.StatusView{Status: inst.Status, FailedAtStep: inst.Error != nil && inst.Error.Step != ""}
	var paused bool
	if d.Op == weft.BatchPause || d.Op == weft.BatchResume {
		p, _, err := pauseOf(inst)
		if err != nil {
			c.Outcome, c.Reason = weft.BatchFailed, err.Error()
			return c, nil
		}
		paused = p != nil
		if paused && !inst.Status.Terminal() {
			view.Status = weft.StatusPaused // paused, its attempt still in flight
		}
	}
	if ok, reason := batch.Precheck(d.Op, view); !ok {
		return skip(reason)
	}
	// refused turns the engine's refusal of an instance into a skip; any
	// other error is the store's, and the chunk is tried again.
	refused := func(m weft.Message, err error) (weft.BatchChange, error) {
		switch {
		case err == nil:
			c.Messages = []weft.Message{m}
			return c, nil
		case errors.Is(err, weft.ErrNotFailed), errors.Is(err, weft.ErrNotRetryable), errors.Is(err, weft.ErrNotResettable), errors.Is(err, weft.ErrNotFound):
			return skip(clean(err))
		}
		return c, err
	}
	switch d.Op {
	case weft.BatchCancel:
		return refused(cancelMessage(id, op))
	case weft.BatchRetry:
		return refused(e.retryMessage(ctx, inst, op))
	case weft.BatchPause:
		return refused(pauseMessage(id, weft.MessagePause, op, op.At), nil)
	case weft.BatchResume:
		return refused(pauseMessage(id, weft.MessageResume, op, op.At), nil)
	case weft.BatchReset:
		return refused(e.resetMessage(ctx, inst, d.Args.Step, op))
	case weft.BatchSignal:
		return e.signalChange(ctx, c, d, op)
	case weft.BatchMigrate:
		return e.migrateChange(ctx, c, inst, d, op)
	case weft.BatchRelease:
		if _, err := e.store.GetWorkflowPause(ctx, inst.Workflow); err == nil {
			return c, errStillPaused
		} else if !errors.Is(err, weft.ErrNotFound) {
			return c, err
		}
		return releaseChange(c, inst), nil
	case weft.BatchDelete:
		// Deleted here, under the instance's lock, before the item is
		// marked: a stepper that dies in between finds the instance gone
		// and records the item skipped (not found), deleted once.
		if err := e.Delete(ctx, id, op); errors.Is(err, weft.ErrNotFound) {
			return skip(weft.BatchNotFound)
		} else if err != nil {
			c.Outcome, c.Reason = weft.BatchFailed, clean(err)
		}
		return c, nil
	}
	c.Outcome, c.Reason = weft.BatchFailed, "operation "+string(d.Op)+" is not applied by this host"
	return c, nil
}

// signalChange sends the batch's event to each wait of the instance that
// waits for it (and its key, when the batch names one): a stimulus
// message per bookmark. An instance that waits for no such event is
// skipped; nothing is queued for it.
func (e *Engine) signalChange(ctx context.Context, c weft.BatchChange, d *batch.Document, op weft.Operation) (weft.BatchChange, error) {
	bms, err := e.store.Bookmarks(ctx, c.InstanceID)
	if errors.Is(err, weft.ErrNotFound) {
		c.Outcome, c.Reason = weft.BatchSkipped, weft.BatchNotFound
		return c, nil
	}
	if err != nil {
		return c, err
	}
	for _, b := range bms {
		if b.Event != d.Args.Event || d.Args.Key != "" && b.Key != d.Args.Key {
			continue
		}
		c.Messages = append(c.Messages, weft.Message{InstanceID: c.InstanceID, ID: "stimulus:" + op.Batch + ":" + b.Token,
			Kind: weft.MessageStimulus, Token: b.Token, Payload: d.Args.Payload, Op: &op})
	}
	if len(c.Messages) == 0 {
		what := "event " + d.Args.Event
		if d.Args.Key != "" {
			what += " with key " + d.Args.Key
		}
		c.Outcome, c.Reason = weft.BatchSkipped, "waits for no "+what
	}
	return c, nil
}

// migrateChange plans the instance's move; a dry run records whether it
// can move, and why not, and sends nothing.
func (e *Engine) migrateChange(ctx context.Context, c weft.BatchChange, inst *weft.Instance, d *batch.Document, op weft.Operation) (weft.BatchChange, error) {
	target := weft.MigrationTarget{Version: d.Args.ToVersion, Plugins: d.Args.Plugins}
	plan, pins, err := e.planMigration(ctx, inst, target)
	if errors.Is(err, weft.ErrNotFound) {
		c.Outcome, c.Reason = weft.BatchSkipped, clean(err)
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if !plan.CanMove {
		c.Outcome, c.Reason = weft.BatchSkipped, (&weft.MigrationError{Plan: plan}).Error()
		if d.DryRun {
			c.Outcome = weft.BatchCannot
		}
		return c, nil
	}
	if d.DryRun {
		c.Outcome, c.Reason = weft.BatchCan, fmt.Sprintf("version %d to %d", plan.FromVersion, plan.ToVersion)
		return c, nil
	}
	then := ""
	switch {
	case d.Args.Retry:
		then = MigrateThenRetry
	case d.Args.Resume:
		then = MigrateThenResume
	}
	m, err := e.migrateMessage(plan, pins, then, op)
	if err != nil {
		return c, err
	}
	c.Messages = []weft.Message{m}
	return c, nil
}

// batchesTTL is the batches sweep's lock TTL: longer than the other
// sweeps', since a turn applies whole chunks, each looking at up to
// BatchChunk instances; a node that dies holding it hands its batches
// over that much later.
func batchesTTL(interval time.Duration) time.Duration { return max(5*time.Second, 4*interval) }

// clean is an engine error as an operator reads it in a batch's item:
// without the package's prefix.
func clean(err error) string { return strings.TrimPrefix(err.Error(), "engine: ") }
