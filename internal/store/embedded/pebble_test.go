package embedded_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
)

// childEnv makes the test binary, run by TestPebbleSurvivesExit, the
// process that writes and exits.
const childEnv = "WEFT_BOLTSTORE_PEBBLE_CHILD"

// TestPebbleSurvivesExit: what a Commit acknowledged on Pebble is there
// after the process exits without closing the store (its WAL replayed),
// and after a clean close and reopen.
func TestPebbleSurvivesExit(t *testing.T) {
	if dir := os.Getenv(childEnv); dir != "" {
		s, err := embedded.Open(dir, embedded.Config{Engine: embedded.EnginePebble})
		if err != nil {
			t.Fatal(err)
		}
		in := &weft.Instance{ID: "acked", Workflow: "w", Status: weft.StatusRunning, Vars: json.RawMessage(`{"n":1}`)}
		if _, err := s.Commit(t.Context(), store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}}); err != nil {
			t.Fatal(err)
		}
		os.Exit(0) // no Close
	}
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "weft")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPebbleSurvivesExit$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the writing process: %v\n%s", err, out)
	}
	for range 2 { // after the exit, then after a Close
		s, err := embedded.Open(dir, embedded.Config{Engine: embedded.EnginePebble})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetInstance(t.Context(), "acked")
		if err != nil || string(got.Vars) != `{"n":1}` {
			t.Errorf("after reopening: %+v, %v; want the acknowledged instance", got, err)
		}
		if h, err := s.History(t.Context(), "acked", 0, 10); err != nil || len(h) != 1 {
			t.Errorf("history after reopening: %v, %v", h, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPebbleOneOpenAtATime: a second Open of a Pebble directory waits for
// the first one's lock and fails, naming it, until the first closes.
func TestPebbleOneOpenAtATime(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft")
	cfg := embedded.Config{Engine: embedded.EnginePebble, OpenTimeout: 100 * time.Millisecond}
	s, err := embedded.Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := embedded.Open(path, cfg); err == nil || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "locked by another process (waited 100ms)") {
		t.Errorf("second Open: %v, want a lock error naming the directory", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("the second Open gave up after %s, before OpenTimeout", waited)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = embedded.Open(path, cfg)
	if err != nil {
		t.Fatalf("Open after the first closed: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestPebbleRefusesBadDirectories: Open with EnginePebble refuses, naming
// the path, what is not a weft store on Pebble, and Open with EngineBolt a
// Pebble directory; neither changes what it refused.
func TestPebbleRefusesBadDirectories(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	boltFile := filepath.Join(dir, "bolt.db")
	s, err := embedded.Open(boltFile, embedded.Config{Engine: embedded.EngineBolt})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	others := filepath.Join(dir, "others")
	if err := os.MkdirAll(others, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(others, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign")
	// Another program's Pebble store, at an older format than the newest.
	const format = pebble.FormatMinSupported
	db, err := pebble.Open(foreign, &pebble.Options{Logger: quietPebble{}, FormatMajorVersion: format})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("users/1"), []byte("ann"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	weftDir := filepath.Join(dir, "weft")
	s, err = embedded.Open(weftDir, embedded.Config{Engine: embedded.EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt")
	if err := os.CopyFS(corrupt, os.DirFS(weftDir)); err != nil {
		t.Fatal(err)
	}
	manifests, _ := filepath.Glob(filepath.Join(corrupt, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST in a Pebble store")
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte(strings.Repeat("garbage ", 100)), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name   string
		path   string
		engine embedded.Engine
		want   string
	}{
		{"a bbolt file", boltFile, embedded.EnginePebble, "not a directory"},
		{"a directory of other files", others, embedded.EnginePebble, "not a Pebble store: the directory holds other files (notes.txt)"},
		{"another program's Pebble store", foreign, embedded.EnginePebble, "not a weft store"},
		{"a corrupt Pebble store", corrupt, embedded.EnginePebble, ""},
		{"a Pebble store given to bbolt", weftDir, embedded.EngineBolt, "a directory, not a bbolt file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Pebble replays and flushes a store's WAL as it opens it
			// for writing: another program's store changes files, not
			// keys or format (checked below).
			same := tt.path != foreign
			before := listing(t, tt.path)
			s, err := embedded.Open(tt.path, embedded.Config{Engine: tt.engine, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%s) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q: want it to name %s and say %q", err, tt.path, tt.want)
			}
			if after := listing(t, tt.path); same && after != before {
				t.Errorf("Open changed what it refused: %s, then %s", before, after)
			}
			t.Log(err)
		})
	}
	desc, err := pebble.Peek(foreign, vfs.Default)
	if err != nil || desc.FormatMajorVersion != format {
		t.Errorf("another program's store is at format %v (%v) after Open refused it, was %v", desc.FormatMajorVersion, err, format)
	}
	db, err = pebble.Open(foreign, &pebble.Options{Logger: quietPebble{}, FormatMajorVersion: format})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, closer, err := db.Get([]byte("users/1")); err != nil || string(v) != "ann" {
		t.Errorf("another program's key after Open refused its store: %q, %v", v, err)
	} else {
		_ = closer.Close()
	}
}

// listing describes the files at path (a file or a directory's entries),
// with their sizes.
func listing(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() && d.Name() != "LOCK" { // recreated by a lock
			fmt.Fprintf(&b, "%s (%d bytes, %s) ", p, fi.Size(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// quietPebble drops Pebble's logs in tests that open it directly.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic("pebble: fatal: " + format)
}

// TestPebbleOpenRemovesCrashedBackups: the copy a backup spools beside a
// Pebble store, left by a crash, is removed by the next Open.
func TestPebbleOpenRemovesCrashedBackups(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "weft")
	if err := openE(t, embedded.EnginePebble, path, nil).Close(); err != nil {
		t.Fatal(err)
	}
	stray := path + ".backup-1234"
	if err := os.WriteFile(stray, []byte("half a copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	openE(t, embedded.EnginePebble, path, nil)
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Errorf("Open left the crash's copy %s: %v", stray, err)
	}
}
