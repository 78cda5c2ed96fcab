package config

import (
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/tracing"
)

// Problem is one invalid configuration value.
type Problem struct {
	// Key is the dotted key (engine.lock_ttl), or the variable or file
	// that could not be read.
	Key string
	// Source says where the value came from: "default", "file weft.yaml",
	// "env WEFT_ENGINE_LOCK_TTL", "flag --listen".
	Source  string
	Message string
}

// String is the problem as a line of the error: key, source, message.
func (p Problem) String() string {
	if p.Source == "" || p.Source == "default" {
		return fmt.Sprintf("%s: %s", p.Key, p.Message)
	}
	return fmt.Sprintf("%s (from %s): %s", p.Key, p.Source, p.Message)
}

// ErrInvalid is matched by an *Error.
var ErrInvalid = errors.New("invalid configuration")

// Error lists every problem of a configuration. It matches ErrInvalid.
type Error struct {
	Problems []Problem
}

// Error lists the problems, one a line.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Sources are the layers of a configuration over its defaults, lowest
// first: the file, the environment, the command line.
type Sources struct {
	// File is the --config file; empty means weft.yaml in Dir when present.
	File string
	// Dir is the working directory, where weft.yaml is looked for.
	Dir string
	// Env is the environment, as os.Environ returns it.
	Env []string
	// Flags are the values the command line gave, in its order.
	Flags []Flag
}

// Flag is one value the command line gave for a key. For a list key the
// values of its flags accumulate (each may be a comma list, as a variable
// writes a list); for another the last one wins.
type Flag struct {
	// Key is the setting's dotted key.
	Key string
	// Name is the flag without its dashes: a named flag ("listen",
	// "redis-addr") or "set" for --set KEY=VALUE, whose values override
	// the named flags' wherever they are on the line.
	Name  string
	Value string
}

// Loaded is a valid configuration and where each value came from.
type Loaded struct {
	settings
	// File is the configuration file read, or "".
	File string
	// Source maps each key to where its value came from; keys absent here
	// have their default.
	Source map[string]string

	// rootCAs are the system's roots and plugins.http.ca_file's; nil
	// without a ca_file.
	rootCAs *x509.CertPool
	// grants are grants_file's documents by plugin name, checked.
	grants map[string][]byte
	// schedules are schedules_file's documents, checked, in the file's
	// order.
	schedules [][]byte
}

// SourceOf says where key's value came from: a file, a variable or a flag,
// or "default".
func (c *Loaded) SourceOf(key string) string {
	if s := c.Source[key]; s != "" {
		return s
	}
	return "default"
}

// Grants are grants_file's grant documents by plugin name, each checked
// and in its canonical JSON; none without a grants_file.
func (c *Loaded) Grants() map[string][]byte { return c.grants }

// Schedules are schedules_file's schedule documents, each checked and in
// its canonical JSON, in the file's order; none without a schedules_file.
func (c *Loaded) Schedules() [][]byte { return c.schedules }

// noSuchSetting is the message for a key that names no setting.
const noSuchSetting = "no such setting (see the configuration reference in README.md)"

// Load merges defaults ← file ← environment ← flags with koanf (the
// standard OTEL_* variables under the WEFT_* ones, see otelEnv), decodes
// the result over the defaults with koanf's Unmarshal, validates it, and
// returns every problem at once as an *Error.
func Load(src Sources) (*Loaded, error) {
	out := &Loaded{settings: defaultConfig(), Source: map[string]string{}}
	var problems []Problem
	k := koanf.New(".")
	// load reads one provider into a koanf of its own and merges that over
	// the layers before it. koanf keeps values, not where they came from:
	// the keys each provider set are recorded in out.Source, for messages
	// and for `weft config`.
	load := func(layer string, p koanf.Provider, parser koanf.Parser, source func(key string) string) {
		l := koanf.New(".")
		err := l.Load(p, parser)
		if err == nil {
			for _, key := range l.Keys() {
				out.Source[key] = source(key)
			}
			err = k.Merge(l)
		}
		if err != nil {
			problems = append(problems, Problem{Key: "config", Source: layer, Message: err.Error()})
		}
	}

	// The file. An explicit --config must exist; weft.yaml is optional.
	path := src.File
	if path == "" {
		p := filepath.Join(src.Dir, "weft.yaml")
		if _, err := os.Stat(p); err == nil {
			path = p
		}
	}
	if path != "" {
		out.File = path
		fileSource := "file " + path
		load(fileSource, file.Provider(path), yaml.Parser(), func(string) string { return fileSource })
	}

	// The standard OpenTelemetry variables, under the WEFT_* ones.
	otel, otelProblems := otelEnv(src.Env)
	problems = append(problems, otelProblems...)
	load("env", confmap.Provider(otel.values, "."), nil, func(key string) string { return "env " + otel.vars[key] })

	// The environment. koanf cannot tell which underscores of
	// WEFT_ENGINE_LOCK_TTL were dots, so each variable is looked up by
	// name; a WEFT_* variable that names no key is a typo worth stopping
	// for.
	byEnv := map[string]string{}
	for _, key := range configKeys() {
		byEnv[envName(key.name)] = key.name
	}
	load("env", env.Provider(".", env.Opt{
		Prefix:      "WEFT_",
		EnvironFunc: func() []string { return src.Env },
		TransformFunc: func(name, value string) (string, any) {
			key, ok := byEnv[name]
			if !ok && !clientEnv(name) {
				problems = append(problems, Problem{Key: name, Source: "env", Message: noSuchSetting})
			}
			return key, value // koanf skips a variable without a key
		},
	}), nil, func(key string) string { return "env " + envName(key) })

	// The flags: the named ones, then --set.
	named, set := flagValues(src.Flags)
	load("flags", confmap.Provider(named.values, "."), nil, func(key string) string { return "flag --" + named.names[key] })
	load("flags", confmap.Provider(set.values, "."), nil, func(key string) string { return "flag --set " + key })

	// Decode what the layers set over the defaults. ErrorUnused makes a
	// key that names no setting an error, as a typo must be.
	err := k.UnmarshalWithConf("", &out.settings, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:  mapstructure.DecodeHookFuncValue(decodeSetting),
		ErrorUnused: true,
		// Keys are as written in the reference: Listen is a typo.
		MatchName: func(key, field string) bool { return key == field },
	}})
	problems = append(problems, decodeProblems(err, out.Source)...)
	// A base endpoint takes the traces' path over http/protobuf,
	// whichever layer chose the protocol.
	if out.Source["tracing.endpoint"] == "env OTEL_EXPORTER_OTLP_ENDPOINT" && out.Tracing.Protocol == tracing.ProtocolHTTP {
		out.Tracing.Endpoint = otelBaseEndpoint(out.Tracing.Endpoint)
	}
	// Unless chosen, the body budget follows the body limits.
	if out.Source["http.body_budget"] == "" {
		out.HTTP.BodyBudget = 4 * max(out.HTTP.BodyLimit, out.HTTP.PluginBodyLimit)
	}
	if len(problems) == 0 {
		problems = out.validate()
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return out, nil
}

// flagLayer is the values of one layer of flags by key, and the flag that
// gave each.
type flagLayer struct {
	values map[string]any
	names  map[string]string
}

// flagValues splits the command line's values into the named flags' layer
// and --set's, accumulating a list key's values and keeping another key's
// last.
func flagValues(flags []Flag) (named, set flagLayer) {
	named = flagLayer{values: map[string]any{}, names: map[string]string{}}
	set = flagLayer{values: map[string]any{}, names: map[string]string{}}
	lists := map[string]bool{}
	for _, k := range configKeys() {
		lists[k.name] = k.typ == stringsType
	}
	for _, f := range flags {
		l := &named
		if f.Name == "set" {
			l = &set
		}
		value := f.Value
		if prev, ok := l.values[f.Key].(string); ok && lists[f.Key] {
			value = prev + "," + value
		}
		l.values[f.Key], l.names[f.Key] = value, f.Name
	}
	return named, set
}

// decodeSetting is the decode hook of koanf's Unmarshal: it turns the raw
// values of a YAML file (string, int, float64, bool, []any,
// map[string]any) and of the environment and flags (string) into
// Config's types, with an error saying what was wanted; mapstructure
// adds the setting's name.
func decodeSetting(from, to reflect.Value) (any, error) {
	raw := from.Interface()
	if from.Type() == to.Type() {
		return raw, nil
	}
	switch to.Type() {
	case durationType:
		s, ok := raw.(string)
		if !ok {
			return nil, fmt.Errorf("want a duration such as 500ms, 10s, 2m or 7d, got %v", raw)
		}
		// Days as workflow definitions write them: retention: 7d.
		d, err := definition.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("want a duration such as 500ms, 10s, 2m or 7d, got %q", s)
		}
		return d, nil
	case byteSizeType:
		if s, ok := raw.(string); ok {
			return parseByteSize(s)
		}
		if n, ok := wholeNumber(raw); ok {
			return byteSize(n), nil
		}
		return nil, fmt.Errorf("want a size such as 1048576, 512KiB or 32MiB, got %v", raw)
	case stringsType:
		return decodeStrings(raw)
	case tokensType:
		if s, ok := raw.(string); ok {
			return decodeTokens(s)
		}
		if from.Kind() != reflect.Slice {
			return nil, fmt.Errorf("want a list of {name, role, token}, got %v", raw)
		}
		return raw, nil // mapstructure decodes each mapping
	case tokenType:
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, errors.New("want a mapping {name, role, token}")
		}
		// A secret is written as a string: a YAML number would be
		// read as another one.
		for _, field := range slices.Sorted(maps.Keys(m)) {
			if _, ok := m[field].(string); !ok && m[field] != nil {
				return nil, fmt.Errorf("%s: want a string (quote it), got %v", field, m[field])
			}
		}
		return raw, nil
	}
	switch to.Kind() {
	case reflect.Struct:
		if from.Kind() != reflect.Map {
			return nil, errors.New("is a section: want a mapping of its settings")
		}
	case reflect.String:
		switch raw.(type) {
		case int, int64, uint64, float64, bool:
			return fmt.Sprint(raw), nil
		}
		return nil, fmt.Errorf("want a string, got %v", raw)
	case reflect.Int:
		if s, ok := raw.(string); ok {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("want a whole number, got %q", s)
			}
			return n, nil
		}
		if n, ok := wholeNumber(raw); ok {
			return int(n), nil
		}
		return nil, fmt.Errorf("want a whole number, got %v", raw)
	case reflect.Float64:
		switch x := raw.(type) {
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil {
				return nil, fmt.Errorf("want a number such as 0.25, got %q", x)
			}
			return f, nil
		case float64:
			return x, nil
		case int:
			return float64(x), nil
		case int64:
			return float64(x), nil
		}
		return nil, fmt.Errorf("want a number such as 0.25, got %v", raw)
	case reflect.Bool:
		if s, ok := raw.(string); ok {
			switch strings.ToLower(strings.TrimSpace(s)) {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
		return nil, fmt.Errorf("want true or false, got %v", raw)
	}
	return raw, nil
}

// wholeNumber returns a YAML number that is whole.
func wholeNumber(raw any) (int64, bool) {
	switch x := raw.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= -1<<63 && x < 1<<63 { // fits an int64
			return int64(x), true
		}
	}
	return 0, false
}

// decodeStrings accepts a YAML list of strings or a comma-separated
// string, as the environment and flags write a list.
func decodeStrings(raw any) ([]string, error) {
	var list []string
	switch x := raw.(type) {
	case string:
		list = strings.Split(x, ",")
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("[%d]: want a string, got %v", i, e)
			}
			list = append(list, s)
		}
	default:
		return nil, fmt.Errorf("want a list of strings or a comma-separated string, got %v", raw)
	}
	out := []string{}
	for _, s := range list {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// decodeTokens reads the environment's and flags' form of auth.tokens:
// "name:role:token" entries separated by commas (the token may itself
// contain colons, as "sha256:<hex>" does).
func decodeTokens(s string) ([]tokenConfig, error) {
	var out []tokenConfig
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("entry %d: want name:role:token", i+1)
		}
		out = append(out, tokenConfig{Name: parts[0], Role: parts[1], Token: parts[2]})
	}
	return out, nil
}

// decodeProblems turns the errors of koanf's Unmarshal, which
// mapstructure names by key (engine.lock_ttl, auth.tokens[1]), into
// problems that also say where the value came from.
func decodeProblems(err error, source map[string]string) []Problem {
	// mapstructure joins the errors of a struct's fields and wraps the
	// whole in a line of its own.
	de, ok := err.(*mapstructure.DecodeError)
	if !ok {
		switch e := err.(type) {
		case nil:
			return nil
		case interface{ Unwrap() []error }:
			var ps []Problem
			for _, e := range e.Unwrap() {
				ps = append(ps, decodeProblems(e, source)...)
			}
			return ps
		case interface{ Unwrap() error }:
			return decodeProblems(e.Unwrap(), source)
		}
		return []Problem{{Key: "config", Message: err.Error()}}
	}
	name, msg := de.Name(), de.Unwrap().Error()
	// mapstructure (from v2.5.0) names the root by its type where it
	// named it "".
	if name == reflect.TypeFor[settings]().String() {
		name = ""
	}
	// ErrorUnused's error lists the section's unknown keys; each is a
	// problem of its own, with its own source. The message is
	// mapstructure's: should it change, the error is reported as it is.
	unknown, ok := strings.CutPrefix(msg, "has invalid keys: ")
	if !ok {
		return []Problem{keyProblem(name, msg, source)}
	}
	var ps []Problem
	for _, key := range strings.Split(unknown, ", ") {
		if name != "" {
			key = name + "." + key
		}
		if strings.Contains(key, "[") {
			ps = append(ps, keyProblem(key, "no such field (want name, role, token)", source))
			continue
		}
		// An unknown section: each key the layers set under it.
		var under []string
		for k := range source {
			if strings.HasPrefix(k, key+".") {
				under = append(under, k)
			}
		}
		if len(under) == 0 {
			under = []string{key}
		}
		slices.Sort(under)
		for _, k := range under {
			ps = append(ps, keyProblem(k, noSuchSetting, source))
		}
	}
	return ps
}

// keyProblem is a problem of a dotted key. An element of a list
// (auth.tokens[1].role) came from wherever the list did, and is named
// after it.
func keyProblem(key, msg string, source map[string]string) Problem {
	if root, rest, ok := strings.Cut(key, "["); ok {
		return Problem{Key: root, Source: keySource(root, source), Message: "[" + rest + ": " + msg}
	}
	return Problem{Key: key, Source: keySource(key, source), Message: msg}
}

// keySource is where key's value came from. koanf records the leaves of
// a mapping, so a mapping written where a value was wanted (listen:
// {a: 1}) came from where its first leaf did.
func keySource(key string, source map[string]string) string {
	if s, ok := source[key]; ok {
		return s
	}
	for _, k := range slices.Sorted(maps.Keys(source)) {
		if strings.HasPrefix(k, key+".") {
			return source[k]
		}
	}
	return ""
}

// validate checks every value and returns all the problems, each naming
