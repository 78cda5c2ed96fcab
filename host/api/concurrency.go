package api

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// Concurrency limits by key (docs/flow-control.md): the routes under
// /v1/concurrency show, through the node, the keys of the workflows'
// limits and of the activity steps' that have running or waiting
// instances, who holds each key's slots and who waits in its line;
// /v1/step-concurrency shows a step key's line. They only read: a key's
// slots change as its instances (or attempts) start and end.

// viewConcurrencyKey is a concurrency key as answered.
func viewConcurrencyKey(k *weft.ConcurrencyKey) apiv1.ConcurrencyKey {
	v := apiv1.ConcurrencyKey{
		Workflow: k.Workflow, Key: k.Key, Step: k.Step, Limit: k.Limit, Policy: apiv1.ConcurrencyPolicy(k.Policy),
		Running: k.Running, Cancelling: k.Cancelling, Waiting: k.Waiting, OldestWait: k.OldestWait,
		Holders: make([]apiv1.SlotHolder, len(k.Holders)),
	}
	for i, h := range k.Holders {
		v.Holders[i] = apiv1.SlotHolder{InstanceID: h.Instance, Since: h.Since, Cancelling: h.Cancelling}
	}
	return v
}

// viewConcurrency is an instance's place under its workflow's
// concurrency limit as answered, nil when the workflow sets none.
func viewConcurrency(c *weft.Concurrency) *apiv1.Concurrency {
	if c == nil {
		return nil
	}
	return &apiv1.Concurrency{Key: c.Key, WaitingSince: c.WaitingSince}
}

// workflowName checks a workflow name given as the parameter param (a
// path's or a query's): 400 naming it when no workflow could have it.
func workflowName(param, name string) error {
	if !abi.ValidName(name) {
		return invalidField(param, "workflow name %q: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter", name, abi.MaxNameLen)
	}
	return nil
}

// listConcurrency answers a page of the concurrency keys that have
// running or waiting instances, of ?workflow= or of every workflow,
// ordered by workflow and key.
func (s *Server) listConcurrency(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	workflow := c.Query("workflow")
	if workflow != "" {
		if err := workflowName("workflow", workflow); err != nil {
			return err
		}
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	keys, next, err := s.node.ConcurrencyKeys(ctx, workflow, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]apiv1.ConcurrencyKey, len(keys))
	for i := range keys {
		items[i] = viewConcurrencyKey(&keys[i])
	}
	return c.JSON(newPage(items, next))
}

// getConcurrencyKey answers one concurrency key of a workflow (?key=,
// absent or empty for the workflow-wide key "") with a page of its line,
// first in line first: 404 when nothing runs or waits under it.
func (s *Server) getConcurrencyKey(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	workflow := param(c, "workflow")
	if err := workflowName("workflow", workflow); err != nil {
		return err
	}
	key := c.Query("key")
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	k, line, next, err := s.node.ConcurrencyKey(ctx, workflow, key, c.Query("cursor"), limit)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("nothing runs or waits under concurrency key %q of workflow %q", key, workflow)
	}
	if err != nil {
		return err
	}
	return c.JSON(viewConcurrencyLine(k, line, next))
}

// getStepConcurrencyKey answers one key of the activity steps'
// concurrency limits (?key=, required: a step's key is never empty) with a
// page of its line, as getConcurrencyKey does a workflow's: its holders
// and waiters are attempts, each shown as its instance, which may appear
// more than once. 404 when nothing runs or waits under it.
func (s *Server) getStepConcurrencyKey(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	key := c.Query("key")
	if key == "" {
		return invalidField("key", "required: the step concurrency key to show")
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	k, line, next, err := s.node.StepConcurrencyKey(ctx, key, c.Query("cursor"), limit)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("nothing runs or waits under step concurrency key %q", key)
	}
	if err != nil {
		return err
	}
	return c.JSON(viewConcurrencyLine(k, line, next))
}

// viewConcurrencyLine is a key with a page of its line as answered.
func viewConcurrencyLine(k *weft.ConcurrencyKey, line []weft.SlotWaiter, next string) apiv1.ConcurrencyLine {
	waiting := make([]apiv1.SlotWaiter, len(line))
	for i, w := range line {
		waiting[i] = apiv1.SlotWaiter{InstanceID: w.Instance, Since: w.Since}
	}
	return apiv1.ConcurrencyLine{Key: viewConcurrencyKey(k), Waiting: waiting, NextCursor: next}
}
