package grant

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Host is one rule of outbound requests a plugin may make.
type Host struct {
	// Pattern is [scheme://]host[:port]. The scheme is https unless it
	// says http. The host is a DNS name, "*." and a name (any name below
	// it, at any depth, not the name itself), an IP literal (IPv6 in
	// brackets), or "*" (any host). The port is a number or "*"; without
	// one, only the scheme's default port matches.
	Pattern string `json:"pattern"`
	// PrivateNetworks lets requests under this rule reach loopback,
	// private, link-local and other non-public addresses. Cloud metadata
	// addresses are never reachable.
	PrivateNetworks bool `json:"private_networks,omitempty"`
	// RateLimit, when not nil, limits the requests sent under this rule,
	// on a budget shared by every rule with the same key (RateKey).
	RateLimit *RateLimit `json:"rate_limit,omitempty"`

	scheme string
	host   string // lower case; "*" or "*.suffix" for globs
	port   int    // 0 for any
}

// ParseHost parses a host rule, as it is written in a grant or on the
// command line.
func ParseHost(pattern string, privateNetworks bool) (Host, error) {
	h := Host{Pattern: pattern, PrivateNetworks: privateNetworks}
	return h, h.parse()
}

func (h *Host) parse() error {
	p := h.Pattern
	h.scheme = "https"
	if scheme, rest, ok := strings.Cut(p, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https":
		case "http":
			h.scheme = "http"
		default:
			return fmt.Errorf("pattern %q: the scheme is http or https, not %q", h.Pattern, scheme)
		}
		p = rest
	}
	if strings.ContainsAny(p, "/?#@") {
		return fmt.Errorf("pattern %q: a host pattern has no path, query, fragment or user", h.Pattern)
	}
	host, port := p, ""
	if strings.HasPrefix(p, "[") {
		end := strings.IndexByte(p, ']')
		if end < 0 {
			return fmt.Errorf("pattern %q: unclosed '['", h.Pattern)
		}
		host, port = p[1:end], p[end+1:]
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("pattern %q: %q in brackets is not an IPv6 address", h.Pattern, host)
		}
		if port != "" && port[0] != ':' {
			return fmt.Errorf("pattern %q: text after ']'", h.Pattern)
		}
		port = strings.TrimPrefix(port, ":")
	} else if i := strings.LastIndexByte(p, ':'); i >= 0 {
		host, port = p[:i], p[i+1:]
	}
	switch port {
	case "":
		h.port = defaultPort(h.scheme)
	case "*":
		h.port = 0
	default:
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("pattern %q: port %q is not a number from 1 to 65535 or *", h.Pattern, port)
		}
		h.port = n
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	switch {
	case host == "*":
	case strings.HasPrefix(host, "*."):
		if !validName(host[2:]) {
			return fmt.Errorf("pattern %q: %q is not a DNS name", h.Pattern, host[2:])
		}
	case strings.Contains(host, "*"):
		return fmt.Errorf("pattern %q: '*' is a whole host or a leading \"*.\"", h.Pattern)
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			host = a.Unmap().String()
		} else if !validName(host) {
			return fmt.Errorf("pattern %q: %q is neither a DNS name nor an IP address", h.Pattern, host)
		}
	}
	h.host = host
	return nil
}

// String returns the rule as the command line writes it:
// "api.example.com (private networks; 10/1s burst 20, max wait 5s)".
func (h Host) String() string {
	var notes []string
	if h.PrivateNetworks {
		notes = append(notes, "private networks")
	}
	if h.RateLimit != nil {
		notes = append(notes, h.RateLimit.String())
	}
	if len(notes) == 0 {
		return h.Pattern
	}
	return h.Pattern + " (" + strings.Join(notes, "; ") + ")"
}

func defaultPort(scheme string) int {
	if scheme == "http" {
		return 80
	}
	return 443
}

// validName reports whether s is an ASCII DNS name: labels of letters,
// digits, '-' and '_', 1 to 63 bytes each.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
}

// matches reports whether the rule allows scheme://host:port; host is lower
// case, without a trailing dot, IP literals unbracketed and unmapped.
func (h *Host) matches(scheme, host string, port int, ip bool) bool {
	if h.scheme != scheme || (h.port != 0 && h.port != port) {
		return false
	}
	switch {
	case h.host == "*":
		return true
	case strings.HasPrefix(h.host, "*."):
		return !ip && strings.HasSuffix(host, h.host[1:])
	}
	return h.host == host
}

// ErrDenied matches a *DeniedError.
var ErrDenied = errors.New("not granted")

// DeniedError says that no rule allows a request's scheme, host and port.
type DeniedError struct {
	Scheme string
	Host   string
	Port   int
}

// Error implements error.
func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s://%s:%d is not granted", e.Scheme, e.Host, e.Port)
}

// Unwrap returns ErrDenied.
func (e *DeniedError) Unwrap() error { return ErrDenied }

// Target returns the pattern that grants exactly what was denied.
func (e *DeniedError) Target() string {
	host := e.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if e.Port == defaultPort(e.Scheme) {
		if e.Scheme == "https" {
			return host
		}
		return e.Scheme + "://" + host
	}
	return fmt.Sprintf("%s://%s:%d", e.Scheme, host, e.Port)
}

// Allow returns the first rule of s that allows u, or a *DeniedError. A
// URL must be absolute, http or https, without user information.
func (s *Set) Allow(u *url.URL) (*Host, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("%w: the scheme %q is not http or https", ErrDenied, u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: a URL with user information (credentials go in headers)", ErrDenied)
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return nil, fmt.Errorf("%w: the URL has no host", ErrDenied)
	}
	port := defaultPort(scheme)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: port %q", ErrDenied, p)
		}
		port = n
	}
	a, err := netip.ParseAddr(host)
	ip := err == nil
	if ip {
		host = a.Unmap().WithZone("").String()
	} else if !validName(host) {
		return nil, fmt.Errorf("%w: %q is not an ASCII DNS name (write international names in punycode)", ErrDenied, host)
	}
	if s != nil {
		for i := range s.Hosts {
			r := &s.Hosts[i]
			if r.scheme == "" {
				// A Set built in code rather than by Parse: parse a copy,
				// since s may be shared by concurrent calls.
				c := *r
				if c.parse() != nil {
					continue
				}
				r = &c
			}
			if r.matches(scheme, host, port, ip) {
				return r, nil
			}
		}
	}
	return nil, &DeniedError{Scheme: scheme, Host: host, Port: port}
}
