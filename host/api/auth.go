package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/weftworks/weft/host/api/apiv1"
)

// Role is what a token may do.
type Role string

// The roles. admin may do everything; operator may run instances (start,
// cancel, retry, pause, resume, reset and delete them, and batch jobs of
// all but delete and migrate, which change what exists or runs), send
// events, pause, unpause, trigger and backfill schedules, and read
// everything; reader may only read.
const (
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
	RoleReader   Role = "reader"
)

// Token is one configured bearer token.
type Token struct {
	// Name identifies the token in logs and errors; never the secret.
	Name string `json:"name" koanf:"name"`
	Role Role   `json:"role" koanf:"role"`
	// Token is the secret itself, or "sha256:" followed by the 64 hex
	// digits of its SHA-256, so that the secret need not sit in a file.
	Token string `json:"token" koanf:"token"`
}

// hashPrefix introduces a token given by its SHA-256.
const hashPrefix = "sha256:"

// perm is what a route requires.
type perm int

const (
	permPublic  perm = iota // no token
	permRead                // any role
	permOperate             // operator or admin
	permAdmin               // admin
)

// allows reports whether role may use a route that requires p.
func (p perm) allows(r Role) bool {
	switch p {
	case permPublic, permRead:
		return true
	case permOperate:
		return r == RoleAdmin || r == RoleOperator
	default:
		return r == RoleAdmin
	}
}

func (p perm) String() string {
	switch p {
	case permPublic:
		return "none"
	case permRead:
		return "reader"
	case permOperate:
		return "operator"
	default:
		return "admin"
	}
}

type credential struct {
	name string
	role Role
	sum  [sha256.Size]byte
}

// authenticator checks bearer tokens against the configured ones.
type authenticator struct {
	creds []credential
}

// newAuthenticator checks the tokens and returns their authenticator, or
// every problem of theirs, each a *ConfigError naming the token's field
// (Tokens[1].Role), joined.
func newAuthenticator(tokens []Token) (authenticator, error) {
	var a authenticator
	var errs []error
	names := map[string]bool{}
	for i, t := range tokens {
		label := fmt.Sprintf("auth token %d", i)
		if t.Name != "" {
			label = fmt.Sprintf("auth token %q", t.Name)
		}
		bad := func(field, format string, args ...any) {
			errs = append(errs, &ConfigError{Field: fmt.Sprintf("Tokens[%d].%s", i, field), Message: label + ": " + fmt.Sprintf(format, args...)})
		}
		if t.Name == "" {
			bad("Name", "name must not be empty")
		} else if names[t.Name] {
			bad("Name", "name used twice")
		}
		names[t.Name] = true
		if t.Role != RoleAdmin && t.Role != RoleOperator && t.Role != RoleReader {
			bad("Role", "role must be admin, operator or reader, got %q", t.Role)
		}
		c := credential{name: t.Name, role: t.Role}
		if hexSum, ok := strings.CutPrefix(t.Token, hashPrefix); ok {
			b, err := hex.DecodeString(hexSum)
			if err != nil || len(b) != sha256.Size {
				bad("Token", "%q must be followed by the 64 hex digits of the secret's SHA-256", hashPrefix)
				continue
			}
			copy(c.sum[:], b)
		} else if t.Token == "" {
			bad("Token", "token must not be empty")
			continue
		} else {
			c.sum = sha256.Sum256([]byte(t.Token))
		}
		for _, o := range a.creds {
			if o.sum == c.sum {
				bad("Token", "the same secret as token %q (plain or sha256: form): a secret must have one role", o.name)
			}
		}
		a.creds = append(a.creds, c)
	}
	return a, errors.Join(errs...)
}

// identify returns the credential matching the presented secret. It
// compares the secret's SHA-256 with every configured hash in constant
// time and does not stop at a match, so neither the secret nor which
// token matched shows in the timing.
func (a authenticator) identify(secret string) (credential, bool) {
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range a.creds {
		if subtle.ConstantTimeCompare(sum[:], a.creds[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return credential{}, false
	}
	return a.creds[found], true
}

// authorize returns the middleware of a route that requires p.
func (s *Server) authorize(p perm) fiber.Handler {
	return func(c *fiber.Ctx) error {
		cred, prob := s.admit(c, p)
		if prob != nil {
			return prob
		}
		if cred != nil {
			c.Locals(localLogger, s.logger(c).With("token", cred.name))
			c.Locals(localCred, cred)
		}
		return c.Next()
	}
}

// whoamiView is GET /v1/whoami's answer.
type whoamiView struct {
	// Role is the token's role; admin when the host has no tokens.
	Role Role `json:"role"`
	// Authenticated is whether the request's token was checked: false
	// when the host has no tokens.
	Authenticated bool `json:"authenticated"`
	// Token is the token's configured name, never its secret.
	Token string `json:"token,omitempty"`
	// TraceURL is Config.TraceViewerURL, the link to an instance's trace
	// with {trace_id} in it; omitted when the host has none. It is said
	// here because the console asks this first, whatever the token's
	// role.
	TraceURL string `json:"trace_url,omitempty"`
}

// whoami answers what the request's token may do, so that a client (the
// console) offers only the actions its role allows.
func (s *Server) whoami(c *fiber.Ctx) error {
	cred, _ := c.Locals(localCred).(*credential)
	if cred == nil {
		return c.JSON(whoamiView{Role: RoleAdmin, TraceURL: s.cfg.TraceViewerURL})
	}
	return c.JSON(whoamiView{Role: cred.role, Authenticated: true, Token: cred.name, TraceURL: s.cfg.TraceViewerURL})
}

// admit decides whether a request may use a route that requires p: it
// returns the problem to answer (401 or 403), or the credential of the
// request's token (nil for a public route or with auth off) and no
// problem. Every decision on a token is admit's: authorize's for the
// route, and the bodies middleware's before it reads a body, so that a
// request its route refuses is refused before its body takes memory,
// with the same answer.
func (s *Server) admit(c *fiber.Ctx, p perm) (*credential, *apiv1.Problem) {
	if p == permPublic || len(s.auth.creds) == 0 {
		return nil, nil
	}
	h := c.Get(fiber.HeaderAuthorization)
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" {
		return nil, problemf(fiber.StatusUnauthorized, "unauthorized", "this route needs a bearer token (Authorization: Bearer <token>)")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return nil, problemf(fiber.StatusUnauthorized, "unauthorized", "the Authorization header must be \"Bearer <token>\"")
	}
	cred, ok := s.auth.identify(strings.TrimSpace(secret))
	if !ok {
		return nil, problemf(fiber.StatusUnauthorized, "unauthorized", "the bearer token is not valid")
	}
	if !p.allows(cred.role) {
		return nil, problemf(fiber.StatusForbidden, "forbidden", "token %q has role %s; this route needs %s", cred.name, cred.role, p)
	}
	return &cred, nil
}
