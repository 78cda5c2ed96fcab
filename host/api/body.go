package api

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"github.com/weftworks/weft/host/api/apiv1"
)

// localBodyBytes is the Locals key of how many body bytes the request
// read from its connection (for the access log).
const localBodyBytes = "weft.body_bytes"

// bodies is the middleware that every request passes before its route:
// the only place a request body is read. The server streams bodies
// (nothing of a body but a small read-ahead is read before the handlers
// run), and bodies takes each request to one of two ends before any
// route handler runs:
//
//   - it answers the request itself (401 or 403 first, then 415, 413,
//     503 or 400),
//     with the body discarded unread into memory; or
//   - it reads the whole body into memory, within the route's limit and
//     under the host-wide budget, and sets it as the request's raw body,
//     with every Content-Encoding header removed.
//
// So a handler that reads c.BodyRaw() or c.Request().Body() gets the
// bytes read here, never a stream that Fiber or fasthttp would read
// without a limit. (Handlers do not call c.Body(), which inflates by the
// Content-Encoding header; no request that gets past bodies has one, so
// it would not inflate either.)
func (s *Server) bodies(c *fiber.Ctx) error {
	c.Locals(localBodyBytes, 0)
	req := c.Request()
	limit := s.cfg.BodyLimit
	if m, unknown := c.Locals(localUnknownMethod).(string); unknown {
		return s.refuse(c, 2*limit, problemf(fiber.StatusNotImplemented, "not-implemented", "the method %s is not one this server implements", quoteMethod(m)))
	}
	rt, matched := s.routeFor(c.Method(), c.Path())
	hasBody := req.IsBodyStream() || len(req.Body()) > 0
	// A request with a body that its route refuses anyway is refused
	// first, from its headers: a reader who uploads a plugin learns that
	// it may not (403), not that its body is too large for a reader (413),
	// and the body takes no memory or budget. Admitted to a plugin route,
	// it may upload one, and gets a plugin's limit: no other request makes
	// the host read a plugin-sized body.
	if matched && hasBody {
		if _, p := s.admit(c, rt.perm); p != nil {
			return s.refuse(c, 2*limit, p)
		}
		if rt.pluginBody {
			limit = s.cfg.PluginBodyLimit
		}
	}
	if enc, ok := identityOnly(&req.Header); !ok {
		return s.refuse(c, 2*limit, problemf(fiber.StatusUnsupportedMediaType, "unsupported-encoding", "Content-Encoding %q is not accepted: send the body uncompressed", enc))
	}
	stripContentEncoding(&req.Header)
	if hasBody && (!matched || !rt.takesBody()) {
		// No handler will read this body (no route, a 404 or 405 to come;
		// or a route that takes none): discarded, within the limit and
		// the body deadline, it takes no memory and none of the budget,
		// which only bodies a handler reads may hold.
		if req.Header.ContentLength() > limit {
			return s.refuse(c, 2*limit, tooLarge(req.Header.ContentLength(), limit))
		}
		if !req.IsBodyStream() {
			c.Locals(localBodyBytes, len(req.Body()))
		}
		if !s.discard(c, limit) {
			c.Response().Header.SetConnectionClose()
		}
		req.ResetBody()
		return c.Next()
	}
	if !req.IsBodyStream() {
		// No body, or one that fasthttp did not stream (then it is the
		// read-ahead, which is all of it).
		if n := len(req.Body()); n > limit {
			return s.refuse(c, 2*limit, tooLarge(n, limit))
		}
		c.Locals(localBodyBytes, len(req.Body()))
		return c.Next()
	}
	declared := req.Header.ContentLength() // -1: chunked
	if declared == 0 {
		req.ResetBody()
		return c.Next()
	}
	if declared > limit {
		return s.refuse(c, 2*limit, tooLarge(declared, limit))
	}
	need := declared
	most := declared
	if declared < 0 {
		need = limit     // chunked: as much as the route accepts
		most = limit + 1 // and one byte more tells an oversized body
	}
	if !s.budget.acquire(int64(need), s.cfg.RequestTimeout, s.draining) {
		c.Set(fiber.HeaderRetryAfter, "1")
		return s.refuse(c, 2*limit, problemf(fiber.StatusServiceUnavailable, "busy", "the host holds as many request bodies in memory as it may; retry shortly"))
	}
	held := true
	defer func() {
		if held {
			s.budget.release(int64(need))
		}
	}()
	conn := c.Context().Conn()
	if err := s.bodyDeadline(c, conn, need); err != nil {
		req.ResetBody()
		c.Response().Header.SetConnectionClose()
		return malformed(err.Error(), "the body could not be read")
	}
	body, err := readUpTo(req.BodyStream(), most)
	c.Locals(localBodyBytes, len(body))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		req.ResetBody()
		c.Response().Header.SetConnectionClose()
		return problemf(fiber.StatusRequestTimeout, "request-timeout", "the body did not arrive in time: %d bytes of it came within %s", len(body), s.bodyTime(need).Round(time.Millisecond))
	case err != nil:
		req.ResetBody()
		c.Response().Header.SetConnectionClose()
		// Not err itself: fasthttp's messages quote the request.
		return malformed(err.Error(), "the body could not be read")
	case declared >= 0 && len(body) < declared:
		req.ResetBody()
		c.Response().Header.SetConnectionClose()
		return problemf(fiber.StatusBadRequest, "invalid-request", "the body ended after %d of the %d bytes its Content-Length declares", len(body), declared)
	case len(body) > limit:
		// Chunked and too large: the rest is discarded, not held, up to
		// twice the limit in all.
		body = nil
		s.budget.release(int64(need))
		held = false
		return s.refuse(c, limit-1, tooLarge(-1, limit))
	}
	// The rest of the request is read: fasthttp sets the next request's
	// deadline itself (as watchHangUp relies on too).
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		req.ResetBody()
		c.Response().Header.SetConnectionClose()
		return malformed(err.Error(), "the body could not be read")
	}
	req.SetBodyRaw(body) // also closes the stream, read to its end
	// A chunked body's trailer is read with its last chunk: a
	// Content-Encoding there would count as much as one in the headers.
	// (fasthttp refuses such a trailer, but this does not depend on it.)
	if enc, ok := identityOnly(&req.Header); !ok {
		req.ResetBody()
		return problemf(fiber.StatusUnsupportedMediaType, "unsupported-encoding", "Content-Encoding %q is not accepted: send the body uncompressed", enc)
	}
	stripContentEncoding(&req.Header)
	return c.Next()
}

// tooLarge is the 413 problem of a body of n bytes on a route that
// accepts limit; n < 0: a chunked body that went on past the limit.
func tooLarge(n, limit int) *apiv1.Problem {
	if n < 0 {
		return problemf(fiber.StatusRequestEntityTooLarge, "too-large", "the body is more than %d bytes; this route accepts at most %d", limit, limit)
	}
	return problemf(fiber.StatusRequestEntityTooLarge, "too-large", "the body is %d bytes; this route accepts at most %d", n, limit)
}

// refuse answers p without reading any more of the body into memory: it
// reads and discards up to allowance bytes of what is left of it (callers
// give twice the route's limit, in all), so that a client still writing
// the body gets to read the answer, and closes the connection after the
// answer when the body goes on beyond that (the client may then see the
// connection reset instead of the answer).
func (s *Server) refuse(c *fiber.Ctx, allowance int, p *apiv1.Problem) error {
	if !s.discard(c, allowance) {
		c.Response().Header.SetConnectionClose()
	}
	c.Request().ResetBody()
	return p
}

// discard reads what is left of a streamed body, up to allowance bytes,
// into nothing, under the body deadline, and reports whether the body
// ended within them (true for a body that was not streamed: fasthttp has
// read it already). The connection cannot serve another request after a
// false: the caller closes it after its answer.
func (s *Server) discard(c *fiber.Ctx, allowance int) bool {
	req := c.Request()
	if !req.IsBodyStream() {
		return true
	}
	if declared := req.Header.ContentLength(); declared > allowance || allowance <= 0 {
		return false
	}
	conn := c.Context().Conn()
	if s.bodyDeadline(c, conn, allowance) != nil {
		return false // the connection is gone
	}
	n, err := io.CopyN(io.Discard, req.BodyStream(), int64(allowance)+1)
	if read, ok := c.Locals(localBodyBytes).(int); ok {
		c.Locals(localBodyBytes, read+int(n))
	}
	if !errors.Is(err, io.EOF) || n > int64(allowance) {
		return false
	}
	return conn.SetReadDeadline(time.Time{}) == nil
}

// bodyTime is how long a body of n bytes may take to arrive: BodyTimeout,
// and one second more per BodyRate bytes.
func (s *Server) bodyTime(n int) time.Duration {
	return s.cfg.BodyTimeout + time.Duration(int64(n)*int64(time.Second)/int64(s.cfg.BodyRate))
}

// bodyDeadline sets conn's read deadline for a body of n bytes: bodyTime
// from now, and never later than ReadTimeout after the request began.
// Without it a client trickling a body held its share of the budget (or
// its connection) for the whole ReadTimeout, two minutes by default.
func (s *Server) bodyDeadline(c *fiber.Ctx, conn net.Conn, n int) error {
	deadline := time.Now().Add(s.bodyTime(n))
	if end := c.Context().Time().Add(s.cfg.ReadTimeout); s.cfg.ReadTimeout > 0 && end.Before(deadline) {
		deadline = end
	}
	return conn.SetReadDeadline(deadline)
}

// readUpTo reads r to its end or to most bytes, whichever comes first,
// into a buffer that grows with what arrives (doubling, never beyond
// most), not with what was declared: a connection that declares a large
// body and sends little of it costs little.
func readUpTo(r io.Reader, most int) ([]byte, error) {
	const first = 64 << 10
	buf := make([]byte, 0, min(most, first))
	for len(buf) < most {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*cap(buf), most))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// identityOnly reports whether every Content-Encoding header, however
// many there are and however their names are spelled, lists only the
// identity coding (or nothing). If not, it returns the header values.
func identityOnly(h *fasthttp.RequestHeader) (string, bool) {
	var values []string
	ok := true
	h.VisitAll(func(k, v []byte) {
		if !bytes.EqualFold(k, []byte(fiber.HeaderContentEncoding)) {
			return
		}
		values = append(values, string(v))
		for _, coding := range strings.Split(string(v), ",") {
			if coding = strings.Trim(coding, " \t"); coding != "" && !strings.EqualFold(coding, "identity") {
				ok = false
			}
		}
	})
	return strings.Join(values, ", "), ok
}

// stripContentEncoding removes every Content-Encoding header, however its
// name is spelled: once they all say identity, they say nothing, and
// without them nothing in Fiber or fasthttp inflates the body.
func stripContentEncoding(h *fasthttp.RequestHeader) {
	var keys [][]byte
	h.VisitAll(func(k, _ []byte) {
		if bytes.EqualFold(k, []byte(fiber.HeaderContentEncoding)) {
			keys = append(keys, bytes.Clone(k))
		}
	})
	for _, k := range keys {
		h.DelBytes(k)
	}
}

// routeFor returns the route that a request of method to path takes, as
// routes registers them: GET routes answer HEAD, and paths match as Fiber
// matches them by default (case-insensitively, a trailing slash
// optional). A path that matches no route in the table may still reach
// one through a subtlety of Fiber's router; such a request is treated as
// one to an ordinary route (BodyLimit, any token), never refused.
func (s *Server) routeFor(method, path string) (route, bool) {
	path = strings.ToLower(path)
	for _, r := range s.table {
		if (r.method == method || method == fiber.MethodHead && r.method == fiber.MethodGet) && matchPattern(r.path, path) {
			return r, true
		}
	}
	return route{}, false
}

// budget bounds the bytes of request bodies held in memory at once, over
// all requests: a weighted semaphore whose waiters are served in order,
// so that a large body is not passed over for ever by small ones.
type budget struct {
	mu      sync.Mutex
	size    int64
	free    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes are granted
}

func newBudget(size int64) *budget { return &budget{size: size, free: size} }

// acquire takes n bytes (at most the whole budget), waiting for them
// until timeout passes or stop closes. It reports whether it got them;
// if so, the caller must release them.
func (b *budget) acquire(n int64, timeout time.Duration, stop <-chan struct{}) bool {
	n = min(n, b.size)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.free >= n {
		b.free -= n
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.ready:
		return true
	case <-t.C:
	case <-stop:
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.ready: // granted meanwhile: the caller has it after all
		return true
	default:
	}
	b.waiters = slices.DeleteFunc(b.waiters, func(x *budgetWaiter) bool { return x == w })
	b.grant() // w may have held up the waiters behind it
	return false
}

// release returns n bytes taken by acquire.
func (b *budget) release(n int64) {
	n = min(n, b.size)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	b.grant()
}

// grant hands free bytes to the waiters in order. b.mu must be held.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.waiters[0].n <= b.free {
		w := b.waiters[0]
		b.free -= w.n
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}
