package plugins

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// outbound sends the guests' HTTP requests. Every hop of every request goes
// through route, which checks it against the call's grants and picks the
// transport; each transport's dialer checks the address it connects to.
//
// Two transports, because a pooled connection is reused without a new
// dial: connections in public were all made to public addresses and may
// serve any request its grants allow; connections in private serve only
// requests under a rule with private networks.
type outbound struct {
	cfg             HTTPConfig
	public, private *http.Transport
	client          *http.Client
	// own are the host's listening addresses, which no request reaches.
	own ownListeners
	// limiter gives the hops under a rule with a rate limit their turns.
	limiter RateLimiter
	// traceWith makes the hops' spans: the tracer of the runtime's
	// Config.Tracer, made once, at the first request (see tracer).
	tracerOnce sync.Once
	traceWith  trace.Tracer
}

// OutboundHeader is the header the host sets on every request a plugin
// makes (over any value the guest set), with the plugin's name. The API
// of a host without tokens refuses requests that carry it, so that a
// plugin's request never counts as a local caller, even when it reaches
// the API by a way the dialer cannot see (a proxy on another port).
const OutboundHeader = "Weft-Plugin"

// maxRedirects is how many redirects one guest request follows.
const maxRedirects = 10

var errTooManyRedirects = fmt.Errorf("more than %d redirects", maxRedirects)

func newOutbound(cfg HTTPConfig) *outbound {
	o := &outbound{cfg: cfg, limiter: cfg.RateLimiter}
	if o.limiter == nil {
		o.limiter = locallimit.New(locallimit.Config{})
	}
	o.public = o.transport(false)
	o.private = o.transport(true)
	o.client = &http.Client{
		Transport: routeFunc(o.route),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return errTooManyRedirects
			}
			// Go keeps credentials on a redirect to the same name or a
			// subdomain, on any port and scheme; Weft keeps them only on
			// the same origin.
			if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
				for _, h := range []string{"Authorization", "Cookie", "Www-Authenticate"} {
					req.Header.Del(h)
				}
			}
			return nil
		},
	}
	return o
}

func (o *outbound) transport(privateNetworks bool) *http.Transport {
	d := &net.Dialer{
		Timeout: o.cfg.ConnectTimeout,
		// Called with the address about to be connected to, after name
		// resolution, for every address tried: the check cannot be
		// raced by a name that resolves differently the next time.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("connecting to %q: %w", address, err)
			}
			if err := o.own.check(ap); err != nil {
				return err
			}
			return grant.CheckAddr(ap.Addr(), privateNetworks)
		},
	}
	return &http.Transport{
		// Never a proxy from the environment: it would connect on the
		// guest's behalf to addresses the dialer never sees.
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: o.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    o.cfg.ConnectTimeout,
		MaxResponseHeaderBytes: int64(o.cfg.MaxHeaderBytes),
		// Bodies reach the guest as the server sent them: the host does
		// not inflate what it did not ask to be compressed.
		DisableCompression:  true,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
}

func (o *outbound) close() {
	o.public.CloseIdleConnections()
	o.private.CloseIdleConnections()
}

// ProtectListener adds addr, an address the host listens on (its API,
// console, metrics), to those no plugin request may connect to, whatever
// its grants: a plugin that reached the host's API could grant itself
// anything. A wildcard address (0.0.0.0, [::]) protects its port on every
// address of the machine. The serve command calls it once it listens,
// before any plugin runs.
func (r *Runtime) ProtectListener(addr net.Addr) error {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return fmt.Errorf("plugins: protecting the listener %s: %w", addr, err)
	}
	r.outbound.own.add(ap)
	return nil
}

// ownListeners is the host's listening addresses. Safe for concurrent
// use; the zero value protects nothing.
type ownListeners struct {
	mu    sync.RWMutex
	addrs []netip.AddrPort
}

func (l *ownListeners) add(ap netip.AddrPort) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addrs = append(l.addrs, netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port()))
}

// check returns a *grant.AddressError of ClassListener when a connection
// to ap would reach one of the listeners: the same address and port; any
// loopback address on a loopback listener's port ("localhost" is both
// 127.0.0.1 and ::1, and a name may resolve to any of 127/8); and any
// address of the machine on a wildcard listener's port.
func (l *ownListeners) check(ap netip.AddrPort) error {
	a, port := grant.Reached(ap.Addr()), ap.Port()
	refused := &grant.AddressError{Addr: a, Port: port, Class: grant.ClassListener, Never: true}
	l.mu.RLock()
	wildcard := false
	for _, own := range l.addrs {
		if own.Port() != port {
			continue
		}
		o := own.Addr()
		switch {
		case o == a, o.IsLoopback() && a.IsLoopback():
			l.mu.RUnlock()
			return refused
		case o.IsUnspecified():
			wildcard = true
		}
	}
	l.mu.RUnlock()
	if !wildcard {
		return nil
	}
	if a.IsLoopback() || a.IsUnspecified() {
		return refused
	}
	// Read at each such dial, not cached: interfaces come and go (a VPN,
	// DHCP), and a dial to the port of a wildcard listener is rare.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		// Unknown: refused, since it may be the host.
		return refused
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == a {
				return refused
			}
		}
	}
	return nil
}

type routeFunc func(*http.Request) (*http.Response, error)

func (f routeFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// hopsKey carries a guest request's *hops in its context.
type hopsKey struct{}

// hops is what route needs to know about the guest request a hop belongs
// to.
type hops struct {
	cs *callState
	// err is why route refused a hop: a *call.GrantError or a limit. The
	// client wraps it; this keeps it whole.
	err error
	// rule is the pattern of the rule that allowed the latest hop.
	rule string
	// refused is set when the latest hop's rate limit kept it from being
	// sent: the guest gets a synthetic 429.
	refused *refusal
	// tracer makes a span of each hop; nil makes none (outbound_trace.go).
	tracer trace.Tracer
	// guestTrace is set when the guest sent a traceparent or tracestate
	// of its own: its hops carry the guest's trace context, not the
	// host's.
	guestTrace bool
}

// route checks one hop (the first request or a redirect) against the
// grants and hands it to the transport its rule allows.
func (o *outbound) route(r *http.Request) (*http.Response, error) {
	h := r.Context().Value(hopsKey{}).(*hops)
	h.cs.http.hops++
	if h.cs.http.hops > o.cfg.MaxRequests {
		h.err = fmt.Errorf("%w: more than %d HTTP requests in one call, redirects included (plugins.http.max_requests)", call.ErrLimit, o.cfg.MaxRequests)
		return nil, h.err
	}
	rule, err := h.cs.grants.Allow(r.URL) // hostHTTPRequest read them (needGrants)
	if err != nil {
		h.err = h.cs.denied(err)
		return nil, h.err
	}
	h.rule = rule.Pattern
	r, span := h.startHop(r, rule.Pattern)
	resp, refused, err := o.send(r, h, rule)
	return h.endHop(span, r, resp, refused, err)
}

// send sends a hop the grants allow under rule, after its turn when the
// rule has a rate limit; refused says that the rate limit kept it from
// being sent, and resp is then the guest's synthetic 429.
func (o *outbound) send(r *http.Request, h *hops, rule *grant.Host) (resp *http.Response, refused bool, err error) {
	if rule.RateLimit != nil {
		// After the grant check, so that a hop no rule allows takes no
		// turn; for every hop, so that a redirect to another rule's
		// host waits for that rule's turn.
		ref, err := o.takeTurn(r.Context(), rule)
		if err != nil || ref != nil {
			closeBody(r)
		}
		if err != nil {
			if r.Context().Err() == nil {
				h.err = err // the limiter failed: the call fails with it
			}
			return nil, false, err
		}
		if ref != nil {
			h.refused = ref
			return ref.response(r), true, nil
		}
	}
	if rule.PrivateNetworks {
		resp, err = o.private.RoundTrip(r)
	} else {
		resp, err = o.public.RoundTrip(r)
	}
	return resp, false, err
}

// denied turns a refusal of the grant package into the *call.GrantError the call
// fails with.
func (cs *callState) denied(err error) *call.GrantError {
	plugin := cs.call.Info.Plugin
	ge := &call.GrantError{Plugin: plugin, What: "host"}
	var de *grant.DeniedError
	var ae *grant.AddressError
	switch {
	case errors.As(err, &de):
		ge.Name = fmt.Sprintf("%s://%s:%d", de.Scheme, bracket(de.Host), de.Port)
		if a, perr := netip.ParseAddr(de.Host); perr == nil && errors.As(grant.CheckAddr(a, true), &ae) {
			// An address no grant reaches (0.0.0.0, the metadata
			// address): granting it would not help.
			ge.Reason = ae.Error()
			break
		}
		ge.Grant = "weft plugin grant " + orName(plugin) + " --host " + de.Target()
		if private(de.Host) {
			// The grant alone would be refused at the address check next.
			ge.Grant += " --private-networks"
		}
	case errors.As(err, &ae):
		ge.Name = ae.Addr.String()
		ge.Reason = ae.Error()
		if !ae.Never {
			ge.Grant = "weft plugin grant " + orName(plugin) + " --host PATTERN --private-networks"
		}
	default:
		ge.Name = "URL"
		ge.Reason = err.Error()
	}
	return ge
}

// private reports whether a grant of host needs --private-networks, as far
// as the name tells: an IP literal that only a private-networks rule may
// reach, or localhost. A name that resolves to a private address is found
// out at the address check of the next attempt, which says so.
func private(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	var ae *grant.AddressError
	return errors.As(grant.CheckAddr(a, false), &ae) && !ae.Never
}

func bracket(host string) string {
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		return "[" + host + "]"
	}
	return host
}

func orName(plugin string) string {
	if plugin == "" {
		return "NAME"
	}
	return plugin
}
