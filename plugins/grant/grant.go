// Package grant is what an operator allows one plugin: the hosts its HTTP
// requests may reach, the configuration values it reads and the secrets it
// may resolve. Nothing is allowed unless a grant says so. A host rule may
// also limit the rate of the requests sent under it (RateLimit).
//
// The package parses and checks grants; it does no I/O. The plugin runtime
// asks it, for every hop of every outbound request, which rule allows the
// URL (Set.Allow) and, for every address it is about to connect to, whether
// that address may be reached (CheckAddr); it resolves secret references
// (Ref) itself.
package grant

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Limits on a grant document, so that a grant is always small enough to be
// read on every activity call.
const (
	MaxHosts    = 256
	MaxKeys     = 256       // config values, and secrets, each
	MaxValueLen = 64 << 10  // one config value
	MaxDocument = 512 << 10 // the whole document
	MaxKeyLen   = 256       // a config key or a secret's name
)

// ErrInvalid matches every error about a malformed grant.
var ErrInvalid = errors.New("invalid grant")

// Set is everything granted to one plugin. The zero Set grants nothing.
type Set struct {
	// Hosts are the rules an outbound request's URL must match, at every
	// redirect hop.
	Hosts []Host `json:"hosts,omitempty"`
	// Config holds the values the plugin reads with the config host
	// function.
	Config map[string]string `json:"config,omitempty"`
	// Secrets maps each secret name the plugin may read to a reference
	// (see Ref) that every node resolves for itself. A secret's value is
	// never stored.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// Parse decodes and checks a grant document (JSON). Unknown fields are
// refused, so that a misspelt field does not silently grant less than
// meant.
func Parse(doc []byte) (*Set, error) {
	if len(doc) > MaxDocument {
		return nil, fmt.Errorf("%w: the document has %d bytes, more than %d", ErrInvalid, len(doc), MaxDocument)
	}
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.DisallowUnknownFields()
	var s Set
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: more than one JSON document", ErrInvalid)
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Check reports the first problem with s, naming the field, or nil. It
// also parses each host pattern, so that Allow need not.
func (s *Set) Check() error {
	if len(s.Hosts) > MaxHosts {
		return fmt.Errorf("%w: %d host rules, more than %d", ErrInvalid, len(s.Hosts), MaxHosts)
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if err := h.parse(); err != nil {
			return fmt.Errorf("%w: hosts[%d]: %v", ErrInvalid, i, err)
		}
		if h.RateLimit != nil {
			if err := h.RateLimit.Check(); err != nil {
				return fmt.Errorf("%w: hosts[%d] (%s): %w", ErrInvalid, i, h.Pattern, err)
			}
		}
	}
	if len(s.Config) > MaxKeys {
		return fmt.Errorf("%w: %d config values, more than %d", ErrInvalid, len(s.Config), MaxKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Config)) {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("%w: config %q: %v", ErrInvalid, k, err)
		}
		if len(s.Config[k]) > MaxValueLen {
			return fmt.Errorf("%w: config %q: the value has %d bytes, more than %d", ErrInvalid, k, len(s.Config[k]), MaxValueLen)
		}
	}
	if len(s.Secrets) > MaxKeys {
		return fmt.Errorf("%w: %d secrets, more than %d", ErrInvalid, len(s.Secrets), MaxKeys)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Secrets)) {
		if err := checkKey(k); err != nil {
			return fmt.Errorf("%w: secret %q: %v", ErrInvalid, k, err)
		}
		if _, err := ParseRef(s.Secrets[k]); err != nil {
			return fmt.Errorf("%w: secret %q: %v", ErrInvalid, k, err)
		}
	}
	return nil
}

// Empty reports whether s grants nothing.
func (s *Set) Empty() bool {
	return s == nil || len(s.Hosts) == 0 && len(s.Config) == 0 && len(s.Secrets) == 0
}

// ValidKey reports whether k may name a configuration value or a secret:
// 1 to MaxKeyLen bytes of printable ASCII without spaces or '='.
func ValidKey(k string) bool { return checkKey(k) == nil }

func checkKey(k string) error {
	if k == "" || len(k) > MaxKeyLen {
		return fmt.Errorf("a key has 1 to %d bytes", MaxKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || c == '=' {
			return errors.New("a key is printable ASCII without spaces or '='")
		}
	}
	return nil
}
