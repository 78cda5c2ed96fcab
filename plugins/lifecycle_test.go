package plugins_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
	"github.com/weftworks/weft/plugins/call"
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
	out, err := second.Invoke(context.Background(), kit, call.Call{Activity: "upper", Input: []byte(`{"text":"again"}`)})
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
	_, err = rt.Invoke(context.Background(), version, call.Call{Activity: "echo"})
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("error %v, want the blob reported corrupt", err)
	}
}

func TestUnknownVersion(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	_, err := rt.Invoke(context.Background(), plugins.Hash([]byte("nothing")), call.Call{Activity: "echo"})
	if !errors.Is(err, plugins.ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
}

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxOutputBytes: 1000, PoolSize: 1})
	kit := testplugins.Load(t, rt, "kit")
	big := `"` + strings.Repeat("a", 2000) + `"`
	_, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo", Input: []byte(big)})
	if !errors.Is(err, call.ErrLimit) || !strings.Contains(err.Error(), "output: 2002 bytes, more than the limit of 1000") {
		t.Fatalf("error %v, want an output limit error", err)
	}
	if out, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo", Input: []byte(`"small"`)}); err != nil || string(out) != `"small"` {
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
	hb := call.NewHeartbeat(time.Now())
	done := make(chan error, 1)
	go func() {
		_, err := rt.Invoke(ctx, kit, call.Call{Activity: "spin", Heartbeat: hb})
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
	go func() { _, _ = rt.Invoke(busy, kit, call.Call{Activity: "spin"}) }()
	waitFor(t, 5*time.Second, func() bool { return rt.Stats(kit).Idle == 0 })

	// The one instance is busy: a second call waits, and gives up with its
	// context.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := rt.Invoke(ctx, kit, call.Call{Activity: "echo"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the waiting call's deadline", err)
	}
	if st := rt.Stats(kit); st.Live != 1 {
		t.Errorf("%d live instances, want the pool size 1", st.Live)
	}
	cancelBusy()
	waitFor(t, 5*time.Second, func() bool { return rt.Stats(kit).Idle == 1 || rt.Stats(kit).Live == 0 })
	if _, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo", Input: []byte(`1`)}); err != nil {
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
	if _, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo"}); !errors.Is(err, plugins.ErrClosed) {
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
	if out, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo", Input: []byte(`2`)}); err != nil || string(out) != "2" {
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
				if out, err := rt.Invoke(ctx, kit, call.Call{Activity: "echo", Input: []byte(`7`)}); err != nil || string(out) != "7" {
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

// loadLog is a Runtime's debug log, kept to see whether each load found
// the version's rewrite in the cache.
type loadLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *loadLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *loadLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// cached reports, for each load logged, whether its rewrite was cached.
func (l *loadLog) cached() []bool {
	var loads []bool
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, `msg="plugin loaded"`) {
			loads = append(loads, strings.Contains(line, "rewrite_cached=true"))
		}
	}
	return loads
}

// restarts starts Runtimes that share one blob store and one CacheDir, as a
// host's successive processes do.
type restarts struct {
	t   *testing.T
	dir string
}

func (s restarts) cacheDir() string   { return filepath.Join(s.dir, "cache") }
func (s restarts) rewriteDir() string { return filepath.Join(s.cacheDir(), "weft-rewrite") }

// start returns a Runtime with cfg and the shared directories, and its log.
func (s restarts) start(cfg plugins.Config) (*plugins.Runtime, *loadLog) {
	log := &loadLog{}
	cfg.CacheDir = s.cacheDir()
	cfg.Logger = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return testplugins.RuntimeIn(s.t, filepath.Join(s.dir, "blobs"), cfg), log
}

// load starts a Runtime, loads version from the blob store, checks that it
// runs, closes the Runtime, and says whether the rewrite was cached.
func (s restarts) load(cfg plugins.Config, version string) (cached bool, log string) {
	s.t.Helper()
	rt, l := s.start(cfg)
	defer rt.Close(context.Background())
	if out, err := rt.Invoke(context.Background(), version, call.Call{Activity: "echo", Input: []byte(`"x"`)}); err != nil || string(out) != `"x"` {
		s.t.Fatalf("after a restart: %s, %v", out, err)
	}
	loads := l.cached()
	if len(loads) != 1 {
		s.t.Fatalf("%d loads logged, want 1:\n%s", len(loads), l)
	}
	return loads[0], l.String()
}

func (s restarts) records() []string {
	s.t.Helper()
	entries, err := os.ReadDir(s.rewriteDir())
	if err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestRestartFindsRewriteInCache(t *testing.T) {
	t.Parallel()
	s := restarts{t: t, dir: t.TempDir()}
	rt, l := s.start(plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.WAT(t, watModule{}.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := l.cached(); len(got) != 1 || got[0] {
		t.Fatalf("first load: rewrite cached %v, want one load that rewrote:\n%s", got, l)
	}

	if cached, log := s.load(plugins.Config{}, m.Version); !cached {
		t.Fatalf("a restart rewrote the module again:\n%s", log)
	}
	// Another stack budget is another rewrite: it is not found, then it is.
	other := plugins.Config{MaxStackBytes: 1 << 20}
	if cached, log := s.load(other, m.Version); cached {
		t.Fatalf("a restart with another MaxStackBytes used the rewrite made for the default:\n%s", log)
	}
	if cached, log := s.load(other, m.Version); !cached {
		t.Fatalf("the second restart with another MaxStackBytes rewrote again:\n%s", log)
	}
	if cached, log := s.load(plugins.Config{}, m.Version); !cached {
		t.Fatalf("the default's record did not survive the other's:\n%s", log)
	}
	if n := len(s.records()); n != 2 {
		t.Fatalf("%d records, want one per set of options: %v", n, s.records())
	}

	// A corrupt record is ignored and replaced.
	for _, name := range s.records() {
		path := filepath.Join(s.rewriteDir(), name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0xff
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cached, log := s.load(plugins.Config{}, m.Version)
	if cached || !strings.Contains(log, "corrupt rewrite cache entry") {
		t.Fatalf("a corrupt record was not reported and ignored:\n%s", log)
	}
	if cached, log := s.load(plugins.Config{}, m.Version); !cached {
		t.Fatalf("the corrupt record was not replaced:\n%s", log)
	}
}

// A module refused at upload leaves no record: it is refused in full at
// every upload.
func TestInvalidModuleIsNotCached(t *testing.T) {
	t.Parallel()
	s := restarts{t: t, dir: t.TempDir()}
	wasm := testplugins.WAT(t, watModule{extra: `(func (export "_initialize") unreachable)`}.String())
	for range 2 {
		rt, _ := s.start(plugins.Config{})
		if _, err := rt.Load(context.Background(), wasm); !errors.Is(err, plugins.ErrInvalid) {
			t.Fatalf("error %v, want ErrInvalid", err)
		}
		if err := rt.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if r := s.records(); len(r) != 0 {
		t.Fatalf("records %v for a module that never loaded", r)
	}
}

// Runtimes sharing a CacheDir (a host's processes, or tests) load one
// version at once, each from several goroutines: all succeed and leave one
// record, which the next start finds.
func TestConcurrentLoadsOfOneVersion(t *testing.T) {
	t.Parallel()
	s := restarts{t: t, dir: t.TempDir()}
	wasm := testplugins.WAT(t, watModule{}.String())
	var wg sync.WaitGroup
	for range 4 {
		rt, _ := s.start(plugins.Config{})
		for range 3 {
			wg.Go(func() {
				if _, err := rt.Load(context.Background(), wasm); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if r := s.records(); len(r) != 1 {
		t.Fatalf("records %v, want one and no temporary files", r)
	}
	if cached, log := s.load(plugins.Config{}, plugins.Hash(wasm)); !cached {
		t.Fatalf("the next start rewrote again:\n%s", log)
	}
}

// A CacheDir whose rewrite cache cannot be written: loads rewrite every
// time, and say so once.
func TestUnwritableRewriteCacheWarnsOnce(t *testing.T) {
	t.Parallel()
	s := restarts{t: t, dir: t.TempDir()}
	if err := os.MkdirAll(s.cacheDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	// A file where the directory should be; root ignores permissions.
	if err := os.WriteFile(s.rewriteDir(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rt, l := s.start(plugins.Config{})
	for _, manifest := range []string{`{"activities":[{"name":"a"}]}`, `{"activities":[{"name":"b"}]}`} {
		if _, err := rt.Load(context.Background(), testplugins.WAT(t, watModule{manifest: manifest}.String())); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.cached(); len(got) != 2 || got[0] || got[1] {
		t.Fatalf("rewrite cached %v, want two loads that rewrote", got)
	}
	if n := strings.Count(l.String(), "cannot write the rewrite cache"); n != 1 {
		t.Fatalf("%d warnings about the rewrite cache, want 1:\n%s", n, l)
	}
}
