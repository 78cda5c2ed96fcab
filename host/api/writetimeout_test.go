package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// TestWriteTimeout: a client that stops reading a large answer is
// disconnected once the write timeout has passed, with the answer cut
// short; a ?wait= longer than the write timeout still answers in full.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), WriteTimeout: time.Second}})
	h.putWorkflow("sleeper", sleeperFlow)
	// An answer larger than the socket buffers of both ends take (a few
	// MiB: 4 at most on the server's side, by Linux's default, and a
	// client's that reads nothing does not grow): the server's write
	// blocks until the client reads. Started through the engine, so that no answer
	// carries it but the one under test.
	const size = 12 << 20
	input := json.RawMessage(fmt.Sprintf("%q", strings.Repeat("x", size)))
	if _, _, err := h.node.Start(context.Background(), "sleeper", input, "big"); err != nil {
		t.Fatal(err)
	}

	t.Run("a ?wait= longer than the write timeout", func(t *testing.T) {
		h.request("POST", "/v1/workflows/sleeper/instances", adminSecret, "application/json", []byte(`{"id": "small"}`)).want(t, http.StatusCreated)
		// The sleeper never ends by itself: the wait holds the answer for
		// its whole 2s, twice the write timeout, and then answers with the
		// instance as it is (suspended, or still pending on a loaded
		// machine).
		var in instance
		start := time.Now()
		h.request("GET", "/v1/instances/small?wait=2s", readerSecret, "", nil).want(t, http.StatusOK).json(t, &in)
		if took := time.Since(start); took < 2*time.Second {
			t.Fatalf("the wait answered after %s, before its 2s", took)
		}
		if in.ID != "small" || in.Status != "suspended" && in.Status != "pending" {
			t.Fatalf("instance = %+v", in)
		}
	})

	t.Run("a client that stops reading", func(t *testing.T) {
		srv := h.srv.App().Server()
		h.client.CloseIdleConnections()
		open := func(want int32) {
			t.Helper()
			for deadline := time.Now().Add(30 * time.Second); srv.GetOpenConnectionsCount() != want; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the server has %d open connections after 30s, want %d", srv.GetOpenConnectionsCount(), want)
				}
			}
		}
		open(0)
		conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := fmt.Fprintf(conn, "GET /v1/instances/big HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", readerSecret); err != nil {
			t.Fatal(err)
		}
		open(1)
		// Not reading: the server's write blocks, and the write timeout
		// ends it with the connection.
		open(0)
		// What the server's kernel had taken still arrives, then the end.
		if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open after reading %d bytes (the server's end closed)", n)
		}
		if n >= size {
			t.Fatalf("read %d bytes: the whole answer, not cut short", n)
		}
		t.Logf("read %d bytes of the answer before the server closed the connection (%v)", n, err)
	})
}
