package notify_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/notify"
	"github.com/weftworks/weft/internal/redistest"
)

// bus is what the engine uses of either implementation.
type bus interface {
	Publish(ctx context.Context, topic string, payload []byte) error
	Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (unsubscribe func(), err error)
	Close() error
}

// testLogger sends a bus's logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// inbox collects the payloads a subscriber receives.
type inbox struct {
	mu   sync.Mutex
	got  []string
	more chan struct{} // a token per payload received
}

func newInbox() *inbox { return &inbox{more: make(chan struct{}, 10000)} }

func (in *inbox) fn(p []byte) {
	in.mu.Lock()
	in.got = append(in.got, string(p))
	in.mu.Unlock()
	in.more <- struct{}{}
}

// wait waits until the inbox holds n payloads and returns them.
func (in *inbox) wait(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		in.mu.Lock()
		got := append([]string(nil), in.got...)
		in.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-in.more:
		case <-deadline:
			t.Fatalf("received %d payloads %q, want %d", len(got), got, n)
		}
	}
}

func (in *inbox) snapshot() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.got...)
}

// exercise is the conformance suite of a bus; newBus returns buses
// that share their notifications (nodes of one cluster).
func exercise(t *testing.T, newBus func(t *testing.T) bus) {
	t.Run("publish reaches the topic's subscribers on every bus", func(t *testing.T) {
		t.Parallel()
		a, b := newBus(t), newBus(t)
		ctx := timeout(t, 20*time.Second)
		onA, onB, other := newInbox(), newInbox(), newInbox()
		for _, s := range []struct {
			b     bus
			topic string
			in    *inbox
		}{{a, "cancel", onA}, {b, "cancel", onB}, {b, "definitions", other}} {
			if _, err := s.b.Subscribe(ctx, s.topic, s.in.fn); err != nil {
				t.Fatal(err)
			}
		}
		payload := []byte("inst-1\x00\xff")
		if err := a.Publish(ctx, "cancel", payload); err != nil {
			t.Fatal(err)
		}
		for name, in := range map[string]*inbox{"a": onA, "b": onB} {
			if got := in.wait(t, 1); got[0] != string(payload) {
				t.Errorf("subscriber on %s got %q, want %q", name, got[0], payload)
			}
		}
		// A marker on the other topic, published after: once it is in, the
		// first notification would have been too.
		if err := a.Publish(ctx, "definitions", []byte("marker")); err != nil {
			t.Fatal(err)
		}
		if got := other.wait(t, 1); len(got) != 1 || got[0] != "marker" {
			t.Errorf("subscriber of another topic got %q, want only the marker", got)
		}
	})
	t.Run("order is kept per publisher", func(t *testing.T) {
		t.Parallel()
		a, b := newBus(t), newBus(t)
		ctx := timeout(t, 20*time.Second)
		in := newInbox()
		if _, err := b.Subscribe(ctx, "t", in.fn); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 200 {
			want = append(want, fmt.Sprint(i))
			if err := a.Publish(ctx, "t", []byte(want[i])); err != nil {
				t.Fatal(err)
			}
		}
		if got := in.wait(t, len(want)); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("received out of order: %q", got)
		}
	})
	t.Run("each call gets its own payload", func(t *testing.T) {
		t.Parallel()
		a := newBus(t)
		ctx := timeout(t, 20*time.Second)
		first, second := newInbox(), newInbox()
		if _, err := a.Subscribe(ctx, "t", func(p []byte) { p[0] = 'X'; first.fn(p) }); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Subscribe(ctx, "t", second.fn); err != nil {
			t.Fatal(err)
		}
		buf := []byte("abc")
		if err := a.Publish(ctx, "t", buf); err != nil {
			t.Fatal(err)
		}
		buf[1] = 'Z' // the publisher reuses its buffer
		if got := second.wait(t, 1); got[0] != "abc" {
			t.Fatalf("second subscriber got %q, want abc", got[0])
		}
		if got := first.wait(t, 1); got[0] != "Xbc" {
			t.Fatalf("first subscriber got %q, want Xbc", got[0])
		}
	})
	t.Run("unsubscribe stops delivery to that function only", func(t *testing.T) {
		t.Parallel()
		a, b := newBus(t), newBus(t)
		ctx := timeout(t, 20*time.Second)
		gone, stays := newInbox(), newInbox()
		unsub, err := b.Subscribe(ctx, "t", gone.fn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Subscribe(ctx, "t", stays.fn); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish(ctx, "t", []byte("1")); err != nil {
			t.Fatal(err)
		}
		gone.wait(t, 1)
		stays.wait(t, 1)
		unsub()
		unsub() // harmless
		if err := a.Publish(ctx, "t", []byte("2")); err != nil {
			t.Fatal(err)
		}
		stays.wait(t, 2)
		if got := gone.snapshot(); len(got) != 1 {
			t.Fatalf("unsubscribed function got %q", got)
		}
	})
	t.Run("resubscribing after the last unsubscribe", func(t *testing.T) {
		t.Parallel()
		a, b := newBus(t), newBus(t)
		ctx := timeout(t, 20*time.Second)
		for round := range 3 {
			in := newInbox()
			unsub, err := b.Subscribe(ctx, "t", in.fn)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Publish(ctx, "t", []byte(fmt.Sprint(round))); err != nil {
				t.Fatal(err)
			}
			if got := in.wait(t, 1); got[0] != fmt.Sprint(round) {
				t.Fatalf("round %d got %q", round, got)
			}
			unsub()
		}
	})
	t.Run("functions may call the bus", func(t *testing.T) {
		t.Parallel()
		a := newBus(t)
		ctx := timeout(t, 20*time.Second)
		relayed := newInbox()
		if _, err := a.Subscribe(ctx, "out", relayed.fn); err != nil {
			t.Fatal(err)
		}
		var unsub func()
		var once sync.Once
		ready := make(chan struct{})
		var err error
		unsub, err = a.Subscribe(ctx, "in", func(p []byte) {
			<-ready
			once.Do(unsub) // unsubscribing itself from inside
			if err := a.Publish(context.Background(), "out", p); err != nil {
				t.Error(err)
			}
		})
		close(ready)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"x", "y"} {
			if err := a.Publish(ctx, "in", []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		relayed.wait(t, 1)
		// Were y relayed, its relay would be published while y is handled,
		// before the bus handles anything published after x was relayed:
		// so before end2 at the latest.
		for i, p := range []string{"end", "end2"} {
			if err := a.Publish(ctx, "out", []byte(p)); err != nil {
				t.Fatal(err)
			}
			relayed.wait(t, i+2)
		}
		if got := relayed.snapshot(); strings.Join(got, ",") != "x,end,end2" {
			t.Fatalf("relayed %q, want x, end, end2 (y came after the unsubscribe)", got)
		}
	})
	t.Run("bad input and cancelled contexts", func(t *testing.T) {
		t.Parallel()
		a := newBus(t)
		ctx := timeout(t, 20*time.Second)
		if err := a.Publish(ctx, "", nil); err == nil || !strings.Contains(err.Error(), "empty topic") {
			t.Errorf("Publish on an empty topic: %v", err)
		}
		if _, err := a.Subscribe(ctx, "", func([]byte) {}); err == nil || !strings.Contains(err.Error(), "empty topic") {
			t.Errorf("Subscribe to an empty topic: %v", err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := a.Publish(done, "t", nil); !errors.Is(err, context.Canceled) {
			t.Errorf("Publish with a cancelled context: %v", err)
		}
		if _, err := a.Subscribe(done, "t", func([]byte) {}); !errors.Is(err, context.Canceled) {
			t.Errorf("Subscribe with a cancelled context: %v", err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		a := newBus(t)
		ctx := timeout(t, 20*time.Second)
		unsub, err := a.Subscribe(ctx, "t", func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		unsub() // harmless after Close
		if err := a.Publish(ctx, "t", nil); !errors.Is(err, notify.ErrClosed) {
			t.Errorf("Publish after Close: %v, want ErrClosed", err)
		}
		if _, err := a.Subscribe(ctx, "t", func([]byte) {}); !errors.Is(err, notify.ErrClosed) {
			t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
		}
	})
}

func TestRedis(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	exercise(t, func(t *testing.T) bus {
		// Each subtest has its own prefix: buses of one subtest share it.
		r, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Prefix: t.Name() + ":", Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	})
}

// After a restart of Redis the bus subscribes again: a publish is received
// within a deadline, on a bus that subscribed before the restart.
func TestRedisResubscribesAfterRestart(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	newBus := func() *notify.Redis {
		r, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	pub, sub := newBus(), newBus()
	ctx := timeout(t, 60*time.Second)
	in := newInbox()
	if _, err := sub.Subscribe(ctx, "cancel", in.fn); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(ctx, "cancel", []byte("before")); err != nil {
		t.Fatal(err)
	}
	in.wait(t, 1)

	for _, restart := range []func(testing.TB){s.Restart, func(t testing.TB) { s.Kill(t); s.Restart(t) }} {
		restart(t)
		// Published before the bus has reconnected, a notification is lost
		// (at most once): publish until one gets through.
		n := len(in.snapshot())
		deadline := time.Now().Add(15 * time.Second)
		for len(in.snapshot()) == n {
			if time.Now().After(deadline) {
				t.Fatal("no notification received within 15s of the restart")
			}
			_ = pub.Publish(ctx, "cancel", []byte("after"))
			select {
			case <-in.more:
			case <-time.After(100 * time.Millisecond): // publish again
			}
		}
		if got := in.snapshot(); got[len(got)-1] != "after" {
			t.Fatalf("received %q", got)
		}
	}
}

func TestNewRedisNeedsAClient(t *testing.T) {
	t.Parallel()
	if _, err := notify.NewRedis(notify.RedisConfig{}); err == nil || !strings.Contains(err.Error(), "RedisConfig.Client") {
		t.Fatalf("NewRedis without a client: %v", err)
	}
}

// A server that stops answering without closing the connection (paused)
// makes the bus replace its silent connection; once the server is back, a
// publish is received again within a deadline.
func TestRedisRecoversFromASilentServer(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	newBus := func() *notify.Redis {
		r, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	pub, sub := newBus(), newBus()
	ctx := timeout(t, 60*time.Second)
	in := newInbox()
	if _, err := sub.Subscribe(ctx, "cancel", in.fn); err != nil {
		t.Fatal(err)
	}
	s.Pause(t)
	// Silent for three health intervals: long enough for a replacement.
	paused := time.NewTimer(3 * time.Second)
	<-paused.C
	s.Resume(t)
	deadline := time.Now().Add(15 * time.Second)
	for len(in.snapshot()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no notification received within 15s of the resume")
		}
		_ = pub.Publish(timeout(t, time.Second), "cancel", []byte("after"))
		select {
		case <-in.more:
		case <-time.After(100 * time.Millisecond): // publish again
		}
	}
}
