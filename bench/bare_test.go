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
)

// bare calls the kit plugin through the Weft ABI with wazero alone: the
// floor under Weft's invoke path. It has what one call needs and nothing
// else: one instance, no pool, no per-call state, no deadline or
// cancellation handling beyond wazero's own, no output validation and no
// error mapping. Its runtime and module configuration are those of
// plugins.New and its pool, less the capture of stdout and stderr.
type bare struct {
	mod    api.Module
	mem    api.Memory
	alloc  api.Function
	invoke api.Function
	stack  [3]uint64
	out    []byte // set by the result host function
}

// setupBare instantiates the kit plugin once and returns its echo call.
func setupBare(b *testing.B) echoFunc {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, runtimeConfig())
	b.Cleanup(func() { _ = rt.Close(ctx) })
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		b.Fatal(err)
	}
	bb := &bare{}
	if err := bb.instantiateHostModule(ctx, rt); err != nil {
		b.Fatal(err)
	}
	cm, err := rt.CompileModule(ctx, kitWasm)
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
	return func(ctx context.Context, input []byte) ([]byte, error) {
		return bb.call(ctx, "echo", input)
	}
}

// instantiateHostModule provides the weft host module: result copies the
// output out of guest memory, and the other functions do nothing.
func (bb *bare) instantiateHostModule(ctx context.Context, rt wazero.Runtime) error {
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
	_, err := hb.Instantiate(ctx)
	return err
}

// call runs one activity call: weft_alloc, one write of the request,
// weft_invoke, and the result the guest passed to the result function.
func (bb *bare) call(ctx context.Context, activity string, input []byte) ([]byte, error) {
	bb.stack[0] = uint64(len(activity) + len(input))
	if err := bb.alloc.CallWithStack(ctx, bb.stack[:]); err != nil {
		return nil, err
	}
	ptr := uint32(bb.stack[0])
	if !bb.mem.WriteString(ptr, activity) || !bb.mem.Write(ptr+uint32(len(activity)), input) {
		return nil, fmt.Errorf("request outside memory")
	}
	bb.stack[0], bb.stack[1], bb.stack[2] = uint64(ptr), uint64(len(activity)), uint64(len(input))
	bb.out = nil
	if err := bb.invoke.CallWithStack(ctx, bb.stack[:]); err != nil {
		return nil, err
	}
	if status := abi.Status(bb.stack[0]); status != abi.StatusOK {
		return nil, fmt.Errorf("status %d: %s", status, bb.out)
	}
	return bb.out, nil
}
