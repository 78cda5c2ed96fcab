package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
)

// workDir holds the plugins built for the benchmarks; it is git-ignored.
const workDir = "work"

// The fixtures TestMain prepares for every benchmark of the process.
var (
	kitWasm       []byte // examples/plugins/kit, the Weft plugin of echo and upper
	thumbnailWasm []byte // examples/plugins/thumbnail, the Weft plugin of resize
	extismWasm    []byte // extism/echo, the Extism plugin
	// cacheDir holds a wazero compilation cache that all hosts share, so
	// that each setup does not compile the plugins again. It plays no part
	// in a call.
	cacheDir string
	cache    wazero.CompilationCache
)

// TestMain builds the plugins with stock Go before any benchmark runs, so
// that `go test -bench .` works on a clean clone. Go's build cache makes a
// rebuild of unchanged sources quick.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if kitWasm, err = buildPlugin(filepath.Join("..", "examples", "plugins", "kit"), "kit.wasm"); err == nil {
		thumbnailWasm, err = buildPlugin(filepath.Join("..", "examples", "plugins", "thumbnail"), "thumbnail.wasm")
	}
	if err == nil {
		extismWasm, err = buildPlugin(filepath.Join("extism", "echo"), "extism-echo.wasm")
	}
	if err == nil {
		cacheDir, err = os.MkdirTemp("", "weft-bench-cache-")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(cacheDir)
	if cache, err = wazero.NewCompilationCacheWithDir(cacheDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cache.Close(context.Background())
	return m.Run()
}

// buildPlugin builds the Go plugin in dir as a WASI reactor into workDir/out
// and returns its bytes.
func buildPlugin(dir, out string) ([]byte, error) {
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	dst, err := filepath.Abs(filepath.Join(workDir, out))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", dst+".tmp", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: building %s: %v\n%s", dir, err, b)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// The Rust toolchain the repository builds Rust plugins with (Makefile):
// Debian's, whatever rustup puts first on PATH.
const (
	rustCargo = "/usr/bin/cargo"
	rustRustc = "/usr/bin/rustc"
)

// errNoCargo is buildRustPlugin's error when Debian's cargo is missing.
var errNoCargo = errors.New("bench: Debian's cargo (" + rustCargo + ") is not installed; make deps installs it")

// buildRustPlugin builds the Rust plugin in dir, offline from Debian's
// crates (its .cargo/config.toml), with its target directory in workDir,
// and returns its bytes.
func buildRustPlugin(dir string) ([]byte, error) {
	if _, err := os.Stat(rustCargo); err != nil {
		return nil, errNoCargo
	}
	target, err := filepath.Abs(filepath.Join(workDir, "cargo"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(rustCargo, "build", "--release", "--offline", "--locked", "--quiet")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RUSTC="+rustRustc, "CARGO_TARGET_DIR="+target)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: building %s: %v\n%s", dir, err, b)
	}
	return os.ReadFile(filepath.Join(target, "wasm32-wasi", "release", filepath.Base(dir)+".wasm"))
}

// errNoClang is buildCPlugin's error when clang is missing.
var errNoClang = errors.New("bench: clang is not installed; make deps installs it with wasi-libc")

// buildCPlugin builds the C plugin in dir (its .c files, with the C
// header of examples/plugins/ckit) as a WASI reactor in workDir, and
// returns its bytes.
func buildCPlugin(dir string) ([]byte, error) {
	clang, err := exec.LookPath("clang")
	if err != nil {
		return nil, errNoClang
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, err
	}
	dst, err := filepath.Abs(filepath.Join(workDir, filepath.Base(dir)+".wasm"))
	if err != nil {
		return nil, err
	}
	srcs, err := filepath.Glob(filepath.Join(dir, "*.c"))
	if err != nil || len(srcs) == 0 {
		return nil, fmt.Errorf("bench: no C sources in %s (%v)", dir, err)
	}
	args := append([]string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall", "-I", filepath.Join("..", "examples", "plugins", "ckit"), "-o", dst + ".tmp"}, srcs...)
	if b, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: building %s: %v\n%s", dir, err, b)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		return nil, err
	}
	return os.ReadFile(dst)
}

// memoryLimitPages is plugins.Config's default, given to every host here.
const memoryLimitPages = 4096

// runtimeConfig is the wazero configuration of the bare contenders (plus the
// shared compilation cache): plugins.New's, which no longer sets
// WithCloseOnContextDone because its instrumentation stops guests instead.
// With closeOnDone it is the configuration plugins.New used before that
// change (WithCloseOnContextDone(true)), kept as the bare-close contender so
// that the cost of that option stays visible.
func runtimeConfig(closeOnDone bool) wazero.RuntimeConfig {
	return wazero.NewRuntimeConfig().
		WithCloseOnContextDone(closeOnDone).
		WithMemoryLimitPages(memoryLimitPages).
		WithCompilationCache(cache)
}

// sizes are the input sizes of the echo call.
var sizes = []struct {
	name string
	n    int
}{
	{"100B", 100},
	{"64KiB", 64 << 10},
}

// jsonOfSize returns a JSON document of exactly n bytes (n ≥ 2): a string of
// printable ASCII that needs no escaping. plugins/bench_test.go uses the
// same input.
func jsonOfSize(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.,"
	b := make([]byte, n)
	b[0], b[n-1] = '"', '"'
	for i := 1; i < n-1; i++ {
		b[i] = alphabet[i%len(alphabet)]
	}
	return b
}

// echoFunc is one host's echo call; it returns the output.
type echoFunc func(ctx context.Context, input []byte) ([]byte, error)

// callFunc is one call of an activity of a Weft plugin; it returns the
// output.
type callFunc func(ctx context.Context, activity string, input []byte) ([]byte, error)

// weftHosts are the contenders that run a Weft plugin through the Weft ABI.
// Each setup instantiates wasm once, outside the timed loop, and b.Cleanup
// releases its resources.
var weftHosts = []struct {
	name  string
	setup func(b *testing.B, wasm []byte) callFunc
}{
	{"weft", setupWeft},
	{"bare", setupBare},
	{"bare-close", setupBareClose},
	{"bare-instr", setupBareInstr},
}

// hosts are the contenders of the echo benchmark: the Weft ABI hosts
// running the kit plugin, and Extism running its own echo plugin.
var hosts = []struct {
	name  string
	setup func(b *testing.B) echoFunc
}{
	{"weft", echoOf(setupWeft)},
	{"bare", echoOf(setupBare)},
	{"bare-close", echoOf(setupBareClose)},
	{"bare-instr", echoOf(setupBareInstr)},
	{"extism", setupExtism},
	{"extism-bounded", setupExtismBounded},
}

// echoOf returns the echo call of the kit plugin on a Weft ABI host.
func echoOf(setup func(*testing.B, []byte) callFunc) func(*testing.B) echoFunc {
	return func(b *testing.B) echoFunc {
		call := setup(b, kitWasm)
		return func(ctx context.Context, input []byte) ([]byte, error) {
			return call(ctx, "echo", input)
		}
	}
}

// BenchmarkEcho calls echo once per op, from one goroutine, on each host at
// each size. Names are host=…/size=… so that benchstat can compare hosts:
//
//	benchstat -col /host results.txt
func BenchmarkEcho(b *testing.B) {
	for _, h := range hosts {
		for _, size := range sizes {
			b.Run("host="+h.name+"/size="+size.name, func(b *testing.B) {
				echo := h.setup(b)
				input := jsonOfSize(size.n)
				ctx := context.Background()
				out, err := echo(ctx, input)
				if err != nil {
					b.Fatal(err)
				}
				if !bytes.Equal(out, input) {
					b.Fatalf("echo returned %d bytes that differ from its %d-byte input", len(out), len(input))
				}
				b.SetBytes(int64(size.n))
				b.ReportAllocs()
				cpu := startCPU()
				for b.Loop() {
					if _, err := echo(ctx, input); err != nil {
						b.Fatal(err)
					}
				}
				cpu.report(b)
			})
		}
	}
}

// setupWeft is the system under test: the public Invoke path with the
// plugin wasm, as the host runs it (default Config, so the module is
// instrumented at load).
func setupWeft(b *testing.B, wasm []byte) callFunc {
	blobs, err := blobfile.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rt, err := plugins.New(ctx, plugins.Config{CacheDir: cacheDir, Logger: slog.New(slog.DiscardHandler)}, blobs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(ctx) })
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, activity string, input []byte) ([]byte, error) {
		return rt.Invoke(ctx, m.Version, call.Call{Activity: activity, Input: input})
	}
}

// setupExtism is Extism's Go host running a stock-Go go-pdk plugin, set up
// as Extism's README does: a Plugin (one instance) created once with WASI,
// and Call per call. With these defaults a guest cannot be stopped at a
// deadline and may grow its memory to 4 GiB.
func setupExtism(b *testing.B) echoFunc {
	return newExtism(b, extism.Manifest{})
}

// setupExtismBounded is setupExtism with the guarantees Weft gives every
// call, set the way Extism offers them: a timeout, which makes Extism stop a
// guest when a call's context ends (wazero's WithCloseOnContextDone, as
// bare-close and plugins.New before its instrumentation), and the same
// memory cap.
func setupExtismBounded(b *testing.B) echoFunc {
	return newExtism(b, extism.Manifest{
		Timeout: 60_000, // ms; any value enables stopping
		Memory:  &extism.ManifestMemory{MaxPages: memoryLimitPages, MaxHttpResponseBytes: -1, MaxVarBytes: -1},
	})
}

func newExtism(b *testing.B, manifest extism.Manifest) echoFunc {
	ctx := context.Background()
	manifest.Wasm = []extism.Wasm{extism.WasmData{Data: extismWasm}}
	cfg := extism.PluginConfig{
		EnableWasi:    true,
		RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache),
	}
	p, err := extism.NewPlugin(ctx, manifest, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close(ctx) })
	return func(ctx context.Context, input []byte) ([]byte, error) {
		rc, out, err := p.CallWithContext(ctx, "echo", input)
		if err == nil && rc != 0 {
			err = fmt.Errorf("extism: echo returned %d", rc)
		}
		return out, err
	}
}
