package api

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

func viewNeeds(n *abi.Needs) apiv1.Needs {
	v := apiv1.Needs{Hosts: []string{}, Config: []string{}, Secrets: []string{}}
	if n != nil {
		v.Hosts = append(v.Hosts, n.Hosts...)
		v.Config = append(v.Config, n.Config...)
		v.Secrets = append(v.Secrets, n.Secrets...)
	}
	return v
}

// viewGrants returns the view of stored grants (nil: nothing granted) and
// the parsed set, which is nil when nothing is granted.
func viewGrants(plugin string, g *weft.Grants) (apiv1.Grants, *grant.Set, error) {
	v := apiv1.Grants{Plugin: plugin, Hosts: []apiv1.GrantHost{}, Config: map[string]string{}, Secrets: map[string]string{}}
	if g == nil {
		return v, nil, nil
	}
	set, err := grant.Parse(g.Document)
	if err != nil {
		// Not the request's fault: %v, so that it is not read as a 422.
		return v, nil, fmt.Errorf("the stored grants of plugin %s (revision %d) do not parse: %v", plugin, g.Revision, err)
	}
	v.Revision = g.Revision
	at := g.UpdatedAt
	v.UpdatedAt = &at
	for _, h := range set.Hosts {
		v.Hosts = append(v.Hosts, apiv1.GrantHost{Pattern: h.Pattern, PrivateNetworks: h.PrivateNetworks, RateLimit: viewRateLimit(h.RateLimit)})
	}
	maps.Copy(v.Config, set.Config)
	maps.Copy(v.Secrets, set.Secrets)
	return v, set, nil
}

// viewRateLimit is a host rule's rate limit as the API shows it: as the
// grant document has it.
func viewRateLimit(rl *grant.RateLimit) *apiv1.GrantRateLimit {
	if rl == nil {
		return nil
	}
	v := &apiv1.GrantRateLimit{Limit: rl.Limit.Count, Per: rl.Limit.Per.String(), Burst: rl.Limit.Burst, Key: rl.Key}
	if rl.MaxWait > 0 {
		v.MaxWait = rl.MaxWait.String()
	}
	return v
}

// grantName is the :name of a grants route, checked: grants belong to a
// plugin name, which need not be uploaded yet but must be one that could.
func grantName(c *fiber.Ctx) (string, error) {
	name := param(c, "name")
	if !abi.ValidName(name) {
		return "", invalidField("name", "plugin name %q: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter", name, abi.MaxNameLen)
	}
	return name, nil
}

// loadGrants returns the view and set of a plugin name's grants; nothing
// granted is a valid state, answered with revision 0.
func (s *Server) loadGrants(c *fiber.Ctx, name string) (apiv1.Grants, *grant.Set, error) {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	g, err := s.node.GetGrants(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		g, err = nil, nil
	}
	if err != nil {
		return apiv1.Grants{}, nil, err
	}
	return viewGrants(name, g)
}

func (s *Server) getGrants(c *fiber.Ctx) error {
	name, err := grantName(c)
	if err != nil {
		return err
	}
	v, _, err := s.loadGrants(c, name)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, revisionTag(v.Revision))
	return c.JSON(v)
}

// revisionTag is the ETag of grants at revision rev: the revision, quoted.
func revisionTag(rev uint64) string { return `"` + strconv.FormatUint(rev, 10) + `"` }

// ifMatchRevision reads the If-Match header of a grants write: the ETag a
// read answered ("3"), so that the write is refused (412) if the grants
// changed since. Without the header any revision is replaced.
func ifMatchRevision(c *fiber.Ctx) (uint64, error) {
	h := strings.TrimSpace(c.Get(fiber.HeaderIfMatch))
	if h == "" {
		return weft.AnyRevision, nil
	}
	tag := strings.TrimSuffix(strings.TrimPrefix(h, `"`), `"`)
	rev, err := strconv.ParseUint(tag, 10, 64)
	if err != nil || len(tag)+2 != len(h) || rev == weft.AnyRevision {
		return 0, invalidField("If-Match", `want the ETag of a grants read, a revision in quotes such as "3", got %q`, h)
	}
	return rev, nil
}

func (s *Server) putGrants(c *fiber.Ctx) error {
	if err := requireType(c, false, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	name, err := grantName(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(c.Request().Body())) == 0 {
		return invalidField("$", `a grant document is required, such as {"hosts": [{"pattern": "api.example.com"}]}; {} grants nothing`)
	}
	// The shape first (400, as every JSON body), then every problem of
	// the content at once (422), each with its path.
	var doc grant.Set
	if err := decodeJSON(c, &doc); err != nil {
		return err
	}
	if ps := grantProblems(&doc); len(ps) > 0 {
		return unprocessable(fmt.Sprintf("the grants of plugin %s have %d problem(s)", name, len(ps)), ps...)
	}
	ifRev, err := ifMatchRevision(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	g, _, err := s.node.PutGrants(ctx, name, c.BodyRaw(), ifRev)
	if err != nil {
		return err
	}
	v, _, err := viewGrants(name, g)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, revisionTag(v.Revision))
	return c.JSON(v)
}

func (s *Server) deleteGrants(c *fiber.Ctx) error {
	name, err := grantName(c)
	if err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	err = s.node.DeleteGrants(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("nothing is granted to plugin %q", name)
	}
	if err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// grantProblems returns every problem of a decoded grant document, each
// with the path of the field it is about: hosts[1].pattern,
// config.url, secrets.token.
func grantProblems(s *grant.Set) []apiv1.FieldError {
	var ps []apiv1.FieldError
	add := func(path string, err error) {
		ps = append(ps, apiv1.FieldError{Path: path, Message: grantMessage(err)})
	}
	if len(s.Hosts) > grant.MaxHosts {
		ps = append(ps, apiv1.FieldError{Path: "hosts", Message: fmt.Sprintf("%d host rules, more than %d", len(s.Hosts), grant.MaxHosts)})
	}
	for i, h := range s.Hosts {
		if _, err := grant.ParseHost(h.Pattern, h.PrivateNetworks); err != nil {
			add(fmt.Sprintf("hosts[%d].pattern", i), err)
		}
		if h.RateLimit == nil {
			continue
		}
		var re *grant.RateLimitError
		if err := h.RateLimit.Check(); errors.As(err, &re) {
			path := fmt.Sprintf("hosts[%d].rate_limit", i)
			if re.Field != "" {
				path += "." + re.Field
			}
			ps = append(ps, apiv1.FieldError{Path: path, Message: re.Problem})
		}
	}
	for _, f := range []struct {
		name string
		m    map[string]string
		one  func(k, v string) *grant.Set
	}{
		{"config", s.Config, func(k, v string) *grant.Set { return &grant.Set{Config: map[string]string{k: v}} }},
		{"secrets", s.Secrets, func(k, v string) *grant.Set { return &grant.Set{Secrets: map[string]string{k: v}} }},
	} {
		if len(f.m) > grant.MaxKeys {
			ps = append(ps, apiv1.FieldError{Path: f.name, Message: fmt.Sprintf("%d entries, more than %d", len(f.m), grant.MaxKeys)})
		}
		for _, k := range slices.Sorted(maps.Keys(f.m)) {
			err := f.one(k, f.m[k]).Check()
			switch {
			case err == nil:
			case f.name == "secrets":
				// What was sent as a reference may be the secret itself:
				// it is not repeated.
				ps = append(ps, apiv1.FieldError{Path: keyPath(f.name, k), Message: redactRef(grantMessage(err), f.m[k])})
			default:
				add(keyPath(f.name, k), err)
			}
		}
	}
	if len(ps) == 0 {
		// Whatever the entries alone do not show.
		if err := s.Check(); err != nil {
			add("$", err)
		}
	}
	return ps
}

// grantMessage is a grant error without the sentinel's words, which the
// problem's title says already.
func grantMessage(err error) string {
	return strings.TrimPrefix(err.Error(), grant.ErrInvalid.Error()+": ")
}

// redactRef removes a refused secret reference, and its prefix taken for
// a kind, from the message about it: an operator who wrote a secret's
// value where its reference belongs does not get it echoed (nor logged by
// whatever logs answers).
func redactRef(msg, ref string) string {
	if ref == "" {
		return msg
	}
	msg = strings.ReplaceAll(msg, "reference "+strconv.Quote(ref), "the reference")
	if kind, _, ok := strings.Cut(ref, ":"); ok && kind != "" {
		msg = strings.ReplaceAll(msg, ", not "+strconv.Quote(kind), "")
	}
	return strings.ReplaceAll(msg, ref, "…")
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// keyPath is the path of a map entry: config.url, or config["a.b"] for a
// key that is not a plain word.
func keyPath(field, key string) string {
	if plainKey.MatchString(key) {
		return field + "." + key
	}
	return field + "[" + strconv.Quote(key) + "]"
}

// grantFieldError is the field error of a grant error that reached
// problemFor: putGrants checks every field first, so what is left is
// about the whole document (more than grant.MaxDocument bytes).
func grantFieldError(err error) apiv1.FieldError {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, grant.ErrInvalid.Error()+": "); ok {
		msg = rest
	}
	return apiv1.FieldError{Path: "$", Message: msg}
}
