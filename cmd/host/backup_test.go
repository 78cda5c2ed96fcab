package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store/embedded"
)

// testAdminBackup (in TestCLIAgainstHost): weft admin backup takes a
// backup of a running host, while instances start, into a file that a
// host restored from it serves (docs/operations.md: the file as
// DataDir/weft.db, migrated at the start); again over it; to stdout.
func testAdminBackup(t *testing.T, ts *testServer) {
	input := "@" + examplePath(t, "inputs", "hello.json")
	ts.ok(t, "run", "hello", "--input", input, "--id", "backup-before", "--wait")

	dir := t.TempDir()
	file := filepath.Join(dir, "weft-backup.db")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		runs int
	)
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if r := ts.weft(t, nil, "run", "hello", "--input", input, "--id", fmt.Sprintf("backup-during-%d-%d", w, i)); r.code != exitOK {
					t.Errorf("a run during the backup: exit %d: %s", r.code, r.stderr)
					return
				}
				mu.Lock()
				runs++
				mu.Unlock()
			}
		})
	}
	out := ts.ok(t, "admin", "backup", file)
	close(stop)
	wg.Wait()
	t.Logf("%s(%d runs started meanwhile)", out, runs)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("backup written to %s: %d bytes\n", file, fi.Size()); out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	checkBackup(t, file)
	testRestore(t, file)

	// Again, over the first: replaced whole, and nothing left beside it.
	ts.ok(t, "admin", "backup", file, "-o", "json")
	checkBackup(t, file)
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the backup's directory holds %v (%v), want only the backup", entries, err)
	}

	r := ts.weft(t, nil, "admin", "backup", "-")
	if r.code != exitOK || !strings.Contains(r.stderr, fmt.Sprintf("%d bytes written to stdout", len(r.stdout))) {
		t.Fatalf("backup to stdout: exit %d, %d bytes, stderr %s", r.code, len(r.stdout), r.stderr)
	}
	copyFile := filepath.Join(t.TempDir(), "stdout.db")
	if err := os.WriteFile(copyFile, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	checkBackup(t, copyFile)

	if r := ts.weft(t, nil, "admin", "backup"); r.code != exitUsage {
		t.Errorf("without FILE: exit %d", r.code)
	}
}

// testRestore restores the backup file as docs/operations.md says: a host
// started on a data directory whose weft.db is the backup (and no store)
// migrates it, keeps it as weft.db.migrated, and serves what the test ran
// before taking it.
func testRestore(t *testing.T, file string) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "weft.db"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := startServer(t, "--data-dir", dir, "--node-id", "restored")
	if in := restored.waitStatus(t, "backup-before", "completed"); in.Workflow != "hello" {
		t.Errorf("the instance run before the backup, restored: %+v", in)
	}
	if !strings.Contains(restored.logs.String(), "store migrated") {
		t.Errorf("the restored host logged no migration:\n%s", restored.logs)
	}
	for _, name := range []string{"store", "weft.db.migrated"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the restored host's data directory: %v", err)
		}
	}
}

// checkBackup checks a backup file and finds in it what the test ran
// before taking it, reading it as a host does: migrated into a store.
func checkBackup(t *testing.T, path string) {
	t.Helper()
	if err := embedded.CheckFile(path); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "store")
	if err := embedded.Migrate(path, dir, embedded.Config{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(dir, embedded.Config{Engine: embedded.EnginePebble})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	in, err := s.GetInstance(context.Background(), "backup-before")
	if err != nil || in.Status != weft.StatusCompleted {
		t.Fatalf("the instance run before the backup, in it: %+v, %v", in, err)
	}
	if _, err := s.GetDefinition(context.Background(), "hello", 0); err != nil {
		t.Fatalf("the workflow hello in the backup: %v", err)
	}
}
