package retry_test

import (
	"testing"
	"time"

	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/retry"
)

func policy(mod func(*definition.Retry)) definition.Retry {
	p := definition.Retry{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond, Backoff: 2, MaxInterval: 3 * time.Second}
	if mod != nil {
		mod(&p)
	}
	return p
}

func TestDecide(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	busy := retry.Cause{Kind: retry.KindActivity, Code: "busy", Retryable: true}
	tests := []struct {
		name string
		p    definition.Retry
		a    retry.Attempt
		f    retry.Cause
		want retry.Decision
	}{
		{name: "first retry waits the initial interval", p: policy(nil), a: retry.Attempt{Number: 1, Failed: t0}, f: busy, want: retry.Decision{Retry: true, Delay: 500 * time.Millisecond}},
		{name: "backoff doubles", p: policy(nil), a: retry.Attempt{Number: 3, Failed: t0}, f: busy, want: retry.Decision{Retry: true, Delay: 2 * time.Second}},
		{name: "capped at max interval", p: policy(nil), a: retry.Attempt{Number: 4, Failed: t0}, f: busy, want: retry.Decision{Retry: true, Delay: 3 * time.Second}},
		{name: "attempts exhausted", p: policy(nil), a: retry.Attempt{Number: 5, Failed: t0}, f: busy, want: retry.Decision{Reason: retry.ReasonExhausted}},
		{name: "max_attempts 1 never retries", p: policy(func(p *definition.Retry) { p.MaxAttempts = 1 }), a: retry.Attempt{Number: 1, Failed: t0}, f: busy, want: retry.Decision{Reason: retry.ReasonExhausted}},
		{name: "guest says not retryable", p: policy(nil), a: retry.Attempt{Number: 1, Failed: t0}, f: retry.Cause{Kind: retry.KindActivity, Code: "card_declined"}, want: retry.Decision{Reason: retry.ReasonNotRetryable}},
		{name: "definition lists the code", p: policy(func(p *definition.Retry) { p.NonRetryable = []string{"card_declined", "busy"} }), a: retry.Attempt{Number: 1, Failed: t0}, f: busy, want: retry.Decision{Reason: retry.ReasonNonRetryableCode}},
		{name: "timeout is retried", p: policy(nil), a: retry.Attempt{Number: 1, Failed: t0}, f: retry.Of(retry.KindTimeout), want: retry.Decision{Retry: true, Delay: 500 * time.Millisecond}},
		{name: "heartbeat timeout is retried", p: policy(nil), a: retry.Attempt{Number: 2, Failed: t0}, f: retry.Of(retry.KindHeartbeatTimeout), want: retry.Decision{Retry: true, Delay: time.Second}},
		{name: "a kind can be listed as non_retryable", p: policy(func(p *definition.Retry) { p.NonRetryable = []string{"timeout"} }), a: retry.Attempt{Number: 1, Failed: t0}, f: retry.Of(retry.KindTimeout), want: retry.Decision{Reason: retry.ReasonNonRetryableCode}},
		{name: "protocol violation is not retried", p: policy(nil), a: retry.Attempt{Number: 1, Failed: t0}, f: retry.Of(retry.KindProtocol), want: retry.Decision{Reason: retry.ReasonNotRetryable}},
		{name: "cancellation is not retried", p: policy(nil), a: retry.Attempt{Number: 1, Failed: t0}, f: retry.Of(retry.KindCancelled), want: retry.Decision{Reason: retry.ReasonNotRetryable}},
		{
			name: "retry would start after schedule_to_close", p: policy(nil),
			a: retry.Attempt{Number: 2, Failed: t0.Add(9500 * time.Millisecond), FirstScheduled: t0, ScheduleToClose: 10 * time.Second},
			f: busy, want: retry.Decision{Reason: retry.ReasonScheduleToClose},
		},
		{
			name: "retry starts before schedule_to_close", p: policy(nil),
			a: retry.Attempt{Number: 2, Failed: t0.Add(8 * time.Second), FirstScheduled: t0, ScheduleToClose: 10 * time.Second},
			f: busy, want: retry.Decision{Retry: true, Delay: time.Second},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := retry.Decide(tt.p, tt.a, tt.f, nil); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestJitterStaysWithinHalfAndFullDelay(t *testing.T) {
	t.Parallel()
	p := policy(func(p *definition.Retry) { p.Jitter = true })
	for _, r := range []float64{0, 0.25, 0.999999} {
		d := retry.Delay(p, 2, func() float64 { return r })
		if d < 500*time.Millisecond || d > time.Second {
			t.Errorf("rnd %v: delay %s outside [500ms, 1s]", r, d)
		}
	}
	if d := retry.Delay(p, 2, func() float64 { return 0 }); d != 500*time.Millisecond {
		t.Errorf("rnd 0: %s, want 500ms", d)
	}
}

func TestDelayDoesNotOverflow(t *testing.T) {
	t.Parallel()
	p := definition.Retry{MaxAttempts: 1000, InitialInterval: time.Hour, Backoff: 10}
	if d := retry.Delay(p, 900, nil); d <= 0 {
		t.Fatalf("delay %s after 900 retries: overflowed", d)
	}
}
