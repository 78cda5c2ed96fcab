package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// The two-phase delete: begin refuses a missing plugin and otherwise
// moves the catalog to gen and hands out a barrier one order after it;
// finish deletes only while the catalog is still at gen and no instance
// pins the plugin, and moves the catalog past the barrier whether it
// deletes or answers in use; a change in between makes it delete nothing.
func TestPluginDeleteTwoPhase(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	tests := []struct {
		name    string
		absent  bool                          // no plugin is stored
		between func(t *testing.T, s *Store)  // between begin and finish
		users   []string                      // the pins the partitions name
		want    func(t *testing.T, err error) // finish's error
		kept    bool                          // the plugin is still stored after
	}{
		{name: "not found", absent: true},
		{name: "deleted", want: func(t *testing.T, err error) {
			if err != nil {
				t.Errorf("finish: %v", err)
			}
		}},
		{name: "in use", users: []string{"i1", "i2"}, kept: true, want: func(t *testing.T, err error) {
			var iu *weft.InUseError
			if !errors.As(err, &iu) || !errors.Is(err, weft.ErrInUse) || iu.Plugin != "p" || !slices.Equal(iu.Instances, []string{"i1", "i2"}) {
				t.Errorf("finish: %#v, want an *weft.InUseError naming p and i1, i2", err)
			}
		}},
		{name: "moved", kept: true,
			between: func(t *testing.T, s *Store) {
				if _, _, err := s.PutDefinition(t.Context(), "wf", "h1", []byte("src")); err != nil {
					t.Fatal(err)
				}
			},
			want: func(t *testing.T, err error) {
				if !errors.Is(err, errCatalogMoved) {
					t.Errorf("finish: %v, want errCatalogMoved", err)
				}
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := csOpen(t, c, fmt.Sprintf("{t:pdel-%d}", i), roleCatalog, clock.Now, 0)
			if !tt.absent {
				for _, v := range []string{"1.0.0", "1.1.0"} {
					if _, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "p", Version: v}); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := csGeneration(t, s)
			gen, barrier, err := s.beginPluginDelete(ctx, "p")
			if tt.absent {
				if !errors.Is(err, weft.ErrNotFound) || gen != "" || barrier != "" {
					t.Errorf("begin: %q, %q, %v; want not found", gen, barrier, err)
				}
				if g := csGeneration(t, s); g != before {
					t.Errorf("generation %q after a refused begin, want %q", g, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := csGeneration(t, s); g != gen || csOrder(t, gen) != csOrder(t, before)+1 || csOrder(t, barrier) != csOrder(t, gen)+1 {
				t.Fatalf("begin from %q: gen %q, barrier %q, catalog at %q; want the catalog at gen, one order after, and the barrier one after gen", before, gen, barrier, g)
			}
			if tt.between != nil {
				tt.between(t, s)
			}
			tt.want(t, s.finishPluginDelete(ctx, "p", gen, tt.users))
			after := csGeneration(t, s)
			if csOrder(t, after) <= csOrder(t, barrier) {
				t.Errorf("generation %q after finish, not past the barrier %q", after, barrier)
			}
			p, err := s.GetPlugin(ctx, "p")
			switch {
			case tt.kept && (err != nil || len(p.Versions) != 2):
				t.Errorf("plugin after finish: %+v, %v; want both versions kept", p, err)
			case !tt.kept && !errors.Is(err, weft.ErrNotFound):
				t.Errorf("plugin after finish: %+v, %v; want not found", p, err)
			}
			list, _, err := s.ListPlugins(ctx, "", 10)
			if err != nil || (len(list) == 1) != tt.kept {
				t.Errorf("ListPlugins after finish: %+v, %v; want listed %v", list, err, tt.kept)
			}
			if !tt.kept {
				if n, err := s.c.Exists(ctx, s.p+"p:p", s.p+"o:p").Result(); err != nil || n != 0 {
					t.Errorf("keys of the deleted plugin: %d, %v; want none", n, err)
				}
			}
		})
	}
}

// finishPluginDelete's in-use answer is DeletePlugin's: the API answers a
// partitioned store's refusal as a whole store's, word for word, and names
// at most weft.MaxInUseListed instances; pinsOf reads the pins a whole
// store's commits index, at most n.
func TestPluginDeleteInUseAsDeletePlugin(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	whole := csOpen(t, c, "{t:inuse-whole}", roleWhole, clock.Now, 0)
	cat := csOpen(t, c, "{t:inuse-cat}", roleCatalog, clock.Now, 0)
	var ids []string
	for i := range weft.MaxInUseListed + 2 {
		ids = append(ids, fmt.Sprintf("i%02d", i))
	}
	for _, s := range []*Store{whole, cat} {
		if _, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "p", Version: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		in := &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusSuspended, Plugins: map[string]string{"p": "1"}}
		if _, err := whole.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{0, 3, weft.MaxInUseListed, len(ids) + 5} {
		got, err := whole.pinsOf(ctx, "p", n)
		if err != nil || !slices.Equal(got, ids[:min(n, len(ids))]) {
			t.Errorf("pinsOf(p, %d) = %q, %v; want %q", n, got, err, ids[:min(n, len(ids))])
		}
	}
	if got, err := whole.pinsOf(ctx, "other", 10); err != nil || len(got) != 0 {
		t.Errorf("pinsOf(other) = %q, %v; want none", got, err)
	}
	users, err := whole.pinsOf(ctx, "p", weft.MaxInUseListed)
	if err != nil {
		t.Fatal(err)
	}
	want := whole.DeletePlugin(ctx, "p")
	gen, _, err := cat.beginPluginDelete(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	// The router may name more than the partitions' first pages hold.
	got := cat.finishPluginDelete(ctx, "p", gen, append(users, "x1", "x2"))
	var wi, gi *weft.InUseError
	if !errors.As(want, &wi) || !errors.As(got, &gi) || got.Error() != want.Error() || len(gi.Instances) != weft.MaxInUseListed {
		t.Errorf("finish: %v; want DeletePlugin's %v", got, want)
	}
}

// raiseGeneration moves the catalog past a generation it is not past
// already, whatever its own counter, and leaves it alone otherwise.
func TestRaiseGeneration(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := storetest.NewClock(storetest.Epoch)
	const at = 3 // the order the catalog is at before each case
	tests := []struct {
		name  string
		above string
		want  int // the order after; at when left alone
	}{
		{"behind", csGen(at - 1), at},
		{"without an order", "random", at},
		{"equal", csGen(at), at + 1},
		{"one ahead (a barrier)", csGen(at + 1), at + 2},
		{"far ahead", csGen(at + 50), at + 51},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := csOpen(t, c, fmt.Sprintf("{t:raise-%d}", i), roleCatalog, clock.Now, 0)
			for v := range at {
				if _, _, err := s.PutDefinition(ctx, "wf", fmt.Sprint("h", v), []byte("src")); err != nil {
					t.Fatal(err)
				}
			}
			before := csGeneration(t, s)
			if csOrder(t, before) != at {
				t.Fatalf("catalog at %q before, want order %d", before, at)
			}
			got, err := s.raiseGeneration(ctx, tt.above)
			if err != nil {
				t.Fatal(err)
			}
			if g := csGeneration(t, s); got != g || csOrder(t, g) != tt.want || (tt.want == at) != (g == before) {
				t.Errorf("raise above %q from %q: answered %q, catalog at %q; want order %d", tt.above, before, got, g, tt.want)
			}
			// The next change orders after it too.
			if _, _, err := s.PutDefinition(ctx, "wf", "next", []byte("src")); err != nil {
				t.Fatal(err)
			}
			if g := csGeneration(t, s); csOrder(t, g) != tt.want+1 {
				t.Errorf("next change at %q, want order %d", g, tt.want+1)
			}
		})
	}
}
