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
	"github.com/weftworks/weft/internal/partition"
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
// that share their notifications (nodes of one cluster). shardOf says in
// which shard the bus sends a payload of a sharded topic (0 for all on a
// classic bus): order is kept within a shard only.
func exercise(t *testing.T, newBus func(t *testing.T) bus, shardOf func(payload string) int) {
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
		got := in.wait(t, len(want))
		byShard := func(payloads []string) map[int]string {
			out := map[int]string{}
			for _, p := range payloads {
				out[shardOf(p)] += p + ","
			}
			return out
		}
		wantBy, gotBy := byShard(want), byShard(got)
		if len(gotBy) != len(wantBy) {
			t.Fatalf("received %q, want %q", got, want)
		}
		for q, w := range wantBy {
			if gotBy[q] != w {
				t.Fatalf("shard %d received out of order: %q, want %q", q, gotBy[q], w)
			}
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
		// Every payload in x's shard, so that they travel in order on a
		// sharded bus too.
		inShard := func(base string) string {
			for i := 0; ; i++ {
				if p := fmt.Sprint(base, i); shardOf(p) == shardOf("x") {
					return p
				}
			}
		}
		y, end, end2 := inShard("y"), inShard("end"), inShard("end2")
		for _, p := range []string{"x", y} {
			if err := a.Publish(ctx, "in", []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		relayed.wait(t, 1)
		// Were y relayed, its relay would be published while y is handled,
		// before the bus handles anything published after x was relayed:
		// so before end2 at the latest.
		for i, p := range []string{end, end2} {
			if err := a.Publish(ctx, "out", []byte(p)); err != nil {
				t.Fatal(err)
			}
			relayed.wait(t, i+2)
		}
		if got, want := relayed.snapshot(), []string{"x", end, end2}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("relayed %q, want %q (%s came after the unsubscribe)", got, want, y)
		}
	})
	t.Run("functions may subscribe", func(t *testing.T) {
		t.Parallel()
		a := newBus(t)
		ctx := timeout(t, 20*time.Second)
		got := newInbox()
		subscribed := make(chan error, 1)
		if _, err := a.Subscribe(ctx, "in", func([]byte) {
			_, err := a.Subscribe(ctx, "out", got.fn)
			subscribed <- err
		}); err != nil {
			t.Fatal(err)
		}
		if err := a.Publish(ctx, "in", []byte("go")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-subscribed:
			if err != nil {
				t.Fatalf("Subscribe from a function: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("Subscribe from a function did not return")
		}
		if err := a.Publish(ctx, "out", []byte("x")); err != nil {
			t.Fatal(err)
		}
		if g := got.wait(t, 1); g[0] != "x" {
			t.Fatalf("got %q, want x", g)
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
	}, func(string) int { return 0 })
}

// shardedTopics are the topics the suite's sharded buses send sharded;
// "definitions" stays classic.
var shardedTopics = []string{"cancel", "t", "in", "out"}

// The suite on a single redis-server with four shards: sharded pub/sub
// outside cluster mode, where the shards share one connection.
func TestRedisSharded(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	exercise(t, func(t *testing.T) bus {
		r, err := notify.NewRedis(notify.RedisConfig{
			Client: s.Client(t), Prefix: t.Name() + ":", Shards: 4, Sharded: shardedTopics, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}, func(p string) int { return partition.Of(p, 4) })
}

// busConfigs are the two kinds of bus the recovery tests run: classic
// pub/sub, and four shards with the topic "cancel" sharded.
var busConfigs = []struct {
	name   string
	shards int
}{{"classic", 1}, {"sharded", 4}}

// idsOfShards returns, for each of n shards, a payload that falls in it,
// with tag in the name so that successive calls give new payloads.
func idsOfShards(n int, tag string) []string {
	ids := make([]string, n)
	for q := range n {
		for j := 0; ids[q] == ""; j++ {
			if id := fmt.Sprintf("%s-%d-%d", tag, q, j); partition.Of(id, n) == q {
				ids[q] = id
			}
		}
	}
	return ids
}

// publishUntilReceived publishes payloads of topic on pub again and again
// until every inbox has received each of them at least once since the call,
// and fails the test after within.
func publishUntilReceived(t *testing.T, pub bus, topic string, payloads []string, within time.Duration, inboxes ...*inbox) {
	t.Helper()
	ctx := timeout(t, within+10*time.Second)
	base := make([]int, len(inboxes))
	for i, in := range inboxes {
		base[i] = len(in.snapshot())
	}
	deadline := time.Now().Add(within)
	for {
		missing := 0
		for i, in := range inboxes {
			got := map[string]bool{}
			for _, p := range in.snapshot()[base[i]:] {
				got[p] = true
			}
			for _, p := range payloads {
				if !got[p] {
					missing++
				}
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d payloads on %s not received within %s", missing, len(payloads)*len(inboxes), topic, within)
		}
		// Published before a bus has subscribed again, a notification is
		// lost (at most once): publish again.
		for _, p := range payloads {
			_ = pub.Publish(ctx, topic, []byte(p))
		}
		wait := time.NewTimer(100 * time.Millisecond)
		select {
		case <-inboxes[0].more:
		case <-wait.C:
		}
		wait.Stop()
	}
}

// After a restart of Redis the bus subscribes again: a publish is received
// within a deadline, in every shard, on a bus that subscribed before the
// restart.
func TestRedisResubscribesAfterRestart(t *testing.T) {
	t.Parallel()
	for _, c := range busConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			newBus := func() *notify.Redis {
				r, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Shards: c.shards, Sharded: []string{"cancel"}, Logger: testLogger(t)})
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
			publishUntilReceived(t, pub, "cancel", idsOfShards(c.shards, "before"), 10*time.Second, in)
			for i, restart := range []func(testing.TB){s.Restart, func(t testing.TB) { s.Kill(t); s.Restart(t) }} {
				restart(t)
				publishUntilReceived(t, pub, "cancel", idsOfShards(c.shards, fmt.Sprint("after", i)), 15*time.Second, in)
			}
		})
	}
}

func TestNewRedisNeedsAClient(t *testing.T) {
	t.Parallel()
	if _, err := notify.NewRedis(notify.RedisConfig{}); err == nil || !strings.Contains(err.Error(), "RedisConfig.Client") {
		t.Fatalf("NewRedis without a client: %v", err)
	}
}

// A server that stops answering without closing the connection (paused)
// makes the bus replace its silent connections; once the server is back, a
// publish is received again, in every shard, within a deadline.
func TestRedisRecoversFromASilentServer(t *testing.T) {
	t.Parallel()
	for _, c := range busConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			newBus := func() *notify.Redis {
				r, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Shards: c.shards, Sharded: []string{"cancel"}, Logger: testLogger(t)})
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
			publishUntilReceived(t, pub, "cancel", idsOfShards(c.shards, "after"), 15*time.Second, in)
		})
	}
}

// A function that calls Subscribe while the dispatcher's buffer is full,
// with more notifications behind it on the connection, gets its
// subscription within a deadline: the receivers read on, past the
// notifications that wait for the dispatcher, to the confirmation's
// answer. Every notification is still delivered, in order.
func TestSubscribeFromAFunctionPastAFullBuffer(t *testing.T) {
	t.Parallel()
	const (
		buffered = 4
		// Past the buffer and the notification the function holds,
		// more wait on the connection, before the confirmation's answer.
		published = 3 * buffered
	)
	for _, c := range busConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			cfg := func() notify.RedisConfig {
				return notify.RedisConfig{Client: s.Client(t), Shards: c.shards, Sharded: []string{"in", "out"}, Logger: testLogger(t)}
			}
			sub, err := notify.NewRedisBuffered(cfg(), buffered)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sub.Close() })
			pub, err := notify.NewRedis(cfg())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pub.Close() })
			ctx := timeout(t, time.Minute)

			// Payloads of one shard, which keep their order.
			var payloads []string
			for i := 0; len(payloads) < published; i++ {
				if p := fmt.Sprint("n", i); partition.Of(p, c.shards) == 0 {
					payloads = append(payloads, p)
				}
			}
			in, out := newInbox(), newInbox()
			release := make(chan struct{})
			subscribed := make(chan error, 1)
			var once sync.Once
			if _, err := sub.Subscribe(ctx, "in", func(p []byte) {
				in.fn(p)
				once.Do(func() {
					<-release
					within, cancel := context.WithTimeout(ctx, 10*time.Second)
					defer cancel()
					_, err := sub.Subscribe(within, "out", out.fn)
					subscribed <- err
				})
			}); err != nil {
				t.Fatal(err)
			}
			for _, p := range payloads {
				if err := pub.Publish(ctx, "in", []byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			// The function holds the first; the buffer fills with the next.
			deadline := time.Now().Add(10 * time.Second)
			for sub.Buffered() < buffered {
				if time.Now().After(deadline) {
					t.Fatalf("the buffer holds %d notifications after 10s, want %d", sub.Buffered(), buffered)
				}
				poll := time.NewTimer(10 * time.Millisecond)
				<-poll.C
			}
			close(release)
			select {
			case err := <-subscribed:
				if err != nil {
					t.Fatalf("Subscribe from a function, the buffer full: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("Subscribe from a function, the buffer full, did not return")
			}
			if got := in.wait(t, len(payloads)); strings.Join(got, ",") != strings.Join(payloads, ",") {
				t.Fatalf("received %q, want %q", got, payloads)
			}
			if err := pub.Publish(ctx, "out", []byte("x")); err != nil {
				t.Fatal(err)
			}
			if got := out.wait(t, 1); got[0] != "x" {
				t.Fatalf("the subscription made from the function got %q, want x", got)
			}
		})
	}
}
