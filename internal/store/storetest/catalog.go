package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func testDefinitions(t *testing.T, h *harness) {
	steps := []struct {
		name        string
		hash        string
		wantVersion int
		wantCreated bool
	}{
		{"first", "h1", 1, true},
		{"same hash", "h1", 1, false},
		{"changed", "h2", 2, true},
		{"same again", "h2", 2, false},
		{"back to the first content", "h1", 3, true},
	}
	for _, st := range steps {
		h.clock.Advance(time.Second)
		v, created, err := h.s.PutDefinition(ctx(t), "order", st.hash, []byte("source "+st.hash))
		must(t, st.name, err)
		if v != st.wantVersion || created != st.wantCreated {
			t.Errorf("%s: version, created = %d, %v, want %d, %v", st.name, v, created, st.wantVersion, st.wantCreated)
		}
	}
	gets := []struct {
		version  int
		wantHash string
		wantV    int
		wantAt   time.Time
	}{
		{0, "h1", 3, Epoch.Add(5 * time.Second)},
		{1, "h1", 1, Epoch.Add(time.Second)},
		{2, "h2", 2, Epoch.Add(3 * time.Second)},
		{3, "h1", 3, Epoch.Add(5 * time.Second)},
	}
	for _, g := range gets {
		d, err := h.s.GetDefinition(ctx(t), "order", g.version)
		must(t, fmt.Sprint("GetDefinition ", g.version), err)
		if d.Name != "order" || d.Version != g.wantV || d.Hash != g.wantHash || string(d.Source) != "source "+g.wantHash {
			t.Errorf("GetDefinition(%d) = %+v", g.version, d)
		}
		wantTime(t, fmt.Sprint("CreatedAt of ", g.version), d.CreatedAt, g.wantAt)
	}
	for _, v := range []int{4, 0} {
		_, err := h.s.GetDefinition(ctx(t), "nope", v)
		wantErr(t, "GetDefinition of a missing name", err, weft.ErrNotFound)
	}
	_, err := h.s.GetDefinition(ctx(t), "order", 4)
	wantErr(t, "GetDefinition of a missing version", err, weft.ErrNotFound)
	_, err = h.s.GetDefinition(ctx(t), "order", -1)
	wantErr(t, "GetDefinition(-1)", err, weft.ErrInvalid)
	_, _, err = h.s.PutDefinition(ctx(t), "", "h", nil)
	wantErr(t, "PutDefinition without a name", err, weft.ErrInvalid)
	_, _, err = h.s.PutDefinition(ctx(t), "x", "", nil)
	wantErr(t, "PutDefinition without a hash", err, weft.ErrInvalid)

	must(t, "DeleteDefinition", h.s.DeleteDefinition(ctx(t), "order"))
	for _, v := range []int{0, 1, 3} {
		_, err := h.s.GetDefinition(ctx(t), "order", v)
		wantErr(t, fmt.Sprint("GetDefinition after delete ", v), err, weft.ErrNotFound)
	}
	wantErr(t, "DeleteDefinition again", h.s.DeleteDefinition(ctx(t), "order"), weft.ErrNotFound)
	// Versions are never reused: instances may still name version 3.
	v, created, err := h.s.PutDefinition(ctx(t), "order", "h1", []byte("source h1"))
	must(t, "PutDefinition after delete", err)
	if v != 4 || !created {
		t.Errorf("PutDefinition after delete = %d, %v, want 4, true", v, created)
	}
}

// testListDefinitionVersions: the versions kept, latest first, without
// their source; after a deletion only those saved since, whose numbers go
// on from the last; a name that is a prefix of another lists its own.
func testListDefinitionVersions(t *testing.T, h *harness) {
	type ver struct {
		v    int
		hash string
	}
	want := func(what, name string, wants ...ver) {
		t.Helper()
		got, err := h.s.ListDefinitionVersions(ctx(t), name)
		must(t, what, err)
		if len(got) != len(wants) {
			t.Fatalf("%s: ListDefinitionVersions(%q) = %+v, want %d versions", what, name, got, len(wants))
		}
		for i, w := range wants {
			g := got[i]
			if g.Name != name || g.Version != w.v || g.Hash != w.hash || g.Source != nil {
				t.Errorf("%s: version %d listed as %+v, want version %d, hash %s, no source", what, i, g, w.v, w.hash)
			}
			d, err := h.s.GetDefinition(ctx(t), name, w.v)
			must(t, what, err)
			wantTime(t, fmt.Sprintf("%s: CreatedAt of version %d", what, w.v), g.CreatedAt, d.CreatedAt)
		}
	}
	_, err := h.s.ListDefinitionVersions(ctx(t), "order")
	wantErr(t, "ListDefinitionVersions of a missing name", err, weft.ErrNotFound)
	put := func(name, hash string) {
		t.Helper()
		h.clock.Advance(time.Second)
		_, _, err := h.s.PutDefinition(ctx(t), name, hash, []byte("source "+hash))
		must(t, "PutDefinition", err)
	}
	put("order", "h1")
	put("order", "h2")
	put("order", "h2") // unchanged: no version
	put("orderly", "x1")
	want("two versions", "order", ver{2, "h2"}, ver{1, "h1"})
	want("another name", "orderly", ver{1, "x1"})

	must(t, "DeleteDefinition", h.s.DeleteDefinition(ctx(t), "order"))
	_, err = h.s.ListDefinitionVersions(ctx(t), "order")
	wantErr(t, "ListDefinitionVersions after delete", err, weft.ErrNotFound)
	put("order", "h1")
	put("order", "h3")
	want("saved again", "order", ver{4, "h3"}, ver{3, "h1"})

	// More than nine, so that an order by text (10 before 9) shows.
	for i := range 9 {
		put("orderly", fmt.Sprint("x", i+2))
	}
	got, err := h.s.ListDefinitionVersions(ctx(t), "orderly")
	must(t, "ListDefinitionVersions of ten", err)
	for i, d := range got {
		if d.Version != 10-i {
			t.Fatalf("ten versions listed in the order %+v, want 10 down to 1", got)
		}
	}
}

func testListDefinitions(t *testing.T, h *harness) {
	for _, name := range []string{"c", "a", "b", "ab", "d"} {
		_, _, err := h.s.PutDefinition(ctx(t), name, "h1", []byte(name))
		must(t, "PutDefinition", err)
	}
	_, _, err := h.s.PutDefinition(ctx(t), "b", "h2", []byte("b2"))
	must(t, "PutDefinition", err)
	must(t, "DeleteDefinition", h.s.DeleteDefinition(ctx(t), "d"))
	var got []string
	cursor := ""
	for range 10 {
		page, next, err := h.s.ListDefinitions(ctx(t), cursor, 2)
		must(t, "ListDefinitions", err)
		if len(page) > 2 {
			t.Errorf("page of %d", len(page))
		}
		for _, d := range page {
			got = append(got, fmt.Sprintf("%s@%d:%s", d.Name, d.Version, d.Source))
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	wantStrings(t, "definitions", got, []string{"a@1:a", "ab@1:ab", "b@2:b2", "c@1:c"})
	_, _, err = h.s.ListDefinitions(ctx(t), "!!bad!!", 2)
	wantErr(t, "ListDefinitions with a bad cursor", err, weft.ErrInvalid)
}

func versions(p *weft.Plugin) []string {
	var out []string
	for _, v := range p.Versions {
		out = append(out, v.Version)
	}
	return out
}

func testPlugins(t *testing.T, h *harness) {
	steps := []struct {
		name         string
		version      string
		wantCreated  bool
		wantVersions []string
	}{
		{"first", "v1", true, []string{"v1"}},
		{"same content", "v1", false, []string{"v1"}},
		{"new version", "v2", true, []string{"v2", "v1"}},
		{"back to v1", "v1", true, []string{"v1", "v2"}},
	}
	for _, st := range steps {
		now := h.clock.Advance(time.Second)
		created, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: st.version, Size: 100, Activities: []string{"charge", "refund"}})
		must(t, st.name, err)
		if created != st.wantCreated {
			t.Errorf("%s: created = %v, want %v", st.name, created, st.wantCreated)
		}
		p, err := h.s.GetPlugin(ctx(t), "pay")
		must(t, "GetPlugin", err)
		wantStrings(t, st.name+": versions", versions(p), st.wantVersions)
		if c := p.Current; c.Name != "pay" || c.Version != st.version || c.Size != 100 || len(c.Activities) != 2 {
			t.Errorf("%s: current = %+v", st.name, c)
		}
		if st.wantCreated {
			wantTime(t, st.name+": CreatedAt", p.Current.CreatedAt, now)
		}
		cur, err := h.s.CurrentPlugin(ctx(t), "pay")
		must(t, "CurrentPlugin", err)
		if cur.Version != p.Current.Version || cur.Size != 100 || len(cur.Activities) != 2 || !cur.CreatedAt.Equal(p.Current.CreatedAt) {
			t.Errorf("%s: CurrentPlugin = %+v, GetPlugin's current %+v", st.name, cur, p.Current)
		}
	}
	_, err := h.s.GetPlugin(ctx(t), "nope")
	wantErr(t, "GetPlugin missing", err, weft.ErrNotFound)
	_, err = h.s.CurrentPlugin(ctx(t), "nope")
	wantErr(t, "CurrentPlugin missing", err, weft.ErrNotFound)
	_, err = h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "x"})
	wantErr(t, "PutPlugin without a version", err, weft.ErrInvalid)

	for _, name := range []string{"zip", "auth", "mail"} {
		_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: name, Version: "h-" + name})
		must(t, "PutPlugin", err)
	}
	var got []string
	cursor := ""
	for range 10 {
		page, next, err := h.s.ListPlugins(ctx(t), cursor, 3)
		must(t, "ListPlugins", err)
		for _, p := range page {
			got = append(got, p.Name+"@"+p.Version)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	wantStrings(t, "plugins", got, []string{"auth@h-auth", "mail@h-mail", "pay@v1", "zip@h-zip"})

	must(t, "DeletePlugin", h.s.DeletePlugin(ctx(t), "zip"))
	_, err = h.s.GetPlugin(ctx(t), "zip")
	wantErr(t, "GetPlugin after delete", err, weft.ErrNotFound)
	wantErr(t, "DeletePlugin again", h.s.DeletePlugin(ctx(t), "zip"), weft.ErrNotFound)
}

func testPinnedPluginCannotBeDeleted(t *testing.T, h *harness) {
	for _, v := range []string{"v1", "v2"} {
		_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: v})
		must(t, "PutPlugin", err)
	}
	_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "mail", Version: "m1"})
	must(t, "PutPlugin", err)

	// An old version pins too, and a pin of an unknown version is refused.
	in := instance("i", "w")
	in.Plugins = map[string]string{"pay": "v1", "mail": "m1"}
	h.commit(t, store.Commit{Instance: in})
	bad := instance("bad", "w")
	bad.Plugins = map[string]string{"pay": "v9"}
	_, err = h.s.Commit(ctx(t), store.Commit{Instance: bad})
	wantErr(t, "pinning an unknown version", err, weft.ErrNotFound)

	err = h.s.DeletePlugin(ctx(t), "pay")
	wantErr(t, "DeletePlugin while pinned", err, weft.ErrInUse)
	var iu *weft.InUseError
	if !errors.As(err, &iu) || iu.Plugin != "pay" || len(iu.Instances) != 1 || iu.Instances[0] != "i" {
		t.Errorf("error %v: want an *InUseError naming instance i", err)
	}
	if _, err := h.s.GetPlugin(ctx(t), "pay"); err != nil {
		t.Errorf("refused delete removed the plugin: %v", err)
	}

	// Suspended still pins; terminal does not; a terminal instance may keep
	// naming a deleted plugin.
	for _, st := range []struct {
		status  weft.Status
		wantErr error
	}{
		{weft.StatusSuspended, weft.ErrInUse},
		{weft.StatusCompleted, nil},
	} {
		in = h.get(t, "i")
		in.Status = st.status
		h.commit(t, store.Commit{Instance: in})
		err := h.s.DeletePlugin(ctx(t), "pay")
		if st.wantErr != nil {
			wantErr(t, "DeletePlugin "+string(st.status), err, st.wantErr)
		} else {
			must(t, "DeletePlugin "+string(st.status), err)
		}
	}
	in = h.get(t, "i")
	in.Vars = []byte(`{"after": true}`)
	h.commit(t, store.Commit{Instance: in})

	// A pin only of mail now: deleting mail is refused, for a new instance too.
	j := instance("j", "w")
	j.Plugins = map[string]string{"mail": "m1"}
	j.Status = weft.StatusRunning
	h.commit(t, store.Commit{Instance: j})
	wantErr(t, "DeletePlugin mail", h.s.DeletePlugin(ctx(t), "mail"), weft.ErrInUse)
}

// testResolveStart: ResolveStart reads a start's definition and plugins;
// a create carrying a Generation it handed out is refused once the
// catalog changed, and writes nothing; an empty Generation is never
// refused for that.
func testResolveStart(t *testing.T, h *harness) {
	uses := func(names ...string) func(*weft.Definition) ([]string, error) {
		return func(*weft.Definition) ([]string, error) { return names, nil }
	}
	_, err := h.s.ResolveStart(ctx(t), "wf", func(*weft.Definition) ([]string, error) {
		t.Error("uses called for a workflow with no definition")
		return nil, nil
	}, true)
	wantErr(t, "ResolveStart of no workflow", err, weft.ErrNotFound)

	_, _, err = h.s.PutDefinition(ctx(t), "wf", "h1", []byte("one"))
	must(t, "PutDefinition", err)
	_, err = h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v1"})
	must(t, "PutPlugin", err)

	_, err = h.s.ResolveStart(ctx(t), "wf", uses("pay", "mail"), true)
	var pe *store.PluginError
	if !errors.As(err, &pe) || pe.Plugin != "mail" || !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("ResolveStart with a plugin not stored: %v, want a *PluginError naming mail, matching ErrNotFound", err)
	}
	boom := errors.New("the definition does not compile")
	if _, err := h.s.ResolveStart(ctx(t), "wf", func(*weft.Definition) ([]string, error) { return nil, boom }, true); !errors.Is(err, boom) {
		t.Fatalf("ResolveStart with uses failing: %v, want its error", err)
	}

	resolve := func(cached bool) *store.StartCatalog {
		t.Helper()
		sc, err := h.s.ResolveStart(ctx(t), "wf", uses("pay"), cached)
		must(t, "ResolveStart", err)
		return sc
	}
	check := func(what string, sc *store.StartCatalog, version int, plugin string) {
		t.Helper()
		if sc.Definition == nil || sc.Definition.Name != "wf" || sc.Definition.Version != version || len(sc.Plugins) != 1 || sc.Plugins["pay"] == nil || sc.Plugins["pay"].Version != plugin {
			t.Fatalf("%s: %+v, want wf version %d with pay %s", what, sc, version, plugin)
		}
	}
	check("current", resolve(false), 1, "v1")
	resolve(true) // the cache is filled
	cached := resolve(true)
	check("cached", cached, 1, "v1")

	create := func(id string, sc *store.StartCatalog) error {
		in := instance(id, "wf")
		in.Version = sc.Definition.Version
		in.Plugins = map[string]string{"pay": sc.Plugins["pay"].Version}
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in, Catalog: sc.Generation})
		return err
	}
	must(t, "a create from the catalog as read", create("a", cached))

	// Each change refuses a create from what was read before it.
	changes := []struct {
		what   string
		change func() error
	}{
		{"a plugin version", func() error {
			_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v2"})
			return err
		}},
		{"a definition version", func() error { _, _, err := h.s.PutDefinition(ctx(t), "wf", "h2", []byte("two")); return err }},
		{"another plugin deleted", func() error {
			if _, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "mail", Version: "m1"}); err != nil {
				return err
			}
			return h.s.DeletePlugin(ctx(t), "mail")
		}},
	}
	for i, c := range changes {
		before := resolve(true)
		must(t, c.what, c.change())
		id := fmt.Sprintf("stale%d", i)
		err := create(id, before)
		if before.Generation == "" {
			must(t, "a create from a current answer after "+c.what, err)
			continue
		}
		wantErr(t, "a create from before "+c.what, err, store.ErrCatalogChanged)
		_, err = h.s.GetInstance(ctx(t), id)
		wantErr(t, "the refused create", err, weft.ErrNotFound)
		after := resolve(false)
		must(t, "a create from the catalog read again", create(id, after))
	}
	check("after the changes", resolve(false), 2, "v2")

	// A generation the store did not hand out; only a create carries one.
	err = create("bogus", &store.StartCatalog{Definition: &weft.Definition{Name: "wf", Version: 2}, Plugins: map[string]*weft.PluginRecord{"pay": {Version: "v2"}}, Generation: "bogus"})
	wantErr(t, "a create with a generation never handed out", err, store.ErrCatalogChanged)
	in := h.get(t, "a")
	_, err = h.s.Commit(ctx(t), store.Commit{Instance: in, Catalog: "x"})
	wantErr(t, "an update with a generation", err, weft.ErrInvalid)
}
