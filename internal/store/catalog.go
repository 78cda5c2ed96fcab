package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftworks/weft/host/weft"
)

// StartCatalog is what a start reads of the catalog (Store.ResolveStart).
type StartCatalog struct {
	// Definition is the latest version of the workflow.
	Definition *weft.Definition
	// Plugins holds the current version of each plugin the definition
	// uses, by name.
	Plugins map[string]*weft.PluginRecord
	// Paused is the workflow's pause when it is paused, nil otherwise: a
	// start creates its instance held (weft.Instance.Hold). It is part of
	// the catalog: a pause or an unpause changes the Generation, so a
	// create made from an answer that read it before is refused.
	Paused *weft.WorkflowPause
	// Generation, when not empty, says that the answer came from the
	// store's cache without a check that it is still current: a create
	// made from it carries it (Commit.Catalog), and is refused if the
	// catalog changed since. Empty: the answer was current at the call.
	Generation string
}

// ResolveCurrent answers Store.ResolveStart with reads current at the call
// (Generation ""): s's GetDefinition, then its CurrentPlugin for each
// plugin uses names, then its GetWorkflowPause (ErrNotFound: not paused).
func ResolveCurrent(ctx context.Context, s interface {
	GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error)
	CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error)
	GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error)
}, workflow string, uses func(*weft.Definition) ([]string, error)) (*StartCatalog, error) {
	d, err := s.GetDefinition(ctx, workflow, 0)
	if err != nil {
		return nil, err
	}
	names, err := uses(d)
	if err != nil {
		return nil, err
	}
	sc := &StartCatalog{Definition: d, Plugins: make(map[string]*weft.PluginRecord, len(names))}
	for _, name := range names {
		if sc.Plugins[name], err = s.CurrentPlugin(ctx, name); err != nil {
			return nil, &PluginError{Plugin: name, Err: err}
		}
	}
	switch sc.Paused, err = s.GetWorkflowPause(ctx, workflow); {
	case errors.Is(err, weft.ErrNotFound):
		sc.Paused = nil
	case err != nil:
		return nil, fmt.Errorf("workflow %q: reading its pause: %w", workflow, err)
	}
	return sc, nil
}
