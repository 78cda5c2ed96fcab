package redislock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
)

func newTestLocker(t *testing.T, n int) (*locker, []*redis.Client) {
	t.Helper()
	var cs []redis.UniversalClient
	var raw []*redis.Client
	for range n {
		c := redistest.Start(t).Client(t)
		cs = append(cs, c)
		raw = append(raw, c)
	}
	l, err := New(Config{Clients: cs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return l.(*locker), raw
}

// TestFenceNeedsTheMutex: the token is only taken while the mutex holds
// this acquisition's value, on a quorum.
func TestFenceNeedsTheMutex(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		servers int
		ours    []bool // whether each server's mutex holds our value
		want    error
	}{
		{"OneServerOurs", 1, []bool{true}, nil},
		{"OneServerTaken", 1, []bool{false}, errFenceLost},
		{"QuorumOurs", 3, []bool{true, true, false}, nil},
		{"QuorumTaken", 3, []bool{true, false, false}, errFenceLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l, cs := newTestLocker(t, tt.servers)
			name := l.mutexKey("k")
			for i, c := range cs {
				v := "someone-else"
				if tt.ours[i] {
					v = "ours"
				}
				if err := c.Set(ctx, name, v, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				if err := c.Set(ctx, name+":fence", 7, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			token, err := l.fence(ctx, name, "ours", time.Minute)
			if !errors.Is(err, tt.want) {
				t.Fatalf("fence = %d, %v; want error %v", token, err, tt.want)
			}
			for i, c := range cs {
				got, err := c.Get(ctx, name+":fence").Uint64()
				if err != nil {
					t.Fatal(err)
				}
				if advanced := got != 7; advanced != tt.ours[i] {
					t.Errorf("server %d: counter %d; advanced %v, want %v", i, got, advanced, tt.ours[i])
				}
				if tt.ours[i] && tt.want == nil && got < token {
					t.Errorf("server %d: counter %d below the token %d", i, got, token)
				}
			}
		})
	}
}

// TestFenceReplacesACounterThatIsNoNumber: a fence counter someone else
// wrote as text counts as 0: the token is the server's clock, and the
// counter holds it after.
func TestFenceReplacesACounterThatIsNoNumber(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	l, cs := newTestLocker(t, 1)
	name := l.mutexKey("k")
	if err := cs[0].Set(ctx, name, "ours", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cs[0].Set(ctx, name+":fence", "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	before := uint64(time.Now().Add(-time.Hour).UnixMicro())
	token, err := l.fence(ctx, name, "ours", time.Minute)
	if err != nil {
		t.Fatalf("fence: %v", err)
	}
	if token < before {
		t.Errorf("token %d, want the server's clock in microseconds (about %d)", token, before)
	}
	if got, err := cs[0].Get(ctx, name+":fence").Uint64(); err != nil || got != token {
		t.Errorf("counter %d, %v after the fence; want %d", got, err, token)
	}
}

func TestNodeTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 5 * time.Millisecond},
		{50 * time.Millisecond, 25 * time.Millisecond},
		{time.Second, 50 * time.Millisecond},
		{8 * time.Second, 400 * time.Millisecond},
		{time.Minute, 3 * time.Second},
	}
	for _, tt := range tests {
		if got := nodeTimeout(tt.ttl); got != tt.want {
			t.Errorf("nodeTimeout(%s) = %s, want %s", tt.ttl, got, tt.want)
		}
	}
}

func TestPollDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		poll   int
		lo, hi time.Duration
	}{
		{1, pollMin / 2, pollMin * 3 / 2},
		{3, 2 * pollMin, 6 * pollMin},
		{7, pollMax / 2, pollMax * 3 / 2},
		{1000, pollMax / 2, pollMax * 3 / 2},
	}
	for _, tt := range tests {
		for range 100 {
			if d := pollDelay(tt.poll); d < tt.lo || d >= tt.hi {
				t.Fatalf("pollDelay(%d) = %s, want in [%s, %s)", tt.poll, d, tt.lo, tt.hi)
			}
		}
	}
}

// TestWaitersLeaveNoEntries: the per-key wake-up entries go when their
// waiters do, whether they were woken or gave up.
func TestWaitersLeaveNoEntries(t *testing.T) {
	t.Parallel()
	l, _ := newTestLocker(t, 1)
	holder, err := l.Acquire(t.Context(), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gaveUp, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(gaveUp, "k", time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire = %v, want DeadlineExceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(t.Context(), "k", time.Minute)
		if err == nil {
			ls.Release(t.Context())
		}
		got <- err
	}()
	holder.Release(t.Context())
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.watched); n != 0 {
		t.Errorf("%d wake-up entries left", n)
	}
}

// TestMutexKeyKeepsALeadingTag: a lock key is its own hash tag, unless it
// begins with one, which the mutex and the fence counter then share.
func TestMutexKeyKeepsALeadingTag(t *testing.T) {
	t.Parallel()
	l := &locker{prefix: "weft:"}
	for _, tt := range []struct{ key, want string }{
		{"workflow-instance:42", "weft:lock:{workflow-instance:42}"},
		{"{weft:3~17}workflow-instance:42", "weft:lock:{weft:3~17}workflow-instance:42"},
		{"{}empty-tag", "weft:lock:{{}empty-tag}"},
		{"{unclosed", "weft:lock:{{unclosed}"},
		{"mid{tag}", "weft:lock:{mid{tag}}"},
	} {
		if got := l.mutexKey(tt.key); got != tt.want {
			t.Errorf("mutexKey(%q) = %q, want %q", tt.key, got, tt.want)
		}
		if got, want := partition.Slot(l.mutexKey(tt.key)+":fence"), partition.Slot(l.mutexKey(tt.key)); got != want {
			t.Errorf("%q: the fence counter's slot %d is not the mutex's %d", tt.key, got, want)
		}
	}
}
