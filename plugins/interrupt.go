package plugins

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/internal/instrument"
	"github.com/weftworks/weft/plugins/call"
)

// The names the instrumentation adds to every module (see package
// instrument). They are the host's, not the ABI's: a module that imports
// from instrumentModule or exports stackExport or fuelExport is refused.
const (
	instrumentModule = "weft:instrument"
	instrumentFunc   = "check"
	stackExport      = "weft:stack"
	// fuelExport is the fuel counter, read when a call measures its
	// guest's work (call.Call.Fuel).
	fuelExport = "weft:fuel"
	// maxTables is the most tables a module may declare.
	maxTables = 16
)

// stackSlot is the size of the instrumentation's stack unit, in bytes.
const stackSlot = 8

// stopError is what the host functions panic with to stop a guest; wazero
// unwinds the guest and returns it wrapped, and classify reports err.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// stop stops the guest with err.
func stop(err error) { panic(&stopError{err: err}) }

// instrumentOptions are the rewrite's options under cfg.
func instrumentOptions(cfg Config) instrument.Options {
	return instrument.Options{
		ImportModule:     instrumentModule,
		ImportName:       instrumentFunc,
		StackExport:      stackExport,
		FuelExport:       fuelExport,
		Stack:            stackBudget(cfg),
		MaxTableElements: cfg.MaxTableElements,
		MaxTables:        maxTables,
		MaxFunctionBytes: cfg.MaxFunctionBytes,
	}
}

func stackBudget(cfg Config) int32 { return int32(cfg.MaxStackBytes / stackSlot) }

// instantiateInstrumentModule links the host function the instrumentation
// imports: the guest calls it when its fuel runs out, which is where a call
// past its deadline or cancelled is stopped (and where the Go scheduler may
// preempt it), and when its stack budget is spent.
func (r *Runtime) instantiateInstrumentModule(ctx context.Context) error {
	i32 := api.ValueTypeI32
	_, err := r.rt.NewHostModuleBuilder(instrumentModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(r.check), []api.ValueType{i32}, []api.ValueType{i32}).
		WithName(instrumentFunc).
		Export(instrumentFunc).
		Instantiate(ctx)
	return err
}

func (r *Runtime) check(ctx context.Context, _ api.Module, stack []uint64) {
	switch uint32(stack[0]) {
	case instrument.ReasonFuel:
		if err := ctx.Err(); err != nil {
			stop(err) // classify says why from the contexts
		}
		cs := callOf(ctx)
		share(cs)
		if cs != nil && cs.fuel != nil {
			// The counter is at or below zero; what the refill adds is
			// work the guest will have done by the end of the call.
			cs.fuelRefilled += instrument.Fuel - int64(api.DecodeI32(cs.fuel.Get()))
		}
		stack[0] = instrument.Fuel
	case instrument.ReasonStack:
		stop(fmt.Errorf("%w: stack: the guest's calls nest deeper than its stack limit of %d KiB allows", call.ErrLimit, r.cfg.MaxStackBytes>>10))
	default:
		stop(fmt.Errorf("%w: %s.%s called with reason %d", call.ErrProtocol, instrumentModule, instrumentFunc, uint32(stack[0])))
	}
}

// turnLength is how long a guest keeps its thread before its next visit
// to the host lets other goroutines run.
//
// Without yielding, a guest keeps its thread for the Go scheduler's whole
// 10 ms slice, and with more busy guests than cores an HTTP request waits
// several slices for a turn. Yielding at every visit (every 0.2 ms of
// guest code) cost kit upper on 64 KiB 5% of its speed at the median, up
// to a fifth in single rounds, on two cores (BENCHMARKS.md, "Kit upper
// end to end, in turns"): each yield may move the goroutine to another
// thread, whose caches do not hold the guest's memory. A millisecond keeps
// the wait of a goroutine behind busy guests near a millisecond a guest.
const turnLength = time.Millisecond

// share lets other goroutines run when the guest's turn is over: cs's
// turn, or at every visit when there is no call state. It reads the real
// clock, not Config.Now: what it measures is how long the guest has held
// its thread.
func share(cs *callState) {
	if cs != nil && !cs.turnOver(time.Now()) {
		return
	}
	runtime.Gosched()
	if cs != nil {
		// The next turn begins when the goroutine runs again, not when
		// it yielded: a wait in the run queue is not the guest's.
		cs.turn = time.Now()
	}
}

// turnOver says whether the guest's turn, begun at cs.turn, is over at
// now.
func (cs *callState) turnOver(now time.Time) bool { return now.Sub(cs.turn) >= turnLength }

// stopped returns the error a host function stopped the guest with, if err
// carries one.
func stopped(err error) error {
	var s *stopError
	if errors.As(err, &s) {
		return s.err
	}
	return nil
}
