package lock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/lock"
)

func constant(v float64) func() float64 { return func() float64 { return v } }

func TestRetryPolicyDefaults(t *testing.T) {
	t.Parallel()
	got := lock.RetryPolicy{}.WithDefaults()
	want := lock.RetryPolicy{MaxRetries: 3, InitialDelay: 500 * time.Millisecond, Multiplier: 2, Jitter: 0.2}
	if got != want {
		t.Errorf("WithDefaults() = %+v, want %+v", got, want)
	}
	if again := got.WithDefaults(); again != got {
		t.Errorf("WithDefaults not idempotent: %+v then %+v", got, again)
	}
	off := lock.RetryPolicy{MaxRetries: -1, Jitter: -1}.WithDefaults()
	if off.MaxRetries != -1 || off.Jitter != -1 || off.Retries() != 0 {
		t.Errorf("disabled retries and jitter became %+v (Retries %d)", off, off.Retries())
	}
	if err := got.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		p     lock.RetryPolicy
		field string // "" when valid
	}{
		{"Defaults", lock.RetryPolicy{}, ""},
		{"NoRetriesNoJitter", lock.RetryPolicy{MaxRetries: -1, Jitter: -1}, ""},
		{"ConstantDelay", lock.RetryPolicy{Multiplier: 1}, ""},
		{"NegativeDelay", lock.RetryPolicy{InitialDelay: -time.Second}, "InitialDelay"},
		{"ShrinkingDelay", lock.RetryPolicy{Multiplier: 0.5}, "Multiplier"},
		{"NegativeMultiplier", lock.RetryPolicy{Multiplier: -2}, "Multiplier"},
		{"NaNMultiplier", lock.RetryPolicy{Multiplier: math.NaN()}, "Multiplier"},
		{"InfMultiplier", lock.RetryPolicy{Multiplier: math.Inf(1)}, "Multiplier"},
		{"WholeJitter", lock.RetryPolicy{Jitter: 1}, "Jitter"},
		{"NaNJitter", lock.RetryPolicy{Jitter: math.NaN()}, "Jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.p.WithDefaults().Validate()
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.field != "" && (err == nil || !strings.Contains(err.Error(), "RetryPolicy."+tt.field)):
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestRetryPolicyDelay(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name  string
		p     lock.RetryPolicy
		retry int
		rnd   func() float64
		want  time.Duration
	}{
		{"FirstNoDraw", lock.RetryPolicy{}, 1, nil, 500 * ms},
		{"SecondNoDraw", lock.RetryPolicy{}, 2, nil, 1000 * ms},
		{"ThirdNoDraw", lock.RetryPolicy{}, 3, nil, 2000 * ms},
		{"MidpointDrawIsExact", lock.RetryPolicy{}, 2, constant(0.5), 1000 * ms},
		{"LowestDraw", lock.RetryPolicy{}, 1, constant(0), 400 * ms},
		{"HighDraw", lock.RetryPolicy{}, 1, constant(0.75), 550 * ms},
		{"HighDrawThird", lock.RetryPolicy{}, 3, constant(0.75), 2200 * ms},
		{"NoJitterIgnoresDraw", lock.RetryPolicy{Jitter: -1}, 2, constant(0), 1000 * ms},
		{"ZeroRetryIsFirst", lock.RetryPolicy{}, 0, nil, 500 * ms},
		{"Constant", lock.RetryPolicy{Multiplier: 1, InitialDelay: 10 * ms}, 5, nil, 10 * ms},
		{"Triple", lock.RetryPolicy{Multiplier: 3, InitialDelay: 10 * ms}, 3, nil, 90 * ms},
		{"WideJitter", lock.RetryPolicy{Jitter: 0.5, InitialDelay: 100 * ms}, 1, constant(0), 50 * ms},
		{"Saturates", lock.RetryPolicy{}, 200, nil, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Delay(tt.retry, tt.rnd); got != tt.want {
				t.Errorf("Delay(%d) = %s, want %s", tt.retry, got, tt.want)
			}
		})
	}
}

// TestRetryPolicyDelayBounds checks every draw stays within the jitter.
func TestRetryPolicyDelayBounds(t *testing.T) {
	t.Parallel()
	p := lock.RetryPolicy{}
	for retry := 1; retry <= 3; retry++ {
		base := p.Delay(retry, nil)
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		for i := range 1000 {
			if d := p.Delay(retry, nil); d != base {
				t.Fatalf("Delay without a draw changed: %s then %s", base, d)
			}
			if d := p.Delay(retry, constant(float64(i)/1000)); d < lo || d >= hi {
				t.Fatalf("Delay(%d) = %s outside [%s, %s)", retry, d, lo, hi)
			}
		}
	}
}

var errDown = errors.New("connection refused")

func TestRetryPolicyDo(t *testing.T) {
	t.Parallel()
	fast := lock.RetryPolicy{InitialDelay: time.Millisecond}
	permanent := errors.New("bad request")
	tests := []struct {
		name      string
		p         lock.RetryPolicy
		failures  []error // returned by successive attempts, then nil
		wantCalls int
		wantErr   error // matched with errors.Is; nil for success
	}{
		{"FirstTry", fast, nil, 1, nil},
		{"RecoversOnLastRetry", fast, []error{lock.Transient(errDown), lock.Transient(errDown), lock.Transient(errDown)}, 4, nil},
		{"Exhausted", fast, []error{lock.Transient(errDown), lock.Transient(errDown), lock.Transient(errDown), lock.Transient(errDown), lock.Transient(errDown)}, 4, errDown},
		{"NotTransient", fast, []error{permanent}, 1, permanent},
		{"TransientThenPermanent", fast, []error{lock.Transient(errDown), permanent}, 2, permanent},
		{"NoRetries", lock.RetryPolicy{MaxRetries: -1}, []error{lock.Transient(errDown)}, 1, lock.ErrTransient},
		{"OneRetry", lock.RetryPolicy{MaxRetries: 1, InitialDelay: time.Millisecond}, []error{lock.Transient(errDown), lock.Transient(errDown)}, 2, lock.ErrTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := tt.p.Do(t.Context(), nil, func(context.Context) error {
				calls++
				if calls <= len(tt.failures) {
					return tt.failures[calls-1]
				}
				return nil
			})
			if calls != tt.wantCalls {
				t.Errorf("%d calls, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Do() = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRetryPolicyDoContext(t *testing.T) {
	t.Parallel()
	t.Run("DoneBeforeFirstAttempt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := 0
		err := lock.RetryPolicy{}.Do(ctx, nil, func(context.Context) error { calls++; return nil })
		if !errors.Is(err, context.Canceled) || calls != 0 {
			t.Errorf("Do() = %v after %d calls, want context.Canceled after 0", err, calls)
		}
	})
	t.Run("EndsDuringDelay", func(t *testing.T) {
		t.Parallel()
		// The delay is an hour: only the ctx can end the wait.
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		calls := 0
		err := lock.RetryPolicy{InitialDelay: time.Hour}.Do(ctx, nil, func(context.Context) error {
			calls++
			return lock.Transient(errDown)
		})
		if !errors.Is(err, context.DeadlineExceeded) || calls != 1 {
			t.Errorf("Do() = %v after %d calls, want context.DeadlineExceeded after 1", err, calls)
		}
	})
}

func TestTransient(t *testing.T) {
	t.Parallel()
	if lock.Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	err := lock.Transient(errDown)
	if !errors.Is(err, lock.ErrTransient) || !errors.Is(err, errDown) {
		t.Errorf("Transient(errDown) = %v matches neither sentinel nor cause", err)
	}
	if want := "lock backend unavailable: connection refused"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}

func TestCheckArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		key  string
		ttl  time.Duration
		want string // substring of the error; "" for nil
	}{
		{"Valid", "k", time.Second, ""},
		{"EmptyKey", "", time.Second, "key"},
		{"ZeroTTL", "k", 0, "ttl"},
		{"NegativeTTL", "k", -1, "ttl"},
	}
	for _, tt := range tests {
		err := lock.CheckArgs(tt.key, tt.ttl)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: CheckArgs = %v, want %q", tt.name, err, tt.want)
		}
	}
}
