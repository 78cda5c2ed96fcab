package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// bPauses holds the workflow pauses (store.Store's PauseWorkflow): one
// record per paused workflow. They are part of the catalog: their writes
// invalidate the catalog cache as a definition's do, and the cache keeps
// them all, decoded, for the starts that read them (catalogcache.go).
var bPauses = []byte("workflow_pauses") // workflow name → weft.WorkflowPause

// PauseWorkflow implements store.Store.
func (s *Store) PauseWorkflow(ctx context.Context, p weft.WorkflowPause) (*weft.WorkflowPause, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := weft.CheckID("workflow name", p.Workflow); err != nil {
		return nil, err
	}
	var out *weft.WorkflowPause
	defer s.catalog.changed()
	err := s.write(ctx, func(tx kvTx) error {
		b := tx.Bucket(bPauses)
		if raw := b.Get([]byte(p.Workflow)); raw != nil {
			cur, err := decodePause(p.Workflow, raw)
			out = cur
			return err
		}
		np := p
		np.Since = s.now()
		out = &np
		return putJSON(b, []byte(p.Workflow), np)
	})
	if err != nil {
		return nil, fmt.Errorf("pause workflow %q: %w", p.Workflow, err)
	}
	return out, nil
}

// UnpauseWorkflow implements store.Store.
func (s *Store) UnpauseWorkflow(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	var out *weft.WorkflowPause
	defer s.catalog.changed()
	err := s.write(ctx, func(tx kvTx) error {
		b := tx.Bucket(bPauses)
		raw := b.Get([]byte(name))
		if raw == nil {
			return refuse(store.NotFound("pause of workflow %q", name))
		}
		p, err := decodePause(name, raw)
		if err != nil {
			return err
		}
		out = p
		return b.Delete([]byte(name))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// WorkflowPauses implements store.Store, from the catalog cache.
func (s *Store) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	all, err := s.pauses(ctx)
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Values(all), func(a, b weft.WorkflowPause) int {
		return strings.Compare(a.Workflow, b.Workflow)
	}), nil
}

// GetWorkflowPause implements store.Store, from the catalog cache: a
// start reads it with its definition, and a workflow is seldom paused.
func (s *Store) GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	all, err := s.pauses(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := all[name]
	if !ok {
		return nil, store.NotFound("pause of workflow %q", name)
	}
	return &p, nil
}

// pauses returns every workflow pause by name, from the catalog cache when
// it holds them for the current generation. The map is the cache's: the
// caller must not change it.
func (s *Store) pauses(ctx context.Context) (map[string]weft.WorkflowPause, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gen := s.catalog.gen.Load()
	if all, ok := s.catalog.pauses.Get(struct{}{}, gen); ok {
		return all, nil
	}
	var all map[string]weft.WorkflowPause
	err := s.read(ctx, func(tx kvTx) error {
		all = map[string]weft.WorkflowPause{}
		return tx.Bucket(bPauses).ForEach(func(k, v []byte) error {
			p, err := decodePause(string(k), v)
			if err != nil {
				return err
			}
			all[string(k)] = *p
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	s.catalog.pauses.Put(struct{}{}, gen, all)
	return all, nil
}

// decodePause decodes the pause record raw of workflow name.
func decodePause(name string, raw []byte) (*weft.WorkflowPause, error) {
	var p weft.WorkflowPause
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("pause of workflow %q: corrupt record: %w", name, err)
	}
	return &p, nil
}
