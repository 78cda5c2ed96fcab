package ratelimit

import (
	"errors"
	"fmt"
	"time"
)

// Bounds of a Limit, so that its arithmetic stays within a time.Duration
// and its state is meaningful.
const (
	// MaxCount bounds Limit.Count and Limit.Burst.
	MaxCount = 1_000_000
	// MinPer and MaxPer bound Limit.Per.
	MinPer = time.Millisecond
	MaxPer = 24 * time.Hour
)

// ErrLimit matches every error about a malformed Limit.
var ErrLimit = errors.New("invalid rate limit")

// Limit is a rate: Count events per Per, on average, and up to Burst
// events at once after a quiet period (Burst 0 means 1: events evenly
// spaced, none at once).
type Limit struct {
	// Count events are allowed per Per: 1 to MaxCount.
	Count int `json:"limit"`
	// Per is the period: MinPer to MaxPer.
	Per time.Duration `json:"per"`
	// Burst is how many events may happen at once after a quiet period:
	// 1 to MaxCount; 0 is read as 1.
	Burst int `json:"burst,omitempty"`
}

// Check returns an error wrapping ErrLimit that says what is wrong with l.
func (l Limit) Check() error {
	switch {
	case l.Count < 1 || l.Count > MaxCount:
		return fmt.Errorf("%w: limit %d is out of range: want 1 to %d", ErrLimit, l.Count, MaxCount)
	case l.Per < MinPer || l.Per > MaxPer:
		return fmt.Errorf("%w: per %s is out of range: want %s to %s", ErrLimit, l.Per, MinPer, MaxPer)
	case l.Burst < 0 || l.Burst > MaxCount:
		return fmt.Errorf("%w: burst %d is out of range: want 1 to %d", ErrLimit, l.Burst, MaxCount)
	}
	return nil
}

// Interval is the time between two events at the limit's rate: Per/Count.
func (l Limit) Interval() time.Duration { return l.Per / time.Duration(l.Count) }

// EffectiveBurst is Burst with 0 read as 1: how many events may happen
// at once after a quiet period. Limiters that pass a Limit on (the Redis
// script) use it so that they read Burst 0 as this package does.
func (l Limit) EffectiveBurst() int { return max(l.Burst, 1) }

// String writes l as the docs do: "10/1s burst 20".
func (l Limit) String() string {
	return fmt.Sprintf("%d/%s burst %d", l.Count, l.Per, l.EffectiveBurst())
}
