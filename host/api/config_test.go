package api_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// TestConfigValidate: Validate names every impossible field, the tokens'
// included (Tokens[1].Role), each by its Go name, and judges a Config as
// it is: a zero the caller set, which WithDefaults would replace, is
// refused.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := api.Config{}.WithDefaults()
	tests := []struct {
		name   string
		edit   func(*api.Config)
		fields []string
		want   string // in the error
	}{
		{"defaults", func(*api.Config) {}, nil, ""},
		{"tiny bodies", func(c *api.Config) { c.BodyLimit = 100 }, []string{"BodyLimit"}, "api: BodyLimit must be between 1 KiB and 1 GiB, got 100 bytes"},
		{"budget under the limits", func(c *api.Config) { c.BodyBudget = 1 << 20 }, []string{"BodyBudget"}, "BodyBudget must be at least BodyLimit and PluginBodyLimit"},
		{"zero timeouts", func(c *api.Config) { c.RequestTimeout, c.WriteTimeout, c.StreamPoll = 0, 0, -time.Second }, []string{"RequestTimeout", "WriteTimeout", "StreamPoll"}, "must be positive"},
		{"slow bodies", func(c *api.Config) { c.BodyRate = 100 }, []string{"BodyRate"}, "at least 1 KiB"},
		{"no streams", func(c *api.Config) { c.MaxStreams = 0 }, []string{"MaxStreams"}, "between 1 and 100000"},
		{"tokens", func(c *api.Config) {
			c.Tokens = []api.Token{{Name: "ci", Role: "root", Token: "s3cret"}, {Name: "ci", Role: api.RoleReader, Token: "sha256:zz"}, {Name: "ro", Role: api.RoleReader, Token: "s3cret"}}
		}, []string{"Tokens[0].Role", "Tokens[1].Name", "Tokens[1].Token", "Tokens[2].Token"}, `auth token "ci": role must be admin, operator or reader, got "root"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.edit(&c)
			err := c.Validate()
			if got := apiConfigFields(t, err); !slices.Equal(got, tt.fields) {
				t.Errorf("Validate named %v, want %v: %v", got, tt.fields, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

// apiConfigFields are the fields Validate's ConfigErrors name.
func apiConfigFields(t *testing.T, err error) []string {
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
		var ce *api.ConfigError
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
