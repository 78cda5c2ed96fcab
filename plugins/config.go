package plugins

import (
	"crypto/x509"
	"fmt"
	"log/slog"
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

// validate reports the first field with an impossible value.
func (c Config) validate() error {
	switch {
	case c.MaxModuleBytes < 8:
		return fmt.Errorf("plugins: MaxModuleBytes must be at least 8, got %d", c.MaxModuleBytes)
	case c.MemoryLimitPages > 65536:
		return fmt.Errorf("plugins: MemoryLimitPages must be at most 65536 (4 GiB), got %d", c.MemoryLimitPages)
	case c.MaxOutputBytes < 0:
		return fmt.Errorf("plugins: MaxOutputBytes must not be negative, got %d", c.MaxOutputBytes)
	case c.MaxLogBytes < 0:
		return fmt.Errorf("plugins: MaxLogBytes must not be negative, got %d", c.MaxLogBytes)
	case c.MaxLogRecords < 0:
		return fmt.Errorf("plugins: MaxLogRecords must not be negative, got %d", c.MaxLogRecords)
	case c.MaxHeartbeatBytes < 0:
		return fmt.Errorf("plugins: MaxHeartbeatBytes must not be negative, got %d", c.MaxHeartbeatBytes)
	case c.MaxTableElements > 1<<24:
		return fmt.Errorf("plugins: MaxTableElements must be at most %d, got %d", 1<<24, c.MaxTableElements)
	case c.MaxStackBytes < 64<<10 || c.MaxStackBytes > 256<<20:
		return fmt.Errorf("plugins: MaxStackBytes must be between 64 KiB and 256 MiB, got %d", c.MaxStackBytes)
	case c.MaxMemory < int64(c.MemoryLimitPages)*65536:
		return fmt.Errorf("plugins: MaxMemory (%d) must be at least one instance's memory limit (%d)", c.MaxMemory, int64(c.MemoryLimitPages)*65536)
	case c.IdleTimeout < 0:
		return fmt.Errorf("plugins: IdleTimeout must not be negative, got %s", c.IdleTimeout)
	case c.MaxFunctionBytes < 1:
		return fmt.Errorf("plugins: MaxFunctionBytes must be positive, got %d", c.MaxFunctionBytes)
	case c.MaxCompiles < 1:
		return fmt.Errorf("plugins: MaxCompiles must be at least 1, got %d", c.MaxCompiles)
	case c.LoadTimeout < 0:
		return fmt.Errorf("plugins: LoadTimeout must not be negative, got %s", c.LoadTimeout)
	case c.PoolSize < 1:
		return fmt.Errorf("plugins: PoolSize must be at least 1, got %d", c.PoolSize)
	case c.PoolWarm < 0 || c.PoolWarm > c.PoolSize:
		return fmt.Errorf("plugins: PoolWarm must be between 0 and PoolSize (%d), got %d", c.PoolSize, c.PoolWarm)
	case c.CancelGrace < 0:
		return fmt.Errorf("plugins: CancelGrace must not be negative, got %s", c.CancelGrace)
	}
	return c.HTTP.validate()
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

func (c HTTPConfig) validate() error {
	switch {
	case c.MaxResponseBytes < 0 || c.MaxResponseBytes > 1<<30:
		return fmt.Errorf("plugins: HTTP.MaxResponseBytes must be between 0 and 1 GiB, got %d", c.MaxResponseBytes)
	case c.MaxRequestBytes < 0 || c.MaxRequestBytes > 1<<30:
		return fmt.Errorf("plugins: HTTP.MaxRequestBytes must be between 0 and 1 GiB, got %d", c.MaxRequestBytes)
	case c.MaxHeaders < 1:
		return fmt.Errorf("plugins: HTTP.MaxHeaders must be positive, got %d", c.MaxHeaders)
	case c.MaxHeaderBytes < 1024:
		return fmt.Errorf("plugins: HTTP.MaxHeaderBytes must be at least 1024, got %d", c.MaxHeaderBytes)
	case c.MaxRequests < 0:
		return fmt.Errorf("plugins: HTTP.MaxRequests must not be negative, got %d", c.MaxRequests)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("plugins: HTTP.ConnectTimeout must not be negative, got %s", c.ConnectTimeout)
	case c.Timeout < 0:
		return fmt.Errorf("plugins: HTTP.Timeout must not be negative, got %s", c.Timeout)
	}
	return nil
}
