package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/grant"
)

// problemTypePrefix prefixes the slug of every problem type.
const problemTypePrefix = "urn:weft:problem:"

// problemf returns a problem of status with the type slug and a formatted
// detail.
func problemf(status int, slug, format string, args ...any) *apiv1.Problem {
	return &apiv1.Problem{Type: problemTypePrefix + slug, Title: http.StatusText(status), Status: status, Detail: fmt.Sprintf(format, args...)}
}

// invalidField returns a 400 problem about one request field.
func invalidField(path, format string, args ...any) *apiv1.Problem {
	msg := fmt.Sprintf(format, args...)
	p := problemf(fiber.StatusBadRequest, "invalid-request", "%s: %s", path, msg)
	p.Errors = []apiv1.FieldError{{Path: path, Message: msg}}
	return p
}

// invalidQuery returns the 400 problem of a query (?q=) that does not
// parse or type: its detail is the error's text, its one field error the
// parameter q with what is wrong, and its position and token say where,
// for a console or a CLI to point at.
func invalidQuery(err queryError) *apiv1.Problem {
	pos, token, msg := err.Located()
	p := problemf(fiber.StatusBadRequest, "invalid-query", "%s", err.Error())
	p.Errors = []apiv1.FieldError{{Path: "q", Message: msg}}
	p.Position, p.Token = &pos, token
	return p
}

// unprocessable returns a 422 problem listing errs.
func unprocessable(detail string, errs ...apiv1.FieldError) *apiv1.Problem {
	p := problemf(fiber.StatusUnprocessableEntity, "validation", "%s", detail)
	p.Errors = errs
	return p
}

// problemFor maps an error from the node, engine or store to a problem.
// Errors it cannot classify are 500s whose detail does not leak internals;
// the log line (with the request id) has the error.
func problemFor(err error) (p *apiv1.Problem, internal bool) {
	var (
		prob *apiv1.Problem
		fe   *fiber.Error
		dve  *weft.DefinitionError
		sce  *weft.ScheduleError
		bte  *weft.BatchError
		pve  *plugins.ValidationError
		iue  *weft.InUseError
		gce  *weft.GrantsConflictError
	)
	switch {
	case errors.As(err, &prob):
		return prob, false
	case errors.As(err, &fe):
		return fiberProblem(fe), false
	case errors.As(err, &dve):
		p := unprocessable(fmt.Sprintf("the workflow definition has %d problem(s)", len(dve.Problems)))
		for _, pr := range dve.Problems {
			p.Errors = append(p.Errors, apiv1.FieldError{Path: pr.Path, Message: pr.Message, Line: pr.Line, Column: pr.Column})
		}
		return p, false
	case errors.As(err, &sce):
		return unprocessable(fmt.Sprintf("the schedule document has %d problem(s)", len(sce.Problems)), problemFields(sce.Problems)...), false
	case errors.As(err, &bte):
		return unprocessable(fmt.Sprintf("the batch document has %d problem(s)", len(bte.Problems)), problemFields(bte.Problems)...), false
	case errors.As(err, &pve):
		p := unprocessable(fmt.Sprintf("the plugin module was refused for %d reason(s)", len(pve.Problems)))
		for _, pr := range pve.Problems {
			p.Errors = append(p.Errors, apiv1.FieldError{Path: "module", Message: pr})
		}
		return p, false
	case errors.As(err, &iue):
		p := problemf(fiber.StatusConflict, "in-use", "%s", strings.TrimPrefix(err.Error(), "store: "))
		p.Instances, p.Workflows = iue.Instances, iue.Workflows
		return p, false
	case errors.Is(err, grant.ErrInvalid):
		return unprocessable(clean(err), grantFieldError(err)), false
	case errors.Is(err, node.ErrInvalidName):
		return invalidField("name", "%s", strings.TrimPrefix(err.Error(), "node: ")), false
	case errors.Is(err, node.ErrRefreshDisabled):
		return problemf(fiber.StatusConflict, "refresh-disabled", "%s", err), false
	case errors.Is(err, node.ErrBackupUnsupported):
		return problemf(fiber.StatusConflict, "backup-unsupported", "%s", clean(err)), false
	case errors.Is(err, weft.ErrNotFound):
		return problemf(fiber.StatusNotFound, "not-found", "%s", clean(err)), false
	case errors.Is(err, weft.ErrInvalid):
		return problemf(fiber.StatusBadRequest, "invalid-request", "%s", clean(err)), false
	case errors.As(err, &gce):
		return problemf(fiber.StatusPreconditionFailed, "precondition-failed",
			"the grants of plugin %s are at revision %d, not %d (If-Match): read them again and redo the change", gce.Plugin, gce.Stored, gce.Want), false
	case errors.Is(err, weft.ErrExists), errors.Is(err, weft.ErrConflict), errors.Is(err, weft.ErrFenced):
		return problemf(fiber.StatusConflict, "conflict", "%s", clean(err)), false
	case errors.Is(err, lock.ErrTransient), errors.Is(err, weft.ErrClosed), errors.Is(err, weft.ErrUnavailable),
		errors.Is(err, plugins.ErrClosed), errors.As(err, new(*plugins.BudgetError)):
		return problemf(fiber.StatusServiceUnavailable, "unavailable", "the host cannot serve this now: %s", clean(err)), false
	case errors.Is(err, context.DeadlineExceeded):
		return problemf(fiber.StatusServiceUnavailable, "busy", "the host did not finish in time (an instance lock may be held by a long step): %s", clean(err)), false
	}
	return problemf(fiber.StatusInternalServerError, "internal", "internal error; the host's log has it under this request_id"), true
}

// clean drops the package prefixes that the layers below put on errors.
func clean(err error) string {
	s := err.Error()
	for _, p := range []string{"engine: ", "store: ", "node: ", "embedded: ", "redisstore: "} {
		var b strings.Builder
		for {
			i := strings.Index(s, p)
			if i < 0 {
				break
			}
			// Only where an error's text begins: at the start or after
			// the ": " of a wrap ("store: " inside "redisstore: ", or
			// after "the ", stays).
			if i > 0 && !strings.HasSuffix(s[:i], ": ") {
				b.WriteString(s[:i+len(p)])
			} else {
				b.WriteString(s[:i])
			}
			s = s[i+len(p):]
		}
		b.WriteString(s)
		s = b.String()
	}
	return s
}

// fiberProblem maps Fiber's own errors: unknown route, wrong method, body
// too large, and what the server answers before any handler runs
// (malformed requests, timeouts, oversized headers). Its details are
// fixed: a fiber.Error's message may be fasthttp's parse error, which
// quotes the raw request, Authorization header and all, so no part of
// fe.Message reaches the answer.
func fiberProblem(fe *fiber.Error) *apiv1.Problem {
	switch fe.Code {
	case fiber.StatusBadRequest:
		return malformed(fe.Message, "unparsable request")
	case fiber.StatusNotFound:
		return problemf(fe.Code, "not-found", "no such route")
	case fiber.StatusMethodNotAllowed:
		return problemf(fe.Code, "method-not-allowed", "the route exists but not with this method")
	case fiber.StatusRequestEntityTooLarge:
		return problemf(fe.Code, "too-large", "the request body is larger than the server accepts")
	case fiber.StatusRequestTimeout:
		return problemf(fe.Code, "request-timeout", "the request did not arrive in time")
	case fiber.StatusRequestHeaderFieldsTooLarge:
		return problemf(fe.Code, "headers-too-large", "the request's headers are larger than the server accepts")
	}
	text := http.StatusText(fe.Code)
	slug := strings.ToLower(strings.ReplaceAll(text, " ", "-"))
	if slug == "" {
		slug, text = "error", "error"
	}
	return problemf(fe.Code, slug, "the request failed: %s", strings.ToLower(text))
}

// malformed returns the 400 problem of a request that the server could not
// parse, msg being the parser's message (fasthttp's). The detail is
// "malformed request: " and a fixed phrase for the kind of thing that was
// malformed (or def, for a kind not recognised), never any of msg: the
// parser's messages quote the raw request, the Authorization header
// included. The kind is chosen from the parser's own words, before the
// first double quote (where fasthttp starts quoting the request).
func malformed(msg, def string) *apiv1.Problem {
	own, _, _ := strings.Cut(msg, `"`)
	own, _, _ = strings.Cut(own, ". Buffer size=")
	kind := def
	switch {
	case strings.Contains(own, "trailer"):
		kind = "bad trailer"
	case strings.Contains(own, "chunk"), strings.Contains(own, "hex number"):
		kind = "bad chunked encoding"
	case strings.Contains(own, "Content-Length"):
		kind = "bad Content-Length"
	case strings.Contains(own, "request method"), strings.Contains(own, "requestURI"), strings.Contains(own, "first line"):
		kind = "bad request line"
	case strings.Contains(own, "reading request headers"):
		kind = "bad header"
	case strings.Contains(own, "unexpected EOF"):
		kind = "the body ended early"
	}
	return problemf(fiber.StatusBadRequest, "malformed-request", "malformed request: %s", kind)
}

// errorHandler writes err as a problem. It is Fiber's ErrorHandler, so it
// also answers what fails before routing (a body over the server's limit).
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	p, internal := problemFor(err)
	cp := *p // p may be shared (a returned *apiv1.Problem); the request id is per answer
	cp.RequestID = requestID(c)
	if internal {
		s.logger(c).Error("request failed", "method", c.Method(), "path", c.Path(), "err", err)
	}
	if cp.Status == fiber.StatusUnauthorized {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="weft"`)
	}
	if cp.Status == fiber.StatusMethodNotAllowed {
		if allow := s.allowed(c.Path()); allow != "" {
			c.Set(fiber.HeaderAllow, allow)
		}
	}
	body, merr := json.Marshal(&cp)
	if merr != nil {
		return merr
	}
	c.Status(cp.Status)
	c.Set(fiber.HeaderContentType, apiv1.ProblemContentType)
	return c.Send(body)
}
