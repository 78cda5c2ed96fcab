package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/plugins"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// set is the command line's --set KEY=VALUE for each of kvs, KEY=VALUE.
func set(kvs ...string) []Flag {
	var out []Flag
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, Flag{Key: k, Name: "set", Value: v})
	}
	return out
}

// named is a named flag of the command line, --name value, for key.
func named(name, key, value string) Flag { return Flag{Key: key, Name: name, Value: value} }

// load loads a configuration from a weft.yaml holding file (none when
// empty), the variables env and the flags, in a directory of its own.
func load(t *testing.T, file string, env []string, flags ...Flag) (*Loaded, error) {
	t.Helper()
	dir := t.TempDir()
	if file != "" {
		writeFile(t, dir, "weft.yaml", file)
	}
	return Load(Sources{Dir: dir, Env: env, Flags: flags})
}

func TestLoadPrecedence(t *testing.T) {
	t.Parallel()
	file := `
listen: 127.0.0.1:7001
data_dir: /from/file
engine:
  workers: 5
  lock_ttl: 20s
heartbeat:
  cycle: 3s
redis_addrs: [file:1]
`
	tests := []struct {
		name    string
		file    string // weft.yaml in the working directory, when not empty
		env     []string
		flags   []Flag
		check   func(c *Loaded) (got, want any)
		source  string // the key whose source is checked
		wantSrc string
	}{
		{
			name: "defaults",
			check: func(c *Loaded) (any, any) {
				return c.Listen + " " + c.DataDir + " " + c.Store, "127.0.0.1:8080 ./data embedded"
			},
		},
		{
			name: "file over defaults", file: file,
			check:  func(c *Loaded) (any, any) { return c.Engine.Workers, 5 },
			source: "engine.workers", wantSrc: "file ",
		},
		{
			name: "env over file", file: file, env: []string{"WEFT_ENGINE_WORKERS=7", "HOME=/x"},
			check:  func(c *Loaded) (any, any) { return c.Engine.Workers, 7 },
			source: "engine.workers", wantSrc: "env WEFT_ENGINE_WORKERS",
		},
		{
			name: "flag over env", file: file, env: []string{"WEFT_ENGINE_WORKERS=7"}, flags: set("engine.workers=9"),
			check:  func(c *Loaded) (any, any) { return c.Engine.Workers, 9 },
			source: "engine.workers", wantSrc: "flag --set engine.workers",
		},
		{
			name: "named flag over env over file", file: file, env: []string{"WEFT_LISTEN=127.0.0.1:7002"}, flags: []Flag{named("listen", "listen", "127.0.0.1:7003")},
			check:  func(c *Loaded) (any, any) { return c.Listen, "127.0.0.1:7003" },
			source: "listen", wantSrc: "flag --listen",
		},
		{
			name: "--set over a named flag, wherever it is", flags: append(set("listen=127.0.0.1:7005"), named("listen", "listen", "127.0.0.1:7004")),
			check:  func(c *Loaded) (any, any) { return c.Listen, "127.0.0.1:7005" },
			source: "listen", wantSrc: "flag --set listen",
		},
		{
			name: "env key with underscores", env: []string{"WEFT_DATA_DIR=/from/env", "WEFT_HEARTBEAT_MAX_RETRIES=0"},
			check: func(c *Loaded) (any, any) {
				return c.DataDir + " " + strconv.Itoa(c.Heartbeat.MaxRetries), "/from/env 0"
			},
		},
		{
			name: "untouched file keys stay", file: file, env: []string{"WEFT_ENGINE_WORKERS=7"},
			check: func(c *Loaded) (any, any) { return c.Engine.LockTTL, 20 * time.Second },
		},
		{
			name: "list flags accumulate and split on commas", file: file,
			flags: []Flag{named("redis-addr", "redis_addrs", "a:1,b:2"), named("redis-addr", "redis_addrs", "c:3"), named("store", "store", "redis")},
			check: func(c *Loaded) (any, any) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
		},
		{
			name: "--set list values accumulate", flags: append(set("redis_addrs=a:1", "redis_addrs=b:2,c:3"), named("store", "store", "redis")),
			check:  func(c *Loaded) (any, any) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
			source: "redis_addrs", wantSrc: "flag --set redis_addrs",
		},
		{
			name: "--set scalar values: the last wins", flags: set("engine.workers=3", "engine.workers=4"),
			check: func(c *Loaded) (any, any) { return c.Engine.Workers, 4 },
		},
		{
			name: "redis addresses from env", env: []string{"WEFT_REDIS_ADDRS=x:1, y:2", "WEFT_STORE=redis"},
			check: func(c *Loaded) (any, any) { return strings.Join(c.RedisAddrs, " "), "x:1 y:2" },
		},
		{
			name: "redis cluster seeds from the file", file: "store: redis\nredis_cluster: [s:1, 't:2']\n",
			check:  func(c *Loaded) (any, any) { return strings.Join(c.RedisCluster, " "), "s:1 t:2" },
			source: "redis_cluster", wantSrc: "file ",
		},
		{
			name: "redis cluster seeds from env", env: []string{"WEFT_REDIS_CLUSTER=x:1, y:2", "WEFT_STORE=redis"},
			check:  func(c *Loaded) (any, any) { return strings.Join(c.RedisCluster, " "), "x:1 y:2" },
			source: "redis_cluster", wantSrc: "env WEFT_REDIS_CLUSTER",
		},
		{
			name: "redis cluster seeds: --set over the environment", env: []string{"WEFT_REDIS_CLUSTER=x:1", "WEFT_STORE=redis"},
			flags:  set("redis_cluster=a:1", "redis_cluster=b:2,c:3"),
			check:  func(c *Loaded) (any, any) { return strings.Join(c.RedisCluster, " "), "a:1 b:2 c:3" },
			source: "redis_cluster", wantSrc: "flag --set redis_cluster",
		},
		{
			name: "redis cluster seeds reach the node", flags: []Flag{named("redis-cluster", "redis_cluster", "a:1,b:2"), named("store", "store", "redis")},
			check: func(c *Loaded) (any, any) {
				n := c.Node(nil)
				return fmt.Sprintf("%s %v %d", n.Store, n.RedisCluster, len(n.RedisAddrs)), "redis [a:1 b:2] 0"
			},
			source: "redis_cluster", wantSrc: "flag --redis-cluster",
		},
		{
			name: "eager starts by default", check: func(c *Loaded) (any, any) { return c.Engine.EagerStarts, true },
		},
		{
			name: "eager starts off in the file", file: "engine: {eager_starts: false}\n",
			check: func(c *Loaded) (any, any) { return c.Engine.EagerStarts, false },
		},
		{
			name: "eager starts off by --set", flags: set("engine.eager_starts=false"),
			check: func(c *Loaded) (any, any) { return c.Engine.EagerStarts, false },
		},
		{
			name: "sizes with units", env: []string{"WEFT_HTTP_BODY_LIMIT=512KiB", "WEFT_PLUGINS_MEMORY_LIMIT=64MiB"},
			check: func(c *Loaded) (any, any) {
				return [2]byteSize{c.HTTP.BodyLimit, c.Plugins.MemoryLimit}, [2]byteSize{512 << 10, 64 << 20}
			},
		},
		{
			name: "plugin limits", file: "plugins: {max_log_records: 50, max_heartbeat_bytes: 4KiB}\n",
			env: []string{"WEFT_PLUGINS_MAX_TABLE_ELEMENTS=4096", "WEFT_PLUGINS_LOAD_TIMEOUT=30s"},
			check: func(c *Loaded) (any, any) {
				p := c.Plugins
				return fmt.Sprint(p.MaxLogRecords, p.MaxHeartbeatBytes, p.MaxTableElements, p.LoadTimeout), "50 4KiB 4096 30s"
			},
			source: "plugins.load_timeout", wantSrc: "env WEFT_PLUGINS_LOAD_TIMEOUT",
		},
		{
			name: "plugin limits default to the runtime's",
			check: func(c *Loaded) (any, any) {
				p, d := c.Plugins, plugins.Config{}.WithDefaults()
				return fmt.Sprint(p.MaxLogRecords, int(p.MaxHeartbeatBytes), p.MaxTableElements, p.LoadTimeout),
					fmt.Sprint(d.MaxLogRecords, d.MaxHeartbeatBytes, d.MaxTableElements, d.LoadTimeout)
			},
		},
		{
			name: "tokens from env", env: []string{"WEFT_AUTH_TOKENS=ci:admin:0123456789abcdef,ro:reader:sha256:" + strings.Repeat("ab", 32)},
			check: func(c *Loaded) (any, any) { return len(c.Auth.Tokens), 2 },
		},
		{
			name: "a key without a value keeps its default", file: "listen:\nengine:\n",
			check: func(c *Loaded) (any, any) { return c.Listen, "127.0.0.1:8080" },
		},
		{
			name: "a YAML number for a string", file: "node_id: 42\n",
			check: func(c *Loaded) (any, any) { return c.NodeID, "42" },
		},
		{
			name: "client variables are not the server's", env: []string{"WEFT_SERVER=http://x", "WEFT_TOKEN=t"},
			check: func(c *Loaded) (any, any) { return c.Listen, "127.0.0.1:8080" },
		},
		{
			name: "lock ttl of more than two cycles", env: []string{"WEFT_HEARTBEAT_CYCLE=3s"}, flags: set("engine.lock_ttl=6001ms"),
			check: func(c *Loaded) (any, any) { return c.Engine.LockTTL, 6001 * time.Millisecond },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.file, tt.env, tt.flags...)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tt.check(c); got != want {
				t.Errorf("got %v, want %v", got, want)
			}
			if tt.source != "" && !strings.HasPrefix(c.Source[tt.source], tt.wantSrc) {
				t.Errorf("source of %s is %q, want %q…", tt.source, c.Source[tt.source], tt.wantSrc)
			}
		})
	}
}

func TestLoadExplicitFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "listen: 127.0.0.1:1\n")
	other := writeFile(t, t.TempDir(), "other.yaml", "listen: 127.0.0.1:2\n")
	c, err := Load(Sources{File: other, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2" || c.File != other {
		t.Errorf("listen %s from %s; want the --config file's", c.Listen, c.File)
	}
	_, err = Load(Sources{File: filepath.Join(dir, "missing.yaml"), Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing --config file: %v, want an error naming it", err)
	}
}

// badValues holds, for every key, a value that is invalid wherever it
// comes from, and where the key's problem is reported when that is not the
// key itself. TestLoadBadValuePerKey checks that the table has every key.
func badValues() map[string]struct{ value, key string } {
	return map[string]struct{ value, key string }{
		"listen":                          {value: "localhost"},
		"data_dir":                        {value: "' '"},
		"node_id":                         {value: "'a node'"},
		"store":                           {value: "postgres"},
		"redis_addrs":                     {value: "localhost"},
		"redis_cluster":                   {value: "localhost"},
		"workflows_dir":                   {value: "/nonexistent/workflows"},
		"seed_dirs":                       {value: "/nonexistent/seed"},
		"grants_file":                     {value: "/nonexistent/grants.yaml"},
		"schedules_file":                  {value: "/nonexistent/schedules.yaml"},
		"log.level":                       {value: "loud"},
		"log.format":                      {value: "xml"},
		"http.body_limit":                 {value: "100"},
		"http.plugin_body_limit":          {value: "2GiB"},
		"http.shutdown_timeout":           {value: "0s"},
		"http.body_budget":                {value: "1MiB"},
		"http.write_timeout":              {value: "0s"},
		"http.read_timeout":               {value: "-1s"},
		"http.body_timeout":               {value: "0s"},
		"http.body_rate":                  {value: "100"},
		"http.idle_timeout":               {value: "0s"},
		"http.request_timeout":            {value: "0s"},
		"http.max_streams":                {value: "0"},
		"http.stream_poll":                {value: "0s"},
		"auth.tokens":                     {value: "ci:root:0123456789abcdef", key: "auth.tokens[0].role"},
		"plugins.cache_dir":               {value: "{a: 1}"},
		"plugins.max_module_bytes":        {value: "2GiB"},
		"plugins.memory_limit":            {value: "8GiB"},
		"plugins.max_output_bytes":        {value: "0"},
		"plugins.max_log_bytes":           {value: "0"},
		"plugins.max_log_records":         {value: "0"},
		"plugins.max_heartbeat_bytes":     {value: "1GiB"},
		"plugins.max_table_elements":      {value: "33554432"},
		"plugins.max_stack_bytes":         {value: "1KiB"},
		"plugins.max_memory":              {value: "128MiB"},
		"plugins.idle_timeout":            {value: "0s"},
		"plugins.max_function_bytes":      {value: "10"},
		"plugins.max_compiles":            {value: "0"},
		"plugins.pool_size":               {value: "0"},
		"plugins.pool_warm":               {value: "300"},
		"plugins.cancel_grace":            {value: "0s"},
		"plugins.load_timeout":            {value: "0s"},
		"plugins.http.max_response_bytes": {value: "2GiB"},
		"plugins.http.max_request_bytes":  {value: "0"},
		"plugins.http.max_headers":        {value: "0"},
		"plugins.http.max_header_bytes":   {value: "100"},
		"plugins.http.max_requests":       {value: "0"},
		"plugins.http.connect_timeout":    {value: "0s"},
		"plugins.http.timeout":            {value: "0s"},
		"plugins.http.ca_file":            {value: "/nonexistent/ca.pem"},
		"engine.workers":                  {value: "0"},
		"engine.eager_starts":             {value: "yes"},
		"engine.lock_ttl":                 {value: "500ms"},
		"engine.acquire_timeout":          {value: "0s"},
		"engine.activity_timeout":         {value: "0s"},
		"engine.timer_interval":           {value: "0s"},
		"engine.schedule_interval":        {value: "0s"},
		"engine.stimulus_ttl":             {value: "0s"},
		"engine.stimulus_interval":        {value: "0s"},
		"engine.recovery_interval":        {value: "0s"},
		"engine.retention":                {value: "-1h"},
		"engine.retention_interval":       {value: "0s"},
		"engine.batch_interval":           {value: "0s"},
		"engine.batch_retention":          {value: "-1s"},
		"engine.batch_max_items":          {value: "0"},
		"heartbeat.tick":                  {value: "0s"},
		"heartbeat.batch":                 {value: "0"},
		"heartbeat.cycle":                 {value: "1ms"},
		"heartbeat.max_retries":           {value: "-1"},
		"history.attempt_data_limit":      {value: "1GiB"},
		"history.vars_limit":              {value: "1GiB"},
		"tapes.policy":                    {value: "0.05"},
		"tapes.max_bytes":                 {value: "0"},
		"redis.wait_replicas":             {value: "-1"},
		"redis.wait_timeout":              {value: "2m"},
		"redis.shards":                    {value: "1025"},
		"redis.partitions":                {value: "1025"},
		"tracing.exporter":                {value: "zipkin"},
		"tracing.endpoint":                {value: "collector:4317"},
		"tracing.protocol":                {value: "http/json"},
		"tracing.sample_rate":             {value: "1.5"},
		"tracing.viewer_url":              {value: "https://jaeger.example.com/trace/"},
	}
}

// yamlAt writes value (YAML) at a dotted key: a.b: v is "a:\n  b: v\n".
func yamlAt(key, value string) string {
	var b strings.Builder
	parts := strings.Split(key, ".")
	for i, p := range parts {
		b.WriteString(strings.Repeat("  ", i) + p + ":")
		if i < len(parts)-1 {
			b.WriteString("\n")
		}
	}
	b.WriteString(" " + value + "\n")
	return b.String()
}

// TestLoadBadValuePerKey: a bad value of every key, from the file, a
// variable or a flag in turn, is an error that names the key and where
// the value came from, whichever rule (the host's or a library's) refuses
// it.
func TestLoadBadValuePerKey(t *testing.T) {
	t.Parallel()
	bad := badValues()
	for i, k := range configKeys() {
		b, ok := bad[k.name]
		if !ok {
			t.Errorf("%s has no bad value in badValues", k.name)
			continue
		}
		// A YAML mapping is bad only in a file; the environment and flags
		// write strings.
		source := []string{"file", "env", "flag"}[i%3]
		if strings.HasPrefix(b.value, "{") {
			source = "file"
		}
		t.Run(k.name+" from "+source, func(t *testing.T) {
			t.Parallel()
			var (
				c   *Loaded
				err error
				src string
			)
			plain := strings.Trim(b.value, "'")
			switch source {
			case "file":
				c, err = load(t, yamlAt(k.name, b.value), nil)
				src = "(from file "
			case "env":
				c, err = load(t, "", []string{envName(k.name) + "=" + plain})
				src = "(from env " + envName(k.name) + ")"
			default:
				c, err = load(t, "", nil, set(k.name+"="+plain)...)
				src = "(from flag --set " + k.name + ")"
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s = %s: %v, want an invalid configuration (loaded %+v)", k.name, b.value, err, c)
			}
			key := cmpOr(b.key, k.name)
			if !strings.Contains(err.Error(), "\n  - "+key+" "+src) {
				t.Errorf("%s = %s from %s: the error does not name %s and its source %q:\n%v", k.name, b.value, source, key, src, err)
			}
		})
	}
}

// cmpOr is a unless it is empty, then b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestLoadInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		file  string
		env   []string
		flags []Flag
		want  []string // each must appear in the error
	}{
		{name: "bad duration from env", env: []string{"WEFT_HEARTBEAT_CYCLE=soon"}, want: []string{"heartbeat.cycle (from env WEFT_HEARTBEAT_CYCLE)", "duration"}},
		{name: "number for a duration in the file", file: "engine:\n  lock_ttl: 8\n", want: []string{"engine.lock_ttl (from file", "duration"}},
		{name: "unknown key in the file", file: "engine:\n  wrokers: 3\n", want: []string{"engine.wrokers (from file", "no such setting"}},
		{name: "scalar for a section", file: "engine: fast\n", want: []string{"engine (from file", "section"}},
		{name: "unknown variable", env: []string{"WEFT_ENGINE_WROKERS=3"}, want: []string{"WEFT_ENGINE_WROKERS", "no such setting"}},
		{name: "unknown --set key", flags: set("engine.wrokers=3"), want: []string{"engine.wrokers (from flag --set engine.wrokers)"}},
		{name: "bad store", flags: []Flag{named("store", "store", "postgres")}, want: []string{`store (from flag --store): must be "embedded" or "redis", got "postgres"`}},
		{name: "attempt data limit too large", env: []string{"WEFT_HISTORY_ATTEMPT_DATA_LIMIT=1GiB"}, want: []string{"history.attempt_data_limit (from env WEFT_HISTORY_ATTEMPT_DATA_LIMIT): must be between 0 (record none) and 16777216 (16 MiB), got 1073741824"}},
		{name: "redis without addresses", flags: []Flag{named("store", "store", "redis")}, want: []string{`redis_addrs: store "redis" needs at least one address in redis_addrs or redis_cluster`}},
		{name: "redis addresses and cluster seeds", env: []string{"WEFT_REDIS_CLUSTER=c:1"}, flags: []Flag{named("store", "store", "redis"), named("redis-addr", "redis_addrs", "a:1")},
			want: []string{"redis_cluster (from env WEFT_REDIS_CLUSTER): redis_addrs and redis_cluster are both set"}},
		{name: "bad cluster seed", flags: []Flag{named("store", "store", "redis"), named("redis-cluster", "redis_cluster", "a:1,b:2,localhost")},
			want: []string{`redis_cluster (from flag --redis-cluster): [2]: must be HOST:PORT, got "localhost"`}},
		{name: "replicas to wait for on the embedded store", env: []string{"WEFT_REDIS_WAIT_REPLICAS=1"},
			want: []string{`redis.wait_replicas (from env WEFT_REDIS_WAIT_REPLICAS): is 1, but store "embedded" has no replicas to wait for (store "redis" has)`}},
		{name: "replica wait of zero", file: "store: redis\nredis_addrs: [a:1]\nredis: {wait_replicas: 1, wait_timeout: 0s}\n",
			want: []string{"redis.wait_timeout (from file", "must be from 1ms to 1m0s, got 0s"}},
		{name: "bad listen", env: []string{"WEFT_LISTEN=localhost"}, want: []string{"listen (from env WEFT_LISTEN)", "HOST:PORT"}},
		{name: "bad port", flags: []Flag{named("listen", "listen", "127.0.0.1:99999")}, want: []string{"listen (from flag --listen)", "port"}},
		{name: "workers", file: "engine: {workers: 0}\n", want: []string{"engine.workers (from file", "must be at least 1, got 0"}},
		{name: "not a number", env: []string{"WEFT_ENGINE_WORKERS=many"}, want: []string{"engine.workers (from env WEFT_ENGINE_WORKERS)", "whole number"}},
		{name: "not a bool", env: []string{"WEFT_ENGINE_EAGER_STARTS=yes"}, want: []string{"engine.eager_starts (from env WEFT_ENGINE_EAGER_STARTS)", "want true or false"}},
		{name: "not a bool in the file", file: "engine: {eager_starts: 1}\n", want: []string{"engine.eager_starts (from file", "want true or false"}},
		{name: "lock ttl of two cycles, blamed on the cycle chosen", env: []string{"WEFT_HEARTBEAT_CYCLE=4s"}, want: []string{"heartbeat.cycle (from env WEFT_HEARTBEAT_CYCLE): engine.lock_ttl 8s does not exceed two cycles (8s)", "(heartbeat.cycle is 4s)"}},
		{name: "lock ttl under two cycles, blamed on the ttl chosen", flags: set("engine.lock_ttl=3s"), want: []string{"engine.lock_ttl (from flag --set engine.lock_ttl): engine.lock_ttl 3s does not exceed two cycles (4s)"}},
		{name: "cycle under tick", flags: set("heartbeat.tick=3s", "heartbeat.cycle=2s"), want: []string{"heartbeat.cycle (from flag --set heartbeat.cycle): must be at least heartbeat.tick (3s), got 2s"}},
		{name: "negative retries", env: []string{"WEFT_HEARTBEAT_MAX_RETRIES=-1"}, want: []string{"heartbeat.max_retries (from env WEFT_HEARTBEAT_MAX_RETRIES): must not be negative (0 retries none), got -1"}},
		{name: "memory not in pages", flags: set("plugins.memory_limit=100KiB"), want: []string{"plugins.memory_limit (from flag --set plugins.memory_limit): want a multiple of 64KiB"}},
		{name: "memory over 4GiB", flags: set("plugins.memory_limit=8GiB", "plugins.max_memory=16GiB"), want: []string{"plugins.memory_limit (from flag --set plugins.memory_limit): must be between 1 and 65536 pages of 64KiB (4GiB), got 131072 (8GiB)"}},
		{name: "body rate too slow", env: []string{"WEFT_HTTP_BODY_RATE=100"}, want: []string{"http.body_rate (from env WEFT_HTTP_BODY_RATE)", "at least 1 KiB"}},
		{name: "no body time", flags: set("http.body_timeout=0s"), want: []string{"http.body_timeout (from flag --set http.body_timeout): must be positive, got 0s"}},
		{name: "bad size", env: []string{"WEFT_HTTP_BODY_LIMIT=lots"}, want: []string{"http.body_limit (from env WEFT_HTTP_BODY_LIMIT)", "size"}},
		{name: "pool warm above size", file: "plugins: {pool_size: 2, pool_warm: 3}\n", want: []string{"plugins.pool_warm (from file", "must be between 1 and plugins.pool_size (2), got 3"}},
		// The runtime reads 0 as its default (1): a host's 0 would not be 0.
		{name: "no warm instances", flags: set("plugins.pool_warm=0"), want: []string{"plugins.pool_warm (from flag --set plugins.pool_warm)", "between 1 and plugins.pool_size"}},
		{name: "no log records", env: []string{"WEFT_PLUGINS_MAX_LOG_RECORDS=0"}, want: []string{"plugins.max_log_records (from env WEFT_PLUGINS_MAX_LOG_RECORDS)", "between 1 and 1000000"}},
		{name: "huge heartbeats", file: "plugins: {max_heartbeat_bytes: 1GiB}\n", want: []string{"plugins.max_heartbeat_bytes (from file", "between 1KiB and 16MiB, got 1GiB"}},
		{name: "table elements", flags: set("plugins.max_table_elements=33554432"), want: []string{"plugins.max_table_elements (from flag --set", "between 1 and 16777216"}},
		{name: "table elements beyond 32 bits", flags: set("plugins.max_table_elements=4294967297"), want: []string{"plugins.max_table_elements (from flag --set", "between 1 and 16777216"}},
		{name: "load timeout", env: []string{"WEFT_PLUGINS_LOAD_TIMEOUT=0s"}, want: []string{"plugins.load_timeout (from env WEFT_PLUGINS_LOAD_TIMEOUT)", "must be positive"}},
		{name: "tiny stack", flags: set("plugins.max_stack_bytes=1KiB"), want: []string{"plugins.max_stack_bytes (from flag --set", "between 64KiB and 256MiB"}},
		{name: "memory budget under one instance", env: []string{"WEFT_PLUGINS_MAX_MEMORY=128MiB"}, want: []string{"plugins.max_memory (from env WEFT_PLUGINS_MAX_MEMORY): is 128MiB, below plugins.memory_limit (256MiB)"}},
		{name: "idle timeout", file: "plugins: {idle_timeout: 0s}\n", want: []string{"plugins.idle_timeout (from file", "must be positive"}},
		{name: "write timeout", env: []string{"WEFT_HTTP_WRITE_TIMEOUT=0s"}, want: []string{"http.write_timeout (from env WEFT_HTTP_WRITE_TIMEOUT)", "must be positive"}},
		{name: "idle timeout of connections", flags: set("http.idle_timeout=-1s"), want: []string{"http.idle_timeout (from flag --set", "must be positive"}},
		{name: "function bytes", flags: set("plugins.max_function_bytes=10"), want: []string{"plugins.max_function_bytes (from flag --set", "between 1KiB and 1GiB"}},
		{name: "no compiles", env: []string{"WEFT_PLUGINS_MAX_COMPILES=0"}, want: []string{"plugins.max_compiles (from env WEFT_PLUGINS_MAX_COMPILES)", "at least 1"}},
		{name: "body budget under the limit", flags: set("http.body_budget=1MiB"), want: []string{"http.body_budget (from flag --set http.body_budget): must be at least http.body_limit and http.plugin_body_limit (33554432)"}},
		{name: "plugin bodies under the module limit", flags: set("http.plugin_body_limit=16MiB"), want: []string{"http.plugin_body_limit (from flag --set", "below plugins.max_module_bytes (32MiB)"}},
		{name: "log level", flags: []Flag{named("log-level", "log.level", "loud")}, want: []string{"log.level (from flag --log-level)"}},
		{name: "missing workflows dir", flags: []Flag{named("workflows-dir", "workflows_dir", "/nonexistent/wf")}, want: []string{"workflows_dir", "no such file"}},
		{name: "blank data dir", env: []string{"WEFT_DATA_DIR= "}, want: []string{"data_dir (from env WEFT_DATA_DIR): is required"}},
		{name: "node id with a space", file: "node_id: a b\n", want: []string{"node_id (from file", `must be 1 to 128 characters without spaces or control characters, got "a b"`}},
		{
			name: "bad tokens",
			file: "auth:\n  tokens:\n    - {name: ci, role: root, token: short}\n    - {name: ci, role: reader, token: 'sha256:zz'}\n",
			want: []string{"auth.tokens[0].role (from file", "admin, operator or reader", "auth.tokens[0].token", "at least 16", "auth.tokens[1].name", "name used twice", "auth.tokens[1].token", "64 hex"},
		},
		{name: "one secret, two tokens", env: []string{"WEFT_AUTH_TOKENS=a:admin:0123456789abcdef,b:reader:sha256:9f9d51bc70ef21ca5c14f307980a29d8"}, want: []string{"auth.tokens[1].token (from env WEFT_AUTH_TOKENS)"}},
		{name: "token field", file: "auth:\n  tokens:\n    - {name: ci, role: admin, secret: x}\n", want: []string{"auth.tokens", "[0].secret: no such field"}},
		{name: "broken yaml", file: "listen: [\n", want: []string{"config (from file"}},
		{name: "negative retention", flags: set("engine.retention=-1h"), want: []string{"engine.retention (from flag --set engine.retention): must be between 0 (keep finished instances forever) and 876000h0m0s (100 years), got -1h0m0s"}},
		{name: "retention over 100 years", env: []string{"WEFT_ENGINE_RETENTION=900000h"}, want: []string{"engine.retention (from env WEFT_ENGINE_RETENTION)", "(100 years)"}},
		{name: "retention interval", file: "engine: {retention_interval: 0s}\n", want: []string{"engine.retention_interval (from file", "must be positive"}},
		{name: "bad duration from --set", flags: set("heartbeat.cycle=soon"), want: []string{"heartbeat.cycle (from flag --set heartbeat.cycle)", `want a duration such as 500ms, 10s, 2m or 7d, got "soon"`}},
		{name: "bad size from --set", flags: set("http.body_limit=lots"), want: []string{"http.body_limit (from flag --set http.body_limit)", `got "lots"`}},
		{name: "bad address from a named list flag", flags: []Flag{named("store", "store", "redis"), named("redis-addr", "redis_addrs", "a:1,localhost")}, want: []string{`redis_addrs (from flag --redis-addr): [1]: must be HOST:PORT, got "localhost"`}},
		{name: "bad tokens from env", env: []string{"WEFT_AUTH_TOKENS=ci:admin"}, want: []string{"auth.tokens (from env WEFT_AUTH_TOKENS): entry 1: want name:role:token"}},
		{name: "unknown variable, exactly", env: []string{"WEFT_LISTEN_ADDR=x"}, want: []string{"WEFT_LISTEN_ADDR (from env): no such setting"}},
		{name: "not a whole number", file: "engine: {workers: 1.5}\n", want: []string{"engine.workers (from file", "want a whole number, got 1.5"}},
		{name: "unknown key beside a bad value", file: "engine:\n  wrokers: 3\n  lock_ttl: 8\n", want: []string{"engine.wrokers (from file", "no such setting", "engine.lock_ttl (from file", "duration"}},
		{name: "unknown section", file: "egnine:\n  workers: 3\n", want: []string{"egnine.workers (from file", "no such setting"}},
		{name: "keys are case-sensitive", file: "Listen: 127.0.0.1:1\n", want: []string{"Listen (from file", "no such setting"}},
		{name: "mapping for a value", file: "listen: {host: x}\n", want: []string{"listen (from file", "want a string"}},
		{name: "number for a token", file: "auth:\n  tokens:\n    - {name: ci, role: admin, token: 1234567890123456789}\n", want: []string{"auth.tokens (from file", "[0]: token: want a string"}},
		{name: "every problem at once", env: []string{"WEFT_ENGINE_WORKERS=0", "WEFT_ENGINE_TIMER_INTERVAL=0s", "WEFT_LOG_FORMAT=xml"}, want: []string{"engine.workers", "engine.timer_interval", "log.format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.file, tt.env, tt.flags...)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestProblemsInKeyOrder: the problems are listed in the order of the
// reference, whichever rule found them.
func TestProblemsInKeyOrder(t *testing.T) {
	t.Parallel()
	_, err := load(t, "", []string{"WEFT_HEARTBEAT_BATCH=0", "WEFT_LOG_FORMAT=xml", "WEFT_ENGINE_WORKERS=0", "WEFT_LISTEN=x"})
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v, want an *Error", err)
	}
	var keys []string
	for _, p := range ce.Problems {
		keys = append(keys, p.Key)
	}
	if got, want := strings.Join(keys, " "), "listen log.format engine.workers heartbeat.batch"; got != want {
		t.Errorf("problems of %s, want %s:\n%v", got, want, err)
	}
}

// TestMaxRetriesZeroMeansNone: heartbeat.max_retries 0 reaches the
// scheduler as 0, which retries none there too (it was once read as the
// scheduler's default, 3, and the host turned it into -1 to mean none).
func TestMaxRetriesZeroMeansNone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  []string
		want int
	}{
		{nil, heartbeat.DefaultMaxRetries},
		{[]string{"WEFT_HEARTBEAT_MAX_RETRIES=0"}, 0},
		{[]string{"WEFT_HEARTBEAT_MAX_RETRIES=5"}, 5},
	} {
		c, err := load(t, "", tt.env)
		if err != nil {
			t.Fatal(err)
		}
		hb := c.Node(nil).Engine.Heartbeat
		s, err := heartbeat.New(hb)
		if err != nil {
			t.Fatal(err)
		}
		if hb.MaxRetries != tt.want || s.Config().MaxRetries != tt.want {
			t.Errorf("%v: the scheduler's MaxRetries is %d (%d in use), want %d", tt.env, hb.MaxRetries, s.Config().MaxRetries, tt.want)
		}
	}
}

// TestBindings: every key is a library's or the host's own, once; each
// binding names a field that libraries sets from its key.
func TestBindings(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	for _, b := range bindings() {
		seen[b.key]++
	}
	for _, k := range hostOnly() {
		seen[k]++
	}
	for _, k := range configKeys() {
		if seen[k.name] != 1 {
			t.Errorf("%s is bound %d times, want once (bindings or hostOnly)", k.name, seen[k.name])
		}
		delete(seen, k.name)
	}
	for k := range seen {
		t.Errorf("%s is bound but is no key", k)
	}

	// A configuration whose every bound value differs from its default:
	// each must reach its library's field.
	c := &Loaded{settings: defaultConfig()}
	cv := reflect.ValueOf(&c.settings).Elem()
	want := map[string]any{}
	for i, k := range configKeys() {
		f := cv.FieldByIndex(k.index)
		switch {
		case k.typ == durationType:
			f.SetInt(int64(time.Duration(1000+i) * time.Millisecond))
		case k.typ == byteSizeType:
			f.SetInt(int64(1000+i) << 16) // whole pages, for memory_limit
		case k.typ == stringsType:
			f.Set(reflect.ValueOf([]string{"v" + strconv.Itoa(i)}))
		case k.typ == tokensType:
			f.Set(reflect.ValueOf([]tokenConfig{{Name: "n", Role: "admin", Token: "t"}}))
		case f.Kind() == reflect.Int:
			f.SetInt(int64(1000 + i))
		case f.Kind() == reflect.Bool:
			f.SetBool(!f.Bool())
		case f.Kind() == reflect.Float64:
			f.SetFloat(float64(i) / 1000)
		case f.Kind() == reflect.String:
			f.SetString("v" + strconv.Itoa(i))
		}
		want[k.name] = f.Interface()
	}
	libs := c.libraries()
	configs := map[library]reflect.Value{
		nodeLib:      reflect.ValueOf(libs.node),
		engineLib:    reflect.ValueOf(libs.node.Engine),
		heartbeatLib: reflect.ValueOf(libs.node.Engine.Heartbeat),
		pluginsLib:   reflect.ValueOf(libs.node.Plugins),
		apiLib:       reflect.ValueOf(libs.api),
		tracingLib:   reflect.ValueOf(libs.node.Tracing),
	}
	for _, b := range bindings() {
		f := field(configs[b.lib], b.field)
		if !f.IsValid() {
			t.Errorf("%s: the %s configuration has no field %s", b.key, b.lib, b.field)
			continue
		}
		got := fmt.Sprint(f.Interface())
		w := want[b.key]
		switch x := w.(type) {
		case byteSize:
			w = int64(x)
			if b.key == "plugins.memory_limit" {
				w = int64(x) / (64 << 10)
			}
		case []tokenConfig:
			w = []string{fmt.Sprint(x[0].Name, " ", x[0].Role, " ", x[0].Token)}
			got = fmt.Sprint([]string{strings.Trim(got, "[]{}")})
		}
		if got != fmt.Sprint(w) {
			t.Errorf("%s = %v reaches %s.%s as %s", b.key, w, b.lib, b.field, got)
		}
	}
}

// TestDefaultsAreKept: the defaults of every key pass each library's
// validation, and no library replaces one (with its WithDefaults) by a
// default of its own: what `weft config` prints is what runs.
func TestDefaultsAreKept(t *testing.T) {
	t.Parallel()
	for _, env := range [][]string{nil, {"WEFT_ENGINE_RETENTION=0", "WEFT_HISTORY_ATTEMPT_DATA_LIMIT=0", "WEFT_HEARTBEAT_MAX_RETRIES=0", "WEFT_ENGINE_EAGER_STARTS=false"}} {
		c, err := load(t, "", env)
		if err != nil {
			t.Fatal(err)
		}
		n := c.Node(nil)
		for _, l := range []struct {
			lib      library
			as, runs any
		}{
			{engineLib, n.Engine, n.Engine.WithDefaults()},
			{heartbeatLib, n.Engine.Heartbeat, n.Engine.Heartbeat.WithDefaults()},
			{pluginsLib, n.Plugins, n.Plugins.WithDefaults()},
			{apiLib, c.API(), c.API().WithDefaults()},
			{tracingLib, n.Tracing, n.Tracing.WithDefaults()},
		} {
			for _, b := range bindings() {
				if b.lib != l.lib {
					continue
				}
				as, runs := field(reflect.ValueOf(l.as), b.field).Interface(), field(reflect.ValueOf(l.runs), b.field).Interface()
				if !reflect.DeepEqual(as, runs) {
					t.Errorf("%v: %s is %v, and %s runs with %v", env, b.key, as, l.lib, runs)
				}
			}
		}
	}
}

func TestPrintMasksSecrets(t *testing.T) {
	t.Parallel()
	plain := "s3cr3t-plain-token-value"
	digest := "sha256:" + strings.Repeat("0f", 32)
	c, err := load(t, "auth:\n  tokens:\n    - {name: ci, role: admin, token: "+plain+"}\n    - {name: ro, role: reader, token: '"+digest+"'}\n",
		[]string{"WEFT_ENGINE_WORKERS=3"}, named("listen", "listen", "127.0.0.1:9999"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Print(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, plain) || strings.Contains(s, strings.Repeat("0f", 32)) {
		t.Errorf("secrets in the printed configuration:\n%s", s)
	}
	for _, want := range []string{
		"listen: 127.0.0.1:9999 # from flag --listen",
		"workers: 3 # from env WEFT_ENGINE_WORKERS",
		"{name: ci, role: admin, token: '****'}",
		"sha256:****",
		"lock_ttl: 8s\n",
		"activity_timeout: 10m\n",
		"max_retries: 3\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, s)
		}
	}
}

// TestPrintRoundTrip checks that what `weft config` prints is a
// configuration file that loads back to the same values.
func TestPrintRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := load(t, "", []string{"WEFT_ENGINE_STIMULUS_TTL=90m"},
		named("redis-addr", "redis_addrs", "a:1,b:2"), named("seed", "seed_dirs", dir), Flag{Key: "http.body_limit", Name: "set", Value: "1536"})
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := c.Print(&first); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "printed.yaml", first.String())
	back, err := Load(Sources{File: path, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, &first)
	}
	var second bytes.Buffer
	if err := back.Print(&second); err != nil {
		t.Fatal(err)
	}
	strip := func(s string) string {
		var lines []string
		for _, l := range strings.Split(s, "\n") {
			l, _, _ = strings.Cut(l, " # from ")
			lines = append(lines, l)
		}
		return strings.Join(lines, "\n")
	}
	if strip(first.String()) != strip(second.String()) {
		t.Errorf("printed, loaded and printed again differs:\n%s\n---\n%s", &first, &second)
	}
}

// TestRetention: a host keeps finished instances a week by default,
// engine.retention=0 keeps them forever, and both reach the engine and
// `weft config`.
func TestRetention(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flags   []Flag
		want    time.Duration
		printed string
	}{
		{nil, 7 * 24 * time.Hour, "  retention: 168h\n"},
		{set("engine.retention=0"), 0, "  retention: 0s # from flag --set engine.retention\n"},
		{set("engine.retention=720h"), 720 * time.Hour, "  retention: 720h # from flag --set engine.retention\n"},
		// Days, as a workflow's retention writes them.
		{set("engine.retention=30d"), 720 * time.Hour, "  retention: 720h # from flag --set engine.retention\n"},
	} {
		c, err := load(t, "", nil, tt.flags...)
		if err != nil {
			t.Fatalf("%v: %v", tt.flags, err)
		}
		if got := c.Node(nil).Engine.Retention; got != tt.want {
			t.Errorf("%v: the engine's retention is %s, want %s", tt.flags, got, tt.want)
		}
		if got := c.Node(nil).Engine.WithDefaults().Retention; got != tt.want {
			t.Errorf("%v: the engine runs with retention %s, want %s", tt.flags, got, tt.want)
		}
		var out bytes.Buffer
		if err := c.Print(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tt.printed) || !strings.Contains(out.String(), "  retention_interval: 1m\n") {
			t.Errorf("%v: weft config prints\n%s\nwithout %q and retention_interval: 1m", tt.flags, &out, tt.printed)
		}
	}
}

// TestSourceIsWhatWasGiven: only the file, variables and flags given are
// a value's source, so that defaults are printed as defaults.
func TestSourceIsWhatWasGiven(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", []string{"HOME=/x", "WEFT_SERVER=http://x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Source) != 0 {
		t.Errorf("sources %v with no file, variable or flag", c.Source)
	}
	if got := c.SourceOf("listen"); got != "default" {
		t.Errorf("SourceOf(listen) = %q, want default", got)
	}
	file := writeFile(t, t.TempDir(), "w.yaml", "engine: {workers: 3}\n")
	c, err = Load(Sources{File: file, Dir: t.TempDir(), Env: []string{"WEFT_LOG_LEVEL=debug"}, Flags: []Flag{named("listen", "listen", "127.0.0.1:1")}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"listen": "flag --listen", "engine.workers": "file " + file, "log.level": "env WEFT_LOG_LEVEL"}
	if !maps.Equal(c.Source, want) {
		t.Errorf("sources %v, want %v", c.Source, want)
	}
}

func TestEnvNamesAreUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range configKeys() {
		n := envName(k.name)
		if prev, ok := seen[n]; ok {
			t.Errorf("%s and %s share the variable %s", prev, k.name, n)
		}
		seen[n] = k.name
		if clientEnv(n) {
			t.Errorf("%s's variable %s is one the client reads", k.name, n)
		}
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    byteSize
		wantErr bool
	}{
		{in: "1024", want: 1024},
		{in: "512KiB", want: 512 << 10},
		{in: "32MiB", want: 32 << 20},
		{in: "1 GiB", want: 1 << 30},
		{in: "2MB", want: 2e6},
		{in: "1.5MiB", want: 3 << 19},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "12 parsecs", wantErr: true},
		{in: "-1", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseByteSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	for _, b := range []byteSize{1, 1024, 1536, 32 << 20, 1 << 30} {
		got, err := parseByteSize(b.String())
		if err != nil || got != b {
			t.Errorf("%d prints as %q, which parses as %d, %v", b, b.String(), got, err)
		}
	}
}

// Unless chosen, the body budget follows the larger body limit; chosen, it
// stays as chosen.
func TestBodyBudgetFollowsTheLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		flags []Flag
		want  byteSize
	}{
		{nil, 128 << 20},
		{set("http.plugin_body_limit=64MiB"), 256 << 20},
		{set("http.plugin_body_limit=64MiB", "http.body_budget=100MiB"), 100 << 20},
	} {
		cfg, err := load(t, "", nil, c.flags...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTP.BodyBudget != c.want || cfg.API().BodyBudget != int(c.want) {
			t.Errorf("%v: body budget %s, want %s", c.flags, cfg.HTTP.BodyBudget, c.want)
		}
	}
}

// TestDefaultNodeIDIsUniquePerProcess: nodes started on one
// machine without node_id record different names in leases and history.
func TestDefaultNodeIDIsUniquePerProcess(t *testing.T) {
	t.Parallel()
	id := defaultConfig().NodeID
	if !strings.HasSuffix(id, "-"+strconv.Itoa(os.Getpid())) || len(id) <= len(strconv.Itoa(os.Getpid()))+1 {
		t.Errorf("default node id %q, want the host name, a hyphen and the process id %d", id, os.Getpid())
	}
	if err := (engine.Config{NodeID: id}).WithDefaults().Validate(); err != nil {
		t.Errorf("the engine refuses the default node id: %v", err)
	}
}

// TestKeyNames: a library's message names its fields by key.
func TestKeyNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		lib       library
		msg, want string
	}{
		{heartbeatLib, "must be at least Config.Tick (3s), got 2s", "must be at least heartbeat.tick (3s), got 2s"},
		{pluginsLib, "must be between 1 and PoolSize (2), got 3", "must be between 1 and plugins.pool_size (2), got 3"},
		{pluginsLib, "HTTP.MaxHeaders and HTTP.MaxHeaderBytes", "plugins.http.max_headers and plugins.http.max_header_bytes"},
		{apiLib, "at least BodyLimit and PluginBodyLimit", "at least http.body_limit and http.plugin_body_limit"},
		{nodeLib, `Store "redis" needs at least one address in RedisAddrs or RedisCluster`, `store "redis" needs at least one address in redis_addrs or redis_cluster`},
		{engineLib, "StoreKeys and MaxWorkers are no fields", "StoreKeys and MaxWorkers are no fields"},
	} {
		if got := keyNames(tt.lib, tt.msg); got != tt.want {
			t.Errorf("keyNames(%s, %q) = %q, want %q", tt.lib, tt.msg, got, tt.want)
		}
	}
	for _, tt := range []struct {
		lib                library
		field, key, detail string
	}{
		{apiLib, "Tokens[1].Role", "auth.tokens[1].role", ""},
		{nodeLib, "RedisAddrs[2]", "redis_addrs", "[2]: "},
		{nodeLib, "RedisCluster[0]", "redis_cluster", "[0]: "},
		{pluginsLib, "HTTP.Timeout", "plugins.http.timeout", ""},
	} {
		if key, detail, ok := keyOf(tt.lib, tt.field); !ok || key != tt.key || detail != tt.detail {
			t.Errorf("keyOf(%s, %s) = %q, %q, %v; want %q, %q", tt.lib, tt.field, key, detail, ok, tt.key, tt.detail)
		}
	}
	if _, _, ok := keyOf(engineLib, "RetentionBatch"); ok {
		t.Error("RetentionBatch, which no key sets, has a key")
	}
}
