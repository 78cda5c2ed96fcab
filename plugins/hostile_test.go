package plugins_test

import (
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/internal/wasmgen"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// Guests that never return on their own, each stopped at its deadline by
// the instrumentation: one without loops (an exponential recursion, which
// wazero's own loop-header check never sees, and which froze the whole
// process at its next garbage collection), and a tight loop.
var runaways = []struct{ name, extra, body string }{
	{"exponential recursion", `(func $f (param $n i32)
    (if (local.get $n) (then
      (call $f (i32.sub (local.get $n) (i32.const 1)))
      (call $f (i32.sub (local.get $n) (i32.const 1))))))`,
		`(call $log (i32.const 1) (i32.const 0) (i32.const 2)) (call $f (i32.const 60)) (i32.const 0)`},
	{"tight loop", ``, `(call $log (i32.const 1) (i32.const 0) (i32.const 2)) (loop $l (br $l)) (i32.const 0)`},
}

func TestRunawayGuestsAreStoppedAtTheirDeadline(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 8})
	const deadline = 300 * time.Millisecond
	var wg sync.WaitGroup
	// Each guest logs once before it runs away.
	started := make(chan struct{}, 4)
	logged := func(call.Record) { started <- struct{}{} }
	// Two of each at once on two cores: every guest must still be stopped,
	// and the process must still collect garbage and run other goroutines.
	for _, r := range append(runaways, runaways...) {
		m, err := rt.Load(context.Background(), testplugins.Guest{Extra: r.extra, Body: r.body}.Module(t))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			start := time.Now()
			_, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "go", Log: logged})
			if elapsed := time.Since(start); !errors.Is(err, call.ErrTimeout) || elapsed > deadline+10*time.Second {
				t.Errorf("%s: %v after %s; want ErrTimeout at the %s deadline", r.name, err, elapsed, deadline)
			} else {
				t.Logf("%s: stopped %s after its deadline", r.name, elapsed-deadline)
			}
		}()
	}
	// While they run, a garbage collection completes.
	for range 4 {
		<-started
	}
	gc := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		runtime.GC()
		gc <- time.Since(start)
	}()
	select {
	case d := <-gc:
		t.Logf("a garbage collection during the runaways took %s", d)
	case <-time.After(10 * time.Second):
		t.Fatal("a garbage collection did not complete while the guests ran: the process is frozen")
	}
	wg.Wait()
}

func TestLoadBoundsGuestCode(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	rt := testplugins.Runtime(t, plugins.Config{LoadTimeout: timeout})
	for _, c := range []struct{ name, init, manifest string }{
		{"a loop in _initialize", `(loop $l (br $l))`, ""},
		{"a loop in weft_manifest", ``, `(loop $l (br $l)) (i32.const 0)`},
		{"a recursion in _initialize", `(call $f (i32.const 60))`, ""},
	} {
		extra := `(func $f (param $n i32) (if (local.get $n) (then (call $f (i32.sub (local.get $n) (i32.const 1))) (call $f (i32.sub (local.get $n) (i32.const 1))))))`
		start := time.Now()
		_, err := rt.Load(context.Background(), testplugins.Guest{Extra: extra, Init: c.init, Manifest: c.manifest, Body: `(i32.const 0)`}.Module(t))
		elapsed := time.Since(start)
		if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), "loading took longer than 300ms") || elapsed > timeout+5*time.Second {
			t.Errorf("%s: %v after %s; want a validation error naming the load timeout", c.name, err, elapsed)
		}
	}
}

// A recursion that would take hundreds of MiB of stack in wazero is
// stopped at the stack limit; the instance is discarded, the memory is
// given back, and the next call works.
func TestDeepRecursionHitsTheStackLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	rt := testplugins.Runtime(t, plugins.Config{MaxStackBytes: limit})
	m, err := rt.Load(context.Background(), testplugins.Guest{
		Extra: `(func $rec (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n)) (then (i32.const 0))
      (else (i32.add (call $rec (i32.sub (local.get $n) (i32.const 1))) (i32.const 1)))))`,
		// Input null (4 bytes) recurses 10 deep, anything else 10 million.
		Body: `(drop (call $rec (select (i32.const 10) (i32.const 10000000) (i32.eq (local.get 2) (i32.const 4)))))
    (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`,
	}.Module(t))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rt.Invoke(context.Background(), m.Version, call.Call{Activity: "go", Input: []byte("1")})
	if !errors.Is(err, call.ErrLimit) || !strings.Contains(err.Error(), "stack limit of 1024 KiB") {
		t.Fatalf("deep recursion: %v; want ErrLimit naming the stack limit", err)
	}
	if s := rt.Stats(m.Version); s.Discarded != 1 {
		t.Errorf("stats %+v: want the instance discarded", s)
	}
	if _, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "go"}); err != nil {
		t.Fatalf("a shallow call after the deep one: %v", err)
	}
}

// table.grow cannot make the host allocate: the table's maximum is the
// host's limit, so growing past it fails inside the guest, from
// _initialize at upload as from weft_invoke.
func TestTableGrowIsBounded(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxTableElements: 1000})
	grow := `(drop (table.grow 0 (ref.null func) (i32.const 0xFFFFFFFE)))`
	m, err := rt.Load(context.Background(), testplugins.Guest{Init: grow, Body: `(if (i32.eq (table.grow 0 (ref.null func) (i32.const 0xFFFFFFFE)) (i32.const -1))
      (then (call $result (i32.const 1) (i32.const 12))))
    (i32.const 0)`}.Module(t))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "go"})
	if err != nil || string(out) != `"activities"` {
		t.Fatalf("table.grow by 0xFFFFFFFE: %s, %v; want it refused inside the guest", out, err)
	}
	_, err = rt.Load(context.Background(), testplugins.WAT(t, `(module (table 5000 funcref))`))
	if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), "a table of 5000 elements, more than the limit of 1000") {
		t.Fatalf("a table larger than the limit: %v; want it refused naming the limit", err)
	}
}

// A refusal names every forbidden import, whatever its kind.
func TestRefusalNamesEveryForbiddenImport(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	_, err := rt.Load(context.Background(), testplugins.WAT(t, `(module
  (import "weft" "g" (global i32))
  (import "env" "t" (table 1 funcref))
  (import "env" "foo" (func)))`))
	for _, want := range []string{"import weft.g: importing a global is not allowed", "import env.t: importing a table is not allowed", `import env.foo: module "env" is not allowed`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v; want it to say %q", err, want)
		}
	}
}

// FuzzUploadGenerated uploads generated valid plugins and calls their
// activity: the host never crashes, and the call either succeeds with the
// one-digit output or fails with a reason.
func FuzzUploadGenerated(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 2, 5, 6, 7})
	f.Add([]byte{0, 2, 1, 3, 2, 2, 3, 5, 1, 0, 7, 3, 3, 6, 2, 1, 4})
	rt := testplugins.Runtime(f, plugins.Config{MaxStackBytes: 64 << 10, PoolSize: 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := rt.Load(ctx, wasmgen.Plugin(data))
		if err != nil {
			t.Fatalf("a generated plugin was refused: %v", err)
		}
		out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "run"})
		if err == nil && (len(out) != 1 || out[0] < '0' || out[0] > '7') {
			t.Fatalf("output %q, want one digit", out)
		}
		if err != nil && !errors.Is(err, call.ErrLimit) && !errors.Is(err, call.ErrTimeout) {
			t.Fatalf("call: %v", err)
		}
		rt.Unload(ctx, m.Version)
	})
}

// log is not an ABI violation outside weft_invoke: what _initialize,
// weft_abi_version and weft_manifest log goes to the runtime's log.
func TestLogOutsideInvokeGoesToTheRuntimeLog(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	_, err := rt.Load(context.Background(), testplugins.WAT(t, `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"go\"}]}init-saysversion-saysmanifest-says")
  (func (export "_initialize") (call $log (i32.const 1) (i32.const 30) (i32.const 9)))
  (func (export "weft_abi_version") (result i32) (call $log (i32.const 1) (i32.const 39) (i32.const 12)) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $log (i32.const 1) (i32.const 51) (i32.const 13)) (call $result (i32.const 0) (i32.const 30)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0)))`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"init-says", "version-says", "manifest-says"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the runtime log lacks %q:\n%s", want, logs.String())
		}
	}
}
