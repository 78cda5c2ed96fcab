package plugins

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/tape"
)

// WASI preview 1 errnos the host's own functions return.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoIO      = 29
	errnoNotsup  = 58
)

// WASI preview 1 clock IDs.
const (
	clockRealtime         = 0
	clockMonotonic        = 1
	clockProcessCPUTimeID = 2
	clockThreadCPUTimeID  = 3
)

// hostWASI lists the allowed WASI functions the host implements itself
// instead of wazero, because nothing stops a guest inside wazero's:
// poll_oneoff sleeps with time.Sleep, which neither a deadline nor a
// cancellation interrupts; random_get fills any length in one go; fd_read
// walks millions of empty iovecs without a look at the context.
// clock_time_get is the host's so that the monotonic clock a guest reads
// is the one poll_oneoff's absolute deadlines are measured on. (fd_write
// stays wazero's: it calls the host's stdout and stderr writers once per
// iovec, and they look at the context; see guestWriter.)
var hostWASI = map[string]api.GoModuleFunc{
	"poll_oneoff":    pollOneoff,
	"clock_time_get": clockTimeGet,
	"random_get":     randomGet,
	"fd_read":        fdRead,
}

// instantiateWASI instantiates the wasi_snapshot_preview1 host module:
// wazero's implementation of the functions abi.AllowedWASI lists, except
// those in hostWASI, and, for those abi.InertWASI lists, stubs that return
// EBADF without looking at their arguments. The stubs take the place of
// wazero's implementations, so no module configuration could ever let a
// plugin open a file or a socket.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	// wazero's own definitions give the host's functions their exact
	// signatures.
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
	export := func(name string, def api.FunctionDefinition, f api.GoModuleFunc) error {
		if len(def.ResultTypes()) != 1 || def.ResultTypes()[0] != api.ValueTypeI32 {
			return fmt.Errorf("WASI function %s does not return an errno", name)
		}
		b.NewFunctionBuilder().WithGoModuleFunction(f, def.ParamTypes(), def.ResultTypes()).Export(name)
		return nil
	}
	for name, f := range hostWASI {
		def, ok := defs[name]
		if _, allowed := abi.AllowedWASI(name); !ok || !allowed {
			return fmt.Errorf("WASI function %s, implemented by the host, is not an allowed function of wazero's", name)
		}
		if err := export(name, def, f); err != nil {
			return err
		}
	}
	for name, def := range defs {
		_, allowed := abi.AllowedWASI(name)
		switch {
		case allowed:
		case abi.InertWASI(name):
			if err := export(name, def, func(_ context.Context, _ api.Module, stack []uint64) {
				stack[0] = errnoBadf
			}); err != nil {
				return err
			}
		default:
			// Validation refuses modules that import it, so it is never
			// linked; say so loudly if the lists drift from wazero's.
			return fmt.Errorf("WASI function %s is neither allowed nor inert", name)
		}
	}
	_, err = b.Instantiate(ctx)
	return err
}

// stopIfDone stops the guest (see stop) when the context of its export
// call is done: deadline, cancellation after the grace period, caller gone.
// The caller of the export classifies the error by the context. Host
// functions call it on entry and between bounded steps of long work, since
// nothing else stops a guest while it is inside a host function.
func stopIfDone(ctx context.Context, fn string) {
	if ctx.Err() != nil {
		stop(fmt.Errorf("%s: the guest was stopped: %w", fn, context.Cause(ctx)))
	}
}

// monotonicBase is the origin of the monotonic clock guests read.
var monotonicBase = time.Now()

// monotonicNow reads the guests' monotonic clock, in nanoseconds.
func monotonicNow() uint64 { return uint64(time.Since(monotonicBase)) }

// clockTimeGet is clock_time_get(id, precision, result) with wazero's
// semantics: the real wall clock and a monotonic clock, EINVAL for other
// clocks, EFAULT when result is outside memory; precision is ignored.
func clockTimeGet(ctx context.Context, mod api.Module, stack []uint64) {
	stopIfDone(ctx, abi.WASIModule+".clock_time_get")
	id, result := uint32(stack[0]), uint32(stack[2])
	var v uint64
	switch id {
	case clockRealtime, clockMonotonic:
	default:
		stack[0] = errnoInval // whatever the world: not taped
		return
	}
	if cs := taping(ctx); cs != nil {
		var buf [20]byte
		ask := numberAsk(&buf, uint64(id))
		if cs.play != nil {
			v = uint64(cs.replayClock(ask, id).Value)
		} else {
			v = readClock(id)
		}
		cs.record(tape.KindClock, ask, nil, int64(v))
	} else {
		v = readClock(id)
	}
	if !mod.Memory().WriteUint64Le(result, v) {
		stack[0] = errnoFault
		return
	}
	stack[0] = errnoSuccess
}

// readClock reads clock id, CLOCK_REALTIME or CLOCK_MONOTONIC.
func readClock(id uint32) uint64 {
	if id == clockRealtime {
		return uint64(time.Now().UnixNano())
	}
	return monotonicNow()
}

// randomChunk is how many random bytes random_get produces between two
// looks at the call's context: filling 256 MiB takes most of a second.
const randomChunk = 1 << 20

// randomGet is random_get(buf, len) with wazero's semantics (EFAULT when the
// buffer is outside memory), reading crypto/rand in chunks so that a
// deadline or a cancellation stops a guest asking for its whole memory.
func randomGet(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = abi.WASIModule + ".random_get"
	stopIfDone(ctx, fn)
	b, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
	if !ok {
		stack[0] = errnoFault
		return
	}
	cs := taping(ctx)
	if cs != nil && cs.play != nil {
		var buf [20]byte
		ask := numberAsk(&buf, uint64(len(b)))
		e := cs.replayRandom(ask, len(b))
		if len(e.Answer) != len(b) {
			cs.badTape(tape.KindRandom, "%d bytes for %d asked", len(e.Answer), len(b))
		}
		copy(b, e.Answer)
		cs.record(tape.KindRandom, ask, b, 0)
		stack[0] = errnoSuccess
		return
	}
	all := b
	for len(b) > 0 {
		chunk := b[:min(len(b), randomChunk)]
		if _, err := rand.Read(chunk); err != nil {
			stack[0] = errnoIO
			return
		}
		b = b[len(chunk):]
		stopIfDone(ctx, fn)
	}
	if cs != nil {
		var buf [20]byte
		cs.record(tape.KindRandom, numberAsk(&buf, uint64(len(all))), all, 0)
	}
	stack[0] = errnoSuccess
}

// iovecCheckEvery is how many iovecs fd_read walks between two looks at the
// call's context.
const iovecCheckEvery = 4096

// fdRead is fd_read(fd, iovs, iovs_len, result.nread) with wazero's
// semantics for the only descriptors a plugin has: stdin is at end of
// file, so the read stops at the first non-empty iovec and reads nothing;
// stdout and stderr cannot be read (EBADF, at the first non-empty iovec, as
// wazero); any other descriptor is EBADF. EFAULT when the iovecs, the
// first non-empty buffer or result.nread are outside memory.
func fdRead(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = abi.WASIModule + ".fd_read"
	stopIfDone(ctx, fn)
	fd, iovs, n, result := int32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	stack[0] = uint64(readStdio(ctx, fn, mod.Memory(), fd, iovs, n, result))
}

func readStdio(ctx context.Context, fn string, mem api.Memory, fd int32, iovs, n, result uint32) uint32 {
	if fd < 0 || fd > 2 {
		return errnoBadf
	}
	size := uint64(n) * 8
	if size > math.MaxUint32 {
		return errnoFault
	}
	buf, ok := mem.Read(iovs, uint32(size))
	if !ok {
		return errnoFault
	}
	for i := uint32(0); i < n; i++ {
		if i%iovecCheckEvery == iovecCheckEvery-1 {
			stopIfDone(ctx, fn)
		}
		offset, length := le.Uint32(buf[i*8:]), le.Uint32(buf[i*8+4:])
		if length == 0 {
			continue
		}
		if _, ok := mem.Read(offset, length); !ok {
			return errnoFault
		}
		if fd != 0 {
			return errnoBadf
		}
		break // stdin: end of file
	}
	if !mem.WriteUint32Le(result, 0) {
		return errnoFault
	}
	return errnoSuccess
}
