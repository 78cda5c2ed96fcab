package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestStartConfiguresForProduction(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []redistest.Option
		want map[string]string
	}{
		{"Defaults", nil, map[string]string{
			"appendonly": "yes", "appendfsync": "everysec", "save": "", "maxmemory-policy": "noeviction",
		}},
		{"Always", []redistest.Option{redistest.WithAppendFsync("always")}, map[string]string{
			"appendonly": "yes", "appendfsync": "always", "save": "",
		}},
		{"Snapshots", []redistest.Option{redistest.WithSnapshots("900 1")}, map[string]string{
			"appendonly": "yes", "save": "900 1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, tt.opts...)
			c := s.Client(t)
			if got, err := c.Ping(ctx(t)).Result(); err != nil || got != "PONG" {
				t.Fatalf("PING = %q, %v", got, err)
			}
			for param, want := range tt.want {
				got, err := c.ConfigGet(ctx(t), param).Result()
				if err != nil {
					t.Fatalf("CONFIG GET %s: %v", param, err)
				}
				if got[param] != want {
					t.Errorf("%s = %q, want %q", param, got[param], want)
				}
			}
		})
	}
}

func TestServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := redistest.Start(t), redistest.Start(t)
	if a.Addr() == b.Addr() || a.Dir() == b.Dir() {
		t.Fatalf("two servers share %s / %s", a.Addr(), a.Dir())
	}
	if err := a.Client(t).Set(ctx(t), "k", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Client(t).Get(ctx(t), "k").Err(); !errors.Is(err, redis.Nil) {
		t.Errorf("GET k on the other server = %v, want redis.Nil", err)
	}
}

func TestRestartKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fsync string
		down  func(*redistest.Server, testing.TB)
	}{
		// SIGTERM flushes the AOF whatever the fsync policy.
		{"StopEverysec", "everysec", (*redistest.Server).Stop},
		// A crash loses nothing acknowledged when every write is fsynced.
		{"KillAlways", "always", (*redistest.Server).Kill},
		// Restart itself stops a running server first.
		{"RunningEverysec", "everysec", func(*redistest.Server, testing.TB) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t, redistest.WithAppendFsync(tt.fsync))
			addr := s.Addr()
			c := s.Client(t)
			const n = 200
			for i := range n {
				if err := c.Set(ctx(t), fmt.Sprint("k", i), i, 0).Err(); err != nil {
					t.Fatalf("SET k%d: %v", i, err)
				}
			}
			tt.down(s, t)
			s.Restart(t)
			if s.Addr() != addr {
				t.Fatalf("Addr() = %s after restart, want %s", s.Addr(), addr)
			}
			// The old client reconnects: its pooled connections died with
			// the old process.
			for i := range n {
				got, err := c.Get(ctx(t), fmt.Sprint("k", i)).Int()
				if err != nil || got != i {
					t.Fatalf("GET k%d after restart = %d, %v; want %d", i, got, err, i)
				}
			}
		})
	}
}

func TestKillAndStopEndTheProcess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		down func(*redistest.Server, testing.TB)
	}{
		{"Kill", (*redistest.Server).Kill},
		{"Stop", (*redistest.Server).Stop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			c := s.Client(t)
			if err := c.Ping(ctx(t)).Err(); err != nil {
				t.Fatal(err)
			}
			tt.down(s, t)
			tt.down(s, t) // a second call does nothing
			if err := c.Ping(ctx(t)).Err(); err == nil {
				t.Fatal("PING answered after the server was brought down")
			}
			s.Restart(t)
			if err := c.Ping(ctx(t)).Err(); err != nil {
				t.Fatalf("PING after restart: %v", err)
			}
		})
	}
}

func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	if err := c.Set(ctx(t), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause(t)
	short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := c.Get(short, "k").Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GET on a paused server = %v, want a deadline error", err)
	}
	s.Resume(t)
	if got, err := c.Get(ctx(t), "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after resume = %q, %v", got, err)
	}
	// A server left paused is still stopped cleanly at cleanup.
	s.Pause(t)
}
