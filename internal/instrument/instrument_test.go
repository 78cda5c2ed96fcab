package instrument_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/internal/instrument"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/internal/wasmgen"
)

// opts are the options the plugin runtime uses by default, so that the
// example plugins rewritten here hit the compilation cache its tests fill.
var opts = instrument.Options{
	ImportModule:     "weft:instrument",
	ImportName:       "check",
	StackExport:      "weft:stack",
	FuelExport:       "weft:fuel",
	Stack:            4 << 20 / 8,
	MaxTableElements: 1 << 18,
	MaxTables:        16,
}

// engine runs modules in wazero: plain, stopped at a context's end by
// wazero itself (the reference), or instrumented, stopped by the check host
// function.
type engine struct {
	rt   wazero.Runtime
	fuel int // visits of the check function
}

func newEngine(t testing.TB, instrumented bool) *engine {
	ctx := context.Background()
	e := &engine{}
	e.rt = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(!instrumented))
	t.Cleanup(func() { _ = e.rt.Close(ctx) })
	_, err := e.rt.NewHostModuleBuilder("env").NewFunctionBuilder().
		WithFunc(func(x int32) int32 { return wasmgen.HostFunc(x) }).Export("h").
		Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if instrumented {
		_, err = e.rt.NewHostModuleBuilder(opts.ImportModule).NewFunctionBuilder().
			WithGoFunction(api.GoFunc(func(ctx context.Context, stack []uint64) {
				e.fuel++
				if uint32(stack[0]) != instrument.ReasonFuel {
					panic(errors.New("stack budget spent"))
				}
				if ctx.Err() != nil {
					panic(ctx.Err())
				}
				stack[0] = instrument.Fuel
			}), []api.ValueType{api.ValueTypeI32}, []api.ValueType{api.ValueTypeI32}).
			Export(opts.ImportName).Instantiate(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// run instantiates wasm and calls its export "run" with arg, returning the
// result or the error's first line.
func (e *engine) run(t testing.TB, wasm []byte, arg int32) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mod, err := e.rt.InstantiateWithConfig(ctx, wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return "instantiate: " + firstLine(err)
	}
	defer mod.Close(ctx)
	res, err := mod.ExportedFunction("run").Call(ctx, api.EncodeI32(arg))
	if err != nil {
		return "call: " + firstLine(err)
	}
	return fmt.Sprint(api.DecodeI32(res[0]))
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// checkEquivalent runs the generated module plain and instrumented and
// fails when they disagree, or when the instrumented module does not
// compile.
func checkEquivalent(t *testing.T, plain, instr *engine, data []byte) {
	wasm := wasmgen.Module(data)
	want := plain.run(t, wasm, 3)
	res, err := instrument.Rewrite(wasm, opts)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	if _, err := instr.rt.CompileModule(context.Background(), res.Wasm); err != nil {
		t.Fatalf("the rewritten module does not compile: %v", err)
	}
	if got := instr.run(t, res.Wasm, 3); got != want {
		t.Fatalf("instrumented run = %s, plain run = %s", got, want)
	}
}

func TestGeneratedModulesBehaveTheSame(t *testing.T) {
	plain, instr := newEngine(t, false), newEngine(t, true)
	for seed := 0; seed < 300; seed++ {
		data := make([]byte, 64)
		x := uint32(seed)*2654435761 + 1
		for i := range data {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			data[i] = byte(x)
		}
		checkEquivalent(t, plain, instr, data)
	}
}

// FuzzRewrite feeds arbitrary bytes to Rewrite: it never panics, every
// error matches ErrMalformed, and wazero compiles the rewritten module
// exactly when it compiles the input (a module made valid by the rewrite
// would be one that reaches what the rewrite added).
func FuzzRewrite(f *testing.F) {
	f.Add(wasmgen.Module([]byte{3, 1, 2, 3, 2, 5, 6, 7}))
	f.Add(wasmgen.Plugin([]byte{2, 7, 1, 0, 3}))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	f.Cleanup(func() { _ = rt.Close(ctx) })
	f.Fuzz(func(t *testing.T, wasm []byte) {
		res, err := instrument.Rewrite(wasm, opts)
		if err != nil {
			if !errors.Is(err, instrument.ErrMalformed) {
				t.Fatalf("error %v does not match ErrMalformed", err)
			}
			return
		}
		_, before := rt.CompileModule(ctx, wasm)
		_, after := rt.CompileModule(ctx, res.Wasm)
		switch {
		case before == nil && after != nil:
			t.Fatalf("compiles before the rewrite but not after: %v", after)
		case before != nil && after == nil && !strings.Contains(before.Error(), "custom section"):
			// (a malformed name section is dropped, not refused)
			t.Fatalf("compiles after the rewrite but not before: %v", before)
		}
	})
}

// FuzzGenerated runs generated valid modules plain and instrumented and
// compares their results.
func FuzzGenerated(f *testing.F) {
	f.Add([]byte{3, 1, 2, 3, 2, 5, 6, 7})
	f.Add([]byte{0, 2, 1, 3, 2, 2, 3, 5, 1, 0, 7, 3, 3, 6, 2, 1, 4})
	plain, instr := newEngine(f, false), newEngine(f, true)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkEquivalent(t, plain, instr, data)
	})
}

// The example plugins and the C plugin compile after the rewrite, which
// adds one import, one export and nothing else that is visible.
func TestExamplePluginsRewrite(t *testing.T) {
	ctx := context.Background()
	cache, err := wazero.NewCompilationCacheWithDir(testplugins.CacheDir(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(cache))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	for _, name := range []string{"kit", "ckit", "text", "thumbnail"} {
		t.Run(name, func(t *testing.T) {
			wasm := testplugins.Bytes(t, name)
			before, err := rt.CompileModule(ctx, wasm)
			if err != nil {
				t.Fatal(err)
			}
			res, err := instrument.Rewrite(wasm, opts)
			if err != nil {
				t.Fatal(err)
			}
			after, err := rt.CompileModule(ctx, res.Wasm)
			if err != nil {
				t.Fatalf("the rewritten module does not compile: %v", err)
			}
			if got, want := len(after.ImportedFunctions()), len(before.ImportedFunctions())+1; got != want {
				t.Errorf("%d imported functions, want %d", got, want)
			}
			if len(res.Imports) != len(before.ImportedFunctions()) {
				t.Errorf("Imports lists %d, the module imports %d functions", len(res.Imports), len(before.ImportedFunctions()))
			}
			for name, f := range before.ExportedFunctions() {
				g, ok := after.ExportedFunctions()[name]
				if !ok || g.Name() != f.Name() || len(g.ParamTypes()) != len(f.ParamTypes()) {
					t.Errorf("export %s: %v after the rewrite, was %v (function names come from the name section)", name, g, f)
				}
			}
		})
	}
}

func wat(t *testing.T, text string) []byte { return testplugins.WAT(t, text) }

// Every kind of function reference is renumbered: exports, the start
// function, direct calls, ref.func in code and in a global's initialiser,
// and element segments (active, passive and declarative, with indices and
// with expressions).
func TestEveryReferenceIsRenumbered(t *testing.T) {
	wasm := wat(t, `(module
  (import "env" "h" (func $h (param i32) (result i32)))
  (type $t (func (param i32) (result i32)))
  (table $tab 4 funcref)
  (global $acc (mut i32) (i32.const 0))
  (global $fr funcref (ref.func $c))
  (elem (i32.const 0) $a $b)
  (elem (table $tab) (i32.const 2) funcref (ref.func $c) (ref.null func))
  (elem $passive funcref (ref.func $b) (ref.func $a))
  (elem declare func $d)
  (func $a (param i32) (result i32) (i32.add (local.get 0) (i32.const 10)))
  (func $b (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $c (param i32) (result i32) (call $h (local.get 0)))
  (func $d (param i32) (result i32) (i32.sub (local.get 0) (i32.const 1)))
  (func $start (global.set $acc (i32.const 100)))
  (start $start)
  (func (export "run") (param $x i32) (result i32)
    (table.init $tab $passive (i32.const 3) (i32.const 0) (i32.const 1)) ;; table[3] = $b
    (i32.add (global.get $acc)
    (i32.add (call_indirect (type $t) (local.get $x) (i32.const 0))      ;; a: x+10
    (i32.add (call_indirect (type $t) (local.get $x) (i32.const 1))      ;; b: 2x
    (i32.add (call_indirect (type $t) (local.get $x) (i32.const 2))      ;; c: h(x)
    (i32.add (call_indirect (type $t) (local.get $x) (i32.const 3))      ;; b: 2x
    (i32.add (call $d (local.get $x))                                      ;; x-1
             (ref.is_null (ref.func $d)))))))))
  (export "a" (func $a)))`)
	plain, instr := newEngine(t, false), newEngine(t, true)
	want := plain.run(t, wasm, 5)
	if want != fmt.Sprint(100+15+10+16+10+4) {
		t.Fatalf("plain run = %s; the test module is wrong", want)
	}
	res, err := instrument.Rewrite(wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := instr.run(t, res.Wasm, 5); got != want {
		t.Fatalf("instrumented run = %s, want %s", got, want)
	}
}

// A table gets the host's maximum, so table.grow fails past it; a table
// declared larger is refused, as are too many tables.
func TestTablesAreBounded(t *testing.T) {
	grow := wat(t, `(module
  (table 1 funcref)
  (func (export "run") (param i32) (result i32)
    (table.grow 0 (ref.null func) (local.get 0))))`)
	res, err := instrument.Rewrite(grow, opts)
	if err != nil {
		t.Fatal(err)
	}
	instr := newEngine(t, true)
	if got := instr.run(t, res.Wasm, -2); got != "-1" {
		t.Errorf("table.grow by 0xFFFFFFFE = %s, want -1", got)
	}
	if got := instr.run(t, res.Wasm, int32(opts.MaxTableElements)); got != "-1" {
		t.Errorf("table.grow past the limit = %s, want -1", got)
	}
	if got := instr.run(t, res.Wasm, int32(opts.MaxTableElements)-1); got != "1" {
		t.Errorf("table.grow to the limit = %s, want 1 (the old size)", got)
	}

	for _, c := range []struct{ name, module, want string }{
		{"larger than the limit", `(module (table 300000 funcref))`, "a table of 300000 elements, more than the limit of 262144"},
		{"too many tables", "(module" + strings.Repeat(" (table 1 funcref)", 17) + ")", "17 tables, more than the limit of 16"},
	} {
		_, err := instrument.Rewrite(wat(t, c.module), opts)
		if !errors.Is(err, instrument.ErrMalformed) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "table section") {
			t.Errorf("%s: %v; want an error naming the table section and %q", c.name, err, c.want)
		}
	}
}

// The names the rewrite adds are the host's: a module that already uses
// them is refused, naming them.
func TestReservedNamesAreRefused(t *testing.T) {
	for _, c := range []struct{ module, want string }{
		{`(module (import "weft:instrument" "check" (func (param i32) (result i32))))`, `module "weft:instrument" is reserved`},
		{`(module (global (export "weft:stack") i32 (i32.const 0)))`, `export "weft:stack": the name is reserved`},
		{`(module (func (export "weft:fuel")))`, `export "weft:fuel": the name is reserved`},
	} {
		_, err := instrument.Rewrite(wat(t, c.module), opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.module, err, c.want)
		}
	}
}

// A module cut short anywhere is refused with an error, never a panic.
func TestTruncatedModulesAreRefused(t *testing.T) {
	wasm := wasmgen.Plugin([]byte{3, 1, 2, 3, 2, 5, 6, 7, 1, 1, 6, 2})
	for n := 0; n < len(wasm); n++ {
		if _, err := instrument.Rewrite(wasm[:n], opts); err == nil && n > 8 {
			// A cut between sections leaves a valid prefix; wazero judges it.
			continue
		} else if err != nil && !errors.Is(err, instrument.ErrMalformed) {
			t.Fatalf("cut at %d: %v does not match ErrMalformed", n, err)
		}
	}
}

// stopsAtDeadline rewrites wasm, calls its export "run" with args under a
// 200ms deadline, and fails unless the call is stopped by it; it returns
// the visits to the host.
func stopsAtDeadline(t *testing.T, wasm []byte, args ...uint64) int {
	t.Helper()
	res, err := instrument.Rewrite(wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	mod, err := e.rt.Instantiate(ctx, res.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := mod.ExportedFunction("run").Call(ctx, args...)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("run: %v, want the deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the loop was never checked: the guest ran past its deadline")
	}
	return e.fuel
}

// A loop without calls, which never visits the host on its own, is stopped
// through the fuel check at its header.
func TestLoopVisitsTheHost(t *testing.T) {
	if stopsAtDeadline(t, wat(t, `(module (func (export "run") (param i32) (result i32) (loop $l (br $l)) (i32.const 0)))`), 0) == 0 {
		t.Fatal("the guest never visited the host")
	}
}

// memory.fill and memory.copy go through chunked helpers: the results are
// the same as the instructions', for overlapping copies in both directions,
// sizes that are not a multiple of the chunk, and out-of-bounds ranges,
// which trap without writing.
func TestBulkMemoryBehavesTheSame(t *testing.T) {
	wasm := wat(t, `(module
  (memory 64)
  ;; a checksum of the first n bytes
  (func $sum (param $n i32) (result i32) (local $i i32) (local $h i32)
    (block $done (loop $l
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (local.set $h (i32.add (i32.mul (local.get $h) (i32.const 31)) (i32.load8_u (local.get $i))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $l)))
    (local.get $h))
  (func (export "run") (param $case i32) (result i32)
    (local $i i32)
    ;; a pattern to copy around: bytes i*7
    (loop $l
      (i32.store8 (local.get $i) (i32.mul (local.get $i) (i32.const 7)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $l (i32.lt_u (local.get $i) (i32.const 65536))))
    (memory.fill (i32.const 65536) (i32.const 0xA5) (i32.const 3500000))
    (if (i32.eq (local.get $case) (i32.const 1)) ;; forwards, overlapping
      (then (memory.copy (i32.const 1000) (i32.const 3000) (i32.const 3000001))))
    (if (i32.eq (local.get $case) (i32.const 2)) ;; backwards, overlapping
      (then (memory.copy (i32.const 3000) (i32.const 1000) (i32.const 3000001))))
    (if (i32.eq (local.get $case) (i32.const 3)) ;; out of bounds: traps, writes nothing
      (then (memory.fill (i32.const 4000000) (i32.const 1) (i32.const 0x7FFFFFFF))))
    (if (i32.eq (local.get $case) (i32.const 4))
      (then (memory.copy (i32.const 0) (i32.const 4000000) (i32.const 0x7FFFFFFF))))
    (call $sum (i32.const 4194304))))`)
	plain, instr := newEngine(t, false), newEngine(t, true)
	res, err := instrument.Rewrite(wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	for c := int32(0); c <= 4; c++ {
		want, got := plain.run(t, wasm, c), instr.run(t, res.Wasm, c)
		if got != want {
			t.Errorf("case %d: instrumented %s, plain %s", c, got, want)
		}
		if c >= 3 && !strings.Contains(want, "out of bounds") {
			t.Errorf("case %d: %s, want an out-of-bounds trap", c, want)
		}
	}
	if instr.fuel == 0 {
		t.Error("the helpers never visited the host")
	}
}

// rawModule builds a module with the given function types, one function of
// type fn exported as "run" with body (locals and code), and no globals.
func rawModule(types [][]byte, fn byte, body []byte) []byte {
	vec := func(items ...[]byte) []byte {
		out := []byte{byte(len(items))}
		for _, it := range items {
			out = append(out, it...)
		}
		return out
	}
	section := func(id byte, payload []byte) []byte {
		return append([]byte{id, byte(len(payload))}, payload...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = append(out, section(1, vec(types...))...)
	out = append(out, section(3, vec([]byte{fn}))...)
	out = append(out, section(7, vec(append([]byte{3, 'r', 'u', 'n', 0}, 0)))...)
	return append(out, section(10, vec(append([]byte{byte(len(body))}, body...)))...)
}

// A guest cannot name what the rewrite adds through an index that was out
// of range in its module: the fuel counter (which would let it run for
// ever without visiting the host), its frame's stack budget, the
// instrumentation's functions and types.
func TestInjectedNamesCannotBeReached(t *testing.T) {
	void := []byte{0x60, 0, 0}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		// loop (global.set 0 (i32.const 0x7fffffff)) (br 0) end
		{"the fuel global", []byte{0, 0x03, 0x40, 0x41, 0xff, 0xff, 0xff, 0xff, 0x07, 0x24, 0, 0x0c, 0, 0x0b, 0x0b}, "global 0 of a module with 0"},
		// (local.set 0 (i32.const 1)): the function has no locals
		{"the stack local", []byte{0, 0x41, 1, 0x21, 0, 0x0b}, "local 0 of a function with 0"},
		// (call 1): the check function would be 0, the fill helper 2
		{"a function", []byte{0, 0x10, 1, 0x0b}, "function 1 of a module with 1"},
		// block with type 1, the type the rewrite appends
		{"a type", []byte{0, 0x02, 0x01, 0x0b, 0x0b}, "type 1 of a module with 1"},
	} {
		_, err := instrument.Rewrite(rawModule([][]byte{void}, 0, c.body), opts)
		if !errors.Is(err, instrument.ErrMalformed) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// The rewrite reads every instruction's length as wazero does; where the
// two disagreed, code the rewrite took for data was a loop wazero ran
// without a check.
func TestDecodingMatchesWazero(t *testing.T) {
	void := []byte{0x60, 0, 0}
	i64 := []byte{0x60, 1, 0x7e, 1, 0x7e}
	for _, c := range []struct {
		name  string
		types [][]byte
		body  []byte
	}{
		// block; br_if 0 (i32.const 1); unreachable; 0xfd 0x8c (one byte:
		// i16x8.shr_s, not the LEB 0x8c 0x00 of v128.const); unreachable;
		// end; loop br 0 end; block nop×8 end
		{"a SIMD opcode is one byte", [][]byte{void}, []byte{0, 0x02, 0x40, 0x41, 1, 0x0d, 0, 0, 0xfd, 0x8c, 0, 0x0b,
			0x03, 0x40, 0x0c, 0, 0x0b, 0x02, 0x40, 1, 1, 1, 1, 1, 1, 1, 1, 0x0b, 0x0b}},
		// i64.const 0; block (type 2 in five LEB bytes, the last with its
		// continuation bit, which wazero ignores); loop (type 2);
		// i64.popcnt; br 0; end; end; drop. The rewrite refuses it.
		{"a block type is at most five bytes", [][]byte{void, void, i64}, []byte{0, 0x42, 0, 0x02, 0x82, 0x80, 0x80, 0x80, 0x80,
			0x03, 0x02, 0x7b, 0x0c, 0, 0x0b, 0x0b, 0x1a, 0x0b}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wasm := rawModule(c.types, 0, c.body)
			if _, err := instrument.Rewrite(wasm, opts); errors.Is(err, instrument.ErrMalformed) && strings.Contains(err.Error(), "LEB128 longer than 33 bits") {
				return // refused: it never runs
			}
			stopsAtDeadline(t, wasm)
		})
	}
}

// With FuelExport, the fuel counter is an exported mutable i32 global that
// starts at Fuel and goes down by the same amount on every run of the same
// code, more for more work; without it, nothing is exported and a module
// may use the name.
func TestFuelIsExported(t *testing.T) {
	wasm := wat(t, `(module
  (func (export "run") (param $n i32) (result i32)
    (loop $l
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (i32.gt_s (local.get $n) (i32.const 0))))
    (local.get $n)))`)
	res, err := instrument.Rewrite(wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, true)
	ctx := context.Background()
	mod, err := e.rt.InstantiateWithConfig(ctx, res.Wasm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	g, ok := mod.ExportedGlobal(opts.FuelExport).(api.MutableGlobal)
	if !ok || g.Type() != api.ValueTypeI32 {
		t.Fatalf("export %q is %v, want a mutable i32 global", opts.FuelExport, mod.ExportedGlobal(opts.FuelExport))
	}
	if got := api.DecodeI32(g.Get()); got != instrument.Fuel {
		t.Fatalf("the fuel counter starts at %d, want %d", got, instrument.Fuel)
	}
	used := func(n int32) int32 {
		g.Set(api.EncodeI32(instrument.Fuel))
		if _, err := mod.ExportedFunction("run").Call(ctx, api.EncodeI32(n)); err != nil {
			t.Fatalf("run(%d): %v", n, err)
		}
		return instrument.Fuel - api.DecodeI32(g.Get())
	}
	small, again, large := used(10), used(10), used(1000)
	if small <= 0 || small != again {
		t.Errorf("run(10) used %d then %d fuel, want the same amount above 0 twice", small, again)
	}
	if large <= small {
		t.Errorf("run(1000) used %d fuel, run(10) %d: want more for more work", large, small)
	}

	noExport := opts
	noExport.FuelExport = ""
	res, err = instrument.Rewrite(wat(t, `(module (func (export "weft:fuel")))`), noExport)
	if err != nil {
		t.Fatalf("without FuelExport, a module exporting weft:fuel is refused: %v", err)
	}
	cm, err := e.rt.CompileModule(ctx, res.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close(ctx)
	if _, ok := cm.ExportedFunctions()["weft:fuel"]; !ok || len(cm.ExportedFunctions()) != 1 {
		t.Errorf("without FuelExport, exports %v; want the module's function alone", cm.ExportedFunctions())
	}
}
