package lock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and after which delays an operation that
// failed with a transient error ([ErrTransient]) is tried again. The zero
// value is the policy every lock backend uses by default (3 retries, 500ms
// before the first, doubling, 20% jitter): WithDefaults fills every unset
// field.
//
// The core is deterministic: [RetryPolicy.Delay] is a pure function of the
// retry number and a random draw; [RetryPolicy.Do] is the thin loop that
// sleeps.
type RetryPolicy struct {
	// MaxRetries is how many times a failed attempt is tried again, so at
	// most MaxRetries+1 attempts are made. Negative means no retries.
	// Defaults to 3.
	MaxRetries int

	// InitialDelay is the delay before the first retry. Defaults to 500ms.
	InitialDelay time.Duration

	// Multiplier scales the delay from one retry to the next; 1 keeps it
	// constant. Defaults to 2.
	Multiplier float64

	// Jitter is the fraction by which each delay is moved at random either
	// way: a delay d becomes a uniform draw from [d×(1−Jitter), d×(1+Jitter)).
	// It must be below 1. Negative means no jitter. Defaults to 0.2.
	Jitter float64
}

// WithDefaults returns a copy of p with every unset field set to its
// default. It is idempotent.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxRetries == 0 {
		p.MaxRetries = 3
	}
	if p.InitialDelay == 0 {
		p.InitialDelay = 500 * time.Millisecond
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	if p.Jitter == 0 {
		p.Jitter = 0.2
	}
	return p
}

// Validate reports the first field with an impossible value, naming it.
// Call it on the result of WithDefaults; implementations call it from their
// constructors.
func (p RetryPolicy) Validate() error {
	switch {
	case p.InitialDelay < 0:
		return fmt.Errorf("lock: RetryPolicy.InitialDelay must not be negative, got %s", p.InitialDelay)
	case math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || p.Multiplier < 1:
		return fmt.Errorf("lock: RetryPolicy.Multiplier must be a finite number of at least 1, got %v", p.Multiplier)
	case math.IsNaN(p.Jitter) || p.Jitter >= 1:
		return fmt.Errorf("lock: RetryPolicy.Jitter must be below 1, got %v", p.Jitter)
	}
	return nil
}

// Retries returns how many retries the policy allows after the first
// attempt: MaxRetries after defaults, and 0 when it is negative.
func (p RetryPolicy) Retries() int {
	return max(p.WithDefaults().MaxRetries, 0)
}

// Delay returns how long to wait before retry number retry (1 for the first
// retry): InitialDelay × Multiplier^(retry−1), moved by the jitter using one
// draw from rnd, which returns values in [0, 1). A nil rnd, or a policy
// without jitter, gives the exact exponential delay. Unset fields take their
// defaults; retry below 1 counts as 1. The result saturates at the largest
// time.Duration instead of overflowing.
func (p RetryPolicy) Delay(retry int, rnd func() float64) time.Duration {
	p = p.WithDefaults()
	retry = max(retry, 1)
	d := float64(p.InitialDelay) * math.Pow(p.Multiplier, float64(retry-1))
	if p.Jitter > 0 && rnd != nil {
		d *= 1 + p.Jitter*(2*rnd()-1)
	}
	if d >= math.MaxInt64 || math.IsNaN(d) {
		return math.MaxInt64
	}
	return time.Duration(max(d, 0))
}

// Do calls op until it succeeds, fails with an error that does not match
// [ErrTransient], or has failed transiently 1+Retries() times; it returns
// op's last error. Between attempts it waits Delay(retry, rnd) (rnd nil uses
// math/rand/v2), and returns ctx.Err() when ctx ends first, or before the
// first attempt if ctx is already done.
func (p RetryPolicy) Do(ctx context.Context, rnd func() float64, op func(ctx context.Context) error) error {
	if rnd == nil {
		rnd = rand.Float64
	}
	retries := p.Retries()
	for retry := 0; ; retry++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := op(ctx)
		if err == nil || !errors.Is(err, ErrTransient) || retry == retries {
			return err
		}
		t := time.NewTimer(p.Delay(retry+1, rnd))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
