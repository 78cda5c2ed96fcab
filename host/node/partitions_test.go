package node_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// storeLayout is where the partitions of a node's store (RedisPartitions,
// under the default prefix) and its catalog live on a Redis Cluster, as
// its masters serve them when layoutOf asked: what a test needs to pick
// ids of instances that cross partitions, and to know which partitions a
// master's death takes down.
type storeLayout struct {
	tags    []string            // partition i's hash tag
	masters []*redistest.Server // partition i's master
	catalog *redistest.Server   // the catalog's master ({weft:})
	addrs   map[*redistest.Server]string
}

// layoutOf asks cl which master serves each of the n partitions of the
// store, and its catalog.
func layoutOf(t *testing.T, cl *redistest.Cluster, n int) *storeLayout {
	t.Helper()
	tags, err := partition.Tags(redisstore.DefaultPrefix, n)
	if err != nil {
		t.Fatalf("the tags of %d partitions: %v", n, err)
	}
	l := &storeLayout{tags: tags, catalog: cl.MasterOf(t, storeKey), addrs: map[*redistest.Server]string{}}
	for _, tag := range tags {
		l.masters = append(l.masters, cl.MasterOf(t, tag+"schema"))
	}
	for i, m := range cl.Masters(t) {
		l.addrs[m] = fmt.Sprintf("master %d (%s)", i, m.Addr())
	}
	return l
}

// part returns the partition of instance id.
func (l *storeLayout) part(id string) int { return partition.Of(id, len(l.tags)) }

// master returns the master of instance id's partition.
func (l *storeLayout) master(id string) *redistest.Server { return l.masters[l.part(id)] }

// mastersOf returns the masters that the instances ids live on, each once.
func (l *storeLayout) mastersOf(ids []string) []*redistest.Server {
	var out []*redistest.Server
	for _, id := range ids {
		if m := l.master(id); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// partsOn returns the partitions that master m serves.
func (l *storeLayout) partsOn(m *redistest.Server) []int {
	var out []int
	for i, pm := range l.masters {
		if pm == m {
			out = append(out, i)
		}
	}
	return out
}

// String says which master serves the catalog and which partitions, for
// the test's log.
func (l *storeLayout) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "catalog on %s", l.name(l.catalog))
	seen := map[*redistest.Server]bool{}
	for _, m := range l.masters {
		if seen[m] {
			continue
		}
		seen[m] = true
		fmt.Fprintf(&b, "; partitions %v on %s", l.partsOn(m), l.name(m))
	}
	return b.String()
}

// name names master m in the log.
func (l *storeLayout) name(m *redistest.Server) string {
	if s, ok := l.addrs[m]; ok {
		return s
	}
	return m.Addr()
}
