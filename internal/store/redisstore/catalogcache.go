package redisstore

import (
	"context"
	"crypto/rand"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store/internal/gencache"
)

// catalogCache keeps the decoded definitions, current plugin records and
// workflow pauses that every start reads (the latest definition, the
// current version of each plugin it uses, whether its workflow is paused),
// and which change seldom.
//
// Every script that changes the catalog (PutDefinition, DeleteDefinition,
// PutPlugin, DeletePlugin, PauseWorkflow, UnpauseWorkflow) sets the
// store's catalog generation, the key
// cg, to a new generation, in the same step as the change
// (bumpGeneration): a counter, which orders the generations for the
// partitions (role.go), and a random token. A read script answers the
// generation it read in, so an entry is tagged with the generation its
// value belongs to. The token keeps a generation lost with its change (a
// Redis restart with appendfsync everysec, which also loses the count) from
// being handed out again for another change: the counter may repeat, the
// whole generation does not.
//
// The cache is used two ways:
//
//   - GetDefinition, CurrentPlugin and GetWorkflowPause read cg first
//     (GET) and use an entry only when its tag is that generation: then no
//     change has been made since the entry was read, on this node or any
//     other.
//   - ResolveStart, for a start, uses the entries without a round trip
//     when the definition, every plugin it uses and the pauses are cached
//     with one tag, and answers that tag as the StartCatalog's Generation. The
//     create commits with it (Commit.Catalog), and the commit script
//     compares it with cg, in the same step as the create: the start is as
//     if it had read the catalog then. When they differ the commit is
//     refused (ErrCatalogChanged) and the start reads the catalog again,
//     checked.
type catalogCache struct {
	defs    gencache.Cache[defID, string, weft.Definition]
	plugins gencache.Cache[string, string, weft.PluginRecord]
	// pauses holds every workflow pause, by workflow name, under the one
	// key struct{}{}: read whole, so that one read answers every workflow
	// until the next change (a "not paused" included). Its maps are never
	// changed once cached.
	pauses gencache.Cache[struct{}, string, map[string]weft.WorkflowPause]
}

// saw notes that the catalog's generation is gen now: when it is not the
// one seen last, every entry tagged otherwise is stale, and all are
// dropped, so that entries of deleted names and old versions do not
// accumulate.
func (c *catalogCache) saw(gen string) {
	c.defs.Observe(gen)
	c.plugins.Observe(gen)
	c.pauses.Observe(gen)
}

// defID names a definition lookup: version 0 is the latest.
type defID struct {
	name    string
	version int
}

// newGeneration returns a catalog generation token for a change.
func newGeneration() string { return rand.Text() }

// generation reads the store's catalog generation: "" when no change was
// ever made.
func (s *Store) generation(ctx context.Context) (string, error) {
	g, err := s.c.Get(ctx, s.p+"cg").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return g, err
}
