package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/call"
)

var nullJSON = []byte("null")

// Invoke runs one activity of a plugin version and returns its output. The
// call's deadline is ctx's; when it passes the guest is stopped, even in a
// loop without calls.
//
// The output is the bytes the guest passed to result (null when they were
// empty), with the call's secrets masked (see Secrets below), not parsed:
// the ABI says it is a JSON document, and every consumer decodes it
// anyway, so checking it here would be a second pass over it (on a 64 KiB
// output, ten times the cost of the call). A consumer that finds it is
// not JSON reports the guest's ABI violation; call.CheckOutput does that
// for a consumer that does not decode. The instance has gone back to the
// pool by then, and stays there (abi/README.md §7).
//
// # Errors
//
// Every error is a *call.Error. errors.As finds a *call.GuestError when
// the activity ran and reported a failure. Otherwise errors.Is matches one
// of call.ErrTimeout, call.ErrCancelled, call.ErrTrap, call.ErrLimit,
// call.ErrProtocol, call.ErrUnknownActivity, call.ErrNotGranted,
// call.ErrSecret, ErrNotFound, ErrClosed, or context.Canceled when ctx was
// cancelled. An instance that failed in any way but a guest error is
// discarded.
//
// # Secrets
//
// Nothing the call hands back holds the value of a secret its guest read,
// in this call or in an earlier call of the same plugin name or version on
// this node (the most recent 64 values of each): the output, the failure's
// code, message and details, every error message (which may quote guest
// bytes), the guest's stderr, log records, heartbeat details and request
// records have each value replaced by "[secret]" (mask.go). An output or
// details that masking leaves without a JSON document become a JSON string
// saying they were withheld.
func (r *Runtime) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, &call.Error{Version: version, Activity: c.Activity, Err: err}
	}
	var p *plugin
	for {
		var err error
		if p, err = r.plugin(ctx, version, r.fetch(version)); err != nil {
			return fail(err)
		}
		if !p.module.Has(c.Activity) {
			return fail(call.ErrUnknownActivity)
		}
		if p.pool.begin() {
			break
		}
		// The version was unloaded between the two steps; load it again
		// (or learn that the runtime is closed).
	}
	defer p.pool.calls.Done()
	var in *instance
	var err error
	switch {
	case c.Replay != nil:
		// A fresh tape initialises the instance from the tape; any other
		// initialises it live (Call.Replay).
		taped := &c
		if !c.Replay.Fresh() {
			taped = nil
		}
		in, err = p.pool.fresh(ctx, taped)
	case c.Record != nil && c.RecordExact:
		in, err = p.pool.fresh(ctx, &c)
	case c.Record != nil:
		in, err = p.pool.get(ctx, &c) // a new instance records its start
	default:
		in, err = p.pool.get(ctx, nil)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			err = fmt.Errorf("%w: the deadline passed while an instance was made ready (%w)", call.ErrTimeout, err)
		}
		return fail(err)
	}

	// The clocks of the attempt start now that the guest is about to
	// run, not while its module compiled or an instance was made ready.
	// (Read only for them: a clock read is a tenth of a short call.)
	if c.Heartbeat != nil || c.Timeout > 0 {
		started := r.cfg.Now()
		if c.Heartbeat != nil {
			c.Heartbeat.Restart(started)
		}
		if c.Timeout > 0 {
			// A sooner deadline of ctx stays the deadline.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, started.Add(c.Timeout))
			defer cancel()
		}
	}
	if d, ok := ctx.Deadline(); ok && (c.Info.DeadlineUnixMilli == 0 || d.UnixMilli() < c.Info.DeadlineUnixMilli) {
		// The guest is stopped at ctx's deadline: it must not read a
		// later one, nor 0, which says there is none (abi/README.md §9).
		c.Info.DeadlineUnixMilli = d.UnixMilli()
	}
	out, stderr, healthy, err := in.call(ctx, &c)
	if healthy {
		p.pool.put(in)
	} else {
		p.pool.discard(context.Background(), in)
	}
	if err != nil {
		ce := &call.Error{Version: version, Activity: c.Activity, Err: err}
		if _, guest := err.(*call.GuestError); !guest {
			ce.Stderr = stderr // it may explain a trap or an exit
		}
		return nil, ce
	}
	return out, nil
}

// call runs c on the instance. It returns the guest's stderr (for
// failures) and whether the instance can be reused.
func (in *instance) call(ctx context.Context, c *call.Call) (out []byte, stderr string, healthy bool, err error) {
	// A copy, so that the caller's Call stays on its stack (one allocation
	// less per call); zeroed after, so that an idle instance holds no input.
	in.invoked = *c
	out, healthy, err = in.run(ctx, &in.invoked)
	if err != nil {
		err = in.cs.maskErr(err)
		stderr = in.cs.maskCut(string(in.cs.stderr), len(in.cs.stderr) >= stderrKeep)
	}
	in.invoked = call.Call{}
	return out, stderr, healthy, err
}

func (in *instance) run(ctx context.Context, c *call.Call) (out []byte, healthy bool, err error) {
	rt := in.pool.rt
	// The instance's call state is reused; the result buffer is not, since
	// it becomes the caller's output.
	cs := &in.cs
	keep, records := cs.keepRequest, cs.records[:0]
	*cs = callState{rt: rt, call: c, hb: c.Heartbeat, stderr: cs.stderr[:0], grants: c.Grants, version: in.pool.version, rec: c.Record, play: c.Replay}
	cs.keepRequest, cs.records = keep, records
	if c.Requested != nil {
		// Kept until the end of the call, and masked then.
		if cs.keepRequest == nil {
			cs.keepRequest = func(r call.Request) { cs.records = append(cs.records, r) }
		}
		cs.requestedTo, c.Requested = c.Requested, cs.keepRequest
	}
	input := c.Input
	if len(input) == 0 {
		input = nullJSON
	}

	callCtx := ctx
	if cs.hb != nil {
		// Someone may request cancellation: give the guest the grace
		// period, then stop it.
		var cancel context.CancelCauseFunc
		callCtx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		// The callback runs on the goroutine that requests cancellation,
		// maybe after this call returned; cancelling a finished call is a
		// no-op.
		var grace atomic.Pointer[time.Timer]
		stopWatch := cs.hb.Watch(func() {
			grace.Store(time.AfterFunc(rt.cfg.CancelGrace, func() { cancel(call.ErrCancelled) }))
		})
		defer func() {
			stopWatch()
			if t := grace.Load(); t != nil {
				t.Stop()
			}
		}()
	}

	wctx := in.begin(callCtx, cs)
	defer func() {
		in.end()
		cs.flushLogs()
		for i, r := range cs.records {
			cs.requestedTo(cs.maskRequest(r))
			cs.records[i] = call.Request{} // an idle instance keeps no record
		}
		cs.records = cs.records[:0]
		// Before the instance goes back to its pool: the next call on it
		// masks what this one read.
		rt.seen.add(c.Info.Plugin, in.pool.version, cs.seenSecrets())
	}()

	// 1. A block for the request, from the guest's allocator.
	n := uint64(len(c.Activity)) + uint64(len(input))
	if limit := uint64(rt.cfg.MemoryLimitPages) * 65536; n >= limit {
		return nil, true, fmt.Errorf("%w: request of %d bytes cannot fit the guest's memory limit of %d bytes", call.ErrLimit, n, limit)
	}
	in.stack[0] = n
	in.resetStack()
	cs.export = abi.ExportAlloc
	if err := in.alloc.CallWithStack(wctx, in.stack[:]); err != nil {
		return nil, false, in.classify(ctx, callCtx, cs, abi.ExportAlloc, err)
	}
	ptr := uint32(in.stack[0])
	if ptr == 0 {
		return nil, false, fmt.Errorf("%w: %s could not allocate %d bytes for the request", call.ErrLimit, abi.ExportAlloc, n)
	}
	// 2. The request, in one copy.
	if !in.mem.WriteString(ptr, c.Activity) || !in.mem.Write(ptr+uint32(len(c.Activity)), input) {
		return nil, false, fmt.Errorf("%w: %s returned %d, and %d bytes there are outside memory (%d bytes)", call.ErrProtocol, abi.ExportAlloc, ptr, n, in.mem.Size())
	}
	// 3. The call.
	in.stack[0], in.stack[1], in.stack[2] = uint64(ptr), uint64(len(c.Activity)), uint64(len(input))
	in.resetStack()
	cs.export = abi.ExportInvoke
	var fuelStart int32
	if c.Fuel != nil {
		fuelStart = api.DecodeI32(in.fuel.Get())
		cs.fuel = in.fuel
	}
	err = in.invoke.CallWithStack(wctx, in.stack[:])
	if c.Fuel != nil {
		*c.Fuel += in.measureFuel(fuelStart)
	}
	if err != nil {
		return nil, false, in.classify(ctx, callCtx, cs, abi.ExportInvoke, err)
	}
	if cs.violation != nil {
		return nil, false, cs.violation
	}
	return cs.outcome(abi.Status(in.stack[0]))
}

// measureFuel returns the fuel weft_invoke used, from the counter's value
// when it started: what the counter lost, and what the check host function
// refilled it with meanwhile. That is the sum of the weights of the checks
// the guest ran, whatever the counter's value at the start (an instance
// from the pool keeps it from its earlier calls). The counter is read
// after a trap too: the guest did that work.
func (in *instance) measureFuel(start int32) uint64 {
	cs := &in.cs
	used := int64(start) - int64(api.DecodeI32(in.fuel.Get())) + cs.fuelRefilled
	cs.fuel, cs.fuelRefilled = nil, 0
	return uint64(max(used, 0))
}

// outcome interprets a returned status and the result the guest set.
func (cs *callState) outcome(status abi.Status) (out []byte, healthy bool, err error) {
	switch status {
	case abi.StatusOK:
		if !cs.resultSet {
			return nil, false, fmt.Errorf("%w: %s returned status 0 without calling result", call.ErrProtocol, abi.ExportInvoke)
		}
		if len(cs.result) == 0 {
			return append([]byte(nil), nullJSON...), true, nil
		}
		// Not parsed here: every caller decodes the output anyway, and a
		// second pass would cost more than the call (see Invoke). Masking
		// only parses an output it changed.
		return cs.maskDoc(cs.result, withheldOutput), true, nil
	case abi.StatusError, abi.StatusPanic:
		ge, perr := decodeFailure(cs.result, cs.resultSet)
		if perr != nil {
			return nil, false, perr
		}
		// The failure goes to the history, the instance's error and logs:
		// keep secrets out of every field.
		ge.Code, ge.Message = cs.mask(ge.Code), cs.mask(ge.Message)
		if ge.Details != nil {
			ge.Details = cs.maskDoc(ge.Details, withheldDetails)
		}
		return nil, status == abi.StatusError, ge
	default:
		return nil, false, fmt.Errorf("%w: %s returned status %d; want 0, 1 or 2", call.ErrProtocol, abi.ExportInvoke, status)
	}
}

func decodeFailure(doc []byte, set bool) (*call.GuestError, error) {
	if !set {
		return nil, fmt.Errorf("%w: %s reported a failure without calling result", call.ErrProtocol, abi.ExportInvoke)
	}
	var ge call.GuestError
	if err := json.Unmarshal(doc, &ge); err != nil {
		return nil, fmt.Errorf("%w: failure is not the JSON document of abi/README.md §8 (%v): %s", call.ErrProtocol, err, excerpt(doc))
	}
	if ge.Code == "" {
		return nil, fmt.Errorf("%w: failure has no code: %s", call.ErrProtocol, excerpt(doc))
	}
	if string(ge.Details) == "null" {
		ge.Details = nil
	}
	return &ge, nil
}

// classify turns an error from calling into the guest into a reason. The
// order matters: a stopped guest is reported by why the host stopped it, not
// by how wazero noticed.
func (in *instance) classify(parent, callCtx context.Context, cs *callState, export string, err error) error {
	switch {
	case errors.Is(context.Cause(callCtx), call.ErrCancelled) && parent.Err() == nil:
		return fmt.Errorf("%w: stopped %s after the cancellation grace period", call.ErrCancelled, in.pool.rt.cfg.CancelGrace)
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: the guest was stopped at its deadline", call.ErrTimeout)
	case parent.Err() != nil:
		return parent.Err()
	case cs.violation != nil:
		return cs.violation
	}
	if serr := stopped(err); serr != nil {
		return serr
	}
	if cs.outOfMemory || nearLimit(uint64(in.mem.Size()), uint64(in.pool.rt.cfg.MemoryLimitPages)*65536) {
		return fmt.Errorf("%w: memory: the guest ran out of its %d MiB (%v)", call.ErrLimit, in.pool.rt.cfg.MemoryLimitPages/16, err)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%w: the guest exited with code %d during %s", call.ErrTrap, exit.ExitCode(), export)
	}
	return fmt.Errorf("%w: %s: %v", call.ErrTrap, export, err)
}

// nearLimit reports whether a memory of size bytes is within a sixteenth
// (at most 1 MiB) of limit: a guest that trapped there most likely failed
// to grow its memory.
func nearLimit(size, limit uint64) bool {
	margin := min(limit/16, 1<<20)
	return size+margin >= limit
}

// excerpt quotes the start of a byte string for an error message.
func excerpt(b []byte) string {
	const max = 64
	if len(b) > max {
		return fmt.Sprintf("%q… (%d bytes)", b[:max], len(b))
	}
	return fmt.Sprintf("%q", b)
}
