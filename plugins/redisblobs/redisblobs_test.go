package redisblobs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobtest"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/redisblobs"
)

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// prefix returns a key prefix of the test's own on a shared server.
func prefix(t testing.TB) string { return "test:" + t.Name() }

func TestConformance(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	blobtest.Exercise(t, func(t *testing.T) plugins.Blobs {
		return redisblobs.New(s.Client(t), prefix(t))
	})
}

func TestPutChecksTheHash(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	b := redisblobs.New(s.Client(t), prefix(t))
	ctx := timeout(t, 10*time.Second)
	data := []byte("\x00asm the real module")
	other := plugins.Hash([]byte("\x00asm another module"))
	err := b.Put(ctx, other, data)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), plugins.Hash(data)) {
		t.Fatalf("Put under the wrong hash: %v; want an error naming both hashes", err)
	}
	if _, err := b.Get(ctx, other); !errors.Is(err, plugins.ErrNotFound) {
		t.Fatalf("Get after a refused Put: %v, want ErrNotFound", err)
	}
}

func TestLargeModule(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	b := redisblobs.New(s.Client(t), prefix(t))
	ctx := timeout(t, 60*time.Second)
	data := make([]byte, 32<<20)
	_, _ = rand.Read(data)
	hash := plugins.Hash(data)
	if err := b.Put(ctx, hash, data); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("Get returned %d bytes, not the %d stored", len(got), len(data))
	}
}

// A module stored through one node survives a restart of Redis and runs on
// another node's runtime, which has never seen it. (The storing node does
// what Runtime.Load does after validating: compiling it there too would
// only double the test's time.)
func TestUploadOnOneNodeRunsOnAnother(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithAppendFsync("always"))
	ctx := timeout(t, 120*time.Second)
	kit := testplugins.Bytes(t, "kit")
	version := plugins.Hash(kit)
	if err := redisblobs.New(s.Client(t), prefix(t)).Put(ctx, version, kit); err != nil {
		t.Fatal(err)
	}
	s.Restart(t)

	rt, err := plugins.New(ctx, plugins.Config{CacheDir: t.TempDir()}, redisblobs.New(s.Client(t), prefix(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	m, err := rt.Module(ctx, version)
	if err != nil {
		t.Fatalf("Module %s on the other node: %v", version, err)
	}
	if !slices.ContainsFunc(m.Activities, func(a abi.Activity) bool { return a.Name == "echo" }) {
		t.Fatalf("activities %v lack echo", m.Activities)
	}
	out, err := rt.Invoke(ctx, version, call.Call{Activity: "echo", Input: []byte(`{"hello":"weft"}`)})
	if err != nil {
		t.Fatalf("Invoke on the other node: %v", err)
	}
	if !bytes.Contains(out, []byte("weft")) {
		t.Fatalf("echo returned %s", out)
	}
}
