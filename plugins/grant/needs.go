package grant

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/weftworks/weft/abi"
)

// CheckNeeds returns the problems of a manifest's needs, each naming the
// field: host patterns that do not parse, keys that could never be granted,
// and more entries than a grant may hold.
func CheckNeeds(n *abi.Needs) []string {
	if n == nil {
		return nil
	}
	var problems []string
	if len(n.Hosts) > MaxHosts {
		problems = append(problems, fmt.Sprintf("manifest: needs.hosts lists %d hosts, more than %d", len(n.Hosts), MaxHosts))
	}
	for i, p := range n.Hosts {
		if _, err := ParseHost(p, false); err != nil {
			problems = append(problems, fmt.Sprintf("manifest: needs.hosts[%d]: %v", i, err))
		}
	}
	for _, f := range []struct {
		name string
		keys []string
	}{{"config", n.Config}, {"secrets", n.Secrets}} {
		if len(f.keys) > MaxKeys {
			problems = append(problems, fmt.Sprintf("manifest: needs.%s lists %d keys, more than %d", f.name, len(f.keys), MaxKeys))
		}
		for i, k := range f.keys {
			if err := checkKey(k); err != nil {
				problems = append(problems, fmt.Sprintf("manifest: needs.%s[%d] %q: %v", f.name, i, k, err))
			}
		}
	}
	return problems
}

// Missing returns what n asks for that s does not grant: each host pattern
// no rule of s covers (tested with the pattern's own scheme, host and
// port), each config key without a value and each secret without a
// reference.
func Missing(n *abi.Needs, s *Set) abi.Needs {
	var m abi.Needs
	if n == nil {
		return m
	}
	for _, p := range n.Hosts {
		h, err := ParseHost(p, false)
		if err != nil || !s.covers(&h) {
			m.Hosts = append(m.Hosts, p)
		}
	}
	for _, k := range n.Config {
		if _, ok := s.config()[k]; !ok {
			m.Config = append(m.Config, k)
		}
	}
	for _, k := range n.Secrets {
		if _, ok := s.secrets()[k]; !ok {
			m.Secrets = append(m.Secrets, k)
		}
	}
	return m
}

// covers reports whether a rule of s allows everything h names: its host
// glob, or any port when h's is "*".
func (s *Set) covers(h *Host) bool {
	if s == nil {
		return false
	}
	_, err := netip.ParseAddr(h.host)
	return slices.ContainsFunc(s.Hosts, func(r Host) bool {
		if r.scheme == "" && r.parse() != nil { // built in code, not parsed
			return false
		}
		return r.matches(h.scheme, h.host, h.port, err == nil)
	})
}

func (s *Set) config() map[string]string {
	if s == nil {
		return nil
	}
	return s.Config
}

func (s *Set) secrets() map[string]string {
	if s == nil {
		return nil
	}
	return s.Secrets
}
