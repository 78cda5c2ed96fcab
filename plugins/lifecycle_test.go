package plugins_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

func TestRestartLoadsFromBlobsAndCompilationCache(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := plugins.Config{CacheDir: filepath.Join(dir, "compiled")}
	first := testplugins.RuntimeIn(t, dir, cfg)
	kit := testplugins.Load(t, first, "kit")
	if err := first.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(cfg.CacheDir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("compilation cache %s is empty after a load (%v)", cfg.CacheDir, err)
	}

	// A new process knows only the version: it reads the blob and the
	// cached machine code.
	second := testplugins.RuntimeIn(t, dir, cfg)
	out, err := second.Invoke(context.Background(), kit, plugins.Call{Activity: "upper", Input: []byte(`{"text":"again"}`)})
	if err != nil || string(out) != `{"text":"AGAIN"}` {
		t.Fatalf("after restart: %s, %v", out, err)
	}
	m, err := second.Module(context.Background(), kit)
	if err != nil || !m.Has("work") {
		t.Fatalf("Module after restart: %+v, %v", m, err)
	}
}

func TestCorruptBlobIsNotRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	blobs, err := blobfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	wasm := testplugins.WAT(t, watModule{}.String())
	version := plugins.Hash(wasm)
	wasm[len(wasm)-1] ^= 0xff // bit rot after the blob was written
	if err := blobs.Put(context.Background(), version, wasm); err != nil {
		t.Fatal(err)
	}
	rt := testplugins.RuntimeIn(t, dir, plugins.Config{})
	_, err = rt.Invoke(context.Background(), version, plugins.Call{Activity: "echo"})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("error %v, want the blob reported corrupt", err)
	}
}

func TestUnknownVersion(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	_, err := rt.Invoke(context.Background(), plugins.Hash([]byte("nothing")), plugins.Call{Activity: "echo"})
	if !errors.Is(err, plugins.ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxOutputBytes: 1000, PoolSize: 1})
	kit := testplugins.Load(t, rt, "kit")
	big := `"` + strings.Repeat("a", 2000) + `"`
	_, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo", Input: []byte(big)})
	if !errors.Is(err, plugins.ErrLimit) || !strings.Contains(err.Error(), "output: 2002 bytes, more than the limit of 1000") {
		t.Fatalf("error %v, want an output limit error", err)
	}
	if out, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo", Input: []byte(`"small"`)}); err != nil || string(out) != `"small"` {
		t.Fatalf("after the breach: %s, %v", out, err)
	}
	if st := rt.Stats(kit); st.Discarded != 1 {
		t.Errorf("discarded %d, want 1: a limit breach discards the instance", st.Discarded)
	}
}

func TestCallerCancellation(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit := testplugins.Load(t, rt, "kit")
	ctx, cancel := context.WithCancel(context.Background())
	hb := plugins.NewHeartbeat(time.Now())
	done := make(chan error, 1)
	go func() {
		_, err := rt.Invoke(ctx, kit, plugins.Call{Activity: "spin", Heartbeat: hb})
		done <- err
	}()
	// spin never heartbeats; give it a moment to be inside the guest by
	// waiting until the pool reports the instance busy.
	waitFor(t, 5*time.Second, func() bool { st := rt.Stats(kit); return st.Live == 1 && st.Idle == 0 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the guest was not stopped when the caller cancelled")
	}
}

func TestPoolBoundsConcurrentCalls(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
	kit := testplugins.Load(t, rt, "kit")
	busy, cancelBusy := context.WithCancel(context.Background())
	defer cancelBusy()
	go func() { _, _ = rt.Invoke(busy, kit, plugins.Call{Activity: "spin"}) }()
	waitFor(t, 5*time.Second, func() bool { return rt.Stats(kit).Idle == 0 })

	// The one instance is busy: a second call waits, and gives up with its
	// context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := rt.Invoke(ctx, kit, plugins.Call{Activity: "echo"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the waiting call's deadline", err)
	}
	if st := rt.Stats(kit); st.Live != 1 {
		t.Errorf("%d live instances, want the pool size 1", st.Live)
	}
	cancelBusy()
	waitFor(t, 5*time.Second, func() bool { return rt.Stats(kit).Idle == 1 || rt.Stats(kit).Live == 0 })
	if _, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo", Input: []byte(`1`)}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseRefusesCalls(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit := testplugins.Load(t, rt, "kit")
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo"}); !errors.Is(err, plugins.ErrClosed) {
		t.Fatalf("error %v, want ErrClosed", err)
	}
}

func TestUnloadThenReload(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit := testplugins.Load(t, rt, "kit")
	rt.Unload(context.Background(), kit)
	if st := rt.Stats(kit); st.Live != 0 {
		t.Fatalf("%d live instances after Unload", st.Live)
	}
	if out, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo", Input: []byte(`2`)}); err != nil || string(out) != "2" {
		t.Fatalf("after Unload: %s, %v", out, err)
	}
}

// Calls racing with Unload of their version reload it instead of failing.
func TestUnloadHammer(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 4})
	kit := testplugins.Load(t, rt, "kit")
	ctx := context.Background()
	stop := make(chan struct{})
	var unloads atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				rt.Unload(ctx, kit)
				unloads.Add(1)
			}
		}
	}()
	// Calls go on until at least 5 unloads happened among them, however
	// fast the machine loads.
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40 || unloads.Load() < 5; i++ {
				if out, err := rt.Invoke(ctx, kit, plugins.Call{Activity: "echo", Input: []byte(`7`)}); err != nil || string(out) != "7" {
					t.Errorf("call %d while unloading: %s, %v", i, out, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-done
}
