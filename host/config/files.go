package config

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/schedule"
	"github.com/weftworks/weft/plugins/grant"
)

// The files the configuration names and the host reads at start: the
// extra root CAs of plugins.http.ca_file, and the grants of grants_file,
// which `weft serve` applies at every start. They are read when the
// configuration is loaded, so that a file that cannot be read or holds a
// mistake is a problem of its key.

// loadRootCAs returns the system's root certificate authorities with
// those of a PEM file added.
func loadRootCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate (want one or more -----BEGIN CERTIFICATE----- blocks)", path)
	}
	return pool, nil
}

// readGrantsFile reads a grants file: a YAML (or JSON) mapping of plugin
// names to grant documents. It returns each document, checked, as JSON,
// or every problem, each naming the plugin and the field.
func readGrantsFile(path string) (map[string][]byte, []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(b, &doc); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	out := map[string][]byte{}
	if len(doc.Content) == 0 {
		return out, nil // an empty file grants nothing
	}
	top := doc.Content[0]
	if top.Kind != yamlv3.MappingNode {
		return nil, []string{fmt.Sprintf("%s: want a mapping of plugin names to grants ({hosts, config, secrets})", path)}
	}
	var problems []string
	for i := 0; i+1 < len(top.Content); i += 2 {
		name, entry := top.Content[i].Value, top.Content[i+1]
		bad := func(n *yamlv3.Node, format string, args ...any) {
			problems = append(problems, fmt.Sprintf("%s line %d: plugin %s: %s", path, n.Line, name, fmt.Sprintf(format, args...)))
		}
		if !abi.ValidName(name) {
			bad(top.Content[i], "not a plugin name: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter", abi.MaxNameLen)
			continue
		}
		if _, dup := out[name]; dup {
			bad(top.Content[i], "granted twice in the file")
			continue
		}
		before := len(problems)
		set := grantFromYAML(entry, bad)
		if len(problems) > before {
			continue
		}
		canon, err := json.Marshal(set)
		if err == nil {
			_, err = grant.Parse(canon)
		}
		if err != nil {
			bad(entry, "%s", strings.TrimPrefix(err.Error(), grant.ErrInvalid.Error()+": "))
			continue
		}
		out[name] = canon
	}
	return out, problems
}

// grantFromYAML reads one grant document of a grants file, reporting each
// problem with bad, by field. A secret reference that does not parse is
// not quoted back: it may be the secret itself.
func grantFromYAML(n *yamlv3.Node, bad func(*yamlv3.Node, string, ...any)) *grant.Set {
	s := &grant.Set{}
	if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
		return s // "name:" with nothing grants nothing
	}
	if n.Kind != yamlv3.MappingNode {
		bad(n, "want a mapping of hosts, config and secrets")
		return s
	}
	scalar := func(n *yamlv3.Node, field string) (string, bool) {
		if n.Kind != yamlv3.ScalarNode {
			bad(n, "%s: want a string", field)
			return "", false
		}
		if n.Tag == "!!null" {
			return "", true
		}
		return n.Value, true
	}
	strmap := func(n *yamlv3.Node, field string) map[string]string {
		if n.Kind != yamlv3.MappingNode {
			bad(n, "%s: want a mapping of names to strings", field)
			return nil
		}
		m := map[string]string{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if v, ok := scalar(n.Content[i+1], field+"."+k); ok {
				m[k] = v
			}
		}
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		switch key.Value {
		case "hosts":
			if val.Kind != yamlv3.SequenceNode {
				bad(val, "hosts: want a list of {pattern, private_networks}")
				continue
			}
			for j, h := range val.Content {
				field := fmt.Sprintf("hosts[%d]", j)
				var rule grant.Host
				if h.Kind != yamlv3.MappingNode {
					bad(h, "%s: want {pattern, private_networks}", field)
					continue
				}
				for k := 0; k+1 < len(h.Content); k += 2 {
					switch f, v := h.Content[k].Value, h.Content[k+1]; f {
					case "pattern":
						rule.Pattern, _ = scalar(v, field+".pattern")
					case "private_networks":
						if err := v.Decode(&rule.PrivateNetworks); err != nil || v.Kind != yamlv3.ScalarNode {
							bad(v, "%s.private_networks: want true or false", field)
						}
					case "rate_limit":
						rule.RateLimit = rateLimitFromYAML(v, field, bad)
					default:
						bad(h.Content[k], "%s: unknown field %q (a host rule has pattern, private_networks and rate_limit)", field, f)
					}
				}
				if _, err := grant.ParseHost(rule.Pattern, rule.PrivateNetworks); err != nil {
					bad(h, "%s: %v", field, err)
				}
				s.Hosts = append(s.Hosts, rule)
			}
		case "config":
			s.Config = strmap(val, "config")
		case "secrets":
			s.Secrets = strmap(val, "secrets")
			for _, k := range slices.Sorted(maps.Keys(s.Secrets)) {
				if _, err := grant.ParseRef(s.Secrets[k]); err != nil {
					bad(val, "secrets.%s: not a reference env:VARIABLE or file:/absolute/path (the file holds where each node finds a secret, never its value)", k)
				}
			}
		default:
			bad(key, "unknown field %q (a grant has hosts, config and secrets)", key.Value)
		}
	}
	return s
}

// rateLimitFromYAML reads a host rule's rate_limit, as a grant document
// has it ({limit, per, burst, max_wait, key}), reporting its first problem
// with bad, naming the field.
func rateLimitFromYAML(n *yamlv3.Node, field string, bad func(*yamlv3.Node, string, ...any)) *grant.RateLimit {
	var v any
	err := n.Decode(&v)
	var b []byte
	if err == nil {
		b, err = json.Marshal(v)
	}
	rl := &grant.RateLimit{}
	if err == nil {
		err = json.Unmarshal(b, rl)
	}
	if err == nil {
		err = rl.Check()
	}
	if err != nil {
		bad(n, "%s.%v", field, err)
		return nil
	}
	return rl
}

// readSchedulesFile reads a schedules file: a YAML (or JSON) list of
// schedule documents (docs/schedules.md). It returns each document,
// checked, in its canonical JSON, or every problem, each naming the
// schedule's place in the file and the field.
func readSchedulesFile(path string) ([][]byte, []string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, []string{err.Error()}
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(b, &doc); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	if len(doc.Content) == 0 {
		return nil, nil // an empty file schedules nothing
	}
	top := doc.Content[0]
	if top.Kind != yamlv3.SequenceNode {
		return nil, []string{fmt.Sprintf("%s: want a list of schedule documents ({id, workflow, input, spec, policy})", path)}
	}
	var out [][]byte
	var problems []string
	seen := map[string]int{}
	for i, item := range top.Content {
		// Each document is checked as the API checks one; its problems'
		// lines count from the document's own first line.
		src, err := yamlv3.Marshal(item)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s line %d: schedules[%d]: %v", path, item.Line, i, err))
			continue
		}
		d, err := schedule.ParseDocument(src)
		var se *weft.ScheduleError
		if errors.As(err, &se) {
			for _, p := range se.Problems {
				problems = append(problems, fmt.Sprintf("%s line %d: schedules[%d]: %s", path, item.Line, i, weft.Problem{Path: p.Path, Message: p.Message}))
			}
			continue
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s line %d: schedules[%d]: %v", path, item.Line, i, err))
			continue
		}
		if j, dup := seen[d.ID]; dup {
			problems = append(problems, fmt.Sprintf("%s line %d: schedules[%d]: schedule %s is in the file twice (first at schedules[%d])", path, item.Line, i, d.ID, j))
			continue
		}
		seen[d.ID] = i
		canon, err := d.Canonical()
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s line %d: schedules[%d]: %v", path, item.Line, i, err))
			continue
		}
		out = append(out, canon)
	}
	return out, problems
}
