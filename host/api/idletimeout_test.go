package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// TestIdleAndReadTimeouts: a keep-alive connection that sends no next
// request is closed after the idle timeout, and one that stops in the
// middle of a request after the read timeout.
func TestIdleAndReadTimeouts(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), IdleTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond}})
	addr := strings.TrimPrefix(h.url, "http://")
	closedWithin := func(t *testing.T, conn net.Conn, r *bufio.Reader) time.Duration {
		t.Helper()
		start := time.Now()
		// Generous: a loaded machine closes later, never sooner.
		if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReadByte(); err == nil {
			t.Fatal("the server sent something more")
		} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the connection is still open after 30 s")
		}
		return time.Since(start)
	}
	t.Run("idle", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(res.Body); err != nil {
			t.Fatal(err)
		}
		if d := closedWithin(t, conn, r); d < 250*time.Millisecond {
			t.Errorf("closed %s after the answer, before the idle timeout", d)
		}
	})
	t.Run("read", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil { // the headers never end
			t.Fatal(err)
		}
		if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("no answer to a request cut short: %v", err)
		}
		if _, err := io.ReadAll(res.Body); err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a request cut short: %d, want 408", res.StatusCode)
		}
		closedWithin(t, conn, r)
	})
}
