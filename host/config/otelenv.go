package config

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/weftworks/weft/internal/tracing"
)

// otelLayer is what the standard OpenTelemetry variables set: the tracing
// keys' values, and the variable that gave each.
type otelLayer struct {
	values map[string]any
	vars   map[string]string
}

// otelEnv reads the standard OpenTelemetry variables of env into the
// tracing keys, so that a host deployed as any OpenTelemetry SDK is
// (OTEL_TRACES_EXPORTER=otlp and an endpoint) traces without a WEFT_*
// variable. Load merges them over the file and under the WEFT_*
// variables and the flags: a WEFT_TRACING_* variable wins. An empty
// variable is unset, as the specification says.
//
//   - OTEL_SDK_DISABLED=true sets tracing.exporter to none, whatever
//     OTEL_TRACES_EXPORTER says;
//   - OTEL_TRACES_EXPORTER sets tracing.exporter (otlp or none; any other
//     exporter is refused by the key's validation, naming the variable);
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
//     sets tracing.protocol;
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT,
//     sets tracing.endpoint (the latter is a base URL: with http/protobuf
//     the spans go to its /v1/traces, see otelBaseEndpoint);
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG set
//     tracing.sample_rate: always_on 1, always_off 0, traceidratio the
//     argument (1 without one). The host's sampler always follows a
//     caller's decision for a trace it continues, so the parentbased_
//     forms mean the same, and the others are refused.
func otelEnv(env []string) (otelLayer, []Problem) {
	vars := map[string]string{}
	for _, kv := range env {
		if name, value, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(name, "OTEL_") {
			vars[name] = strings.TrimSpace(value)
		}
	}
	l := otelLayer{values: map[string]any{}, vars: map[string]string{}}
	set := func(key, name string) {
		l.values[key], l.vars[key] = vars[name], name
	}
	// first sets key from the first of names that is not empty.
	first := func(key string, names ...string) {
		for _, name := range names {
			if vars[name] != "" {
				set(key, name)
				return
			}
		}
	}
	var problems []Problem
	first("tracing.exporter", "OTEL_TRACES_EXPORTER")
	if d := vars["OTEL_SDK_DISABLED"]; d != "" {
		switch strings.ToLower(d) {
		case "true":
			l.values["tracing.exporter"], l.vars["tracing.exporter"] = tracing.ExporterNone, "OTEL_SDK_DISABLED"
		case "false":
		default:
			problems = append(problems, Problem{Key: "OTEL_SDK_DISABLED", Source: "env", Message: fmt.Sprintf("want true or false, got %q", d)})
		}
	}
	first("tracing.protocol", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	first("tracing.endpoint", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	if s := vars["OTEL_TRACES_SAMPLER"]; s != "" {
		arg := vars["OTEL_TRACES_SAMPLER_ARG"]
		switch strings.ToLower(s) {
		case "always_on", "parentbased_always_on":
			l.values["tracing.sample_rate"], l.vars["tracing.sample_rate"] = "1", "OTEL_TRACES_SAMPLER"
		case "always_off", "parentbased_always_off":
			l.values["tracing.sample_rate"], l.vars["tracing.sample_rate"] = "0", "OTEL_TRACES_SAMPLER"
		case "traceidratio", "parentbased_traceidratio":
			if arg == "" {
				l.values["tracing.sample_rate"], l.vars["tracing.sample_rate"] = "1", "OTEL_TRACES_SAMPLER"
			} else if _, err := strconv.ParseFloat(arg, 64); err != nil {
				problems = append(problems, Problem{Key: "OTEL_TRACES_SAMPLER_ARG", Source: "env", Message: fmt.Sprintf("want a ratio from 0 to 1 for %s, got %q", s, arg)})
			} else {
				set("tracing.sample_rate", "OTEL_TRACES_SAMPLER_ARG")
			}
		default:
			problems = append(problems, Problem{Key: "OTEL_TRACES_SAMPLER", Source: "env", Message: fmt.Sprintf(
				"want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio, got %q", s)})
		}
	}
	return l, problems
}

// otelBaseEndpoint is where spans go for the base URL
// OTEL_EXPORTER_OTLP_ENDPOINT gave over http/protobuf: its path joined
// with v1/traces, as the specification says (the signal's own variable
// is used as it is). A value that is not a URL is left for the key's
// validation to refuse.
func otelBaseEndpoint(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return base
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	return u.String()
}
