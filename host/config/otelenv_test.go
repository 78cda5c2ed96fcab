package config

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestOTelEnv: the standard OpenTelemetry variables set the tracing keys,
// with the variable as the source; a WEFT_* variable or a flag wins over
// them; a value the host cannot use is an error naming the variable and
// the value.
func TestOTelEnv(t *testing.T) {
	t.Parallel()
	type want struct {
		exporter, endpoint, protocol string
		rate                         float64
		sources                      map[string]string // key → source
	}
	off := want{exporter: "none", protocol: "http/protobuf", rate: 1}
	for _, tt := range []struct {
		name    string
		file    string
		env     []string
		flags   []Flag
		want    want
		wantErr []string // each must appear in the error
	}{
		{name: "none set", want: off},
		{name: "otlp over http, base endpoint", env: []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318"},
			want: want{exporter: "otlp", endpoint: "http://collector:4318/v1/traces", protocol: "http/protobuf", rate: 1, sources: map[string]string{
				"tracing.exporter": "env OTEL_TRACES_EXPORTER", "tracing.endpoint": "env OTEL_EXPORTER_OTLP_ENDPOINT"}}},
		{name: "base endpoint with a path", env: []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=https://gw.example/otel/"},
			want: want{exporter: "otlp", endpoint: "https://gw.example/otel/v1/traces", protocol: "http/protobuf", rate: 1}},
		{name: "grpc takes the base endpoint as it is", env: []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317"},
			want: want{exporter: "otlp", endpoint: "http://collector:4317", protocol: "grpc", rate: 1, sources: map[string]string{"tracing.protocol": "env OTEL_EXPORTER_OTLP_PROTOCOL"}}},
		{name: "the traces' own variables win", env: []string{
			"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
			"OTEL_EXPORTER_OTLP_ENDPOINT=http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://traces:4318/custom"},
			want: want{exporter: "otlp", endpoint: "http://traces:4318/custom", protocol: "http/protobuf", rate: 1, sources: map[string]string{
				"tracing.protocol": "env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "tracing.endpoint": "env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}}},
		{name: "a WEFT variable wins", env: []string{"OTEL_TRACES_EXPORTER=otlp", "WEFT_TRACING_EXPORTER=none", "OTEL_TRACES_SAMPLER=always_off", "WEFT_TRACING_SAMPLE_RATE=0.5"},
			want: want{exporter: "none", protocol: "http/protobuf", rate: 0.5, sources: map[string]string{"tracing.exporter": "env WEFT_TRACING_EXPORTER", "tracing.sample_rate": "env WEFT_TRACING_SAMPLE_RATE"}}},
		{name: "a flag wins", env: []string{"OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, flags: set("tracing.protocol=http/protobuf"),
			want: want{exporter: "none", protocol: "http/protobuf", rate: 1, sources: map[string]string{"tracing.protocol": "flag --set tracing.protocol"}}},
		{name: "over the file", file: "tracing:\n  exporter: none\n  sample_rate: 0.1\n", env: []string{"OTEL_TRACES_EXPORTER=otlp"},
			want: want{exporter: "otlp", protocol: "http/protobuf", rate: 0.1, sources: map[string]string{"tracing.exporter": "env OTEL_TRACES_EXPORTER"}}},
		{name: "SDK disabled", env: []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_SDK_DISABLED=true"},
			want: want{exporter: "none", protocol: "http/protobuf", rate: 1, sources: map[string]string{"tracing.exporter": "env OTEL_SDK_DISABLED"}}},
		{name: "empty variables are unset", env: []string{"OTEL_TRACES_EXPORTER=", "OTEL_TRACES_SAMPLER="}, want: off},
		{name: "always_on", env: []string{"OTEL_TRACES_SAMPLER=always_on"}, want: want{exporter: "none", protocol: "http/protobuf", rate: 1}},
		{name: "parentbased_always_off", env: []string{"OTEL_TRACES_SAMPLER=parentbased_always_off"},
			want: want{exporter: "none", protocol: "http/protobuf", rate: 0, sources: map[string]string{"tracing.sample_rate": "env OTEL_TRACES_SAMPLER"}}},
		{name: "traceidratio", env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=0.25"},
			want: want{exporter: "none", protocol: "http/protobuf", rate: 0.25, sources: map[string]string{"tracing.sample_rate": "env OTEL_TRACES_SAMPLER_ARG"}}},
		{name: "parentbased_traceidratio without its argument", env: []string{"OTEL_TRACES_SAMPLER=parentbased_traceidratio"},
			want: want{exporter: "none", protocol: "http/protobuf", rate: 1}},
		{name: "another exporter", env: []string{"OTEL_TRACES_EXPORTER=zipkin"},
			wantErr: []string{`tracing.exporter (from env OTEL_TRACES_EXPORTER): must be "otlp" or "none", got "zipkin"`}},
		{name: "http/json", env: []string{"OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
			wantErr: []string{`tracing.protocol (from env OTEL_EXPORTER_OTLP_PROTOCOL): must be "grpc" or "http/protobuf", got "http/json"`}},
		{name: "an endpoint without a scheme", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=collector:4317"},
			wantErr: []string{`tracing.endpoint (from env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT): must be a URL such as http://collector:4318, got "collector:4317"`}},
		{name: "another sampler", env: []string{"OTEL_TRACES_SAMPLER=jaeger_remote"},
			wantErr: []string{"OTEL_TRACES_SAMPLER (from env): want always_on", `got "jaeger_remote"`}},
		{name: "a ratio that is no number", env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=half"},
			wantErr: []string{`OTEL_TRACES_SAMPLER_ARG (from env): want a ratio from 0 to 1 for traceidratio, got "half"`}},
		{name: "a ratio out of range", env: []string{"OTEL_TRACES_SAMPLER=traceidratio", "OTEL_TRACES_SAMPLER_ARG=2"},
			wantErr: []string{"tracing.sample_rate (from env OTEL_TRACES_SAMPLER_ARG): must be from 0 to 1, got 2"}},
		{name: "SDK disabled is a boolean", env: []string{"OTEL_SDK_DISABLED=yes"},
			wantErr: []string{`OTEL_SDK_DISABLED (from env): want true or false, got "yes"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tt.file, tt.env, tt.flags...)
			if tt.wantErr != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("loaded %+v, %v; want an invalid configuration", c, err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error does not say %q:\n%v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.Tracing
			if got.Exporter != tt.want.exporter || got.Endpoint != tt.want.endpoint || got.Protocol != tt.want.protocol || got.SampleRate != tt.want.rate {
				t.Errorf("tracing = %+v, want %+v", got, tt.want)
			}
			for key, src := range tt.want.sources {
				if s := c.SourceOf(key); s != src {
					t.Errorf("%s came from %q, want %q", key, s, src)
				}
			}
			// What runs is what was loaded.
			n := c.Node(nil).Tracing
			if n.Exporter != got.Exporter || n.Endpoint != got.Endpoint || n.Protocol != got.Protocol || n.SampleRate != got.SampleRate {
				t.Errorf("the node's tracing %+v, the configuration's %+v", n, got)
			}
		})
	}
}

// TestLoggerCarriesTheSpanWhenTracing: with tracing on, a line logged
// inside a span carries its trace_id; with it off, no work is added and
// no id either.
func TestLoggerCarriesTheSpanWhenTracing(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xaa}, SpanID: trace.SpanID{0xbb}})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	for _, tt := range []struct {
		env  []string
		want bool
	}{{nil, false}, {[]string{"OTEL_TRACES_EXPORTER=otlp"}, true}} {
		c, err := load(t, "", tt.env)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		c.Logger(&b).InfoContext(ctx, "in a span")
		if got := strings.Contains(b.String(), "trace_id="+sc.TraceID().String()); got != tt.want {
			t.Errorf("env %v: the line %q carries the trace id: %v, want %v", tt.env, b.String(), got, tt.want)
		}
	}
}
