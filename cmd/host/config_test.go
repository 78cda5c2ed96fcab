package main

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// parseHostFlags parses args as `weft serve` would.
func parseHostFlags(t *testing.T, args ...string) *hostFlags {
	t.Helper()
	h := newHostFlags("test", &bytes.Buffer{})
	if err := h.fs.Parse(args); err != nil {
		t.Fatalf("parsing %q: %v", args, err)
	}
	return h
}

func TestConfigPrecedence(t *testing.T) {
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
		args    []string
		check   func(c *LoadedConfig) (got, want any)
		source  string // the key whose source is checked
		wantSrc string
	}{
		{
			name: "defaults",
			check: func(c *LoadedConfig) (any, any) {
				return c.Listen + " " + c.DataDir + " " + c.Store, "127.0.0.1:8080 ./data embedded"
			},
		},
		{
			name: "file over defaults", file: file,
			check:  func(c *LoadedConfig) (any, any) { return c.Engine.Workers, 5 },
			source: "engine.workers", wantSrc: "file ",
		},
		{
			name: "env over file", file: file, env: []string{"WEFT_ENGINE_WORKERS=7", "HOME=/x"},
			check:  func(c *LoadedConfig) (any, any) { return c.Engine.Workers, 7 },
			source: "engine.workers", wantSrc: "env WEFT_ENGINE_WORKERS",
		},
		{
			name: "flag over env", file: file, env: []string{"WEFT_ENGINE_WORKERS=7"}, args: []string{"--set", "engine.workers=9"},
			check:  func(c *LoadedConfig) (any, any) { return c.Engine.Workers, 9 },
			source: "engine.workers", wantSrc: "flag --set engine.workers",
		},
		{
			name: "named flag over env over file", file: file, env: []string{"WEFT_LISTEN=127.0.0.1:7002"}, args: []string{"--listen", "127.0.0.1:7003"},
			check:  func(c *LoadedConfig) (any, any) { return c.Listen, "127.0.0.1:7003" },
			source: "listen", wantSrc: "flag --listen",
		},
		{
			name: "env key with underscores", env: []string{"WEFT_DATA_DIR=/from/env", "WEFT_HEARTBEAT_MAX_RETRIES=0"},
			check: func(c *LoadedConfig) (any, any) {
				return c.DataDir + " " + strconv.Itoa(c.Heartbeat.MaxRetries), "/from/env 0"
			},
		},
		{
			name: "untouched file keys stay", file: file, env: []string{"WEFT_ENGINE_WORKERS=7"},
			check: func(c *LoadedConfig) (any, any) { return c.Engine.LockTTL, 20 * time.Second },
		},
		{
			name: "redis addresses: flags repeat and split on commas", file: file, args: []string{"--redis-addr", "a:1,b:2", "--redis-addr", "c:3", "--store", "redis"},
			check: func(c *LoadedConfig) (any, any) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
		},
		{
			name: "redis addresses from env", env: []string{"WEFT_REDIS_ADDRS=x:1, y:2", "WEFT_STORE=redis"},
			check: func(c *LoadedConfig) (any, any) { return strings.Join(c.RedisAddrs, " "), "x:1 y:2" },
		},
		{
			name: "eager starts by default", check: func(c *LoadedConfig) (any, any) { return c.Engine.EagerStarts, true },
		},
		{
			name: "eager starts off in the file", file: "engine: {eager_starts: false}\n",
			check: func(c *LoadedConfig) (any, any) { return c.Engine.EagerStarts, false },
		},
		{
			name: "eager starts off by --set", args: []string{"--set", "engine.eager_starts=false"},
			check: func(c *LoadedConfig) (any, any) { return c.Engine.EagerStarts, false },
		},
		{
			name: "sizes with units", env: []string{"WEFT_HTTP_BODY_LIMIT=512KiB", "WEFT_PLUGINS_MEMORY_LIMIT=64MiB"},
			check: func(c *LoadedConfig) (any, any) {
				return [2]ByteSize{c.HTTP.BodyLimit, c.Plugins.MemoryLimit}, [2]ByteSize{512 << 10, 64 << 20}
			},
		},
		{
			name: "plugin limits", file: "plugins: {max_log_records: 50, max_heartbeat_bytes: 4KiB}\n",
			env: []string{"WEFT_PLUGINS_MAX_TABLE_ELEMENTS=4096", "WEFT_PLUGINS_LOAD_TIMEOUT=30s"},
			check: func(c *LoadedConfig) (any, any) {
				p := c.Plugins
				return fmt.Sprint(p.MaxLogRecords, p.MaxHeartbeatBytes, p.MaxTableElements, p.LoadTimeout), "50 4KiB 4096 30s"
			},
			source: "plugins.load_timeout", wantSrc: "env WEFT_PLUGINS_LOAD_TIMEOUT",
		},
		{
			name: "plugin limits default to the runtime's",
			check: func(c *LoadedConfig) (any, any) {
				p, d := c.Plugins, plugins.Config{}.WithDefaults()
				return fmt.Sprint(p.MaxLogRecords, int(p.MaxHeartbeatBytes), p.MaxTableElements, p.LoadTimeout),
					fmt.Sprint(d.MaxLogRecords, d.MaxHeartbeatBytes, d.MaxTableElements, d.LoadTimeout)
			},
		},
		{
			name: "tokens from env", env: []string{"WEFT_AUTH_TOKENS=ci:admin:0123456789abcdef,ro:reader:sha256:" + strings.Repeat("ab", 32)},
			check: func(c *LoadedConfig) (any, any) {
				return len(c.Auth.Tokens), 2
			},
		},
		{
			name: "--set over a named flag, wherever it is", args: []string{"--set", "listen=127.0.0.1:7005", "--listen", "127.0.0.1:7004"},
			check:  func(c *LoadedConfig) (any, any) { return c.Listen, "127.0.0.1:7005" },
			source: "listen", wantSrc: "flag --set listen",
		},
		{
			name: "--set list values accumulate", args: []string{"--set", "redis_addrs=a:1", "--set", "redis_addrs=b:2,c:3", "--store", "redis"},
			check:  func(c *LoadedConfig) (any, any) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
			source: "redis_addrs", wantSrc: "flag --set redis_addrs",
		},
		{
			name: "named list flag", args: []string{"--seed", ".", "--seed", ".."},
			check:  func(c *LoadedConfig) (any, any) { return strings.Join(c.SeedDirs, " "), ". .." },
			source: "seed_dirs", wantSrc: "flag --seed",
		},
		{
			name: "a key without a value keeps its default", file: "listen:\nengine:\n",
			check: func(c *LoadedConfig) (any, any) { return c.Listen, "127.0.0.1:8080" },
		},
		{
			name: "a YAML number for a string", file: "node_id: 42\n",
			check: func(c *LoadedConfig) (any, any) { return c.NodeID, "42" },
		},
		{
			name: "client variables are not the server's", env: []string{"WEFT_SERVER=http://x", "WEFT_TOKEN=t"},
			check: func(c *LoadedConfig) (any, any) { return c.Listen, "127.0.0.1:8080" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tt.file != "" {
				writeFile(t, dir, "weft.yaml", tt.file)
			}
			h := parseHostFlags(t, tt.args...)
			c, err := loadConfig(h.sources(dir, tt.env))
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

func TestConfigExplicitFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "listen: 127.0.0.1:1\n")
	other := writeFile(t, t.TempDir(), "other.yaml", "listen: 127.0.0.1:2\n")
	c, err := loadConfig(parseHostFlags(t, "--config", other).sources(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2" || c.File != other {
		t.Errorf("listen %s from %s; want the --config file's", c.Listen, c.File)
	}
	_, err = loadConfig(parseHostFlags(t, "--config", filepath.Join(dir, "missing.yaml")).sources(dir, nil))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing --config file: %v, want an error naming it", err)
	}
}

func TestConfigInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string
		env  []string
		args []string
		want []string // each must appear in the error
	}{
		{name: "bad duration from env", env: []string{"WEFT_HEARTBEAT_CYCLE=soon"}, want: []string{"heartbeat.cycle (from env WEFT_HEARTBEAT_CYCLE)", "duration"}},
		{name: "number for a duration in the file", file: "engine:\n  lock_ttl: 8\n", want: []string{"engine.lock_ttl (from file", "duration"}},
		{name: "unknown key in the file", file: "engine:\n  wrokers: 3\n", want: []string{"engine.wrokers (from file", "no such setting"}},
		{name: "scalar for a section", file: "engine: fast\n", want: []string{"engine (from file", "section"}},
		{name: "unknown variable", env: []string{"WEFT_ENGINE_WROKERS=3"}, want: []string{"WEFT_ENGINE_WROKERS", "no such setting"}},
		{name: "unknown --set key", args: []string{"--set", "engine.wrokers=3"}, want: []string{"engine.wrokers (from flag --set engine.wrokers)"}},
		{name: "bad store", args: []string{"--store", "postgres"}, want: []string{"store (from flag --store)", "embedded or redis"}},
		{name: "attempt data limit too large", env: []string{"WEFT_HISTORY_ATTEMPT_DATA_LIMIT=1GiB"}, want: []string{"history.attempt_data_limit (from env WEFT_HISTORY_ATTEMPT_DATA_LIMIT)", "want between 0 and 16MiB, got 1GiB"}},
		{name: "redis without addresses", args: []string{"--store", "redis"}, want: []string{"redis_addrs", "at least one address"}},
		{name: "bad listen", env: []string{"WEFT_LISTEN=localhost"}, want: []string{"listen (from env WEFT_LISTEN)", "HOST:PORT"}},
		{name: "bad port", args: []string{"--listen", "127.0.0.1:99999"}, want: []string{"listen (from flag --listen)", "port"}},
		{name: "workers", file: "engine: {workers: 0}\n", want: []string{"engine.workers", "at least 1"}},
		{name: "not a number", env: []string{"WEFT_ENGINE_WORKERS=many"}, want: []string{"engine.workers (from env WEFT_ENGINE_WORKERS)", "whole number"}},
		{name: "not a bool", env: []string{"WEFT_ENGINE_EAGER_STARTS=yes"}, want: []string{"engine.eager_starts (from env WEFT_ENGINE_EAGER_STARTS)", "want true or false"}},
		{name: "not a bool in the file", file: "engine: {eager_starts: 1}\n", want: []string{"engine.eager_starts (from file", "want true or false"}},
		{name: "lock ttl under two cycles", env: []string{"WEFT_HEARTBEAT_CYCLE=5s"}, want: []string{"heartbeat.cycle (from env WEFT_HEARTBEAT_CYCLE)", "two heartbeat cycles"}},
		{name: "cycle under tick", args: []string{"--set", "heartbeat.tick=3s", "--set", "heartbeat.cycle=2s"}, want: []string{"heartbeat.cycle", "at least heartbeat.tick"}},
		{name: "memory not in pages", args: []string{"--set", "plugins.memory_limit=100KiB"}, want: []string{"plugins.memory_limit", "64KiB"}},
		{name: "body rate too slow", env: []string{"WEFT_HTTP_BODY_RATE=100"}, want: []string{"http.body_rate (from env WEFT_HTTP_BODY_RATE)", "at least 1KiB"}},
		{name: "no body time", args: []string{"--set", "http.body_timeout=0s"}, want: []string{"http.body_timeout", "positive"}},
		{name: "bad size", env: []string{"WEFT_HTTP_BODY_LIMIT=lots"}, want: []string{"http.body_limit (from env WEFT_HTTP_BODY_LIMIT)", "size"}},
		{name: "pool warm above size", file: "plugins: {pool_size: 2, pool_warm: 3}\n", want: []string{"plugins.pool_warm", "between 0 and plugins.pool_size"}},
		{name: "no log records", env: []string{"WEFT_PLUGINS_MAX_LOG_RECORDS=0"}, want: []string{"plugins.max_log_records (from env WEFT_PLUGINS_MAX_LOG_RECORDS)", "between 1 and 1000000"}},
		{name: "huge heartbeats", file: "plugins: {max_heartbeat_bytes: 1GiB}\n", want: []string{"plugins.max_heartbeat_bytes (from file", "between 1KiB and 16MiB"}},
		{name: "table elements", args: []string{"--set", "plugins.max_table_elements=33554432"}, want: []string{"plugins.max_table_elements (from flag --set", "between 1 and 16777216"}},
		{name: "load timeout", env: []string{"WEFT_PLUGINS_LOAD_TIMEOUT=0s"}, want: []string{"plugins.load_timeout (from env WEFT_PLUGINS_LOAD_TIMEOUT)", "must be positive"}},
		{name: "tiny stack", args: []string{"--set", "plugins.max_stack_bytes=1KiB"}, want: []string{"plugins.max_stack_bytes (from flag --set", "between 64KiB and 256MiB"}},
		{name: "memory budget under one instance", env: []string{"WEFT_PLUGINS_MAX_MEMORY=128MiB"}, want: []string{"plugins.max_memory (from env WEFT_PLUGINS_MAX_MEMORY)", "below plugins.memory_limit (256MiB)"}},
		{name: "idle timeout", file: "plugins: {idle_timeout: 0s}\n", want: []string{"plugins.idle_timeout (from file", "must be positive"}},
		{name: "write timeout", env: []string{"WEFT_HTTP_WRITE_TIMEOUT=0s"}, want: []string{"http.write_timeout (from env WEFT_HTTP_WRITE_TIMEOUT)", "must be positive"}},
		{name: "read timeout", env: []string{"WEFT_HTTP_READ_TIMEOUT=0s"}, want: []string{"http.read_timeout (from env WEFT_HTTP_READ_TIMEOUT)", "must be positive"}},
		{name: "idle timeout of connections", args: []string{"--set", "http.idle_timeout=-1s"}, want: []string{"http.idle_timeout (from flag --set", "must be positive"}},
		{name: "request timeout", file: "http: {request_timeout: 0s}\n", want: []string{"http.request_timeout (from file", "must be positive"}},
		{name: "function bytes", args: []string{"--set", "plugins.max_function_bytes=10"}, want: []string{"plugins.max_function_bytes (from flag --set", "between 1KiB and 1GiB"}},
		{name: "no compiles", env: []string{"WEFT_PLUGINS_MAX_COMPILES=0"}, want: []string{"plugins.max_compiles (from env WEFT_PLUGINS_MAX_COMPILES)", "at least 1"}},
		{name: "body budget under the limit", args: []string{"--set", "http.body_budget=1MiB"}, want: []string{"http.body_budget (from flag --set", "below the larger body limit (32MiB)"}},
		{name: "log level", args: []string{"--log-level", "loud"}, want: []string{"log.level (from flag --log-level)"}},
		{name: "missing workflows dir", args: []string{"--workflows-dir", "/nonexistent/wf"}, want: []string{"workflows_dir", "no such file"}},
		{
			name: "bad tokens",
			file: "auth:\n  tokens:\n    - {name: ci, role: root, token: short}\n    - {name: ci, role: reader, token: 'sha256:zz'}\n",
			want: []string{"auth.tokens[0].role (from file", "admin, operator or reader", "auth.tokens[0].token", "at least 16", "auth.tokens[1].name", "used by another", "auth.tokens[1].token", "64 hex"},
		},
		{name: "token field", file: "auth:\n  tokens:\n    - {name: ci, role: admin, secret: x}\n", want: []string{"auth.tokens", "[0].secret: no such field"}},
		{name: "broken yaml", file: "listen: [\n", want: []string{"config (from file"}},
		{name: "negative retention", args: []string{"--set", "engine.retention=-1h"}, want: []string{"engine.retention (from flag --set engine.retention)", "want between 0 (keep finished instances forever) and 876000h (100 years), got -1h0m0s"}},
		{name: "retention over 100 years", env: []string{"WEFT_ENGINE_RETENTION=900000h"}, want: []string{"engine.retention (from env WEFT_ENGINE_RETENTION)", "and 876000h (100 years)"}},
		{name: "retention interval", file: "engine: {retention_interval: 0s}\n", want: []string{"engine.retention_interval (from file", "must be positive"}},
		{name: "bad duration from --set", args: []string{"--set", "heartbeat.cycle=soon"}, want: []string{"heartbeat.cycle (from flag --set heartbeat.cycle)", `want a duration such as 500ms, 10s, 2m or 7d, got "soon"`}},
		{name: "bad size from --set", args: []string{"--set", "http.body_limit=lots"}, want: []string{"http.body_limit (from flag --set http.body_limit)", `got "lots"`}},
		{name: "bad address from a named list flag", args: []string{"--store", "redis", "--redis-addr", "a:1,localhost"}, want: []string{"redis_addrs (from flag --redis-addr): [1]: want HOST:PORT"}},
		{name: "bad tokens from env", env: []string{"WEFT_AUTH_TOKENS=ci:admin"}, want: []string{"auth.tokens (from env WEFT_AUTH_TOKENS): entry 1: want name:role:token"}},
		{name: "unknown variable, exactly", env: []string{"WEFT_LISTEN_ADDR=x"}, want: []string{"WEFT_LISTEN_ADDR (from env): no such setting"}},
		{name: "not a whole number", file: "engine: {workers: 1.5}\n", want: []string{"engine.workers (from file", "want a whole number, got 1.5"}},
		{name: "unknown key beside a bad value", file: "engine:\n  wrokers: 3\n  lock_ttl: 8\n", want: []string{"engine.wrokers (from file", "no such setting", "engine.lock_ttl (from file", "duration"}},
		{name: "unknown section", file: "egnine:\n  workers: 3\n", want: []string{"egnine.workers (from file", "no such setting"}},
		{name: "keys are case-sensitive", file: "Listen: 127.0.0.1:1\n", want: []string{"Listen (from file", "no such setting"}},
		{name: "mapping for a value", file: "listen: {host: x}\n", want: []string{"listen (from file", "want a string"}},
		{name: "number for a token", file: "auth:\n  tokens:\n    - {name: ci, role: admin, token: 1234567890123456789}\n", want: []string{"auth.tokens (from file", "[0]: token: want a string"}},
		{name: "every problem at once", env: []string{"WEFT_ENGINE_WORKERS=0", "WEFT_LOG_FORMAT=xml"}, want: []string{"engine.workers", "log.format"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tt.file != "" {
				writeFile(t, dir, "weft.yaml", tt.file)
			}
			_, err := loadConfig(parseHostFlags(t, tt.args...).sources(dir, tt.env))
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v, want ErrInvalidConfig", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestConfigPrintMasksSecrets(t *testing.T) {
	t.Parallel()
	plain := "s3cr3t-plain-token-value"
	digest := "sha256:" + strings.Repeat("0f", 32)
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "auth:\n  tokens:\n    - {name: ci, role: admin, token: "+plain+"}\n    - {name: ro, role: reader, token: '"+digest+"'}\n")
	c, err := loadConfig(parseHostFlags(t, "--listen", "127.0.0.1:9999").sources(dir, []string{"WEFT_ENGINE_WORKERS=3"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printConfig(&out, c); err != nil {
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
	} {
		if !strings.Contains(s, want) {
			t.Errorf("printed configuration lacks %q:\n%s", want, s)
		}
	}
}

// TestConfigPrintRoundTrip checks that what `weft config` prints is a
// configuration file that loads back to the same values.
func TestConfigPrintRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := loadConfig(parseHostFlags(t, "--redis-addr", "a:1,b:2", "--seed", dir, "--set", "http.body_limit=1536").sources(dir, []string{"WEFT_ENGINE_STIMULUS_TTL=90m"}))
	if err != nil {
		t.Fatal(err)
	}
	var first bytes.Buffer
	if err := printConfig(&first, c); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "printed.yaml", first.String())
	back, err := loadConfig(parseHostFlags(t, "--config", path).sources(t.TempDir(), nil))
	if err != nil {
		t.Fatalf("the printed configuration does not load: %v\n%s", err, &first)
	}
	var second bytes.Buffer
	if err := printConfig(&second, back); err != nil {
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

// TestConfigRetention: a host keeps finished instances a week by
// default, engine.retention=0 keeps them forever, and both reach the
// engine and `weft config`.
func TestConfigRetention(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args    []string
		want    time.Duration
		printed string
	}{
		{nil, 7 * 24 * time.Hour, "  retention: 168h\n"},
		{[]string{"--set", "engine.retention=0"}, 0, "  retention: 0s # from flag --set engine.retention\n"},
		{[]string{"--set", "engine.retention=720h"}, 720 * time.Hour, "  retention: 720h # from flag --set engine.retention\n"},
		// Days, as a workflow's retention writes them.
		{[]string{"--set", "engine.retention=30d"}, 720 * time.Hour, "  retention: 720h # from flag --set engine.retention\n"},
	} {
		c, err := loadConfig(parseHostFlags(t, tt.args...).sources(t.TempDir(), nil))
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if got := nodeConfig(c, nil).Engine.Retention; got != tt.want {
			t.Errorf("%q: the engine's retention is %s, want %s", tt.args, got, tt.want)
		}
		var out bytes.Buffer
		if err := printConfig(&out, c); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tt.printed) || !strings.Contains(out.String(), "  retention_interval: 1m\n") {
			t.Errorf("%q: weft config prints\n%s\nwithout %q and retention_interval: 1m", tt.args, &out, tt.printed)
		}
	}
}

// TestConfigSourceIsWhatWasGiven: flags and variables not given are no
// value's source, so that defaults are printed as defaults.
func TestConfigSourceIsWhatWasGiven(t *testing.T) {
	t.Parallel()
	c, err := loadConfig(parseHostFlags(t).sources(t.TempDir(), []string{"HOME=/x", "WEFT_SERVER=http://x"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Source) != 0 {
		t.Errorf("sources %v with no file, variable or flag", c.Source)
	}
	file := writeFile(t, t.TempDir(), "w.yaml", "engine: {workers: 3}\n")
	c, err = loadConfig(parseHostFlags(t, "--listen", "127.0.0.1:1", "--config", file).sources(t.TempDir(), []string{"WEFT_LOG_LEVEL=debug"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"listen": "flag --listen", "engine.workers": "file " + file, "log.level": "env WEFT_LOG_LEVEL"}
	if !maps.Equal(c.Source, want) {
		t.Errorf("sources %v, want %v", c.Source, want)
	}
}

func TestConfigEnvNamesAreUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, k := range configKeys() {
		n := envName(k.name)
		if prev, ok := seen[n]; ok {
			t.Errorf("%s and %s share the variable %s", prev, k.name, n)
		}
		seen[n] = k.name
		if clientEnv[n] {
			t.Errorf("%s's variable %s is one the client reads", k.name, n)
		}
	}
}

func TestByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    ByteSize
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
	for _, b := range []ByteSize{1, 1024, 1536, 32 << 20, 1 << 30} {
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
		args []string
		want ByteSize
	}{
		{nil, 128 << 20},
		{[]string{"--set", "http.plugin_body_limit=64MiB"}, 256 << 20},
		{[]string{"--set", "http.plugin_body_limit=64MiB", "--set", "http.body_budget=100MiB"}, 100 << 20},
	} {
		cfg, err := loadConfig(parseHostFlags(t, c.args...).sources(t.TempDir(), nil))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.HTTP.BodyBudget != c.want {
			t.Errorf("%q: body budget %s, want %s", c.args, cfg.HTTP.BodyBudget, c.want)
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
}
