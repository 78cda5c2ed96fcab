package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
)

// Refresh loads definitions from the files of dir (*.yaml, *.yml, *.json)
// and saves each that changed as a new version. With names, only the
// definitions so named are saved. It holds the lock
// workflow-definitions-refresh:all, or :<sorted,comma-joined names>, taken
// with zero wait: when another refresh of the same scope holds it, Refresh
// returns weft.RefreshInProgress and does nothing (docs/cluster.md, "Singleton
// work"). A file that does not
// parse or validate is reported with its problems and does not stop the
// others.
func (e *Engine) Refresh(ctx context.Context, dir string, names []string) (*weft.RefreshResult, error) {
	lease, ok, err := e.locks.TryAcquire(ctx, RefreshLockKey(names), time.Minute)
	if err != nil {
		return nil, fmt.Errorf("engine: refresh lock: %w", err)
	}
	if !ok {
		return &weft.RefreshResult{Status: weft.RefreshInProgress}, nil
	}
	defer lease.Release(context.WithoutCancel(ctx))

	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("engine: reading workflows_dir: %w", err)
	}
	res := &weft.RefreshResult{Status: weft.Refreshed}
	for _, ent := range entries {
		ext := strings.ToLower(filepath.Ext(ent.Name()))
		if ent.IsDir() || (ext != ".yaml" && ext != ".yml" && ext != ".json") {
			continue
		}
		path := filepath.Join(dir, ent.Name())
		f := weft.RefreshedFile{File: ent.Name()}
		src, err := os.ReadFile(path)
		if err != nil {
			f.Error = err.Error()
			res.Files = append(res.Files, f)
			continue
		}
		if len(names) > 0 {
			def, err := definition.Parse(src)
			if err == nil && !slices.Contains(names, def.Name) {
				continue
			}
		}
		d, created, err := e.SaveDefinition(ctx, src)
		var ve *weft.DefinitionError
		switch {
		case errors.As(err, &ve):
			f.Name, f.Problems = ve.Name, ve.Problems
		case err != nil:
			f.Error = err.Error()
		default:
			f.Name, f.Version, f.Created = d.Name, d.Version, created
		}
		res.Files = append(res.Files, f)
	}
	sort.Slice(res.Files, func(i, j int) bool { return res.Files[i].File < res.Files[j].File })
	return res, nil
}
