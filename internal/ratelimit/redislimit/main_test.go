package redislimit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running. The
// one exception is go-redis's redial loop, started by a failed dial (a
// test stops its server on purpose): it ends at its next wake-up once its
// client is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
