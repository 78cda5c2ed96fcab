package api_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A connection that never sends a request (net/http parks such spares)
// does not hold Shutdown: fasthttp counts it active and would wait for it
// until the read timeout, two minutes. Shutdown closes it.
func TestShutdownClosesSilentConnections(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	h.request("GET", "/healthz", "", "", nil).want(t, 200) // the server has accepted the silent one meanwhile
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a silent connection open: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the silent connection got an answer")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Error("the silent connection is still open after Shutdown")
	}
}
