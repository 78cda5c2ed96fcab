package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// The workflow pauses are the hash P workflow-pauses (workflow name → JSON
// of its weft.WorkflowPause). They are part of the catalog: the scripts
// that write them set the catalog generation cg with the change, as a
// definition's do, so that a create made from a catalog read before is
// refused by the commit script (catalogcache.go), and the cache keeps them
// all for the starts that read them.

// pauseWorkflowScript is PauseWorkflow. ARGV: name, the pause's JSON, a
// random token for the generation. It returns {"ok", the new generation},
// or {"exists", the stored pause's JSON} and writes nothing.
var pauseWorkflowScript = script(`
local name, doc = take(), take()
local k = P .. "workflow-pauses"
local cur = redis.call("HGET", k, name)
if cur then return {"exists", cur} end
redis.call("HSET", k, name, doc)
return {"ok", bumpGeneration(ARGV[#ARGV])}
`)

// unpauseWorkflowScript is UnpauseWorkflow. ARGV: name, a random token
// for the generation. It returns {"ok", the removed pause's JSON, the new
// generation}, or {"notfound"}.
var unpauseWorkflowScript = script(`
local name = take()
local k = P .. "workflow-pauses"
local cur = redis.call("HGET", k, name)
if not cur then return {"notfound"} end
redis.call("HDEL", k, name)
return {"ok", cur, bumpGeneration(ARGV[#ARGV])}
`)

// workflowPausesScript reads every workflow pause with the generation it
// reads them in. It returns {generation, name, JSON, name, JSON...}.
var workflowPausesScript = script(`
local out = {redis.call("GET", P .. "cg") or ""}
local all = redis.call("HGETALL", P .. "workflow-pauses")
for i = 1, #all do out[#out + 1] = all[i] end
return out
`)

// PauseWorkflow implements store.Store.
func (s *Store) PauseWorkflow(ctx context.Context, p weft.WorkflowPause) (*weft.WorkflowPause, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := weft.CheckID("workflow name", p.Workflow); err != nil {
		return nil, err
	}
	p.Since = s.now()
	doc, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("redisstore: pause of workflow %q: %w", p.Workflow, err)
	}
	res, err := s.write(ctx, pauseWorkflowScript, s.args(p.Workflow, doc, newGeneration())).Result()
	if err != nil {
		return nil, s.fail(ctx, "pause workflow", p.Workflow, err)
	}
	switch reason, rest, _ := refusal(res); {
	case reason == "ok" && len(rest) == 1:
		// This node drops what it cached at once: its next start reads the
		// catalog again instead of committing from before the pause, to
		// be refused.
		gen, _ := rest[0].(string)
		s.catalog.saw(gen)
		return &p, nil
	case reason == "exists" && len(rest) == 1:
		raw, _ := rest[0].(string)
		cur, err := decodePause(p.Workflow, raw)
		if err != nil {
			return nil, s.corrupt(err)
		}
		return cur, nil
	}
	return nil, fmt.Errorf("redisstore: pause workflow %q on %s: unexpected answer %v", p.Workflow, s.addr, res)
}

// UnpauseWorkflow implements store.Store.
func (s *Store) UnpauseWorkflow(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	res, err := s.write(ctx, unpauseWorkflowScript, s.args(name, newGeneration())).Result()
	if err != nil {
		return nil, s.fail(ctx, "unpause workflow", name, err)
	}
	switch reason, rest, _ := refusal(res); {
	case reason == "notfound":
		return nil, store.NotFound("pause of workflow %q", name)
	case reason == "ok" && len(rest) == 2:
		gen, _ := rest[1].(string)
		s.catalog.saw(gen)
		raw, _ := rest[0].(string)
		p, err := decodePause(name, raw)
		if err != nil {
			return nil, s.corrupt(err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("redisstore: unpause workflow %q on %s: unexpected answer %v", name, s.addr, res)
}

// WorkflowPauses implements store.Store, from the catalog cache as
// GetWorkflowPause.
func (s *Store) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	all, err := s.pauses(ctx)
	if err != nil {
		return nil, err
	}
	return slices.SortedFunc(maps.Values(all), func(a, b weft.WorkflowPause) int {
		return strings.Compare(a.Workflow, b.Workflow)
	}), nil
}

// GetWorkflowPause implements store.Store: from the catalog cache while
// the catalog's generation is the one the pauses were read in.
func (s *Store) GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	all, err := s.pauses(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := all[name]
	if !ok {
		return nil, store.NotFound("pause of workflow %q", name)
	}
	return &p, nil
}

// pauses returns every workflow pause by name: after one GET of cg, from
// the catalog cache when it holds them for that generation, else read
// whole (few workflows are paused) and cached with the generation read
// with them. The map is the cache's: the caller must not change it.
func (s *Store) pauses(ctx context.Context) (map[string]weft.WorkflowPause, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	gen, err := s.generation(ctx)
	if err != nil {
		return nil, s.fail(ctx, "read", "workflow-pauses", err)
	}
	s.catalog.saw(gen)
	if all, ok := s.catalog.pauses.Get(struct{}{}, gen); ok {
		return all, nil
	}
	res, err := s.run(ctx, workflowPausesScript, s.args()).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.fail(ctx, "read", "workflow-pauses", err)
	}
	if len(res)%2 != 1 {
		return nil, fmt.Errorf("redisstore: read workflow pauses on %s: unexpected answer of %d values", s.addr, len(res))
	}
	all := make(map[string]weft.WorkflowPause, len(res)/2)
	for i := 1; i+1 < len(res); i += 2 {
		name, _ := res[i].(string)
		raw, _ := res[i+1].(string)
		p, err := decodePause(name, raw)
		if err != nil {
			return nil, s.corrupt(err)
		}
		all[name] = *p
	}
	if gen, ok := res[0].(string); ok {
		s.catalog.pauses.Put(struct{}{}, gen, all)
	}
	return all, nil
}

// decodePause decodes the stored pause raw of workflow name.
func decodePause(name, raw string) (*weft.WorkflowPause, error) {
	var p weft.WorkflowPause
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, fmt.Errorf("pause of workflow %q: corrupt record: %w", name, err)
	}
	return &p, nil
}
