package api_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// rawAnswer is a response read from a raw connection.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
	err    error // reading the answer failed (reset, closed)
}

// rawExchange sends head (request line and header lines, without the
// blank line) and body on a fresh connection, byte for byte as given, and
// reads the answer while the body is still being written: a server may
// answer before it has read the body.
func rawExchange(t testing.TB, h *host, head string, body []byte) rawAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		if _, err := io.WriteString(conn, head+"\r\n\r\n"); err != nil {
			return
		}
		_, _ = conn.Write(body) // the server may refuse and close first
	}()
	defer func() { <-wrote }()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		_ = conn.Close() // unblocks the writer
		return rawAnswer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	_ = conn.Close()
	return rawAnswer{status: res.StatusCode, header: res.Header, body: b, err: err}
}

// hostPort is h's address for a Host header.
func hostPort(h *host) string { return strings.TrimPrefix(h.url, "http://") }

// gzipBomb returns a body of concatenated gzip members (which gzip
// readers inflate one after the other) that is about 1 KiB per MiB it
// inflates to.
func gzipBomb(t testing.TB, inflatedMiB int) []byte {
	t.Helper()
	var member bytes.Buffer
	zw, err := gzip.NewWriterLevel(&member, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Repeat(member.Bytes(), inflatedMiB)
}

// TestCompressedBodiesRefusedHoweverSpelled: a body is refused with a 415
// problem when any Content-Encoding header names anything but identity,
// however many headers there are and however they are spelled, and the
// host never inflates it (Fiber's Body() inflates by the last header, so
// "identity" followed by "gzip" was once inflated in full). Identity,
// however spelled, passes with the body intact.
func TestCompressedBodiesRefusedHoweverSpelled(t *testing.T) {
	h := newHost(t)
	const inflated = 256 // MiB
	bomb := gzipBomb(t, inflated)
	plugin := func(encodings ...string) string {
		head := fmt.Sprintf("PUT /v1/plugins/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/wasm\r\nContent-Length: %d", hostPort(h), adminSecret, len(bomb))
		for _, e := range encodings {
			head += "\r\n" + e
		}
		return head
	}

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"identity then gzip", []string{"Content-Encoding: identity", "Content-Encoding: gzip"}},
		{"identity then lower-case gzip", []string{"Content-Encoding: identity", "content-encoding:   Gzip  "}},
		{"identity, gzip", []string{"Content-Encoding: identity, gzip"}},
		{"GZIP", []string{"Content-Encoding: GZIP"}},
		{"empty then deflate", []string{"Content-Encoding: ", "Content-Encoding: deflate"}},
		{"identity then br", []string{"CONTENT-ENCODING: IDENTITY", "Content-Encoding: br"}},
	} {
		r := rawExchange(t, h, plugin(tc.headers...), bomb)
		if r.err != nil {
			t.Fatalf("%s: reading the answer: %v", tc.name, r.err)
		}
		if r.status != http.StatusUnsupportedMediaType {
			t.Fatalf("%s: status %d, want 415: %s", tc.name, r.status, r.body)
		}
		p := response{status: r.status, header: r.header, body: r.body}.problem(t)
		if !strings.Contains(p.Detail, "Content-Encoding") {
			t.Fatalf("%s: problem does not name the header: %+v", tc.name, p)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// Everything this process allocated during the requests, whoever did:
	// one inflated bomb alone would be 256 MiB.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
		t.Errorf("the process allocated %d MiB while refusing %d KiB bombs that inflate to %d MiB", grew>>20, len(bomb)>>10, inflated)
	}

	start := time.Now()
	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("/healthz took %s", d)
	}

	// Identity, however spelled and repeated, is no encoding: the body
	// arrives as sent.
	event := `{"name": "order.approved", "key": "k"}`
	for _, headers := range [][]string{
		{"Content-Encoding: identity", "content-encoding: IDENTITY"},
		{"Content-Encoding: Identity , identity"},
	} {
		head := fmt.Sprintf("POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s",
			hostPort(h), operatorSecret, len(event), strings.Join(headers, "\r\n"))
		r := rawExchange(t, h, head, []byte(event))
		if r.err != nil || r.status != http.StatusAccepted {
			t.Fatalf("%q: status %d (%v), want 202: %s", headers, r.status, r.err, r.body)
		}
	}
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestStalledBodiesCostNoMemory: connections that declare a large body
// and then stall (after the headers, or after a little of the body) cost
// the host next to nothing: it does not allocate a declared length before
// the bytes arrive. Not parallel: it measures this process's heap.
func TestStalledBodiesCostNoMemory(t *testing.T) {
	const (
		limit    = 8 << 20
		declared = limit
		conns    = 40
	)
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), PluginBodyLimit: limit}})
	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
	base := heapInUse()

	var (
		mu     sync.Mutex
		opened []net.Conn
	)
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range opened {
			_ = c.Close()
		}
	}()
	head := fmt.Sprintf("PUT /v1/plugins/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/wasm\r\nContent-Length: %d\r\n\r\n",
		hostPort(h), adminSecret, declared)
	for i := 0; i < conns; i++ {
		c, err := net.Dial("tcp", hostPort(h))
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		opened = append(opened, c)
		mu.Unlock()
		msg := []byte(head)
		if i%2 == 1 {
			// A little of the body, past anything the server reads
			// ahead before the handler runs.
			msg = append(msg, bytes.Repeat([]byte{0x42}, 32<<10)...)
		}
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}

	// Watch the heap for a while: the old server allocated every declared
	// length as soon as it had read the headers.
	bound := uint64(5 * declared)
	watch := time.NewTimer(3 * time.Second)
	defer watch.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var peak uint64
	for watching := true; watching; {
		if now := heapInUse(); now > base && now-base > peak {
			peak = now - base
		}
		if peak > bound {
			t.Fatalf("with %d connections stalled after declaring %d MiB each, the heap grew by %d MiB (bound %d MiB)", conns, declared>>20, peak>>20, bound>>20)
		}
		select {
		case <-tick.C:
		case <-watch.C:
			watching = false
		}
	}

	// The host still answers, promptly.
	client := &http.Client{Timeout: 20 * time.Second}
	start := time.Now()
	res, err := client.Get(h.url + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with %d stalled uploads: %v", conns, err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", res.StatusCode)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("/healthz took %s", d)
	}
	t.Logf("heap grew by at most %d KiB with %d stalled uploads of %d MiB", peak>>10, conns, declared>>20)
}

// chunked encodes body in chunks of at most size bytes, then trailer
// lines (each "Name: value") after the last chunk.
func chunked(body []byte, size int, trailer ...string) []byte {
	var b bytes.Buffer
	for len(body) > 0 {
		n := min(size, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n")
	for _, line := range trailer {
		b.WriteString(line + "\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// TestChunkedAndContinuedBodies: a chunked body is read within the
// route's limit and refused with a 413 problem beyond it, after reading;
// a Content-Encoding in its trailer never gets it inflated; a request
// that waits for 100 Continue is served.
func TestChunkedAndContinuedBodies(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), BodyLimit: 4 << 10}})
	eventHead := func(extra string) string {
		head := fmt.Sprintf("POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json", hostPort(h), operatorSecret)
		if extra != "" {
			head += "\r\n" + extra
		}
		return head
	}
	event := func(size int) []byte {
		e := fmt.Sprintf(`{"name": "order.approved", "key": %q}`, strings.Repeat("k", size))
		return []byte(e)
	}

	r := rawExchange(t, h, eventHead("Transfer-Encoding: chunked"), chunked(event(3<<10), 1000))
	if r.err != nil || r.status != http.StatusAccepted {
		t.Fatalf("chunked within the limit: status %d (%v), want 202: %s", r.status, r.err, r.body)
	}

	r = rawExchange(t, h, eventHead("Transfer-Encoding: chunked"), chunked(event(6<<10), 1000))
	if r.err != nil || r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked over the limit: status %d (%v), want 413: %s", r.status, r.err, r.body)
	}
	if p := (response{status: r.status, header: r.header, body: r.body}).problem(t); !strings.Contains(p.Detail, "at most 4096") {
		t.Fatalf("problem does not name the limit: %+v", p)
	}

	// Far beyond the limit the host stops reading: the client gets the
	// 413 or, still writing, a reset.
	r = rawExchange(t, h, eventHead("Transfer-Encoding: chunked"), chunked(event(64<<10), 1000))
	if r.err == nil && r.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked far over the limit: status %d, want 413 or a reset: %s", r.status, r.body)
	}

	// A Content-Encoding trailer: refused, whoever refuses it.
	bomb := gzipBomb(t, 1)
	r = rawExchange(t, h, eventHead("Transfer-Encoding: chunked"), chunked(bomb, 1000, "Content-Encoding: gzip"))
	if r.err == nil && r.status != http.StatusBadRequest && r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("Content-Encoding trailer: status %d, want 400 or 415: %s", r.status, r.body)
	}

	// Expect: 100-continue: the host asks for the body and reads it.
	conn, err := net.Dial("tcp", hostPort(h))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	body := event(10)
	if _, err := fmt.Fprintf(conn, "%s\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", eventHead(""), len(body)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != http.StatusContinue {
		t.Fatalf("before the body: %v, %v; want 100 Continue", res, err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	if res, err = http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("after the body: %v, %v; want 202", res, err)
	}
	res.Body.Close()

	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
}

// TestBodyBudget: bodies held in memory share the host's budget. While a
// stalled upload holds all of it, another body waits, then gets a 503
// problem; requests without a body, and requests their route refuses
// anyway, are answered as ever; once the upload is gone, uploads go
// through again.
func TestBodyBudget(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	h := newHostWith(t, hostOptions{api: api.Config{
		Tokens: testTokens(), BodyLimit: 4 << 10, PluginBodyLimit: limit, BodyBudget: limit,
		RequestTimeout: 3 * time.Second,
	}})
	junk := bytes.Repeat([]byte{0x42}, limit)

	// The stalled upload: all its headers, a little of its body.
	stalled, err := net.Dial("tcp", hostPort(h))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	if _, err := fmt.Fprintf(stalled, "PUT /v1/plugins/stalled HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/wasm\r\nContent-Length: %d\r\n\r\n%s",
		hostPort(h), adminSecret, limit, junk[:16<<10]); err != nil {
		t.Fatal(err)
	}

	// Once the stalled upload holds the budget, another is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.request("PUT", "/v1/plugins/junk", adminSecret, "application/wasm", junk)
		if r.status == http.StatusServiceUnavailable {
			if p := r.problem(t); p.Type != "urn:weft:problem:busy" || r.header.Get("Retry-After") == "" {
				t.Fatalf("503 %+v, Retry-After %q; want a busy problem with Retry-After", p, r.header.Get("Retry-After"))
			}
			break
		}
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("upload beside the stalled one: status %d: %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("uploads still go through 30s after another stalled holding the whole budget")
		}
	}
	// No body: no budget needed.
	h.request("GET", "/v1/plugins", readerSecret, "", nil).want(t, http.StatusOK)
	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
	// Refused by its route: refused before it waits for budget.
	h.request("PUT", "/v1/workflows/x", "", "application/yaml", []byte("name: x\n")).want(t, http.StatusUnauthorized).problem(t)
	h.request("PUT", "/v1/workflows/x", readerSecret, "application/yaml", []byte("name: x\n")).want(t, http.StatusForbidden).problem(t)

	// The stalled upload goes away; uploads go through again.
	_ = stalled.Close()
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := h.request("PUT", "/v1/plugins/junk", adminSecret, "application/wasm", junk)
		if r.status == http.StatusUnprocessableEntity {
			break
		}
		if r.status != http.StatusServiceUnavailable {
			t.Fatalf("upload after the stalled one left: status %d: %s", r.status, r.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("uploads still refused 30s after the stalled one left")
		}
	}

	if _, err := api.New(api.Config{PluginBodyLimit: 2 << 20, BodyBudget: 1 << 20}, h.node); err == nil || !strings.Contains(err.Error(), "BodyBudget") {
		t.Errorf("New with a budget below the plugin limit: %v, want an error", err)
	}
}

// rawBytes sends msg on a fresh connection, byte for byte, and returns
// every byte the server answers until it closes the connection (or the
// deadline passes).
func rawBytes(t testing.TB, h *host, msg []byte) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", hostPort(h))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		_, _ = conn.Write(msg) // the server may answer and close first
	}()
	defer func() { <-wrote }()
	b, _ := io.ReadAll(conn) // a reset after the answer is no failure
	_ = conn.Close()
	return b
}

// fixedDetail is the detail of a malformed-request problem: a fixed
// phrase, nothing quoted from the request.
var fixedDetail = regexp.MustCompile(`^malformed request: [A-Za-z -]+$`)

// TestParseErrorsDoNotLeakSecrets: fasthttp's messages about requests it
// cannot parse quote the raw request, Authorization header and all. A
// malformed request carrying a bearer token gets a problem whose detail
// says what kind of thing was malformed and quotes nothing of the request,
// and nothing the host logs (at any level) quotes it either.
func TestParseErrorsDoNotLeakSecrets(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, debugLogs: true})
	auth := "Authorization: Bearer " + adminSecret
	hostLine := "Host: " + hostPort(h)
	event := `{"name": "order.approved", "key": "k"}`
	chunkedHead := "POST /v1/events HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"header line without a colon", "GET /v1/plugins HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nNo colon here\r\nConnection: close\r\n\r\n"},
		{"space in a header name", "GET /v1/plugins HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nBad Name: v\r\nConnection: close\r\n\r\n"},
		{"bad Content-Length", "POST /v1/events HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nContent-Type: application/json\r\nContent-Length: 12x\r\nConnection: close\r\n\r\n" + event},
		{"negative Content-Length", "POST /v1/events HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nContent-Type: application/json\r\nContent-Length: -5\r\nConnection: close\r\n\r\n" + event},
		{"bad request line", "GET\r\n" + auth + "\r\n" + hostLine + "\r\nConnection: close\r\n\r\n"},
		{"empty request URI", "GET  HTTP/1.1\r\n" + auth + "\r\n" + hostLine + "\r\nConnection: close\r\n\r\n"},
		{"bad chunk size", chunkedHead + "zz\r\n" + event + "\r\n0\r\n\r\n"},
		{"chunk size too large", chunkedHead + "fffffffffffffffffff\r\n" + event + "\r\n0\r\n\r\n"},
		{"chunk without its CRLF", chunkedHead + fmt.Sprintf("%x\r\n%sXX0\r\n\r\n", len(event), event)},
		{"trailer with a bad name", chunkedHead + string(chunked([]byte(event), 16, "Bad Name: v"))},
		{"trailer carrying the token", chunkedHead + string(chunked([]byte(event), 16, "X Token: Bearer "+adminSecret))},
		{"forbidden trailer", chunkedHead + string(chunked([]byte(event), 16, auth))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := rawBytes(t, h, []byte(tc.msg))
			if bytes.Contains(answer, []byte(adminSecret)) {
				t.Fatalf("the answer quotes the token:\n%s", answer)
			}
			if len(answer) == 0 {
				return // closed without an answer: nothing leaked
			}
			res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), nil)
			if err != nil {
				t.Fatalf("unreadable answer %q: %v", answer, err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode < 400 || res.StatusCode >= 500 {
				t.Fatalf("status %d, want a 4xx problem: %s", res.StatusCode, body)
			}
			p := response{status: res.StatusCode, header: res.Header, body: body}.problem(t)
			if res.StatusCode == http.StatusBadRequest && (p.Type != "urn:weft:problem:malformed-request" || !fixedDetail.MatchString(p.Detail)) {
				t.Fatalf("problem %+v, want a malformed-request with a detail \"malformed request: <words>\"", p)
			}
			t.Logf("%d %s", res.StatusCode, p.Detail)
		})
	}
	// The host still serves, and has logged nothing of the token.
	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
	if logs := h.logs.String(); strings.Contains(logs, adminSecret) {
		t.Fatalf("the logs quote the token:\n%s", logs)
	}
}
