package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/lock/local"
)

func TestRefreshFromDirectory(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "name: a\nsteps: [ { id: e, activity: kit.echo } ]\n")
	write("b.json", `{"name":"b","steps":[{"id":"e","activity":"kit.upper"}]}`)
	write("broken.yaml", "name: broken\nsteps: [ { id: e, activity: kit.nope } ]\n")
	write("notes.txt", "not a definition")
	ctx := context.Background()

	res, err := h.e.Refresh(ctx, dir, nil)
	if err != nil || res.Status != weft.Refreshed || len(res.Files) != 3 {
		t.Fatalf("Refresh: %+v, %v", res, err)
	}
	if f := res.Files[0]; f.Name != "a" || f.Version != 1 || !f.Created {
		t.Errorf("a.yaml: %+v", f)
	}
	if f := res.Files[2]; f.Name != "broken" || len(f.Problems) == 0 || f.Problems[0].Path == "" {
		t.Errorf("broken.yaml: %+v, want its problems with paths", f)
	}
	// Unchanged files make no new version; a changed one does.
	write("a.yaml", "name: a\nsteps: [ { id: e, activity: kit.echo, input: 2 } ]\n")
	res, err = h.e.Refresh(ctx, dir, []string{"a"})
	if err != nil || len(res.Files) != 1 || res.Files[0].Version != 2 || !res.Files[0].Created {
		t.Fatalf("Refresh of a: %+v, %v", res, err)
	}
	res, _ = h.e.Refresh(ctx, dir, []string{"b"})
	if len(res.Files) != 1 || res.Files[0].Created || res.Files[0].Version != 1 {
		t.Fatalf("Refresh of unchanged b: %+v", res)
	}
}

func TestRefreshAlreadyInProgress(t *testing.T) {
	t.Parallel()
	locks := local.New(local.Config{})
	h := newHost(t, withLocks(locks))
	ctx := context.Background()
	held, ok, err := locks.TryAcquire(ctx, engine.RefreshLockKey([]string{"b", "a"}), time.Minute)
	if err != nil || !ok {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	res, err := h.e.Refresh(ctx, t.TempDir(), []string{"a", "b"})
	if err != nil || res.Status != weft.RefreshInProgress {
		t.Fatalf("Refresh while the same scope is held: %+v, %v", res, err)
	}
	// Another scope is free.
	if res, err := h.e.Refresh(ctx, t.TempDir(), nil); err != nil || res.Status != weft.Refreshed {
		t.Fatalf("Refresh of all: %+v, %v", res, err)
	}
}
