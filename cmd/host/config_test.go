package main

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/config"
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

// TestHostFlags: the flags of `weft serve` and `weft config` are the
// configuration's top layer, each value with its flag as its source; the
// keys, the other layers and the checks are host/config's (its tests).
func TestHostFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     []string
		check   func(c *config.Loaded) (got, want string)
		sources map[string]string
	}{
		{
			name: "named flags over the environment",
			args: []string{"--listen", "127.0.0.1:7003", "--data-dir", "/d", "--node-id", "n1", "--log-level", "debug", "--log-format", "json"},
			env:  []string{"WEFT_LISTEN=127.0.0.1:7002"},
			check: func(c *config.Loaded) (string, string) {
				return c.Listen + " " + c.DataDir + " " + c.NodeID + " " + c.Log.Level + " " + c.Log.Format, "127.0.0.1:7003 /d n1 debug json"
			},
			sources: map[string]string{"listen": "flag --listen", "data_dir": "flag --data-dir", "node_id": "flag --node-id", "log.level": "flag --log-level", "log.format": "flag --log-format"},
		},
		{
			name:    "--set over a named flag, wherever it is",
			args:    []string{"--set", "listen=127.0.0.1:7005", "--listen", "127.0.0.1:7004"},
			check:   func(c *config.Loaded) (string, string) { return c.Listen, "127.0.0.1:7005" },
			sources: map[string]string{"listen": "flag --set listen"},
		},
		{
			name:    "redis addresses: flags repeat and split on commas",
			args:    []string{"--redis-addr", "a:1,b:2", "--redis-addr", "c:3", "--store", "redis"},
			check:   func(c *config.Loaded) (string, string) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
			sources: map[string]string{"redis_addrs": "flag --redis-addr", "store": "flag --store"},
		},
		{
			name:    "redis cluster seeds: flags repeat and split on commas",
			args:    []string{"--redis-cluster", "a:1,b:2", "--redis-cluster", "c:3", "--store", "redis"},
			check:   func(c *config.Loaded) (string, string) { return strings.Join(c.RedisCluster, " "), "a:1 b:2 c:3" },
			sources: map[string]string{"redis_cluster": "flag --redis-cluster", "store": "flag --store"},
		},
		{
			name:    "--set list values accumulate",
			args:    []string{"--set", "redis_addrs=a:1", "--set", "redis_addrs=b:2,c:3", "--store", "redis"},
			check:   func(c *config.Loaded) (string, string) { return strings.Join(c.RedisAddrs, " "), "a:1 b:2 c:3" },
			sources: map[string]string{"redis_addrs": "flag --set redis_addrs", "store": "flag --store"},
		},
		{
			name: "named list flag",
			args: []string{"--seed", ".", "--seed", "..", "--workflows-dir", "."},
			check: func(c *config.Loaded) (string, string) {
				return strings.Join(c.SeedDirs, " ") + " " + c.WorkflowsDir, ". .. ."
			},
			sources: map[string]string{"seed_dirs": "flag --seed", "workflows_dir": "flag --workflows-dir"},
		},
		{
			name:    "flags not given are no value's source",
			env:     []string{"HOME=/x", "WEFT_SERVER=http://x"},
			check:   func(c *config.Loaded) (string, string) { return c.Listen, "127.0.0.1:8080" },
			sources: map[string]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(parseHostFlags(t, tt.args...).sources(t.TempDir(), tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tt.check(c); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
			if !maps.Equal(c.Source, tt.sources) {
				t.Errorf("sources %v, want %v", c.Source, tt.sources)
			}
		})
	}
}

// TestHostFlagsConfigFile: --config names the file, which then must exist;
// without it weft.yaml in the working directory is read when present.
func TestHostFlagsConfigFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "listen: 127.0.0.1:1\n")
	c, err := config.Load(parseHostFlags(t).sources(dir, nil))
	if err != nil || c.Listen != "127.0.0.1:1" {
		t.Fatalf("weft.yaml: %v, %+v", err, c)
	}
	other := writeFile(t, t.TempDir(), "other.yaml", "listen: 127.0.0.1:2\n")
	c, err = config.Load(parseHostFlags(t, "--config", other).sources(dir, nil))
	if err != nil || c.Listen != "127.0.0.1:2" || c.File != other {
		t.Fatalf("--config: %v, %+v", err, c)
	}
	_, err = config.Load(parseHostFlags(t, "--config", filepath.Join(dir, "missing.yaml")).sources(dir, nil))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("a missing --config file: %v, want an error naming it", err)
	}
}

// TestConfigCommand: `weft config` prints the effective configuration with
// each value's source, says what is wrong with an invalid one (exit 1),
// and refuses a --set without KEY=VALUE or an argument (exit 2).
func TestConfigCommand(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	if code := configCmd([]string{"--set", "engine.workers=3", "--listen", "127.0.0.1:9"}, []string{"WEFT_LOG_LEVEL=debug"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	for _, want := range []string{"listen: 127.0.0.1:9 # from flag --listen\n", "  workers: 3 # from flag --set engine.workers\n", "  level: debug # from env WEFT_LOG_LEVEL\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("weft config lacks %q:\n%s", want, &stdout)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := configCmd([]string{"--set", "heartbeat.max_retries=-1"}, nil, &stdout, &stderr); code != exitFailed ||
		!strings.Contains(stderr.String(), "heartbeat.max_retries (from flag --set heartbeat.max_retries): must not be negative") {
		t.Errorf("an invalid configuration: exit %d, %s", code, &stderr)
	}
	for _, args := range [][]string{{"--set", "engine.workers"}, {"extra"}} {
		if code := configCmd(args, nil, &stdout, &stderr); code != exitUsage {
			t.Errorf("weft config %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
