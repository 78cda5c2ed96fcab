package api

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

const (
	// readyTimeout bounds a readiness probe.
	readyTimeout = 2 * time.Second
)

// requestContext returns a context for the request's work, ended after d.
func requestContext(c *fiber.Ctx, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.UserContext(), d)
}

func viewPlugin(r weft.PluginRecord) apiv1.Plugin {
	acts := r.Activities
	if acts == nil {
		acts = []string{}
	}
	return apiv1.Plugin{Name: r.Name, Version: r.Version, Size: r.Size, Activities: acts, CreatedAt: r.CreatedAt}
}

func (s *Server) putPlugin(c *fiber.Ctx) error {
	if err := requireType(c, false, "application/wasm", fiber.MIMEOctetStream); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	rec, isNew, err := s.node.PutPlugin(ctx, param(c, "name"), c.BodyRaw())
	if err != nil {
		return err
	}
	return created(c, isNew, viewPlugin(*rec))
}

func (s *Server) listPlugins(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	recs, next, err := s.node.ListPlugins(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	items := make([]apiv1.Plugin, 0, len(recs))
	for _, r := range recs {
		items = append(items, viewPlugin(r))
	}
	return c.JSON(newPage(items, next))
}

func (s *Server) getPlugin(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name := param(c, "name")
	p, err := s.node.GetPlugin(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no plugin %q", name)
	}
	if err != nil {
		return err
	}
	d := apiv1.PluginDetail{Plugin: viewPlugin(p.Current), Versions: make([]apiv1.Plugin, 0, len(p.Versions)), Needs: viewNeeds(p.Current.Needs)}
	for _, v := range p.Versions {
		d.Versions = append(d.Versions, viewPlugin(v))
	}
	granted, set, err := s.loadGrants(c, name)
	if err != nil {
		return err
	}
	missing := grant.Missing(p.Current.Needs, set)
	d.Granted, d.Missing = granted, viewNeeds(&missing)
	return c.JSON(d)
}

func (s *Server) deletePlugin(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name := param(c, "name")
	force := false
	switch f := c.Query("force"); f {
	case "", "false":
	case "true":
		force = true
	default:
		return invalidField("force", "must be true or false, got %q", f)
	}
	err := s.node.DeletePlugin(ctx, name, force)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no plugin %q", name)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// definitionTypes are the media types of workflow definitions.
var definitionTypes = []string{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", fiber.MIMEApplicationJSON}

func viewWorkflow(d *weft.Definition, withSource bool) apiv1.Workflow {
	v := apiv1.Workflow{Name: d.Name, Version: d.Version, Hash: d.Hash, CreatedAt: d.CreatedAt}
	if withSource {
		src := string(d.Source)
		v.Source = &src
		// Saved, so it parsed when it was saved; ParseSaved reads what an
		// earlier version of the host accepted.
		if canon, err := node.CanonicalDefinition(d); err == nil {
			v.Definition = canon
		}
	}
	return v
}

func (s *Server) putWorkflow(c *fiber.Ctx) error {
	if err := requireType(c, false, definitionTypes...); err != nil {
		return err
	}
	name := param(c, "name")
	body := c.BodyRaw()
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	// Check everything first, so that the client gets every problem in one
	// answer (docs/architecture.md, "Every problem in one answer"), and
	// compare the names before anything is stored.
	def, err := s.node.CheckDefinition(ctx, body)
	if err != nil {
		return err
	}
	if def.Name != name {
		return unprocessable("the definition's name does not match the URL",
			apiv1.FieldError{Path: "name", Message: "the definition is named " + quote(def.Name) + " but was sent to " + quote(name)})
	}
	d, isNew, err := s.node.SaveDefinition(ctx, body)
	if err != nil {
		return err
	}
	return created(c, isNew, viewWorkflow(d, false))
}

func quote(s string) string { return `"` + s + `"` }

func (s *Server) listWorkflows(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	defs, next, err := s.node.Definitions(ctx, c.Query("cursor"), limit)
	if err != nil {
		return err
	}
	paused, err := s.pausedByName(ctx)
	if err != nil {
		return err
	}
	items := make([]apiv1.Workflow, 0, len(defs))
	for i := range defs {
		v := viewWorkflow(&defs[i], false)
		v.Paused = paused[v.Name]
		items = append(items, v)
	}
	return c.JSON(newPage(items, next))
}

func (s *Server) getWorkflow(c *fiber.Ctx) error {
	version, err := intParam(c, "version", 0, 1, 1<<31-1)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name := param(c, "name")
	d, err := s.node.Definition(ctx, name, version)
	if errors.Is(err, weft.ErrNotFound) {
		if version > 0 {
			return notFoundf("no workflow %q version %d", name, version)
		}
		return notFoundf("no workflow %q", name)
	}
	if err != nil {
		return err
	}
	v := viewWorkflow(d, true)
	kept, err := s.node.DefinitionVersions(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		// Deleted since the read above.
		return notFoundf("no workflow %q", name)
	}
	if err != nil {
		return err
	}
	v.Versions = make([]apiv1.WorkflowVersion, len(kept))
	for i, k := range kept {
		v.Versions[i] = apiv1.WorkflowVersion{Version: k.Version, CreatedAt: k.CreatedAt}
	}
	if v.Paused, err = s.workflowPaused(ctx, name); err != nil {
		return err
	}
	return c.JSON(v)
}

func (s *Server) deleteWorkflow(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name := param(c, "name")
	err := s.node.DeleteDefinition(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no workflow %q", name)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
