package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/engine"
)

// configFields are the fields Validate's ConfigErrors name.
func configFields(t *testing.T, err error) []string {
	t.Helper()
	var fields []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *engine.ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%v is not a *ConfigError", err)
		}
		fields = append(fields, ce.Field)
	}
	if err != nil {
		walk(err)
	}
	return fields
}

// TestConfigValidate: Validate names every impossible field, each by its
// Go name, and judges a Config as it is (a zero the caller set is not
// replaced by a default).
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := engine.Config{}.WithDefaults()
	tests := []struct {
		name   string
		edit   func(*engine.Config)
		fields []string
		want   string // in the error
	}{
		{"defaults", func(*engine.Config) {}, nil, ""},
		{"no workers", func(c *engine.Config) { c.Workers = 0 }, []string{"Workers"}, "engine: Workers must be at least 1, got 0"},
		{"short lock", func(c *engine.Config) { c.LockTTL = 500 * time.Millisecond }, []string{"LockTTL"}, "at least 1s"},
		{"two zero intervals", func(c *engine.Config) { c.TimerInterval, c.RecoveryInterval = 0, -time.Second }, []string{"TimerInterval", "RecoveryInterval"}, "RecoveryInterval must be positive, got -1s"},
		{"retention forever", func(c *engine.Config) { c.Retention = 0 }, nil, ""},
		{"negative retention", func(c *engine.Config) { c.Retention = -time.Hour }, []string{"Retention"}, "keep finished instances forever"},
		{"no attempt data", func(c *engine.Config) { c.AttemptDataLimit = 0 }, nil, ""},
		{"attempt data beyond a page", func(c *engine.Config) { c.AttemptDataLimit = engine.MaxAttemptDataLimit + 1 }, []string{"AttemptDataLimit"}, "16 MiB"},
		{"empty node id", func(c *engine.Config) { c.NodeID = "" }, []string{"NodeID"}, "1 to 128 characters"},
		{"node id with a space", func(c *engine.Config) { c.NodeID = "node 1" }, []string{"NodeID"}, `got "node 1"`},
		{"long node id", func(c *engine.Config) { c.NodeID = strings.Repeat("n", 129) }, []string{"NodeID"}, "1 to 128 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.edit(&c)
			err := c.Validate()
			if got := configFields(t, err); !slices.Equal(got, tt.fields) {
				t.Errorf("Validate named %v, want %v: %v", got, tt.fields, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
