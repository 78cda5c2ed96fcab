package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"runtime/debug"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Exporters for Config.Exporter.
const (
	// ExporterNone turns tracing off: New returns a nil Tracer.
	ExporterNone = "none"
	// ExporterOTLP sends spans to an OpenTelemetry collector over OTLP.
	ExporterOTLP = "otlp"
)

// Protocols for Config.Protocol, as OTEL_EXPORTER_OTLP_PROTOCOL names
// them.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultExportTimeout is Config.ExportTimeout's default: a collector
// that has not taken a batch by then has its batch dropped, so that the
// spans that keep coming meanwhile find room in the queue.
const DefaultExportTimeout = 10 * time.Second

// DefaultServiceName is Config.ServiceName's default.
const DefaultServiceName = "weft"

// failureLogInterval is how often, at most, a collector that keeps
// failing is logged again: not a line per dropped batch.
const failureLogInterval = time.Minute

// Config configures the host's traces (docs/observability.md, "Traces").
// Headers, TLS files and compression are the exporters' own, read from
// the standard OTEL_EXPORTER_OTLP_* variables.
type Config struct {
	// Exporter is "none" (tracing off) or "otlp". Defaults to "none".
	Exporter string
	// Endpoint is the collector's URL, http:// (plain) or https://
	// (TLS). For http/protobuf it is where spans are posted, at
	// /v1/traces when its path is empty; for grpc its path is ignored.
	// Empty lets the exporter read OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT,
	// and take its default (localhost:4318 or localhost:4317) without
	// one.
	Endpoint string
	// Protocol is "grpc" or "http/protobuf". Defaults to "http/protobuf",
	// as the OpenTelemetry specification does.
	Protocol string
	// SampleRate is the fraction of new traces sampled, 0 to 1; a trace
	// that continues a caller's follows the caller's decision. Zero
	// samples no new trace: it is not read as "the default" (the host's
	// tracing.sample_rate defaults to 1).
	SampleRate float64
	// ServiceName is the resource's service.name. Defaults to "weft";
	// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it, as
	// they do every resource attribute.
	ServiceName string
	// ServiceVersion is the resource's service.version. Defaults to the
	// main module's version in the binary's build information.
	ServiceVersion string
	// ExportTimeout bounds one export of a batch, its retries included.
	// Defaults to DefaultExportTimeout.
	ExportTimeout time.Duration
	// Now is the clock of the export failures' log. Defaults to
	// time.Now.
	Now func() time.Time
}

// WithDefaults returns c with every unset field set to its default.
// SampleRate has none (see its doc).
func (c Config) WithDefaults() Config {
	if c.Exporter == "" {
		c.Exporter = ExporterNone
	}
	if c.Protocol == "" {
		c.Protocol = ProtocolHTTP
	}
	if c.ServiceName == "" {
		c.ServiceName = DefaultServiceName
	}
	if c.ServiceVersion == "" {
		c.ServiceVersion = buildVersion()
	}
	if c.ExportTimeout == 0 {
		c.ExportTimeout = DefaultExportTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// buildVersion is the main module's version, or "(devel)".
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("SampleRate"), so that a caller that fills Config from
// settings of its own can name its setting (the host's configuration
// does).
type ConfigError struct {
	// Field is the field's name.
	Field string
	// Message says what is wrong, naming fields as Field does.
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "tracing: " + e.Message }

// Validate reports every field of c with an impossible value, each as a
// *ConfigError, joined. New calls it on the result of WithDefaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)})
	}
	switch c.Exporter {
	case ExporterNone, ExporterOTLP:
	default:
		bad("Exporter", "must be %q or %q, got %q", ExporterOTLP, ExporterNone, c.Exporter)
	}
	switch c.Protocol {
	case ProtocolGRPC, ProtocolHTTP:
	default:
		bad("Protocol", "must be %q or %q, got %q", ProtocolGRPC, ProtocolHTTP, c.Protocol)
	}
	if c.Endpoint != "" {
		if err := checkEndpoint(c.Endpoint); err != nil {
			bad("Endpoint", "%v", err)
		}
	}
	if math.IsNaN(c.SampleRate) || c.SampleRate < 0 || c.SampleRate > 1 {
		bad("SampleRate", "must be from 0 to 1, got %v", c.SampleRate)
	}
	if c.ExportTimeout <= 0 {
		bad("ExportTimeout", "must be positive, got %s", c.ExportTimeout)
	}
	return errors.Join(errs...)
}

// checkEndpoint accepts a collector's URL: http or https, with a host.
func checkEndpoint(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be a URL such as http://collector:4318, got %q", s)
	}
	return nil
}

// New returns the Tracer cfg describes, or nil (tracing off, not an
// error) when cfg.Exporter is "none". Its spans go through a batch
// processor that never blocks the span's maker: when the collector is
// slow or down, the queue fills and spans are dropped, and the export
// failures are logged on log, at most once per minute while they last.
// res are resource attributes besides service.name and service.version
// (the node's service.instance.id). The caller shuts the Tracer down,
// within a bounded time, so that its queued spans are flushed.
func New(ctx context.Context, cfg Config, res []attribute.KeyValue, log *slog.Logger) (*Tracer, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Exporter == ExporterNone {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	exp, err := newExporter(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("tracing: creating the %s exporter for %q: %w", cfg.Protocol, cfg.Endpoint, err)
	}
	attrs := append([]attribute.KeyValue{semconv.ServiceName(cfg.ServiceName), semconv.ServiceVersion(cfg.ServiceVersion)}, res...)
	// The environment's attributes come last: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override the host's.
	r, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		if r == nil {
			return nil, errors.Join(fmt.Errorf("tracing: building the resource: %w", err), exp.Shutdown(ctx))
		}
		// A partial resource (an OTEL_RESOURCE_ATTRIBUTES entry that does
		// not parse): the rest is kept.
		log.Warn("tracing: some resource attributes were not read", "err", err)
	}
	reporting := &reportingExporter{SpanExporter: exp, log: log, now: cfg.Now, endpoint: endpointName(cfg)}
	bsp := sdktrace.NewBatchSpanProcessor(reporting, sdktrace.WithExportTimeout(cfg.ExportTimeout))
	return NewTracer(cfg.SampleRate, sdktrace.WithSpanProcessor(bsp), sdktrace.WithResource(r)), nil
}

// newExporter builds cfg's OTLP exporter. Its retries stop within
// cfg.ExportTimeout, as its export does.
func newExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	switch cfg.Protocol {
	case ProtocolGRPC:
		opts := []otlptracegrpc.Option{
			otlptracegrpc.WithTimeout(cfg.ExportTimeout),
			otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: cfg.ExportTimeout}),
		}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	default:
		opts := []otlptracehttp.Option{
			otlptracehttp.WithTimeout(cfg.ExportTimeout),
			otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 500 * time.Millisecond, MaxInterval: 2 * time.Second, MaxElapsedTime: cfg.ExportTimeout}),
		}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(cfg.Endpoint)))
		}
		return otlptracehttp.New(ctx, opts...)
	}
}

// httpTracesURL is where an http/protobuf endpoint takes spans: the URL
// as it is, or at /v1/traces when its path is empty (the exporter would
// post to "/").
func httpTracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// endpointName names the collector in the failures' log.
func endpointName(cfg Config) string {
	if cfg.Endpoint == "" {
		return "(from the environment or the exporter's default)"
	}
	return cfg.Endpoint
}

// reportingExporter logs its exporter's failures on the injected logger,
// rate-limited, and returns nil in their place: the batch processor would
// hand the error to otel.Handle, the process's global handler, a line per
// failed batch. Spans that failed are dropped either way; the batch
// processor does not retry.
type reportingExporter struct {
	sdktrace.SpanExporter
	log      *slog.Logger
	now      func() time.Time
	endpoint string

	mu      sync.Mutex
	failing bool      // the last export failed
	logged  time.Time // when a failure was last logged
	batches int       // batches failed since then
	spans   int       // spans in them
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.report(err, len(spans))
	return nil
}

// report logs the first failure of a run of them, then a summary at most
// every failureLogInterval, and the collector's recovery.
func (e *reportingExporter) report(err error, n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if err == nil {
		if e.failing {
			e.log.Info("tracing: exporting spans again", "endpoint", e.endpoint, "failed_batches", e.batches, "dropped_spans", e.spans)
			e.failing, e.batches, e.spans = false, 0, 0
		}
		return
	}
	e.batches++
	e.spans += n
	switch {
	case !e.failing:
		e.log.Warn("tracing: exporting spans failed; they are dropped while the collector does not take them",
			"endpoint", e.endpoint, "spans", n, "err", err)
	case now.Sub(e.logged) >= failureLogInterval:
		e.log.Warn("tracing: exporting spans still fails", "endpoint", e.endpoint,
			"failed_batches", e.batches, "dropped_spans", e.spans, "since", e.logged, "err", err)
	default:
		return
	}
	e.failing, e.logged, e.batches, e.spans = true, now, 0, 0
}
