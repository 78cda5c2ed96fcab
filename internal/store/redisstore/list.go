package redisstore

import (
	"context"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// minMember is the length of the shortest index member a listing's cursor
// can hold: 16 hex digits of a creation time and an id of one byte (a
// search member is longer still, its value before them), so that a
// shorter cursor is refused as not one of ours.
const minMember = 17

// statusIndex is the key (without prefix) of the index of the instances
// in status st, of workflow wf or of any ("").
func statusIndex(st weft.Status, wf string) string {
	if wf != "" {
		return "ix:ws:" + string(st) + ":" + wf
	}
	return "ix:s:" + string(st)
}

// cursorKey returns the index member a listing's cursor holds (what
// listInstancesKeyed returns as a key), so that a router that merges the
// pages of partitions can compare a partition's next position with the
// keys of the items; an undecodable cursor, or one shorter than any
// member (minMember bytes), is ErrInvalid.
func cursorKey(cursor string) (string, error) {
	return decodeCursor(cursor, minMember)
}

// keyCursor is the cursor of a position in a listing's walk, an index
// member (the inverse of cursorKey): the cursor a router's merged page
// returns, valid in every partition's index since members are ordered
// alike everywhere.
func keyCursor(key string) string {
	return encodeCursor(key)
}

// ListInstances implements store.Store.
//
// Without f.Search it walks the status indexes by creation, the six merged
// when f.Status is empty, and f.Match, when set, filters what it reads.
// With f.Search it walks the index of that attribute (search.go). Either
// way a cursor is a position in the walk: the member (for f.Search:
// value, created time and id) of the last instance listed, or of the last
// one read when f.Examine cut the page short. The next page starts after
// it in the index as the index is then, which gives this guarantee for
// the pages of one walk: an instance is listed at most once per index
// entry it has during the walk (at most once per value it holds); one
// whose entry does not change is listed exactly once when the filters
// accept it throughout, and one whose value a commit changes between two
// pages is listed again at its new value if that lies ahead of the
// cursor, and not at all after it if that lies behind. An instance with
// several keywords in the range is listed at the first of them in the
// walk's order only: at a later one, the walk skips the instances that
// hold an earlier keyword in the range, as they are then.
func (s *Store) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	items, _, next, err := s.listInstancesKeyed(ctx, f)
	return items, next, err
}

// listInstancesKeyed is ListInstances (the same checks, page and cursor)
// that also returns, in keys[i], the index member at which the walk listed
// items[i] (not base64): for a listing without f.Search the creation time
// (16 hex digits) and the id, with f.Search the encoded value, creation
// time and id of the entry where the walk met the instance (for a keywords
// attribute, the first keyword of the range in the walk's order). A router
// that lists the same filter and cursor in each of P partitions merges
// their pages with them.
//
// The rule of that merge. Keys order the walk: ascending bytes, descending
// when f.NewestFirst ("before" and "smallest" below are in the walk's
// order). Members of one index compare alike in every partition (the same
// layout, and one attribute has one type, hence one encoding), and an
// instance is in exactly one partition, so each partition's walk is the
// whole walk restricted to its instances. Each partition answers the
// filter with the same cursor; a partition whose next cursor is not ""
// had more: nothing is known of its index after that next position
// (cursorKey of it), which is its last item, or the last entry it read
// when f.Examine cut its page (or the stop of listInstancesUntil). The
// bound is the smallest such position, none when every partition reached
// its end. The merged page: the items whose keys are not past the bound,
// in key order; when they are more than the limit, the first limit of
// them, and keyCursor of the last one taken as next; otherwise all of
// them, and keyCursor of the bound as next ("" without a bound). The bound
// lies after the cursor, so even an empty page advances. Without
// f.Examine, a partition that had more returned a full page at or before
// its next position, so its items alone fill the page: the merged pages
// are those of one store holding every instance, cursors included. The
// guarantees ListInstances states hold for the merged walk, since they
// hold for each partition's walk after any cursor: the keywords rule
// included (an instance's keywords are all in its partition's index, and
// the script's check of an earlier keyword reads only its record).
//
// f.Examine bounds the entries one call reads in all (the conformance
// suite counts the calls of f.Match): P partitions each given f.Examine
// would read up to P times as many. A router keeps the bound with walkKeys
// and listInstancesUntil: it reads the next E = examineOf(f) entries of
// each partition (walkKeys(f, E)); the stop S is the E-th of them all in
// the walk's order, "" when they are fewer (every walk then ends before
// reading E); it lists with listInstancesUntil(f, S) each partition that
// holds one of them (the others have nothing up to S). The entries up to S
// are E in all, so the partitions read at most E together (plus what
// commits add between the two reads), and one whose walk reached S answers
// it as its next, so the merge rule stays as it is, and the merged pages
// and cursors are again the whole store's: its budget ends at S too. A
// listing with neither Match nor Search reads only its page and one more
// entry, and needs none of this.
func (s *Store) listInstancesKeyed(ctx context.Context, f weft.InstanceFilter) (items []weft.Instance, keys []string, next string, err error) {
	return s.listInstancesUntil(ctx, f, "")
}

// listInstancesUntil is listInstancesKeyed with the walk ending at stop,
// an index member (listed when the filters accept its instance; "" for no
// end): a walk that reaches it, or finds the range ends before it, answers
// keyCursor(stop) as its next cursor, since the index after stop was not
// read. A router uses it to share f.Examine among partitions (see
// listInstancesKeyed).
func (s *Store) listInstancesUntil(ctx context.Context, f weft.InstanceFilter, stop string) (items []weft.Instance, keys []string, next string, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, nil, "", err
	}
	if f.Status != "" && !f.Status.Valid() {
		return nil, nil, "", store.Invalid("unknown status %q", f.Status)
	}
	if f.Examine < 0 {
		return nil, nil, "", store.Invalid("examine must not be negative, got %d", f.Examine)
	}
	limit := weft.ClampLimit(f.Limit)
	if f.Search != nil {
		return s.listSearch(ctx, f, limit, stop)
	}
	ixs, min, max, err := statusRange(f)
	if err != nil {
		return nil, nil, "", err
	}
	end := ""
	if stop != "" {
		end = keyCursor(stop)
		min, max = clipRange(f.NewestFirst, min, max, stop)
	}
	if f.Match != nil {
		return s.listMatching(ctx, f, ixs, min, max, limit, end)
	}
	rev := "0"
	if f.NewestFirst {
		rev = "1"
	}
	a := s.args(len(ixs)).add(ixs...).add(min, max, limit+1, rev)
	res, err := s.run(ctx, listInstancesScript, a).Slice()
	if err != nil {
		return nil, nil, "", s.fail(ctx, "list instances", "workflow="+f.Workflow+" status="+string(f.Status), err)
	}
	for i := 0; i+1 < len(res); i += 2 {
		member, _ := res[i].(string)
		if len(items) == limit {
			return items, keys, keyCursor(keys[len(keys)-1]), nil
		}
		vals, _ := res[i+1].([]any)
		in, err := decodeInstance(member[16:], vals)
		if err != nil {
			return nil, nil, "", s.corrupt(err)
		}
		items = append(items, *in)
		keys = append(keys, member)
	}
	return items, keys, end, nil
}

// statusRange is the walk of a listing without f.Search: the status
// indexes it merges (one per status without f.Status, an instance being in
// exactly one), and the ZRANGEBYLEX bounds from f's creation times and
// cursor.
func statusRange(f weft.InstanceFilter) (ixs []any, min, max string, err error) {
	// Members are the 16 hex digits of the creation time, then the id: a
	// bare time bounds them by time alone.
	min, max = "-", "+"
	if !f.CreatedFrom.IsZero() {
		min = "[" + hexTime(f.CreatedFrom)
	}
	if !f.CreatedBefore.IsZero() {
		max = "(" + hexTime(f.CreatedBefore)
	}
	if f.Cursor != "" {
		after, err := cursorKey(f.Cursor)
		if err != nil {
			return nil, "", "", err
		}
		if f.NewestFirst {
			max = "(" + after
		} else {
			min = "(" + after
		}
	}
	sts := []weft.Status{f.Status}
	if f.Status == "" {
		sts = weft.Statuses()
	}
	ixs = make([]any, len(sts))
	for i, st := range sts {
		ixs[i] = statusIndex(st, f.Workflow)
	}
	return ixs, min, max, nil
}

// aboveMin reports whether member m is within the ZRANGEBYLEX min bound b
// ("-", "+", "[" or "(" and a member), as the server compares: bytes.
func aboveMin(m, b string) bool {
	switch {
	case b == "-":
		return true
	case b == "+":
		return false
	case b[0] == '[':
		return m >= b[1:]
	}
	return m > b[1:]
}

// belowMax reports whether member m is within the ZRANGEBYLEX max bound b.
func belowMax(m, b string) bool {
	switch {
	case b == "+":
		return true
	case b == "-":
		return false
	case b[0] == '[':
		return m <= b[1:]
	}
	return m < b[1:]
}

// clipRange ends the ZRANGEBYLEX interval [min, max] of a walk at stop,
// included: its max ascending, its min newest first, when stop is inside
// it. An interval wholly past stop becomes one whose min is above its max,
// which ZRANGEBYLEX reads as empty; one wholly before stop stays as it is.
func clipRange(newestFirst bool, min, max, stop string) (string, string) {
	switch {
	case newestFirst && aboveMin(stop, min):
		min = "[" + stop
	case !newestFirst && belowMax(stop, max):
		max = "[" + stop
	}
	return min, max
}
