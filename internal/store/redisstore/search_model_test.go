package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// The attributes of the model test, one of each type.
var modelTypes = map[string]weft.SearchType{
	"n": weft.SearchNumber, "s": weft.SearchString, "k": weft.SearchKeywords, "b": weft.SearchBool, "t": weft.SearchTime,
}

// modelValues draws the values of the model test from small sets, so that
// values repeat and ranges hit them.
type modelValues struct {
	rng  *rand.Rand
	base time.Time
}

var (
	modelNums = []float64{-1e300, -3, -1, -0.5, math.Copysign(0, -1), 0, 0.5, 1, 2, 3, 1e9, 1e300}
	modelStrs = []string{"", "\x00", "a", "a\x00", "ab", "abc", "b", "ba", "\u00e9", "\U0010ffff"}
)

func (m modelValues) value(typ weft.SearchType) weft.SearchValue {
	switch typ {
	case weft.SearchNumber:
		return num(modelNums[m.rng.IntN(len(modelNums))])
	case weft.SearchTime:
		return tm(m.base.Add(time.Duration(m.rng.IntN(5)-2) * time.Second))
	case weft.SearchBool:
		return weft.SearchValue{Type: weft.SearchBool, Bool: m.rng.IntN(2) == 1}
	case weft.SearchKeywords:
		var ks []string
		for range m.rng.IntN(4) {
			ks = append(ks, modelStrs[m.rng.IntN(len(modelStrs))])
		}
		return weft.SearchValue{Type: weft.SearchKeywords, Keywords: ks}
	}
	return str(modelStrs[m.rng.IntN(len(modelStrs))])
}

// attrs draws an instance's attributes: each one present or not.
func (m modelValues) attrs() weft.SearchAttributes {
	out := weft.SearchAttributes{}
	for name, typ := range modelTypes {
		if m.rng.IntN(3) > 0 {
			out[name] = m.value(typ)
		}
	}
	return out
}

// rangeOf draws a range over attribute name.
func (m modelValues) rangeOf(name string) weft.SearchRange {
	typ := modelTypes[name]
	vt := typ
	if typ == weft.SearchKeywords {
		vt = weft.SearchString
	}
	r := weft.SearchRange{Name: name, Type: typ}
	switch k := m.rng.IntN(4); {
	case k == 0:
		for range 1 + m.rng.IntN(3) {
			r.In = append(r.In, m.value(vt))
		}
		slices.SortFunc(r.In, func(a, b weft.SearchValue) int { return cmpSearch(vt, a, b) })
		r.In = slices.CompactFunc(r.In, func(a, b weft.SearchValue) bool { return cmpSearch(vt, a, b) == 0 })
	case k == 1 && vt == weft.SearchString:
		r.Prefix = modelStrs[m.rng.IntN(len(modelStrs))]
	default:
		if m.rng.IntN(3) > 0 {
			lo := m.value(vt)
			r.Lo, r.LoInc = &lo, m.rng.IntN(2) == 1
		}
		if m.rng.IntN(3) > 0 {
			hi := m.value(vt)
			r.Hi, r.HiInc = &hi, m.rng.IntN(2) == 1
		}
	}
	return r
}

// expectSearch is the model of a listing by f.Search: the ids of the
// instances in the order of the walk.
func expectSearch(all map[string]*weft.Instance, f weft.InstanceFilter) []string {
	r := *f.Search
	vt := r.Type
	if vt == weft.SearchKeywords {
		vt = weft.SearchString
	}
	type hit struct {
		v  weft.SearchValue
		in *weft.Instance
	}
	var hits []hit
	for _, in := range all {
		switch {
		case f.Workflow != "" && in.Workflow != f.Workflow,
			f.Status != "" && in.Status != f.Status,
			!f.CreatedFrom.IsZero() && in.CreatedAt.Before(f.CreatedFrom),
			!f.CreatedBefore.IsZero() && !in.CreatedAt.Before(f.CreatedBefore),
			f.Match != nil && !f.Match(in):
			continue
		}
		v, ok := in.Search[r.Name]
		if !ok {
			continue
		}
		vals := []weft.SearchValue{v}
		if r.Type == weft.SearchKeywords {
			vals = nil
			for _, k := range v.Keywords {
				vals = append(vals, str(k))
			}
		}
		// The first value in the range in the walk's order.
		var best *weft.SearchValue
		for _, x := range vals {
			if !inRange(r, x) {
				continue
			}
			if c := cmpSearch(vt, x, derefOr(best, x)); best == nil || (c < 0) != f.NewestFirst && c != 0 {
				best = &x
			}
		}
		if best != nil {
			hits = append(hits, hit{*best, in})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		c := cmp.Or(cmpSearch(vt, a.v, b.v), a.in.CreatedAt.Compare(b.in.CreatedAt), strings.Compare(a.in.ID, b.in.ID))
		if f.NewestFirst {
			return -c
		}
		return c
	})
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.in.ID
	}
	return ids
}

func derefOr(p *weft.SearchValue, v weft.SearchValue) weft.SearchValue {
	if p == nil {
		return v
	}
	return *p
}

// walkAll lists every page of f; each page holds at most its limit, and
// a page shorter than the limit has a cursor only when f.Examine may have
// cut it short.
func walkAll(t *testing.T, s store.Store, f weft.InstanceFilter) (ids []string, calls int) {
	t.Helper()
	for {
		calls++
		if calls > 2000 {
			t.Fatalf("filter %+v: no end after %d pages", f, calls)
		}
		items, next, err := s.ListInstances(context.Background(), f)
		if err != nil {
			t.Fatalf("filter %+v: %v", f, err)
		}
		if len(items) > weft.ClampLimit(f.Limit) {
			t.Fatalf("filter %+v: page of %d", f, len(items))
		}
		for _, in := range items {
			if in.State != nil {
				t.Errorf("listed %s with its state", in.ID)
			}
			ids = append(ids, in.ID)
		}
		if next == "" {
			return ids, calls
		}
		f.Cursor = next
	}
}

// TestSearchModel commits random instances (creates, updates that change,
// add and remove attributes, deletes) and lists them by random ranges of
// each type, with the other filters, Match, NewestFirst, small pages and
// small Examine bounds: each walk lists exactly the instances a model
// computes, in its order, each once.
func TestSearchModel(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := Open(ctx, Config{Client: c, Prefix: "model:", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	mv := modelValues{rng: rng, base: now}
	all := map[string]*weft.Instance{}
	statuses := []weft.Status{weft.StatusPending, weft.StatusRunning, weft.StatusCompleted}
	created := []time.Time{now.Add(-time.Hour), now.Add(-time.Minute), now}
	for round := range 6 {
		for range 40 {
			id := fmt.Sprintf("i%02d", rng.IntN(50))
			old, exists := all[id]
			switch {
			case !exists:
				in := &weft.Instance{ID: id, Workflow: []string{"wa", "wb"}[rng.IntN(2)], Status: statuses[rng.IntN(3)],
					CreatedAt: created[rng.IntN(len(created))], Search: mv.attrs()}
				rev, err := s.Commit(ctx, store.Commit{Instance: in})
				if err != nil {
					t.Fatal(err)
				}
				in.Rev = rev
				all[id] = in
			case rng.IntN(5) == 0:
				if err := s.DeleteInstance(ctx, id, 0); err != nil {
					t.Fatal(err)
				}
				delete(all, id)
			default:
				in := *old
				in.Search = mv.attrs()
				if rng.IntN(3) == 0 {
					in.Search = old.Search // unchanged
				}
				in.Status = statuses[rng.IntN(3)]
				rev, err := s.Commit(ctx, store.Commit{Instance: &in})
				if err != nil {
					t.Fatal(err)
				}
				in.Rev = rev
				all[id] = &in
			}
		}
		for q := range 60 {
			names := []string{"n", "s", "k", "b", "t"}
			r := mv.rangeOf(names[rng.IntN(len(names))])
			f := weft.InstanceFilter{Search: &r, NewestFirst: rng.IntN(2) == 1, Limit: 1 + rng.IntN(4)}
			if rng.IntN(3) == 0 {
				f.Examine = 1 + rng.IntN(5)
			}
			if rng.IntN(4) == 0 {
				f.Workflow = "wa"
			}
			if rng.IntN(4) == 0 {
				f.Status = statuses[rng.IntN(3)]
			}
			if rng.IntN(4) == 0 {
				f.CreatedFrom = created[1]
			}
			if rng.IntN(4) == 0 {
				f.CreatedBefore = created[2]
			}
			if rng.IntN(3) == 0 {
				f.Match = func(in *weft.Instance) bool { return in.ID[len(in.ID)-1]%2 == 0 }
			}
			want := expectSearch(all, f)
			got, _ := walkAll(t, s, f)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d query %d: range %+v, filter %+v:\n got %v\nwant %v", round, q, r, f, got, want)
			}
		}
	}
}

// TestSearchRangeRefused: a range that does not fit its type is refused
// before Redis is asked.
func TestSearchRangeRefused(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	s, err := Open(ctx, Config{Client: c, Prefix: "refused:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, _, err = s.ListInstances(ctx, weft.InstanceFilter{Search: &weft.SearchRange{Name: "n", Type: weft.SearchNumber, Prefix: "1"}})
	if !errors.Is(err, weft.ErrInvalid) || !strings.Contains(err.Error(), "Prefix") {
		t.Errorf("prefix on a number: %v, want ErrInvalid naming Prefix", err)
	}
	in := &weft.Instance{ID: "nan", Workflow: "w", Status: weft.StatusPending, Search: weft.SearchAttributes{"n": num(math.NaN())}}
	if _, err := s.Commit(ctx, store.Commit{Instance: in}); !errors.Is(err, weft.ErrInvalid) {
		t.Errorf("commit of NaN: %v, want ErrInvalid", err)
	}
	if _, err := s.GetInstance(ctx, "nan"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("the refused commit stored its instance: %v", err)
	}
}

// TestSearchIndexEntries: the keys behind the index, as doc.go lays them
// out. An instance without attributes has no sa field and no entry; a
// commit adds, moves and removes exactly an instance's entries, a delete
// removes them; and a commit that leaves the attributes as they were runs
// no more Redis commands than one of an instance without any.
func TestSearchIndexEntries(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s, err := Open(ctx, Config{Client: c, Prefix: "entries:", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ct := hexTime(now)
	enc := func(typ weft.SearchType, v weft.SearchValue) string {
		e, err := encodeSearch(typ, v)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// entries returns every index of search attributes with its members.
	entries := func() map[string][]string {
		t.Helper()
		keys, err := c.Keys(ctx, s.p+"ix:a:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, k := range keys {
			ms, err := c.ZRange(ctx, k, 0, -1).Result()
			if err != nil {
				t.Fatal(err)
			}
			out[strings.TrimPrefix(k, s.p+"ix:a:")] = ms
		}
		return out
	}
	want := func(what string, w map[string][]string) {
		t.Helper()
		got := entries()
		if len(got) != len(w) {
			t.Errorf("%s: indexes %v, want %v", what, got, w)
			return
		}
		for k, ms := range w {
			if !slices.Equal(got[k], ms) {
				t.Errorf("%s: index %s = %q, want %q", what, k, got[k], ms)
			}
		}
	}
	commit := func(in *weft.Instance) {
		t.Helper()
		rev, err := s.Commit(ctx, store.Commit{Instance: in})
		if err != nil {
			t.Fatal(err)
		}
		in.Rev = rev
	}
	// cmds counts the Redis commands (scripts' included) of one commit,
	// by name.
	cmds := func(in *weft.Instance) map[string]int64 {
		t.Helper()
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		commit(in)
		n := commandCalls(t, c)
		delete(n, "config")
		return n
	}

	plain := &weft.Instance{ID: "plain", Workflow: "w", Status: weft.StatusPending}
	commit(plain)
	if ok, err := c.HExists(ctx, s.p+"i:plain", "sa").Result(); err != nil || ok {
		t.Errorf("an instance without attributes has a field sa: %v, %v", ok, err)
	}
	want("no attributes", nil)

	a := &weft.Instance{ID: "a", Workflow: "w", Status: weft.StatusPending, Search: weft.SearchAttributes{
		"s": str("x"), "n": num(1), "k": {Type: weft.SearchKeywords, Keywords: []string{"q", "p", "q"}},
	}}
	commit(a)
	want("created", map[string][]string{
		"s": {enc(weft.SearchString, str("x")) + ct + "a"},
		"n": {enc(weft.SearchNumber, num(1)) + ct + "a"},
		"k": {enc(weft.SearchString, str("p")) + ct + "a", enc(weft.SearchString, str("q")) + ct + "a"},
	})

	now = now.Add(time.Minute) // the entries keep the creation time
	a.Search = weft.SearchAttributes{"s": str("y"), "n": num(1), "k": {Type: weft.SearchKeywords, Keywords: []string{"p"}}, "b": {Type: weft.SearchBool, Bool: true}}
	commit(a)
	want("changed, added and removed", map[string][]string{
		"s": {enc(weft.SearchString, str("y")) + ct + "a"},
		"n": {enc(weft.SearchNumber, num(1)) + ct + "a"},
		"k": {enc(weft.SearchString, str("p")) + ct + "a"},
		"b": {"1" + ct + "a"},
	})

	// The same commit, status and all, of an instance with attributes
	// that do not change and of one without any.
	plain.Status, a.Status = weft.StatusRunning, weft.StatusRunning
	if withAttrs, without := cmds(a), cmds(plain); !maps.Equal(withAttrs, without) {
		t.Errorf("a commit with unchanged attributes runs the commands %v, one without attributes %v", withAttrs, without)
	}

	a.Search = nil
	commit(a)
	want("removed", nil)
	if ok, err := c.HExists(ctx, s.p+"i:a", "sa").Result(); err != nil || ok {
		t.Errorf("an instance whose attributes were removed has a field sa: %v, %v", ok, err)
	}
	a.Search = weft.SearchAttributes{"s": str("z")}
	commit(a)
	if err := s.DeleteInstance(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	want("deleted", nil)
}
