package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/store"
)

// Saving definitions and compiling them: the catalogue a definition is checked against, and the cache of compiled programs.

// CheckDefinition parses and validates source against the stored plugins
// and workflows, as SaveDefinition does, without saving it: every problem,
// of syntax, structure, expressions or references, in one
// *weft.DefinitionError.
func (e *Engine) CheckDefinition(ctx context.Context, source []byte) (*definition.Definition, error) {
	def, err := definition.Load(source, catalog{ctx: ctx, st: e.store, timeout: e.cfg.ActivityTimeout})
	if err != nil {
		return nil, err
	}
	if err := e.checkSearch(ctx, def); err != nil {
		return nil, err
	}
	return def, nil
}

// SaveDefinition validates source against the stored plugins and workflows
// and stores it as the definition's next version, unless it is the same as
// the latest version (created=false). Validation problems come back as a
// *weft.DefinitionError listing every one.
func (e *Engine) SaveDefinition(ctx context.Context, source []byte) (*weft.Definition, bool, error) {
	def, err := e.CheckDefinition(ctx, source)
	if err != nil {
		return nil, false, err
	}
	if err := e.registerSearch(ctx, def); err != nil {
		return nil, false, err
	}
	version, created, err := e.store.PutDefinition(ctx, def.Name, def.Hash(), source)
	if err != nil {
		return nil, false, fmt.Errorf("engine: saving definition %s: %w", def.Name, err)
	}
	d, err := e.store.GetDefinition(ctx, def.Name, version)
	return d, created, err
}

// DeleteDefinition removes every version of a definition, or returns an
// error matching weft.ErrNotFound. Instances of it are not checked, and
// the compiled programs this node holds stay: versions are never reused,
// so a cached program never runs another definition.
func (e *Engine) DeleteDefinition(ctx context.Context, name string) error {
	if err := e.store.DeleteDefinition(ctx, name); err != nil {
		return fmt.Errorf("engine: deleting definition %s: %w", name, err)
	}
	return nil
}

// program returns the compiled program of a definition version.
func (e *Engine) program(ctx context.Context, name string, version int) (*runner.Program, error) {
	k := programKey{name, version}
	e.mu.Lock()
	p := e.programs[k]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	d, err := e.store.GetDefinition(ctx, name, version)
	if err != nil {
		return nil, fmt.Errorf("engine: definition %s version %d: %w", name, version, err)
	}
	// A stored version passed the rules of its save, which may have
	// been fewer: ParseSaved keeps its instances running.
	def, err := definition.ParseSaved(d.Source)
	if err != nil {
		return nil, fmt.Errorf("engine: definition %s version %d no longer parses: %w", name, version, err)
	}
	p = runner.Compile(def)
	e.mu.Lock()
	e.programs[k] = p
	e.mu.Unlock()
	return p, nil
}

// programKey names a compiled definition: a struct, so that a lookup, made
// by every start and every run, formats nothing.
type programKey struct {
	name    string
	version int
}

// catalog is the store seen as a definition.Catalog, with the engine's
// default activity timeout (a definition.TimeoutDefaults). It lives for one
// definition.Load and carries that call's ctx: the Catalog's methods take
// none, because to the definition package they are lookups, while here
// each one reads the store.
type catalog struct {
	ctx     context.Context
	st      store.Store
	timeout time.Duration
}

// DefaultActivityTimeout implements definition.TimeoutDefaults.
func (c catalog) DefaultActivityTimeout() time.Duration { return c.timeout }

func (c catalog) HasPlugin(name string) bool {
	_, err := c.st.GetPlugin(c.ctx, name)
	return err == nil
}

func (c catalog) HasActivity(plugin, activity string) bool {
	p, err := c.st.GetPlugin(c.ctx, plugin)
	if err != nil {
		return false
	}
	for _, a := range p.Current.Activities {
		if a == activity {
			return true
		}
	}
	return false
}

// Activities lists the activities of the plugin's current version, for
// the suggestion after a misspelt one.
func (c catalog) Activities(plugin string) []string {
	p, err := c.st.GetPlugin(c.ctx, plugin)
	if err != nil {
		return nil
	}
	return p.Current.Activities
}

func (c catalog) Workflow(name string) (*definition.Definition, bool) {
	d, err := c.st.GetDefinition(c.ctx, name, 0)
	if err != nil {
		return nil, false
	}
	def, err := definition.ParseSaved(d.Source)
	return def, err == nil
}
