package sdk

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/weftworks/weft/abi"
)

// Outbound HTTP (abi/README.md §13). A plugin reaches only the hosts an
// operator granted it (weft plugin grant NAME --host PATTERN); the host
// makes the request, follows redirects, and adds a User-Agent and an
// Idempotency-Key unless the request sets them. The API follows net/http's
// names, which a plugin cannot use: WASI gives it no sockets.

// Header is the header of a request or a response: canonical names
// (CanonicalHeaderKey) to their values, as in net/http.
type Header map[string][]string

// Add adds value to the values of the header key.
func (h Header) Add(key, value string) {
	k := CanonicalHeaderKey(key)
	h[k] = append(h[k], value)
}

// Set replaces the values of the header key with value.
func (h Header) Set(key, value string) { h[CanonicalHeaderKey(key)] = []string{value} }

// Get returns the first value of the header key, or "" when it has none.
func (h Header) Get(key string) string {
	if v := h[CanonicalHeaderKey(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns the values of the header key. The slice is the header's
// own, not a copy.
func (h Header) Values(key string) []string { return h[CanonicalHeaderKey(key)] }

// Del removes the header key.
func (h Header) Del(key string) { delete(h, CanonicalHeaderKey(key)) }

// CanonicalHeaderKey returns the canonical form of a header name: the
// first letter and every letter after a hyphen upper case, the others
// lower case ("content-type" is "Content-Type"). A name that is not an
// HTTP token is returned unchanged, as net/textproto does.
func CanonicalHeaderKey(s string) string {
	canonical := true
	upper := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isTokenChar(c) {
			return s
		}
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			canonical = false
		}
		upper = c == '-'
	}
	if canonical {
		return s
	}
	b := []byte(s)
	upper = true
	for i, c := range b {
		if upper && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			b[i] = c - 'A' + 'a'
		}
		upper = c == '-'
	}
	return string(b)
}

// Request is an outbound HTTP request.
type Request struct {
	// Method is an HTTP method (GET, POST, …); empty means GET.
	Method string
	// URL is an absolute http or https URL, in ASCII: a name in punycode,
	// other characters percent-encoded. It has no user information.
	URL string
	// Header holds the request's header lines: names are HTTP tokens,
	// values have no control characters but tab. The host sets Host,
	// Content-Length, Transfer-Encoding, Connection, Keep-Alive, Upgrade,
	// TE, Trailer and the Proxy-* headers itself: a request that sets one
	// is refused. It adds a User-Agent and an Idempotency-Key unless the
	// request sets them.
	Header Header
	// Body is sent with a Content-Length; nil or empty sends none.
	Body []byte
}

// Response is the response to a Request, read whole.
type Response struct {
	// StatusCode is the status of the final response, after redirects:
	// 100 to 599.
	StatusCode int
	// Body is the body as the server sent it: the host neither asks for
	// nor undoes compression. It is empty, not nil, when there is none.
	Body []byte

	rawHeader []byte // the header lines as the host sent them
	header    Header // decoded from rawHeader by Header
}

// Header returns the response's header lines, with canonical names. They
// are decoded at the first call: a map costs a guest more than the
// request's whole crossing of the host, and most callers look at the
// status and the body only.
func (r *Response) Header() Header {
	if r.header == nil {
		r.header = decodeHeader(r.rawHeader)
	}
	return r.header
}

// HTTPError says why a request got no response at all. A response with
// any status, 4xx and 5xx included, is not an error: check
// Response.StatusCode. errors.Is matches it against ErrHTTPTimeout,
// ErrHTTPUnreachable, ErrHTTPTLS and ErrHTTPBadResponse by Code.
//
// The host writes the details (the address, the handshake's complaint) to
// the activity's log; the plugin sees only the reason.
type HTTPError struct {
	// Code is what http_request returned: below zero, one of the reasons
	// of abi/README.md §13 (the sentinels below name those known).
	Code int32
	// Reason names Code in a few words without spaces: "timeout",
	// "unreachable", "tls", "bad_response" (or "unknown"), fit to append
	// to a failure code ("http_" + Reason).
	Reason string
}

// Error implements error.
func (e *HTTPError) Error() string {
	switch e.Code {
	case abi.HTTPTimeout:
		return "http: timeout: the request's own timeout passed"
	case abi.HTTPUnreachable:
		return "http: unreachable: the name did not resolve, or the connection was refused or reset"
	case abi.HTTPTLS:
		return "http: tls: the TLS handshake failed"
	case abi.HTTPBadResponse:
		return "http: bad_response: the answer was not HTTP, or it redirected more than 10 times"
	}
	return "http: " + e.Reason + " (" + strconv.Itoa(int(e.Code)) + ")"
}

// Timeout reports whether the request's own timeout passed. The attempt's
// deadline never returns an error: the host stops the call.
func (e *HTTPError) Timeout() bool { return e.Code == abi.HTTPTimeout }

// Is reports whether target is an *HTTPError with the same Code, so that
// errors.Is(err, ErrHTTPTimeout) works on any error Do returned.
func (e *HTTPError) Is(target error) bool {
	t, ok := target.(*HTTPError)
	return ok && t.Code == e.Code
}

// The reasons a request got no response, for errors.Is.
var (
	// ErrHTTPTimeout: the request's own timeout passed (the host's
	// plugins.http.timeout or plugins.http.connect_timeout).
	ErrHTTPTimeout error = &HTTPError{Code: abi.HTTPTimeout, Reason: "timeout"}
	// ErrHTTPUnreachable: the name did not resolve, or the connection was
	// refused or reset.
	ErrHTTPUnreachable error = &HTTPError{Code: abi.HTTPUnreachable, Reason: "unreachable"}
	// ErrHTTPTLS: the TLS handshake failed, for example on a certificate
	// the host does not trust.
	ErrHTTPTLS error = &HTTPError{Code: abi.HTTPTLS, Reason: "tls"}
	// ErrHTTPBadResponse: the answer was not HTTP, or there were more than
	// 10 redirects.
	ErrHTTPBadResponse error = &HTTPError{Code: abi.HTTPBadResponse, Reason: "bad_response"}
)

// ErrInvalidRequest matches the error Do returns, without calling the
// host, for a request the ABI does not allow: a method that is not an HTTP
// token, a URL that is not absolute http(s) ASCII with a host, or a header
// name or value that may not be sent. The host would stop the call for
// such a request; Do lets the plugin decide instead.
var ErrInvalidRequest = errors.New("sdk: invalid HTTP request")

// Do sends req through the host and returns the whole response. It returns
// an *HTTPError when no response arrived, and an error matching
// ErrInvalidRequest, without sending anything, when the request cannot be
// sent.
//
// The call stops (Do does not return) when the URL's host is not granted
// to the plugin (failure code not_granted), or when the request or the
// response passes one of the host's limits (code limit): see
// abi/README.md §13. The time Do waits counts toward the attempt's
// deadline.
func (c *Context) Do(req *Request) (*Response, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	return c.send(req.Method, req.URL, req.Header, "", req.Body)
}

// Get sends a GET request to url.
func (c *Context) Get(url string) (*Response, error) {
	return c.send("GET", url, nil, "", nil)
}

// Post sends a POST request of body to url, with the Content-Type
// contentType (none when it is empty).
func (c *Context) Post(url, contentType string, body []byte) (*Response, error) {
	return c.send("POST", url, nil, contentType, body)
}

// send is Do, with a Content-Type beside the header when contentType is
// not empty: Post's, which then needs no Header of its own. A guest's
// allocations cost it more than the host's whole crossing, so a request
// allocates only what its response keeps: the header lines go out from a
// buffer the Context reuses.
func (c *Context) send(method, url string, header Header, contentType string, body []byte) (*Response, error) {
	if method == "" {
		method = "GET"
	}
	if !isToken(method) {
		return nil, fmt.Errorf("%w: method %q is not an HTTP token", ErrInvalidRequest, method)
	}
	if err := checkURL(url); err != nil {
		return nil, err
	}
	lines, err := appendHeader(c.header[:0], header)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		if i := badValueByte(contentType); i >= 0 {
			return nil, fmt.Errorf("%w: the value of header Content-Type has the control byte %q at %d", ErrInvalidRequest, contentType[i], i)
		}
		lines = append(lines, "Content-Type: "...)
		lines = append(lines, contentType...)
		lines = append(lines, '\n')
	}
	c.header = lines
	status := c.host.httpRequest(method, url, lines, body)
	if status < 0 {
		return nil, httpError(status)
	}
	if status < 100 || status > 599 {
		return nil, fmt.Errorf("sdk: http_request returned %d, neither a status nor an error", status)
	}
	// Both parts in one allocation: their lengths first, then each part
	// into its end of one buffer.
	hn, bn := c.host.httpResponseHeaders(nil), c.host.httpResponseBody(nil)
	if hn < 0 || bn < 0 {
		return nil, fmt.Errorf("sdk: http_request returned status %d, but the host has no response to read", status)
	}
	buf := make([]byte, int(hn)+int(bn))
	if hn > 0 && c.host.httpResponseHeaders(buf[:hn]) != hn || bn > 0 && c.host.httpResponseBody(buf[hn:]) != bn {
		return nil, fmt.Errorf("sdk: the host's response to http_request changed while it was read")
	}
	// Full slices: an append to the body does not write over the header.
	return &Response{StatusCode: int(status), Body: buf[hn:len(buf):len(buf)], rawHeader: buf[:hn:hn]}, nil
}

// httpError returns the *HTTPError of a negative http_request result.
func httpError(code int32) *HTTPError {
	for _, s := range []error{ErrHTTPTimeout, ErrHTTPUnreachable, ErrHTTPTLS, ErrHTTPBadResponse} {
		if e := s.(*HTTPError); e.Code == code {
			c := *e // never hand out the sentinel itself
			return &c
		}
	}
	return &HTTPError{Code: code, Reason: "unknown"}
}

// checkURL refuses a URL that the ABI does not allow: not absolute http or
// https, without a host, with user information, or with a byte outside
// printable ASCII. It looks only at what those rules need, without parsing
// the URL whole (a parse costs more, in a guest, than the request's
// crossing): the host checks the rest, and stops the call for a URL that
// does not parse. Its errors never quote the URL, which may carry a
// credential (a webhook's URL often does).
func checkURL(u string) error {
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("%w: the URL has the byte %q at %d; percent-encode it (and write an international name in punycode)", ErrInvalidRequest, c, i)
		}
	}
	// One pass over the bytes, without the strings package: in a guest,
	// its calls cost more than the checks themselves.
	colon := strings.IndexByte(u, ':')
	if colon < 0 {
		colon = len(u)
	}
	if !isHTTPScheme(u[:colon]) {
		return fmt.Errorf("%w: the URL's scheme is not http or https", ErrInvalidRequest)
	}
	rest := u[min(colon+1, len(u)):]
	if len(rest) < 2 || rest[0] != '/' || rest[1] != '/' {
		return fmt.Errorf("%w: the URL has no host", ErrInvalidRequest)
	}
	rest = rest[2:]
	authority, at, port := rest, false, -1
scan:
	for i := 0; i < len(rest); i++ {
		switch rest[i] {
		case '/', '?', '#':
			authority = rest[:i]
			break scan
		case '@':
			at = true
		case ':':
			port = i
		}
	}
	if at {
		return fmt.Errorf("%w: the URL has user information; send credentials in a header", ErrInvalidRequest)
	}
	host := authority
	if len(host) > 0 && host[0] == '[' {
		host = ""
		for i := 2; i < len(authority); i++ {
			if authority[i] == ']' {
				host = authority[1:i]
				break
			}
		}
	} else if port >= 0 {
		for i := port + 1; i < len(authority); i++ {
			if authority[i] < '0' || authority[i] > '9' {
				return fmt.Errorf("%w: the URL does not parse: invalid port", ErrInvalidRequest)
			}
		}
		host = authority[:port]
	}
	if host == "" {
		return fmt.Errorf("%w: the URL has no host", ErrInvalidRequest)
	}
	return nil
}

// isHTTPScheme reports whether s is "http" or "https", in any case.
func isHTTPScheme(s string) bool {
	if len(s) != 4 && (len(s) != 5 || s[4]|0x20 != 's') {
		return false
	}
	return s[0]|0x20 == 'h' && s[1]|0x20 == 't' && s[2]|0x20 == 't' && s[3]|0x20 == 'p'
}

// hostOnly reports whether the header name, in any case, is one the host
// sets itself.
func hostOnly(name string) bool {
	for _, h := range [...]string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "Te", "Trailer"} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return len(name) >= 6 && strings.EqualFold(name[:6], "proxy-")
}

// appendHeader appends h to dst as the ABI's header lines,
// "Name: value\n", names sorted so that the same header always encodes
// the same way. It refuses what the host would stop the call for.
func appendHeader(dst []byte, h Header) ([]byte, error) {
	if len(h) == 0 {
		return dst, nil // Post's and Get's: nothing to sort
	}
	var sorted [16]string // most headers: no allocation to sort them
	names := sorted[:0]
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !isToken(name) {
			return nil, fmt.Errorf("%w: header name %q is not an HTTP token", ErrInvalidRequest, name)
		}
		if hostOnly(name) {
			return nil, fmt.Errorf("%w: the header %s is the host's to set", ErrInvalidRequest, name)
		}
		for _, v := range h[name] {
			if i := badValueByte(v); i >= 0 {
				// Never the value itself: it may be a credential.
				return nil, fmt.Errorf("%w: the value of header %s has the control byte %q at %d", ErrInvalidRequest, name, v[i], i)
			}
			dst = append(dst, name...)
			dst = append(dst, ": "...)
			dst = append(dst, v...)
			dst = append(dst, '\n')
		}
	}
	return dst, nil
}

// decodeHeader parses header lines, "Name: value\n" with an optional
// "\r", into a Header. Names are canonicalised and values trimmed of
// spaces and tabs; a line without a colon is skipped. b becomes the
// Header's and is never written again: its names and values are
// substrings of it, and the values of all names share one array, so that
// a header costs two allocations whatever its size (the host sends
// canonical names).
func decodeHeader(b []byte) Header {
	if len(b) == 0 {
		return Header{}
	}
	s := unsafe.String(&b[0], len(b)) // b is never written again
	lines := strings.Count(s, "\n") + 1
	h := make(Header, lines)
	values := make([]string, 0, lines)
	for len(s) > 0 {
		line := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			line, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		line = strings.TrimSuffix(line, "\r")
		colon := strings.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		name := CanonicalHeaderKey(strings.TrimRight(line[:colon], " \t"))
		v := strings.Trim(line[colon+1:], " \t")
		if vs, ok := h[name]; ok {
			h[name] = append(vs, v) // a full slice: append copies it
			continue
		}
		values = append(values, v) // within its capacity: never moves
		h[name] = values[len(values)-1 : len(values) : len(values)]
	}
	return h
}

// badValueByte returns the index of the first byte of v that a header
// value cannot carry, or -1. The ABI forbids CR, LF and NUL; the other
// control characters but tab are refused too, because HTTP forbids them
// (RFC 9110 §5.5) and the host cannot send them: it reports such a request
// as a bad response without sending it.
func badValueByte(v string) int {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return i
		}
	}
	return -1
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2): one or
// more of the characters isTokenChar allows.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
