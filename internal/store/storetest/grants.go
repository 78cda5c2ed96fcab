package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

// grantsTests are the subtests of the grants methods, run by Exercise.
var grantsTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"Grants", testGrants},
	{"GrantsIfRevision", testGrantsIfRevision},
	{"GrantsInvalid", testGrantsInvalid},
	{"ListGrants", testListGrants},
	{"GrantsOutliveThePlugin", testGrantsOutliveThePlugin},
	{"GrantsRace", testGrantsRace},
	{"GrantsDurability", testGrantsDurability},
	{"GrantsCancelledContext", testGrantsCancelledContext},
	{"GrantsClosed", testGrantsClosed},
	{"PluginNeeds", testPluginNeeds},
}

// wantGrants fails unless g is the grants of plugin with doc at revision
// rev, updated at at.
func wantGrants(t *testing.T, what string, g *weft.Grants, plugin, doc string, rev uint64, at time.Time) {
	t.Helper()
	if g == nil {
		t.Fatalf("%s: no grants", what)
	}
	if g.Plugin != plugin || string(g.Document) != doc || g.Revision != rev {
		t.Errorf("%s = {plugin %q, document %q, revision %d}, want {%q, %q, %d}",
			what, g.Plugin, g.Document, g.Revision, plugin, doc, rev)
	}
	wantTime(t, what+": UpdatedAt", g.UpdatedAt, at)
}

func (h *harness) putGrants(t *testing.T, plugin, doc string) uint64 {
	t.Helper()
	rev, err := h.s.PutGrants(ctx(t), plugin, []byte(doc), weft.AnyRevision)
	if err != nil {
		t.Fatalf("PutGrants(%q, %q): %v", plugin, doc, err)
	}
	return rev
}

func (h *harness) getGrants(t *testing.T, plugin string) *weft.Grants {
	t.Helper()
	g, err := h.s.GetGrants(ctx(t), plugin)
	if err != nil {
		t.Fatalf("GetGrants(%q): %v", plugin, err)
	}
	return g
}

// testGrants: the round trip, and a revision that moves only when the
// document changes and is never reused, not even after a delete.
func testGrants(t *testing.T, h *harness) {
	const (
		a = `{"hosts":[{"host":"api.example.com"}]}`
		b = `{"hosts":[{"host":"api.example.com"}],"config":{"region":"eu"}}`
		// The store compares bytes, not JSON values.
		aSpaced = `{"hosts": [{"host": "api.example.com"}]}`
	)
	steps := []struct {
		name    string
		doc     string
		wantRev uint64
		wantDoc string
		wantAt  time.Duration // after Epoch
	}{
		{"first", a, 1, a, 1 * time.Second},
		{"equal document", a, 1, a, 1 * time.Second},
		{"changed", b, 2, b, 3 * time.Second},
		{"equal again", b, 2, b, 3 * time.Second},
		{"back to the first document", a, 3, a, 5 * time.Second},
		{"same JSON value, other bytes", aSpaced, 4, aSpaced, 6 * time.Second},
	}
	for _, st := range steps {
		h.clock.Advance(time.Second)
		if rev := h.putGrants(t, "pay", st.doc); rev != st.wantRev {
			t.Errorf("%s: revision %d, want %d", st.name, rev, st.wantRev)
		}
		wantGrants(t, st.name, h.getGrants(t, "pay"), "pay", st.wantDoc, st.wantRev, Epoch.Add(st.wantAt))
	}

	// The store keeps the document as given, any bytes, and keeps its own
	// copy.
	raw := []byte("not JSON \x00\xff\xfe at all")
	h.clock.Advance(time.Second)
	rev, err := h.s.PutGrants(ctx(t), "raw", raw, weft.AnyRevision)
	must(t, "PutGrants of arbitrary bytes", err)
	want := string(raw)
	raw[0] = 'N'
	wantGrants(t, "arbitrary bytes", h.getGrants(t, "raw"), "raw", want, rev, Epoch.Add(7*time.Second))
	g := h.getGrants(t, "raw")
	g.Document[0] = 'X'
	wantGrants(t, "arbitrary bytes, read again", h.getGrants(t, "raw"), "raw", want, rev, Epoch.Add(7*time.Second))

	_, err = h.s.GetGrants(ctx(t), "nope")
	wantErr(t, "GetGrants of a name without grants", err, weft.ErrNotFound)
	wantErr(t, "DeleteGrants of a name without grants", h.s.DeleteGrants(ctx(t), "nope"), weft.ErrNotFound)

	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "pay"))
	_, err = h.s.GetGrants(ctx(t), "pay")
	wantErr(t, "GetGrants after delete", err, weft.ErrNotFound)
	wantErr(t, "DeleteGrants again", h.s.DeleteGrants(ctx(t), "pay"), weft.ErrNotFound)
	if got := h.getGrants(t, "raw"); got.Revision != rev {
		t.Errorf("DeleteGrants(pay) changed the grants of raw: %+v", got)
	}

	// Revisions are never reused: a reader that saw revision 4 must see
	// the next document as changed, even if it is the same as before.
	now := h.clock.Advance(time.Second)
	if rev := h.putGrants(t, "pay", aSpaced); rev != 5 {
		t.Errorf("PutGrants after delete: revision %d, want 5", rev)
	}
	wantGrants(t, "after delete", h.getGrants(t, "pay"), "pay", aSpaced, 5, now)
	if rev := h.putGrants(t, "pay", aSpaced); rev != 5 {
		t.Errorf("PutGrants of the same document after delete: revision %d, want 5", rev)
	}
}

// testGrantsIfRevision: a write for a revision is refused, changing
// nothing, unless that revision is stored (0: nothing granted, also after
// a delete); a refused write names the stored revision.
func testGrantsIfRevision(t *testing.T, h *harness) {
	const a, b = `{"config":{"a":"1"}}`, `{"config":{"b":"2"}}`
	put := func(doc string, want uint64) (uint64, error) {
		return h.s.PutGrants(ctx(t), "pay", []byte(doc), want)
	}
	conflict := func(what string, err error, stored uint64) {
		t.Helper()
		wantErr(t, what, err, weft.ErrConflict)
		var ce *weft.GrantsConflictError
		if !errors.As(err, &ce) || ce.Plugin != "pay" || ce.Stored != stored {
			t.Errorf("%s: %v is not a *GrantsConflictError saying revision %d of pay", what, err, stored)
		}
	}
	_, err := put(a, 1)
	conflict("for revision 1 of nothing", err, 0)
	rev, err := put(a, 0)
	must(t, "PutGrants for revision 0 of nothing", err)
	_, err = put(b, 0)
	conflict("for revision 0 of revision 1", err, rev)
	_, err = put(a, rev+1)
	conflict("for a later revision, equal document", err, rev)
	wantGrants(t, "after refused writes", h.getGrants(t, "pay"), "pay", a, rev, h.clock.Now())
	rev2, err := put(b, rev)
	must(t, "PutGrants for the stored revision", err)
	if rev2 != rev+1 {
		t.Errorf("revision %d after a write for %d", rev2, rev)
	}
	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "pay"))
	_, err = put(a, rev2)
	conflict("for the deleted revision", err, 0)
	rev3, err := put(a, 0)
	must(t, "PutGrants for revision 0 after a delete", err)
	if rev3 <= rev2 {
		t.Errorf("revision %d after a delete of %d: reused", rev3, rev2)
	}
}

// testGrantsInvalid: a name abi.ValidName refuses and an empty or too long
// document are refused with ErrInvalid, and write nothing. GetGrants and
// DeleteGrants refuse such a name with ErrInvalid too.
func testGrantsInvalid(t *testing.T, h *harness) {
	doc := []byte(`{}`)
	longest := strings.Repeat("a", abi.MaxNameLen)
	for _, name := range []string{"", "Pay", "1pay", "-pay", "pay.charge", "pay charge", "pay/x", "päy", longest + "a", strings.Repeat("x", 10000)} {
		_, err := h.s.PutGrants(ctx(t), name, doc, weft.AnyRevision)
		wantErr(t, fmt.Sprintf("PutGrants(%.20q)", name), err, weft.ErrInvalid)
		_, err = h.s.GetGrants(ctx(t), name)
		wantErr(t, fmt.Sprintf("GetGrants(%.20q)", name), err, weft.ErrInvalid)
		wantErr(t, fmt.Sprintf("DeleteGrants(%.20q)", name), h.s.DeleteGrants(ctx(t), name), weft.ErrInvalid)
	}
	for _, d := range []struct {
		what string
		doc  []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"one byte too long", bytes.Repeat([]byte(" "), grant.MaxDocument+1)},
	} {
		_, err := h.s.PutGrants(ctx(t), "pay", d.doc, weft.AnyRevision)
		wantErr(t, "PutGrants of a document "+d.what, err, weft.ErrInvalid)
	}
	items, _, err := h.s.ListGrants(ctx(t), "", 0)
	must(t, "ListGrants", err)
	if len(items) != 0 {
		t.Errorf("refused writes stored %d grants", len(items))
	}

	// The limits themselves are accepted.
	biggest := append([]byte(`"`), bytes.Repeat([]byte("x"), grant.MaxDocument-2)...)
	biggest = append(biggest, '"')
	if rev := h.putGrants(t, longest, string(biggest)); rev != 1 {
		t.Errorf("PutGrants of the longest name and document: revision %d", rev)
	}
	if g := h.getGrants(t, longest); !bytes.Equal(g.Document, biggest) {
		t.Errorf("the largest document came back with %d bytes, want %d", len(g.Document), len(biggest))
	}
	if rev := h.putGrants(t, "p", "1"); rev != 1 {
		t.Errorf("PutGrants of a one-byte document: revision %d", rev)
	}

	_, _, err = h.s.ListGrants(ctx(t), "!!bad!!", 2)
	wantErr(t, "ListGrants with a bad cursor", err, weft.ErrInvalid)
}

// grantsPages lists every grant with pages of limit, and returns them as
// "name@revision:document" and the number of pages.
func grantsPages(t *testing.T, h *harness, cursor string, limit int) (got []string, pages int) {
	t.Helper()
	for range 100 {
		page, next, err := h.s.ListGrants(ctx(t), cursor, limit)
		must(t, "ListGrants", err)
		pages++
		if len(page) > weft.ClampLimit(limit) {
			t.Errorf("page of %d, limit %d", len(page), limit)
		}
		for _, g := range page {
			got = append(got, fmt.Sprintf("%s@%d:%s", g.Plugin, g.Revision, g.Document))
		}
		if cursor = next; cursor == "" {
			return got, pages
		}
	}
	t.Fatalf("ListGrants: more than 100 pages")
	return nil, 0
}

// testListGrants: pages ordered by plugin name, with a cursor that stays
// valid when its grant is deleted.
func testListGrants(t *testing.T, h *harness) {
	for _, name := range []string{"c", "a", "b", "ab", "d", "a-b", "a_b"} {
		h.putGrants(t, name, name)
	}
	h.putGrants(t, "b", "b2")
	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "d"))
	want := []string{"a@1:a", "a-b@1:a-b", "a_b@1:a_b", "ab@1:ab", "b@2:b2", "c@1:c"}

	got, pages := grantsPages(t, h, "", 2)
	wantStrings(t, "grants by pages of 2", got, want)
	if pages < 3 {
		t.Errorf("%d pages of 2 for %d grants", pages, len(want))
	}
	got, _ = grantsPages(t, h, "", 0)
	wantStrings(t, "grants with the default limit", got, want)

	// A cursor is a position, not a record: deleting the last grant of a
	// page does not break the next page, and grants written meanwhile
	// after the cursor are listed.
	page, next, err := h.s.ListGrants(ctx(t), "", 3)
	must(t, "ListGrants", err)
	if len(page) != 3 || page[2].Plugin != "a_b" || next == "" {
		t.Fatalf("first page of 3 = %v, next %q", page, next)
	}
	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "a_b"))
	h.putGrants(t, "aa", "aa")
	h.putGrants(t, "a", "a2") // before the cursor: not listed again
	got, _ = grantsPages(t, h, next, 3)
	wantStrings(t, "grants after the cursor", got, []string{"aa@1:aa", "ab@1:ab", "b@2:b2", "c@1:c"})
}

// testGrantsOutliveThePlugin: grants belong to the name. They may be set
// for a name without a plugin, DeletePlugin leaves them, and DeleteGrants
// leaves the plugin.
func testGrantsOutliveThePlugin(t *testing.T, h *harness) {
	_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v1"})
	must(t, "PutPlugin", err)
	h.putGrants(t, "pay", `{"config":{"k":"v"}}`)
	must(t, "DeletePlugin", h.s.DeletePlugin(ctx(t), "pay"))
	if g := h.getGrants(t, "pay"); g.Revision != 1 || string(g.Document) != `{"config":{"k":"v"}}` {
		t.Errorf("grants after DeletePlugin = %+v", g)
	}
	_, err = h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "pay", Version: "v2"})
	must(t, "PutPlugin again", err)
	if g := h.getGrants(t, "pay"); g.Revision != 1 {
		t.Errorf("grants after the plugin came back = %+v", g)
	}

	// Grants before the plugin, or for a name that never has one.
	h.putGrants(t, "ghost", `{}`)
	_, err = h.s.GetPlugin(ctx(t), "ghost")
	wantErr(t, "GetPlugin of a name with grants only", err, weft.ErrNotFound)
	plugins, _, err := h.s.ListPlugins(ctx(t), "", 0)
	must(t, "ListPlugins", err)
	var names []string
	for _, p := range plugins {
		names = append(names, p.Name)
	}
	wantStrings(t, "plugins", names, []string{"pay"})
	got, _ := grantsPages(t, h, "", 0)
	wantStrings(t, "grants", got, []string{`ghost@1:{}`, `pay@1:{"config":{"k":"v"}}`})

	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "pay"))
	if p, err := h.s.GetPlugin(ctx(t), "pay"); err != nil || p.Current.Version != "v2" {
		t.Errorf("plugin after DeleteGrants = %+v, %v", p, err)
	}
}

// testGrantsRace: concurrent PutGrants of distinct documents each get a
// revision of their own (no lost update), and the stored document is the
// one of the highest revision; concurrent PutGrants of one document get
// one revision.
func testGrantsRace(t *testing.T, h *harness) {
	const writers, each = 8, 5
	revs := make([][]uint64, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				rev, err := h.s.PutGrants(ctx(t), "pay", fmt.Appendf(nil, `{"writer":%d,"n":%d}`, w, i), weft.AnyRevision)
				if err != nil {
					t.Errorf("writer %d: PutGrants %d: %v", w, i, err)
					return
				}
				revs[w] = append(revs[w], rev)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	byRev := map[uint64]string{}
	for w, rs := range revs {
		if !slices.IsSorted(rs) {
			t.Errorf("writer %d saw revisions go back: %v", w, rs)
		}
		for i, rev := range rs {
			if other, ok := byRev[rev]; ok {
				t.Errorf("revision %d given to writer %d put %d and to %s", rev, w, i, other)
			}
			byRev[rev] = fmt.Sprintf(`{"writer":%d,"n":%d}`, w, i)
		}
	}
	for rev := uint64(1); rev <= writers*each; rev++ {
		if _, ok := byRev[rev]; !ok {
			t.Errorf("revision %d was given to no put", rev)
		}
	}
	g := h.getGrants(t, "pay")
	if g.Revision != writers*each || string(g.Document) != byRev[g.Revision] {
		t.Errorf("stored grants = revision %d %s, want revision %d %s", g.Revision, g.Document, writers*each, byRev[writers*each])
	}

	same := make([]uint64, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rev, err := h.s.PutGrants(ctx(t), "mail", []byte(`{"config":{"from":"x"}}`), weft.AnyRevision)
			if err != nil {
				t.Errorf("writer %d: PutGrants of one document: %v", w, err)
			}
			same[w] = rev
		}()
	}
	wg.Wait()
	for w, rev := range same {
		if rev != 1 {
			t.Errorf("writer %d: PutGrants of one document: revision %d, want 1", w, rev)
		}
	}
}

// testGrantsDurability: grants and each name's revision sequence survive
// a restart.
func testGrantsDurability(t *testing.T, h *harness) {
	at := h.clock.Advance(time.Second)
	h.putGrants(t, "pay", "a")
	h.putGrants(t, "pay", "b")
	h.putGrants(t, "gone", "a")
	h.putGrants(t, "gone", "b")
	h.putGrants(t, "gone", "c")
	must(t, "DeleteGrants", h.s.DeleteGrants(ctx(t), "gone"))

	h.s = h.reopen()
	wantGrants(t, "after reopen", h.getGrants(t, "pay"), "pay", "b", 2, at)
	_, err := h.s.GetGrants(ctx(t), "gone")
	wantErr(t, "deleted grants after reopen", err, weft.ErrNotFound)
	if rev := h.putGrants(t, "pay", "b"); rev != 2 {
		t.Errorf("PutGrants of the stored document after reopen: revision %d, want 2", rev)
	}
	if rev := h.putGrants(t, "pay", "c"); rev != 3 {
		t.Errorf("PutGrants after reopen: revision %d, want 3", rev)
	}
	if rev := h.putGrants(t, "gone", "c"); rev != 4 {
		t.Errorf("PutGrants of deleted grants after reopen: revision %d, want 4", rev)
	}
}

// testGrantsCancelledContext: the grants methods return ctx.Err() for a
// done context, and write nothing.
func testGrantsCancelledContext(t *testing.T, h *harness) {
	h.putGrants(t, "pay", "a")
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"PutGrants", func() error { _, err := h.s.PutGrants(c, "pay", []byte("b"), weft.AnyRevision); return err }},
		{"PutGrants of a new name", func() error { _, err := h.s.PutGrants(c, "mail", []byte("b"), weft.AnyRevision); return err }},
		{"GetGrants", func() error { _, err := h.s.GetGrants(c, "pay"); return err }},
		{"ListGrants", func() error { _, _, err := h.s.ListGrants(c, "", 1); return err }},
		{"DeleteGrants", func() error { return h.s.DeleteGrants(c, "pay") }},
	}
	for _, tt := range calls {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	wantGrants(t, "grants", h.getGrants(t, "pay"), "pay", "a", 1, Epoch)
	_, err := h.s.GetGrants(ctx(t), "mail")
	wantErr(t, "cancelled PutGrants of a new name", err, weft.ErrNotFound)
}

// testGrantsClosed: the grants methods return ErrClosed after Close.
func testGrantsClosed(t *testing.T, h *harness) {
	h.putGrants(t, "pay", "a")
	must(t, "Close", h.s.Close())
	_, err := h.s.PutGrants(ctx(t), "pay", []byte("b"), weft.AnyRevision)
	wantErr(t, "PutGrants after Close", err, weft.ErrClosed)
	_, err = h.s.GetGrants(ctx(t), "pay")
	wantErr(t, "GetGrants after Close", err, weft.ErrClosed)
	_, _, err = h.s.ListGrants(ctx(t), "", 1)
	wantErr(t, "ListGrants after Close", err, weft.ErrClosed)
	wantErr(t, "DeleteGrants after Close", h.s.DeleteGrants(ctx(t), "pay"), weft.ErrClosed)
}

// testPluginNeeds: a plugin record's Needs comes back from GetPlugin (the
// current version and the history) and ListPlugins; nil stays nil.
func testPluginNeeds(t *testing.T, h *harness) {
	v1 := &abi.Needs{Hosts: []string{"https://api.example.com", "*.example.org:8443"}, Config: []string{"region"}, Secrets: []string{"token"}}
	v2 := &abi.Needs{Secrets: []string{"token", "key"}}
	for _, rec := range []weft.PluginRecord{
		{Name: "pay", Version: "v1", Activities: []string{"charge"}, Needs: v1},
		{Name: "pay", Version: "v2", Activities: []string{"charge"}, Needs: v2},
		{Name: "mail", Version: "m1"},
	} {
		_, err := h.s.PutPlugin(ctx(t), rec)
		must(t, "PutPlugin "+rec.Name+"@"+rec.Version, err)
	}
	p, err := h.s.GetPlugin(ctx(t), "pay")
	must(t, "GetPlugin", err)
	if !reflect.DeepEqual(p.Current.Needs, v2) {
		t.Errorf("current needs = %+v, want %+v", p.Current.Needs, v2)
	}
	if len(p.Versions) != 2 || !reflect.DeepEqual(p.Versions[0].Needs, v2) || !reflect.DeepEqual(p.Versions[1].Needs, v1) {
		t.Errorf("needs of the versions = %+v", p.Versions)
	}
	m, err := h.s.GetPlugin(ctx(t), "mail")
	must(t, "GetPlugin", err)
	if m.Current.Needs != nil {
		t.Errorf("needs of a plugin without = %+v, want nil", m.Current.Needs)
	}
	items, _, err := h.s.ListPlugins(ctx(t), "", 0)
	must(t, "ListPlugins", err)
	if len(items) != 2 || items[0].Name != "mail" || items[0].Needs != nil || items[1].Name != "pay" || !reflect.DeepEqual(items[1].Needs, v2) {
		t.Errorf("ListPlugins = %+v", items)
	}
}
