package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/store/embedded"
)

// TestBackup: GET /v1/admin/backup streams, to an admin only, a copy of
// the store (a bbolt file that CheckFile passes) holding every instance
// started before it, while starts go on; restored as the docs say (the
// file as DataDir/weft.db of a new data directory), a host migrates it
// and serves them.
func TestBackup(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("sleeper", sleeperFlow)
	ctx := context.Background()
	pad := json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", 2000)))
	for i := range 100 {
		if _, _, err := h.node.Start(ctx, "sleeper", pad, fmt.Sprintf("before-%03d", i)); err != nil {
			t.Fatal(err)
		}
	}

	h.request("GET", "/v1/admin/backup", readerSecret, "", nil).want(t, http.StatusForbidden).problem(t)
	h.request("GET", "/v1/admin/backup", "", "", nil).want(t, http.StatusUnauthorized).problem(t)

	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		started atomic.Int64
	)
	for w := range 3 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := h.node.Start(ctx, "sleeper", pad, fmt.Sprintf("during-%d-%04d", w, i)); err != nil {
					t.Errorf("a start during the backup: %v", err)
					return
				}
				started.Add(1)
			}
		})
	}
	r := h.request("GET", "/v1/admin/backup", adminSecret, "", nil).want(t, http.StatusOK)
	close(stop)
	wg.Wait()
	if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cl := r.header.Get("Content-Length"); cl != strconv.Itoa(len(r.body)) {
		t.Errorf("Content-Length %s, body %d bytes", cl, len(r.body))
	}
	t.Logf("backup of %d bytes; %d instances started while it was taken", len(r.body), started.Load())

	if err := embedded.CheckFile(writeBackup(t, r.body)); err != nil {
		t.Fatal(err)
	}
	// Restored as the docs say: the file as DataDir/weft.db of a data
	// directory without a store, where a host starts and migrates it.
	restored := restoreBackup(t, r.body)
	for i := range 100 {
		var in apiv1.Instance
		restored.request("GET", fmt.Sprintf("/v1/instances/before-%03d", i), adminSecret, "", nil).want(t, http.StatusOK).json(t, &in)
		if string(in.Input) != string(pad) {
			t.Fatalf("before-%03d, restored: input of %d bytes, want %d", i, len(in.Input), len(pad))
		}
	}
	var defs apiv1.Page[apiv1.Workflow]
	restored.request("GET", "/v1/workflows", adminSecret, "", nil).want(t, http.StatusOK).json(t, &defs)
	if len(defs.Items) != 1 || defs.Items[0].Name != "sleeper" {
		t.Errorf("workflows, restored: %+v", defs.Items)
	}

	head := h.request("HEAD", "/v1/admin/backup", adminSecret, "", nil).want(t, http.StatusOK)
	if n, err := strconv.Atoi(head.header.Get("Content-Length")); err != nil || n < len(r.body) || len(head.body) != 0 {
		t.Errorf("HEAD: Content-Length %q, %d bytes of body; want the size, at least the last backup's %d", head.header.Get("Content-Length"), len(head.body), len(r.body))
	}
}

// TestBackupDoesNotHoldTheShutdown: a backup still streaming when the
// server shuts down is cut off, short of its Content-Length, rather than
// holding the shutdown (and the store) until the client has read it.
func TestBackupDoesNotHoldTheShutdown(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("sleeper", sleeperFlow)
	// Larger than the socket buffers take, so that a client that does not
	// read holds the stream.
	big := json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", 12<<20)))
	if _, _, err := h.node.Start(context.Background(), "sleeper", big, "big"); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "GET /v1/admin/backup HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", adminSecret); err != nil {
		t.Fatal(err)
	}
	// The answer's head arrives once the backup began.
	var head [12]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil || string(head[:]) != "HTTP/1.1 200" {
		t.Fatalf("the answer began %q, %v", head, err)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h.client.CloseIdleConnections()
	if err := h.srv.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown with a backup streaming: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading the rest of the answer: %v", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(append(head[:], b...))), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(res.Body)
	if err == nil || int64(len(got)) >= res.ContentLength {
		t.Fatalf("read %d bytes of %d, %v: want the backup cut short", len(got), res.ContentLength, err)
	}
}

// writeBackup writes a backup's bytes to a file of a new directory and
// returns its path.
func writeBackup(t *testing.T, backup []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// restoreBackup restores a backup as docs/operations.md says: it puts it
// at DataDir/weft.db of a new data directory and starts a host there, which
// migrates it into DataDir/store and keeps the file as weft.db.migrated.
func restoreBackup(t *testing.T, backup []byte) *host {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "weft.db"), backup, 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, node: node.Config{DataDir: dir, NodeID: "restored"}})
	for _, name := range []string{"store", "weft.db.migrated"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("the restored host's data directory: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "weft.db")); !os.IsNotExist(err) {
		t.Errorf("weft.db is still there once restored: %v", err)
	}
	return h
}
