package retry_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCoreImportsNoIO: the deterministic cores — the runner, the retry
// policy and the heartbeat scheduler — decide from their inputs and an
// injected clock; none of them links the plugin runtime, wazero, a store,
// Redis, a lock or an HTTP stack. Importing one would let I/O into a
// decision that must replay the same way.
func TestCoreImportsNoIO(t *testing.T) {
	t.Parallel()
	forbidden := []string{
		"github.com/tetratelabs/wazero",
		"github.com/weftworks/weft/plugins",
		"github.com/weftworks/weft/host/store",
		"github.com/weftworks/weft/lock",
		"github.com/redis/",
		"github.com/go-redsync/",
		"go.etcd.io/bbolt",
		"github.com/gofiber/",
		"github.com/valyala/fasthttp",
		"net/http",
		"net",
		"os/exec",
	}
	for _, pkg := range []string{"../runner", ".", "../heartbeat"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}
