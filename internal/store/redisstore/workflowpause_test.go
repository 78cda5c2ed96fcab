package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// Two stores on one server, as two nodes: a pause or an unpause made
// through one is seen by the other's next current read, refuses a create
// the other made from its cache before, and a start's cached read of a
// pause costs no round trip once the cache holds it.
func TestWorkflowPauseSeenByOtherNodes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	a := open(t, c, "pause:", time.Now)
	b := open(t, srv.Client(t), "pause:", time.Now)
	ctx := context.Background()
	if _, _, err := a.PutDefinition(ctx, "wf", "h1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	uses := func(*weft.Definition) ([]string, error) { return nil, nil }
	resolve := func(cached bool) *store.StartCatalog {
		t.Helper()
		sc, err := a.ResolveStart(ctx, "wf", uses, cached)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	create := func(id string, sc *store.StartCatalog) error {
		_, err := a.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "wf", Version: 1, Status: weft.StatusPending}, Catalog: sc.Generation})
		return err
	}

	steps := []struct {
		what   string
		change func() error
		paused bool
	}{
		{"paused through b", func() error {
			_, err := b.PauseWorkflow(ctx, weft.WorkflowPause{Workflow: "wf", Op: weft.Operation{Actor: "alice"}})
			return err
		}, true},
		{"unpaused through b", func() error { _, err := b.UnpauseWorkflow(ctx, "wf"); return err }, false},
	}
	for i, st := range steps {
		resolve(false)
		before := resolve(true)
		if before.Generation == "" {
			t.Fatalf("before %s: the cached read handed out no generation", st.what)
		}
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if err := create(string(rune('a'+i)), before); !errors.Is(err, store.ErrCatalogChanged) {
			t.Errorf("%s: a create from a's cache before: %v, want ErrCatalogChanged", st.what, err)
		}
		if got := resolve(false); (got.Paused != nil) != st.paused {
			t.Errorf("%s: a reads paused %v, want %v", st.what, got.Paused != nil, st.paused)
		}
		_, allBefore := commandCalls(t, c)
		got := resolve(true)
		if _, all := commandCalls(t, c); all != allBefore {
			t.Errorf("%s: a cached ResolveStart ran %d commands, want none", st.what, all-allBefore)
		}
		if (got.Paused != nil) != st.paused || got.Generation == "" {
			t.Errorf("%s: a's cached read: %+v, want paused %v with a generation", st.what, got, st.paused)
		}
		if st.paused && got.Paused.Op.Actor != "alice" {
			t.Errorf("%s: paused by %+v, want alice", st.what, got.Paused.Op)
		}
	}
}
