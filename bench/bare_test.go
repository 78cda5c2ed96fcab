package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/instrument"
)

// bare calls a Weft plugin through the Weft ABI with wazero alone: the
// floor under Weft's invoke path. It has what one call needs and nothing
// else: one instance, no pool, no per-call state, no output validation and
// no error mapping. Its runtime and module configuration are those of
// plugins.New and its pool, less the capture of stdout and stderr and the
// memory allocator. Three ways to stop a guest at its deadline, one per
// contender:
//
//   - bare: none. The module as built, and nothing can stop it: the floor.
//   - bare-close: wazero's WithCloseOnContextDone(true), the way plugins.New
//     did before it instrumented modules.
//   - bare-instr: the module rewritten by package internal/instrument with
//     plugins.New's options, and a host function that checks the call's
//     context when the fuel runs out, the way plugins.New does now. Between
//     bare and weft, it tells the instrumentation's cost from the rest of
//     weft's invoke path.
type bare struct {
	mod    api.Module
	budget api.MutableGlobal // bare-instr's stack budget, nil otherwise
	mem    api.Memory
	alloc  api.Function
	invoke api.Function
	stack  [3]uint64
	out    []byte // set by the result host function
}

// How a bare contender stops a guest.
type stopping int

const (
	stopNever      stopping = iota // bare
	stopClose                      // bare-close
	stopInstrument                 // bare-instr
)

// setupBare instantiates wasm once, without any way to stop a guest, and
// returns its call.
func setupBare(b *testing.B, wasm []byte) callFunc { return newBare(b, wasm, stopNever) }

// setupBareClose is setupBare with WithCloseOnContextDone(true).
func setupBareClose(b *testing.B, wasm []byte) callFunc { return newBare(b, wasm, stopClose) }

// setupBareInstr is setupBare with wasm instrumented as plugins.New does.
func setupBareInstr(b *testing.B, wasm []byte) callFunc { return newBare(b, wasm, stopInstrument) }

// The instrumentation's options as plugins.New sets them with the default
// Config (plugins/interrupt.go): the names of its host function and its
// fuel and stack globals, a 4 MiB stack budget in 8-byte units, and the
// limits on tables.
const (
	instrumentModule = "weft:instrument"
	instrumentFunc   = "check"
	stackExport      = "weft:stack"
	fuelExport       = "weft:fuel"
	stackBudget      = (4 << 20) / 8
)

var instrumentOptions = instrument.Options{
	ImportModule:     instrumentModule,
	ImportName:       instrumentFunc,
	StackExport:      stackExport,
	FuelExport:       fuelExport,
	Stack:            stackBudget,
	MaxTableElements: 1 << 18,
	MaxTables:        16,
}

func newBare(b *testing.B, wasm []byte, how stopping) callFunc { return newBareWith(b, wasm, how, nil) }

// newBareWith is newBare whose host module has h's HTTP functions too
// (none when h is nil).
func newBareWith(b *testing.B, wasm []byte, how stopping, h *bareHTTP) callFunc {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig(how == stopClose))
	b.Cleanup(func() { _ = rt.Close(ctx) })
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		b.Fatal(err)
	}
	bb := &bare{}
	if err := bb.instantiateHostModule(ctx, rt, h); err != nil {
		b.Fatal(err)
	}
	if how == stopInstrument {
		if err := instantiateInstrumentModule(ctx, rt); err != nil {
			b.Fatal(err)
		}
		r, err := instrument.Rewrite(wasm, instrumentOptions)
		if err != nil {
			b.Fatal(err)
		}
		wasm = r.Wasm
	}
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)
	if bb.mod, err = rt.InstantiateModule(ctx, cm, mc); err != nil {
		b.Fatal(err)
	}
	bb.mem = bb.mod.Memory()
	bb.alloc = bb.mod.ExportedFunction(abi.ExportAlloc)
	bb.invoke = bb.mod.ExportedFunction(abi.ExportInvoke)
	if how == stopInstrument {
		var ok bool
		if bb.budget, ok = bb.mod.ExportedGlobal(stackExport).(api.MutableGlobal); !ok {
			b.Fatalf("the instrumented module exports no mutable global %s", stackExport)
		}
	}
	return bb.call
}

// instantiateHostModule provides the weft host module: result copies the
// output out of guest memory, h's HTTP functions (when h is not nil) make
// requests, and the other functions do nothing.
func (bb *bare) instantiateHostModule(ctx context.Context, rt wazero.Runtime, h *bareHTTP) error {
	i32 := api.ValueTypeI32
	hb := rt.NewHostModuleBuilder(abi.HostModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		hb.NewFunctionBuilder().WithGoModuleFunction(f, params, results).WithName(name).Export(name)
	}
	notFound := func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = api.EncodeI32(abi.NotFound) }
	no := func(_ context.Context, _ api.Module, stack []uint64) { stack[0] = 0 }
	fn(abi.ImportResult, func(_ context.Context, mod api.Module, stack []uint64) {
		b, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
		if !ok {
			panic("result outside memory")
		}
		// A caller owns what it is returned, as with Invoke.
		bb.out = append([]byte(nil), b...)
	}, []api.ValueType{i32, i32}, nil)
	fn(abi.ImportLog, func(context.Context, api.Module, []uint64) {}, []api.ValueType{i32, i32, i32}, nil)
	fn(abi.ImportHeartbeat, no, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportCancelled, no, nil, []api.ValueType{i32})
	fn(abi.ImportInfo, no, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportLastHeartbeat, notFound, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportConfig, notFound, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	// The kit imports secret (it reads one in an activity these benchmarks
	// do not call): a bare host must provide every import to instantiate.
	fn(abi.ImportSecret, notFound, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	if h != nil {
		h.export(fn)
	}
	_, err := hb.Instantiate(ctx)
	return err
}

// instantiateInstrumentModule provides the host function the
// instrumentation imports, as plugins.New's: when the guest's fuel runs out
// it stops a guest whose context is done and refills the fuel otherwise;
// when the stack budget is spent it stops the guest.
func instantiateInstrumentModule(ctx context.Context, rt wazero.Runtime) error {
	i32 := api.ValueTypeI32
	_, err := rt.NewHostModuleBuilder(instrumentModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, stack []uint64) {
			if uint32(stack[0]) != instrument.ReasonFuel {
				panic(fmt.Errorf("%s.%s: reason %d", instrumentModule, instrumentFunc, uint32(stack[0])))
			}
			if err := ctx.Err(); err != nil {
				panic(err)
			}
			stack[0] = instrument.Fuel
		}), []api.ValueType{i32}, []api.ValueType{i32}).
		WithName(instrumentFunc).
		Export(instrumentFunc).
		Instantiate(ctx)
	return err
}

// call runs one activity call: weft_alloc, one write of the request,
// weft_invoke, and the result the guest passed to the result function.
// bare-instr gives each call into the guest its whole stack budget first.
func (bb *bare) call(ctx context.Context, activity string, input []byte) ([]byte, error) {
	bb.stack[0] = uint64(len(activity) + len(input))
	bb.resetStack()
	if err := bb.alloc.CallWithStack(ctx, bb.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(bb.stack[0])
	if !bb.mem.WriteString(ptr, activity) || !bb.mem.Write(ptr+uint32(len(activity)), input) {
		return nil, fmt.Errorf("request outside memory")
	}
	bb.stack[0], bb.stack[1], bb.stack[2] = uint64(ptr), uint64(len(activity)), uint64(len(input))
	bb.out = nil
	bb.resetStack()
	if err := bb.invoke.CallWithStack(ctx, bb.stack[:]); err != nil {
		return nil, err
	}
	if status := abi.Status(bb.stack[0]); status != abi.StatusOK {
		return nil, fmt.Errorf("status %d: %s", status, bb.out)
	}
	return bb.out, nil
}

func (bb *bare) resetStack() {
	if bb.budget != nil {
		bb.budget.Set(uint64(uint32(stackBudget)))
	}
}
