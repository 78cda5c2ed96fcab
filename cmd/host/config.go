package main

import (
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/basicflag"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/definition"
	"github.com/weftworks/weft/host/engine"
	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/plugins"
)

// Config is the host's configuration: `weft serve` reads it, `weft config`
// prints it. Every leaf field is one key (its koanf tag, nested with dots),
// one WEFT_* environment variable (see envName) and one row of the README's
// configuration reference, which a test keeps in step with this struct.
type Config struct {
	// Listen is the HTTP address. Defaults to 127.0.0.1:8080.
	Listen string `koanf:"listen"`
	// DataDir holds the embedded store, plugin blobs and the compiled code
	// cache. Defaults to ./data.
	DataDir string `koanf:"data_dir"`
	// NodeID names this node in leases and history. Defaults to the host
	// name and the process id, "vm-4242".
	NodeID string `koanf:"node_id"`
	// Store is embedded (bbolt under DataDir, local locks) or redis.
	// Defaults to embedded.
	Store string `koanf:"store"`
	// RedisAddrs are the Redis servers of cluster mode.
	RedisAddrs []string `koanf:"redis_addrs"`
	// WorkflowsDir is where POST /v1/admin/refresh reads definitions from.
	// Empty disables refresh.
	WorkflowsDir string `koanf:"workflows_dir"`
	// SeedDirs are loaded on a first start (empty store): *.wasm files as
	// plugins, *.yaml, *.yml and *.json files as workflows.
	SeedDirs []string `koanf:"seed_dirs"`
	// GrantsFile is a YAML or JSON file mapping plugin names to grant
	// documents, applied at every start. Empty applies none.
	GrantsFile string `koanf:"grants_file"`

	Log       LogConfig       `koanf:"log"`
	HTTP      HTTPConfig      `koanf:"http"`
	Auth      AuthConfig      `koanf:"auth"`
	Plugins   PluginsConfig   `koanf:"plugins"`
	Engine    EngineConfig    `koanf:"engine"`
	Heartbeat HeartbeatConfig `koanf:"heartbeat"`
	History   HistoryConfig   `koanf:"history"`
}

// LogConfig configures the host's own log, on stderr.
type LogConfig struct {
	// Level is debug, info, warn or error. Defaults to info.
	Level string `koanf:"level"`
	// Format is text or json. Defaults to text.
	Format string `koanf:"format"`
}

// HTTPConfig configures the HTTP server.
type HTTPConfig struct {
	// BodyLimit caps request bodies other than plugins. Defaults to 1MiB.
	BodyLimit ByteSize `koanf:"body_limit"`
	// PluginBodyLimit caps PUT /v1/plugins/{name} bodies. Defaults to
	// 32MiB.
	PluginBodyLimit ByteSize `koanf:"plugin_body_limit"`
	// ShutdownTimeout bounds the graceful shutdown: draining requests and
	// stopping the engine. Defaults to 30s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// BodyBudget caps the request bodies held in memory at once. Defaults
	// to four times the larger body limit.
	BodyBudget ByteSize `koanf:"body_budget"`
	// WriteTimeout bounds writing a response once it is ready
	// (api.Config.WriteTimeout): a ?wait= is not cut by it, a backup
	// must make progress within it. Defaults to 2m.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// ReadTimeout bounds reading a request (api.Config.ReadTimeout).
	// Defaults to 2m.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// BodyTimeout and BodyRate bound how long a body may take to arrive
	// once the host starts reading it: BodyTimeout plus a second per
	// BodyRate bytes (api.Config.BodyTimeout, BodyRate). Default to 10s
	// and 128KiB.
	BodyTimeout time.Duration `koanf:"body_timeout"`
	BodyRate    ByteSize      `koanf:"body_rate"`
	// IdleTimeout bounds a keep-alive connection's wait for its next
	// request (api.Config.IdleTimeout). Defaults to 1m.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// RequestTimeout bounds the store and engine work of a request, not a
	// ?wait= (api.Config.RequestTimeout). Defaults to 30s.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// MaxStreams bounds the event streams open at once
	// (api.Config.MaxStreams). Defaults to 256.
	MaxStreams int `koanf:"max_streams"`
	// StreamPoll is how often an event stream looks at the store for
	// changes other nodes made, and sends a keep-alive
	// (api.Config.StreamPoll). Defaults to 5s.
	StreamPoll time.Duration `koanf:"stream_poll"`
}

// AuthConfig configures bearer tokens.
type AuthConfig struct {
	// Tokens are the accepted bearer tokens. None means no authentication,
	// which the host allows only on a loopback address.
	Tokens []TokenConfig `koanf:"tokens"`
}

// TokenConfig is one bearer token.
type TokenConfig struct {
	Name string `koanf:"name"`
	// Role is admin, operator or reader.
	Role string `koanf:"role"`
	// Token is the secret itself or "sha256:" and its hex digest.
	Token string `koanf:"token"`
}

// PluginsConfig configures the plugin runtime (plugins.Config).
type PluginsConfig struct {
	CacheDir          string        `koanf:"cache_dir"`
	MaxModuleBytes    ByteSize      `koanf:"max_module_bytes"`
	MemoryLimit       ByteSize      `koanf:"memory_limit"`
	MaxOutputBytes    ByteSize      `koanf:"max_output_bytes"`
	MaxLogBytes       ByteSize      `koanf:"max_log_bytes"`
	MaxLogRecords     int           `koanf:"max_log_records"`
	MaxHeartbeatBytes ByteSize      `koanf:"max_heartbeat_bytes"`
	MaxTableElements  int           `koanf:"max_table_elements"`
	MaxStackBytes     ByteSize      `koanf:"max_stack_bytes"`
	MaxMemory         ByteSize      `koanf:"max_memory"`
	IdleTimeout       time.Duration `koanf:"idle_timeout"`
	MaxFunctionBytes  ByteSize      `koanf:"max_function_bytes"`
	MaxCompiles       int           `koanf:"max_compiles"`
	PoolSize          int           `koanf:"pool_size"`
	PoolWarm          int           `koanf:"pool_warm"`
	CancelGrace       time.Duration `koanf:"cancel_grace"`
	LoadTimeout       time.Duration `koanf:"load_timeout"`
	// HTTP bounds the plugins' outbound HTTP requests.
	HTTP PluginsHTTPConfig `koanf:"http"`
}

// PluginsHTTPConfig bounds the plugins' outbound HTTP requests
// (plugins.HTTPConfig).
type PluginsHTTPConfig struct {
	MaxResponseBytes ByteSize      `koanf:"max_response_bytes"`
	MaxRequestBytes  ByteSize      `koanf:"max_request_bytes"`
	MaxHeaders       int           `koanf:"max_headers"`
	MaxHeaderBytes   ByteSize      `koanf:"max_header_bytes"`
	MaxRequests      int           `koanf:"max_requests"`
	ConnectTimeout   time.Duration `koanf:"connect_timeout"`
	Timeout          time.Duration `koanf:"timeout"`
	// CAFile is a PEM file of root certificate authorities trusted beside
	// the system's. Empty trusts the system's only.
	CAFile string `koanf:"ca_file"`
}

// EngineConfig configures the workflow engine (engine.Config).
type EngineConfig struct {
	Workers int `koanf:"workers"`
	// EagerStarts runs a start on the node that took it when one of its
	// workers is idle (engine.Config.EagerStarts). Defaults to true.
	EagerStarts      bool          `koanf:"eager_starts"`
	LockTTL          time.Duration `koanf:"lock_ttl"`
	AcquireTimeout   time.Duration `koanf:"acquire_timeout"`
	ActivityTimeout  time.Duration `koanf:"activity_timeout"`
	TimerInterval    time.Duration `koanf:"timer_interval"`
	StimulusTTL      time.Duration `koanf:"stimulus_ttl"`
	StimulusInterval time.Duration `koanf:"stimulus_interval"`
	RecoveryInterval time.Duration `koanf:"recovery_interval"`
	// Retention is how long a finished instance is kept when its workflow
	// sets no retention; 0 keeps finished instances forever. Defaults to
	// engine.DefaultRetention (7 days).
	Retention         time.Duration `koanf:"retention"`
	RetentionInterval time.Duration `koanf:"retention_interval"`
}

// HeartbeatConfig configures the heartbeat scheduler (heartbeat.Config).
type HeartbeatConfig struct {
	Tick       time.Duration `koanf:"tick"`
	Batch      int           `koanf:"batch"`
	Cycle      time.Duration `koanf:"cycle"`
	MaxRetries int           `koanf:"max_retries"`
}

// HistoryConfig says what instances' histories keep.
type HistoryConfig struct {
	// AttemptDataLimit caps each activity attempt's input and output as
	// its history entries keep them (engine.Config.AttemptDataLimit); a
	// larger one is recorded by its size only. 0 records neither.
	// Defaults to engine.DefaultAttemptDataLimit (16KiB).
	AttemptDataLimit ByteSize `koanf:"attempt_data_limit"`
}

// ByteSize is a size in bytes, written as a number of bytes or with a unit:
// 512KiB, 32MiB, 1GiB (also KB, MB, GB as powers of 1000).
type ByteSize int64

// String formats b with the largest binary unit that divides it.
func (b ByteSize) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if b != 0 && int64(b)%u.n == 0 {
			return strconv.FormatInt(int64(b)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

var byteUnits = map[string]int64{
	"": 1, "b": 1,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30,
	"kb": 1e3, "mb": 1e6, "gb": 1e9,
	"k": 1 << 10, "m": 1 << 20, "g": 1 << 30,
}

func parseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := byteUnits[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("want a size such as 1048576, 512KiB or 32MiB, got %q", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) > 1<<53 {
		return 0, fmt.Errorf("want a size such as 1048576, 512KiB or 32MiB, got %q", s)
	}
	return ByteSize(f * float64(mult)), nil
}

// defaultConfig is the configuration before any file, variable or flag.
// The engine, runtime and scheduler defaults come from their packages.
func defaultConfig() Config {
	eng := engine.Config{}.WithDefaults()
	pl := plugins.Config{}.WithDefaults()
	hb := heartbeat.Config{}.WithDefaults()
	// Unique per process, so that nodes started on one machine are told
	// apart in leases and history; node_id gives a stable name.
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "weft"
	}
	node := fmt.Sprintf("%s-%d", host, os.Getpid())
	return Config{
		Listen:  "127.0.0.1:8080",
		DataDir: "./data",
		NodeID:  node,
		Store:   "embedded",
		Log:     LogConfig{Level: "info", Format: "text"},
		HTTP: HTTPConfig{
			BodyLimit:       1 << 20,
			PluginBodyLimit: ByteSize(pl.MaxModuleBytes),
			ShutdownTimeout: 30 * time.Second,
			BodyBudget:      4 * ByteSize(pl.MaxModuleBytes),
			WriteTimeout:    api.DefaultWriteTimeout,
			ReadTimeout:     api.DefaultReadTimeout,
			BodyTimeout:     api.DefaultBodyTimeout,
			BodyRate:        api.DefaultBodyRate,
			IdleTimeout:     api.DefaultIdleTimeout,
			RequestTimeout:  api.DefaultRequestTimeout,
			MaxStreams:      api.DefaultMaxStreams,
			StreamPoll:      api.DefaultStreamPoll,
		},
		Plugins: PluginsConfig{
			MaxModuleBytes:    ByteSize(pl.MaxModuleBytes),
			MemoryLimit:       ByteSize(pl.MemoryLimitPages) * 64 << 10,
			MaxOutputBytes:    ByteSize(pl.MaxOutputBytes),
			MaxLogBytes:       ByteSize(pl.MaxLogBytes),
			MaxLogRecords:     pl.MaxLogRecords,
			MaxHeartbeatBytes: ByteSize(pl.MaxHeartbeatBytes),
			MaxTableElements:  int(pl.MaxTableElements),
			MaxStackBytes:     ByteSize(pl.MaxStackBytes),
			MaxMemory:         ByteSize(pl.MaxMemory),
			IdleTimeout:       pl.IdleTimeout,
			MaxFunctionBytes:  ByteSize(pl.MaxFunctionBytes),
			MaxCompiles:       pl.MaxCompiles,
			PoolSize:          pl.PoolSize,
			PoolWarm:          pl.PoolWarm,
			CancelGrace:       pl.CancelGrace,
			LoadTimeout:       pl.LoadTimeout,
			HTTP: PluginsHTTPConfig{
				MaxResponseBytes: ByteSize(pl.HTTP.MaxResponseBytes),
				MaxRequestBytes:  ByteSize(pl.HTTP.MaxRequestBytes),
				MaxHeaders:       pl.HTTP.MaxHeaders,
				MaxHeaderBytes:   ByteSize(pl.HTTP.MaxHeaderBytes),
				MaxRequests:      pl.HTTP.MaxRequests,
				ConnectTimeout:   pl.HTTP.ConnectTimeout,
				Timeout:          pl.HTTP.Timeout,
			},
		},
		Engine: EngineConfig{
			Workers: eng.Workers,
			// The engine's zero value queues every start; a host runs them
			// where they arrive while it has an idle worker.
			EagerStarts:      true,
			LockTTL:          eng.LockTTL,
			AcquireTimeout:   eng.AcquireTimeout,
			ActivityTimeout:  eng.ActivityTimeout,
			TimerInterval:    eng.TimerInterval,
			StimulusTTL:      eng.StimulusTTL,
			StimulusInterval: eng.StimulusInterval,
			RecoveryInterval: eng.RecoveryInterval,
			// The engine's zero value deletes nothing; a host keeps a
			// week unless told otherwise, so that its store stops growing.
			Retention:         engine.DefaultRetention,
			RetentionInterval: eng.RetentionInterval,
		},
		Heartbeat: HeartbeatConfig{Tick: hb.Tick, Batch: hb.Batch, Cycle: hb.Cycle, MaxRetries: hb.MaxRetries},
		// The engine's zero value records no attempt data; a host keeps
		// documents of a readable size.
		History: HistoryConfig{AttemptDataLimit: engine.DefaultAttemptDataLimit},
	}
}

// configKey is one leaf of Config: its dotted key and where it lives.
type configKey struct {
	name  string
	index []int // reflect field index path from Config
	typ   reflect.Type
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[ByteSize]()
	stringsType  = reflect.TypeFor[[]string]()
	tokensType   = reflect.TypeFor[[]TokenConfig]()
	tokenType    = reflect.TypeFor[TokenConfig]()
)

// configKeys lists Config's leaves in declaration order.
func configKeys() []configKey {
	var keys []configKey
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("koanf")
			if tag == "" {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				walk(f.Type, prefix+tag+".", idx)
				continue
			}
			keys = append(keys, configKey{name: prefix + tag, index: idx, typ: f.Type})
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return keys
}

// envName is the environment variable of a key: WEFT_, then the key in
// upper case with dots and underscores both written as underscores
// (engine.lock_ttl → WEFT_ENGINE_LOCK_TTL). Config's keys are chosen so
// that no two share a name, which a test checks.
func envName(key string) string {
	return "WEFT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// clientEnv are the WEFT_* variables the CLI client reads; the server's
// configuration ignores them.
var clientEnv = map[string]bool{"WEFT_SERVER": true, "WEFT_TOKEN": true, "WEFT_OUTPUT": true}

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

// ErrInvalidConfig is matched by a *ConfigError.
var ErrInvalidConfig = errors.New("invalid configuration")

// ConfigError lists every problem of a configuration. It matches
// ErrInvalidConfig.
type ConfigError struct {
	Problems []Problem
}

// Error lists the problems, one a line.
func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("invalid configuration:")
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is reports whether target is ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// configSources are the layers of a configuration, lowest first.
type configSources struct {
	// File is the --config file; empty means weft.yaml in Dir when present.
	File string
	// Dir is the working directory, where weft.yaml is looked for.
	Dir string
	// Env is the environment, as os.Environ returns it.
	Env []string
	// Flags is the parsed command line; nil reads no flags.
	Flags *hostFlags
}

// LoadedConfig is a valid configuration and where each value came from.
type LoadedConfig struct {
	Config
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
}

// noSuchSetting is the message for a key that names no setting.
const noSuchSetting = "no such setting (see the configuration reference in README.md)"

// loadConfig merges defaults ← file ← environment ← flags with koanf,
// decodes the result over the defaults with koanf's Unmarshal, validates
// it, and returns every problem at once as a *ConfigError.
func loadConfig(src configSources) (*LoadedConfig, error) {
	out := &LoadedConfig{Config: defaultConfig(), Source: map[string]string{}}
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
			if !ok && !clientEnv[name] {
				problems = append(problems, Problem{Key: name, Source: "env", Message: noSuchSetting})
			}
			return key, value // koanf skips a variable without a key
		},
	}), nil, func(key string) string { return "env " + envName(key) })

	// The flags: the named ones, then --set.
	if h := src.Flags; h != nil {
		load("flags", h.provider(), nil, func(key string) string { return "flag --" + h.flags[key] })
		load("flags", confmap.Provider(h.set, "."), nil, func(key string) string { return "flag --set " + key })
	}

	// Decode what the layers set over the defaults. ErrorUnused makes a
	// key that names no setting an error, as a typo must be.
	err := k.UnmarshalWithConf("", &out.Config, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: &mapstructure.DecoderConfig{
		DecodeHook:  mapstructure.DecodeHookFuncValue(decodeSetting),
		ErrorUnused: true,
		// Keys are as written in the reference: Listen is a typo.
		MatchName: func(key, field string) bool { return key == field },
	}})
	problems = append(problems, decodeProblems(err, out.Source)...)
	// Unless chosen, the body budget follows the body limits.
	if out.Source["http.body_budget"] == "" {
		out.HTTP.BodyBudget = 4 * max(out.HTTP.BodyLimit, out.HTTP.PluginBodyLimit)
	}
	if len(problems) == 0 {
		problems = out.validate()
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return out, nil
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
			return ByteSize(n), nil
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
func decodeTokens(s string) ([]TokenConfig, error) {
	var out []TokenConfig
	for i, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("entry %d: want name:role:token", i+1)
		}
		out = append(out, TokenConfig{Name: parts[0], Role: parts[1], Token: parts[2]})
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
// its key and source.
func (c *LoadedConfig) validate() []Problem {
	var ps []Problem
	bad := func(key, format string, args ...any) {
		// auth.tokens[1].role came from wherever auth.tokens did.
		root, _, _ := strings.Cut(key, "[")
		ps = append(ps, Problem{Key: key, Source: c.Source[root], Message: fmt.Sprintf(format, args...)})
	}
	if err := checkHostPort(c.Listen); err != nil {
		bad("listen", "%v", err)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("data_dir", "must not be empty")
	}
	if c.NodeID == "" || len(c.NodeID) > 128 || strings.ContainsFunc(c.NodeID, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		bad("node_id", "want 1 to 128 characters without spaces or control characters, got %q", c.NodeID)
	}
	switch c.Store {
	case "embedded":
	case "redis":
		if len(c.RedisAddrs) == 0 {
			bad("redis_addrs", "the redis store needs at least one address (--redis-addr HOST:PORT)")
		}
	default:
		bad("store", "want embedded or redis, got %q", c.Store)
	}
	for i, a := range c.RedisAddrs {
		if err := checkHostPort(a); err != nil {
			bad("redis_addrs", "[%d]: %v", i, err)
		}
	}
	if c.WorkflowsDir != "" {
		if err := checkDir(c.WorkflowsDir); err != nil {
			bad("workflows_dir", "%v", err)
		}
	}
	for i, d := range c.SeedDirs {
		if err := checkDir(d); err != nil {
			bad("seed_dirs", "[%d]: %v", i, err)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "want debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "want text or json, got %q", c.Log.Format)
	}

	positiveSize := func(key string, b, min, max ByteSize) {
		if b < min || b > max {
			bad(key, "want between %s and %s, got %s", min, max, b)
		}
	}
	positiveSize("http.body_limit", c.HTTP.BodyLimit, 1<<10, 1<<30)
	positiveSize("http.plugin_body_limit", c.HTTP.PluginBodyLimit, 1<<10, 1<<30)
	if c.HTTP.PluginBodyLimit < c.Plugins.MaxModuleBytes && c.Source["http.plugin_body_limit"] != "" {
		// Only worth saying when someone chose the limit: it hides
		// plugins.max_module_bytes.
		bad("http.plugin_body_limit", "is %s, below plugins.max_module_bytes (%s): plugins between the two could never be uploaded", c.HTTP.PluginBodyLimit, c.Plugins.MaxModuleBytes)
	}
	if larger := max(c.HTTP.BodyLimit, c.HTTP.PluginBodyLimit); c.HTTP.BodyBudget < larger {
		bad("http.body_budget", "is %s, below the larger body limit (%s): such a body could never be read", c.HTTP.BodyBudget, larger)
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be positive, got %s", d)
		}
	}
	positive("http.shutdown_timeout", c.HTTP.ShutdownTimeout)
	positive("http.write_timeout", c.HTTP.WriteTimeout)
	positive("http.read_timeout", c.HTTP.ReadTimeout)
	positive("http.body_timeout", c.HTTP.BodyTimeout)
	if c.HTTP.BodyRate < 1024 {
		bad("http.body_rate", "must be at least 1KiB (a second's worth of a body), got %d bytes", int64(c.HTTP.BodyRate))
	}
	positive("http.idle_timeout", c.HTTP.IdleTimeout)
	positive("http.request_timeout", c.HTTP.RequestTimeout)
	positive("http.stream_poll", c.HTTP.StreamPoll)
	if c.HTTP.MaxStreams < 1 || c.HTTP.MaxStreams > 100_000 {
		bad("http.max_streams", "must be 1 to 100000, got %d", c.HTTP.MaxStreams)
	}

	names := map[string]bool{}
	secrets := map[string]bool{}
	for i, t := range c.Auth.Tokens {
		key := fmt.Sprintf("auth.tokens[%d]", i)
		if t.Name == "" {
			bad(key+".name", "must not be empty")
		} else if names[t.Name] {
			bad(key+".name", "%q is used by another token", t.Name)
		}
		names[t.Name] = true
		switch t.Role {
		case "admin", "operator", "reader":
		default:
			bad(key+".role", "want admin, operator or reader, got %q", t.Role)
		}
		if err := checkToken(t.Token); err != nil {
			bad(key+".token", "%v", err)
		} else if secrets[t.Token] {
			bad(key+".token", "the same token is configured twice")
		}
		secrets[t.Token] = true
	}

	positiveSize("plugins.max_module_bytes", c.Plugins.MaxModuleBytes, 1<<10, 1<<30)
	if c.Plugins.MemoryLimit < 64<<10 || c.Plugins.MemoryLimit > 4<<30 || c.Plugins.MemoryLimit%(64<<10) != 0 {
		bad("plugins.memory_limit", "want a multiple of 64KiB (a WebAssembly page) between 64KiB and 4GiB, got %s", c.Plugins.MemoryLimit)
	}
	positiveSize("plugins.max_output_bytes", c.Plugins.MaxOutputBytes, 1<<10, 1<<30)
	positiveSize("plugins.max_log_bytes", c.Plugins.MaxLogBytes, 0, 1<<30)
	if c.Plugins.MaxLogRecords < 1 || c.Plugins.MaxLogRecords > 1_000_000 {
		bad("plugins.max_log_records", "want between 1 and 1000000, got %d", c.Plugins.MaxLogRecords)
	}
	// Details are persisted at every heartbeat cycle: a few KiB is typical.
	positiveSize("plugins.max_heartbeat_bytes", c.Plugins.MaxHeartbeatBytes, 1<<10, 16<<20)
	if c.Plugins.MaxTableElements < 1 || c.Plugins.MaxTableElements > 1<<24 {
		bad("plugins.max_table_elements", "want between 1 and %d, got %d", 1<<24, c.Plugins.MaxTableElements)
	}
	positiveSize("plugins.max_stack_bytes", c.Plugins.MaxStackBytes, 64<<10, 256<<20)
	if c.Plugins.MaxMemory < c.Plugins.MemoryLimit {
		bad("plugins.max_memory", "is %s, below plugins.memory_limit (%s): an instance could never grow to its limit", c.Plugins.MaxMemory, c.Plugins.MemoryLimit)
	}
	positive("plugins.idle_timeout", c.Plugins.IdleTimeout)
	positiveSize("plugins.max_function_bytes", c.Plugins.MaxFunctionBytes, 1<<10, 1<<30)
	if c.Plugins.MaxCompiles < 1 {
		bad("plugins.max_compiles", "must be at least 1, got %d", c.Plugins.MaxCompiles)
	}
	if c.Plugins.PoolSize < 1 {
		bad("plugins.pool_size", "must be at least 1, got %d", c.Plugins.PoolSize)
	}
	if c.Plugins.PoolWarm < 0 || c.Plugins.PoolWarm > c.Plugins.PoolSize {
		bad("plugins.pool_warm", "want between 0 and plugins.pool_size (%d), got %d", c.Plugins.PoolSize, c.Plugins.PoolWarm)
	}
	positive("plugins.cancel_grace", c.Plugins.CancelGrace)
	positive("plugins.load_timeout", c.Plugins.LoadTimeout)
	ph := c.Plugins.HTTP
	positiveSize("plugins.http.max_response_bytes", ph.MaxResponseBytes, 1<<10, 1<<30)
	positiveSize("plugins.http.max_request_bytes", ph.MaxRequestBytes, 1<<10, 1<<30)
	if ph.MaxHeaders < 1 || ph.MaxHeaders > 10_000 {
		bad("plugins.http.max_headers", "want between 1 and 10000, got %d", ph.MaxHeaders)
	}
	positiveSize("plugins.http.max_header_bytes", ph.MaxHeaderBytes, 1<<10, 16<<20)
	if ph.MaxRequests < 1 || ph.MaxRequests > 1_000_000 {
		bad("plugins.http.max_requests", "want between 1 and 1000000, got %d", ph.MaxRequests)
	}
	positive("plugins.http.connect_timeout", ph.ConnectTimeout)
	positive("plugins.http.timeout", ph.Timeout)
	if ph.CAFile != "" {
		pool, err := loadRootCAs(ph.CAFile)
		if err != nil {
			bad("plugins.http.ca_file", "%v", err)
		}
		c.rootCAs = pool
	}
	if c.GrantsFile != "" {
		grants, problems := readGrantsFile(c.GrantsFile)
		for _, p := range problems {
			bad("grants_file", "%s", p)
		}
		c.grants = grants
	}

	if c.Engine.Workers < 1 {
		bad("engine.workers", "must be at least 1, got %d", c.Engine.Workers)
	}
	if c.Engine.LockTTL < time.Second {
		bad("engine.lock_ttl", "must be at least 1s, got %s", c.Engine.LockTTL)
	}
	positive("engine.acquire_timeout", c.Engine.AcquireTimeout)
	positive("engine.activity_timeout", c.Engine.ActivityTimeout)
	positive("engine.timer_interval", c.Engine.TimerInterval)
	positive("engine.stimulus_ttl", c.Engine.StimulusTTL)
	positive("engine.stimulus_interval", c.Engine.StimulusInterval)
	positive("engine.recovery_interval", c.Engine.RecoveryInterval)
	if c.Engine.Retention < 0 || c.Engine.Retention > definition.MaxRetention {
		bad("engine.retention", "want between 0 (keep finished instances forever) and %s (100 years), got %s", formatDuration(definition.MaxRetention), c.Engine.Retention)
	}
	positive("engine.retention_interval", c.Engine.RetentionInterval)

	positive("heartbeat.tick", c.Heartbeat.Tick)
	if c.Heartbeat.Batch < 1 {
		bad("heartbeat.batch", "must be at least 1, got %d", c.Heartbeat.Batch)
	}
	if c.Heartbeat.Cycle < c.Heartbeat.Tick {
		bad("heartbeat.cycle", "must be at least heartbeat.tick (%s), got %s", c.Heartbeat.Tick, c.Heartbeat.Cycle)
	}
	if c.Heartbeat.MaxRetries < 0 {
		bad("heartbeat.max_retries", "must not be negative, got %d", c.Heartbeat.MaxRetries)
	}
	// Leases are renewed once per heartbeat cycle; a TTL shorter than two
	// cycles loses instances to recovery while their node still runs them.
	if c.Heartbeat.Cycle > 0 && c.Engine.LockTTL < 2*c.Heartbeat.Cycle {
		key := "engine.lock_ttl"
		if c.Source[key] == "" && c.Source["heartbeat.cycle"] != "" {
			key = "heartbeat.cycle"
		}
		bad(key, "engine.lock_ttl (%s) must cover at least two heartbeat cycles (heartbeat.cycle %s)", c.Engine.LockTTL, c.Heartbeat.Cycle)
	}
	// Every attempt's entries may hold this twice over, and a history
	// page holds up to 1000 entries: beyond 16MiB a page of them would not
	// be readable in one answer.
	positiveSize("history.attempt_data_limit", c.History.AttemptDataLimit, 0, 16<<20)
	return ps
}

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

// checkToken accepts a secret of at least 16 bytes or "sha256:" followed by
// 64 hex digits.
func checkToken(t string) error {
	if rest, ok := strings.CutPrefix(t, "sha256:"); ok {
		if len(rest) != 64 || strings.IndexFunc(rest, func(r rune) bool {
			return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f' || 'A' <= r && r <= 'F')
		}) >= 0 {
			return errors.New(`want "sha256:" followed by 64 hex digits`)
		}
		return nil
	}
	if len(t) < 16 {
		return fmt.Errorf("a plain token must be at least 16 characters, got %d (or write sha256:<hex digest>)", len(t))
	}
	return nil
}

// maskToken hides a secret for display: a digest keeps its form, a plain
// token shows nothing of itself.
func maskToken(t string) string {
	if strings.HasPrefix(t, "sha256:") {
		return "sha256:****"
	}
	return "****"
}

// hostFlags are the flags of `weft serve` and `weft config`: a few named
// ones for the common keys and --set KEY=VALUE for any key.
type hostFlags struct {
	fs     *flag.FlagSet
	config string
	// keys maps a named flag to its key; flags maps a key back.
	keys, flags map[string]string
	// set holds the --set values by key.
	set map[string]any
}

// setFlag is --set KEY=VALUE.
type setFlag struct{ h *hostFlags }

func (f setFlag) String() string { return "" }

// Set records one KEY=VALUE; a list key's values accumulate, joined with
// commas as the environment writes a list.
func (f setFlag) Set(s string) error {
	key, value, ok := strings.Cut(s, "=")
	if !ok || key == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	if prev, ok := f.h.set[key].(string); ok && slices.ContainsFunc(configKeys(), func(k configKey) bool {
		return k.name == key && k.typ == stringsType
	}) {
		value = prev + "," + value
	}
	f.h.set[key] = value
	return nil
}

func newHostFlags(name string, stderr io.Writer) *hostFlags {
	h := &hostFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError), keys: map[string]string{}, flags: map[string]string{}, set: map[string]any{}}
	h.fs.SetOutput(stderr)
	h.fs.StringVar(&h.config, "config", "", "the configuration `FILE` (default: weft.yaml in the working directory, when present)")
	for _, f := range []struct {
		name, key, usage string
		list             bool
	}{
		{"listen", "listen", "the HTTP `ADDRESS` (default 127.0.0.1:8080)", false},
		{"data-dir", "data_dir", "the data `DIR` (default ./data)", false},
		{"node-id", "node_id", "this node's `ID` (default: the host name and the process id)", false},
		{"store", "store", "embedded or redis (default embedded)", false},
		{"redis-addr", "redis_addrs", "a Redis `HOST:PORT` (repeatable, or a comma list)", true},
		{"workflows-dir", "workflows_dir", "the `DIR` that admin refresh reads definitions from", false},
		{"seed", "seed_dirs", "a `DIR` of plugins (*.wasm) and workflows (*.yaml) to load on a first start (repeatable)", true},
		{"log-level", "log.level", "debug, info, warn or error (default info)", false},
		{"log-format", "log.format", "text or json (default text)", false},
	} {
		h.keys[f.name], h.flags[f.key] = f.key, f.name
		if f.list {
			// koanf reads the values joined with commas, as the
			// environment writes a list.
			h.fs.Var(new(listFlag), f.name, f.usage)
		} else {
			h.fs.String(f.name, "", f.usage)
		}
	}
	h.fs.Var(setFlag{h}, "set", "set any configuration `KEY=VALUE` (repeatable), e.g. --set engine.workers=8")
	return h
}

// provider is koanf's provider of the named flags given on the command
// line, by key.
func (h *hostFlags) provider() koanf.Provider {
	return basicflag.ProviderWithValue(h.fs, ".", func(name, value string) (string, any) {
		return h.keys[name], value // --config and --set have no key: skipped
	}, givenOnly{})
}

// givenOnly makes basicflag read only the flags given on the command
// line: it reads a flag left at its default when the key is absent from
// this map, and here every key is present. The defaults are
// defaultConfig's, and a flag's default must not be reported as its
// source.
type givenOnly struct{}

// Exists reports every key as set.
func (givenOnly) Exists(string) bool { return true }

// sources returns the configuration layers for these flags.
func (h *hostFlags) sources(dir string, env []string) configSources {
	return configSources{File: h.config, Dir: dir, Env: env, Flags: h}
}

// yamlNode renders the configuration as YAML in declaration order, with
// secrets masked and, as a line comment, the source of every value that
// is not a default.
func (c *LoadedConfig) yamlNode() *yamlv3.Node {
	root := &yamlv3.Node{Kind: yamlv3.MappingNode}
	sections := map[string]*yamlv3.Node{"": root}
	// section returns the mapping of a dotted section (plugins.http),
	// made inside its parent's the first time.
	var section func(path string) *yamlv3.Node
	section = func(path string) *yamlv3.Node {
		if m := sections[path]; m != nil {
			return m
		}
		parent, name := root, path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			parent, name = section(path[:i]), path[i+1:]
		}
		m := &yamlv3.Node{Kind: yamlv3.MappingNode}
		parent.Content = append(parent.Content, scalar(name), m)
		sections[path] = m
		return m
	}
	rv := reflect.ValueOf(c.Config)
	for _, key := range configKeys() {
		parent := root
		name := key.name
		if i := strings.LastIndexByte(key.name, '.'); i >= 0 {
			parent, name = section(key.name[:i]), key.name[i+1:]
		}
		k, v := scalar(name), valueNode(rv.FieldByIndex(key.index))
		if src := c.Source[key.name]; src != "" {
			// yaml.v3 misplaces a key's line comment after a flow
			// sequence; on the value it stays on the line.
			if v.Kind == yamlv3.SequenceNode && v.Style == yamlv3.FlowStyle {
				v.LineComment = "from " + src
			} else {
				k.LineComment = "from " + src
			}
		}
		parent.Content = append(parent.Content, k, v)
	}
	return root
}

func scalar(s string) *yamlv3.Node {
	return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: s}
}

func valueNode(v reflect.Value) *yamlv3.Node {
	switch v.Type() {
	case durationType:
		return scalar(formatDuration(time.Duration(v.Int())))
	case byteSizeType:
		n := scalar(ByteSize(v.Int()).String())
		if _, err := strconv.Atoi(n.Value); err == nil {
			n.Tag = "!!int"
		}
		return n
	case stringsType:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode, Style: yamlv3.FlowStyle}
		for _, s := range v.Interface().([]string) {
			n.Content = append(n.Content, scalar(s))
		}
		return n
	case tokensType:
		n := &yamlv3.Node{Kind: yamlv3.SequenceNode}
		if v.Len() == 0 {
			n.Style = yamlv3.FlowStyle
		}
		for _, t := range v.Interface().([]TokenConfig) {
			n.Content = append(n.Content, &yamlv3.Node{Kind: yamlv3.MappingNode, Style: yamlv3.FlowStyle, Content: []*yamlv3.Node{
				scalar("name"), scalar(t.Name), scalar("role"), scalar(t.Role), scalar("token"), scalar(maskToken(t.Token)),
			}})
		}
		return n
	}
	if v.Kind() == reflect.Int {
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v.Int(), 10)}
	}
	if v.Kind() == reflect.Bool {
		return &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v.Bool())}
	}
	return scalar(v.String())
}

// printConfig writes the effective configuration as YAML.
func printConfig(w io.Writer, c *LoadedConfig) error {
	enc := yamlv3.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(c.yamlNode()); err != nil {
		return err
	}
	return enc.Close()
}

// configCmd is `weft config [flags]`: it prints the effective
// configuration, or what is wrong with it.
func configCmd(args []string, env []string, stdout, stderr io.Writer) int {
	h := newHostFlags("weft config", stderr)
	if err := h.fs.Parse(args); err != nil {
		return exitUsage
	}
	if h.fs.NArg() > 0 {
		fmt.Fprintf(stderr, "weft config: unexpected argument %q\n", h.fs.Arg(0))
		return exitUsage
	}
	dir, _ := os.Getwd()
	cfg, err := loadConfig(h.sources(dir, env))
	if err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitFailed
	}
	if cfg.File != "" {
		fmt.Fprintf(stdout, "# configuration file: %s\n", cfg.File)
	}
	if err := printConfig(stdout, cfg); err != nil {
		fmt.Fprintf(stderr, "weft: %v\n", err)
		return exitInternal
	}
	return exitOK
}

// formatDuration is d.String() without the zero units it ends with: 10m
// rather than 10m0s, 24h rather than 24h0m0s.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
