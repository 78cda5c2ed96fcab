package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// getGrants reads the grants of a plugin name; nil when there are none.
func getGrants(tx kvTx, plugin string) (*weft.Grants, error) {
	raw := tx.Bucket(bGrants).Get([]byte(plugin))
	if raw == nil {
		return nil, nil
	}
	return decodeGrants(plugin, raw)
}

func decodeGrants(plugin string, raw []byte) (*weft.Grants, error) {
	var g weft.Grants
	if err := json.Unmarshal(raw, &g); err != nil {
		return nil, fmt.Errorf("grants of plugin %q: corrupt record: %w", plugin, err)
	}
	return &g, nil
}

// PutGrants implements store.Store. The revision comes from bGrantSeq,
// which keeps the highest revision of each name after DeleteGrants, so
// that revisions are never reused.
func (s *Store) PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.ValidateGrants(plugin, doc); err != nil {
		return 0, err
	}
	doc = bytes.Clone(doc)
	var revision uint64
	err := s.write(ctx, func(tx kvTx) error {
		g, err := getGrants(tx, plugin)
		if err != nil {
			return err
		}
		var stored uint64
		if g != nil {
			stored = g.Revision
		}
		if ifRevision != weft.AnyRevision && ifRevision != stored {
			return &weft.GrantsConflictError{Plugin: plugin, Want: ifRevision, Stored: stored}
		}
		if g != nil {
			if bytes.Equal(g.Document, doc) {
				revision = g.Revision
				return nil
			}
		}
		seqB := tx.Bucket(bGrantSeq)
		next := max(getU64(seqB, []byte(plugin)), stored) + 1
		rec := weft.Grants{Plugin: plugin, Document: doc, Revision: next, UpdatedAt: s.now()}
		if err := putJSON(tx.Bucket(bGrants), []byte(plugin), rec); err != nil {
			return err
		}
		if err := putU64(seqB, []byte(plugin), next); err != nil {
			return err
		}
		revision = next
		return nil
	})
	if err != nil {
		return 0, err
	}
	return revision, nil
}

// GetGrants implements store.Store.
func (s *Store) GetGrants(ctx context.Context, plugin string) (*weft.Grants, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckPluginName(plugin); err != nil {
		return nil, err
	}
	var out *weft.Grants
	err := s.read(ctx, func(tx kvTx) error {
		g, err := getGrants(tx, plugin)
		if err != nil {
			return err
		}
		if g == nil {
			return store.NotFound("grants of plugin %q", plugin)
		}
		out = g
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListGrants implements store.Store.
func (s *Store) ListGrants(ctx context.Context, cursor string, limit int) ([]weft.Grants, string, error) {
	limit = weft.ClampLimit(limit)
	var out []weft.Grants
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		out = nil
		var err error
		next, err = pageByName(tx.Bucket(bGrants), cursor, limit, func(name, v []byte) error {
			g, err := decodeGrants(string(name), v)
			if err != nil {
				return err
			}
			out = append(out, *g)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// DeleteGrants implements store.Store. bGrantSeq keeps the name's last
// revision.
func (s *Store) DeleteGrants(ctx context.Context, plugin string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckPluginName(plugin); err != nil {
		return err
	}
	return s.write(ctx, func(tx kvTx) error {
		b := tx.Bucket(bGrants)
		if b.Get([]byte(plugin)) == nil {
			return refuse(store.NotFound("grants of plugin %q", plugin))
		}
		return b.Delete([]byte(plugin))
	})
}
