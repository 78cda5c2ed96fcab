package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/tuple"
)

// Search attributes (doc.go's layout): each attribute name has a sorted
// set P ix:a:<name> of members value ‖ created ‖ id at score 0, read with
// ZRANGEBYLEX, and each instance's hash keeps in its field sa the (name,
// value) pairs it indexed, so that a Commit or a delete removes exactly
// those without parsing the instance's JSON. A value is encoded so that
// byte order is value order, and so that it ends where its encoding says
// (searchWidth): the created time and the id follow it.

// searchBatch bounds the index entries one call of searchScript, or the
// instances one call of listInstancesScript, reads for a filtered listing.
// Redis runs a script alone: on the loaded 2-core reference machine, a
// call that read 1,000 entries and rejected them by workflow held it 7 ms,
// and one that returned 1,000 records for Match 30 ms (as a plain page of
// 1,000 does), so a filtered listing reads in calls of half that, and a
// round trip more per 500 entries costs little beside them.
const searchBatch = 500

// encodeSearch returns the encoding of v as a value of type typ (a
// keywords attribute's values are strings), which must be v's type:
//
//   - string (and each keyword): tuple-encoded (0x00 escaped as 0x00 0xFF,
//     ended by 0x00 0x01);
//   - number: the float64's bits, all inverted for a negative number and
//     the sign bit flipped for the others (-0 as 0), as 16 hex digits;
//     NaN is refused;
//   - time: as every time in the store's keys (hexTime), 16 hex digits;
//   - bool: "0" or "1".
func encodeSearch(typ weft.SearchType, v weft.SearchValue) (string, error) {
	want := typ
	if typ == weft.SearchKeywords {
		want = weft.SearchString
	}
	if v.Type != want {
		return "", fmt.Errorf("a %s value, not a %s", v.Type, want)
	}
	switch want {
	case weft.SearchString:
		return string(tuple.AppendString(nil, v.String)), nil
	case weft.SearchNumber:
		return encodeNumber(v.Number)
	case weft.SearchTime:
		return hexTime(v.Time), nil
	case weft.SearchBool:
		if v.Bool {
			return "1", nil
		}
		return "0", nil
	}
	return "", fmt.Errorf("unknown type %q", typ)
}

// encodeNumber is a number's encoding: 16 hex digits that sort as the
// numbers do, -Inf first and +Inf last.
func encodeNumber(f float64) (string, error) {
	if math.IsNaN(f) {
		return "", errors.New("NaN is not a value")
	}
	if f == 0 {
		f = 0 // -0 as 0
	}
	b := math.Float64bits(f)
	if b>>63 == 1 {
		b = ^b
	} else {
		b |= 1 << 63
	}
	return fmt.Sprintf("%016x", b), nil
}

// searchWidth is the width of the values of type typ in index members: 0
// for the tuple-encoded strings (they end with 0x00 0x01).
func searchWidth(typ weft.SearchType) int {
	switch typ {
	case weft.SearchNumber, weft.SearchTime:
		return 16
	case weft.SearchBool:
		return 1
	}
	return 0
}

// searchField is the hash field sa of an instance with attrs: its (name,
// encoded value) pairs sorted, one per keyword of a keywords attribute, as
// the scripts' joinNames writes a list; "" for none, the common case,
// which a commit compares and skips at no cost.
func searchField(id string, attrs weft.SearchAttributes) (string, error) {
	if len(attrs) == 0 {
		return "", nil
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	pair := func(name, val string) {
		b.WriteString(strconv.Itoa(len(name)))
		b.WriteByte(':')
		b.WriteString(name)
		b.WriteString(strconv.Itoa(len(val)))
		b.WriteByte(':')
		b.WriteString(val)
	}
	for _, name := range names {
		v := attrs[name]
		if name == "" {
			return "", store.Invalid("instance %q: search attribute with an empty name", id)
		}
		if !v.Type.Valid() {
			return "", store.Invalid("instance %q: search attribute %q of unknown type %q", id, name, v.Type)
		}
		if v.Type == weft.SearchNumber && math.IsInf(v.Number, 0) {
			// JSON, the instance's record, has no infinities.
			return "", store.Invalid("instance %q: search attribute %q: %v is not a finite number", id, name, v.Number)
		}
		// JSON would store another string than the one indexed.
		if v.Type == weft.SearchString && !utf8.ValidString(v.String) {
			return "", store.Invalid("instance %q: search attribute %q: %q is not UTF-8", id, name, v.String)
		}
		if v.Type != weft.SearchKeywords {
			enc, err := encodeSearch(v.Type, v)
			if err != nil {
				return "", store.Invalid("instance %q: search attribute %q: %v", id, name, err)
			}
			pair(name, enc)
			continue
		}
		encs := make([]string, 0, len(v.Keywords))
		for _, k := range v.Keywords {
			if !utf8.ValidString(k) {
				return "", store.Invalid("instance %q: search attribute %q: keyword %q is not UTF-8", id, name, k)
			}
			encs = append(encs, string(tuple.AppendString(nil, k)))
		}
		slices.Sort(encs)
		for _, enc := range slices.Compact(encs) {
			pair(name, enc)
		}
	}
	return b.String(), nil
}

// searchPlan is a SearchRange as searchScript reads it: the index key,
// the values' width, whether an instance may have several entries
// (keywords), and the index's intervals to walk, as ZRANGEBYLEX bounds
// in index order, disjoint and ascending. No intervals: nothing matches.
type searchPlan struct {
	key   string // without the prefix
	width int
	kw    bool
	segs  [][2]string
}

// planSearch checks r and returns its plan; an error names the field
// at fault and matches weft.ErrInvalid.
func planSearch(r weft.SearchRange) (searchPlan, error) {
	if r.Name == "" {
		return searchPlan{}, store.Invalid("search: Name must not be empty")
	}
	if !r.Type.Valid() {
		return searchPlan{}, store.Invalid("search %q: Type: unknown type %q", r.Name, r.Type)
	}
	p := searchPlan{key: "ix:a:" + r.Name, width: searchWidth(r.Type), kw: r.Type == weft.SearchKeywords}
	bounds := r.Lo != nil || r.Hi != nil
	switch {
	case len(r.In) > 0 && (bounds || r.Prefix != ""), bounds && r.Prefix != "":
		return p, store.Invalid("search %q: more than one of In, Lo/Hi and Prefix is set", r.Name)
	case len(r.In) > 0:
		encs := make([]string, 0, len(r.In))
		for i, v := range r.In {
			enc, err := encodeSearch(r.Type, v)
			if err != nil {
				return p, store.Invalid("search %q: In[%d]: %v", r.Name, i, err)
			}
			encs = append(encs, enc)
		}
		slices.Sort(encs)
		for _, enc := range slices.Compact(encs) {
			p.segs = append(p.segs, [2]string{"[" + enc, "(" + bytesAfter(enc)})
		}
	case bounds:
		lo, hi := "-", "+"
		var elo, ehi string
		var err error
		if r.Lo != nil {
			if elo, err = encodeSearch(r.Type, *r.Lo); err != nil {
				return p, store.Invalid("search %q: Lo: %v", r.Name, err)
			}
			lo = "[" + elo
			if !r.LoInc {
				if lo = "[" + bytesAfter(elo); lo == "[" {
					return p, nil // nothing is after it
				}
			}
		}
		if r.Hi != nil {
			if ehi, err = encodeSearch(r.Type, *r.Hi); err != nil {
				return p, store.Invalid("search %q: Hi: %v", r.Name, err)
			}
			hi = "(" + ehi
			if r.HiInc {
				hi = "(" + bytesAfter(ehi)
			}
		}
		if r.Lo != nil && r.Hi != nil {
			if c := strings.Compare(elo, ehi); c > 0 || c == 0 && !(r.LoInc && r.HiInc) {
				return p, nil // an empty range
			}
		}
		p.segs = [][2]string{{lo, hi}}
	default:
		if r.Prefix != "" && r.Type != weft.SearchString && r.Type != weft.SearchKeywords {
			return p, store.Invalid("search %q: Prefix on a %s attribute: only strings and keywords have prefixes", r.Name, r.Type)
		}
		if r.Prefix == "" {
			p.segs = [][2]string{{"-", "+"}}
			break
		}
		// The escaped bytes of the prefix, without the terminator: every
		// value that starts with the prefix starts with them.
		enc := tuple.AppendString(nil, r.Prefix)
		enc = enc[:len(enc)-2]
		p.segs = [][2]string{{"[" + string(enc), "(" + bytesAfter(string(enc))}}
	}
	// "(+" would be a member "+", not the end: a bound past every
	// member is "+".
	for i := range p.segs {
		if p.segs[i][1] == "(" {
			p.segs[i][1] = "+"
		}
	}
	return p, nil
}

// bytesAfter returns the least string greater than every string that
// starts with p: p with its last byte below 0xFF incremented and what
// follows cut; "" when there is none (p is all 0xFF, which no encoding
// is).
func bytesAfter(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}

// searchMemberID returns the instance id at the end of an index member
// whose value has the width of plan (0: tuple-encoded).
func searchMemberID(width int, m string) (string, bool) {
	if width == 0 {
		i := strings.Index(m, "\x00\x01")
		if i < 0 {
			return "", false
		}
		width = i + 2
	}
	if len(m) <= width+16 {
		return "", false
	}
	return m[width+16:], true
}

// examineOf is the bound of a filtered listing's reads: f.Examine, or
// weft.MaxExamine.
func examineOf(f weft.InstanceFilter) int {
	if f.Examine > 0 {
		return f.Examine
	}
	return weft.MaxExamine
}

// listSearch is listInstancesKeyed with f.Search set: a walk of the index
// of f.Search.Name over the range, from after the cursor (an index
// member), by calls of searchScript that read up to searchBatch entries
// each and filter by workflow, status and creation time (and list an
// instance that holds several keywords in the range at the first of them
// only); Go filters what they return with f.Match. The walk ends when the
// page and one more instance are found (the cursor is then the page's
// last instance), when the index is read to the end of the range (no
// cursor), or when it read examineOf(f) entries (the cursor is then the
// last one read). keys[i] is the member at which items[i] was met. With
// a stop (listInstancesUntil), the range ends at it, and a walk that
// reaches its end answers keyCursor(stop).
func (s *Store) listSearch(ctx context.Context, f weft.InstanceFilter, limit int, stop string) (items []weft.Instance, keys []string, next string, err error) {
	p, err := planSearch(*f.Search)
	if err != nil {
		return nil, nil, "", err
	}
	if len(p.segs) == 0 {
		return nil, nil, "", nil
	}
	end := ""
	if stop != "" {
		// Clipping cannot hide an earlier keyword from the script's check
		// of one: it lies before the entry being read, so before stop.
		end = keyCursor(stop)
		for i, sg := range p.segs {
			p.segs[i][0], p.segs[i][1] = clipRange(f.NewestFirst, sg[0], sg[1], stop)
		}
	}
	after := ""
	if f.Cursor != "" {
		if after, err = cursorKey(f.Cursor); err != nil {
			return nil, nil, "", err
		}
	}
	ctFrom, ctBefore := "", ""
	if !f.CreatedFrom.IsZero() {
		ctFrom = hexTime(f.CreatedFrom)
	}
	if !f.CreatedBefore.IsZero() {
		ctBefore = hexTime(f.CreatedBefore)
	}
	rev, kw := "0", "0"
	if f.NewestFirst {
		rev = "1"
	}
	if p.kw {
		kw = "1"
	}
	budget := examineOf(f)
	for {
		n := min(budget, searchBatch)
		a := s.args(p.key, p.width, kw, rev, f.Workflow, string(f.Status), ctFrom, ctBefore, n, limit+1-len(items), after, len(p.segs))
		for _, sg := range p.segs {
			a = a.add(sg[0], sg[1])
		}
		res, err := s.run(ctx, searchScript, a).Slice()
		if err != nil {
			return nil, nil, "", s.fail(ctx, "search instances by", f.Search.Name, err)
		}
		if len(res) < 3 {
			return nil, nil, "", fmt.Errorf("redisstore: search instances by %q on %s: unexpected answer %v", f.Search.Name, s.addr, res)
		}
		examined, _ := res[0].(int64)
		last, _ := res[1].(string)
		done := res[2] == "1"
		budget -= int(examined)
		for i := 3; i+1 < len(res); i += 2 {
			member, _ := res[i].(string)
			id, ok := searchMemberID(p.width, member)
			if !ok {
				return nil, nil, "", s.corrupt(fmt.Errorf("corrupt member %q of index %s", member, p.key))
			}
			vals, _ := res[i+1].([]any)
			in, err := decodeInstance(id, vals)
			if err != nil {
				return nil, nil, "", s.corrupt(err)
			}
			if f.Match != nil && !f.Match(in) {
				continue
			}
			if len(items) == limit {
				return items, keys, keyCursor(keys[len(keys)-1]), nil
			}
			items = append(items, *in)
			keys = append(keys, member)
		}
		switch {
		case done || last == "":
			return items, keys, end, nil
		case budget <= 0:
			return items, keys, keyCursor(last), nil
		}
		after = last
	}
}

// listMatching is listInstancesKeyed with f.Match and without f.Search:
// the walk by creation of ListInstances over the status indexes ixs, in
// calls of listInstancesScript of growing size (from the page, doubling,
// to searchBatch), whose instances f.Match filters, reading at most
// examineOf(f) instances. keys[i] is the member of items[i]; a walk that
// reads to max answers end ("", or the cursor of listInstancesUntil's stop).
func (s *Store) listMatching(ctx context.Context, f weft.InstanceFilter, ixs []any, min, max string, limit int, end string) (items []weft.Instance, keys []string, next string, err error) {
	rev := "0"
	if f.NewestFirst {
		rev = "1"
	}
	budget := examineOf(f)
	batch := limit + 1
	if batch > searchBatch {
		batch = searchBatch
	}
	for {
		n := batch
		if n > budget {
			n = budget
		}
		batch = batch * 2
		if batch > searchBatch {
			batch = searchBatch
		}
		a := s.args(len(ixs)).add(ixs...).add(min, max, n, rev)
		res, err := s.run(ctx, listInstancesScript, a).Slice()
		if err != nil {
			return nil, nil, "", s.fail(ctx, "list instances", "workflow="+f.Workflow+" status="+string(f.Status), err)
		}
		read, last := 0, ""
		for i := 0; i+1 < len(res); i += 2 {
			member, _ := res[i].(string)
			read++
			last = member
			vals, _ := res[i+1].([]any)
			in, err := decodeInstance(member[16:], vals)
			if err != nil {
				return nil, nil, "", s.corrupt(err)
			}
			if !f.Match(in) {
				continue
			}
			if len(items) == limit {
				return items, keys, keyCursor(keys[len(keys)-1]), nil
			}
			items = append(items, *in)
			keys = append(keys, member)
		}
		budget -= read
		switch {
		case read < n:
			return items, keys, end, nil
		case budget <= 0:
			return items, keys, keyCursor(last), nil
		}
		if f.NewestFirst {
			max = "(" + last
		} else {
			min = "(" + last
		}
	}
}

// walkKeys returns the next n entries (index members) of the walk of a
// listing by f after f.Cursor, in the walk's order, fewer when the walk
// ends first: the entries ListInstances would read and count against
// f.Examine, before any filter that reads a record (with f.Search every
// entry of the range, whatever its workflow, status and creation time;
// without it every entry of the status indexes in the creation range). It
// reads members only, one ZRANGEBYLEX per index or interval in one round
// trip, so that a router can find where the first n entries of all its
// partitions end (see listInstancesKeyed) at little cost.
func (s *Store) walkKeys(ctx context.Context, f weft.InstanceFilter, n int) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, store.Invalid("unknown status %q", f.Status)
	}
	if n <= 0 {
		return nil, store.Invalid("walk keys: count must be positive, got %d", n)
	}
	type span struct{ key, min, max string }
	var spans []span
	what := "workflow=" + f.Workflow + " status=" + string(f.Status)
	if f.Search != nil {
		p, err := planSearch(*f.Search)
		if err != nil {
			return nil, err
		}
		after := ""
		if f.Cursor != "" {
			if after, err = cursorKey(f.Cursor); err != nil {
				return nil, err
			}
		}
		what = "search " + f.Search.Name
		// The intervals after the cursor, as searchScript's walk clips them.
		for _, sg := range p.segs {
			lo, hi := sg[0], sg[1]
			if after != "" {
				switch {
				case f.NewestFirst && !aboveMin(after, lo), !f.NewestFirst && !belowMax(after, hi):
					continue // wholly behind the cursor
				case f.NewestFirst && belowMax(after, hi):
					hi = "(" + after
				case !f.NewestFirst && aboveMin(after, lo):
					lo = "(" + after
				}
			}
			spans = append(spans, span{p.key, lo, hi})
		}
		if f.NewestFirst {
			slices.Reverse(spans)
		}
	} else {
		ixs, min, max, err := statusRange(f)
		if err != nil {
			return nil, err
		}
		for _, ix := range ixs {
			spans = append(spans, span{ix.(string), min, max})
		}
	}
	cmds := make([]*redis.StringSliceCmd, len(spans))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sp := range spans {
			by := &redis.ZRangeBy{Min: sp.min, Max: sp.max, Count: int64(n)}
			if f.NewestFirst {
				cmds[i] = p.ZRevRangeByLex(ctx, s.p+sp.key, by)
			} else {
				cmds[i] = p.ZRangeByLex(ctx, s.p+sp.key, by)
			}
		}
		return nil
	}); err != nil {
		return nil, s.fail(ctx, "read the walk's keys of listing", what, err)
	}
	var out []string
	for _, c := range cmds {
		out = append(out, c.Val()...)
	}
	if f.Search == nil {
		// The status indexes merged; a search's intervals are disjoint and
		// already in the walk's order.
		slices.Sort(out)
		if f.NewestFirst {
			slices.Reverse(out)
		}
	}
	if len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// RegisterSearchAttributes implements store.Store: one script checks
// every name against the registry (the hash P sr: name → type ":"
// workflow) and, when none conflicts, registers the new ones.
func (s *Store) RegisterSearchAttributes(ctx context.Context, workflow string, attrs map[string]weft.SearchType) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if len(attrs) == 0 {
		return nil
	}
	names := make([]string, 0, len(attrs))
	for name, typ := range attrs {
		if name == "" {
			return store.Invalid("workflow %q: search attribute with an empty name", workflow)
		}
		if !typ.Valid() {
			return store.Invalid("workflow %q: search attribute %q of unknown type %q", workflow, name, typ)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	a := s.args(workflow, len(names))
	for _, name := range names {
		a = a.add(name, string(attrs[name]))
	}
	res, err := s.write(ctx, registerSearchScript, a).Result()
	if err != nil {
		return s.fail(ctx, "register search attributes of workflow", workflow, err)
	}
	reason, rest, _ := refusal(res)
	switch reason {
	case "ok":
		return nil
	case "conflict":
		if len(rest) == 2 {
			name, _ := rest[0].(string)
			reg, _ := rest[1].(string)
			typ, wf, _ := strings.Cut(reg, ":")
			return &store.SearchTypeError{Name: name, Type: attrs[name], Registered: weft.SearchType(typ), Workflow: wf}
		}
	}
	return fmt.Errorf("redisstore: register search attributes of workflow %q on %s: unexpected answer %v", workflow, s.addr, res)
}

// SearchAttributes implements store.Store.
func (s *Store) SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	all, err := s.c.HGetAll(ctx, s.p+"sr").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "read search attributes", "sr", err)
	}
	out := make([]weft.SearchAttribute, 0, len(all))
	for name, reg := range all {
		typ, wf, ok := strings.Cut(reg, ":")
		if !ok || !weft.SearchType(typ).Valid() {
			return nil, s.corrupt(fmt.Errorf("search attribute %q: corrupt registration %q", name, reg))
		}
		out = append(out, weft.SearchAttribute{Name: name, Type: weft.SearchType(typ), Workflow: wf})
	}
	slices.SortFunc(out, func(a, b weft.SearchAttribute) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
