package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func getU64(b kvBucket, k []byte) uint64 {
	v := b.Get(k)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putU64(b kvBucket, k []byte, v uint64) error {
	return b.Put(k, binary.BigEndian.AppendUint64(nil, v))
}

func defKey(name string, version int) key { return key(nil).str(name).u64(uint64(version)) }

func getDef(tx kvTx, name string, version int) (*weft.Definition, error) {
	raw := tx.Bucket(bDefs).Get(defKey(name, version))
	if raw == nil {
		return nil, nil
	}
	var d weft.Definition
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("definition %q version %d: corrupt record: %w", name, version, err)
	}
	return &d, nil
}

// PutDefinition implements store.Store.
func (s *Store) PutDefinition(ctx context.Context, name, hash string, source []byte) (int, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := weft.CheckID("definition name", name); err != nil {
		return 0, false, err
	}
	if hash == "" {
		return 0, false, store.Invalid("definition %q: hash must not be empty", name)
	}
	var version int
	var created bool
	defer s.catalog.changed()
	err := s.write(ctx, func(tx kvTx) error {
		latestB, seqB := tx.Bucket(bDefLatest), tx.Bucket(bDefSeq)
		latest := getU64(latestB, []byte(name))
		if latest > 0 {
			d, err := getDef(tx, name, int(latest))
			if err != nil {
				return err
			}
			if d != nil && d.Hash == hash {
				version, created = int(latest), false
				return nil
			}
		}
		next := max(getU64(seqB, []byte(name)), latest) + 1
		d := weft.Definition{Name: name, Version: int(next), Hash: hash, Source: source, CreatedAt: s.now()}
		if err := putJSON(tx.Bucket(bDefs), defKey(name, d.Version), d); err != nil {
			return err
		}
		if err := putU64(latestB, []byte(name), next); err != nil {
			return err
		}
		if err := putU64(seqB, []byte(name), next); err != nil {
			return err
		}
		version, created = d.Version, true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return version, created, nil
}

// GetDefinition implements store.Store.
func (s *Store) GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if version < 0 {
		return nil, store.Invalid("definition %q: negative version %d", name, version)
	}
	gen := s.catalog.gen.Load()
	id := defID{name, version}
	if d, ok := s.catalog.defs.Get(id, gen); ok {
		return &d, nil
	}
	var out *weft.Definition
	err := s.read(ctx, func(tx kvTx) error {
		v := version
		if v == 0 {
			v = int(getU64(tx.Bucket(bDefLatest), []byte(name)))
			if v == 0 {
				return store.NotFound("definition %q", name)
			}
		}
		d, err := getDef(tx, name, v)
		if err != nil {
			return err
		}
		if d == nil {
			return store.NotFound("definition %q version %d", name, v)
		}
		out = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.catalog.defs.Put(id, gen, *out)
	return out, nil
}

// pageByName walks bucket b (keyed by raw names) after the name in cursor,
// calling each until limit items were taken; it returns the next cursor.
func pageByName(b kvBucket, cursor string, limit int, each func(name, v []byte) error) (string, error) {
	var after []byte
	if cursor != "" {
		var err error
		if after, err = decodeCursor(cursor); err != nil {
			return "", err
		}
	}
	c := b.Cursor()
	k, v := c.First()
	if after != nil {
		if k, v = c.Seek(after); bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	var last []byte
	for n := 0; k != nil; k, v = c.Next() {
		if n == limit {
			return encodeCursor(last), nil
		}
		if err := each(k, v); err != nil {
			return "", err
		}
		last = k
		n++
	}
	return "", nil
}

// ListDefinitions implements store.Store.
func (s *Store) ListDefinitions(ctx context.Context, cursor string, limit int) ([]weft.Definition, string, error) {
	limit = weft.ClampLimit(limit)
	var out []weft.Definition
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		var err error
		next, err = pageByName(tx.Bucket(bDefLatest), cursor, limit, func(name, v []byte) error {
			d, err := getDef(tx, string(name), int(binary.BigEndian.Uint64(v)))
			if err != nil {
				return err
			}
			if d == nil {
				return fmt.Errorf("definition %q: latest version missing", name)
			}
			out = append(out, *d)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ListDefinitionVersions implements store.Store.
func (s *Store) ListDefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error) {
	var out []weft.Definition
	err := s.read(ctx, func(tx kvTx) error {
		if tx.Bucket(bDefLatest).Get([]byte(name)) == nil {
			return store.NotFound("definition %q", name)
		}
		prefix := key(nil).str(name)
		defs := tx.Bucket(bDefs)
		c := defs.Cursor()
		// Keys end in the version, big-endian: walking back from the end
		// of the name's keys lists the latest first.
		for k := seekBefore(c, nil, prefix); hasPrefix(k, prefix); k, _ = c.Prev() {
			var d weft.Definition
			if err := json.Unmarshal(defs.Get(k), &d); err != nil {
				return fmt.Errorf("definition %q: corrupt record under key %x: %w", name, k, err)
			}
			d.Source = nil
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteDefinition implements store.Store.
func (s *Store) DeleteDefinition(ctx context.Context, name string) error {
	defer s.catalog.changed()
	return s.write(ctx, func(tx kvTx) error {
		latestB := tx.Bucket(bDefLatest)
		if latestB.Get([]byte(name)) == nil {
			return refuse(store.NotFound("definition %q", name))
		}
		defs := tx.Bucket(bDefs)
		if err := deleteKeys(defs, prefixKeys(defs, key(nil).str(name))); err != nil {
			return err
		}
		// bDefSeq keeps the last version, so that versions are not reused.
		return latestB.Delete([]byte(name))
	})
}

func getPlugin(tx kvTx, name string) (*weft.Plugin, error) {
	raw := tx.Bucket(bPlugins).Get([]byte(name))
	if raw == nil {
		return nil, nil
	}
	var p weft.Plugin
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("plugin %q: corrupt record: %w", name, err)
	}
	return &p, nil
}

// pluginHasVersion reports whether the plugin keeps version. Every create
// checks its pins with it, inside the write transaction, where decoding
// the whole record (its activities and needs) each time cost about 2% of
// the host's CPU under load: the versions' names of the record last read
// are kept (versionsMemo), for as long as the record's bytes are the same.
func (s *Store) pluginHasVersion(tx kvTx, name, version string) (bool, error) {
	raw := tx.Bucket(bPlugins).Get([]byte(name))
	if raw == nil {
		return false, nil
	}
	versions, err := s.versions.of(name, raw)
	if err != nil {
		return false, err
	}
	return slices.Contains(versions, version), nil
}

// versionsMemo keeps, by plugin, the names of the versions of the record
// last decoded, with its bytes: a record with the same bytes has the same
// versions, so the memo is exact without being told of changes. (The
// catalog cache is not: a change invalidates it once its transaction has
// ended, which a write transaction that follows at once may not see.)
type versionsMemo struct {
	mu sync.Mutex
	m  map[string]versionsOf
}

type versionsOf struct {
	raw      []byte
	versions []string
}

// versionsMemoMax bounds the plugins the memo keeps; past it, it starts
// again.
const versionsMemoMax = 256

// of returns the names of the versions of plugin record raw, of plugin
// name. The list is shared: the caller must not change it.
func (v *versionsMemo) of(name string, raw []byte) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if e, ok := v.m[name]; ok && bytes.Equal(e.raw, raw) {
		return e.versions, nil
	}
	var p struct {
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("plugin %q: corrupt record: %w", name, err)
	}
	versions := make([]string, len(p.Versions))
	for i, pv := range p.Versions {
		versions[i] = pv.Version
	}
	if v.m == nil || len(v.m) >= versionsMemoMax {
		v.m = map[string]versionsOf{}
	}
	v.m[name] = versionsOf{raw: bytes.Clone(raw), versions: versions}
	return versions, nil
}

// PutPlugin implements store.Store.
func (s *Store) PutPlugin(ctx context.Context, rec weft.PluginRecord) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := store.ValidatePluginRecord(rec); err != nil {
		return false, err
	}
	rec.Activities = slices.Clone(rec.Activities)
	var created bool
	defer s.catalog.changed()
	err := s.write(ctx, func(tx kvTx) error {
		created = false
		p, err := getPlugin(tx, rec.Name)
		if err != nil {
			return err
		}
		if p == nil {
			p = &weft.Plugin{}
		} else if p.Current.Version == rec.Version {
			return nil
		}
		r := rec
		r.CreatedAt = s.now()
		p.Current = r
		p.Versions = slices.DeleteFunc(p.Versions, func(o weft.PluginRecord) bool { return o.Version == r.Version })
		p.Versions = append([]weft.PluginRecord{r}, p.Versions...)
		if err := putJSON(tx.Bucket(bPlugins), []byte(r.Name), p); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil {
		return false, err
	}
	return created, nil
}

// GetPlugin implements store.Store.
func (s *Store) GetPlugin(ctx context.Context, name string) (*weft.Plugin, error) {
	gen := s.catalog.gen.Load()
	if p, ok := s.catalog.plugin(name, gen); ok {
		return p, nil
	}
	var out *weft.Plugin
	err := s.read(ctx, func(tx kvTx) error {
		p, err := getPlugin(tx, name)
		if err != nil {
			return err
		}
		if p == nil {
			return store.NotFound("plugin %q", name)
		}
		out = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.catalog.putPlugin(name, gen, out)
	return out, nil
}

// CurrentPlugin implements store.Store, from the catalog cache as
// GetPlugin.
func (s *Store) CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error) {
	p, err := s.GetPlugin(ctx, name)
	if err != nil {
		return nil, err
	}
	cur := p.Current
	return &cur, nil
}

// ResolveStart implements store.Store. Its answers are always current
// (Generation ""): GetDefinition, GetPlugin and GetWorkflowPause answer
// from a cache that this process's own writes invalidate (a pause's
// included), so a cached answer costs no more.
func (s *Store) ResolveStart(ctx context.Context, workflow string, uses func(*weft.Definition) ([]string, error), _ bool) (*store.StartCatalog, error) {
	return store.ResolveCurrent(ctx, s, workflow, uses)
}

// ListPlugins implements store.Store.
func (s *Store) ListPlugins(ctx context.Context, cursor string, limit int) ([]weft.PluginRecord, string, error) {
	limit = weft.ClampLimit(limit)
	var out []weft.PluginRecord
	var next string
	err := s.read(ctx, func(tx kvTx) error {
		var err error
		next, err = pageByName(tx.Bucket(bPlugins), cursor, limit, func(name, v []byte) error {
			var p weft.Plugin
			if err := json.Unmarshal(v, &p); err != nil {
				return fmt.Errorf("plugin %q: corrupt record: %w", name, err)
			}
			out = append(out, p.Current)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// DeletePlugin implements store.Store.
func (s *Store) DeletePlugin(ctx context.Context, name string) error {
	defer s.catalog.changed()
	return s.write(ctx, func(tx kvTx) error {
		if tx.Bucket(bPlugins).Get([]byte(name)) == nil {
			return refuse(store.NotFound("plugin %q", name))
		}
		prefix := key(nil).str(name)
		var users []string
		c := tx.Bucket(bPins).Cursor()
		for k, _ := c.Seek(prefix); hasPrefix(k, prefix) && len(users) < weft.MaxInUseListed; k, _ = c.Next() {
			id, _, ok := readStr(k[len(prefix):])
			if !ok {
				return fmt.Errorf("corrupt pin key %x", k)
			}
			users = append(users, id)
		}
		if len(users) > 0 {
			return refuse(&weft.InUseError{Plugin: name, Instances: users})
		}
		return tx.Bucket(bPlugins).Delete([]byte(name))
	})
}
