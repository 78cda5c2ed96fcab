package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins"
)

// route is one registered route.
type route struct {
	method, path string
	perm         perm
	// pluginBody routes take PluginBodyLimit instead of BodyLimit.
	pluginBody bool
	// notAPI routes serve the console's files, not the API: the OpenAPI
	// document leaves them out.
	notAPI  bool
	handler fiber.Handler
}

// takesBody reports whether the route's handler reads a request body: the
// PUT and POST routes do. The others ignore one, and the bodies middleware
// discards it without holding any of it.
func (r route) takesBody() bool {
	return r.method == fiber.MethodPut || r.method == fiber.MethodPost
}

// routeTable lists every route the server registers; the OpenAPI test
// checks the document against the registered routes.
func (s *Server) routeTable() []route {
	return []route{
		{method: fiber.MethodGet, path: "/healthz", perm: permPublic, handler: s.healthz},
		{method: fiber.MethodGet, path: "/readyz", perm: permPublic, handler: s.readyz},
		{method: fiber.MethodGet, path: "/metrics", perm: permRead, handler: s.metricsHandler()},
		{method: fiber.MethodGet, path: "/v1/openapi.json", perm: permPublic, handler: s.openAPI},

		{method: fiber.MethodGet, path: "/v1/plugins", perm: permRead, handler: s.listPlugins},
		{method: fiber.MethodPut, path: "/v1/plugins/:name", perm: permAdmin, pluginBody: true, handler: s.putPlugin},
		{method: fiber.MethodGet, path: "/v1/plugins/:name", perm: permRead, handler: s.getPlugin},
		{method: fiber.MethodDelete, path: "/v1/plugins/:name", perm: permAdmin, handler: s.deletePlugin},
		{method: fiber.MethodGet, path: "/v1/plugins/:name/grants", perm: permRead, handler: s.getGrants},
		{method: fiber.MethodPut, path: "/v1/plugins/:name/grants", perm: permAdmin, handler: s.putGrants},
		{method: fiber.MethodDelete, path: "/v1/plugins/:name/grants", perm: permAdmin, handler: s.deleteGrants},
		{method: fiber.MethodPost, path: "/v1/plugins/:name/shadow", perm: permAdmin, pluginBody: true, handler: s.shadowPlugin},
		{method: fiber.MethodGet, path: "/v1/plugins/:name/versions/:version/module", perm: permAdmin, handler: s.pluginModule},

		{method: fiber.MethodGet, path: "/v1/workflows", perm: permRead, handler: s.listWorkflows},
		{method: fiber.MethodPut, path: "/v1/workflows/:name", perm: permAdmin, handler: s.putWorkflow},
		{method: fiber.MethodGet, path: "/v1/workflows/:name", perm: permRead, handler: s.getWorkflow},
		{method: fiber.MethodDelete, path: "/v1/workflows/:name", perm: permAdmin, handler: s.deleteWorkflow},
		{method: fiber.MethodPost, path: "/v1/workflows/:name/instances", perm: permOperate, handler: s.startInstance},
		{method: fiber.MethodPost, path: "/v1/workflows/:name/pause", perm: permOperate, handler: s.pauseWorkflow},
		{method: fiber.MethodPost, path: "/v1/workflows/:name/resume", perm: permOperate, handler: s.resumeWorkflow},
		{method: fiber.MethodGet, path: "/v1/workflow-pauses", perm: permRead, handler: s.listWorkflowPauses},

		{method: fiber.MethodGet, path: "/v1/schedules", perm: permRead, handler: s.listSchedules},
		{method: fiber.MethodPut, path: "/v1/schedules/:id", perm: permAdmin, handler: s.putSchedule},
		{method: fiber.MethodGet, path: "/v1/schedules/:id", perm: permRead, handler: s.getSchedule},
		{method: fiber.MethodDelete, path: "/v1/schedules/:id", perm: permAdmin, handler: s.deleteSchedule},
		{method: fiber.MethodPost, path: "/v1/schedules/:id/pause", perm: permOperate, handler: s.pauseSchedule},
		{method: fiber.MethodPost, path: "/v1/schedules/:id/unpause", perm: permOperate, handler: s.unpauseSchedule},
		{method: fiber.MethodPost, path: "/v1/schedules/:id/trigger", perm: permOperate, handler: s.triggerSchedule},
		{method: fiber.MethodPost, path: "/v1/schedules/:id/backfill", perm: permOperate, handler: s.backfillSchedule},
		{method: fiber.MethodGet, path: "/v1/schedules/:id/events", perm: permRead, handler: s.scheduleEvents},

		{method: fiber.MethodGet, path: "/v1/batches", perm: permRead, handler: s.listBatches},
		{method: fiber.MethodPost, path: "/v1/batches", perm: permOperate, handler: s.startBatch},
		{method: fiber.MethodGet, path: "/v1/batches/:id", perm: permRead, handler: s.getBatch},
		{method: fiber.MethodGet, path: "/v1/batches/:id/items", perm: permRead, handler: s.batchItems},
		{method: fiber.MethodPost, path: "/v1/batches/:id/confirm", perm: permOperate, handler: s.confirmBatch},
		{method: fiber.MethodPost, path: "/v1/batches/:id/cancel", perm: permOperate, handler: s.cancelBatch},

		{method: fiber.MethodGet, path: "/v1/concurrency", perm: permRead, handler: s.listConcurrency},
		{method: fiber.MethodGet, path: "/v1/concurrency/:workflow", perm: permRead, handler: s.getConcurrencyKey},
		{method: fiber.MethodGet, path: "/v1/step-concurrency", perm: permRead, handler: s.getStepConcurrencyKey},
		{method: fiber.MethodGet, path: "/v1/rate-limits", perm: permRead, handler: s.listRateLimits},

		{method: fiber.MethodGet, path: "/v1/whoami", perm: permRead, handler: s.whoami},
		{method: fiber.MethodGet, path: "/v1/counts/instances", perm: permRead, handler: s.countInstances},
		{method: fiber.MethodGet, path: "/v1/streams/instances", perm: permRead, handler: s.streamInstances},

		{method: fiber.MethodGet, path: "/v1/instances", perm: permRead, handler: s.listInstances},
		{method: fiber.MethodGet, path: "/v1/search-attributes", perm: permRead, handler: s.listSearchAttributes},
		{method: fiber.MethodPost, path: "/v1/instances/cancel", perm: permOperate, handler: s.cancelInstances},
		{method: fiber.MethodGet, path: "/v1/instances/:id", perm: permRead, handler: s.getInstance},
		{method: fiber.MethodDelete, path: "/v1/instances/:id", perm: permOperate, handler: s.deleteInstance},
		{method: fiber.MethodGet, path: "/v1/instances/:id/history", perm: permRead, handler: s.history},
		{method: fiber.MethodGet, path: "/v1/instances/:id/logs", perm: permRead, handler: s.instanceLogs},
		{method: fiber.MethodPost, path: "/v1/instances/:id/cancel", perm: permOperate, handler: s.cancelInstance},
		{method: fiber.MethodPost, path: "/v1/instances/:id/retry", perm: permOperate, handler: s.retryInstance},
		{method: fiber.MethodPost, path: "/v1/instances/:id/pause", perm: permOperate, handler: s.pauseInstance},
		{method: fiber.MethodPost, path: "/v1/instances/:id/resume", perm: permOperate, handler: s.resumeInstance},
		{method: fiber.MethodGet, path: "/v1/instances/:id/reset-points", perm: permRead, handler: s.resetPoints},
		{method: fiber.MethodPost, path: "/v1/instances/:id/reset", perm: permOperate, handler: s.resetInstance},
		{method: fiber.MethodPost, path: "/v1/instances/:id/migrate", perm: permAdmin, handler: s.migrateInstance},
		{method: fiber.MethodGet, path: "/v1/instances/:id/stream", perm: permRead, handler: s.streamInstance},
		{method: fiber.MethodGet, path: "/v1/instances/:id/state", perm: permRead, handler: s.exportState},
		{method: fiber.MethodPut, path: "/v1/instances/:id/state", perm: permOperate, handler: s.importState},
		{method: fiber.MethodGet, path: "/v1/instances/:id/tapes", perm: permRead, handler: s.listTapes},
		{method: fiber.MethodGet, path: "/v1/instances/:id/tapes/:attempt", perm: permAdmin, handler: s.getTape},
		{method: fiber.MethodPost, path: "/v1/instances/:id/tapes/:attempt/replay", perm: permAdmin, pluginBody: true, handler: s.replayTape},

		{method: fiber.MethodPost, path: "/v1/events", perm: permOperate, handler: s.sendEvent},
		{method: fiber.MethodGet, path: "/v1/events/dead", perm: permRead, handler: s.deadLetters},
		{method: fiber.MethodGet, path: "/v1/events/queued", perm: permRead, handler: s.queuedStimuli},

		{method: fiber.MethodPost, path: "/v1/admin/refresh", perm: permAdmin, handler: s.refresh},
		{method: fiber.MethodGet, path: "/v1/admin/backup", perm: permAdmin, handler: s.backup},

		{method: fiber.MethodGet, path: "/", perm: permPublic, notAPI: true, handler: s.consoleIndex},
		{method: fiber.MethodGet, path: "/assets/*", perm: permPublic, notAPI: true, handler: s.consoleAsset},
	}
}

// routes registers the table. A GET route answers HEAD too (probes).
// A request's body is checked before its route runs, by the bodies
// middleware: its size against the route's limit, its Content-Encoding,
// and the request's token. Its path parameters are decoded before its
// handler runs (pathParams).
func (s *Server) routes() {
	s.table = s.routeTable()
	for _, r := range s.table {
		handlers := []fiber.Handler{enter(r.path), s.guard, s.authorize(r.perm), pathParams, r.handler}
		s.app.Add(r.method, r.path, handlers...)
		if r.method == fiber.MethodGet {
			s.app.Add(fiber.MethodHead, r.path, handlers...)
		}
	}
}

// enter marks the request with its route pattern, for the access log and
// the metrics.
func enter(pattern string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Locals(localRoute, pattern)
		return c.Next()
	}
}

// pathParams percent-decodes the route's path parameters for param. Fiber
// matches the route on the path as sent and hands its parameters over as
// sent, still escaped. They are decoded here, after the match, and not by
// Fiber's UnescapePath, which decodes the whole path before matching: an
// id's "/" sent as %2F would then split the path and match another route
// (the instance "x/history" would read the history of "x"), and it reads
// "+" as a space, which only a query means.
//
// A parameter that is not valid percent-encoding, or not UTF-8 once
// decoded (what no JSON body can carry), is a 400 naming it; so is an id
// that a start refuses (weft.CheckID), with the same message.
func pathParams(c *fiber.Ctx) error {
	names := c.Route().Params
	if len(names) == 0 {
		return c.Next()
	}
	vals := make(map[string]string, len(names))
	for _, name := range names {
		raw := c.Params(name)
		v, err := url.PathUnescape(raw)
		if err != nil {
			return invalidField(name, "malformed percent-encoding in the path: %q", raw)
		}
		if !utf8.ValidString(v) {
			return invalidField(name, "not UTF-8 once percent-decoded: %q", raw)
		}
		if name == "id" {
			if err := weft.CheckID("id", v); err != nil {
				return invalidField("id", "%s", clean(err))
			}
		}
		vals[name] = v
	}
	c.Locals(localParams, vals)
	return c.Next()
}

// param returns the request's path parameter name, percent-decoded by
// pathParams. Handlers read their parameters with it, never with
// c.Params, which answers them still escaped.
func param(c *fiber.Ctx, name string) string {
	vals, _ := c.Locals(localParams).(map[string]string)
	return vals[name]
}

// guard protects a host without tokens, which listens on loopback only,
// from the browsers on the same machine: a request must name a loopback
// host (no DNS rebinding), and a request a web page sent from elsewhere
// (Origin or Sec-Fetch-Site says so) is refused. With tokens, a browser
// cannot send one on its own, so there is nothing to guard. Nor does a
// plugin's request (plugins.OutboundHeader), which the runtime keeps from
// this host's own listener but which may come through a proxy.
func (s *Server) guard(c *fiber.Ctx) error {
	if len(s.auth.creds) > 0 {
		return c.Next()
	}
	if c.Get(plugins.OutboundHeader) != "" {
		return problemf(fiber.StatusForbidden, "forbidden", "this host has no tokens and refuses requests that plugins send")
	}
	if !loopbackHost(c.Hostname()) {
		return problemf(fiber.StatusForbidden, "forbidden", "this host has no tokens and answers only requests addressed to a loopback host, not %q", c.Hostname())
	}
	if origin := c.Get(fiber.HeaderOrigin); origin != "" && origin != "null" {
		if u, err := url.Parse(origin); err != nil || !loopbackHost(u.Host) {
			return problemf(fiber.StatusForbidden, "forbidden", "this host has no tokens and refuses requests from web pages of %q", origin)
		}
	} else if c.Get("Sec-Fetch-Site") == "cross-site" || origin == "null" {
		return problemf(fiber.StatusForbidden, "forbidden", "this host has no tokens and refuses cross-site requests")
	}
	return c.Next()
}

// loopbackHost reports whether host (with or without a port) names this
// machine: localhost, or a loopback address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allowed returns the methods registered for a path, for the Allow header
// of a 405.
func (s *Server) allowed(path string) string {
	var methods []string
	for _, r := range s.table {
		if matchPattern(r.path, path) && !slices.Contains(methods, r.method) {
			methods = append(methods, r.method)
		}
	}
	return strings.Join(methods, ", ")
}

// matchPattern matches a path against a Fiber pattern of literal and :param
// segments, and a final * that matches the rest.
func matchPattern(pattern, path string) bool {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	if n := len(ps) - 1; ps[n] == "*" && len(xs) > n {
		ps, xs = ps[:n], xs[:n]
	}
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if !strings.HasPrefix(ps[i], ":") && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// requireType refuses (415) a request whose Content-Type is not one of
// types. An empty body without a Content-Type passes when optional.
//
// It and every handler read the body raw, as the bodies middleware left
// it: c.BodyRaw() (a copy, which may outlive the handler) or
// c.Request().Body() (only within the handler), never c.Body(), which
// inflates by the Content-Encoding header (see the package doc).
func requireType(c *fiber.Ctx, optional bool, types ...string) error {
	ct := c.Get(fiber.HeaderContentType)
	if ct == "" && optional && len(c.Request().Body()) == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(types, strings.ToLower(mt)) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return problemf(fiber.StatusUnsupportedMediaType, "unsupported-media-type", "Content-Type %s is not accepted here; send %s", ct, strings.Join(types, " or "))
}

// decodeJSON decodes the body into v, refusing unknown fields and trailing
// data. An empty body leaves v as it is. Errors are 400 problems that say
// where the body is wrong.
func decodeJSON(c *fiber.Ctx, v any) error {
	if err := requireType(c, true, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	// The raw body, not a copy: decoding copies what v keeps of it
	// (strings, json.RawMessage).
	body := c.Request().Body()
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return invalidField("$", "unexpected data after the JSON document")
		}
		// Bytes that are not UTF-8 outside strings are syntax errors;
		// inside them the decoder takes them.
		if p := checkUTF8(body); p != nil {
			return p
		}
		return nil
	}
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return invalidField("$", "malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		path := te.Field
		if path == "" {
			path = "$"
		}
		return invalidField(path, "expected %s, got JSON %s", te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidField("$", "the JSON document ends early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidField(field, "unknown field")
	}
	return invalidField("$", "%v", err)
}

// checkUTF8 refuses a body that is not UTF-8 (a 400 naming the byte
// offset of the first invalid sequence). encoding/json would take it,
// replacing the invalid bytes in the strings it decodes but not in the
// json.RawMessage values it keeps (an instance's input, an event's
// payload), which the host would store and serve back as sent: not JSON
// (RFC 8259 §8.1).
func checkUTF8(body []byte) *apiv1.Problem {
	if utf8.Valid(body) {
		return nil
	}
	off := 0
	for off < len(body) {
		r, size := utf8.DecodeRune(body[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	return invalidField("$", "invalid UTF-8 at byte %d (0x%02x): a JSON body must be UTF-8", off, body[off])
}

// newPage returns a list answer: items, never null, and the cursor of the
// next page.
func newPage[T any](items []T, next string) apiv1.Page[T] {
	if items == nil {
		items = []T{}
	}
	return apiv1.Page[T]{Items: items, NextCursor: next}
}

// limitParam reads ?limit=, 1 to weft.MaxListLimit, default
// weft.DefaultListLimit.
func limitParam(c *fiber.Ctx) (int, error) {
	return intParam(c, "limit", weft.DefaultListLimit, 1, weft.MaxListLimit)
}

func intParam(c *fiber.Ctx, name string, def, lo, hi int) (int, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, invalidField(name, "must be an integer from %d to %d, got %q", lo, hi, v)
	}
	return n, nil
}

// created answers 201 when created, else 200, with v as JSON.
func created(c *fiber.Ctx, isNew bool, v any) error {
	if isNew {
		c.Status(fiber.StatusCreated)
	} else {
		c.Status(fiber.StatusOK)
	}
	return c.JSON(v)
}

func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok"})
}

func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, readyTimeout)
	defer cancel()
	if err := s.node.Ready(ctx); err != nil {
		return problemf(fiber.StatusServiceUnavailable, "not-ready", "%s", clean(err))
	}
	return c.JSON(fiber.Map{"status": "ready"})
}

func (s *Server) openAPI(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openAPIDocument)
}

// notFoundf returns a 404 problem.
func notFoundf(format string, args ...any) *apiv1.Problem {
	return problemf(fiber.StatusNotFound, "not-found", format, args...)
}

// conflictf returns a 409 problem.
func conflictf(format string, args ...any) *apiv1.Problem {
	return problemf(fiber.StatusConflict, "conflict", format, args...)
}
