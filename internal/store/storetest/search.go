package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// searchTests are the subtests of search attributes (the index that
// ListInstances reads for InstanceFilter.Search, InstanceFilter.Match and
// Examine, and the registry of attribute types), run by Exercise.
//
// Where the contract leaves a choice, the suite holds every store to one
// answer: a SearchRange with none of In, Lo/Hi and Prefix reads every
// value of the attribute; a bound may be any string (a planner's bound
// past a prefix need not be UTF-8) but not NaN; Examine applies only when
// Search or Match filters, and every instance read counts, kept or not; a
// negative Examine is ErrInvalid; a Commit whose search attributes hold
// an unknown type, a NaN or infinite number, or a string or keyword that
// is not UTF-8 (JSON would store another string than the one indexed) is
// ErrInvalid and writes nothing; RegisterSearchAttributes refuses an
// unknown type or an empty name with ErrInvalid, and registers nothing
// for an empty map.
var searchTests = []struct {
	name string
	run  func(t *testing.T, h *harness)
}{
	{"SearchIndex", testSearchIndex},
	{"SearchKeywordsOnce", testSearchKeywordsOnce},
	{"SearchExamine", testSearchExamine},
	{"SearchMatchWithoutIndex", testSearchMatchWithoutIndex},
	{"SearchCursorAfterChange", testSearchCursorAfterChange},
	{"SearchInvalid", testSearchInvalid},
	{"SearchRegistry", testSearchRegistry},
	{"SearchRegistryRace", testSearchRegistryRace},
	{"SearchCancelledContext", testSearchCancelledContext},
	{"SearchClosed", testSearchClosed},
}

// Search values, briefly.
func sStr(s string) weft.SearchValue { return weft.SearchValue{Type: weft.SearchString, String: s} }
func sNum(f float64) weft.SearchValue {
	return weft.SearchValue{Type: weft.SearchNumber, Number: f}
}
func sBool(b bool) weft.SearchValue { return weft.SearchValue{Type: weft.SearchBool, Bool: b} }
func sTime(t time.Time) weft.SearchValue {
	return weft.SearchValue{Type: weft.SearchTime, Time: t}
}
func sKw(kws ...string) weft.SearchValue {
	return weft.SearchValue{Type: weft.SearchKeywords, Keywords: kws}
}

// valuePtr returns a pointer to v, for SearchRange.Lo and Hi.
func valuePtr(v weft.SearchValue) *weft.SearchValue { return &v }

// cmpSearch orders two values of type t (a keyword compares as a
// string): numbers and times numerically, bools false first, strings
// byte-wise. The order the stores' indexes keep.
func cmpSearch(t weft.SearchType, a, b weft.SearchValue) int {
	switch t {
	case weft.SearchNumber:
		return cmp.Compare(a.Number, b.Number)
	case weft.SearchTime:
		return a.Time.Compare(b.Time)
	case weft.SearchBool:
		i := func(b bool) int {
			if b {
				return 1
			}
			return 0
		}
		return cmp.Compare(i(a.Bool), i(b.Bool))
	}
	return strings.Compare(a.String, b.String)
}

// inSearchRange reports whether v (a keyword as a string) is in r.
func inSearchRange(r *weft.SearchRange, v weft.SearchValue) bool {
	t := r.Type
	switch {
	case len(r.In) > 0:
		return slices.ContainsFunc(r.In, func(w weft.SearchValue) bool { return cmpSearch(t, v, w) == 0 })
	case r.Prefix != "":
		return strings.HasPrefix(v.String, r.Prefix)
	}
	if r.Lo != nil {
		if c := cmpSearch(t, v, *r.Lo); c < 0 || c == 0 && !r.LoInc {
			return false
		}
	}
	if r.Hi != nil {
		if c := cmpSearch(t, v, *r.Hi); c > 0 || c == 0 && !r.HiInc {
			return false
		}
	}
	return true
}

// searchModel is what the suite committed: instances by id, with the
// CreatedAt the store gave them. want answers a filter from it.
type searchModel map[string]*weft.Instance

// want returns the ids that ListInstances must list for f, in order, over
// all its pages: with f.Search, by (value, CreatedAt, ID), a keywords
// instance at its first keyword in the range (its last when NewestFirst);
// without, by (CreatedAt, ID); reversed when NewestFirst.
func (m searchModel) want(f weft.InstanceFilter) []string {
	type entry struct {
		v       weft.SearchValue
		created time.Time
		id      string
	}
	var es []entry
	for _, in := range m {
		if f.Workflow != "" && in.Workflow != f.Workflow || f.Status != "" && in.Status != f.Status ||
			!f.CreatedFrom.IsZero() && in.CreatedAt.Before(f.CreatedFrom) ||
			!f.CreatedBefore.IsZero() && !in.CreatedAt.Before(f.CreatedBefore) {
			continue
		}
		e := entry{created: in.CreatedAt, id: in.ID}
		if r := f.Search; r != nil {
			v, ok := in.Search[r.Name]
			if !ok || v.Type != r.Type {
				continue
			}
			if r.Type == weft.SearchKeywords {
				var hits []string
				for _, kw := range v.Keywords {
					if inSearchRange(r, sStr(kw)) {
						hits = append(hits, kw)
					}
				}
				if len(hits) == 0 {
					continue
				}
				kw := slices.Min(hits)
				if f.NewestFirst {
					kw = slices.Max(hits)
				}
				v = sStr(kw)
			} else if !inSearchRange(r, v) {
				continue
			}
			e.v = v
		}
		if f.Match != nil && !f.Match(in) {
			continue
		}
		es = append(es, e)
	}
	t := weft.SearchString
	if f.Search != nil && f.Search.Type != weft.SearchKeywords {
		t = f.Search.Type
	}
	slices.SortFunc(es, func(a, b entry) int {
		c := 0
		if f.Search != nil {
			c = cmpSearch(t, a.v, b.v)
		}
		if c == 0 {
			c = a.created.Compare(b.created)
		}
		if c == 0 {
			c = strings.Compare(a.id, b.id)
		}
		if f.NewestFirst {
			return -c
		}
		return c
	})
	ids := make([]string, 0, len(es))
	for _, e := range es {
		ids = append(ids, e.id)
	}
	return ids
}

// searchPage is one call's answer.
type searchPage struct {
	ids  []string
	next string
}

// searchPages lists every page of f. It fails the test on a page longer
// than its limit, an instance returned with its State, a call that
// examined more than f.Examine instances (counted, when f.Examine is set,
// by wrapping f.Match: each instance a store hands to Match is one it
// read), and a walk that does not end.
func (h *harness) searchPages(t *testing.T, f weft.InstanceFilter) []searchPage {
	t.Helper()
	var calls atomic.Int64
	if f.Examine > 0 {
		inner := f.Match
		f.Match = func(in *weft.Instance) bool {
			calls.Add(1)
			return inner == nil || inner(in)
		}
	}
	var pages []searchPage
	for {
		calls.Store(0)
		items, next, err := h.s.ListInstances(ctx(t), f)
		if err != nil {
			t.Fatalf("ListInstances(%s): %v", showFilter(f), err)
		}
		if len(items) > weft.ClampLimit(f.Limit) {
			t.Fatalf("ListInstances(%s): a page of %d, limit %d", showFilter(f), len(items), f.Limit)
		}
		if n := calls.Load(); f.Examine > 0 && n > int64(f.Examine) {
			t.Fatalf("ListInstances(%s): one call examined %d instances, Examine %d", showFilter(f), n, f.Examine)
		}
		p := searchPage{next: next}
		for _, in := range items {
			p.ids = append(p.ids, in.ID)
			if len(in.State) != 0 {
				t.Errorf("ListInstances(%s) returned the State of %s", showFilter(f), in.ID)
			}
		}
		pages = append(pages, p)
		if next == "" {
			return pages
		}
		if len(pages) > 1000 {
			t.Fatalf("ListInstances(%s): the walk does not end", showFilter(f))
		}
		f.Cursor = next
	}
}

// searchWalk returns the ids of every page of f, in order.
func (h *harness) searchWalk(t *testing.T, f weft.InstanceFilter) []string {
	t.Helper()
	var ids []string
	for _, p := range h.searchPages(t, f) {
		ids = append(ids, p.ids...)
	}
	return ids
}

// showFilter prints the parts of f that a test sets.
func showFilter(f weft.InstanceFilter) string {
	var b strings.Builder
	if r := f.Search; r != nil {
		fmt.Fprintf(&b, "search %s %s", r.Name, r.Type)
		if len(r.In) > 0 {
			var vs []string
			for _, v := range r.In {
				vs = append(vs, fmt.Sprint(v.Native()))
			}
			fmt.Fprintf(&b, " in %q", vs)
		}
		if r.Lo != nil {
			fmt.Fprintf(&b, " lo %v inc %t", r.Lo.Native(), r.LoInc)
		}
		if r.Hi != nil {
			fmt.Fprintf(&b, " hi %v inc %t", r.Hi.Native(), r.HiInc)
		}
		if r.Prefix != "" {
			fmt.Fprintf(&b, " prefix %q", r.Prefix)
		}
	}
	if f.Workflow != "" {
		fmt.Fprintf(&b, " workflow %s", f.Workflow)
	}
	if f.Status != "" {
		fmt.Fprintf(&b, " status %s", f.Status)
	}
	if !f.CreatedFrom.IsZero() || !f.CreatedBefore.IsZero() {
		fmt.Fprintf(&b, " created [%s, %s)", f.CreatedFrom.Format(time.RFC3339), f.CreatedBefore.Format(time.RFC3339))
	}
	if f.Match != nil {
		b.WriteString(" match")
	}
	fmt.Fprintf(&b, " newest first %t limit %d examine %d", f.NewestFirst, f.Limit, f.Examine)
	return strings.TrimSpace(b.String())
}

// createSearch creates instance id of workflow wf in status st with attrs,
// and records it in m.
func (h *harness) createSearch(t *testing.T, m searchModel, id, wf string, st weft.Status, attrs weft.SearchAttributes) {
	t.Helper()
	in := instance(id, wf)
	in.Status = st
	in.State = []byte("state of " + id)
	in.Search = attrs
	m[id] = h.create(t, in)
	wantSearch(t, "Search of "+id, m[id].Search, attrs)
}

// setSearch commits instance id with attrs (and status st, when not
// empty), and records it in m.
func (h *harness) setSearch(t *testing.T, m searchModel, id string, st weft.Status, attrs weft.SearchAttributes) {
	t.Helper()
	in := h.get(t, id)
	in.Search = attrs
	if st != "" {
		in.Status = st
	}
	h.commit(t, store.Commit{Instance: in})
	m[id] = h.get(t, id)
	wantSearch(t, "Search of "+id, m[id].Search, attrs)
}

// wantSearch fails unless got holds the attributes of want, each of the
// same type and value (times equal as instants, nil and empty keywords
// equal).
func wantSearch(t *testing.T, what string, got, want weft.SearchAttributes) {
	t.Helper()
	same := len(got) == len(want)
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok || g.Type != w.Type:
			same = false
		case w.Type == weft.SearchKeywords:
			same = same && slices.Equal(g.Keywords, w.Keywords)
		default:
			same = same && cmpSearch(w.Type, g, w) == 0 && (w.Type != weft.SearchNumber || g.Number == w.Number)
		}
	}
	if !same {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// searchQueries are the ranges testSearchIndex asks, each with the other
// filters it combines.
func searchQueries() []struct {
	name string
	f    weft.InstanceFilter
} {
	s := func(name string, t weft.SearchType) *weft.SearchRange { return &weft.SearchRange{Name: name, Type: t} }
	in := func(name string, t weft.SearchType, vs ...weft.SearchValue) *weft.SearchRange {
		r := s(name, t)
		r.In = vs
		return r
	}
	between := func(name string, t weft.SearchType, lo *weft.SearchValue, loInc bool, hi *weft.SearchValue, hiInc bool) *weft.SearchRange {
		r := s(name, t)
		r.Lo, r.LoInc, r.Hi, r.HiInc = lo, loInc, hi, hiInc
		return r
	}
	prefix := func(name string, t weft.SearchType, p string) *weft.SearchRange {
		r := s(name, t)
		r.Prefix = p
		return r
	}
	const (
		str, num, bl, tm, kw = weft.SearchString, weft.SearchNumber, weft.SearchBool, weft.SearchTime, weft.SearchKeywords
	)
	bigAmount := func(in *weft.Instance) bool { return in.Search["amount"].Number > 10 }
	return []struct {
		name string
		f    weft.InstanceFilter
	}{
		{"string =", weft.InstanceFilter{Search: in("customer", str, sStr("acme"))}},
		{"string = none", weft.InstanceFilter{Search: in("customer", str, sStr("acm"))}},
		{"string IN", weft.InstanceFilter{Search: in("customer", str, sStr("acme"), sStr("globex"), sStr("nobody"))}},
		{"string prefix", weft.InstanceFilter{Search: prefix("customer", str, "acme")}},
		{"string prefix, multibyte", weft.InstanceFilter{Search: prefix("customer", str, "acme\u00e9")}},
		{"string, every value", weft.InstanceFilter{Search: s("customer", str)}},
		{"string (open, closed]", weft.InstanceFilter{Search: between("customer", str, valuePtr(sStr("acme")), false, valuePtr(sStr("globex")), true)}},
		{"string [closed, open)", weft.InstanceFilter{Search: between("customer", str, valuePtr(sStr("acme")), true, valuePtr(sStr("globex")), false)}},
		{"string < (below)", weft.InstanceFilter{Search: between("customer", str, nil, false, valuePtr(sStr("acme")), false)}},
		{"string >= (above)", weft.InstanceFilter{Search: between("customer", str, valuePtr(sStr("initech")), true, nil, false)}},
		{"string bounds not UTF-8 (a planner's prefix interval)", weft.InstanceFilter{Search: between("customer", str, valuePtr(sStr("acme\xc3")), true, valuePtr(sStr("acme\xc4")), false)}},
		{"string empty interval", weft.InstanceFilter{Search: between("customer", str, valuePtr(sStr("b")), true, valuePtr(sStr("a")), true)}},
		{"number =", weft.InstanceFilter{Search: in("amount", num, sNum(100))}},
		{"number = 0 holds -0", weft.InstanceFilter{Search: in("amount", num, sNum(0))}},
		{"number = -0 holds 0", weft.InstanceFilter{Search: in("amount", num, sNum(math.Copysign(0, -1)))}},
		{"number IN", weft.InstanceFilter{Search: in("amount", num, sNum(-5.5), sNum(2), sNum(100))}},
		{"number > 0", weft.InstanceFilter{Search: between("amount", num, valuePtr(sNum(0)), false, nil, false)}},
		{"number >= 0", weft.InstanceFilter{Search: between("amount", num, valuePtr(sNum(0)), true, nil, false)}},
		{"number < 0", weft.InstanceFilter{Search: between("amount", num, nil, false, valuePtr(sNum(0)), false)}},
		{"number [-5.5, 2)", weft.InstanceFilter{Search: between("amount", num, valuePtr(sNum(-5.5)), true, valuePtr(sNum(2)), false)}},
		{"number (-5.5, 100]", weft.InstanceFilter{Search: between("amount", num, valuePtr(sNum(-5.5)), false, valuePtr(sNum(100)), true)}},
		{"number, every value", weft.InstanceFilter{Search: s("amount", num)}},
		{"bool = true", weft.InstanceFilter{Search: in("vip", bl, sBool(true))}},
		{"bool = false", weft.InstanceFilter{Search: in("vip", bl, sBool(false))}},
		{"bool, every value", weft.InstanceFilter{Search: s("vip", bl)}},
		{"time =", weft.InstanceFilter{Search: in("due", tm, sTime(Epoch))}},
		{"time < epoch", weft.InstanceFilter{Search: between("due", tm, nil, false, valuePtr(sTime(Epoch)), false)}},
		{"time >= epoch", weft.InstanceFilter{Search: between("due", tm, valuePtr(sTime(Epoch)), true, nil, false)}},
		{"time (1969, epoch]", weft.InstanceFilter{Search: between("due", tm, valuePtr(sTime(time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC))), false, valuePtr(sTime(Epoch)), true)}},
		{"keyword =", weft.InstanceFilter{Search: in("tags", kw, sStr("vip"))}},
		{"keywords IN", weft.InstanceFilter{Search: in("tags", kw, sStr("eu"), sStr("vip"))}},
		{"keywords IN, all of one's", weft.InstanceFilter{Search: in("tags", kw, sStr("asia"), sStr("us"), sStr("vip"))}},
		{"keywords range", weft.InstanceFilter{Search: between("tags", kw, valuePtr(sStr("b")), true, valuePtr(sStr("v")), false)}},
		{"keywords prefix", weft.InstanceFilter{Search: prefix("tags", kw, "v")}},
		{"keywords, every value", weft.InstanceFilter{Search: s("tags", kw)}},
		{"region (added later)", weft.InstanceFilter{Search: in("region", str, sStr("emea"))}},
		{"and workflow", weft.InstanceFilter{Search: prefix("customer", str, "acme"), Workflow: "orders"}},
		{"and status", weft.InstanceFilter{Search: prefix("customer", str, "acme"), Status: weft.StatusRunning}},
		{"and workflow and status", weft.InstanceFilter{Search: s("amount", num), Workflow: "billing", Status: weft.StatusCompleted}},
		{"and created", weft.InstanceFilter{Search: s("customer", str), CreatedFrom: Epoch.Add(2 * time.Second), CreatedBefore: Epoch.Add(8 * time.Second)}},
		{"keywords and workflow", weft.InstanceFilter{Search: in("tags", kw, sStr("eu"), sStr("us"), sStr("vip")), Workflow: "orders"}},
		{"and match", weft.InstanceFilter{Search: prefix("customer", str, "acme"), Match: bigAmount}},
		{"keywords and match", weft.InstanceFilter{Search: s("tags", kw), Match: bigAmount}},
	}
}

// searchConfigs are the ways testSearchIndex pages through each query.
func searchConfigs() []weft.InstanceFilter {
	return []weft.InstanceFilter{
		{},
		{Limit: 1},
		{Limit: 2, Examine: 1},
		{Limit: 3, Examine: 2},
		{NewestFirst: true},
		{NewestFirst: true, Limit: 1},
		{NewestFirst: true, Limit: 2, Examine: 3},
	}
}

// askSearch asks every query of searchQueries in every configuration and
// compares the ids listed with the model's.
func (h *harness) askSearch(t *testing.T, m searchModel, when string) {
	t.Helper()
	for _, q := range searchQueries() {
		for _, c := range searchConfigs() {
			f := q.f
			f.Limit, f.Examine, f.NewestFirst = c.Limit, c.Examine, c.NewestFirst
			wantStrings(t, fmt.Sprintf("%s: %s (%s)", when, q.name, showFilter(f)), h.searchWalk(t, f), m.want(f))
		}
	}
}

// testSearchIndex: the index answers exactly what the instances hold, for
// every type and kind of range, with the other filters, Match, pages and
// NewestFirst; after creates, updates that change, add and remove
// attributes, a delete, an import and a create of a deleted id; and after
// a reopen.
func testSearchIndex(t *testing.T, h *harness) {
	m := searchModel{}
	day := func(y int, mo time.Month, d int) time.Time { return time.Date(y, mo, d, 20, 17, 0, 0, time.UTC) }
	fixture := []struct {
		id, wf string
		st     weft.Status
		attrs  weft.SearchAttributes
		// same: created at the same time as the one before.
		same bool
	}{
		{"i01", "orders", weft.StatusRunning, weft.SearchAttributes{
			"customer": sStr("acme"), "amount": sNum(100), "vip": sBool(true), "due": sTime(Epoch.Add(time.Hour)), "tags": sKw("vip", "eu")}, false},
		{"i02", "orders", weft.StatusCompleted, weft.SearchAttributes{
			"customer": sStr("acme-eu"), "amount": sNum(-5.5), "vip": sBool(false), "due": sTime(Epoch.Add(-time.Hour)), "tags": sKw("eu")}, false},
		{"i03", "billing", weft.StatusRunning, weft.SearchAttributes{
			"customer": sStr("globex"), "amount": sNum(0), "tags": sKw("us", "vip", "asia")}, false},
		{"i04", "billing", weft.StatusFailed, weft.SearchAttributes{
			"customer": sStr(""), "amount": sNum(1e6), "due": sTime(day(1969, 7, 20))}, false},
		{"i05", "orders", weft.StatusRunning, weft.SearchAttributes{
			"customer": sStr("acme"), "amount": sNum(math.Copysign(0, -1)), "vip": sBool(true), "tags": sKw()}, false},
		{"i06", "orders", weft.StatusRunning, nil, false},
		{"i07", "billing", weft.StatusCompleted, weft.SearchAttributes{
			"customer": sStr("initech"), "amount": sNum(1.5), "vip": sBool(false), "due": sTime(Epoch), "tags": sKw("a", "vip", "vip")}, false},
		{"i08", "orders", weft.StatusPending, weft.SearchAttributes{
			"customer": sStr("Acme"), "amount": sNum(-1e300), "tags": sKw("eu", "us")}, false},
		// Created at the same time: listed by id, i9a first.
		{"i9b", "orders", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("acme"), "amount": sNum(100)}, false},
		{"i9a", "billing", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("acme"), "amount": sNum(100)}, true},
		{"i11", "orders", weft.StatusRunning, weft.SearchAttributes{
			"customer": sStr("acme\u00e9"), "amount": sNum(2), "due": sTime(Epoch.Add(time.Hour)), "tags": sKw("eu", "emea")}, false},
	}
	for _, x := range fixture {
		if !x.same {
			h.clock.Advance(time.Second)
		}
		h.createSearch(t, m, x.id, x.wf, x.st, x.attrs)
	}
	h.askSearch(t, m, "created")

	// Change, add and remove attributes; change the status alone; delete;
	// import (a create that keeps its CreatedAt); create a deleted id
	// again.
	h.clock.Advance(time.Second)
	h.setSearch(t, m, "i01", "", weft.SearchAttributes{
		"customer": sStr("globex"), "amount": sNum(100), "vip": sBool(true), "due": sTime(Epoch.Add(time.Hour)), "region": sStr("emea")})
	h.setSearch(t, m, "i06", "", weft.SearchAttributes{"customer": sStr("acme"), "tags": sKw("vip")})
	h.setSearch(t, m, "i05", "", nil)
	h.setSearch(t, m, "i03", weft.StatusCompleted, m["i03"].Search)
	h.setSearch(t, m, "i08", "", weft.SearchAttributes{"customer": sStr("Acme"), "amount": sNum(-1e300), "tags": sKw("us", "zz")})
	must(t, "DeleteInstance i02", h.s.DeleteInstance(ctx(t), "i02", 0))
	delete(m, "i02")
	imp := instance("imp", "orders")
	imp.Status = weft.StatusSuspended
	imp.CreatedAt = Epoch.Add(-24 * time.Hour)
	imp.Search = weft.SearchAttributes{"customer": sStr("acme"), "amount": sNum(7), "tags": sKw("eu"), "region": sStr("emea")}
	m["imp"] = h.create(t, imp)
	wantTime(t, "CreatedAt of the import", m["imp"].CreatedAt, imp.CreatedAt)
	h.createSearch(t, m, "i02", "billing", weft.StatusPending, weft.SearchAttributes{"customer": sStr("zeta"), "vip": sBool(true)})
	h.askSearch(t, m, "changed")

	h.s = h.reopen()
	for id, in := range m {
		wantSearch(t, "Search of "+id+" after reopen", h.get(t, id).Search, in.Search)
	}
	h.askSearch(t, m, "reopened")
	// Commits after the reopen still find and replace what was indexed
	// before it.
	h.setSearch(t, m, "i07", "", weft.SearchAttributes{"customer": sStr("acme"), "tags": sKw("a")})
	h.askSearch(t, m, "changed after reopen")
}

// testSearchKeywordsOnce: an instance whose list holds several keywords of
// the range is listed once, at the first of them in the walk's order,
// across pages of one and whatever the range (In, an interval, a prefix).
func testSearchKeywordsOnce(t *testing.T, h *harness) {
	m := searchModel{}
	for i, kws := range [][]string{{"c", "a", "b"}, {"b"}, {"c", "b"}, {"x"}, {"a", "c"}, {"b", "b"}} {
		h.clock.Advance(time.Second)
		h.createSearch(t, m, fmt.Sprintf("k%d", i), "w", weft.StatusRunning, weft.SearchAttributes{"tags": sKw(kws...)})
	}
	rs := []*weft.SearchRange{
		{Name: "tags", Type: weft.SearchKeywords, In: []weft.SearchValue{sStr("a"), sStr("b"), sStr("c")}},
		{Name: "tags", Type: weft.SearchKeywords, In: []weft.SearchValue{sStr("b"), sStr("c")}},
		{Name: "tags", Type: weft.SearchKeywords, Lo: valuePtr(sStr("a")), LoInc: false, Hi: valuePtr(sStr("c")), HiInc: true},
		{Name: "tags", Type: weft.SearchKeywords, Lo: valuePtr(sStr("a")), LoInc: true},
		{Name: "tags", Type: weft.SearchKeywords},
	}
	for _, r := range rs {
		for _, newest := range []bool{false, true} {
			for _, limit := range []int{0, 1, 2} {
				f := weft.InstanceFilter{Search: r, NewestFirst: newest, Limit: limit}
				got := h.searchWalk(t, f)
				wantStrings(t, showFilter(f), got, m.want(f))
				if len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
					t.Errorf("%s listed an instance twice: %q", showFilter(f), got)
				}
			}
		}
	}
	// The order, spelled out once: k0 and k4 at "a", then k1, k2, k5 at
	// "b" (k0 was listed at "a"), nothing new at "c".
	f := weft.InstanceFilter{Search: rs[0], Limit: 1}
	wantStrings(t, "keywords a, b, c", h.searchWalk(t, f), []string{"k0", "k4", "k1", "k2", "k5"})
	f.NewestFirst = true
	wantStrings(t, "keywords a, b, c, newest first", h.searchWalk(t, f), []string{"k4", "k2", "k0", "k5", "k1"})
}

// testSearchExamine: a call reads at most Examine instances; a query that
// matches little answers short pages, even empty ones, with a cursor, and
// the walk lists each match once.
func testSearchExamine(t *testing.T, h *harness) {
	m := searchModel{}
	for i := range 10 {
		h.clock.Advance(time.Second)
		h.createSearch(t, m, fmt.Sprintf("e%d", i), "w", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("x")})
	}
	keep := func(in *weft.Instance) bool { return in.ID == "e1" || in.ID == "e8" }
	search := &weft.SearchRange{Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{sStr("x")}}
	for _, f := range []weft.InstanceFilter{
		{Search: search, Match: keep, Examine: 3},
		{Match: keep, Examine: 3},
	} {
		pages := h.searchPages(t, f)
		what := showFilter(f)
		if len(pages) < 4 || len(pages) > 5 {
			t.Errorf("%s: %d pages, want 4 (10 instances, 3 a call), or 5", what, len(pages))
		}
		if len(pages) >= 2 {
			if !slices.Equal(pages[0].ids, []string{"e1"}) || pages[0].next == "" {
				t.Errorf("%s: first page %q, next %q; want [e1], short, with a cursor", what, pages[0].ids, pages[0].next)
			}
			if len(pages[1].ids) != 0 || pages[1].next == "" {
				t.Errorf("%s: second page %q, next %q; want empty, with a cursor", what, pages[1].ids, pages[1].next)
			}
		}
		wantStrings(t, what, h.searchWalk(t, f), []string{"e1", "e8"})
		// A limit reached before the bound ends the page there.
		f.Limit, f.Examine = 1, 100
		pages = h.searchPages(t, f)
		if !slices.Equal(pages[0].ids, []string{"e1"}) || pages[0].next == "" {
			t.Errorf("%s: first page %q, next %q; want [e1] with a cursor", showFilter(f), pages[0].ids, pages[0].next)
		}
		// Examine 0 is weft.MaxExamine: here, no bound.
		f.Limit, f.Examine = 0, 0
		if pages := h.searchPages(t, f); len(pages) != 1 || !slices.Equal(pages[0].ids, []string{"e1", "e8"}) {
			t.Errorf("%s: %+v, want one page [e1 e8]", showFilter(f), pages)
		}
	}
	// Without Match or Search, Examine bounds nothing: a page is full.
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Examine: 1, Limit: 5})
	must(t, "ListInstances", err)
	if len(items) != 5 {
		t.Errorf("ListInstances without a filter, Examine 1, limit 5: %d items, want 5", len(items))
	}
}

// testSearchMatchWithoutIndex: Match without Search filters today's walk
// by creation, with the workflow, status and time filters and both
// orders, under the Examine bound.
func testSearchMatchWithoutIndex(t *testing.T, h *harness) {
	m := searchModel{}
	sts := []weft.Status{weft.StatusRunning, weft.StatusCompleted, weft.StatusFailed}
	for i := range 12 {
		h.clock.Advance(time.Second)
		wf := "a"
		if i%3 == 0 {
			wf = "b"
		}
		h.createSearch(t, m, fmt.Sprintf("m%02d", i), wf, sts[i%2], weft.SearchAttributes{"amount": sNum(float64(i))})
	}
	even := func(in *weft.Instance) bool { return int(in.Search["amount"].Number)%2 == 0 }
	for _, base := range []weft.InstanceFilter{
		{Match: even},
		{Match: even, Workflow: "a"},
		{Match: even, Status: weft.StatusRunning},
		{Match: even, Workflow: "b", Status: weft.StatusRunning},
		{Match: even, CreatedFrom: Epoch.Add(3 * time.Second), CreatedBefore: Epoch.Add(10 * time.Second)},
		{Match: func(*weft.Instance) bool { return false }},
	} {
		for _, c := range searchConfigs() {
			f := base
			f.Limit, f.Examine, f.NewestFirst = c.Limit, c.Examine, c.NewestFirst
			wantStrings(t, showFilter(f), h.searchWalk(t, f), m.want(f))
		}
	}
}

// testSearchCursorAfterChange: a cursor is a position in the index, not a
// snapshot. Between two pages of customer >= "k", in either order: an
// instance listed already that moves ahead in the range is listed again;
// one not listed yet that leaves the range, or moves behind the cursor,
// is not; one whose attribute is unchanged is listed once; one created
// with a value ahead is listed; and the cursor still works when the entry
// it stopped at is gone.
func testSearchCursorAfterChange(t *testing.T, h *harness) {
	m := searchModel{}
	for _, x := range []struct{ id, customer string }{
		{"x1", "k"}, {"x2", "k"}, {"x3", "k"}, {"x4", "k"}, {"x5", "k"}, {"y", "m"}, {"z", "p"},
	} {
		h.clock.Advance(time.Second)
		h.createSearch(t, m, x.id, "w", weft.StatusRunning, weft.SearchAttributes{"customer": sStr(x.customer)})
	}
	for _, newest := range []bool{false, true} {
		f := weft.InstanceFilter{Search: &weft.SearchRange{Name: "customer", Type: weft.SearchString, Lo: valuePtr(sStr("k")), LoInc: true}, Limit: 2, NewestFirst: newest}
		items, next, err := h.s.ListInstances(ctx(t), f)
		must(t, "ListInstances", err)
		var got []string
		for _, in := range items {
			got = append(got, in.ID)
		}
		want := []string{"x1", "x2"}
		if newest {
			want = []string{"z", "x1"}
		}
		wantStrings(t, showFilter(f)+": first page", got, want)
		if next == "" {
			t.Fatalf("%s: no cursor after the first page", showFilter(f))
		}
		h.clock.Advance(time.Second)
		if !newest {
			h.setSearch(t, m, "x1", "", weft.SearchAttributes{"customer": sStr("n")}) // listed; moves ahead
			h.setSearch(t, m, "x2", "", nil)                                          // the cursor's entry: gone
			h.setSearch(t, m, "x3", "", weft.SearchAttributes{"customer": sStr("a")}) // leaves the range
			h.setSearch(t, m, "x4", weft.StatusSuspended, m["x4"].Search)             // unchanged
			h.createSearch(t, m, "x6", "w", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("k")})
			want = []string{"x4", "x5", "x6", "y", "x1", "z"}
		} else {
			h.setSearch(t, m, "z", "", weft.SearchAttributes{"customer": sStr("kk")})  // listed; moves ahead
			h.setSearch(t, m, "x1", "", nil)                                           // the cursor's entry: gone
			h.setSearch(t, m, "x5", "", weft.SearchAttributes{"customer": sStr("zz")}) // moves behind the cursor
			h.setSearch(t, m, "x6", "", weft.SearchAttributes{"customer": sStr("b")})  // leaves the range
			h.createSearch(t, m, "x7", "w", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("k")})
			// Left after n x1, by (value, created, id) descending: m y;
			// kk z; k x7, x4.
			want = []string{"y", "z", "x7", "x4"}
		}
		f.Cursor = next
		wantStrings(t, showFilter(f)+": the rest, after the changes", h.searchWalk(t, f), want)
	}
}

// testSearchInvalid: a malformed range, an Examine below 0, a bad cursor
// and a commit of a value the index cannot order are ErrInvalid; the
// refused commit writes nothing.
func testSearchInvalid(t *testing.T, h *harness) {
	h.createSearch(t, searchModel{}, "ok", "w", weft.StatusRunning, weft.SearchAttributes{"customer": sStr("acme")})
	ranges := []struct {
		name string
		r    weft.SearchRange
	}{
		{"no name", weft.SearchRange{Type: weft.SearchString}},
		{"unknown type", weft.SearchRange{Name: "customer", Type: "text"}},
		{"In of another type", weft.SearchRange{Name: "amount", Type: weft.SearchNumber, In: []weft.SearchValue{sStr("12")}}},
		{"In of keywords values", weft.SearchRange{Name: "tags", Type: weft.SearchKeywords, In: []weft.SearchValue{sKw("a")}}},
		{"Lo of another type", weft.SearchRange{Name: "due", Type: weft.SearchTime, Lo: valuePtr(sNum(1))}},
		{"Hi of another type", weft.SearchRange{Name: "vip", Type: weft.SearchBool, Hi: valuePtr(sStr("true"))}},
		{"Prefix on a number", weft.SearchRange{Name: "amount", Type: weft.SearchNumber, Prefix: "1"}},
		{"Prefix on a time", weft.SearchRange{Name: "due", Type: weft.SearchTime, Prefix: "2030"}},
		{"In and Prefix", weft.SearchRange{Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{sStr("a")}, Prefix: "a"}},
		{"In and Lo", weft.SearchRange{Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{sStr("a")}, Lo: valuePtr(sStr("a"))}},
		{"Hi and Prefix", weft.SearchRange{Name: "customer", Type: weft.SearchString, Hi: valuePtr(sStr("b")), Prefix: "a"}},
		{"NaN", weft.SearchRange{Name: "amount", Type: weft.SearchNumber, In: []weft.SearchValue{sNum(math.NaN())}}},
	}
	for _, tt := range ranges {
		_, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Search: &tt.r})
		wantErr(t, "ListInstances with a range: "+tt.name, err, weft.ErrInvalid)
	}
	search := &weft.SearchRange{Name: "customer", Type: weft.SearchString}
	for _, f := range []weft.InstanceFilter{
		{Search: search, Examine: -1},
		{Match: func(*weft.Instance) bool { return true }, Examine: -1},
		{Search: search, Cursor: "!!not a cursor!!"},
		{Search: search, Status: "sleeping"},
	} {
		_, _, err := h.s.ListInstances(ctx(t), f)
		wantErr(t, "ListInstances("+showFilter(f)+")", err, weft.ErrInvalid)
	}
	commits := []struct {
		name  string
		attrs weft.SearchAttributes
	}{
		{"NaN", weft.SearchAttributes{"amount": sNum(math.NaN())}},
		{"infinity", weft.SearchAttributes{"amount": sNum(math.Inf(-1))}},
		{"unknown type", weft.SearchAttributes{"amount": {Type: "decimal"}}},
		{"string not UTF-8", weft.SearchAttributes{"customer": sStr("ac\xffme")}},
		{"keyword not UTF-8", weft.SearchAttributes{"tags": sKw("ok", "\xc3")}},
	}
	for _, tt := range commits {
		in := instance("bad", "w")
		in.Search = tt.attrs
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in})
		wantErr(t, "Commit with "+tt.name, err, weft.ErrInvalid)
		_, err = h.s.GetInstance(ctx(t), "bad")
		wantErr(t, "GetInstance after a commit refused for "+tt.name, err, weft.ErrNotFound)
		// And as an update: the instance keeps its attributes and its
		// place in the index.
		ok := h.get(t, "ok")
		ok.Search = tt.attrs
		_, err = h.s.Commit(ctx(t), store.Commit{Instance: ok})
		wantErr(t, "update with "+tt.name, err, weft.ErrInvalid)
	}
	wantStrings(t, "the index after the refusals", h.searchWalk(t, weft.InstanceFilter{Search: search}), []string{"ok"})
}

// testSearchRegistry: a name gets its type and the workflow that
// registered it first; the same type again changes nothing; a call with
// one conflicting name is refused whole, with a *SearchTypeError; the
// list is ordered by name and survives a reopen.
func testSearchRegistry(t *testing.T, h *harness) {
	list := func(what string, want []weft.SearchAttribute) {
		t.Helper()
		got, err := h.s.SearchAttributes(ctx(t))
		must(t, "SearchAttributes", err)
		if !slices.Equal(got, want) {
			t.Errorf("%s: SearchAttributes() = %+v, want %+v", what, got, want)
		}
	}
	list("empty", nil)
	must(t, "RegisterSearchAttributes orders", h.s.RegisterSearchAttributes(ctx(t), "orders",
		map[string]weft.SearchType{"customer": weft.SearchString, "amount": weft.SearchNumber, "tags": weft.SearchKeywords}))
	must(t, "RegisterSearchAttributes billing", h.s.RegisterSearchAttributes(ctx(t), "billing",
		map[string]weft.SearchType{"customer": weft.SearchString, "Region": weft.SearchString, "due": weft.SearchTime, "paid": weft.SearchBool}))
	must(t, "RegisterSearchAttributes of nothing", h.s.RegisterSearchAttributes(ctx(t), "other", nil))
	want := []weft.SearchAttribute{
		{Name: "Region", Type: weft.SearchString, Workflow: "billing"},
		{Name: "amount", Type: weft.SearchNumber, Workflow: "orders"},
		{Name: "customer", Type: weft.SearchString, Workflow: "orders"},
		{Name: "due", Type: weft.SearchTime, Workflow: "billing"},
		{Name: "paid", Type: weft.SearchBool, Workflow: "billing"},
		{Name: "tags", Type: weft.SearchKeywords, Workflow: "orders"},
	}
	list("registered", want)

	err := h.s.RegisterSearchAttributes(ctx(t), "shipping",
		map[string]weft.SearchType{"carrier": weft.SearchString, "amount": weft.SearchString, "weight": weft.SearchNumber})
	wantErr(t, "RegisterSearchAttributes with a conflict", err, weft.ErrInvalid)
	var ste *store.SearchTypeError
	if !errors.As(err, &ste) {
		t.Fatalf("RegisterSearchAttributes with a conflict: %v, want a *store.SearchTypeError", err)
	}
	if *ste != (store.SearchTypeError{Name: "amount", Type: weft.SearchString, Registered: weft.SearchNumber, Workflow: "orders"}) {
		t.Errorf("SearchTypeError = %+v", *ste)
	}
	list("after a refused call: nothing of it registered", want)

	for _, tt := range []struct {
		name  string
		attrs map[string]weft.SearchType
	}{
		{"an unknown type", map[string]weft.SearchType{"size": "decimal"}},
		{"an empty name", map[string]weft.SearchType{"": weft.SearchString}},
	} {
		err := h.s.RegisterSearchAttributes(ctx(t), "w", tt.attrs)
		wantErr(t, "RegisterSearchAttributes with "+tt.name, err, weft.ErrInvalid)
	}
	list("after invalid calls", want)

	h.s = h.reopen()
	list("after reopen", want)
	err = h.s.RegisterSearchAttributes(ctx(t), "w", map[string]weft.SearchType{"tags": weft.SearchString})
	if !errors.As(err, &ste) || ste.Registered != weft.SearchKeywords {
		t.Errorf("RegisterSearchAttributes of tags as a string after reopen: %v, want a *store.SearchTypeError", err)
	}
}

// testSearchRegistryRace: goroutines register the same names with
// conflicting types at once, each with a name of its own too; for each
// contested name exactly one type wins, every call of the other type is
// refused, and a refused call's own name is not registered.
func testSearchRegistryRace(t *testing.T, h *harness) {
	const rounds, perType = 10, 2
	types := []weft.SearchType{weft.SearchString, weft.SearchNumber}
	type outcome struct {
		typ  weft.SearchType
		own  string
		fail bool
	}
	results := make([][]outcome, rounds)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for r := range rounds {
		name := fmt.Sprintf("attr%d", r)
		for g := range perType * len(types) {
			typ := types[g%len(types)]
			own := fmt.Sprintf("own%d_%d", r, g)
			wg.Go(func() {
				err := h.s.RegisterSearchAttributes(ctx(t), fmt.Sprintf("wf%d", g), map[string]weft.SearchType{name: typ, own: weft.SearchBool})
				var ste *store.SearchTypeError
				if err != nil && !errors.As(err, &ste) {
					t.Errorf("RegisterSearchAttributes(%s %s): %v", name, typ, err)
				}
				mu.Lock()
				results[r] = append(results[r], outcome{typ, own, err != nil})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	got, err := h.s.SearchAttributes(ctx(t))
	must(t, "SearchAttributes", err)
	registered := map[string]weft.SearchType{}
	for _, a := range got {
		registered[a.Name] = a.Type
	}
	for r, outs := range results {
		name := fmt.Sprintf("attr%d", r)
		winner, ok := registered[name]
		if !ok {
			t.Errorf("%s: not registered", name)
			continue
		}
		for _, o := range outs {
			if o.fail == (o.typ == winner) {
				t.Errorf("%s registered as a %s: a call for a %s failed=%t", name, winner, o.typ, o.fail)
			}
			if _, ok := registered[o.own]; ok == o.fail {
				t.Errorf("%s: the own name %s of a call that failed=%t is registered=%t", name, o.own, o.fail, ok)
			}
		}
	}
}

// testSearchCancelledContext: the registry methods, and a list by the
// index, return ctx.Err() on a done context, and register nothing.
func testSearchCancelledContext(t *testing.T, h *harness) {
	c, cancel := context.WithCancel(ctx(t))
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"RegisterSearchAttributes", func() error {
			return h.s.RegisterSearchAttributes(c, "w", map[string]weft.SearchType{"customer": weft.SearchString})
		}},
		{"SearchAttributes", func() error { _, err := h.s.SearchAttributes(c); return err }},
		{"ListInstances by search", func() error {
			_, _, err := h.s.ListInstances(c, weft.InstanceFilter{Search: &weft.SearchRange{Name: "customer", Type: weft.SearchString}})
			return err
		}},
	}
	for _, tt := range calls {
		if err := tt.call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", tt.name, err)
		}
	}
	got, err := h.s.SearchAttributes(ctx(t))
	must(t, "SearchAttributes", err)
	if len(got) != 0 {
		t.Errorf("registered by a cancelled call: %+v", got)
	}
}

// testSearchClosed: the registry methods return ErrClosed after Close.
func testSearchClosed(t *testing.T, h *harness) {
	must(t, "Close", h.s.Close())
	err := h.s.RegisterSearchAttributes(ctx(t), "w", map[string]weft.SearchType{"customer": weft.SearchString})
	wantErr(t, "RegisterSearchAttributes after Close", err, weft.ErrClosed)
	_, err = h.s.SearchAttributes(ctx(t))
	wantErr(t, "SearchAttributes after Close", err, weft.ErrClosed)
}

// BenchSearch measures the first page of a search by one attribute: it
// fills s with n instances (50 writers), each with a string attribute
// "customer" of 1,000 distinct values, then asks `customer = <one value>`
// (a page of up to weft.DefaultListLimit) b.N times. A driver's
// BenchmarkSearch calls it, with n from a flag.
func BenchSearch(b *testing.B, s store.Store, n int) {
	b.Helper()
	const values, writers = 1000, 50
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				in := &weft.Instance{
					ID: fmt.Sprintf("bench-%09d", i), Workflow: "bench", Status: weft.StatusRunning,
					Search: weft.SearchAttributes{"customer": sStr(fmt.Sprintf("customer-%04d", i%values))},
				}
				if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	want := min(n/values, weft.DefaultListLimit)
	f := weft.InstanceFilter{Search: &weft.SearchRange{Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{sStr("customer-0500")}}}
	b.ReportAllocs()
	for b.Loop() {
		items, _, err := s.ListInstances(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		if len(items) != want {
			b.Fatalf("a page of %d, want %d", len(items), want)
		}
	}
}
