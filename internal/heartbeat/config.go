package heartbeat

import (
	"errors"
	"fmt"
	"time"
)

// Config sizes the scheduler. The zero value is usable: WithDefaults
// fills Tick, Batch and Cycle, and a zero MaxRetries retries none. See
// the package documentation for why the defaults are what they are.
type Config struct {
	// Tick is how often a batch is taken from the front of the main deque.
	// Defaults to 100ms.
	Tick time.Duration

	// Batch is the most items one tick takes, and so the most renewals in
	// one round trip. Defaults to 1000.
	Batch int

	// Cycle is how often the backup queue moves into the main deque, and so
	// how often each item is renewed and checked when the scheduler is
	// within its capacity. It must be at least Tick. Defaults to 2s.
	Cycle time.Duration

	// MaxRetries is how many times, within one cycle, a renewal that failed
	// with an unclassified error is retried (at the back of the main deque)
	// before the item waits in the backup queue for the next cycle. An item
	// is therefore sent at most MaxRetries+1 times per cycle. 0 retries
	// none, and is what the zero Config does: 0 means none here as it does
	// in the host's heartbeat.max_retries, which defaults to
	// DefaultMaxRetries. It must not be negative.
	MaxRetries int
}

// DefaultMaxRetries is the host's default Config.MaxRetries
// (heartbeat.max_retries): a transient error gets four sends within the
// cycle before the item waits for the next one (see the package
// documentation).
const DefaultMaxRetries = 3

// WithDefaults returns a copy of c with every unset field set to its
// default. It is idempotent. MaxRetries has no default other than its
// zero: 0 retries none.
func (c Config) WithDefaults() Config {
	if c.Tick == 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.Batch == 0 {
		c.Batch = 1000
	}
	if c.Cycle == 0 {
		c.Cycle = 2 * time.Second
	}
	return c
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("Cycle"), so that a caller that fills Config from settings
// of its own can name its setting (the host's configuration does).
type ConfigError struct {
	// Field is the field's name.
	Field string
	// Message says what is wrong, naming fields as Field does, each
	// after "Config.".
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "heartbeat: " + e.Message }

// Validate reports every field of c with an impossible value, each as a
// *ConfigError, joined. New calls it on the result of WithDefaults; a
// caller that sets every field itself calls it on c as it is, so that a
// zero it chose is judged rather than replaced by a default.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Message: "Config." + field + " " + fmt.Sprintf(format, args...)})
	}
	if c.Tick <= 0 {
		bad("Tick", "must be positive, got %s", c.Tick)
	}
	if c.Batch <= 0 {
		bad("Batch", "must be positive, got %d", c.Batch)
	}
	if c.Cycle < c.Tick || c.Cycle <= 0 {
		bad("Cycle", "must be at least Config.Tick (%s), got %s", c.Tick, c.Cycle)
	}
	if c.MaxRetries < 0 {
		bad("MaxRetries", "must not be negative (0 retries none), got %d", c.MaxRetries)
	}
	return errors.Join(errs...)
}

// Capacity is how many items the scheduler can renew once per cycle:
// Batch × (Cycle ÷ Tick). Unset fields take their defaults.
func (c Config) Capacity() int {
	c = c.WithDefaults()
	if c.Tick <= 0 || c.Cycle < c.Tick {
		return 0
	}
	return c.Batch * int(c.Cycle/c.Tick)
}
