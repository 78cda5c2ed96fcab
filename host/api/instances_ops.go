package api

import (
	"errors"
	"maps"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// Reset and migrate (docs/operations.md, "Reset" and "Migrate"): an
// operator runs an instance again from an earlier step, or moves it to
// another version of its workflow or plugins. Like a cancel, each is a
// message applied when the instance next runs, and its history entry
// records who asked (the request's token's name) and why.

// resetPoints answers the steps an instance can be reset to.
func (s *Server) resetPoints(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	points, err := s.node.ResetPoints(ctx, id)
	if err != nil {
		return err
	}
	items := make([]apiv1.ResetPoint, len(points))
	for i, p := range points {
		items[i] = apiv1.ResetPoint{Step: p.Step, Index: p.Index, Seq: p.Seq, Time: p.Time, Vars: p.Vars, Reason: p.Reason}
	}
	return c.JSON(newPage(items, ""))
}

// resetInstance runs an instance again from a step. 202 with the instance
// as it is, the reset applied when it next runs; 409 when it cannot be
// reset to the step, saying why.
func (s *Server) resetInstance(c *fiber.Ctx) error {
	var req apiv1.ResetRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Step == "" {
		return invalidField("step", "is required: the top-level step to run the instance again from (GET /v1/instances/{id}/reset-points lists them)")
	}
	if req.Reason == "" {
		req.Reason = "reset through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	err := s.node.Reset(ctx, id, req.Step, operation(c, req.Reason))
	switch {
	case errors.Is(err, weft.ErrNotResettable):
		return conflictf("%s", clean(err))
	case errors.Is(err, weft.ErrNotFound):
		// The instance was there a moment ago: it, or its definition, is
		// gone since.
		return conflictf("%s", clean(err))
	case err != nil:
		return err
	}
	return s.accepted(ctx, c, id)
}

// migrateInstance moves an instance to another version of its workflow or
// plugins, or with dry_run says whether it could (200). 202 with the plan
// of the move sent; 409 when the instance cannot move, the problem's
// migration member saying why.
func (s *Server) migrateInstance(c *fiber.Ctx) error {
	var req apiv1.MigrateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Version < 0 {
		return invalidField("version", "must be a workflow version, at least 1 (0 or absent: the latest), got %d", req.Version)
	}
	for _, name := range slices.Sorted(maps.Keys(req.Plugins)) {
		if !abi.ValidName(name) {
			return invalidField("plugins."+name, "%q is not a plugin name: 1 to %d characters from [a-z0-9_-], starting with a letter", name, abi.MaxNameLen)
		}
		if !isVersion(req.Plugins[name]) {
			return invalidField("plugins."+name, "%q is not a plugin version: want its sha256, 64 lowercase hex digits", req.Plugins[name])
		}
	}
	switch req.Then {
	case "", apiv1.ThenRetry, apiv1.ThenResume:
	default:
		return invalidField("then", "must be %q (a failed instance continues from its failed step) or %q (a paused one resumes), got %q", apiv1.ThenRetry, apiv1.ThenResume, req.Then)
	}
	if req.Reason == "" {
		req.Reason = "migrated through the API"
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	target := weft.MigrationTarget{Version: req.Version, Plugins: req.Plugins}
	if req.DryRun {
		plan, err := s.node.PlanMigration(ctx, id, target)
		if err != nil {
			return migrationError(err)
		}
		return c.JSON(viewPlan(plan))
	}
	plan, err := s.node.Migrate(ctx, id, target, string(req.Then), operation(c, req.Reason))
	if err != nil {
		return migrationError(err)
	}
	return c.Status(fiber.StatusAccepted).JSON(viewPlan(plan))
}

// migrationError answers a migration's error: 409 with the plan of an
// instance that cannot move; 404 for a target version that does not
// exist (or an instance gone since); else as problemFor says.
func migrationError(err error) error {
	var me *weft.MigrationError
	switch {
	case errors.As(err, &me):
		p := conflictf("%s", clean(err))
		plan := viewPlan(me.Plan)
		p.Migration = &plan
		return p
	case errors.Is(err, weft.ErrNotFound):
		return notFoundf("%s", clean(err))
	}
	return err
}

// viewPlan is a migration's plan as answered; its lists are never null.
func viewPlan(p *weft.MigrationPlan) apiv1.MigrationPlan {
	out := apiv1.MigrationPlan{Instance: p.Instance, CanMove: p.CanMove, FromVersion: p.FromVersion, ToVersion: p.ToVersion,
		At: make([]apiv1.MigrationPoint, len(p.At)), Problems: make([]apiv1.MigrationProblem, len(p.Problems)), Notes: slices.Clone(p.Notes)}
	for i, a := range p.At {
		out.At[i] = apiv1.MigrationPoint{Step: a.Step, Kind: a.Kind, From: a.From, To: a.To}
	}
	for i, pr := range p.Problems {
		out.Problems[i] = apiv1.MigrationProblem{Step: pr.Step, Path: pr.Path, Message: pr.Message}
	}
	if out.Notes == nil {
		out.Notes = []string{}
	}
	for name, pc := range p.Plugins {
		if out.Plugins == nil {
			out.Plugins = make(map[string]apiv1.PinChange, len(p.Plugins))
		}
		out.Plugins[name] = apiv1.PinChange{From: pc.From, To: pc.To}
	}
	return out
}

// isVersion reports whether v is a plugin version: the sha256 of its
// module, as 64 lowercase hex digits.
func isVersion(v string) bool {
	if len(v) != 64 {
		return false
	}
	for i := range len(v) {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
