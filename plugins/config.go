package plugins

import (
	"go.opentelemetry.io/otel/trace"

	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Config configures a Runtime. The zero value is usable: WithDefaults fills
// every unset field.
type Config struct {
	// CacheDir is where compiled machine code (wazero's cache) and the
	// instrumentation's output (in weft-rewrite/) are cached, so that a
	// restart neither recompiles nor rewrites a version loaded before.
	// Empty keeps compiled code in memory only and rewrites every load.
	// Defaults to "".
	CacheDir string

	// MaxModuleBytes is the largest module accepted. Defaults to 32 MiB.
	MaxModuleBytes int

	// MemoryLimitPages caps each instance's linear memory, in 64 KiB pages.
	// Defaults to 4096 (256 MiB).
	MemoryLimitPages uint32

	// MaxOutputBytes caps an activity's output or failure document.
	// Defaults to 1 MiB.
	MaxOutputBytes int

	// MaxLogBytes caps what one call may log, through the log host function
	// and stdout/stderr together; the rest is dropped. Defaults to 64 KiB.
	MaxLogBytes int

	// MaxLogRecords caps how many log records one call may emit (log host
	// function calls and stdout/stderr lines together); the rest are
	// dropped, like bytes over MaxLogBytes. Defaults to 1000.
	MaxLogRecords int

	// MaxHeartbeatBytes caps the heartbeat details a guest may record in
	// one heartbeat call; larger details stop the call with a limit error.
	// Defaults to 64 KiB.
	MaxHeartbeatBytes int

	// MaxTableElements caps each table of an instance, in elements: a table
	// declared larger is refused at upload, and a table declared without a
	// maximum (or with a larger one) gets this maximum, so that table.grow
	// fails past it. Defaults to 262144.
	MaxTableElements uint32

	// MaxStackBytes caps the stack of one call into a guest, as the
	// instrumentation estimates it (see package instrument): a guest whose
	// calls nest deeper is stopped with a limit error. Defaults to 4 MiB.
	MaxStackBytes int

	// LoadTimeout bounds the guest code run while a version is loaded
	// (_initialize, weft_abi_version and weft_manifest of its first
	// instance): a module still running then is refused as invalid.
	// Defaults to 5s.
	LoadTimeout time.Duration

	// MaxMemory caps the guests' linear memories together, in bytes: an
	// instance is created only when its initial memory fits (idle
	// instances are closed to make room, oldest first), and a guest's
	// memory.grow beyond it fails. Defaults to 4 GiB.
	MaxMemory int64

	// IdleTimeout is how long an instance may wait unused before it is
	// closed and its memory returned. Defaults to 5m.
	IdleTimeout time.Duration

	// MaxFunctionBytes caps the body of each function of a module:
	// compiling costs memory in proportion to the largest function (about
	// 150 times its size). Defaults to 1 MiB.
	MaxFunctionBytes int

	// MaxCompiles is how many modules may compile at once; others wait.
	// Defaults to 1.
	MaxCompiles int

	// PoolSize is the most instances kept per plugin version, which bounds
	// the concurrent calls of one version. A guest that waits (on an
	// outbound request, a sleep) holds its instance, so the default is far
	// above the CPUs, as many as the engine's default workers; instances
	// are created on demand, MaxMemory caps their memories together and
	// IdleTimeout closes those left unused. Defaults to 256.
	PoolSize int

	// PoolWarm is how many instances are created when a version is loaded.
	// Defaults to 1.
	PoolWarm int

	// CancelGrace is how long a guest has to return after cancellation was
	// requested before it is stopped. Defaults to 5s.
	CancelGrace time.Duration

	// HTTP bounds the guests' outbound HTTP requests.
	HTTP HTTPConfig

	// Logger receives the runtime's own logs and, when a call gives no log
	// function, the guests' logs. Defaults to slog.Default().
	Logger *slog.Logger

	// Tracer makes a span of each outbound HTTP request, under the span
	// of the call's context, and the request carries its W3C trace
	// context (docs/observability.md, "Traces"); nil makes none and adds
	// no header.
	Tracer trace.TracerProvider

	// Now is the clock used for heartbeat times. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.MaxModuleBytes == 0 {
		c.MaxModuleBytes = 32 << 20
	}
	if c.MemoryLimitPages == 0 {
		c.MemoryLimitPages = 4096
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = 1 << 20
	}
	if c.MaxLogBytes == 0 {
		c.MaxLogBytes = 64 << 10
	}
	if c.MaxLogRecords == 0 {
		c.MaxLogRecords = 1000
	}
	if c.MaxHeartbeatBytes == 0 {
		c.MaxHeartbeatBytes = 64 << 10
	}
	if c.MaxTableElements == 0 {
		c.MaxTableElements = 1 << 18
	}
	if c.MaxStackBytes == 0 {
		c.MaxStackBytes = 4 << 20
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = 4 << 30
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.MaxFunctionBytes == 0 {
		c.MaxFunctionBytes = 1 << 20
	}
	if c.MaxCompiles == 0 {
		c.MaxCompiles = 1
	}
	if c.LoadTimeout == 0 {
		c.LoadTimeout = 5 * time.Second
	}
	if c.PoolSize == 0 {
		c.PoolSize = 256
	}
	if c.PoolWarm == 0 {
		c.PoolWarm = 1
	}
	if c.CancelGrace == 0 {
		c.CancelGrace = 5 * time.Second
	}
	c.HTTP = c.HTTP.withDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("PoolWarm", "HTTP.MaxHeaders"), so that a caller that fills
// Config from settings of its own can name its setting (the host's
// configuration does).
type ConfigError struct {
	// Field is the field's name, dotted below HTTP.
	Field string
	// Message says what is wrong, naming fields as Field does.
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "plugins: " + e.Message }

// configErrors collects a Config's ConfigErrors.
type configErrors []error

func (errs *configErrors) bad(field, format string, args ...any) {
	*errs = append(*errs, &ConfigError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)})
}

// size checks that n bytes are between lo and hi.
func (errs *configErrors) size(field string, n, lo, hi int64) {
	if n < lo || n > hi {
		errs.bad(field, "must be between %s and %s, got %s", sizeString(lo), sizeString(hi), sizeString(n))
	}
}

// positive checks that d is more than zero.
func (errs *configErrors) positive(field string, d time.Duration) {
	if d <= 0 {
		errs.bad(field, "must be positive, got %s", d)
	}
}

// sizeString writes n bytes with the largest binary unit that divides it.
func sizeString(n int64) string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Validate reports every field of c with an impossible value, each as a
// *ConfigError, joined. New calls it on the result of WithDefaults; a
// caller that sets every field itself calls it on c as it is, so that a
// zero it chose is judged rather than replaced by a default.
func (c Config) Validate() error {
	var errs configErrors
	errs.size("MaxModuleBytes", int64(c.MaxModuleBytes), 1<<10, 1<<30)
	if c.MemoryLimitPages < 1 || c.MemoryLimitPages > 65536 {
		errs.bad("MemoryLimitPages", "must be between 1 and 65536 pages of 64KiB (4GiB), got %d (%s)", c.MemoryLimitPages, sizeString(int64(c.MemoryLimitPages)*65536))
	}
	errs.size("MaxOutputBytes", int64(c.MaxOutputBytes), 1, 1<<30)
	errs.size("MaxLogBytes", int64(c.MaxLogBytes), 1, 1<<30)
	if c.MaxLogRecords < 1 || c.MaxLogRecords > 1_000_000 {
		errs.bad("MaxLogRecords", "must be between 1 and 1000000, got %d", c.MaxLogRecords)
	}
	// Details are persisted at every heartbeat cycle: a few KiB is typical.
	errs.size("MaxHeartbeatBytes", int64(c.MaxHeartbeatBytes), 1<<10, 16<<20)
	if c.MaxTableElements < 1 || c.MaxTableElements > 1<<24 {
		errs.bad("MaxTableElements", "must be between 1 and %d, got %d", 1<<24, c.MaxTableElements)
	}
	errs.size("MaxStackBytes", int64(c.MaxStackBytes), 64<<10, 256<<20)
	if limit := int64(c.MemoryLimitPages) * 65536; c.MaxMemory < limit {
		errs.bad("MaxMemory", "is %s, below MemoryLimitPages (%s): an instance could never grow to its limit", sizeString(c.MaxMemory), sizeString(limit))
	}
	errs.positive("IdleTimeout", c.IdleTimeout)
	errs.size("MaxFunctionBytes", int64(c.MaxFunctionBytes), 1<<10, 1<<30)
	if c.MaxCompiles < 1 {
		errs.bad("MaxCompiles", "must be at least 1, got %d", c.MaxCompiles)
	}
	errs.positive("LoadTimeout", c.LoadTimeout)
	if c.PoolSize < 1 {
		errs.bad("PoolSize", "must be at least 1, got %d", c.PoolSize)
	}
	if c.PoolWarm < 1 || c.PoolWarm > c.PoolSize {
		errs.bad("PoolWarm", "must be between 1 and PoolSize (%d), got %d", c.PoolSize, c.PoolWarm)
	}
	errs.positive("CancelGrace", c.CancelGrace)
	c.HTTP.validate(&errs)
	return errors.Join(errs...)
}

// HTTPConfig bounds the outbound HTTP requests guests make through the
// http_request host function. Every limit holds per request unless it says
// otherwise; none lets a request outlive its attempt's deadline.
type HTTPConfig struct {
	// MaxResponseBytes caps a response body; a larger one stops the call
	// with a limit error. Defaults to 4 MiB.
	MaxResponseBytes int
	// MaxRequestBytes caps a request body. Defaults to 4 MiB.
	MaxRequestBytes int
	// MaxHeaders caps the header lines of a request, and of a response.
	// Defaults to 100.
	MaxHeaders int
	// MaxHeaderBytes caps the header lines of a request, and of a
	// response, in bytes. Defaults to 64 KiB.
	MaxHeaderBytes int
	// MaxRequests caps the requests of one activity call (redirect hops
	// included). Defaults to 100.
	MaxRequests int
	// ConnectTimeout bounds name resolution, the connection and the TLS
	// handshake. Defaults to 10s.
	ConnectTimeout time.Duration
	// Timeout bounds a request from its start to the end of its response
	// body, redirects included. Defaults to 30s.
	Timeout time.Duration
	// RootCAs are the certificate authorities a TLS server's certificate
	// must chain to. Nil uses the system's.
	RootCAs *x509.CertPool
	// RateLimiter gives the requests under a host rule with a rate limit
	// their turns. The budgets it keeps are shared by whoever shares it:
	// a cluster's nodes share one in Redis. Nil gives the runtime an
	// in-process limiter of its own, right for a single node: a rule's
	// rate limit is always obeyed, never ignored for want of a limiter.
	RateLimiter RateLimiter
}

func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = 4 << 20
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = 4 << 20
	}
	if c.MaxHeaders == 0 {
		c.MaxHeaders = 100
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 64 << 10
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = 100
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return c
}

// validate adds the fields of c with an impossible value to errs, named
// below HTTP.
func (c HTTPConfig) validate(errs *configErrors) {
	errs.size("HTTP.MaxResponseBytes", int64(c.MaxResponseBytes), 1<<10, 1<<30)
	errs.size("HTTP.MaxRequestBytes", int64(c.MaxRequestBytes), 1, 1<<30)
	if c.MaxHeaders < 1 || c.MaxHeaders > 10_000 {
		errs.bad("HTTP.MaxHeaders", "must be between 1 and 10000, got %d", c.MaxHeaders)
	}
	errs.size("HTTP.MaxHeaderBytes", int64(c.MaxHeaderBytes), 1<<10, 16<<20)
	if c.MaxRequests < 1 {
		errs.bad("HTTP.MaxRequests", "must be at least 1, got %d", c.MaxRequests)
	}
	errs.positive("HTTP.ConnectTimeout", c.ConnectTimeout)
	errs.positive("HTTP.Timeout", c.Timeout)
}
