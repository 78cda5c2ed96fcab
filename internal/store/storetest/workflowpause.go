package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// workflowPauseTests are the subtests of the workflow pauses, run by
// Exercise.
var workflowPauseTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"WorkflowPause", testWorkflowPause},
	{"WorkflowPauseInvalid", testWorkflowPauseInvalid},
	{"WorkflowPauseResolveStart", testWorkflowPauseResolveStart},
	{"WorkflowPauseCatalogRace", testWorkflowPauseCatalogRace},
	{"InstanceHold", testInstanceHold},
}

// pauseOp is who paused, and why, in these tests.
func pauseOp(actor, reason string) weft.Operation {
	return weft.Operation{Actor: actor, Reason: reason, At: Epoch.Add(-time.Second)}
}

// wantPause fails unless p is the pause of workflow since then by op.
func wantPause(t *testing.T, what string, p *weft.WorkflowPause, workflow string, since time.Time, op weft.Operation) {
	t.Helper()
	if p == nil {
		t.Fatalf("%s: no pause, want %s's", what, workflow)
	}
	if p.Workflow != workflow || p.Op.Actor != op.Actor || p.Op.Reason != op.Reason || p.Op.Batch != op.Batch || !p.Op.At.Equal(op.At) {
		t.Errorf("%s: %+v, want the pause of %s by %+v", what, *p, workflow, op)
	}
	wantTime(t, what+": Since", p.Since, since)
}

// testWorkflowPause: a pause is recorded at the store's now, whether or
// not the workflow has a definition; a second pause changes nothing and
// answers the first; the list is by name; an unpause answers the pause it
// removed, and a second one is ErrNotFound; pauses survive a restart.
func testWorkflowPause(t *testing.T, h *harness) {
	pauses := func(what string, want ...string) {
		t.Helper()
		all, err := h.s.WorkflowPauses(ctx(t))
		must(t, what+": WorkflowPauses", err)
		var got []string
		for _, p := range all {
			got = append(got, p.Workflow+"@"+p.Op.Actor)
		}
		wantStrings(t, what+": pauses", got, want)
	}
	pauses("none yet")
	_, err := h.s.GetWorkflowPause(ctx(t), "order")
	wantErr(t, "GetWorkflowPause of a workflow not paused", err, weft.ErrNotFound)

	_, _, err = h.s.PutDefinition(ctx(t), "order", "h1", []byte("steps: []"))
	must(t, "PutDefinition", err)
	alice := pauseOp("alice", "carrier outage")
	first := h.clock.Advance(time.Second)
	p, err := h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "order", Op: alice, Since: Epoch.Add(time.Hour)})
	must(t, "PauseWorkflow", err)
	wantPause(t, "PauseWorkflow", p, "order", first, alice)

	// Again, by someone else: the first pause stays.
	h.clock.Advance(time.Second)
	bob := pauseOp("bob", "again")
	p, err = h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "order", Op: bob})
	must(t, "PauseWorkflow again", err)
	wantPause(t, "PauseWorkflow again", p, "order", first, alice)
	p, err = h.s.GetWorkflowPause(ctx(t), "order")
	must(t, "GetWorkflowPause", err)
	wantPause(t, "GetWorkflowPause", p, "order", first, alice)

	// Workflows without a definition, a name that is a prefix of another.
	for _, name := range []string{"zeta", "ord", "a.b-c"} {
		h.clock.Advance(time.Second)
		_, err := h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: name, Op: bob})
		must(t, "PauseWorkflow "+name, err)
	}
	pauses("four", "a.b-c@bob", "ord@bob", "order@alice", "zeta@bob")
	all, err := h.s.WorkflowPauses(ctx(t))
	must(t, "WorkflowPauses", err)
	wantPause(t, "listed", &all[2], "order", first, alice)

	h.s = h.reopen()
	pauses("after a restart", "a.b-c@bob", "ord@bob", "order@alice", "zeta@bob")
	p, err = h.s.GetWorkflowPause(ctx(t), "order")
	must(t, "GetWorkflowPause after a restart", err)
	wantPause(t, "GetWorkflowPause after a restart", p, "order", first, alice)

	p, err = h.s.UnpauseWorkflow(ctx(t), "order")
	must(t, "UnpauseWorkflow", err)
	wantPause(t, "UnpauseWorkflow", p, "order", first, alice)
	_, err = h.s.UnpauseWorkflow(ctx(t), "order")
	wantErr(t, "UnpauseWorkflow again", err, weft.ErrNotFound)
	_, err = h.s.GetWorkflowPause(ctx(t), "order")
	wantErr(t, "GetWorkflowPause after the unpause", err, weft.ErrNotFound)
	_, err = h.s.UnpauseWorkflow(ctx(t), "never")
	wantErr(t, "UnpauseWorkflow of a workflow never paused", err, weft.ErrNotFound)
	pauses("one unpaused", "a.b-c@bob", "ord@bob", "zeta@bob")

	// Paused again: a pause of its own, from now.
	again := h.clock.Advance(time.Second)
	p, err = h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "order", Op: bob})
	must(t, "PauseWorkflow after the unpause", err)
	wantPause(t, "PauseWorkflow after the unpause", p, "order", again, bob)
	pauses("paused again", "a.b-c@bob", "ord@bob", "order@bob", "zeta@bob")
}

// testWorkflowPauseInvalid: a name weft.CheckID refuses is ErrInvalid and
// pauses nothing; a done context and a closed store do nothing.
func testWorkflowPauseInvalid(t *testing.T, h *harness) {
	for _, name := range []string{"", strings.Repeat("w", weft.MaxIDLen+1)} {
		_, err := h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: name})
		wantErr(t, fmt.Sprintf("PauseWorkflow of a name of %d bytes", len(name)), err, weft.ErrInvalid)
	}
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"PauseWorkflow", func(c context.Context) error {
			_, err := h.s.PauseWorkflow(c, weft.WorkflowPause{Workflow: "w"})
			return err
		}},
		{"UnpauseWorkflow", func(c context.Context) error { _, err := h.s.UnpauseWorkflow(c, "w"); return err }},
		{"WorkflowPauses", func(c context.Context) error { _, err := h.s.WorkflowPauses(c); return err }},
		{"GetWorkflowPause", func(c context.Context) error { _, err := h.s.GetWorkflowPause(c, "w"); return err }},
	}
	for _, cl := range calls {
		wantErr(t, cl.name+" with a done context", cl.call(c), context.Canceled)
	}
	all, err := h.s.WorkflowPauses(ctx(t))
	must(t, "WorkflowPauses", err)
	if len(all) != 0 {
		t.Errorf("pauses after refused calls: %+v, want none", all)
	}
	must(t, "Close", h.s.Close())
	for _, cl := range calls[:2] {
		wantErr(t, cl.name+" after Close", cl.call(ctx(t)), weft.ErrClosed)
	}
}

// testWorkflowPauseResolveStart: a start reads its workflow's pause with
// its definition, current or cached, and nil once it is unpaused; a pause
// of another workflow is not its.
func testWorkflowPauseResolveStart(t *testing.T, h *harness) {
	_, _, err := h.s.PutDefinition(ctx(t), "wf", "h1", []byte("one"))
	must(t, "PutDefinition", err)
	_, err = h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v1"})
	must(t, "PutPlugin", err)
	uses := func(*weft.Definition) ([]string, error) { return []string{"pay"}, nil }
	// resolve reads the catalog current, then cached twice (the first
	// may fill the cache), and checks each answer's pause.
	resolve := func(what string, want *weft.WorkflowPause) {
		t.Helper()
		for i, cached := range []bool{false, true, true} {
			sc, err := h.s.ResolveStart(ctx(t), "wf", uses, cached)
			must(t, what+": ResolveStart", err)
			if sc.Definition == nil || sc.Definition.Version != 1 || sc.Plugins["pay"] == nil {
				t.Fatalf("%s: ResolveStart %d (cached %v) = %+v, want wf version 1 with pay", what, i, cached, sc)
			}
			w := fmt.Sprintf("%s: ResolveStart %d (cached %v)", what, i, cached)
			if want == nil {
				if sc.Paused != nil {
					t.Errorf("%s: paused by %+v, want not paused", w, *sc.Paused)
				}
				continue
			}
			wantPause(t, w, sc.Paused, want.Workflow, want.Since, want.Op)
		}
	}
	resolve("never paused", nil)

	h.clock.Advance(time.Second)
	_, err = h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "other", Op: pauseOp("bob", "")})
	must(t, "PauseWorkflow other", err)
	resolve("another workflow paused", nil)

	h.clock.Advance(time.Second)
	p, err := h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "wf", Op: pauseOp("alice", "bad release")})
	must(t, "PauseWorkflow", err)
	resolve("paused", p)

	_, err = h.s.UnpauseWorkflow(ctx(t), "wf")
	must(t, "UnpauseWorkflow", err)
	resolve("unpaused", nil)
}

// testWorkflowPauseCatalogRace: a create made from a catalog read before a
// pause (or an unpause) carries a Generation that the commit refuses, as
// after a definition's save (testResolveStart), and writes nothing; read
// again, the catalog says what changed and the create commits. An answer
// without a Generation was current, and is never refused for that.
func testWorkflowPauseCatalogRace(t *testing.T, h *harness) {
	_, _, err := h.s.PutDefinition(ctx(t), "wf", "h1", []byte("one"))
	must(t, "PutDefinition", err)
	_, err = h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v1"})
	must(t, "PutPlugin", err)
	uses := func(*weft.Definition) ([]string, error) { return []string{"pay"}, nil }
	resolve := func(cached bool) *store.StartCatalog {
		t.Helper()
		sc, err := h.s.ResolveStart(ctx(t), "wf", uses, cached)
		must(t, "ResolveStart", err)
		return sc
	}
	create := func(id string, sc *store.StartCatalog) error {
		in := instance(id, "wf")
		in.Version = sc.Definition.Version
		in.Plugins = map[string]string{"pay": sc.Plugins["pay"].Version}
		if sc.Paused != nil {
			in.Hold = &weft.Hold{Since: h.clock.Now()}
		}
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in, Catalog: sc.Generation})
		return err
	}
	resolve(false)
	resolve(true) // the cache is filled
	must(t, "a create from the catalog as read", create("a", resolve(true)))

	changes := []struct {
		what       string
		change     func() error
		wantPaused bool
	}{
		{"a pause", func() error {
			_, err := h.s.PauseWorkflow(ctx(t), weft.WorkflowPause{Workflow: "wf", Op: pauseOp("alice", "")})
			return err
		}, true},
		{"an unpause", func() error { _, err := h.s.UnpauseWorkflow(ctx(t), "wf"); return err }, false},
	}
	for i, c := range changes {
		resolve(false)
		before := resolve(true)
		if (before.Paused != nil) == c.wantPaused {
			t.Fatalf("before %s: the catalog says paused %v", c.what, before.Paused != nil)
		}
		must(t, c.what, c.change())
		id := fmt.Sprintf("stale%d", i)
		err := create(id, before)
		if before.Generation == "" {
			must(t, "a create from a current answer before "+c.what, err)
			continue
		}
		wantErr(t, "a create from before "+c.what, err, store.ErrCatalogChanged)
		_, err = h.s.GetInstance(ctx(t), id)
		wantErr(t, "the refused create", err, weft.ErrNotFound)
		after := resolve(false)
		if (after.Paused != nil) != c.wantPaused {
			t.Fatalf("after %s: the catalog says paused %v, want %v", c.what, after.Paused != nil, c.wantPaused)
		}
		must(t, "a create from the catalog read again", create(id, after))
		if got := h.get(t, id); (got.Hold != nil) != c.wantPaused {
			t.Errorf("the create after %s: Hold %+v, want held %v", c.what, got.Hold, c.wantPaused)
		}
	}
}

// testInstanceHold: an instance's Hold is kept by a create, read back by
// GetInstance and ListInstances, and removed by a commit without it.
func testInstanceHold(t *testing.T, h *harness) {
	since := Epoch.Add(-time.Minute)
	held := instance("held", "wf")
	held.Hold = &weft.Hold{Since: since}
	h.create(t, held)
	h.clock.Advance(time.Second)
	h.create(t, instance("free", "wf"))

	wantHold := func(what string, in *weft.Instance, want bool) {
		t.Helper()
		switch {
		case (in.Hold != nil) != want:
			t.Errorf("%s: instance %s has Hold %+v, want held %v", what, in.ID, in.Hold, want)
		case want:
			wantTime(t, what+": Hold.Since", in.Hold.Since, since)
		}
	}
	wantHold("GetInstance", h.get(t, "held"), true)
	wantHold("GetInstance", h.get(t, "free"), false)
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Workflow: "wf"})
	must(t, "ListInstances", err)
	if len(items) != 2 || items[0].ID != "held" || items[1].ID != "free" {
		t.Fatalf("ListInstances = %+v, want held and free", items)
	}
	wantHold("ListInstances", &items[0], true)
	wantHold("ListInstances", &items[1], false)

	// Released: a commit without it.
	in := h.get(t, "held")
	in.Hold = nil
	h.commit(t, store.Commit{Instance: in})
	wantHold("GetInstance after the release", h.get(t, "held"), false)
	items, _, err = h.s.ListInstances(ctx(t), weft.InstanceFilter{Workflow: "wf", Status: weft.StatusPending})
	must(t, "ListInstances after the release", err)
	for i := range items {
		wantHold("ListInstances after the release", &items[i], false)
	}
}
