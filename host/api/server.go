// Package api is Weft's HTTP API on Fiber: plugins, workflows,
// instances, events and administration under /v1, health and readiness
// probes, Prometheus metrics and the OpenAPI document.
//
// # Decisions
//
//   - Every error is an RFC 9457 problem (application/problem+json), also
//     for unknown routes (404), wrong methods (405, with Allow), methods
//     the server does not know (501: Fiber would answer a bare 400 before
//     any middleware; knownMethods routes them through it), oversized
//     bodies (413), unsupported media types (415) and panics (500): a
//     client needs one error decoder, and every request is logged and
//     counted. A JSON body that is not UTF-8 is a 400 naming the offset. Validation problems list each reason with its path
//     (and line and column for definitions) under "errors".
//   - Types are URNs (urn:weft:problem:not-found): stable identifiers that
//     do not pretend to be documentation pages.
//   - Every request has an id, taken from X-Request-Id when the client sent
//     a sane one and generated otherwise; it is echoed in the response, in
//     problem bodies (request_id) and in every log line the request writes,
//     including the access log.
//   - Bodies are streamed, and read in one place: the bodies middleware,
//     which every request passes before its route. Before any handler
//     runs, the server reads a request's headers and at most 8 KiB of its
//     body, however long a body the headers declare, so connections that
//     declare large bodies and stall cost next to nothing. The middleware
//     then takes the request to one of two ends: it answers it itself,
//     having read none of the body into memory, or it reads the whole
//     body into memory and hands the route that. It refuses, in this
//     order: a Content-Encoding other than identity (415); a declared
//     length over the route's limit (413, from the headers; plugins:
//     PluginBodyLimit for a token that may upload them, all else:
//     BodyLimit); a request its route would refuse for its token (401,
//     403, before its body takes memory); and a body that finds no room
//     in the budget (503, with Retry-After). Otherwise it reads the body
//     into a buffer that grows with what arrives, never beyond the
//     declared length, and refuses a chunked body that goes past the
//     limit (413, after reading limit+1 bytes). A body that no handler
//     reads (no route, a route other than PUT or POST) is discarded, and
//     neither it nor one its route refuses for its token takes any of the
//     budget. A body must arrive within BodyTimeout plus a second per
//     BodyRate bytes (18 s for 1 MiB by default), or gets a 408 and the
//     connection is closed: a trickling client holds the budget for
//     seconds, not for the ReadTimeout.
//   - Refusing a body, the server reads and discards up to twice the
//     route's limit of it, so that a client still writing it reads the
//     answer; beyond that it closes the connection after answering, and
//     such a client may see the connection reset instead.
//   - The body budget (BodyBudget, by default four times the larger
//     limit) bounds the bytes of bodies in memory at once, over all
//     requests: a body takes its declared length (a chunked one, its
//     route's limit) from it before it is read, waits in line for up to
//     RequestTimeout when there is not enough, and gets a 503 then.
//     Handlers' copies of a body (Fiber copies it for them) and a growing
//     buffer's previous half come on top.
//   - Compressed bodies are refused (415), however many Content-Encoding
//     headers carry the coding and however it is spelled ("identity,
//     gzip", "GZIP", "identity" then "gzip"): Fiber's c.Body() inflates
//     by the last such header, without a limit. Identity-only headers
//     are removed, so no request that reaches a route carries one and
//     c.Body() could not inflate; the headers are checked again after a
//     chunked body's trailer. Handlers do not call c.Body() anyway: they
//     read the raw body (c.BodyRaw(), c.Request().Body()), so that
//     nothing inflates even if a Content-Encoding got past the
//     middleware.
//   - A request the server cannot parse (a bad request line, header,
//     Content-Length, chunk or trailer) gets a 400 problem whose detail
//     is "malformed request: " and a fixed phrase for what was wrong,
//     and nothing else: fasthttp's parse errors quote the raw request,
//     Authorization header and all, so no part of them is answered or
//     logged. (fasthttp is also told to leave the request out of its
//     messages where it can, and its own connection-error log stays
//     discarded, as Fiber sets it.)
//   - Shutdown first tells requests waiting on ?wait= to answer with the
//     instance as it is now, then stops accepting and drains the requests
//     in flight: a waiting client gets a complete answer at once instead of
//     holding the shutdown for the rest of its wait.
//   - A response must be written within WriteTimeout of its handler
//     returning (fasthttp's write deadline, for the whole response), or the
//     connection is closed: a client that stops reading does not hold it.
//     A ?wait= is not cut by it, whatever the two durations: it waits in
//     its handler, before the deadline is set. A backup streams for as
//     long as copying the store takes, so its stream moves the deadline on
//     at every chunk: it must make progress every WriteTimeout instead.
//   - A backup in progress when Shutdown starts is cut off rather than
//     drained: it would hold the store open for as long as its client
//     takes.
//   - /healthz and /readyz need no token (probes carry none);
//     /v1/openapi.json needs none either, as it holds nothing secret and a
//     client generator must read it before it has a token. /metrics needs
//     a token of any role when auth is on, because label values name
//     workflows, plugins and activities.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/host/node"
)

// Config configures a Server.
type Config struct {
	// Tokens are the bearer tokens clients authenticate with. With none,
	// auth is off: every request is allowed (the serve command then binds
	// to loopback only).
	Tokens []Token
	// BodyLimit bounds request bodies other than plugin uploads, in bytes.
	// Defaults to 1 MiB.
	BodyLimit int
	// PluginBodyLimit bounds plugin uploads (PUT /v1/plugins/{name}), in
	// bytes. Defaults to 32 MiB.
	PluginBodyLimit int
	// BodyBudget bounds the bytes of request bodies held in memory at
	// once, over all requests. A request whose body does not fit waits
	// for room up to RequestTimeout, then gets a 503. At least the larger
	// of BodyLimit and PluginBodyLimit; defaults to four times that.
	BodyBudget int
	// Logger receives the access log and request errors. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// Gatherer is served at /metrics. Nil: /metrics answers 404.
	Gatherer prometheus.Gatherer
	// RequestTimeout bounds the store and engine work of a request (not
	// a ?wait=, which has its own). Defaults to 30s.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing a response, from when its handler has
	// returned: a client that stops reading is disconnected then. A ?wait=
	// waits inside its handler, so it is not cut; a backup, which streams
	// for as long as copying the store takes, must instead make progress
	// every WriteTimeout. Defaults to defaultWriteTimeout.
	WriteTimeout time.Duration
	// ReadTimeout bounds reading a request, its headers and body (a plugin
	// upload the largest). Defaults to defaultReadTimeout.
	ReadTimeout time.Duration
	// BodyTimeout and BodyRate bound how long a request's body may take
	// to arrive once the host starts reading it: BodyTimeout plus one
	// second per BodyRate bytes of its declared length (a chunked body:
	// its route's limit), and never more than ReadTimeout. A client that
	// trickles its body is cut off then (408), so that it holds its share
	// of the body budget for seconds, not for the ReadTimeout. Default to
	// defaultBodyTimeout and defaultBodyRate.
	BodyTimeout time.Duration
	BodyRate    int
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request. Defaults to defaultIdleTimeout.
	IdleTimeout time.Duration
	// StreamPoll is how often an event stream (GET /v1/streams/instances,
	// GET /v1/instances/{id}/stream) reads the store again for changes
	// this node was not told of (those another node of a cluster made
	// while an instance ran) and sends a keep-alive. Defaults to
	// defaultStreamPoll.
	StreamPoll time.Duration
	// MaxStreams bounds the event streams open at once; one more is a
	// 503. Defaults to defaultMaxStreams.
	MaxStreams int
	// TraceViewerURL is a link to the operators' trace viewer with
	// TraceIDPlaceholder where a trace id goes
	// ("https://jaeger.example.com/trace/{trace_id}"). GET /v1/whoami
	// answers it as trace_url, so that the console links an instance's
	// trace id to its trace: the host cannot know where its spans are
	// looked at. Empty (the default): no link, the console offers a
	// copy of the id only.
	TraceViewerURL string
}

// TraceIDPlaceholder is what Config.TraceViewerURL holds once, for a
// client to replace with a trace id.
const TraceIDPlaceholder = "{trace_id}"

// The defaults of Config.StreamPoll and MaxStreams.
const (
	defaultStreamPoll = 5 * time.Second
	defaultMaxStreams = 256
)

// defaultWriteTimeout is Config.WriteTimeout's default. Answers are
// small, an exported state with its history the largest: a client that has
// not taken one in two minutes has stalled.
const defaultWriteTimeout = 2 * time.Minute

// The defaults of Config.ReadTimeout, IdleTimeout and RequestTimeout.
const (
	defaultReadTimeout    = 2 * time.Minute
	defaultIdleTimeout    = time.Minute
	defaultRequestTimeout = 30 * time.Second
)

// The defaults of Config.BodyTimeout and BodyRate: a body of 1 MiB (the
// default BodyLimit) must arrive within 18 seconds, at 128 KiB/s (1 Mbit/s)
// on average once the first 10 seconds are spent.
const (
	defaultBodyTimeout = 10 * time.Second
	defaultBodyRate    = 128 << 10
)

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.BodyLimit == 0 {
		c.BodyLimit = 1 << 20
	}
	if c.PluginBodyLimit == 0 {
		c.PluginBodyLimit = 32 << 20
	}
	if c.BodyBudget == 0 {
		c.BodyBudget = 4 * max(c.BodyLimit, c.PluginBodyLimit)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.StreamPoll == 0 {
		c.StreamPoll = defaultStreamPoll
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = defaultMaxStreams
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = defaultWriteTimeout
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = defaultReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = defaultIdleTimeout
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = defaultBodyTimeout
	}
	if c.BodyRate == 0 {
		c.BodyRate = defaultBodyRate
	}
	return c
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("BodyBudget", "Tokens[1].Role"), so that a caller that fills
// Config from settings of its own can name its setting (the host's
// configuration does).
type ConfigError struct {
	// Field is the field's name.
	Field string
	// Message says what is wrong, naming fields as Field does.
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "api: " + e.Message }

// Validate reports every field of c with an impossible value, the tokens'
// included, each as a *ConfigError, joined. New calls it on the result of
// WithDefaults; a caller that sets every field itself calls it on c as it
// is, so that a zero it chose is judged rather than replaced by a default.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)})
	}
	for _, l := range []struct {
		field string
		n     int
	}{{"BodyLimit", c.BodyLimit}, {"PluginBodyLimit", c.PluginBodyLimit}} {
		if l.n < 1<<10 || l.n > 1<<30 {
			bad(l.field, "must be between 1 KiB and 1 GiB, got %d bytes", l.n)
		}
	}
	if larger := max(c.BodyLimit, c.PluginBodyLimit); c.BodyBudget < larger {
		bad("BodyBudget", "must be at least BodyLimit and PluginBodyLimit (%d), got %d: a body of the larger limit could never be read", larger, c.BodyBudget)
	}
	for _, d := range []struct {
		field string
		d     time.Duration
	}{
		{"RequestTimeout", c.RequestTimeout}, {"WriteTimeout", c.WriteTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"BodyTimeout", c.BodyTimeout}, {"IdleTimeout", c.IdleTimeout}, {"StreamPoll", c.StreamPoll},
	} {
		if d.d <= 0 {
			bad(d.field, "must be positive, got %s", d.d)
		}
	}
	if c.BodyRate < 1<<10 {
		bad("BodyRate", "must be at least 1 KiB (a second's worth of a body), got %d bytes", c.BodyRate)
	}
	if c.MaxStreams < 1 || c.MaxStreams > 100_000 {
		bad("MaxStreams", "must be between 1 and 100000, got %d", c.MaxStreams)
	}
	if c.TraceViewerURL != "" {
		if err := checkTraceViewerURL(c.TraceViewerURL); err != nil {
			bad("TraceViewerURL", "%v", err)
		}
	}
	if _, err := newAuthenticator(c.Tokens); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// checkTraceViewerURL accepts a trace viewer's link: an absolute http://
// or https:// URL once its TraceIDPlaceholder, which it holds exactly
// once, is a trace id. A browser is sent there, so nothing else (no
// relative link, no javascript:) is.
func checkTraceViewerURL(tmpl string) error {
	if n := strings.Count(tmpl, TraceIDPlaceholder); n != 1 {
		return fmt.Errorf("must contain %s exactly once, got %q (%d times)", TraceIDPlaceholder, tmpl, n)
	}
	u, err := url.Parse(strings.Replace(tmpl, TraceIDPlaceholder, "4bf92f3577b34da6a3ce929d0e0e4736", 1))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http:// or https:// URL, got %q", tmpl)
	}
	return nil
}

// Server is the HTTP API of one node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	node   *node.Node
	auth   authenticator
	app    *fiber.App
	table  []route // the registered routes
	budget *budget // of request body bytes in memory

	drainOnce sync.Once
	draining  chan struct{} // closed when Shutdown starts

	streams chan struct{} // a place per open event stream

	silent silentConns // connections that have sent nothing yet

	tracer trace.Tracer // of the node's provider; nil when tracing is off

	mu       sync.Mutex
	shutdown bool         // Shutdown was called
	ln       net.Listener // the listener Serve was given
}

// New returns the API of n. It validates the tokens: an unknown role, an
// empty name or secret, a malformed "sha256:" form or a duplicate name is
// an error naming the token.
func New(cfg Config, n *node.Node) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n == nil {
		return nil, errors.New("api: New needs a node")
	}
	auth, err := newAuthenticator(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, node: n, auth: auth, budget: newBudget(int64(cfg.BodyBudget)), draining: make(chan struct{}), streams: make(chan struct{}, cfg.MaxStreams)}
	if tp := n.TracerProvider(); tp != nil {
		s.tracer = tp.Tracer(tracerScope)
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "weft",
		DisableStartupMessage: true,
		// Values from the request (params, body) outlive the handler in
		// the engine and the store.
		Immutable: true,
		// Bodies are streamed: the server reads nothing of a body but a
		// read-ahead of at most 8 KiB before the handlers run; the bodies
		// middleware reads the rest, within the route's limit and under
		// the budget, or refuses it (see the package doc). With streaming,
		// BodyLimit bounds only that read-ahead.
		StreamRequestBody: true,
		BodyLimit:         2 * max(cfg.BodyLimit, cfg.PluginBodyLimit),
		// fasthttp would otherwise read a multipart body (to temporary
		// files) before any handler ran, with no limit when streaming.
		DisablePreParseMultipartForm: true,
		// The request line and headers must fit in it (431 otherwise): a
		// search's ?q= holds up to 4096 bytes of query, which URL-escaping
		// may triple. fasthttp's default is 4096 bytes.
		ReadBufferSize: 16 << 10,
		ReadTimeout:    cfg.ReadTimeout,
		// fasthttp sets the write deadline once the handler has returned,
		// for the whole response: a ?wait= (in the handler) is not cut.
		WriteTimeout: cfg.WriteTimeout,
		IdleTimeout:  cfg.IdleTimeout,
		ErrorHandler: s.errorHandler,
		// Fiber answers a method it does not know with a bare 400 before
		// any middleware runs; knownMethods renames such a request to
		// this one, which no route has, so that it is answered (501), logged
		// and counted as any other.
		RequestMethods: append(slices.Clone(fiber.DefaultMethods), methodUnknown),
	})
	s.app.Server().Handler = knownMethods(s.app.Server().Handler)
	// fasthttp's parse errors quote the raw request, bearer token and
	// all, unless told otherwise; fiberProblem and malformed answer none
	// of them anyway. Fiber discards fasthttp's own connection-error log
	// (it would log the same messages), and it must stay discarded.
	s.app.Server().SecureErrorLogMessage = true
	s.app.Use(s.requestScope)
	s.app.Use(recover.New())
	s.app.Use(s.bodies)
	s.routes()
	return s, nil
}

// Serve serves HTTP on ln until Shutdown, and closes ln. It returns nil
// after Shutdown, also when Shutdown came first.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	err := s.app.Listener(silentListener{Listener: ln, silent: &s.silent})
	s.mu.Lock()
	down := s.shutdown
	s.mu.Unlock()
	if down && errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Shutdown makes requests waiting on ?wait= answer at once with the
// instance's current state, stops accepting connections, closes the ones
// that are idle or have sent nothing yet, and waits for the requests in
// flight until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.drainOnce.Do(func() { close(s.draining) })
	s.mu.Lock()
	s.shutdown = true
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return nil // Serve was not called; when it is, it returns at once
	}
	// fasthttp waits for connections it counts as active, which include
	// new ones that never send a request (conns.go): close those until it
	// has closed the listener and the last of them is gone.
	done := make(chan error, 1)
	go func() { done <- s.app.ShutdownWithContext(ctx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
wait:
	for {
		s.silent.closeAll()
		select {
		case err = <-done:
			break wait
		case <-tick.C:
		}
	}
	// Serve may have been between taking ln and handing it to the
	// server, which Fiber's shutdown does not see: closing ln ends it.
	_ = ln.Close()
	return err
}

// methodUnknown is what knownMethods renames a request of a method that
// Fiber does not know to: not a token a client could send (it has a space).
const methodUnknown = "WEFT UNKNOWN"

// knownMethods wraps the server's handler: a request whose method Fiber
// does not know goes on under methodUnknown, its own method kept in
// Locals (localUnknownMethod) for the bodies middleware's 501 and the
// access log.
func knownMethods(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if m := ctx.Method(); !slices.Contains(fiber.DefaultMethods, string(m)) {
			ctx.SetUserValue(localUnknownMethod, string(m))
			ctx.Request.Header.SetMethod(methodUnknown)
		}
		next(ctx)
	}
}

// quoteMethod quotes a method a client sent, cut short: fasthttp takes a
// method token as long as its header buffer.
func quoteMethod(m string) string {
	const most = 32
	if len(m) > most {
		return strconv.Quote(m[:most]) + "…"
	}
	return strconv.Quote(m)
}

// Locals keys.
const (
	localUnknownMethod = "weft.unknown_method" // the method of a request renamed to methodUnknown
	localRequestID     = "weft.request_id"
	localLogger        = "weft.logger"
	localRoute         = "weft.route"
	localCred          = "weft.credential"
	localParams        = "weft.params" // the decoded path parameters, by name
)

// requestScope gives the request its id, logger and span (when tracing
// is on), answers errors as problems, and writes the access log, the HTTP
// metrics and the span.
func (s *Server) requestScope(c *fiber.Ctx) error {
	start := time.Now()
	id := requestID(c)
	log := s.log.With("request_id", id)
	c.Locals(localLogger, log)
	span := s.startSpan(c)
	err := c.Next()
	if err != nil {
		if herr := s.errorHandler(c, err); herr != nil {
			log.Error("writing error response", "err", herr)
		}
	}
	log = s.logger(c) // with the token's name, once authorised
	status := c.Response().StatusCode()
	route, _ := c.Locals(localRoute).(string)
	if route == "" {
		route = "unmatched"
	}
	d := time.Since(start)
	// Body() would read a streamed answer (a backup) whole into memory.
	bytesOut := c.Response().Header.ContentLength()
	if !c.Response().IsBodyStream() {
		bytesOut = len(c.Response().Body())
	}
	method, methodLabel := c.Method(), c.Method()
	if m, ok := c.Locals(localUnknownMethod).(string); ok {
		// Any token a client sends: bounded in the log, one label value.
		method, methodLabel = quoteMethod(m), "other"
	}
	s.node.ObserveHTTPRequest(methodLabel, route, status, d)
	// After the access log: its line carries the span's ids.
	defer endSpan(span, c, route, status)
	// Successes at debug: at info they buried the plugins' own log lines
	// (and a waiting client's long polls) under one line per request.
	level := slog.LevelDebug
	switch {
	case status >= 500:
		level = slog.LevelError
	case status >= 400:
		level = slog.LevelInfo
	}
	log.Log(c.UserContext(), level, "http request",
		"method", method, "path", c.Path(), "route", route, "status", status,
		"duration", d, "bytes_in", c.Locals(localBodyBytes), "bytes_out", bytesOut,
		"remote", c.IP())
	return nil
}

// requestID returns the request's id, setting it and the response header
// the first time.
func requestID(c *fiber.Ctx) string {
	if id, ok := c.Locals(localRequestID).(string); ok {
		return id
	}
	id := c.Get(fiber.HeaderXRequestID)
	if !saneRequestID(id) {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Locals(localRequestID, id)
	c.Set(fiber.HeaderXRequestID, id)
	return id
}

// saneRequestID accepts ids of 1 to 128 printable ASCII characters, so a
// client cannot inject line breaks or megabytes into the logs.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// logger returns the request's logger.
func (s *Server) logger(c *fiber.Ctx) *slog.Logger {
	if l, ok := c.Locals(localLogger).(*slog.Logger); ok {
		return l
	}
	return s.log.With("request_id", requestID(c))
}

// metricsHandler serves the Gatherer in Prometheus' text format.
func (s *Server) metricsHandler() fiber.Handler {
	if s.cfg.Gatherer == nil {
		return func(*fiber.Ctx) error {
			return problemf(fiber.StatusNotFound, "not-found", "metrics are not enabled on this host")
		}
	}
	return adaptor.HTTPHandler(promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)}))
}
