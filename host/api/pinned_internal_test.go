package api

import (
	"slices"
	"strconv"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestScanPinnedPagesThroughEveryInstanceOnce: whatever the page size, the
// limit and the budget, following the cursors answers every kept instance
// once, in order, no page answers more than the limit, and no page reads
// more than the budget.
func TestScanPinnedPagesThroughEveryInstanceOnce(t *testing.T) {
	t.Parallel()
	// 23 instances; every third pins the plugin.
	var all []weft.Instance
	var want []string
	for i := range 23 {
		in := weft.Instance{ID: "i" + strconv.Itoa(i)}
		if i%3 == 0 {
			in.Plugins = map[string]string{"kit": "v1"}
			want = append(want, in.ID)
		}
		all = append(all, in)
	}
	looked := 0 // instances keep was asked about in one scan
	keep := func(in *weft.Instance) bool { looked++; return in.Plugins["kit"] == "v1" }
	for _, pageSize := range []int{1, 2, 5, 7, 23, 50} {
		for _, limit := range []int{1, 2, 3, 8, 100} {
			for _, budget := range []int{1, 4, 10, 1000} {
				// The store's list: its cursor is the index to start at.
				list := func(cursor string, n int) ([]weft.Instance, string, error) {
					from := 0
					if cursor != "" {
						from, _ = strconv.Atoi(cursor)
					}
					to := min(from+n, len(all))
					next := ""
					if to < len(all) {
						next = strconv.Itoa(to)
					}
					return slices.Clone(all[from:to]), next, nil
				}
				var got []string
				cursor := ""
				for pages := 0; ; pages++ {
					if pages > 100 {
						t.Fatalf("page %d, limit %d, budget %d: no end after 100 pages", pageSize, limit, budget)
					}
					at, err := parsePinnedCursor(cursor)
					if err != nil {
						t.Fatal(err)
					}
					looked = 0
					found, next, err := scanPinned(list, keep, at, limit, pageSize, budget)
					if err != nil {
						t.Fatal(err)
					}
					if looked > budget {
						t.Fatalf("page %d, limit %d, budget %d: one scan read %d", pageSize, limit, budget, looked)
					}
					if len(found) > limit {
						t.Fatalf("page %d, limit %d, budget %d: %d found", pageSize, limit, budget, len(found))
					}
					for _, in := range found {
						got = append(got, in.ID)
					}
					if next == "" {
						break
					}
					cursor = next
				}
				if !slices.Equal(got, want) {
					t.Errorf("page %d, limit %d, budget %d: %v, want %v", pageSize, limit, budget, got, want)
				}
			}
		}
	}
}

// TestPinnedCursorRefusesGarbage: a cursor that is not one of this list's
// is a 400 naming the cursor.
func TestPinnedCursorRefusesGarbage(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"!!", "bm8", "LTE6eA", "OTk5OTk6eA"} { // not base64, "no", "-1:x", "99999:x"
		if _, err := parsePinnedCursor(c); err == nil {
			t.Errorf("cursor %q parsed", c)
		}
	}
	p := pinnedCursor{page: "abc:def", skip: 3}
	if got, err := parsePinnedCursor(p.String()); err != nil || got != p {
		t.Errorf("round trip of %+v: %+v, %v", p, got, err)
	}
}
