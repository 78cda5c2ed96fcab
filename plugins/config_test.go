package plugins_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/plugins"
)

// TestConfigValidate: Validate names every impossible field, each by its
// Go name (below HTTP, dotted), and judges a Config as it is: a zero the
// caller set, which WithDefaults would replace, is refused.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := plugins.Config{}.WithDefaults()
	tests := []struct {
		name   string
		edit   func(*plugins.Config)
		fields []string
		want   string // in the error
	}{
		{"defaults", func(*plugins.Config) {}, nil, ""},
		{"huge modules", func(c *plugins.Config) { c.MaxModuleBytes = 2 << 30 }, []string{"MaxModuleBytes"}, "plugins: MaxModuleBytes must be between 1KiB and 1GiB, got 2GiB"},
		{"no memory", func(c *plugins.Config) { c.MemoryLimitPages = 0 }, []string{"MemoryLimitPages"}, "between 1 and 65536 pages"},
		{"memory under an instance", func(c *plugins.Config) { c.MaxMemory = 1 << 20 }, []string{"MaxMemory"}, "below MemoryLimitPages (256MiB)"},
		{"no log bytes", func(c *plugins.Config) { c.MaxLogBytes = 0 }, []string{"MaxLogBytes"}, "between 1 and 1GiB"},
		{"log records", func(c *plugins.Config) { c.MaxLogRecords = 2_000_000 }, []string{"MaxLogRecords"}, "between 1 and 1000000"},
		{"heartbeat details", func(c *plugins.Config) { c.MaxHeartbeatBytes = 32 << 20 }, []string{"MaxHeartbeatBytes"}, "between 1KiB and 16MiB"},
		{"no table", func(c *plugins.Config) { c.MaxTableElements = 0 }, []string{"MaxTableElements"}, "between 1 and"},
		{"tiny functions", func(c *plugins.Config) { c.MaxFunctionBytes = 10 }, []string{"MaxFunctionBytes"}, "between 1KiB and 1GiB"},
		{"no warm instance", func(c *plugins.Config) { c.PoolWarm = 0 }, []string{"PoolWarm"}, "between 1 and PoolSize (256)"},
		{"warm beyond the pool", func(c *plugins.Config) { c.PoolSize, c.PoolWarm = 2, 3 }, []string{"PoolWarm"}, "got 3"},
		{"timeouts", func(c *plugins.Config) { c.IdleTimeout, c.LoadTimeout, c.CancelGrace = 0, 0, -1 }, []string{"IdleTimeout", "LoadTimeout", "CancelGrace"}, "must be positive"},
		{"http", func(c *plugins.Config) {
			c.HTTP.MaxResponseBytes, c.HTTP.MaxRequestBytes, c.HTTP.MaxHeaders, c.HTTP.MaxHeaderBytes, c.HTTP.MaxRequests = 100, 0, 10_001, 32<<20, 0
			c.HTTP.ConnectTimeout, c.HTTP.Timeout = 0, 0
		}, []string{"HTTP.MaxResponseBytes", "HTTP.MaxRequestBytes", "HTTP.MaxHeaders", "HTTP.MaxHeaderBytes", "HTTP.MaxRequests", "HTTP.ConnectTimeout", "HTTP.Timeout"}, "HTTP.MaxHeaders must be between 1 and 10000, got 10001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.edit(&c)
			err := c.Validate()
			var fields []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var ce *plugins.ConfigError
					if !errors.As(e, &ce) {
						t.Fatalf("%v is not a *ConfigError", e)
					}
					fields = append(fields, ce.Field)
				}
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("Validate named %v, want %v: %v", fields, tt.fields, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
