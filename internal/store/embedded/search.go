package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/tuple"
)

// Search attributes (doc.go, "Search attributes"): the index of every
// instance's attributes in bSearch, one key per attribute (per distinct
// keyword of a keywords attribute), and the registry of their types in
// bSearchAttrs.
var (
	bSearch      = []byte("instances_by_search") // (name, type, value, created, id)
	bSearchAttrs = []byte("search_attributes")   // name → weft.SearchAttribute
)

// searchTypeCode is the byte after the name in an index key: a name's
// entries of one type sort together, apart from any other type's (a
// registered name has one type for good, but the index does not rely on
// it).
func searchTypeCode(t weft.SearchType) byte {
	switch t {
	case weft.SearchString:
		return 's'
	case weft.SearchNumber:
		return 'n'
	case weft.SearchBool:
		return 'b'
	case weft.SearchTime:
		return 't'
	case weft.SearchKeywords:
		return 'k'
	}
	return 0
}

// searchBase is the prefix of every index key of attribute name of type t.
func searchBase(name string, t weft.SearchType) key {
	return append(key(nil).str(name), searchTypeCode(t))
}

// appendNumber appends the order-preserving encoding of f: its IEEE 754
// bits, big-endian, with the sign bit flipped for positive numbers and
// every bit flipped for negative ones, so that the bytes sort as the
// numbers do. -0 is encoded as 0. f must not be NaN.
func appendNumber(b []byte, f float64) []byte {
	if f == 0 {
		f = 0 // -0 → 0
	}
	bits := math.Float64bits(f)
	if bits>>63 == 1 {
		bits = ^bits
	} else {
		bits |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(b, bits)
}

// appendSearchValue appends the encoding of v, read as a value of type t
// (a keyword is a string): a number as appendNumber, a time as the tuple
// time (Unix nanoseconds, sign bit flipped), a bool as one byte 0 or 1, a
// string as the tuple string (escaped, terminated).
func appendSearchValue(b []byte, t weft.SearchType, v weft.SearchValue) []byte {
	switch t {
	case weft.SearchNumber:
		return appendNumber(b, v.Number)
	case weft.SearchTime:
		return tuple.AppendTime(b, v.Time)
	case weft.SearchBool:
		if v.Bool {
			return append(b, 1)
		}
		return append(b, 0)
	default:
		return tuple.AppendString(b, v.String)
	}
}

// searchValueLen returns the length of the value's encoding at the front
// of b, for an attribute of type t; ok is false when b does not start
// with one.
func searchValueLen(b []byte, t weft.SearchType) (n int, ok bool) {
	switch t {
	case weft.SearchNumber, weft.SearchTime:
		return 8, len(b) >= 8
	case weft.SearchBool:
		return 1, len(b) >= 1
	}
	_, rest, ok := readStr(b)
	return len(b) - len(rest), ok
}

// searchKeys returns the index keys of in's attributes, sorted and each
// once (a keyword held twice is indexed once).
func searchKeys(in *weft.Instance) [][]byte {
	if in == nil || len(in.Search) == 0 {
		return nil
	}
	suffix := key(nil).time(in.CreatedAt).str(in.ID)
	var ks [][]byte
	for name, v := range in.Search {
		base := searchBase(name, v.Type)
		if v.Type == weft.SearchKeywords {
			for _, kw := range v.Keywords {
				ks = append(ks, append(tuple.AppendString(bytes.Clone(base), kw), suffix...))
			}
			continue
		}
		ks = append(ks, append(appendSearchValue(base, v.Type, v), suffix...))
	}
	slices.SortFunc(ks, bytes.Compare)
	return slices.CompactFunc(ks, bytes.Equal)
}

// syncSearch turns the index entries of old into those of new (either
// may be nil): it deletes the keys only old has and puts those only new
// has. Neither having attributes, the common case, costs nothing.
func syncSearch(tx kvTx, old, new *weft.Instance) error {
	ok, nk := searchKeys(old), searchKeys(new)
	if len(ok) == 0 && len(nk) == 0 {
		return nil
	}
	b := tx.Bucket(bSearch)
	i, j := 0, 0
	for i < len(ok) || j < len(nk) {
		c := 0
		switch {
		case i == len(ok):
			c = 1
		case j == len(nk):
			c = -1
		default:
			c = bytes.Compare(ok[i], nk[j])
		}
		switch {
		case c < 0:
			if err := b.Delete(ok[i]); err != nil {
				return err
			}
			i++
		case c > 0:
			if err := b.Put(nk[j], []byte{}); err != nil {
				return err
			}
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return nil
}

// checkSearch reports what the store refuses in an instance's search
// attributes, naming the attribute: an unknown type, a number that is NaN
// or infinite (neither orders, nor has a JSON form), a string or keyword
// that is not UTF-8 (JSON would store another string than the one
// indexed), and what exceeds the limits of host/weft/search.go.
func checkSearch(id string, attrs weft.SearchAttributes) error {
	if len(attrs) > weft.MaxSearchAttributes {
		return store.Invalid("instance %q: %d search attributes, more than %d", id, len(attrs), weft.MaxSearchAttributes)
	}
	for name, v := range attrs {
		if name == "" || len(name) > weft.MaxSearchNameLen {
			return store.Invalid("instance %q: search attribute name %q: want 1 to %d bytes", id, name, weft.MaxSearchNameLen)
		}
		if err := checkSearchValue(v, v.Type, true); err != nil {
			return store.Invalid("instance %q: search attribute %q: %s", id, name, err)
		}
	}
	return nil
}

// checkSearchValue says what is wrong with v as a value of type t, or
// nil: to be stored, or (stored false) as a bound of a range, which may
// be any string (a planner's bound past a prefix need not be UTF-8) and
// any number but NaN.
func checkSearchValue(v weft.SearchValue, t weft.SearchType, stored bool) error {
	if v.Type != t {
		return fmt.Errorf("a %s value, not a %s", v.Type, t)
	}
	str := func(s string) error {
		if !stored {
			return nil
		}
		if len(s) > weft.MaxSearchStringLen {
			return fmt.Errorf("a string of %d bytes, more than %d", len(s), weft.MaxSearchStringLen)
		}
		if !utf8.ValidString(s) {
			return fmt.Errorf("%q is not UTF-8", s)
		}
		return nil
	}
	switch t {
	case weft.SearchString:
		return str(v.String)
	case weft.SearchNumber:
		if math.IsNaN(v.Number) || stored && math.IsInf(v.Number, 0) {
			return fmt.Errorf("the number %v is not finite", v.Number)
		}
	case weft.SearchBool, weft.SearchTime:
	case weft.SearchKeywords:
		if len(v.Keywords) > weft.MaxSearchKeywords {
			return fmt.Errorf("%d keywords, more than %d", len(v.Keywords), weft.MaxSearchKeywords)
		}
		for _, kw := range v.Keywords {
			if err := str(kw); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unknown type %q", t)
	}
	return nil
}

// normSearch returns a copy of attrs with its times in UTC, as the store
// keeps every time (nil for none).
func normSearch(attrs weft.SearchAttributes) weft.SearchAttributes {
	if len(attrs) == 0 {
		return nil
	}
	out := maps.Clone(attrs)
	for name, v := range out {
		switch v.Type {
		case weft.SearchTime:
			v.Time = v.Time.UTC()
			out[name] = v
		case weft.SearchKeywords:
			v.Keywords = slices.Clone(v.Keywords)
			out[name] = v
		}
	}
	return out
}

// span is one interval [lo, hi) of index keys.
type span struct{ lo, hi []byte }

// searchSpans validates r and returns the intervals of index keys it
// reads, in key order, disjoint (none for an empty range).
func searchSpans(r *weft.SearchRange) ([]span, error) {
	if r.Name == "" {
		return nil, store.Invalid("search range: the attribute name must not be empty")
	}
	if searchTypeCode(r.Type) == 0 {
		return nil, store.Invalid("search range on %q: unknown type %q", r.Name, r.Type)
	}
	bounds := r.Lo != nil || r.Hi != nil
	switch {
	case len(r.In) > 0 && (bounds || r.Prefix != ""):
		return nil, store.Invalid("search range on %q: In with bounds or a prefix; give one of In, Lo/Hi, Prefix", r.Name)
	case bounds && r.Prefix != "":
		return nil, store.Invalid("search range on %q: bounds with a prefix; give one of In, Lo/Hi, Prefix", r.Name)
	}
	// A keyword is compared as a string.
	vt := r.Type
	if vt == weft.SearchKeywords {
		vt = weft.SearchString
	}
	base := searchBase(r.Name, r.Type)
	check := func(what string, v weft.SearchValue) error {
		if err := checkSearchValue(v, vt, false); err != nil {
			return store.Invalid("search range on %q, a %s attribute: %s: %s", r.Name, r.Type, what, err)
		}
		return nil
	}
	switch {
	case len(r.In) > 0:
		spans := make([]span, 0, len(r.In))
		for i, v := range r.In {
			if err := check(fmt.Sprintf("In[%d]", i), v); err != nil {
				return nil, err
			}
			p := appendSearchValue(bytes.Clone(base), vt, v)
			spans = append(spans, span{p, prefixEnd(p)})
		}
		// Sorted already when the caller follows SearchRange.In; the walk
		// needs it.
		slices.SortFunc(spans, func(a, b span) int { return bytes.Compare(a.lo, b.lo) })
		return slices.CompactFunc(spans, func(a, b span) bool { return bytes.Equal(a.lo, b.lo) }), nil
	case r.Prefix != "":
		if vt != weft.SearchString {
			return nil, store.Invalid("search range on %q: Prefix on a %s attribute; a prefix is for strings and keywords", r.Name, r.Type)
		}
		if err := check("Prefix", weft.SearchValue{Type: vt, String: r.Prefix}); err != nil {
			return nil, err
		}
		p := tuple.AppendString(bytes.Clone(base), r.Prefix)
		p = p[:len(p)-2] // the string's bytes, without its terminator
		return []span{{p, prefixEnd(p)}}, nil
	}
	lo, hi := []byte(base), prefixEnd(base)
	if r.Lo != nil {
		if err := check("Lo", *r.Lo); err != nil {
			return nil, err
		}
		if lo = appendSearchValue(bytes.Clone(base), vt, *r.Lo); !r.LoInc {
			lo = prefixEnd(lo)
		}
	}
	if r.Hi != nil {
		if err := check("Hi", *r.Hi); err != nil {
			return nil, err
		}
		if hi = appendSearchValue(bytes.Clone(base), vt, *r.Hi); r.HiInc {
			hi = prefixEnd(hi)
		}
	}
	if bytes.Compare(lo, hi) >= 0 {
		return nil, nil
	}
	return []span{{lo, hi}}, nil
}

// inSpans reports whether k lies in one of spans.
func inSpans(spans []span, k []byte) bool {
	i := sort.Search(len(spans), func(i int) bool { return bytes.Compare(spans[i].hi, k) > 0 })
	return i < len(spans) && bytes.Compare(spans[i].lo, k) <= 0
}

// spanWalk walks the keys of a bucket that lie in spans, in key order or
// (desc) in reverse.
type spanWalk struct {
	c     kvCursor
	spans []span
	desc  bool
	i     int // the span of the last key returned
}

// first returns the first key of the walk after the position after (a key
// already walked; nil: from the start), or nil.
func (w *spanWalk) first(after []byte) []byte {
	if !w.desc {
		w.i = 0
		if after != nil {
			w.i = sort.Search(len(w.spans), func(i int) bool { return bytes.Compare(w.spans[i].hi, after) > 0 })
		}
		for ; w.i < len(w.spans); w.i++ {
			from := w.spans[w.i].lo
			if after != nil && bytes.Compare(after, from) >= 0 {
				from = append(bytes.Clone(after), 0) // the least key above after
			}
			if k, _ := w.c.Seek(from); k != nil && bytes.Compare(k, w.spans[w.i].hi) < 0 {
				return k
			}
		}
		return nil
	}
	w.i = len(w.spans) - 1
	if after != nil {
		w.i = sort.Search(len(w.spans), func(i int) bool { return bytes.Compare(w.spans[i].lo, after) >= 0 }) - 1
	}
	for ; w.i >= 0; w.i-- {
		below := w.spans[w.i].hi
		if after != nil && bytes.Compare(after, below) < 0 {
			below = after
		}
		if k := w.lastBelow(below); k != nil && bytes.Compare(k, w.spans[w.i].lo) >= 0 {
			return k
		}
	}
	return nil
}

// next returns the key after the last one returned, or nil.
func (w *spanWalk) next() []byte {
	if !w.desc {
		if k, _ := w.c.Next(); k != nil && bytes.Compare(k, w.spans[w.i].hi) < 0 {
			return k
		}
		for w.i++; w.i < len(w.spans); w.i++ {
			if k, _ := w.c.Seek(w.spans[w.i].lo); k != nil && bytes.Compare(k, w.spans[w.i].hi) < 0 {
				return k
			}
		}
		return nil
	}
	if k, _ := w.c.Prev(); k != nil && bytes.Compare(k, w.spans[w.i].lo) >= 0 {
		return k
	}
	for w.i--; w.i >= 0; w.i-- {
		if k := w.lastBelow(w.spans[w.i].hi); k != nil && bytes.Compare(k, w.spans[w.i].lo) >= 0 {
			return k
		}
	}
	return nil
}

// lastBelow places the cursor on the last key below hi and returns it.
func (w *spanWalk) lastBelow(hi []byte) []byte {
	if k, _ := w.c.Seek(hi); k == nil {
		k, _ = w.c.Last()
		return k
	}
	k, _ := w.c.Prev()
	return k
}

// listBySearch is ListInstances with f.Search set: it walks the index of
// f.Search.Name over its spans (see ListInstances for the order, the
// cursor and what one call reads).
func (s *Store) listBySearch(ctx context.Context, f weft.InstanceFilter, limit, examine int) ([]weft.Instance, string, error) {
	r := f.Search
	spans, err := searchSpans(r)
	if err != nil {
		return nil, "", err
	}
	base := searchBase(r.Name, r.Type)
	var after []byte
	if f.Cursor != "" {
		c, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		after = append(bytes.Clone(base), c...)
	}
	var lo, hi []byte
	if !f.CreatedFrom.IsZero() {
		lo = key(nil).time(f.CreatedFrom)
	}
	if !f.CreatedBefore.IsZero() {
		hi = key(nil).time(f.CreatedBefore)
	}
	var items []weft.Instance
	var next string
	err = s.read(ctx, func(tx kvTx) error {
		w := spanWalk{c: tx.Bucket(bSearch).Cursor(), spans: spans, desc: f.NewestFirst}
		examined := 0
		var last []byte
		for k := w.first(after); k != nil; k = w.next() {
			if len(items) == limit || examined == examine {
				next = encodeCursor(last[len(base):])
				return nil
			}
			examined++
			last = k
			n, ok := searchValueLen(k[len(base):], r.Type)
			if !ok || len(k) < len(base)+n+8 {
				return fmt.Errorf("corrupt search index key %x", k)
			}
			valueEnd := len(base) + n
			created := k[valueEnd : valueEnd+8]
			id, _, ok := readStr(k[valueEnd+8:])
			if !ok {
				return fmt.Errorf("corrupt search index key %x", k)
			}
			if lo != nil && bytes.Compare(created, lo) < 0 || hi != nil && bytes.Compare(created, hi) >= 0 {
				continue
			}
			in, err := getInst(tx, id)
			if err != nil {
				return err
			}
			if in == nil {
				return fmt.Errorf("search index %x names missing instance %q", k, id)
			}
			if f.Workflow != "" && in.Workflow != f.Workflow || f.Status != "" && in.Status != f.Status {
				continue
			}
			if r.Type == weft.SearchKeywords && listedEarlier(in.Search[r.Name], base, k, valueEnd, spans, f.NewestFirst) {
				continue
			}
			if f.Match != nil && !f.Match(&in.Instance) {
				continue
			}
			items = append(items, in.Instance)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return items, next, nil
}

// listedEarlier reports whether the walk lists the instance of index key
// k (a keyword's entry, its value ending at valueEnd) under another of its
// keywords v holds: one in the spans that comes before k in the walk's
// order.
func listedEarlier(v weft.SearchValue, base, k []byte, valueEnd int, spans []span, desc bool) bool {
	if len(v.Keywords) < 2 {
		return false
	}
	suffix := k[valueEnd:]
	for _, kw := range v.Keywords {
		other := append(tuple.AppendString(bytes.Clone(base), kw), suffix...)
		c := bytes.Compare(other, k)
		if (c < 0 && !desc || c > 0 && desc) && inSpans(spans, other) {
			return true
		}
	}
	return false
}

// RegisterSearchAttributes implements store.Store. It reads first, and
// writes (one durable transaction, which checks again) only when a name
// is not registered yet: a definition saved again, the common case, costs
// no write.
func (s *Store) RegisterSearchAttributes(ctx context.Context, workflow string, attrs map[string]weft.SearchType) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := weft.CheckID("workflow name", workflow); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(attrs))
	for _, name := range names {
		if name == "" || len(name) > weft.MaxSearchNameLen {
			return store.Invalid("workflow %q: search attribute name %q: want 1 to %d bytes", workflow, name, weft.MaxSearchNameLen)
		}
		if !attrs[name].Valid() {
			return store.Invalid("workflow %q: search attribute %q: unknown type %q", workflow, name, attrs[name])
		}
	}
	// missing returns the names not registered yet, or the first
	// conflict, as a refusal.
	missing := func(tx kvTx) ([]string, error) {
		b := tx.Bucket(bSearchAttrs)
		var out []string
		for _, name := range names {
			raw := b.Get([]byte(name))
			if raw == nil {
				out = append(out, name)
				continue
			}
			var a weft.SearchAttribute
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, fmt.Errorf("search attribute %q: corrupt record: %w", name, err)
			}
			if a.Type != attrs[name] {
				return nil, refuse(&store.SearchTypeError{Name: name, Type: attrs[name], Registered: a.Type, Workflow: a.Workflow})
			}
		}
		return out, nil
	}
	var todo []string
	if err := s.read(ctx, func(tx kvTx) error {
		var err error
		todo, err = missing(tx)
		return err
	}); err != nil || len(todo) == 0 {
		return err
	}
	return s.write(ctx, func(tx kvTx) error {
		todo, err := missing(tx)
		if err != nil {
			return err
		}
		b := tx.Bucket(bSearchAttrs)
		for _, name := range todo {
			if err := putJSON(b, []byte(name), weft.SearchAttribute{Name: name, Type: attrs[name], Workflow: workflow}); err != nil {
				return err
			}
		}
		return nil
	})
}

// SearchAttributes implements store.Store.
func (s *Store) SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error) {
	var out []weft.SearchAttribute
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		return tx.Bucket(bSearchAttrs).ForEach(func(k, v []byte) error {
			var a weft.SearchAttribute
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("search attribute %q: corrupt record: %w", k, err)
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
