package plugins

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
	"github.com/weftworks/weft/plugins/tape"
)

// response is the last response of a call, kept for the guest to read.
type response struct {
	header []byte // "Name: value\n" lines
	body   []byte
}

// httpState is a call's outbound HTTP: what its requests counted and the
// response the guest may read.
type httpState struct {
	requests int // guest requests, for idempotency keys
	hops     int // requests on the wire, redirects included
	records  int // records made
	last     *response
}

func hostHTTPRequest(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = abi.HostModule + "." + abi.ImportHTTPRequest
	cs := inInvoke(ctx, abi.ImportHTTPRequest)
	stopIfDone(ctx, fn)
	cs.http.last = nil
	o := cs.rt.outbound
	cfg := o.cfg

	// The arguments, checked before anything is sent.
	method := string(cs.read(mod, abi.ImportHTTPRequest, uint32(stack[0]), uint32(stack[1])))
	if method == "" {
		method = http.MethodGet
	} else if !validToken(method) {
		cs.abort("%s: method %s is not an HTTP token", fn, excerpt([]byte(method)))
	}
	rawURL := cs.read(mod, abi.ImportHTTPRequest, uint32(stack[2]), uint32(stack[3]))
	u, err := url.Parse(string(rawURL))
	switch {
	case err != nil || !u.IsAbs() || u.Host == "":
		cs.abort("%s: %s is not an absolute URL with a host", fn, excerpt(redactURL(rawURL)))
	case u.Scheme != "http" && u.Scheme != "https":
		cs.abort("%s: the URL's scheme is %q, not http or https", fn, excerpt([]byte(u.Scheme)))
	case u.User != nil:
		cs.abort("%s: the URL has user information; credentials go in a header", fn)
	case !ascii(rawURL):
		cs.abort("%s: the URL is not ASCII (percent-encode it; write an international name in punycode)", fn)
	}
	u.Host = strings.TrimSuffix(u.Host, ":") // an empty port, as NewRequest drops it
	if hn := uint32(stack[5]); int64(hn) > int64(cfg.MaxHeaderBytes) {
		cs.limit("%s: %d bytes of request headers, more than the limit of %d (plugins.http.max_header_bytes)", fn, hn, cfg.MaxHeaderBytes)
	}
	header, herr := parseHeaderLines(cs.read(mod, abi.ImportHTTPRequest, uint32(stack[4]), uint32(stack[5])), cfg.MaxHeaders)
	if herr != nil {
		if errors.Is(herr, call.ErrLimit) {
			cs.limit("%s: %v", fn, herr)
		}
		cs.abort("%s: %v", fn, herr)
	}
	if bn := uint32(stack[7]); int64(bn) > int64(cfg.MaxRequestBytes) {
		cs.limit("%s: a request body of %d bytes, more than the limit of %d (plugins.http.max_request_bytes)", fn, bn, cfg.MaxRequestBytes)
	}
	// Copied: the guest's memory may move while the request is sent (a
	// redirect sends the body again).
	body := bytes.Clone(cs.read(mod, abi.ImportHTTPRequest, uint32(stack[6]), uint32(stack[7])))
	var ask []byte // the request as a tape holds it, before the host adds headers
	if cs.tapeOn() {
		ask = cs.httpAsk(method, rawURL, header, body)
	}

	cs.http.requests++
	if header.Get("Idempotency-Key") == "" {
		header.Set("Idempotency-Key", idempotencyKey(cs.call.Info.IdempotencyKey, cs.http.requests))
	}
	if header.Get("User-Agent") == "" {
		header.Set("User-Agent", "weft-plugin/1 ("+orName(cs.call.Info.Plugin)+")")
	}
	// Set over whatever the guest set: a Weft API that receives it (through
	// a proxy the dialer cannot see, say) knows a plugin sent it.
	header.Set(OutboundHeader, orName(cs.call.Info.Plugin))
	rec := call.Request{Method: method, Host: u.Host, Path: u.EscapedPath(), Sent: int64(len(body))}
	if rec.Path == "" {
		rec.Path = "/"
	}
	if cs.play != nil {
		cs.replayHTTP(ask, rec, stack)
		return
	}

	// The guest cannot heartbeat while it waits for the answer; it is not
	// hung either, so the attempt counts as alive until the call returns
	// (a request is bounded by plugins.http.timeout).
	if cs.hb != nil {
		defer cs.hb.HostWait(cs.rt.cfg.Now)()
	}
	cs.needGrants() // for route, which checks each hop against them

	// Bounded by the attempt's deadline too: a deadline sooner than the
	// timeout stays the deadline. From the call's own context: the
	// transport's goroutines may look at it after the call.
	reqCtx, cancel := context.WithTimeout(cs.ctx, cfg.Timeout)
	defer cancel()
	h := &hops{cs: cs}
	if h.tracer = o.tracer(cs.rt.cfg.Tracer); h.tracer != nil {
		// The guest propagates a context of its own: its hops carry it
		// as the guest wrote it (abi/README.md §13, "Trace context").
		h.guestTrace = header.Get("Traceparent") != "" || header.Get("Tracestate") != ""
	}
	var rd io.Reader
	if len(body) > 0 { // none: no "Content-Length: 0" on a GET
		rd = bytes.NewReader(body)
	}
	// The URL is the one parsed above, not its String parsed once more:
	// an empty URL parses, and NewRequestWithContext still sets up the
	// body (its length, and GetBody for a redirect).
	req, err := http.NewRequestWithContext(context.WithValue(reqCtx, hopsKey{}, h), method, "", rd)
	if err != nil {
		cs.abort("%s: %v", fn, err)
	}
	req.URL, req.Host, req.Header = u, u.Host, header
	start := time.Now()
	resp, err := o.client.Do(req)
	rec.Rule = h.rule
	var got *response
	if err == nil {
		got, err = cs.readResponse(resp, cfg, &rec)
	}
	rec.Duration = time.Since(start)
	if err == nil && (resp.StatusCode < 100 || resp.StatusCode > 599) {
		// Go's client takes any three digits; the ABI promises a status.
		got, err = nil, fmt.Errorf("the server answered with status %d, which is not an HTTP status", resp.StatusCode)
	}
	if err == nil {
		rec.Status = resp.StatusCode
		if r := h.refused; r != nil {
			// Not sent: the guest reads the synthetic 429.
			rec.Error = "rate_limited"
			cs.emit(slog.LevelWarn, "http", []byte(r.note(method, rec.Host, rec.Path)))
		}
		cs.requested(rec)
		cs.http.last = got
		if cs.rec != nil {
			cs.record(tape.KindHTTP, ask, cs.httpAnswer(got), int64(resp.StatusCode))
		}
		stack[0] = uint64(uint32(resp.StatusCode))
		return
	}

	// Why there is no response: the call ended (stop it), the grants or a
	// limit refused it (stop it), or the network failed (tell the guest).
	if ctx.Err() != nil {
		rec.Error = "timeout"
		if errors.Is(context.Cause(ctx), call.ErrCancelled) || errors.Is(ctx.Err(), context.Canceled) {
			rec.Error = "cancelled"
		}
		cs.requested(rec)
		stopIfDone(ctx, fn)
	}
	var ge *call.GrantError
	var ae *grant.AddressError
	var le *limiterError
	switch {
	case errors.As(h.err, &le):
		rec.Error = "rate_limiter_failed"
		cs.requested(rec)
		cs.fail(le)
	case errors.As(h.err, &ge):
		rec.Error, rec.Rule = "not_granted", ""
		cs.requested(rec)
		cs.fail(ge)
	case errors.As(err, &ae):
		rec.Error = "not_granted"
		cs.requested(rec)
		ge := cs.denied(ae)
		// Name the hop's host (a redirect's, maybe), not only the address.
		var ue *url.Error
		if errors.As(err, &ue) {
			if hop, perr := url.Parse(ue.URL); perr == nil {
				ge.Name = hop.Scheme + "://" + hop.Host
				if !ae.Never {
					ge.Grant = "weft plugin grant " + orName(cs.call.Info.Plugin) + " --host " + ge.Name + " --private-networks"
				}
			}
		}
		cs.fail(ge)
	case errors.Is(h.err, call.ErrLimit), errors.Is(err, call.ErrLimit):
		rec.Error = "limit"
		cs.requested(rec)
		cs.fail(cmp.Or(h.err, err))
	case overHeaderBytes(err):
		rec.Error = "limit"
		cs.requested(rec)
		cs.fail(fmt.Errorf("%w: the response headers from %s are over the limit of %d bytes (plugins.http.max_header_bytes)", call.ErrLimit, excerpt([]byte(rec.Host)), cfg.MaxHeaderBytes))
	}
	code, reason := classifyHTTP(err, reqCtx)
	rec.Error = reason
	cs.requested(rec)
	cs.emit(slog.LevelWarn, "http", []byte(fmt.Sprintf("%s %s%s: no response (%s): %s", method, rec.Host, rec.Path, reason, describe(err))))
	if cs.rec != nil {
		cs.record(tape.KindHTTP, ask, []byte(reason), int64(code))
	}
	stack[0] = uint64(uint32(code))
}

// replayHTTP answers a replayed guest's request from the tape: the
// response it read when recorded, or the failure it was told of. Nothing
// is sent, no grant or rate limit is consulted, and the call's request
// record says what the tape says (without a duration).
func (cs *callState) replayHTTP(ask []byte, rec call.Request, stack []uint64) {
	e := cs.replay(tape.KindHTTP, ask)
	cs.record(tape.KindHTTP, ask, e.Answer, e.Value)
	switch {
	case e.Value >= 100 && e.Value <= 599:
		got, ok := responseOf(e.Answer)
		if !ok {
			cs.badTape(tape.KindHTTP, "a status %d without the empty line that ends the header lines", e.Value)
		}
		rec.Status, rec.Received = int(e.Value), int64(len(got.body))
		cs.requested(rec)
		cs.http.last = got
		stack[0] = uint64(uint32(e.Value))
	case e.Value < 0 && e.Value >= math.MinInt32:
		rec.Error = string(e.Answer)
		cs.requested(rec)
		cs.emit(slog.LevelWarn, "http", []byte(fmt.Sprintf("%s %s%s: no response (%s), as recorded", rec.Method, rec.Host, rec.Path, excerpt(e.Answer))))
		stack[0] = uint64(uint32(int32(e.Value)))
	default:
		cs.badTape(tape.KindHTTP, "value %d is neither a status nor an error", e.Value)
	}
}

// readResponse reads a response's head and body within the limits. A
// limit passed is an error matching call.ErrLimit; the body is closed.
func (cs *callState) readResponse(resp *http.Response, cfg HTTPConfig, rec *call.Request) (*response, error) {
	defer resp.Body.Close()
	lines := 0
	for _, vs := range resp.Header {
		lines += len(vs)
	}
	if lines > cfg.MaxHeaders {
		return nil, fmt.Errorf("%w: the response from %s has %d header lines, more than the limit of %d (plugins.http.max_headers)", call.ErrLimit, rec.Host, lines, cfg.MaxHeaders)
	}
	max := int64(cfg.MaxResponseBytes)
	if resp.ContentLength > max {
		cs.emit(slog.LevelWarn, "http", []byte(fmt.Sprintf("%s %s%s: the response body of %d bytes is over the limit of %d", rec.Method, rec.Host, rec.Path, resp.ContentLength, max)))
		return nil, fmt.Errorf("%w: the response body from %s has %d bytes, more than the limit of %d (plugins.http.max_response_bytes)", call.ErrLimit, rec.Host, resp.ContentLength, max)
	}
	body, err := readBody(resp, max)
	n := int64(len(body))
	rec.Received = n
	if err != nil {
		return nil, err
	}
	if n > max {
		cs.emit(slog.LevelWarn, "http", []byte(fmt.Sprintf("%s %s%s: the response body is over the limit of %d bytes; the rest was not read", rec.Method, rec.Host, rec.Path, max)))
		return nil, fmt.Errorf("%w: the response body from %s has more than %d bytes, the limit (plugins.http.max_response_bytes)", call.ErrLimit, rec.Host, max)
	}
	return &response{header: formatHeaderLines(resp.Header), body: body}, nil
}

// readBody reads resp's body up to one byte more than max, into a buffer
// of exactly the announced length when there is one: no empty body costs a
// bytes.Buffer's first 512 bytes.
func readBody(resp *http.Response, max int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, max+1)
	if n := resp.ContentLength; n >= 0 && n <= max {
		b := make([]byte, n, n+1) // room to look one byte past the length
		if _, err := io.ReadFull(r, b); err != nil {
			return b, err
		}
		// Read on to the end of the body, which lets the transport reuse
		// the connection. The transport never reads past the announced
		// length, so this finds nothing more.
		m, err := io.ReadFull(r, b[n:n+1])
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		b = b[:n+int64(m)]
		rest, err := io.ReadAll(r)
		return append(b, rest...), err
	}
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// fail stops the guest with err as the call's error.
func (cs *callState) fail(err error) {
	if cs.violation == nil {
		cs.violation = err
	}
	panic(err)
}

// requested hands a request's record to the call, its fields bounded
// (bounded): the first maxRecords of the call, then one record
// with the error "dropped" that says the rest were not kept.
func (cs *callState) requested(r call.Request) {
	if cs.call.Requested == nil {
		return
	}
	cs.http.records++
	switch {
	case cs.http.records <= maxRecords:
		cs.call.Requested(bounded(r))
	case cs.http.records == maxRecords+1:
		cs.call.Requested(call.Request{Error: "dropped"})
	}
}

// overHeaderBytes reports whether err is the transport's refusal of a
// response whose header lines passed MaxResponseHeaderBytes, which Go's
// HTTP/1 and HTTP/2 clients say only in words.
func overHeaderBytes(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") ||
		strings.Contains(msg, "response header list larger than advertised limit")
}

func hostHTTPResponseHeaders(ctx context.Context, mod api.Module, stack []uint64) {
	writeLast(ctx, mod, stack, abi.ImportHTTPResponseHeaders, func(r *response) []byte { return r.header })
}

func hostHTTPResponseBody(ctx context.Context, mod api.Module, stack []uint64) {
	writeLast(ctx, mod, stack, abi.ImportHTTPResponseBody, func(r *response) []byte { return r.body })
}

// writeLast writes part of the call's last response, as the sized host
// function fn: -1 when there is none.
func writeLast(ctx context.Context, mod api.Module, stack []uint64, fn string, part func(*response) []byte) {
	cs := inInvoke(ctx, fn)
	stopIfDone(ctx, abi.HostModule+"."+fn)
	var v []byte
	if cs.http.last != nil {
		v = part(cs.http.last)
	}
	cs.writeSized(mod, fn, v, cs.http.last != nil, uint32(stack[0]), uint32(stack[1]), stack)
}

func hostSecret(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = abi.HostModule + "." + abi.ImportSecret
	cs := inInvoke(ctx, abi.ImportSecret)
	stopIfDone(ctx, fn)
	name := cs.read(mod, abi.ImportSecret, uint32(stack[0]), uint32(stack[1]))
	if cs.play != nil {
		// The tape names the secret and never holds its value: a value
		// the caller gives, or a placeholder. No grant is read.
		ask := askOf(name)
		cs.replay(tape.KindSecret, ask)
		cs.record(tape.KindSecret, ask, nil, 0)
		v, ok := cs.secrets[string(name)]
		if !ok {
			v = cs.replaySecret(string(name))
			if cs.secrets == nil {
				cs.secrets = map[string]string{}
			}
			cs.secrets[string(name)] = v
		}
		cs.writeSized(mod, abi.ImportSecret, []byte(v), true, uint32(stack[2]), uint32(stack[3]), stack)
		return
	}
	cs.needGrants()
	var refs map[string]string
	if cs.grants != nil {
		refs = cs.grants.Secrets
	}
	ref, ok := "", false
	if len(name) <= grant.MaxKeyLen { // no need to hash a longer name
		ref, ok = refs[string(name)]
	}
	if !ok {
		ge := &call.GrantError{Plugin: cs.call.Info.Plugin, What: "secret", Name: excerpt(name)}
		if grant.ValidKey(string(name)) { // else no grant could name it
			ge.Grant = "weft plugin grant " + orName(cs.call.Info.Plugin) + " --secret " + string(name) + "=env:VARIABLE"
		}
		cs.fail(ge)
	}
	v, ok := cs.secrets[string(name)]
	if !ok {
		var err error
		if v, err = resolveSecret(ref); err != nil {
			cs.fail(fmt.Errorf("%w: secret %q of plugin %s: %v", call.ErrSecret, name, orName(cs.call.Info.Plugin), err))
		}
		if cs.secrets == nil {
			cs.secrets = map[string]string{}
		}
		cs.secrets[string(name)] = v
	}
	if cs.rec != nil {
		cs.record(tape.KindSecret, askOf(name), nil, 0) // the name only, never the value
	}
	cs.writeSized(mod, abi.ImportSecret, []byte(v), true, uint32(stack[2]), uint32(stack[3]), stack)
}

// resolveSecret reads the value a reference names on this node. Its errors
// never quote the value.
func resolveSecret(ref string) (string, error) {
	r, err := grant.ParseRef(ref)
	if err != nil {
		return "", err
	}
	switch r.Kind {
	case grant.RefEnv:
		v, ok := os.LookupEnv(r.Name)
		if !ok {
			return "", fmt.Errorf("%s: the variable is not set on this node", r)
		}
		return v, nil
	default:
		b, err := os.ReadFile(r.Name)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("%s: %v", r, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
}

// idempotencyKey derives the Idempotency-Key of a call's nth request from
// the call's key: stable across attempts, distinct between requests, and
// opaque (the call's key names the instance and step).
func idempotencyKey(callKey string, n int) string {
	sum := sha256.Sum256([]byte(callKey + "\x00" + strconv.Itoa(n)))
	return hex.EncodeToString(sum[:16])
}

// hostSetHeaders are the headers the host sets: a guest that sets one
// breaks the ABI.
func hostSetHeader(canonical string) bool {
	switch canonical {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer":
		return true
	}
	return strings.HasPrefix(canonical, "Proxy-")
}

// parseHeaderLines parses "Name: value" lines ended by "\n" (a "\r"
// before it is dropped; the last may be unterminated).
func parseHeaderLines(b []byte, maxLines int) (http.Header, error) {
	h := http.Header{}
	line := 0
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte{'\n'})
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(l) == 0 {
			continue
		}
		line++
		if line > maxLines {
			return nil, fmt.Errorf("%w: more than %d request header lines (plugins.http.max_headers)", call.ErrLimit, maxLines)
		}
		name, value, ok := bytes.Cut(l, []byte{':'})
		if !ok || !validToken(string(name)) {
			return nil, fmt.Errorf("header line %d %s is not \"Name: value\"", line, excerpt(l))
		}
		value = bytes.Trim(value, " \t")
		if i := bytes.IndexFunc(value, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }); i >= 0 {
			// Never the value: it may be a credential.
			return nil, fmt.Errorf("header line %d: the value of %s has the control character %q at %d", line, name, value[i], i)
		}
		key := http.CanonicalHeaderKey(string(name))
		if hostSetHeader(key) {
			return nil, fmt.Errorf("header line %d: %s is set by the host", line, key)
		}
		h[key] = append(h[key], string(value))
	}
	return h, nil
}

// formatHeaderLines writes h as "Name: value\n" lines, sorted by name.
func formatHeaderLines(h http.Header) []byte {
	var b []byte
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, '\n')
		}
	}
	return b
}

// validToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// classifyHTTP says why a request got no response, as the guest is told.
func classifyHTTP(err error, reqCtx context.Context) (abi.HTTPError, string) {
	var ne net.Error
	var dns *net.DNSError
	var op *net.OpError
	var cve *tls.CertificateVerificationError
	var uae x509.UnknownAuthorityError
	var hne x509.HostnameError
	var cie x509.CertificateInvalidError
	var rhe tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case reqCtx.Err() != nil, errors.As(err, &ne) && ne.Timeout():
		return abi.HTTPTimeout, "timeout"
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &hne), errors.As(err, &cie), errors.As(err, &rhe), errors.As(err, &alert):
		return abi.HTTPTLS, "tls"
	case errors.Is(err, errTooManyRedirects):
		return abi.HTTPBadResponse, "bad_response"
	case errors.As(err, &dns), errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return abi.HTTPUnreachable, "unreachable"
	}
	return abi.HTTPBadResponse, "bad_response"
}

// describe returns err's message without the URL the client puts in front
// of it, which may carry a query.
func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// redactURL drops a URL's query and user information, for messages.
func redactURL(raw []byte) []byte {
	s := string(raw)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "@"); i >= 0 {
		if j := strings.Index(s, "://"); j >= 0 && j < i {
			s = s[:j+3] + s[i+1:]
		}
	}
	return []byte(s)
}
