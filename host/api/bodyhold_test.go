package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// stallUpload opens a connection, sends head (request line and headers,
// without the blank line) with a Content-Length of declared and the first
// sent bytes of the body, and leaves it there. The connection is closed
// when the test ends.
func stallUpload(t *testing.T, h *host, head string, declared, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", hostPort(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "%s\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", head, hostPort(h), declared, bytes.Repeat([]byte{'x'}, sent)); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnreadBodiesHoldNoBudget: slow uploads that no handler will read (to
// a path no route has, to a route that takes no body, with a wrong method)
// or that their route refuses (no token, a bad one, too weak a role) hold
// none of the body budget: while they trickle, an operator's small event
// is accepted at once. Each of them declares the whole budget; before, the
// first to arrive took all of it and every body after it waited for
// RequestTimeout, then got 503.
func TestUnreadBodiesHoldNoBudget(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	h := newHostWith(t, hostOptions{api: api.Config{
		Tokens: testTokens(), BodyLimit: budget, PluginBodyLimit: budget, BodyBudget: budget,
		RequestTimeout: 2 * time.Second,
		// Long: what must free the budget here is not holding it at all.
		BodyTimeout: time.Minute,
	}})
	heads := []string{
		"POST /v1/no-such-route HTTP/1.1",
		"PUT /nowhere/at/all HTTP/1.1\r\nAuthorization: Bearer " + operatorSecret,
		"GET /healthz HTTP/1.1",
		"GET /v1/plugins HTTP/1.1\r\nAuthorization: Bearer " + readerSecret,
		"DELETE /v1/instances/x HTTP/1.1\r\nAuthorization: Bearer " + operatorSecret,
		"POST /healthz HTTP/1.1",
		"POST /v1/events HTTP/1.1\r\nContent-Type: application/json",
		"POST /v1/events HTTP/1.1\r\nContent-Type: application/json\r\nAuthorization: Bearer wrong",
		"PUT /v1/plugins/x HTTP/1.1\r\nContent-Type: application/wasm\r\nAuthorization: Bearer " + readerSecret,
	}
	for round := 0; round < 2; round++ {
		for _, head := range heads {
			stallUpload(t, h, head, budget, 16<<10)
		}
	}

	// Each stalled upload reaches the server's handler within moments of
	// its headers: for a while, every event must still go through at once.
	event := []byte(`{"name":"x.y"}`)
	start := time.Now()
	for n := 0; n < 3 || time.Since(start) < 3*time.Second; n++ {
		sent := time.Now()
		r := h.request("POST", "/v1/events", operatorSecret, "application/json", event)
		if r.status != http.StatusAccepted {
			t.Fatalf("event %d beside %d stalled uploads: status %d after %s: %s", n, 2*len(heads), r.status, time.Since(sent).Round(time.Millisecond), r.body)
		}
	}
}

// TestTricklingBodyIsCutOff: a body that arrives too slowly is cut off by
// the body deadline (BodyTimeout plus a second per BodyRate bytes), with a
// 408 problem, long before the ReadTimeout (two minutes here), and its
// budget is free again at once.
func TestTricklingBodyIsCutOff(t *testing.T) {
	t.Parallel()
	const budget = 64 << 10
	h := newHostWith(t, hostOptions{api: api.Config{
		Tokens: testTokens(), BodyLimit: budget, PluginBodyLimit: budget, BodyBudget: budget,
		BodyTimeout: 500 * time.Millisecond, BodyRate: 1 << 20,
	}})
	c := stallUpload(t, h, "PUT /v1/workflows/slow HTTP/1.1\r\nContent-Type: application/yaml\r\nAuthorization: Bearer "+adminSecret, budget, 16<<10)
	// A byte every 20 ms: it never stops for long, it only never ends.
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := c.Write([]byte{'x'}); err != nil {
				return // cut off
			}
		}
	}()
	defer func() { close(stop); <-trickled }()

	start := time.Now()
	if err := c.SetReadDeadline(start.Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a trickling upload within 30s: %v", err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := response{status: res.StatusCode, header: res.Header, body: body}.problem(t)
	if res.StatusCode != http.StatusRequestTimeout || p.Type != "urn:weft:problem:request-timeout" || !res.Close {
		t.Fatalf("trickling upload: %d %+v (connection close %v); want a 408 request-timeout and the connection closed", res.StatusCode, p, res.Close)
	}
	t.Logf("cut off after %s: %s", time.Since(start).Round(time.Millisecond), p.Detail)

	// Its budget is back: a body of the whole budget goes through.
	def := []byte("name: fits\nsteps:\n  - { id: w, wait: { event: order.approved, key: k, timeout: 1h } }\n#")
	def = append(def, bytes.Repeat([]byte{'x'}, budget-len(def)-1)...)
	def = append(def, '\n')
	h.request("PUT", "/v1/workflows/fits", adminSecret, "application/yaml", def).want(t, http.StatusCreated)
}
