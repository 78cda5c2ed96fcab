package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/store/embedded"
)

// TestBackup: Backup writes a copy of the store that a host restored from
// it (the file as DataDir/weft.db, migrated at its start) serves; a reader
// may not take one; an error writing is the writer's.
func TestBackup(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	ctx := context.Background()
	c := newClient(t, url, adminToken)
	if _, _, err := c.PutWorkflow(ctx, "nap", []byte("name: nap\nsteps:\n  - { id: rest, delay: 1h }\n")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"nap-1", "nap-2"} {
		// Suspended in its delay before the backup.
		in, _, err := c.StartUntil(ctx, "nap", apiv1.StartRequest{ID: id, Input: json.RawMessage(`{"who":"` + id + `"}`)}, time.Minute, apiv1.UntilSuspended)
		if err != nil || in.Status != apiv1.StatusSuspended {
			t.Fatalf("start %s: %+v, %v", id, in, err)
		}
	}

	var none strings.Builder
	if n, err := newClient(t, url, readerToken).Backup(ctx, &none); !errors.Is(err, client.ErrForbidden) || n != 0 || none.Len() != 0 {
		t.Errorf("Backup as a reader: %d bytes, %v; want nothing and ErrForbidden", n, err)
	}

	path := filepath.Join(t.TempDir(), "weft.db")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Backup(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n || n == 0 {
		t.Fatalf("Backup returned %d; the file: %v, %v", n, fi, err)
	}
	if err := embedded.CheckFile(path); err != nil {
		t.Fatal(err)
	}
	// Restored: the file as DataDir/weft.db of a new data directory.
	dir := t.TempDir()
	if err := os.Rename(path, filepath.Join(dir, "weft.db")); err != nil {
		t.Fatal(err)
	}
	r := newClient(t, hosttest.New(t, hosttest.Options{
		API:  api.Config{Tokens: hosttest.Tokens()},
		Node: node.Config{NodeID: "client-test-restored", DataDir: dir},
	}).URL, adminToken)
	if _, err := os.Stat(filepath.Join(dir, "weft.db.migrated")); err != nil {
		t.Errorf("the restored host kept no weft.db.migrated: %v", err)
	}
	if d, err := r.Workflow(ctx, "nap", 0); err != nil || d.Version != 1 {
		t.Errorf("the workflow, restored: %+v, %v", d, err)
	}
	for _, id := range []string{"nap-1", "nap-2"} {
		if in, err := r.Instance(ctx, id); err != nil || in.Status != apiv1.StatusSuspended || string(in.Input) != `{"who":"`+id+`"}` {
			t.Errorf("%s, restored: %+v, %v", id, in, err)
		}
	}

	full := errors.New("disk full")
	if _, err := c.Backup(ctx, failingWriter{full}); !errors.Is(err, full) {
		t.Errorf("Backup to a failing writer: %v, want its error", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// TestBackupCutShort: an answer that ends before its Content-Length is a
// *TransportError saying so, not a backup.
func TestBackupCutShort(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", "100000")
		if _, err := w.Write(make([]byte, 4096)); err != nil {
			t.Error(err)
		}
		// Returning short of Content-Length makes the server close the
		// connection.
	}))
	defer srv.Close()
	var got strings.Builder
	n, err := newClient(t, srv.URL, adminToken).Backup(context.Background(), &got)
	var te *client.TransportError
	if !errors.As(err, &te) || !strings.Contains(err.Error(), "of 100000 bytes") {
		t.Fatalf("Backup of a short answer: %d bytes, %v; want a *TransportError saying how much came", n, err)
	}
}
