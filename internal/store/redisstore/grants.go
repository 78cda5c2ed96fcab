package redisstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// decodeGrants builds the grants of plugin from the fields doc, rev and at
// of its hash, as HMGET or a script returns them.
func decodeGrants(plugin string, doc, rev, at any) (*weft.Grants, error) {
	d, ok := doc.(string)
	if !ok {
		return nil, fmt.Errorf("grants of plugin %q: document missing", plugin)
	}
	rs, _ := rev.(string)
	r, err := strconv.ParseUint(rs, 10, 64)
	if err != nil || r == 0 {
		return nil, fmt.Errorf("grants of plugin %q: corrupt revision %q", plugin, rs)
	}
	ts, _ := at.(string)
	t, err := parseHexTime(ts)
	if err != nil {
		return nil, fmt.Errorf("grants of plugin %q: corrupt update time: %w", plugin, err)
	}
	return &weft.Grants{Plugin: plugin, Document: []byte(d), Revision: r, UpdatedAt: t}, nil
}

// PutGrants implements store.Store: the comparison with the stored
// document and the new revision are one script.
func (s *Store) PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if err := store.ValidateGrants(plugin, doc); err != nil {
		return 0, err
	}
	want := ""
	if ifRevision != weft.AnyRevision {
		want = strconv.FormatUint(ifRevision, 10)
	}
	res, err := s.write(ctx, putGrantsScript, s.args(plugin, doc, hexTime(s.now()), want)).StringSlice()
	if err != nil {
		return 0, s.fail(ctx, "put grants of plugin", plugin, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("redisstore: put grants of plugin %q on %s: unexpected answer %v", plugin, s.addr, res)
	}
	rev, err := strconv.ParseUint(res[1], 10, 64)
	if err != nil {
		return 0, s.corrupt(fmt.Errorf("grants of plugin %q: corrupt revision %q", plugin, res[1]))
	}
	if res[0] == "conflict" {
		return 0, &weft.GrantsConflictError{Plugin: plugin, Want: ifRevision, Stored: rev}
	}
	if rev == 0 {
		return 0, s.corrupt(fmt.Errorf("grants of plugin %q: corrupt revision %q", plugin, res[1]))
	}
	return rev, nil
}

// GetGrants implements store.Store.
func (s *Store) GetGrants(ctx context.Context, plugin string) (*weft.Grants, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := store.CheckPluginName(plugin); err != nil {
		return nil, err
	}
	vals, err := s.c.HMGet(ctx, s.p+"g:"+plugin, "doc", "rev", "at").Result()
	if err != nil {
		return nil, s.fail(ctx, "get grants of plugin", plugin, err)
	}
	if len(vals) != 3 || vals[0] == nil {
		return nil, store.NotFound("grants of plugin %q", plugin)
	}
	g, err := decodeGrants(plugin, vals[0], vals[1], vals[2])
	if err != nil {
		return nil, s.corrupt(err)
	}
	return g, nil
}

// ListGrants implements store.Store.
func (s *Store) ListGrants(ctx context.Context, cursor string, limit int) ([]weft.Grants, string, error) {
	return listByName(ctx, s, listGrantsScript, "grants", cursor, limit, 4,
		func(name string, f []any) (weft.Grants, error) {
			g, err := decodeGrants(name, f[0], f[1], f[2])
			if err != nil {
				return weft.Grants{}, err
			}
			return *g, nil
		},
		func(g weft.Grants) string { return g.Plugin })
}

// DeleteGrants implements store.Store.
func (s *Store) DeleteGrants(ctx context.Context, plugin string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := store.CheckPluginName(plugin); err != nil {
		return err
	}
	res, err := s.write(ctx, deleteGrantsScript, s.args(plugin)).Result()
	if err != nil {
		return s.fail(ctx, "delete grants of plugin", plugin, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("grants of plugin %q", plugin)
	}
	return fmt.Errorf("redisstore: delete grants of plugin %q on %s: unexpected answer %v", plugin, s.addr, res)
}
