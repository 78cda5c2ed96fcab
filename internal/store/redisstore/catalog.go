package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func decodeDefinition(name string, version, doc any) (*weft.Definition, error) {
	vs, _ := version.(string)
	v, err := strconv.Atoi(vs)
	if err != nil {
		return nil, fmt.Errorf("definition %q: corrupt version %q", name, vs)
	}
	raw, _ := doc.(string)
	var d weft.Definition
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return nil, fmt.Errorf("definition %q version %d: corrupt record: %w", name, v, err)
	}
	d.Version = v
	return &d, nil
}

// PutDefinition implements store.Store.
func (s *Store) PutDefinition(ctx context.Context, name, hash string, source []byte) (int, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	if err := weft.CheckID("definition name", name); err != nil {
		return 0, false, err
	}
	if hash == "" {
		return 0, false, store.Invalid("definition %q: hash must not be empty", name)
	}
	doc, err := json.Marshal(weft.Definition{Name: name, Hash: hash, Source: source, CreatedAt: s.now()})
	if err != nil {
		return 0, false, fmt.Errorf("redisstore: definition %q: %w", name, err)
	}
	res, err := s.write(ctx, putDefinitionScript, s.args(name, hash, doc, newGeneration())).StringSlice()
	if err != nil {
		return 0, false, s.fail(ctx, "put definition", name, err)
	}
	if len(res) != 2 {
		return 0, false, fmt.Errorf("redisstore: put definition %q on %s: unexpected answer %v", name, s.addr, res)
	}
	v, err := strconv.Atoi(res[0])
	if err != nil {
		return 0, false, s.corrupt(fmt.Errorf("definition %q: corrupt version %q", name, res[0]))
	}
	return v, res[1] == "1", nil
}

// GetDefinition implements store.Store: from the catalog cache while the
// catalog's generation is the one the cached definition was read in.
func (s *Store) GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if version < 0 {
		return nil, store.Invalid("definition %q: negative version %d", name, version)
	}
	gen, err := s.generation(ctx)
	if err != nil {
		return nil, s.fail(ctx, "get definition", name, err)
	}
	s.catalog.saw(gen)
	id := defID{name, version}
	if d, ok := s.catalog.defs.Get(id, gen); ok {
		return &d, nil
	}
	res, err := s.run(ctx, getDefinitionScript, s.args(name, version)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "get definition", name, err)
	}
	if len(res) != 3 {
		if version == 0 {
			return nil, store.NotFound("definition %q", name)
		}
		return nil, store.NotFound("definition %q version %d", name, version)
	}
	d, err := decodeDefinition(name, res[0], res[1])
	if err != nil {
		return nil, s.corrupt(err)
	}
	if gen, ok := res[2].(string); ok {
		s.catalog.defs.Put(id, gen, *d)
	}
	return d, nil
}

// ListDefinitions implements store.Store.
func (s *Store) ListDefinitions(ctx context.Context, cursor string, limit int) ([]weft.Definition, string, error) {
	return listByName(ctx, s, listDefinitionsScript, "definitions", cursor, limit, 3,
		func(name string, f []any) (weft.Definition, error) {
			d, err := decodeDefinition(name, f[0], f[1])
			if err != nil {
				return weft.Definition{}, err
			}
			return *d, nil
		},
		func(d weft.Definition) string { return d.Name })
}

// ListDefinitionVersions implements store.Store.
func (s *Store) ListDefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, listDefinitionVersionsScript, s.args(name)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "list versions of definition", name, err)
	}
	if len(res) == 0 {
		return nil, store.NotFound("definition %q", name)
	}
	out := make([]weft.Definition, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		d, err := decodeDefinition(name, res[i], res[i+1])
		if err != nil {
			return nil, s.corrupt(err)
		}
		d.Source = nil
		out = append(out, *d)
	}
	// A hash has no order.
	slices.SortFunc(out, func(a, b weft.Definition) int { return b.Version - a.Version })
	return out, nil
}

// listByName reads a page of a list ordered by name with script (ARGV:
// min, count; it answers the name and width-1 fields of each entry), from
// after cursor, decodes each entry with decode and returns the page and the
// next cursor. what names the list in errors.
func listByName[T any](ctx context.Context, s *Store, script *redis.Script, what, cursor string, limit, width int,
	decode func(name string, fields []any) (T, error), nameOf func(T) string) ([]T, string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, "", err
	}
	min, err := nameMin(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = weft.ClampLimit(limit)
	res, err := s.run(ctx, script, s.args(min, limit+1)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, "", s.fail(ctx, "list "+what+" after", cursor, err)
	}
	var out []T
	var next string
	for i := 0; i+width-1 < len(res); i += width {
		if len(out) == limit {
			next = encodeCursor(nameOf(out[len(out)-1]))
			break
		}
		name, _ := res[i].(string)
		v, err := decode(name, res[i+1:i+width])
		if err != nil {
			return nil, "", s.corrupt(err)
		}
		out = append(out, v)
	}
	return out, next, nil
}

// nameMin is the ZRANGEBYLEX start after a cursor of a list by name.
func nameMin(cursor string) (string, error) {
	if cursor == "" {
		return "-", nil
	}
	after, err := decodeCursor(cursor, 1)
	if err != nil {
		return "", err
	}
	return "(" + after, nil
}

// DeleteDefinition implements store.Store.
func (s *Store) DeleteDefinition(ctx context.Context, name string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	res, err := s.write(ctx, deleteDefinitionScript, s.args(name, newGeneration())).Result()
	if err != nil {
		return s.fail(ctx, "delete definition", name, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("definition %q", name)
	}
	return fmt.Errorf("redisstore: delete definition %q on %s: unexpected answer %v", name, s.addr, res)
}

// PutPlugin implements store.Store.
func (s *Store) PutPlugin(ctx context.Context, rec weft.PluginRecord) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	if err := store.ValidatePluginRecord(rec); err != nil {
		return false, err
	}
	rec.CreatedAt = s.now()
	doc, err := json.Marshal(rec)
	if err != nil {
		return false, fmt.Errorf("redisstore: plugin %q: %w", rec.Name, err)
	}
	n, err := s.write(ctx, putPluginScript, s.args(rec.Name, rec.Version, doc, newGeneration())).Int()
	if err != nil {
		return false, s.fail(ctx, "put plugin", rec.Name, err)
	}
	return n == 1, nil
}

func decodePlugin(name string, v any) (weft.PluginRecord, error) {
	raw, _ := v.(string)
	var r weft.PluginRecord
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("plugin %q: corrupt record: %w", name, err)
	}
	return r, nil
}

// GetPlugin implements store.Store.
func (s *Store) GetPlugin(ctx context.Context, name string) (*weft.Plugin, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	res, err := s.run(ctx, getPluginScript, s.args(name)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "get plugin", name, err)
	}
	if len(res) == 0 {
		return nil, store.NotFound("plugin %q", name)
	}
	p := &weft.Plugin{Versions: make([]weft.PluginRecord, 0, len(res))}
	for _, v := range res {
		r, err := decodePlugin(name, v)
		if err != nil {
			return nil, s.corrupt(err)
		}
		p.Versions = append(p.Versions, r)
	}
	p.Current = p.Versions[0]
	return p, nil
}

// CurrentPlugin implements store.Store: one version read, however many
// the plugin has.
func (s *Store) CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	gen, err := s.generation(ctx)
	if err != nil {
		return nil, s.fail(ctx, "get current plugin", name, err)
	}
	s.catalog.saw(gen)
	if r, ok := s.catalog.plugins.Get(name, gen); ok {
		return &r, nil
	}
	res, err := s.run(ctx, currentPluginScript, s.args(name)).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "get current plugin", name, err)
	}
	if len(res) != 2 {
		return nil, store.NotFound("plugin %q", name)
	}
	r, err := decodePlugin(name, res[0])
	if err != nil {
		return nil, s.corrupt(err)
	}
	if gen, ok := res[1].(string); ok {
		s.catalog.plugins.Put(name, gen, r)
	}
	return &r, nil
}

// ResolveStart implements store.Store: with cached, from the catalog
// cache without a round trip when it holds the definition, each plugin it
// uses and the workflow pauses from one generation (catalogcache.go);
// otherwise with GetDefinition, CurrentPlugin and GetWorkflowPause, and an
// empty Generation.
func (s *Store) ResolveStart(ctx context.Context, workflow string, uses func(*weft.Definition) ([]string, error), cached bool) (*store.StartCatalog, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if cached {
		if sc, err := s.cachedStart(workflow, uses); sc != nil || err != nil {
			return sc, err
		}
	}
	return store.ResolveCurrent(ctx, s, workflow, uses)
}

// cachedStart answers ResolveStart from the catalog cache alone: when the
// latest definition of workflow, the workflow pauses and every plugin uses
// names for it are cached with one generation, a StartCatalog with that
// Generation; otherwise nil, and the start reads the catalog. A
// generation of "" is a store no catalog change has set cg in (Open sets
// it): nothing a commit could check, so never used.
func (s *Store) cachedStart(workflow string, uses func(*weft.Definition) ([]string, error)) (*store.StartCatalog, error) {
	d, gen, ok := s.catalog.defs.Peek(defID{workflow, 0})
	if !ok || gen == "" {
		return nil, nil
	}
	pauses, ok := s.catalog.pauses.Get(struct{}{}, gen)
	if !ok {
		return nil, nil
	}
	names, err := uses(&d)
	if err != nil {
		return nil, err
	}
	sc := &store.StartCatalog{Definition: &d, Plugins: make(map[string]*weft.PluginRecord, len(names)), Generation: gen}
	if p, ok := pauses[workflow]; ok {
		sc.Paused = &p
	}
	for _, name := range names {
		r, ok := s.catalog.plugins.Get(name, gen)
		if !ok {
			return nil, nil
		}
		sc.Plugins[name] = &r
	}
	return sc, nil
}

// ListPlugins implements store.Store.
func (s *Store) ListPlugins(ctx context.Context, cursor string, limit int) ([]weft.PluginRecord, string, error) {
	return listByName(ctx, s, listPluginsScript, "plugins", cursor, limit, 2,
		func(name string, f []any) (weft.PluginRecord, error) { return decodePlugin(name, f[0]) },
		func(r weft.PluginRecord) string { return r.Name })
}

// DeletePlugin implements store.Store: the pin check and the delete are
// one script.
func (s *Store) DeletePlugin(ctx context.Context, name string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	res, err := s.write(ctx, deletePluginScript, s.args(name, weft.MaxInUseListed, newGeneration())).Result()
	if err != nil {
		return s.fail(ctx, "delete plugin", name, err)
	}
	reason, rest, _ := refusal(res)
	switch reason {
	case "ok":
		return nil
	case "notfound":
		return store.NotFound("plugin %q", name)
	case "inuse":
		var users []string
		if len(rest) == 1 {
			l, _ := rest[0].([]any)
			for _, u := range l {
				if id, ok := u.(string); ok {
					users = append(users, id)
				}
			}
		}
		return inUse(name, users)
	}
	return fmt.Errorf("redisstore: delete plugin %q on %s: unexpected answer %v", name, s.addr, res)
}

// inUse is DeletePlugin's refusal of plugin name, which the instances
// users pin: one error for the whole store's delete and the partitioned
// one's (finishPluginDelete), so that the API answers both alike. It names
// at most weft.MaxInUseListed of them.
func inUse(name string, users []string) *weft.InUseError {
	return &weft.InUseError{Plugin: name, Instances: slices.Clip(slices.Clone(users[:min(len(users), weft.MaxInUseListed)]))}
}
