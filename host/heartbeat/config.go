package heartbeat

import (
	"fmt"
	"time"
)

// Config sizes the scheduler. The zero value is the documented default:
// WithDefaults fills every unset field. See the package documentation for
// why the defaults are what they are.
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
	// is therefore sent at most MaxRetries+1 times per cycle. Negative means
	// no retries. Defaults to 3.
	MaxRetries int
}

// WithDefaults returns a copy of c with every unset field set to its
// default. It is idempotent.
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
	if c.MaxRetries == 0 {
		c.MaxRetries = 3
	}
	return c
}

// validate reports the first field with an impossible value, naming it.
// Call it on the result of WithDefaults.
func (c Config) validate() error {
	switch {
	case c.Tick <= 0:
		return fmt.Errorf("heartbeat: Config.Tick must be positive, got %s", c.Tick)
	case c.Batch <= 0:
		return fmt.Errorf("heartbeat: Config.Batch must be positive, got %d", c.Batch)
	case c.Cycle < c.Tick:
		return fmt.Errorf("heartbeat: Config.Cycle must be at least Config.Tick (%s), got %s", c.Tick, c.Cycle)
	}
	return nil
}

// retries is MaxRetries with a negative value read as none.
func (c Config) retries() int { return max(c.MaxRetries, 0) }

// Capacity is how many items the scheduler can renew once per cycle:
// Batch × (Cycle ÷ Tick). Unset fields take their defaults.
func (c Config) Capacity() int {
	c = c.WithDefaults()
	if c.Tick <= 0 || c.Cycle < c.Tick {
		return 0
	}
	return c.Batch * int(c.Cycle/c.Tick)
}
