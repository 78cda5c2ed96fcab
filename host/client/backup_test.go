package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/store/embedded"
)

// TestBackup: Backup writes a copy of the store that opens as one; a
// reader may not take one; an error writing is the writer's.
func TestBackup(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	ctx := context.Background()
	c := newClient(t, url, adminToken)
	if _, _, err := c.PutWorkflow(ctx, "nap", []byte("name: nap\nsteps:\n  - { id: rest, delay: 1s }\n")); err != nil {
		t.Fatal(err)
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
	s, err := embedded.Open(path, embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d, err := s.GetDefinition(ctx, "nap", 0); err != nil || d.Version != 1 {
		t.Errorf("the workflow in the backup: %+v, %v", d, err)
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
