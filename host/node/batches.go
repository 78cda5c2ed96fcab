package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
)

// Batch jobs (docs/operations.md, "Batch operations"): the node starts,
// shows, confirms and cancels them through the engine, whose batches
// sweep applies them. The store keeps a batch's document and state as the
// batch core wrote them; BatchView is what they say, read here so that
// the API, which may not import the core, answers it as it is.

// BatchView is a batch as the node shows it: its record, and what its
// document and its state say.
type BatchView struct {
	weft.Batch
	// Op is the operation applied to each instance.
	Op weft.BatchOp
	// Query selects the instances, in its canonical form; empty for a
	// batch of listed ids, which IDs counts.
	Query string
	IDs   int
	// Reason is why, as the operator said it.
	Reason string
	// Rate is the instances applied per second; 0 for no limit.
	Rate float64
	// Hold: the batch waits for a confirmation once its instances are
	// selected. DryRun: a migrate that moves nothing, and says per
	// instance whether it could.
	Hold, DryRun bool
	// Args are the operation's arguments as the document has them
	// (canonical JSON: event, key, payload, to_version, plugins, retry,
	// resume, step); nil for an operation that takes none.
	Args json.RawMessage
	// Phase is where the batch is: selecting, selected (waiting for a
	// confirmation), applying, done, cancelled or failed.
	Phase string
	// Matched is how many instances the selection found.
	Matched int
	// Error says why a failed batch failed.
	Error string
	// Cancelled says who cancelled the batch, why and when; nil unless
	// it was.
	Cancelled *weft.Operation
	// StartedAt is when the batch began; FinishedAt when it reached a
	// finished phase (zero before).
	StartedAt, FinishedAt time.Time
}

// StartBatch checks a batch document (JSON: docs/operations.md, "Batch
// operations") and starts the batch, with actor as who started it. Its
// problems come back together as a *weft.BatchError (matching
// weft.ErrInvalid), each with its path.
func (n *Node) StartBatch(ctx context.Context, doc []byte, actor string) (*BatchView, error) {
	b, err := n.engine.StartBatch(ctx, doc, actor)
	return batchViewOf(b, err)
}

// Batch returns a batch as it is now, or an error matching
// weft.ErrNotFound.
func (n *Node) Batch(ctx context.Context, id string) (*BatchView, error) {
	b, err := n.engine.GetBatch(ctx, id)
	return batchViewOf(b, err)
}

// Batches returns a page of batches, newest first, and the cursor of the
// next page ("" after the last).
func (n *Node) Batches(ctx context.Context, cursor string, limit int) ([]BatchView, string, error) {
	page, next, err := n.engine.ListBatches(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]BatchView, 0, len(page))
	for i := range page {
		v, err := batchView(&page[i])
		if err != nil {
			return nil, "", err
		}
		out = append(out, *v)
	}
	return out, next, nil
}

// BatchItems returns a page of a batch's items, in the order they were
// selected: those with f.Outcome ("" for every one), after seq
// f.AfterSeq. An error matching weft.ErrNotFound when there is no such
// batch.
func (n *Node) BatchItems(ctx context.Context, id string, f weft.BatchItemFilter) ([]weft.BatchItem, error) {
	return n.engine.BatchItems(ctx, id, f)
}

// ConfirmBatch starts applying a batch that waits for a confirmation
// (started with hold, its instances selected), confirmed by actor. A
// batch in another phase is a *weft.BatchError (path phase) saying
// which; no such batch, weft.ErrNotFound.
func (n *Node) ConfirmBatch(ctx context.Context, id, actor string) (*BatchView, error) {
	b, err := n.engine.ConfirmBatch(ctx, id, actor)
	return batchViewOf(b, err)
}

// CancelBatch stops a batch, op saying who, why and when: nothing more is
// applied, and the items not applied stay pending. A finished batch is
// returned as it is.
func (n *Node) CancelBatch(ctx context.Context, id string, op weft.Operation) (*BatchView, error) {
	b, err := n.engine.CancelBatch(ctx, id, op)
	return batchViewOf(b, err)
}

func batchViewOf(b *weft.Batch, err error) (*BatchView, error) {
	if err != nil {
		return nil, err
	}
	return batchView(b)
}

// batchView reads what a stored batch's document and state say.
func batchView(b *weft.Batch) (*BatchView, error) {
	d, err := batch.ParseDocument(b.Document)
	if err != nil {
		return nil, fmt.Errorf("node: batch %s: the stored document does not parse: %w", b.ID, err)
	}
	st, err := batch.ParseState(b.State)
	if err != nil {
		return nil, fmt.Errorf("node: batch %s: %w", b.ID, err)
	}
	// The args as the canonical document writes them: the names of the
	// API's, and only those given.
	var canonical struct {
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(d.Canonical(), &canonical); err != nil {
		return nil, fmt.Errorf("node: batch %s: the canonical document: %w", b.ID, err)
	}
	v := &BatchView{Batch: *b, Op: d.Op, Query: d.Query, IDs: len(d.IDs), Reason: d.Reason, Rate: d.Limit(),
		Hold: d.Hold, DryRun: d.DryRun, Args: canonical.Args, Phase: string(st.Phase), Matched: st.Matched,
		Error: st.Error, Cancelled: st.Cancelled, StartedAt: st.StartedAt, FinishedAt: st.FinishedAt}
	// The items are the selection, counted with them in each write: so
	// far while selecting, and whole from the write that ends it, which
	// sets the phase before the state's own count is written.
	v.Matched = max(v.Matched, b.Counts.Total())
	return v, nil
}
