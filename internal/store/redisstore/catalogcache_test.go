package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
)

// Two stores on one server, as two nodes: each caches the latest
// definitions and current plugins it read, and sees every change the
// other makes at its next read.
func TestCatalogCacheFollowsOtherNodesChanges(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := srv.Client(t)
	a := open(t, c, "cache:", time.Now)
	b := open(t, srv.Client(t), "cache:", time.Now)
	ctx := context.Background()

	if _, _, err := a.PutDefinition(ctx, "wf", "h1", []byte("one")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: strings.Repeat("1", 64), Size: 1}); err != nil {
		t.Fatal(err)
	}
	definition := func(s interface {
		GetDefinition(context.Context, string, int) (*weft.Definition, error)
	}, version int) string {
		t.Helper()
		d, err := s.GetDefinition(ctx, "wf", version)
		if errors.Is(err, weft.ErrNotFound) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(d.Version) + ":" + string(d.Source)
	}
	plugin := func(s interface {
		CurrentPlugin(context.Context, string) (*weft.PluginRecord, error)
	}) string {
		t.Helper()
		r, err := s.CurrentPlugin(ctx, "kit")
		if errors.Is(err, weft.ErrNotFound) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return r.Version[:1]
	}

	// Read twice: the second read runs no script.
	if got := definition(a, 0); got != "1:one" {
		t.Fatalf("latest definition %s, want 1:one", got)
	}
	if got := plugin(a); got != "1" {
		t.Fatalf("current plugin %s, want 1", got)
	}
	before, _ := commandCalls(t, c)
	if got, gotP := definition(a, 0), plugin(a); got != "1:one" || gotP != "1" {
		t.Fatalf("cached reads: %s, %s", got, gotP)
	}
	if n, _ := commandCalls(t, c); n != before {
		t.Errorf("cached reads ran %d scripts, want none", n-before)
	}

	// A start's cached read makes no round trip at all, and hands out the
	// generation its create is checked against.
	uses := func(*weft.Definition) ([]string, error) { return []string{"kit"}, nil }
	if _, err := a.ResolveStart(ctx, "wf", uses, true); err != nil {
		t.Fatal(err)
	}
	_, allBefore := commandCalls(t, c)
	sc, err := a.ResolveStart(ctx, "wf", uses, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, all := commandCalls(t, c); all != allBefore {
		t.Errorf("a cached ResolveStart ran %d commands, want none", all-allBefore)
	}
	if sc.Generation == "" || sc.Definition.Version != 1 || sc.Plugins["kit"].Version[:1] != "1" {
		t.Errorf("cached ResolveStart: %+v, want version 1, kit 1 and a generation", sc)
	}

	// Every change through b is seen by a's next read.
	steps := []struct {
		what        string
		change      func() error
		def, plugin string
	}{
		{"a new version", func() error { _, _, err := b.PutDefinition(ctx, "wf", "h2", []byte("two")); return err }, "2:two", "1"},
		{"a new plugin version", func() error {
			_, err := b.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: strings.Repeat("2", 64), Size: 1})
			return err
		}, "2:two", "2"},
		{"the plugin deleted", func() error { return b.DeletePlugin(ctx, "kit") }, "2:two", "none"},
		{"the definition deleted", func() error { return b.DeleteDefinition(ctx, "wf") }, "none", "none"},
		{"saved again", func() error { _, _, err := b.PutDefinition(ctx, "wf", "h3", []byte("three")); return err }, "3:three", "none"},
	}
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		if got := definition(a, 0); got != st.def {
			t.Errorf("after %s: latest definition %s, want %s", st.what, got, st.def)
		}
		if got := plugin(a); got != st.plugin {
			t.Errorf("after %s: current plugin %s, want %s", st.what, got, st.plugin)
		}
	}
	// A version by number, deleted with its definition.
	if got := definition(a, 2); got != "none" {
		t.Errorf("version 2 after the delete: %s, want none", got)
	}
}
