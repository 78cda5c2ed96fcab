package redisstore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// keyedPage is one answer of listInstancesKeyed.
type keyedPage struct {
	items []weft.Instance
	keys  []string
	next  string
}

// listKeyed calls listInstancesKeyed and checks that it answers one key
// per item.
func listKeyed(t *testing.T, s *Store, f weft.InstanceFilter) keyedPage {
	t.Helper()
	items, keys, next, err := s.listInstancesKeyed(context.Background(), f)
	if err != nil {
		t.Fatalf("filter %+v: %v", f, err)
	}
	if len(keys) != len(items) {
		t.Fatalf("filter %+v: %d keys for %d items", f, len(keys), len(items))
	}
	return keyedPage{items, keys, next}
}

// walkBefore reports whether key a comes before key b in the walk of a
// listing: byte order, reversed for the newest first.
func walkBefore(newestFirst bool, a, b string) bool {
	if newestFirst {
		return a > b
	}
	return a < b
}

// openKeyed opens a store on c under prefix at the fixed time now.
func openKeyed(t *testing.T, c redis.UniversalClient, prefix string, now time.Time) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{Client: c, Prefix: prefix, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatalf("open store %s: %v", prefix, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// keyedInstances draws n instances (ids i00…) with random workflows,
// statuses, creation times (three, so that ties fall to the id) and search
// attributes of every type, plus "kw", which holds several keywords.
func keyedInstances(mv modelValues, n int) []*weft.Instance {
	statuses := []weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusCompleted}
	created := []time.Time{mv.base.Add(-time.Hour), mv.base.Add(-time.Minute), mv.base}
	var out []*weft.Instance
	for i := range n {
		out = append(out, &weft.Instance{
			ID: fmt.Sprintf("i%02d", i), Workflow: []string{"wa", "wb"}[mv.rng.IntN(2)],
			Status: statuses[mv.rng.IntN(3)], CreatedAt: created[mv.rng.IntN(3)], Search: mv.attrs(),
		})
	}
	return append(out, &weft.Instance{ID: "kw", Workflow: "wa", Status: weft.StatusRunning, CreatedAt: created[1],
		Search: weft.SearchAttributes{"k": {Type: weft.SearchKeywords, Keywords: []string{"ab", "a", "b"}}}})
}

// commitAll creates the instances in s.
func commitAll(t *testing.T, s *Store, ins []*weft.Instance) {
	t.Helper()
	for _, in := range ins {
		cp := *in
		if _, err := s.Commit(context.Background(), store.Commit{Instance: &cp}); err != nil {
			t.Fatalf("create instance %s in %s: %v", in.ID, s.p, err)
		}
	}
}

// wantKey is the index member at which a listing by f meets in, computed
// from its values: created time and id, after the encoded value with
// f.Search (for keywords, the first keyword of the range in the walk's
// order); "" when in holds no value in the range.
func wantKey(t *testing.T, f weft.InstanceFilter, in *weft.Instance) string {
	t.Helper()
	tail := hexTime(in.CreatedAt) + in.ID
	if f.Search == nil {
		return tail
	}
	r := *f.Search
	v, ok := in.Search[r.Name]
	if !ok {
		return ""
	}
	vals := []weft.SearchValue{v}
	if r.Type == weft.SearchKeywords {
		vals = nil
		for _, k := range v.Keywords {
			vals = append(vals, str(k))
		}
	}
	best := ""
	for _, x := range vals {
		if !inRange(r, x) {
			continue
		}
		enc, err := encodeSearch(r.Type, x)
		if err != nil {
			t.Fatalf("encode %v: %v", x.Native(), err)
		}
		if best == "" || walkBefore(f.NewestFirst, enc+tail, best) {
			best = enc + tail
		}
	}
	return best
}

// TestListInstancesKeyedMembers walks listings of every kind (plain, by
// status, by workflow, newest first, by search attributes of each type,
// with Match and a small Examine) a few items a page: each key is the
// index member at which the walk met its item (present in that index),
// the keys of the whole walk are strictly in its order, the items are
// those of ListInstances, and each next cursor is keyCursor of a position
// no earlier than the page's last key: that key itself unless Examine cut
// the page.
func TestListInstancesKeyedMembers(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := openKeyed(t, c, "keyed:", now)
	ins := keyedInstances(modelValues{rng: rand.New(rand.NewPCG(5, 6)), base: now}, 40)
	commitAll(t, s, ins)
	byID := map[string]*weft.Instance{}
	for _, in := range ins {
		byID[in.ID] = in
	}
	lo, hi := num(-1), num(2)
	tlo := tm(now.Add(-time.Second))
	kwLo := str("a")
	even := func(in *weft.Instance) bool { return in.ID[len(in.ID)-1]%2 == 0 }
	tests := []struct {
		name string
		f    weft.InstanceFilter
	}{
		{"plain", weft.InstanceFilter{Limit: 4}},
		{"status", weft.InstanceFilter{Status: weft.StatusRunning, Limit: 3}},
		{"workflow", weft.InstanceFilter{Workflow: "wa", Limit: 3}},
		{"workflow and status newest first", weft.InstanceFilter{Workflow: "wb", Status: weft.StatusPending, Limit: 2, NewestFirst: true}},
		{"newest first", weft.InstanceFilter{Limit: 4, NewestFirst: true}},
		{"created range", weft.InstanceFilter{Limit: 3, CreatedFrom: now.Add(-time.Minute), CreatedBefore: now}},
		{"match examine", weft.InstanceFilter{Limit: 2, Match: even, Examine: 3}},
		{"match examine newest first", weft.InstanceFilter{Limit: 3, Match: even, Examine: 2, NewestFirst: true}},
		{"search string", weft.InstanceFilter{Limit: 3, Search: &weft.SearchRange{Name: "s", Type: weft.SearchString}}},
		{"search string prefix newest first", weft.InstanceFilter{Limit: 2, NewestFirst: true, Search: &weft.SearchRange{Name: "s", Type: weft.SearchString, Prefix: "a"}}},
		{"search number", weft.InstanceFilter{Limit: 3, Search: &weft.SearchRange{Name: "n", Type: weft.SearchNumber, Lo: &lo, LoInc: true, Hi: &hi}}},
		{"search number in", weft.InstanceFilter{Limit: 2, Search: &weft.SearchRange{Name: "n", Type: weft.SearchNumber, In: []weft.SearchValue{num(-1), num(0), num(3)}}}},
		{"search time newest first", weft.InstanceFilter{Limit: 3, NewestFirst: true, Search: &weft.SearchRange{Name: "t", Type: weft.SearchTime, Lo: &tlo}}},
		{"search keywords", weft.InstanceFilter{Limit: 2, Search: &weft.SearchRange{Name: "k", Type: weft.SearchKeywords, Lo: &kwLo, LoInc: true}}},
		{"search keywords newest first", weft.InstanceFilter{Limit: 2, NewestFirst: true, Search: &weft.SearchRange{Name: "k", Type: weft.SearchKeywords}}},
		{"search match examine", weft.InstanceFilter{Limit: 2, Match: even, Examine: 3, Search: &weft.SearchRange{Name: "k", Type: weft.SearchKeywords}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := tt.f
			var all []string
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatalf("no end after %d pages", pages)
				}
				p := listKeyed(t, s, f)
				items, next, err := s.ListInstances(ctx, f)
				if err != nil {
					t.Fatalf("ListInstances cursor %q: %v", f.Cursor, err)
				}
				if next != p.next || !slices.EqualFunc(items, p.items, func(a, b weft.Instance) bool { return a.ID == b.ID }) {
					t.Fatalf("cursor %q: ListInstances answers %d items and next %q, listInstancesKeyed %d and %q", f.Cursor, len(items), next, len(p.items), p.next)
				}
				for i, in := range p.items {
					k := p.keys[i]
					if want := wantKey(t, f, byID[in.ID]); k != want {
						t.Errorf("item %s: key %q, want %q", in.ID, k, want)
					}
					ix := statusIndex(in.Status, "")
					if f.Search != nil {
						ix = "ix:a:" + f.Search.Name
					}
					if err := c.ZScore(ctx, s.p+ix, k).Err(); err != nil {
						t.Errorf("item %s: key %q is not a member of %s: %v", in.ID, k, ix, err)
					}
					if n := len(all); n > 0 && !walkBefore(f.NewestFirst, all[n-1], k) {
						t.Errorf("item %s: key %q does not come after %q in the walk", in.ID, k, all[n-1])
					}
					all = append(all, k)
				}
				if p.next == "" {
					break
				}
				at, err := cursorKey(p.next)
				if err != nil {
					t.Fatalf("next cursor %q: %v", p.next, err)
				}
				if p.next != base64.RawURLEncoding.EncodeToString([]byte(at)) {
					t.Errorf("next cursor %q is not the base64 of its member", p.next)
				}
				switch n := len(p.keys); {
				case f.Examine == 0 && (n == 0 || at != p.keys[n-1]):
					t.Errorf("next cursor at %q, want the page's last key (of %d)", at, n)
				case n > 0 && walkBefore(f.NewestFirst, at, p.keys[n-1]):
					t.Errorf("next cursor at %q, before the page's last key %q", at, p.keys[n-1])
				}
				f.Cursor = p.next
			}
			if len(all) == 0 {
				t.Fatal("the walk listed nothing: the test checks nothing")
			}
		})
	}
}

// TestCursorKeyRoundTrip: keyCursor and cursorKey are inverse over any
// member's bytes, keyCursor is the cursor format (unpadded URL-safe
// base64), and cursorKey refuses what no listing returns.
func TestCursorKeyRoundTrip(t *testing.T) {
	t.Parallel()
	enc, _ := encodeNumber(-3)
	for _, k := range []string{
		"8000000000000000x",
		hexTime(time.Unix(0, 1)) + "an id with spaces/and+slashes",
		"a\x00\xff\x00\x01" + hexTime(time.Unix(5, 0)) + "id",
		enc + hexTime(time.Unix(5, 0)) + "\xff\xfe",
	} {
		c := keyCursor(k)
		if want := base64.RawURLEncoding.EncodeToString([]byte(k)); c != want {
			t.Errorf("keyCursor(%q) = %q, want %q", k, c, want)
		}
		if got, err := cursorKey(c); err != nil || got != k {
			t.Errorf("cursorKey(keyCursor(%q)) = %q, %v", k, got, err)
		}
	}
	for _, c := range []string{"", "!!!", keyCursor(strings.Repeat("0", minMember-1)), "aGVsbG8="} {
		if _, err := cursorKey(c); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("cursorKey(%q) = %v, want ErrInvalid", c, err)
		}
	}
}

// mergeKeyed is the merge rule stated on listInstancesKeyed, as a router
// applies it to the pages of its partitions for one filter and cursor:
// it returns the merged page and its next cursor, and whether the bound
// (the earliest next position of a partition that had more) ended a page
// shorter than the limit.
func mergeKeyed(t *testing.T, f weft.InstanceFilter, pages []keyedPage) (items []weft.Instance, next string, cut bool) {
	t.Helper()
	bound := ""
	for _, p := range pages {
		if p.next == "" {
			continue
		}
		k, err := cursorKey(p.next)
		if err != nil {
			t.Fatalf("partition cursor %q: %v", p.next, err)
		}
		if bound == "" || walkBefore(f.NewestFirst, k, bound) {
			bound = k
		}
	}
	type entry struct {
		key string
		in  weft.Instance
	}
	var all []entry
	for _, p := range pages {
		for i, in := range p.items {
			if bound == "" || !walkBefore(f.NewestFirst, bound, p.keys[i]) {
				all = append(all, entry{p.keys[i], in})
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if walkBefore(f.NewestFirst, a.key, b.key) {
			return -1
		}
		return 1 // keys differ: the ids do
	})
	limit := weft.ClampLimit(f.Limit)
	if len(all) > limit {
		all = all[:limit]
		next = keyCursor(all[limit-1].key)
	} else if bound != "" {
		next, cut = keyCursor(bound), len(all) < limit
	}
	for _, e := range all {
		items = append(items, e.in)
	}
	return items, next, cut
}

// routeList lists f in the partitions as a router does (listInstancesKeyed
// states how): with f.Examine and a filter it applies (Match or Search),
// walkKeys finds the stop at the E-th entry of them all, and only the
// partitions holding entries up to it are listed, with
// listInstancesUntil; otherwise every partition with listInstancesKeyed.
func routeList(t *testing.T, parts []*Store, f weft.InstanceFilter) []keyedPage {
	t.Helper()
	ctx := context.Background()
	pages := make([]keyedPage, len(parts))
	if f.Examine == 0 || f.Match == nil && f.Search == nil {
		for i, p := range parts {
			pages[i] = listKeyed(t, p, f)
		}
		return pages
	}
	e := examineOf(f)
	probes := make([][]string, len(parts))
	var all []string
	for i, p := range parts {
		ks, err := p.walkKeys(ctx, f, e)
		if err != nil {
			t.Fatalf("walk keys of %s, filter %+v: %v", p.p, f, err)
		}
		if len(ks) > e {
			t.Fatalf("walk keys of %s: %d keys, asked %d", p.p, len(ks), e)
		}
		for j := 1; j < len(ks); j++ {
			if !walkBefore(f.NewestFirst, ks[j-1], ks[j]) {
				t.Fatalf("walk keys of %s: %q before %q, not in the walk's order", p.p, ks[j-1], ks[j])
			}
		}
		probes[i] = ks
		all = append(all, ks...)
	}
	stop := ""
	if len(all) >= e {
		slices.SortFunc(all, func(a, b string) int {
			if walkBefore(f.NewestFirst, a, b) {
				return -1
			}
			return 1
		})
		stop = all[e-1]
	}
	for i, p := range parts {
		if len(probes[i]) == 0 || stop != "" && walkBefore(f.NewestFirst, stop, probes[i][0]) {
			continue // nothing up to the stop
		}
		items, keys, next, err := p.listInstancesUntil(ctx, f, stop)
		if err != nil {
			t.Fatalf("list %s until %q, filter %+v: %v", p.p, stop, f, err)
		}
		if len(keys) != len(items) {
			t.Fatalf("list %s until %q: %d keys for %d items", p.p, stop, len(keys), len(items))
		}
		pages[i] = keyedPage{items, keys, next}
	}
	return pages
}

// TestListInstancesKeyedMerge checks the merge rule and the sharing of
// Examine: the instances split over two stores (by FNV of the id, as
// partitions are) and all of them in a third, random filters of every
// kind (search ranges of each type, Match, Examine, NewestFirst, the other
// filters, small pages) list through routeList and mergeKeyed page for
// page and cursor for cursor what the whole store lists, a merged call
// never calling Match more than Examine times.
func TestListInstancesKeyedMerge(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	whole := openKeyed(t, c, "merge-whole:", now)
	parts := []*Store{openKeyed(t, c, "merge-p0:", now), openKeyed(t, c, "merge-p1:", now), openKeyed(t, c, "merge-p2:", now)}
	rng := rand.New(rand.NewPCG(7, 8))
	mv := modelValues{rng: rng, base: now}
	ins := keyedInstances(mv, 60)
	commitAll(t, whole, ins)
	split := make([][]*weft.Instance, len(parts))
	for _, in := range ins {
		h := fnv.New32a()
		h.Write([]byte(in.ID))
		n := h.Sum32() % uint32(len(parts))
		split[n] = append(split[n], in)
	}
	for i, p := range parts {
		if len(split[i]) == 0 {
			t.Fatalf("partition %d holds no instance", i)
		}
		commitAll(t, p, split[i])
	}
	statuses := []weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusCompleted}
	cuts, stopped := 0, 0
	for q := range 300 {
		f := weft.InstanceFilter{NewestFirst: rng.IntN(2) == 1, Limit: 1 + rng.IntN(4)}
		if rng.IntN(3) > 0 {
			names := []string{"n", "s", "k", "b", "t"}
			r := mv.rangeOf(names[rng.IntN(len(names))])
			f.Search = &r
		}
		if rng.IntN(2) == 0 {
			f.Examine = 1 + rng.IntN(5)
		}
		if rng.IntN(4) == 0 {
			f.Workflow = "wa"
		}
		if rng.IntN(4) == 0 {
			f.Status = statuses[rng.IntN(3)]
		}
		if rng.IntN(4) == 0 {
			f.CreatedFrom = now.Add(-time.Minute)
		}
		var calls int
		if rng.IntN(2) == 0 {
			f.Match = func(in *weft.Instance) bool {
				calls++
				return in.ID[len(in.ID)-1]%2 == 0
			}
		}
		for pages := 0; f.Cursor != "" || pages == 0; pages++ {
			if pages > 500 {
				t.Fatalf("query %d: the walk does not end", q)
			}
			items, next, err := whole.ListInstances(ctx, f)
			if err != nil {
				t.Fatalf("query %d: whole store: %v", q, err)
			}
			calls = 0
			ps := routeList(t, parts, f)
			if f.Examine > 0 && calls > f.Examine {
				t.Fatalf("query %d filter %+v search %+v cursor %q: the partitions called Match %d times, Examine %d", q, f, f.Search, f.Cursor, calls, f.Examine)
			}
			for _, p := range ps {
				if p.next != "" && f.Examine > 0 {
					stopped++
				}
			}
			got, gotNext, cut := mergeKeyed(t, f, ps)
			if cut {
				cuts++
			}
			if !slices.EqualFunc(got, items, func(a, b weft.Instance) bool { return a.ID == b.ID }) || gotNext != next {
				t.Fatalf("query %d filter %+v search %+v cursor %q: merged page %v next %q, whole store's %v next %q",
					q, f, f.Search, f.Cursor, ids(got), gotNext, ids(items), next)
			}
			f.Cursor = next
		}
	}
	if cuts == 0 || stopped == 0 {
		t.Errorf("%d merged pages cut short by a bound, %d partition pages with Examine and a next cursor: the test misses a case", cuts, stopped)
	}
}

// ids returns the ids of items.
func ids(items []weft.Instance) []string {
	out := make([]string, len(items))
	for i, in := range items {
		out[i] = in.ID
	}
	return out
}
