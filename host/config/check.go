package config

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/plugins"
)

// checker collects the problems of a configuration.
type checker struct {
	c  *Loaded
	ps []Problem
	// own are the keys the host's own rules found wrong: what a library
	// says of them as well is left out, one problem a key being enough.
	own map[string]bool
}

// validate checks every value and returns all the problems, each naming
// its key and source, in the order of the keys: the host's own rules, then
// the libraries' validation of the fields the keys set.
func (c *Loaded) validate() []Problem {
	v := &checker{c: c, own: map[string]bool{}}
	v.host()
	v.libraries()
	order := map[string]int{}
	for i, k := range configKeys() {
		order[k.name] = i
	}
	slices.SortStableFunc(v.ps, func(a, b Problem) int {
		ra, _, _ := strings.Cut(a.Key, "[")
		rb, _, _ := strings.Cut(b.Key, "[")
		return cmp.Compare(order[ra], order[rb])
	})
	return v.ps
}

// bad adds a problem of key found by the host's own rules.
func (v *checker) bad(key, format string, args ...any) {
	v.add(key, fmt.Sprintf(format, args...))
	v.own[key] = true
}

// add adds a problem of key; an element of a list (auth.tokens[1].role)
// came from wherever the list did.
func (v *checker) add(key, msg string) {
	root, _, _ := strings.Cut(key, "[")
	v.ps = append(v.ps, Problem{Key: key, Source: v.c.Source[root], Message: msg})
}

// host checks the rules that are the host's own: its listener, files and
// log, the units it writes sizes in, its policy for secrets in a file, and
// the rules between two libraries' settings. Every other rule is a
// library's (see libraries).
func (v *checker) host() {
	c := v.c
	if err := checkHostPort(c.Listen); err != nil {
		v.bad("listen", "%v", err)
	}
	if c.WorkflowsDir != "" {
		if err := checkDir(c.WorkflowsDir); err != nil {
			v.bad("workflows_dir", "%v", err)
		}
	}
	for i, d := range c.SeedDirs {
		if err := checkDir(d); err != nil {
			v.bad("seed_dirs", "[%d]: %v", i, err)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		v.bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		v.bad("log.format", "want text or json, got %q", c.Log.Format)
	}
	if c.HTTP.ShutdownTimeout <= 0 {
		v.bad("http.shutdown_timeout", "must be positive, got %s", c.HTTP.ShutdownTimeout)
	}
	v.tapes()
	if c.HTTP.PluginBodyLimit < c.Plugins.MaxModuleBytes && c.Source["http.plugin_body_limit"] != "" {
		// Only worth saying when someone chose the limit: it hides
		// plugins.max_module_bytes.
		v.bad("http.plugin_body_limit", "is %s, below plugins.max_module_bytes (%s): plugins between the two could never be uploaded", c.HTTP.PluginBodyLimit, c.Plugins.MaxModuleBytes)
	}
	// A secret written in a file or a variable is long enough not to be
	// guessed, or is its digest (the API checks the digest's form).
	for i, t := range c.Auth.Tokens {
		if t.Token != "" && !strings.HasPrefix(t.Token, "sha256:") && len(t.Token) < 16 {
			v.bad(fmt.Sprintf("auth.tokens[%d].token", i), "a plain token must be at least 16 characters, got %d (or write sha256:<hex digest>)", len(t.Token))
		}
	}
	// The runtime counts memory in WebAssembly pages, the host in bytes.
	if c.Plugins.MemoryLimit%(64<<10) != 0 {
		v.bad("plugins.memory_limit", "want a multiple of 64KiB (a WebAssembly page), got %s", c.Plugins.MemoryLimit)
	}
	if ca := c.Plugins.HTTP.CAFile; ca != "" {
		pool, err := loadRootCAs(ca)
		if err != nil {
			v.bad("plugins.http.ca_file", "%v", err)
		}
		c.rootCAs = pool
	}
	if c.GrantsFile != "" {
		grants, problems := readGrantsFile(c.GrantsFile)
		for _, p := range problems {
			v.bad("grants_file", "%s", p)
		}
		c.grants = grants
	}
	if c.SchedulesFile != "" {
		docs, problems := readSchedulesFile(c.SchedulesFile)
		for _, p := range problems {
			v.bad("schedules_file", "%s", p)
		}
		c.schedules = docs
	}
}

// libraries has each library judge the fields the keys set, as they are
// set (asSet), and names what it finds wrong by key.
func (v *checker) libraries() {
	libs := v.c.libraries()
	n := libs.node
	v.library(nodeLib, asSet(n, n.WithDefaults(), nodeLib).Validate())
	eng := asSet(n.Engine, n.Engine.WithDefaults(), engineLib)
	v.library(engineLib, eng.Validate())
	hb := asSet(n.Engine.Heartbeat, n.Engine.Heartbeat.WithDefaults(), heartbeatLib)
	hbErr := hb.Validate()
	v.library(heartbeatLib, hbErr)
	v.library(pluginsLib, asSet(n.Plugins, n.Plugins.WithDefaults(), pluginsLib).Validate())
	v.library(apiLib, asSet(libs.api, libs.api.WithDefaults(), apiLib).Validate())
	v.library(tracingLib, asSet(n.Tracing, n.Tracing.WithDefaults(), tracingLib).Validate())

	// Leases are renewed once per heartbeat cycle. The scheduler warns of
	// a TTL that does not exceed two cycles, which may expire between two
	// renewals on a healthy node; a host does not start with one. The
	// key blamed is the one chosen when only the other has its default.
	if hbErr != nil || slices.ContainsFunc(v.ps, func(p Problem) bool { return p.Key == "engine.lock_ttl" }) {
		return
	}
	s, err := heartbeat.New(hb)
	if err != nil {
		return
	}
	for _, w := range s.CheckTTL("engine.lock_ttl", eng.LockTTL) {
		key := "engine.lock_ttl"
		if v.c.Source[key] == "" && v.c.Source["heartbeat.cycle"] != "" {
			key = "heartbeat.cycle"
		}
		v.bad(key, "%s (heartbeat.cycle is %s)", strings.TrimPrefix(w.Message, "heartbeat: "), hb.Cycle)
	}
}

// library adds the problems of a library's validation error: each of its
// ConfigErrors names a field, which becomes its key, and the fields the
// message names become theirs.
func (v *checker) library(lib library, err error) {
	for _, e := range leaves(err) {
		field, msg, ok := fieldError(e)
		key, detail, bound := keyOf(lib, field)
		if !ok || !bound {
			// A field no key sets has the library's default: the
			// library has refused its own default, a bug to report as it
			// is.
			v.add("config", e.Error())
			continue
		}
		if v.own[key] {
			continue
		}
		msg = strings.TrimPrefix(msg, "Config.")
		msg = strings.TrimPrefix(msg, field+" ")
		v.add(key, detail+keyNames(lib, msg))
	}
}

// leaves are the errors errors.Join joined into err, recursively.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// fieldError is the field and message of a library's ConfigError.
func fieldError(err error) (field, msg string, ok bool) {
	switch e := err.(type) {
	case *node.ConfigError:
		return e.Field, e.Message, true
	case *engine.ConfigError:
		return e.Field, e.Message, true
	case *heartbeat.ConfigError:
		return e.Field, e.Message, true
	case *plugins.ConfigError:
		return e.Field, e.Message, true
	case *api.ConfigError:
		return e.Field, e.Message, true
	case *tracing.ConfigError:
		return e.Field, e.Message, true
	}
	return "", "", false
}

// keyOf names a library's field by key. An element of a list of values
// ("RedisAddrs[1]") is its list's key, and the message says which
// ("[1]: "); a field of an element of a list of mappings
// ("Tokens[1].Role") is a key of its own (auth.tokens[1].role).
func keyOf(lib library, field string) (key, detail string, ok bool) {
	base, index, _ := strings.Cut(field, "[")
	for _, b := range bindings() {
		if b.lib != lib || b.field != base {
			continue
		}
		if index == "" {
			return b.key, "", true
		}
		i, sub, _ := strings.Cut(index, "]")
		if sub = strings.TrimPrefix(sub, "."); sub == "" {
			return b.key, "[" + i + "]: ", true
		}
		return b.key + "[" + i + "]." + strings.ToLower(sub), "", true
	}
	return "", "", false
}

// keyNames rewrites the fields of lib that msg names as their keys: "at
// least Config.Tick" reads "at least heartbeat.tick".
func keyNames(lib library, msg string) string {
	keys := map[string]string{}
	var names []string
	for _, b := range bindings() {
		if b.lib == lib {
			keys[b.field] = b.key
			names = append(names, regexp.QuoteMeta(b.field))
		}
	}
	// Longer names first, so that none is taken for the start of another.
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	re := regexp.MustCompile(`\b(?:Config\.)?(?:` + strings.Join(names, "|") + `)\b`)
	return re.ReplaceAllStringFunc(msg, func(name string) string { return keys[strings.TrimPrefix(name, "Config.")] })
}

// checkHostPort accepts an address to listen on, HOST:PORT.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("want a port between 0 and 65535, got %q", port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("want a host name or IP address, got %q", host)
	}
	return nil
}

// checkDir accepts a directory that exists.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}
