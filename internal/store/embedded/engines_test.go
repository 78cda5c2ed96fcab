package embedded_test

import (
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/store/embedded"
)

// engines are the engines every engine-agnostic test runs on.
var engines = []embedded.Engine{embedded.EngineBolt, embedded.EnginePebble}

// forEngines runs test once per engine, in parallel subtests.
func forEngines(t *testing.T, test func(t *testing.T, e embedded.Engine)) {
	t.Helper()
	for _, e := range engines {
		t.Run("engine="+string(e), func(t *testing.T) {
			t.Parallel()
			test(t, e)
		})
	}
}

// storePath is where a test puts a store of engine e in dir: a file for
// bbolt, a directory for Pebble.
func storePath(dir string, e embedded.Engine) string {
	if e == embedded.EnginePebble {
		return filepath.Join(dir, "weft")
	}
	return filepath.Join(dir, "weft.db")
}

// openE opens a store of engine e at path with clock now, closed when t
// ends.
func openE(t *testing.T, e embedded.Engine, path string, now func() time.Time) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(path, embedded.Config{Now: now, Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// discardLogger drops a store's logs, for tests that make it log on
// purpose.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
