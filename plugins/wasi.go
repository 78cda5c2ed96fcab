package plugins

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weftworks/weft/abi"
)

// errnoBadf is WASI preview 1's EBADF.
const errnoBadf = 8

// instantiateWASI instantiates the wasi_snapshot_preview1 host module:
// wazero's implementation of the functions abi.AllowedWASI lists, and, for
// those abi.InertWASI lists, stubs that return EBADF without looking at
// their arguments. The stubs take the place of wazero's implementations, so
// no module configuration could ever let a plugin open a file or a socket.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	// wazero's own definitions give the stubs their exact signatures.
	full := rt.NewHostModuleBuilder(abi.WASIModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(full)
	cm, err := full.Compile(ctx)
	if err != nil {
		return err
	}
	defs := cm.ExportedFunctions()
	_ = cm.Close(ctx)

	b := rt.NewHostModuleBuilder(abi.WASIModule)
	wasi_snapshot_preview1.NewFunctionExporter().ExportFunctions(b)
	for name, def := range defs {
		_, allowed := abi.AllowedWASI(name)
		switch {
		case allowed:
		case abi.InertWASI(name):
			if len(def.ResultTypes()) != 1 || def.ResultTypes()[0] != api.ValueTypeI32 {
				return fmt.Errorf("WASI function %s does not return an errno", name)
			}
			b.NewFunctionBuilder().
				WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, _ api.Module, stack []uint64) {
					stack[0] = errnoBadf
				}), def.ParamTypes(), def.ResultTypes()).
				Export(name)
		default:
			// Validation refuses modules that import it, so it is never
			// linked; say so loudly if the lists drift from wazero's.
			return fmt.Errorf("WASI function %s is neither allowed nor inert", name)
		}
	}
	_, err = b.Instantiate(ctx)
	return err
}
