package config

import (
	"math"
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/plugins"
)

// Node is the node's configuration, its engine's, scheduler's and
// runtime's inside, as the keys set them; reg receives the node's metrics.
func (c *Loaded) Node(reg prometheus.Registerer) node.Config {
	n := c.libraries().node
	n.Registerer = reg
	return n
}

// API is the API's configuration as the keys set it; the caller sets its
// Logger and Gatherer.
func (c *Loaded) API() api.Config { return c.libraries().api }

// libraries are the libraries' configurations as the keys set them: every
// field a key sets holds the key's value, a zero included (the validation
// has refused the zeros a library would read as its default); the fields
// no key sets are zero, for the library to default.
type libraries struct {
	node node.Config
	api  api.Config
}

func (c *Loaded) libraries() libraries {
	tokens := make([]api.Token, 0, len(c.Auth.Tokens))
	for _, t := range c.Auth.Tokens {
		tokens = append(tokens, api.Token{Name: t.Name, Role: api.Role(t.Role), Token: t.Token})
	}
	p, ph := c.Plugins, c.Plugins.HTTP
	return libraries{
		node: node.Config{
			NodeID:            c.NodeID,
			DataDir:           c.DataDir,
			Store:             c.Store,
			RedisAddrs:        c.RedisAddrs,
			RedisCluster:      c.RedisCluster,
			RedisWaitReplicas: c.Redis.WaitReplicas,
			RedisWaitTimeout:  c.Redis.WaitTimeout,
			RedisShards:       c.Redis.Shards,
			RedisPartitions:   c.Redis.Partitions,
			WorkflowsDir:      c.WorkflowsDir,
			Tracing: tracing.Config{
				Exporter:   c.Tracing.Exporter,
				Endpoint:   c.Tracing.Endpoint,
				Protocol:   c.Tracing.Protocol,
				SampleRate: c.Tracing.SampleRate,
			},
			Engine: engine.Config{
				NodeID:            c.NodeID,
				Workers:           c.Engine.Workers,
				EagerStarts:       c.Engine.EagerStarts,
				LockTTL:           c.Engine.LockTTL,
				AcquireTimeout:    c.Engine.AcquireTimeout,
				ActivityTimeout:   c.Engine.ActivityTimeout,
				TimerInterval:     c.Engine.TimerInterval,
				ScheduleInterval:  c.Engine.ScheduleInterval,
				StimulusTTL:       c.Engine.StimulusTTL,
				StimulusInterval:  c.Engine.StimulusInterval,
				RecoveryInterval:  c.Engine.RecoveryInterval,
				Retention:         c.Engine.Retention,
				RetentionInterval: c.Engine.RetentionInterval,
				BatchInterval:     c.Engine.BatchInterval,
				BatchRetention:    c.Engine.BatchRetention,
				BatchMaxItems:     c.Engine.BatchMaxItems,
				AttemptDataLimit:  int(c.History.AttemptDataLimit),
				VarsLimit:         int(c.History.VarsLimit),
				Tapes:             engine.TapeConfig{Policy: c.tapePolicyAsSet(), MaxBytes: c.TapeMaxBytes()},
				Heartbeat: heartbeat.Config{
					Tick:       c.Heartbeat.Tick,
					Batch:      c.Heartbeat.Batch,
					Cycle:      c.Heartbeat.Cycle,
					MaxRetries: c.Heartbeat.MaxRetries,
				},
			},
			Plugins: plugins.Config{
				CacheDir:          p.CacheDir,
				MaxModuleBytes:    int(p.MaxModuleBytes),
				MemoryLimitPages:  clampUint32(int64(p.MemoryLimit / (64 << 10))),
				MaxOutputBytes:    int(p.MaxOutputBytes),
				MaxLogBytes:       int(p.MaxLogBytes),
				MaxLogRecords:     p.MaxLogRecords,
				MaxHeartbeatBytes: int(p.MaxHeartbeatBytes),
				MaxTableElements:  clampUint32(int64(p.MaxTableElements)),
				MaxStackBytes:     int(p.MaxStackBytes),
				MaxMemory:         int64(p.MaxMemory),
				IdleTimeout:       p.IdleTimeout,
				MaxFunctionBytes:  int(p.MaxFunctionBytes),
				MaxCompiles:       p.MaxCompiles,
				LoadTimeout:       p.LoadTimeout,
				PoolSize:          p.PoolSize,
				PoolWarm:          p.PoolWarm,
				CancelGrace:       p.CancelGrace,
				HTTP: plugins.HTTPConfig{
					MaxResponseBytes: int(ph.MaxResponseBytes),
					MaxRequestBytes:  int(ph.MaxRequestBytes),
					MaxHeaders:       ph.MaxHeaders,
					MaxHeaderBytes:   int(ph.MaxHeaderBytes),
					MaxRequests:      ph.MaxRequests,
					ConnectTimeout:   ph.ConnectTimeout,
					Timeout:          ph.Timeout,
					RootCAs:          c.rootCAs,
				},
			},
		},
		api: api.Config{
			Tokens:          tokens,
			BodyLimit:       int(c.HTTP.BodyLimit),
			PluginBodyLimit: int(c.HTTP.PluginBodyLimit),
			BodyBudget:      int(c.HTTP.BodyBudget),
			WriteTimeout:    c.HTTP.WriteTimeout,
			ReadTimeout:     c.HTTP.ReadTimeout,
			BodyTimeout:     c.HTTP.BodyTimeout,
			BodyRate:        int(c.HTTP.BodyRate),
			IdleTimeout:     c.HTTP.IdleTimeout,
			RequestTimeout:  c.HTTP.RequestTimeout,
			MaxStreams:      c.HTTP.MaxStreams,
			StreamPoll:      c.HTTP.StreamPoll,
			TraceViewerURL:  c.Tracing.ViewerURL,
		},
	}
}

// clampUint32 converts n for a uint32 field without wrapping around, so
// that a value out of range stays out of range for the library to refuse.
func clampUint32(n int64) uint32 {
	return uint32(min(max(n, 0), math.MaxUint32))
}

// library names a library whose configuration keys set, and whose
// ConfigErrors they are named by.
type library string

// The libraries the host's keys configure.
const (
	nodeLib      library = "node"
	engineLib    library = "engine"
	heartbeatLib library = "heartbeat"
	pluginsLib   library = "plugins"
	apiLib       library = "api"
	tracingLib   library = "tracing"
)

// binding ties a key to the field of a library's configuration it sets,
// named as the library's ConfigError names it ("HTTP.MaxHeaders").
type binding struct {
	key   string
	lib   library
	field string
}

// bindings are every key a library judges. The others (hostOnly) are
// the host's own. A test checks that each key is one or the other, and
// that libraries sets the field a binding names from its key.
func bindings() []binding {
	return []binding{
		{"data_dir", nodeLib, "DataDir"},
		{"node_id", engineLib, "NodeID"},
		{"store", nodeLib, "Store"},
		{"redis_addrs", nodeLib, "RedisAddrs"},
		{"redis_cluster", nodeLib, "RedisCluster"},
		{"redis.wait_replicas", nodeLib, "RedisWaitReplicas"},
		{"redis.wait_timeout", nodeLib, "RedisWaitTimeout"},
		{"redis.shards", nodeLib, "RedisShards"},
		{"redis.partitions", nodeLib, "RedisPartitions"},
		{"workflows_dir", nodeLib, "WorkflowsDir"},
		{"http.body_limit", apiLib, "BodyLimit"},
		{"http.plugin_body_limit", apiLib, "PluginBodyLimit"},
		{"http.body_budget", apiLib, "BodyBudget"},
		{"http.write_timeout", apiLib, "WriteTimeout"},
		{"http.read_timeout", apiLib, "ReadTimeout"},
		{"http.body_timeout", apiLib, "BodyTimeout"},
		{"http.body_rate", apiLib, "BodyRate"},
		{"http.idle_timeout", apiLib, "IdleTimeout"},
		{"http.request_timeout", apiLib, "RequestTimeout"},
		{"http.max_streams", apiLib, "MaxStreams"},
		{"http.stream_poll", apiLib, "StreamPoll"},
		{"auth.tokens", apiLib, "Tokens"},
		{"plugins.cache_dir", pluginsLib, "CacheDir"},
		{"plugins.max_module_bytes", pluginsLib, "MaxModuleBytes"},
		{"plugins.memory_limit", pluginsLib, "MemoryLimitPages"},
		{"plugins.max_output_bytes", pluginsLib, "MaxOutputBytes"},
		{"plugins.max_log_bytes", pluginsLib, "MaxLogBytes"},
		{"plugins.max_log_records", pluginsLib, "MaxLogRecords"},
		{"plugins.max_heartbeat_bytes", pluginsLib, "MaxHeartbeatBytes"},
		{"plugins.max_table_elements", pluginsLib, "MaxTableElements"},
		{"plugins.max_stack_bytes", pluginsLib, "MaxStackBytes"},
		{"plugins.max_memory", pluginsLib, "MaxMemory"},
		{"plugins.idle_timeout", pluginsLib, "IdleTimeout"},
		{"plugins.max_function_bytes", pluginsLib, "MaxFunctionBytes"},
		{"plugins.max_compiles", pluginsLib, "MaxCompiles"},
		{"plugins.pool_size", pluginsLib, "PoolSize"},
		{"plugins.pool_warm", pluginsLib, "PoolWarm"},
		{"plugins.cancel_grace", pluginsLib, "CancelGrace"},
		{"plugins.load_timeout", pluginsLib, "LoadTimeout"},
		{"plugins.http.max_response_bytes", pluginsLib, "HTTP.MaxResponseBytes"},
		{"plugins.http.max_request_bytes", pluginsLib, "HTTP.MaxRequestBytes"},
		{"plugins.http.max_headers", pluginsLib, "HTTP.MaxHeaders"},
		{"plugins.http.max_header_bytes", pluginsLib, "HTTP.MaxHeaderBytes"},
		{"plugins.http.max_requests", pluginsLib, "HTTP.MaxRequests"},
		{"plugins.http.connect_timeout", pluginsLib, "HTTP.ConnectTimeout"},
		{"plugins.http.timeout", pluginsLib, "HTTP.Timeout"},
		{"engine.workers", engineLib, "Workers"},
		{"engine.eager_starts", engineLib, "EagerStarts"},
		{"engine.lock_ttl", engineLib, "LockTTL"},
		{"engine.acquire_timeout", engineLib, "AcquireTimeout"},
		{"engine.activity_timeout", engineLib, "ActivityTimeout"},
		{"engine.timer_interval", engineLib, "TimerInterval"},
		{"engine.schedule_interval", engineLib, "ScheduleInterval"},
		{"engine.stimulus_ttl", engineLib, "StimulusTTL"},
		{"engine.stimulus_interval", engineLib, "StimulusInterval"},
		{"engine.recovery_interval", engineLib, "RecoveryInterval"},
		{"engine.retention", engineLib, "Retention"},
		{"engine.retention_interval", engineLib, "RetentionInterval"},
		{"engine.batch_interval", engineLib, "BatchInterval"},
		{"engine.batch_retention", engineLib, "BatchRetention"},
		{"engine.batch_max_items", engineLib, "BatchMaxItems"},
		{"heartbeat.tick", heartbeatLib, "Tick"},
		{"heartbeat.batch", heartbeatLib, "Batch"},
		{"heartbeat.cycle", heartbeatLib, "Cycle"},
		{"heartbeat.max_retries", heartbeatLib, "MaxRetries"},
		{"history.attempt_data_limit", engineLib, "AttemptDataLimit"},
		{"history.vars_limit", engineLib, "VarsLimit"},
		{"tapes.policy", engineLib, "Tapes.Policy"},
		{"tapes.max_bytes", engineLib, "Tapes.MaxBytes"},
		{"tracing.exporter", tracingLib, "Exporter"},
		{"tracing.endpoint", tracingLib, "Endpoint"},
		{"tracing.protocol", tracingLib, "Protocol"},
		{"tracing.sample_rate", tracingLib, "SampleRate"},
		{"tracing.viewer_url", apiLib, "TraceViewerURL"},
	}
}

// hostOnly are the keys no library judges: the host's own, which
// checker.host checks.
func hostOnly() []string {
	return []string{
		"listen", "seed_dirs", "grants_file", "schedules_file", "log.level", "log.format",
		"http.shutdown_timeout", "plugins.http.ca_file",
	}
}

// asSet returns defaulted, a library's configuration after its
// WithDefaults, with every field a key of lib sets taken back from sparse:
// the library's defaults where no key sets a field, and each key's value
// as it is, a zero included, so that the library's validation judges the
// zero instead of its default replacing it.
func asSet[T any](sparse, defaulted T, lib library) T {
	from, to := reflect.ValueOf(&sparse).Elem(), reflect.ValueOf(&defaulted).Elem()
	for _, b := range bindings() {
		if b.lib == lib {
			field(to, b.field).Set(field(from, b.field))
		}
	}
	return defaulted
}

// field is the field of struct v at a dotted path ("HTTP.MaxHeaders").
func field(v reflect.Value, path string) reflect.Value {
	for name := range strings.SplitSeq(path, ".") {
		v = v.FieldByName(name)
	}
	return v
}
