package plugins_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/procstat"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// grower is a plugin whose activity "go" grows its memory by the number of
// pages its input's length says (input "1234" grows by 4 pages: one per
// byte), touches every page, and reports memory.grow's result: "ok", or
// "no" when the grow failed. Then it ends as end says: "report", "trap"
// or "spin" (until it is stopped).
func grower(t *testing.T, tag, end string) []byte {
	switch end {
	case "report":
		end = `(if (i32.eq (local.get $r) (i32.const -1)) (then (call $result (i32.const 40) (i32.const 4))) (else (call $result (i32.const 34) (i32.const 4)))) (i32.const 0)`
	case "trap":
		end = `(unreachable)`
	case "spin":
		end = `(loop $l (br $l)) (i32.const 0)`
	}
	return testplugins.WAT(t, `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"go\"}]}    \"ok\"  \"no\"`+tag+`")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 0) (i32.const 30)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) (local $r i32)
    (local.set $r (memory.grow (local.get 2)))
    (if (i32.ne (local.get $r) (i32.const -1)) (then
      (memory.fill (i32.const 65536) (i32.const 0xAB) (i32.mul (i32.sub (memory.size) (i32.const 1)) (i32.const 65536)))))
    `+end+`))`)
}

func pages(n int) []byte { return []byte(strings.Repeat("1", n)) }

// rss is this process's resident memory.
func rss(t *testing.T) int64 {
	t.Helper()
	n, err := procstat.RSS(os.Getpid())
	if err != nil {
		t.Skip(err)
	}
	return n
}

// A guest's memory lives outside the Go heap and goes back to the system
// as soon as its instance is closed. Not parallel: it reads the process's
// memory.
func TestMemoryGoesBackWhenAnInstanceCloses(t *testing.T) {
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), grower(t, "", "trap"))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	base := rss(t)
	// The input takes 4000 pages: 250 MiB, touched, then a trap.
	_, err = rt.Invoke(context.Background(), m.Version, call.Call{Activity: "go", Input: pages(4000)})
	if !errors.Is(err, call.ErrTrap) {
		t.Fatalf("%v, want the trap", err)
	}
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew > 64<<20 {
		t.Errorf("the Go heap grew by %d MiB while the guest took 250 MiB: guest memory should live outside it", grew>>20)
	}
	if now := rss(t); now > base+64<<20 {
		t.Errorf("RSS %d MiB after the instance was discarded, %d MiB before: the guest's 250 MiB were not given back", now>>20, base>>20)
	}
}

// Under the host's memory budget, a new instance makes room by closing the
// least recently used idle instance of another version; a guest growing
// beyond what is left sees memory.grow fail.
func TestMemoryBudgetEvictsIdleInstances(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	// Each instance: one page to start, 50 MiB grown; the budget fits two.
	rt := testplugins.Runtime(t, plugins.Config{MaxMemory: 130 * mib, MemoryLimitPages: 1600})
	ctx := context.Background()
	var versions []string
	for _, tag := range []string{"a", "b", "c"} {
		m, err := rt.Load(ctx, grower(t, tag, "report"))
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, m.Version)
	}
	// After loading, each version has one idle 64 KiB instance.
	for i, v := range versions[:2] {
		out, err := rt.Invoke(ctx, v, call.Call{Activity: "go", Input: pages(800)})
		if err != nil || string(out) != `"ok"` {
			t.Fatalf("version %d: %s, %v", i, out, err)
		}
	}
	// The third grows by 50 MiB too: version a's idle instance, the least
	// recently used, is closed to make room.
	out, err := rt.Invoke(ctx, versions[2], call.Call{Activity: "go", Input: pages(800)})
	if err != nil || string(out) != `"ok"` {
		t.Fatalf("third version: %s, %v", out, err)
	}
	if s := rt.Stats(versions[0]); s.Evicted != 1 || s.Live != 0 {
		t.Errorf("least recently used version: %+v, want its idle instance evicted", s)
	}
	if s := rt.Stats(versions[1]); s.Evicted != 0 {
		t.Errorf("second version: %+v, want it kept", s)
	}
	// While a busy instance holds 50 MiB, growing by 44 MiB more cannot
	// fit even after every idle instance is closed: memory.grow fails
	// inside the guest.
	busy, err := rt.Load(ctx, grower(t, "d", "spin"))
	if err != nil {
		t.Fatal(err)
	}
	spun := make(chan error, 1)
	spinCtx, stopSpinning := context.WithTimeout(ctx, time.Minute)
	defer stopSpinning()
	go func() {
		_, err := rt.Invoke(spinCtx, busy.Version, call.Call{Activity: "go", Input: pages(800)})
		spun <- err
	}()
	// Its growth closes version b's idle instance, the least recently
	// used, and then it holds 50 MiB beside c's idle 50.
	deadline := time.Now().Add(10 * time.Second)
	for used, _ := rt.Memory(); used < 100*mib || rt.Stats(versions[1]).Live != 0 || rt.Stats(versions[2]).Idle == 0; used, _ = rt.Memory() {
		if time.Now().After(deadline) {
			used, _ := rt.Memory()
			t.Fatalf("the busy guest never grew: %d MiB in use", used>>20)
		}
		time.Sleep(5 * time.Millisecond)
	}
	out, err = rt.Invoke(ctx, versions[2], call.Call{Activity: "go", Input: pages(700)})
	if err != nil || string(out) != `"no"` {
		t.Fatalf("a grow beyond the budget: %s, %v; want memory.grow to fail in the guest", out, err)
	}
	stopSpinning()
	if err := <-spun; !errors.Is(err, context.Canceled) {
		t.Fatalf("the busy guest: %v, want it cancelled", err)
	}
}

// An instance unused for IdleTimeout is closed.
func TestIdleInstancesExpire(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{IdleTimeout: 50 * time.Millisecond})
	m, err := rt.Load(context.Background(), grower(t, "", "report"))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for rt.Stats(m.Version).Live != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v: the idle instance is still there", rt.Stats(m.Version))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := rt.Stats(m.Version); s.Evicted != 1 {
		t.Errorf("stats %+v, want one evicted", s)
	}
	// The next call creates a new instance.
	if out, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "go"}); err != nil || string(out) != `"ok"` {
		t.Fatalf("after expiry: %s, %v", out, err)
	}
}

// Compiling a large module gives its garbage back to the system at once,
// instead of keeping it resident. Not parallel: it reads the process's
// memory statistics. A fresh cache directory makes it compile.
func TestCompileGivesItsMemoryBack(t *testing.T) {
	rt := testplugins.Runtime(t, plugins.Config{CacheDir: t.TempDir()})
	if _, err := rt.Load(context.Background(), testplugins.Bytes(t, "text")); err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.GC() // what is garbage counts as not in use, freed or not
	runtime.ReadMemStats(&ms)
	if kept := int64(ms.HeapSys) - int64(ms.HeapReleased) - int64(ms.HeapInuse); kept > 48<<20 {
		t.Errorf("after compiling, the Go heap keeps %d MiB it does not use (%d MiB in use)", kept>>20, ms.HeapInuse>>20)
	}
}

// A function body larger than MaxFunctionBytes is refused before it is
// compiled, naming the limit.
func TestLargeFunctionsAreRefused(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxFunctionBytes: 1024})
	body := strings.Repeat("(drop (i32.const 1))", 400)
	_, err := rt.Load(context.Background(), testplugins.WAT(t, `(module (func `+body+`))`))
	if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), "more than the limit of 1024 (plugins.max_function_bytes)") {
		t.Fatalf("%v; want a refusal naming the function size limit", err)
	}
}

// Every byte counted against the budget comes back: from instantiations
// that fail (a start function that traps, _initialize calling proc_exit),
// which wazero does not clean up, and from instances closed by Unload.
func TestBudgetComesBackAfterFailuresAndUnload(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	ctx := context.Background()
	for i := range 5 {
		// 10 MiB of memory, then a trap in the start function; the data
		// segment makes each module distinct.
		_, err := rt.Load(ctx, testplugins.WAT(t, `(module (memory 160) (data (i32.const 0) "`+strconv.Itoa(i)+`")
  (func $s unreachable) (start $s))`))
		if !errors.Is(err, plugins.ErrInvalid) {
			t.Fatalf("a trapping start function: %v, want it refused", err)
		}
	}
	_, err := rt.Load(ctx, testplugins.WAT(t, `(module
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 160)
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 0))
  (func (export "weft_manifest") (result i32) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "_initialize") (call $exit (i32.const 0))))`))
	if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), "proc_exit") {
		t.Fatalf("_initialize calling proc_exit: %v, want it refused", err)
	}
	if used, _ := rt.Memory(); used != 0 {
		t.Fatalf("%d bytes still counted after failed loads", used)
	}
	m, err := rt.Load(ctx, grower(t, "", "report"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "go", Input: pages(100)}); err != nil {
		t.Fatal(err)
	}
	if used, _ := rt.Memory(); used != 101*65536 {
		t.Fatalf("%d bytes counted for one instance of 101 pages", used)
	}
	rt.Unload(ctx, m.Version)
	if used, _ := rt.Memory(); used != 0 {
		t.Fatalf("%d bytes still counted after Unload", used)
	}
}

// A body of nothing but loops grows several times under the
// instrumentation; once instrumented it may not exceed twice the function
// size limit either.
func TestInstrumentedFunctionsAreBounded(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxFunctionBytes: 1024})
	body := strings.Repeat("(loop)", 330) // 990 bytes, about 10 KiB instrumented
	_, err := rt.Load(context.Background(), testplugins.WAT(t, `(module (memory 1) (func `+body+`))`))
	if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), "once instrumented") {
		t.Fatalf("%v; want a refusal naming the instrumented size", err)
	}
}
