package api

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/weft"
)

// pinnedScanBudget bounds how many instances one ?plugin= list reads:
// the stores keep no index by plugin, so the list reads the instances in
// the list's order and keeps those that pin the plugin. A page that
// reached the budget answers what it found and a cursor to go on from.
const pinnedScanBudget = 5000

// pinnedPageSize is how many instances each read of the store asks for.
const pinnedPageSize = 500

// pinnedCursor is where a ?plugin= list goes on: a page of the store's
// list (its cursor) and how many of that page's instances were read.
type pinnedCursor struct {
	page string
	skip int
}

func (p pinnedCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(p.skip) + ":" + p.page))
}

func parsePinnedCursor(s string) (pinnedCursor, error) {
	if s == "" {
		return pinnedCursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return pinnedCursor{}, invalidField("cursor", "is not a cursor of this list")
	}
	n, page, ok := strings.Cut(string(b), ":")
	skip, err := strconv.Atoi(n)
	if !ok || err != nil || skip < 0 || skip > pinnedPageSize {
		return pinnedCursor{}, invalidField("cursor", "is not a cursor of this list")
	}
	return pinnedCursor{page: page, skip: skip}, nil
}

// pinning lists the instances that pass f and pin plugin (at version,
// when it is not empty), in f's order, at most f.Limit of them, reading at
// most pinnedScanBudget instances. The next cursor is empty at the end of
// the list.
func (s *Server) pinning(ctx context.Context, plugin, version string, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	at, err := parsePinnedCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	list := func(cursor string, n int) ([]weft.Instance, string, error) {
		f.Cursor, f.Limit = cursor, n
		return s.node.Instances(ctx, f)
	}
	keep := func(in *weft.Instance) bool {
		v, ok := in.Plugins[plugin]
		return ok && (version == "" || v == version)
	}
	return scanPinned(list, keep, at, weft.ClampLimit(f.Limit), pinnedPageSize, pinnedScanBudget)
}

// scanPinned reads list from at, pageSize instances a read, and answers
// those keep keeps, at most limit, having read at most budget, and the
// cursor to go on from (empty at the end of the list).
func scanPinned(list func(cursor string, n int) ([]weft.Instance, string, error), keep func(*weft.Instance) bool,
	at pinnedCursor, limit, pageSize, budget int) ([]weft.Instance, string, error) {
	var found []weft.Instance
	for read := 0; ; {
		page, next, err := list(at.page, pageSize)
		if err != nil {
			return nil, "", err
		}
		for i := at.skip; i < len(page); i++ {
			read++
			if keep(&page[i]) {
				page[i].State = nil
				found = append(found, page[i])
			}
			if len(found) == limit || read == budget {
				if i+1 < len(page) {
					return found, pinnedCursor{page: at.page, skip: i + 1}.String(), nil
				}
				if next == "" {
					return found, "", nil
				}
				return found, pinnedCursor{page: next}.String(), nil
			}
		}
		if next == "" {
			return found, "", nil
		}
		at = pinnedCursor{page: next}
	}
}
