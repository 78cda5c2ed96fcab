// Package config is the host's configuration: the keys of weft.yaml, their
// WEFT_* variables and the flags of `weft serve` and `weft config`, merged
// in koanf layers with where each value came from. It declares the keys and
// their defaults (the libraries', where a library has one), maps them onto
// the node's, the engine's, the scheduler's, the runtime's and the API's
// configurations, and lets each library judge its own fields: a library's
// ConfigError names a field, which this package names as its key and
// source. Only the host's own rules are checked here: its listener, the
// files it reads, its log, the units it writes sizes in, its policy for
// secrets in a file and the rules between two libraries' settings.
package config

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/plugins"
)

// settings is the host's configuration (Loaded embeds it): `weft serve` reads it, `weft config`
// prints it. Every leaf field is one key (its koanf tag, nested with dots),
// one WEFT_* environment variable (see envName) and one row of the README's
// configuration reference, which a test keeps in step with this struct.
// Every value is what it says: no key reads 0 as "the default" (a
// library's zero that means its default is refused by its validation).
type settings struct {
	// Listen is the HTTP address. Defaults to 127.0.0.1:8080.
	Listen string `koanf:"listen"`
	// DataDir holds the embedded store, plugin blobs and the compiled code
	// cache. Defaults to ./data.
	DataDir string `koanf:"data_dir"`
	// NodeID names this node in leases and history. Defaults to the host
	// name and the process id, "vm-4242".
	NodeID string `koanf:"node_id"`
	// Store is embedded (Pebble under DataDir, local locks) or redis.
	// Defaults to embedded.
	Store string `koanf:"store"`
	// RedisAddrs are the Redis servers of cluster mode.
	RedisAddrs []string `koanf:"redis_addrs"`
	// RedisCluster are seed addresses of a Redis Cluster, for cluster
	// mode on one (instead of RedisAddrs).
	RedisCluster []string `koanf:"redis_cluster"`
	// WorkflowsDir is where POST /v1/admin/refresh reads definitions from.
	// Empty disables refresh.
	WorkflowsDir string `koanf:"workflows_dir"`
	// SeedDirs are loaded on a first start (empty store): *.wasm files as
	// plugins, *.yaml, *.yml and *.json files as workflows.
	SeedDirs []string `koanf:"seed_dirs"`
	// GrantsFile is a YAML or JSON file mapping plugin names to grant
	// documents, applied at every start. Empty applies none.
	GrantsFile string `koanf:"grants_file"`
	// SchedulesFile is a YAML or JSON file listing schedule documents,
	// applied at every start. Empty applies none.
	SchedulesFile string `koanf:"schedules_file"`

	Log       logConfig       `koanf:"log"`
	HTTP      httpConfig      `koanf:"http"`
	Auth      authConfig      `koanf:"auth"`
	Plugins   pluginsConfig   `koanf:"plugins"`
	Engine    engineConfig    `koanf:"engine"`
	Heartbeat heartbeatConfig `koanf:"heartbeat"`
	History   historyConfig   `koanf:"history"`
	Tapes     tapesConfig     `koanf:"tapes"`
	Redis     redisConfig     `koanf:"redis"`
	Tracing   tracingConfig   `koanf:"tracing"`
}

// tracingConfig configures the host's traces (tracing.Config). The
// standard OpenTelemetry variables set these keys too, below the WEFT_*
// ones (see otelEnv); headers, TLS files and compression are the
// exporter's own OTEL_EXPORTER_OTLP_* variables.
type tracingConfig struct {
	// Exporter is none (tracing off) or otlp. Defaults to none.
	Exporter string `koanf:"exporter"`
	// Endpoint is the collector's URL (http:// or https://). Empty: the
	// exporter's default, localhost:4318 or localhost:4317.
	Endpoint string `koanf:"endpoint"`
	// Protocol is grpc or http/protobuf. Defaults to http/protobuf.
	Protocol string `koanf:"protocol"`
	// SampleRate is the fraction of new traces recorded, 0 to 1.
	// Defaults to 1.
	SampleRate float64 `koanf:"sample_rate"`
	// ViewerURL is the operators' trace viewer, a link with {trace_id}
	// where an instance's trace id goes (api.Config.TraceViewerURL): the
	// console links the id there. Empty (the default): no link.
	ViewerURL string `koanf:"viewer_url"`
}

// On reports whether the host exports traces (tracing.exporter: otlp).
func (t tracingConfig) On() bool { return t.Exporter == tracing.ExporterOTLP }

// redisConfig configures how cluster mode uses Redis.
type redisConfig struct {
	// WaitReplicas, when above 0, makes every write of the store wait
	// until that many replicas have it before it is answered
	// (node.Config.RedisWaitReplicas). Defaults to 0.
	WaitReplicas int `koanf:"wait_replicas"`
	// WaitTimeout bounds that wait: a write not confirmed in time fails
	// as not durable. Defaults to 1s.
	WaitTimeout time.Duration `koanf:"wait_timeout"`
	// Shards divides the ready queue and the per-instance notifications
	// into hash-tag shards that a Redis Cluster's masters share
	// (node.Config.RedisShards). Defaults to 1.
	Shards int `koanf:"shards"`
	// Partitions divides the store into hash-tag partitions that a Redis
	// Cluster's masters share (node.Config.RedisPartitions), fixed when
	// the store is created. Defaults to 1: the whole store under one tag.
	Partitions int `koanf:"partitions"`
}

// logConfig configures the host's own log, on stderr.
type logConfig struct {
	// Level is debug, info, warn or error. Defaults to info.
	Level string `koanf:"level"`
	// Format is text or json. Defaults to text.
	Format string `koanf:"format"`
}

// httpConfig configures the HTTP server.
type httpConfig struct {
	// BodyLimit caps request bodies other than plugins. Defaults to 1MiB.
	BodyLimit byteSize `koanf:"body_limit"`
	// PluginBodyLimit caps PUT /v1/plugins/{name} bodies. Defaults to
	// 32MiB.
	PluginBodyLimit byteSize `koanf:"plugin_body_limit"`
	// ShutdownTimeout bounds the graceful shutdown: draining requests and
	// stopping the engine. Defaults to 30s.
	ShutdownTimeout time.Duration `koanf:"shutdown_timeout"`
	// BodyBudget caps the request bodies held in memory at once. Defaults
	// to four times the larger body limit.
	BodyBudget byteSize `koanf:"body_budget"`
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
	BodyRate    byteSize      `koanf:"body_rate"`
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

// authConfig configures bearer tokens.
type authConfig struct {
	// Tokens are the accepted bearer tokens. None means no authentication,
	// which the host allows only on a loopback address.
	Tokens []tokenConfig `koanf:"tokens"`
}

// tokenConfig is one bearer token.
type tokenConfig struct {
	Name string `koanf:"name"`
	// Role is admin, operator or reader.
	Role string `koanf:"role"`
	// Token is the secret itself or "sha256:" and its hex digest.
	Token string `koanf:"token"`
}

// pluginsConfig configures the plugin runtime (plugins.Config).
type pluginsConfig struct {
	CacheDir          string        `koanf:"cache_dir"`
	MaxModuleBytes    byteSize      `koanf:"max_module_bytes"`
	MemoryLimit       byteSize      `koanf:"memory_limit"`
	MaxOutputBytes    byteSize      `koanf:"max_output_bytes"`
	MaxLogBytes       byteSize      `koanf:"max_log_bytes"`
	MaxLogRecords     int           `koanf:"max_log_records"`
	MaxHeartbeatBytes byteSize      `koanf:"max_heartbeat_bytes"`
	MaxTableElements  int           `koanf:"max_table_elements"`
	MaxStackBytes     byteSize      `koanf:"max_stack_bytes"`
	MaxMemory         byteSize      `koanf:"max_memory"`
	IdleTimeout       time.Duration `koanf:"idle_timeout"`
	MaxFunctionBytes  byteSize      `koanf:"max_function_bytes"`
	MaxCompiles       int           `koanf:"max_compiles"`
	PoolSize          int           `koanf:"pool_size"`
	PoolWarm          int           `koanf:"pool_warm"`
	CancelGrace       time.Duration `koanf:"cancel_grace"`
	LoadTimeout       time.Duration `koanf:"load_timeout"`
	// HTTP bounds the plugins' outbound HTTP requests.
	HTTP pluginsHTTPConfig `koanf:"http"`
}

// pluginsHTTPConfig bounds the plugins' outbound HTTP requests
// (plugins.HTTPConfig).
type pluginsHTTPConfig struct {
	MaxResponseBytes byteSize      `koanf:"max_response_bytes"`
	MaxRequestBytes  byteSize      `koanf:"max_request_bytes"`
	MaxHeaders       int           `koanf:"max_headers"`
	MaxHeaderBytes   byteSize      `koanf:"max_header_bytes"`
	MaxRequests      int           `koanf:"max_requests"`
	ConnectTimeout   time.Duration `koanf:"connect_timeout"`
	Timeout          time.Duration `koanf:"timeout"`
	// CAFile is a PEM file of root certificate authorities trusted beside
	// the system's. Empty trusts the system's only.
	CAFile string `koanf:"ca_file"`
}

// engineConfig configures the workflow engine (engine.Config).
type engineConfig struct {
	Workers int `koanf:"workers"`
	// EagerStarts runs a start on the node that took it when one of its
	// workers is idle (engine.Config.EagerStarts). Defaults to true.
	EagerStarts     bool          `koanf:"eager_starts"`
	LockTTL         time.Duration `koanf:"lock_ttl"`
	AcquireTimeout  time.Duration `koanf:"acquire_timeout"`
	ActivityTimeout time.Duration `koanf:"activity_timeout"`
	TimerInterval   time.Duration `koanf:"timer_interval"`
	// ScheduleInterval is how often due schedules are swept
	// (engine.Config.ScheduleInterval).
	ScheduleInterval time.Duration `koanf:"schedule_interval"`
	StimulusTTL      time.Duration `koanf:"stimulus_ttl"`
	StimulusInterval time.Duration `koanf:"stimulus_interval"`
	RecoveryInterval time.Duration `koanf:"recovery_interval"`
	// Retention is how long a finished instance is kept when its workflow
	// sets no retention; 0 keeps finished instances forever. Defaults to
	// engine.DefaultRetention (7 days).
	Retention         time.Duration `koanf:"retention"`
	RetentionInterval time.Duration `koanf:"retention_interval"`
	// BatchInterval, BatchRetention and BatchMaxItems are the batch
	// jobs' terms (engine.Config's).
	BatchInterval  time.Duration `koanf:"batch_interval"`
	BatchRetention time.Duration `koanf:"batch_retention"`
	BatchMaxItems  int           `koanf:"batch_max_items"`
}

// heartbeatConfig configures the heartbeat scheduler (heartbeat.Config).
type heartbeatConfig struct {
	Tick  time.Duration `koanf:"tick"`
	Batch int           `koanf:"batch"`
	Cycle time.Duration `koanf:"cycle"`
	// MaxRetries is how many times within a cycle a renewal that failed is
	// retried. 0 retries none, here as in heartbeat.Config.MaxRetries,
	// which it is as it is. Defaults to heartbeat.DefaultMaxRetries (3).
	MaxRetries int `koanf:"max_retries"`
}

// historyConfig says what instances' histories keep.
type historyConfig struct {
	// AttemptDataLimit caps each activity attempt's input and output as
	// its history entries keep them (engine.Config.AttemptDataLimit); a
	// larger one is recorded by its size only. 0 records neither.
	// Defaults to engine.DefaultAttemptDataLimit (16KiB).
	AttemptDataLimit byteSize `koanf:"attempt_data_limit"`
	// VarsLimit caps the copy of an instance's variables that a top-level
	// step's step_started entry keeps, for a reset to the step
	// (engine.Config.VarsLimit); a larger one is recorded by its size
	// only, and a reset to that step is refused. 0 records none.
	// Defaults to engine.DefaultVarsLimit (256KiB).
	VarsLimit byteSize `koanf:"vars_limit"`
}

// byteSize is a size in bytes, written as a number of bytes or with a unit:
// 512KiB, 32MiB, 1GiB (also KB, MB, GB as powers of 1000).
type byteSize int64

// String formats b with the largest binary unit that divides it.
func (b byteSize) String() string {
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

// byteUnit is the multiplier of a size's unit, in lower case.
func byteUnit(unit string) (int64, bool) {
	switch unit {
	case "", "b":
		return 1, true
	case "kib", "k":
		return 1 << 10, true
	case "mib", "m":
		return 1 << 20, true
	case "gib", "g":
		return 1 << 30, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	}
	return 0, false
}

// parseByteSize reads a size: a number of bytes, or a number and a unit.
func parseByteSize(s string) (byteSize, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	}
	mult, ok := byteUnit(unit)
	if !ok || num == "" {
		return 0, fmt.Errorf("want a size such as 1048576, 512KiB or 32MiB, got %q", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f*float64(mult) > 1<<53 {
		return 0, fmt.Errorf("want a size such as 1048576, 512KiB or 32MiB, got %q", s)
	}
	return byteSize(f * float64(mult)), nil
}

// defaultConfig is the configuration before any file, variable or flag.
// The engine, runtime and scheduler defaults come from their packages.
func defaultConfig() settings {
	eng := engine.Config{}.WithDefaults()
	pl := plugins.Config{}.WithDefaults()
	ad := api.Config{}.WithDefaults()
	hb := heartbeat.Config{}.WithDefaults()
	nodeDefaults := node.Config{}.WithDefaults()
	tr := tracing.Config{}.WithDefaults()
	// Unique per process, so that nodes started on one machine are told
	// apart in leases and history; node_id gives a stable name.
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "weft"
	}
	node := fmt.Sprintf("%s-%d", host, os.Getpid())
	return settings{
		Listen:  "127.0.0.1:8080",
		DataDir: "./data",
		NodeID:  node,
		Store:   "embedded",
		Log:     logConfig{Level: "info", Format: "text"},
		HTTP: httpConfig{
			BodyLimit:       1 << 20,
			PluginBodyLimit: byteSize(pl.MaxModuleBytes),
			ShutdownTimeout: 30 * time.Second,
			BodyBudget:      4 * byteSize(pl.MaxModuleBytes),
			WriteTimeout:    ad.WriteTimeout,
			ReadTimeout:     ad.ReadTimeout,
			BodyTimeout:     ad.BodyTimeout,
			BodyRate:        byteSize(ad.BodyRate),
			IdleTimeout:     ad.IdleTimeout,
			RequestTimeout:  ad.RequestTimeout,
			MaxStreams:      ad.MaxStreams,
			StreamPoll:      ad.StreamPoll,
		},
		Plugins: pluginsConfig{
			MaxModuleBytes:    byteSize(pl.MaxModuleBytes),
			MemoryLimit:       byteSize(pl.MemoryLimitPages) * 64 << 10,
			MaxOutputBytes:    byteSize(pl.MaxOutputBytes),
			MaxLogBytes:       byteSize(pl.MaxLogBytes),
			MaxLogRecords:     pl.MaxLogRecords,
			MaxHeartbeatBytes: byteSize(pl.MaxHeartbeatBytes),
			MaxTableElements:  int(pl.MaxTableElements),
			MaxStackBytes:     byteSize(pl.MaxStackBytes),
			MaxMemory:         byteSize(pl.MaxMemory),
			IdleTimeout:       pl.IdleTimeout,
			MaxFunctionBytes:  byteSize(pl.MaxFunctionBytes),
			MaxCompiles:       pl.MaxCompiles,
			PoolSize:          pl.PoolSize,
			PoolWarm:          pl.PoolWarm,
			CancelGrace:       pl.CancelGrace,
			LoadTimeout:       pl.LoadTimeout,
			HTTP: pluginsHTTPConfig{
				MaxResponseBytes: byteSize(pl.HTTP.MaxResponseBytes),
				MaxRequestBytes:  byteSize(pl.HTTP.MaxRequestBytes),
				MaxHeaders:       pl.HTTP.MaxHeaders,
				MaxHeaderBytes:   byteSize(pl.HTTP.MaxHeaderBytes),
				MaxRequests:      pl.HTTP.MaxRequests,
				ConnectTimeout:   pl.HTTP.ConnectTimeout,
				Timeout:          pl.HTTP.Timeout,
			},
		},
		Engine: engineConfig{
			Workers: eng.Workers,
			// The engine's zero value queues every start; a host runs them
			// where they arrive while it has an idle worker.
			EagerStarts:      true,
			LockTTL:          eng.LockTTL,
			AcquireTimeout:   eng.AcquireTimeout,
			ActivityTimeout:  eng.ActivityTimeout,
			TimerInterval:    eng.TimerInterval,
			ScheduleInterval: eng.ScheduleInterval,
			StimulusTTL:      eng.StimulusTTL,
			StimulusInterval: eng.StimulusInterval,
			RecoveryInterval: eng.RecoveryInterval,
			// The engine's zero value deletes nothing; a host keeps a
			// week unless told otherwise, so that its store stops growing.
			Retention:         engine.DefaultRetention,
			RetentionInterval: eng.RetentionInterval,
			BatchInterval:     eng.BatchInterval,
			BatchRetention:    eng.BatchRetention,
			BatchMaxItems:     eng.BatchMaxItems,
		},
		// The scheduler's zero value retries none; a host retries a
		// transient error within the cycle.
		Heartbeat: heartbeatConfig{Tick: hb.Tick, Batch: hb.Batch, Cycle: hb.Cycle, MaxRetries: heartbeat.DefaultMaxRetries},
		// The engine's zero value records no attempt data; a host keeps
		// documents of a readable size.
		History: historyConfig{AttemptDataLimit: engine.DefaultAttemptDataLimit, VarsLimit: engine.DefaultVarsLimit},
		Redis:   redisConfig{WaitTimeout: nodeDefaults.RedisWaitTimeout, Shards: nodeDefaults.RedisShards, Partitions: nodeDefaults.RedisPartitions},
		// Off unless chosen; every new trace sampled once it is on.
		Tracing: tracingConfig{Exporter: tr.Exporter, Protocol: tr.Protocol, SampleRate: 1},
		// Failed attempts' tapes, capped at 1MiB each (docs/workflows.md,
		// "Recorded attempts").
		Tapes: tapesConfig{Policy: weft.DefaultRecordPolicy.String(), MaxBytes: weft.DefaultTapeBytes},
	}
}

// configKey is one leaf of Config: its dotted key and where it lives.
type configKey struct {
	name  string
	index []int // reflect field index path from Config
	typ   reflect.Type
}

// The types of Config's leaves that are decoded and printed their own way.
var (
	durationType = reflect.TypeFor[time.Duration]()
	byteSizeType = reflect.TypeFor[byteSize]()
	stringsType  = reflect.TypeFor[[]string]()
	tokensType   = reflect.TypeFor[[]tokenConfig]()
	tokenType    = reflect.TypeFor[tokenConfig]()
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
	walk(reflect.TypeFor[settings](), "", nil)
	return keys
}

// envName is the environment variable of a key: WEFT_, then the key in
// upper case with dots and underscores both written as underscores
// (engine.lock_ttl → WEFT_ENGINE_LOCK_TTL). Config's keys are chosen so
// that no two share a name, which a test checks.
func envName(key string) string {
	return "WEFT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// clientEnv reports whether name is one of the WEFT_* variables the CLI
// client reads, which the server's configuration ignores.
func clientEnv(name string) bool {
	return name == "WEFT_SERVER" || name == "WEFT_TOKEN" || name == "WEFT_OUTPUT"
}
