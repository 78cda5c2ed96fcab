package plugins

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

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
}

// maxRedirects is how many redirects one guest request follows.
const maxRedirects = 10

var errTooManyRedirects = fmt.Errorf("more than %d redirects", maxRedirects)

func newOutbound(cfg HTTPConfig) *outbound {
	o := &outbound{cfg: cfg}
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

type routeFunc func(*http.Request) (*http.Response, error)

func (f routeFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// hopsKey carries a guest request's *hops in its context.
type hopsKey struct{}

// hops is what route needs to know about the guest request a hop belongs
// to.
type hops struct {
	cs *callState
	// err is why route refused a hop: a *GrantError or a limit. The
	// client wraps it; this keeps it whole.
	err error
}

// route checks one hop (the first request or a redirect) against the
// grants and hands it to the transport its rule allows.
func (o *outbound) route(r *http.Request) (*http.Response, error) {
	h := r.Context().Value(hopsKey{}).(*hops)
	h.cs.http.hops++
	if h.cs.http.hops > o.cfg.MaxRequests {
		h.err = fmt.Errorf("%w: more than %d HTTP requests in one call, redirects included (plugins.http.max_requests)", ErrLimit, o.cfg.MaxRequests)
		return nil, h.err
	}
	rule, err := h.cs.grants.Allow(r.URL) // hostHTTPRequest read them (needGrants)
	if err != nil {
		h.err = h.cs.denied(err)
		return nil, h.err
	}
	if rule.PrivateNetworks {
		return o.private.RoundTrip(r)
	}
	return o.public.RoundTrip(r)
}

// denied turns a refusal of the grant package into the *GrantError the call
// fails with.
func (cs *callState) denied(err error) *GrantError {
	plugin := cs.call.Info.Plugin
	ge := &GrantError{Plugin: plugin, What: "host"}
	var de *grant.DeniedError
	var ae *grant.AddressError
	switch {
	case errors.As(err, &de):
		ge.Name = fmt.Sprintf("%s://%s:%d", de.Scheme, bracket(de.Host), de.Port)
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
