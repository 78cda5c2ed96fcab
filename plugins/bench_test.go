package plugins_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
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
	out, err := rt.Invoke(context.Background(), kit, call.Call{Activity: "echo", Input: input})
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
			call := call.Call{Activity: "echo", Input: input}
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
				call := call.Call{Activity: "echo", Input: input, Heartbeat: call.NewHeartbeat(time.Now())}
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
				call := call.Call{Activity: "echo", Input: input}
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
// before its first call: a new Runtime over the CacheDir and blob store of
// an earlier one that loaded the same versions (so wazero's compilation
// cache and the rewrite cache hold them), then the loads. Close is not
// timed. The target is 25 ms per plugin.
//
//   - kit: Load of the kit from its bytes (hashing, then the rest of a
//     load), one plugin per restart; the figure BENCHMARKS.md has followed.
//   - sequential, parallel: Module of warmVersions versions of the kit
//     (each with a custom section of its own, so that each is a version
//     with its own cached rewrite and machine code) from the blob store, as
//     a restarting node loads its stored versions: one after the other, or
//     all at once.
//
// Reported per plugin: ms/plugin (wall time) and, where /proc/self/stat
// exists, cpu-ms/plugin (the process's user and system time, every thread).
func BenchmarkWarmRestart(b *testing.B) {
	kit := testplugins.Bytes(b, "kit")
	versions := make([][]byte, warmVersions)
	versions[0] = kit
	for i := 1; i < warmVersions; i++ {
		versions[i] = withCustomSection(kit, "weft-bench", fmt.Appendf(nil, "copy %d", i))
	}
	cacheDir, blobDir := b.TempDir(), b.TempDir()
	ctx := context.Background()
	start := func(b *testing.B) *plugins.Runtime {
		blobs, err := blobfile.New(blobDir)
		if err != nil {
			b.Fatal(err)
		}
		rt, err := plugins.New(ctx, plugins.Config{CacheDir: cacheDir}, blobs)
		if err != nil {
			b.Fatal(err)
		}
		return rt
	}
	// The first start compiles, rewrites and fills both caches and the
	// blob store; it is not measured.
	first := start(b)
	hashes := make([]string, len(versions))
	for i, wasm := range versions {
		m, err := first.Load(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		hashes[i] = m.Version
	}
	if err := first.Close(ctx); err != nil {
		b.Fatal(err)
	}

	run := func(b *testing.B, perRestart int, load func(rt *plugins.Runtime)) {
		var cpu time.Duration
		cpuOK := true
		b.ReportAllocs()
		for b.Loop() {
			before, ok := processCPU()
			rt := start(b)
			load(rt)
			after, ok2 := processCPU()
			cpu += after - before
			cpuOK = cpuOK && ok && ok2
			b.StopTimer() // closing is the old process's business
			if err := rt.Close(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		n := float64(b.N * perRestart)
		b.ReportMetric(float64(b.Elapsed())/float64(time.Millisecond)/n, "ms/plugin")
		if cpuOK {
			b.ReportMetric(float64(cpu)/float64(time.Millisecond)/n, "cpu-ms/plugin")
		}
	}
	b.Run("kit", func(b *testing.B) {
		run(b, 1, func(rt *plugins.Runtime) {
			if _, err := rt.Load(ctx, kit); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("sequential", func(b *testing.B) {
		run(b, len(hashes), func(rt *plugins.Runtime) {
			for _, v := range hashes {
				if _, err := rt.Module(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("parallel", func(b *testing.B) {
		run(b, len(hashes), func(rt *plugins.Runtime) {
			var wg sync.WaitGroup
			for _, v := range hashes {
				wg.Go(func() {
					if _, err := rt.Module(ctx, v); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		})
	})
}

// warmVersions is how many versions BenchmarkWarmRestart loads per restart
// in its sequential and parallel runs: more than the two cores of the
// machine BENCHMARKS.md's figures come from.
const warmVersions = 4

// withCustomSection returns wasm with a custom section appended.
func withCustomSection(wasm []byte, name string, payload []byte) []byte {
	body := binary.AppendUvarint(nil, uint64(len(name)))
	body = append(body, name...)
	body = append(body, payload...)
	out := append(bytes.Clone(wasm), 0) // custom section id
	out = binary.AppendUvarint(out, uint64(len(body)))
	return append(out, body...)
}

// processCPU returns the CPU time the process has used, user and system,
// from /proc/self/stat (in clock ticks of 10 ms, Linux's USER_HZ), or false
// where there is no such file.
func processCPU() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: utime and stime are the 12th and 13th of them.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}
