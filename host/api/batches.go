package api

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

// Batch jobs (docs/operations.md, "Batch operations"): the routes under
// /v1/batches start, show, confirm and cancel them through the node, whose
// engine's batches sweep applies them. Who starts, confirms or cancels
// one is the request's token's name.

// needsAdmin reports whether a batch of op needs the admin role: a
// delete deletes instances, a migrate changes the code they run.
func needsAdmin(op weft.BatchOp) bool { return op == weft.BatchDelete || op == weft.BatchMigrate }

// startBatch starts a batch from its document, the body as it came: the
// node reads it strictly and answers every problem with its path (422).
// 201 with the batch.
func (s *Server) startBatch(c *fiber.Ctx) error {
	if err := requireType(c, false, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	body := c.BodyRaw()
	if p := checkUTF8(body); p != nil {
		return p
	}
	// The operation decides the role: a body that does not decode, or
	// names none, is the node's to refuse.
	var peek struct {
		Op weft.BatchOp `json:"op"`
	}
	_ = json.Unmarshal(body, &peek)
	if r := role(c); needsAdmin(peek.Op) && !permAdmin.allows(r) {
		return problemf(fiber.StatusForbidden, "forbidden", "token %q has role %s; a batch that applies %s needs %s", actor(c), r, peek.Op, permAdmin)
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	v, err := s.node.StartBatch(ctx, body, actor(c))
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(viewBatch(v))
}

func (s *Server) listBatches(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	views, next, err := s.node.Batches(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]apiv1.Batch, 0, len(views))
	for i := range views {
		items = append(items, viewBatch(&views[i]))
	}
	return c.JSON(newPage(items, next))
}

func (s *Server) getBatch(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	v, err := s.node.Batch(ctx, id)
	if err != nil {
		return batchError(id, err)
	}
	return c.JSON(viewBatch(v))
}

// batchItems answers a page of a batch's items in the order they were
// selected, those with ?outcome= when given; next_cursor is the seq to
// pass as ?after=.
func (s *Server) batchItems(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	after, err := afterParam(c)
	if err != nil {
		return err
	}
	outcome := weft.BatchOutcome(c.Query("outcome"))
	if outcome != "" && !slices.Contains(weft.BatchOutcomes(), outcome) {
		return invalidField("outcome", "must be one of %s, got %q", outcomeList(), outcome)
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	items, err := s.node.BatchItems(ctx, id, weft.BatchItemFilter{Outcome: outcome, AfterSeq: after, Limit: limit})
	if err != nil {
		return batchError(id, err)
	}
	out := make([]apiv1.BatchItem, len(items))
	for i, it := range items {
		out[i] = apiv1.BatchItem{InstanceID: it.InstanceID, Seq: it.Seq, Outcome: apiv1.BatchOutcome(it.Outcome), Reason: it.Reason, Time: it.Time}
	}
	next := ""
	if len(items) == limit {
		next = strconv.FormatUint(items[len(items)-1].Seq, 10)
	}
	return c.JSON(newPage(out, next))
}

// confirmBatch starts applying a batch that waits for a confirmation; 409
// for one in another phase. A batch of delete or migrate needs an admin's
// confirmation, as its start needed an admin.
func (s *Server) confirmBatch(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	// Confirming applies the batch: its operation's role, as a start's.
	if r := role(c); !permAdmin.allows(r) {
		b, err := s.node.Batch(ctx, id)
		if err != nil {
			return batchError(id, err)
		}
		if needsAdmin(b.Op) {
			return problemf(fiber.StatusForbidden, "forbidden", "token %q has role %s; confirming a batch that applies %s needs %s", actor(c), r, b.Op, permAdmin)
		}
	}
	v, err := s.node.ConfirmBatch(ctx, id, actor(c))
	var bte *weft.BatchError
	if errors.As(err, &bte) && len(bte.Problems) > 0 {
		return conflictf("%s", bte.Problems[0].Message)
	}
	if err != nil {
		return batchError(id, err)
	}
	return c.JSON(viewBatch(v))
}

// cancelBatch stops a batch; a finished one is answered as it is.
func (s *Server) cancelBatch(c *fiber.Ctx) error {
	var req apiv1.BatchCancelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = "cancelled through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	v, err := s.node.CancelBatch(ctx, id, operation(c, req.Reason))
	if err != nil {
		return batchError(id, err)
	}
	return c.JSON(viewBatch(v))
}

// batchError answers the error of a request for the batch id: 404 when
// there is none, else as problemFor says.
func batchError(id string, err error) error {
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no batch %q", id)
	}
	return err
}

// viewBatch is a batch as answered: its counts have every outcome.
func viewBatch(v *node.BatchView) apiv1.Batch {
	counts := make(map[apiv1.BatchOutcome]int, len(weft.BatchOutcomes()))
	for _, o := range weft.BatchOutcomes() {
		counts[apiv1.BatchOutcome(o)] = v.Counts[o]
	}
	out := apiv1.Batch{ID: v.ID, Op: apiv1.BatchOp(v.Op), Query: v.Query, IDs: v.IDs, Reason: v.Reason, Rate: v.Rate,
		Hold: v.Hold, DryRun: v.DryRun, Actor: v.Actor, Phase: apiv1.BatchPhase(v.Phase), Matched: v.Matched,
		Counts: counts, Error: v.Error, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt, StartedAt: v.StartedAt,
		FinishedAt: v.FinishedAt, NextStepAt: v.Wake}
	if len(v.Args) > 0 {
		// The canonical document's args: the names of apiv1.BatchArgs.
		var args apiv1.BatchArgs
		if json.Unmarshal(v.Args, &args) == nil {
			out.Args = &args
		}
	}
	if op := v.Cancelled; op != nil {
		out.Cancelled = &apiv1.BatchCancellation{Actor: op.Actor, Reason: op.Reason, At: op.At}
	}
	return out
}

// outcomeList names the outcomes of a batch item, for a message.
func outcomeList() string {
	var names []string
	for _, o := range weft.BatchOutcomes() {
		names = append(names, string(o))
	}
	return strings.Join(names, ", ")
}
