package retry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoIO: the deterministic cores — the runner, the retry
// policy, the heartbeat scheduler, the schedule calculator, the ready
// queue's order, the concurrency slots by key, the rate limits' GCRA,
// the instance query language, the batch jobs' core and the partitions
// of the Redis layout — decide from their inputs and an injected clock; none of them links the
// plugin runtime, wazero, a store or lock implementation, Redis, bbolt or
// a network stack. Importing one
// would let I/O into a decision that must replay the same way. (The
// runner names statuses, failures and history entries from host/weft, the
// vocabulary, which imports nothing.)
func TestCoreImportsNoIO(t *testing.T) {
	t.Parallel()
	// Each entry forbids a package and everything under it.
	forbidden := []string{
		"github.com/tetratelabs/wazero",
		"github.com/weftworks/weft/plugins", // the runtime and its packages; plugins/grant (documents only) is allowed below
		"github.com/weftworks/weft/internal/store/embedded",
		"github.com/weftworks/weft/internal/store/redisstore",
		"github.com/weftworks/weft/internal/engine",
		"github.com/weftworks/weft/internal/store",
		"github.com/weftworks/weft/host/node",
		"github.com/weftworks/weft/lock",
		"github.com/redis",
		"github.com/go-redsync",
		"go.etcd.io/bbolt",
		"github.com/gofiber",
		"github.com/valyala/fasthttp",
		"net",
		"os/exec",
	}
	allowed := map[string]bool{"github.com/weftworks/weft/plugins/grant": true, "net/netip": true, "net/url": true}
	for _, pkg := range []string{"../runner", ".", "../heartbeat", "../schedule", "../queue/fair", "../slots", "../ratelimit", "../query", "../batch", "../partition"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if allowed[dep] {
				continue
			}
			for _, f := range forbidden {
				root := strings.TrimSuffix(f, "/")
				if dep == root || strings.HasPrefix(dep, root+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}
