package plugins_test

import (
	"bytes"
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// The invoke path's benchmarks. BENCHMARKS.md records their figures and
// bench/run.sh runs them beside the comparison with a bare wazero call and
// with Extism (bench/).

// benchSizes are the input sizes of the echo benchmarks.
var benchSizes = []struct {
	name string
	n    int
}{
	{"100B", 100},
	{"64KiB", 64 << 10},
}

// jsonOfSize returns a JSON document of exactly n bytes (n ≥ 2): a string of
// printable ASCII that needs no escaping.
func jsonOfSize(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ-_.,"
	b := make([]byte, n)
	b[0], b[n-1] = '"', '"'
	for i := 1; i < n-1; i++ {
		b[i] = alphabet[i%len(alphabet)]
	}
	return b
}

// benchEcho loads the kit plugin and checks that echo returns input
// unchanged, so that a benchmark never measures a failing call. A
// compilation cache (cfg.CacheDir) shared by the sub-benchmarks of one
// benchmark spares each of them a compilation of the kit; it plays no part
// in a call.
func benchEcho(b *testing.B, cfg plugins.Config, input []byte) (*plugins.Runtime, string) {
	b.Helper()
	rt := testplugins.Runtime(b, cfg)
	kit := testplugins.Load(b, rt, "kit")
	out, err := rt.Invoke(context.Background(), kit, plugins.Call{Activity: "echo", Input: input})
	if err != nil {
		b.Fatal(err)
	}
	if !bytes.Equal(out, input) {
		b.Fatalf("echo returned %d bytes that differ from its %d-byte input", len(out), len(input))
	}
	return rt, kit
}

// BenchmarkInvoke measures one activity call through the public API, from
// one goroutine: pool, request copy, guest, result copy and validation.
func BenchmarkInvoke(b *testing.B) {
	cacheDir := b.TempDir()
	for _, size := range benchSizes {
		b.Run("echo/"+size.name, func(b *testing.B) {
			input := jsonOfSize(size.n)
			rt, kit := benchEcho(b, plugins.Config{CacheDir: cacheDir}, input)
			ctx := context.Background()
			call := plugins.Call{Activity: "echo", Input: input}
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := rt.Invoke(ctx, kit, call); err != nil {
					b.Fatal(err)
				}
			}
		})
		// As the engine calls: each attempt has its Heartbeat, so the call
		// can be cancelled with a grace period.
		b.Run("echo-watched/"+size.name, func(b *testing.B) {
			input := jsonOfSize(size.n)
			rt, kit := benchEcho(b, plugins.Config{CacheDir: cacheDir}, input)
			ctx := context.Background()
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			for b.Loop() {
				call := plugins.Call{Activity: "echo", Input: input, Heartbeat: plugins.NewHeartbeat(time.Now())}
				if _, err := rt.Invoke(ctx, kit, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkInvokeParallel is BenchmarkInvoke from GOMAXPROCS goroutines at
// once, which exercises the pool under contention. The pool is warmed with an
// instance per goroutine so that the figure is the steady state's.
func BenchmarkInvokeParallel(b *testing.B) {
	cacheDir := b.TempDir()
	for _, size := range benchSizes {
		b.Run("echo/"+size.name, func(b *testing.B) {
			input := jsonOfSize(size.n)
			rt, kit := benchEcho(b, plugins.Config{CacheDir: cacheDir, PoolWarm: runtime.GOMAXPROCS(0)}, input)
			b.SetBytes(int64(size.n))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				call := plugins.Call{Activity: "echo", Input: input}
				for pb.Next() {
					if _, err := rt.Invoke(ctx, kit, call); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkWarmRestart measures what a restarted host spends per plugin
// before its first call: a new Runtime over the same compilation cache
// directory and blob store, and Load of the kit from its bytes (hashing,
// validation, compilation from the cache, the first instance with the Go
// runtime's initialisation, and the manifest). The target is 50 ms.
func BenchmarkWarmRestart(b *testing.B) {
	wasm := testplugins.Bytes(b, "kit")
	cacheDir, blobDir := b.TempDir(), b.TempDir()
	ctx := context.Background()
	start := func() *plugins.Runtime {
		blobs, err := blobfile.New(blobDir)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := plugins.New(ctx, plugins.Config{CacheDir: cacheDir}, blobs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Load(ctx, wasm); err != nil {
			b.Fatal(err)
		}
		return rt
	}
	// The first start compiles and fills the cache; it is not measured.
	if err := start().Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		rt := start()
		b.StopTimer() // closing is the old process's business
		if err := rt.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/float64(b.N), "ms/op")
}
