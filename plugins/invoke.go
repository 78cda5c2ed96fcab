package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/grant"
)

// Call is one activity call.
type Call struct {
	// Activity is the name in the plugin's manifest.
	Activity string
	// Input is a JSON document; empty is sent as null.
	Input []byte
	// Info is what the guest reads through the info host function. Its
	// Activity field is filled from Activity when empty. Its
	// DeadlineUnixMilli is replaced by when the guest will be stopped:
	// always with a Timeout (see there); without one, by ctx's deadline
	// when it has one and DeadlineUnixMilli is 0 or later.
	Info abi.Info
	// LastHeartbeat is what the last_heartbeat host function returns: the
	// latest details any earlier attempt of the step execution recorded
	// (not only the previous attempt's), or nil when none did.
	LastHeartbeat []byte
	// Grants are what the operator granted the plugin: the hosts its HTTP
	// requests may reach, the values the config host function returns and
	// the secrets the secret host function resolves. Nil grants nothing.
	Grants *grant.Set
	// LoadGrants, when not nil, reads the grants in place of Grants: the
	// runtime calls it once, when the guest first needs them (its first
	// HTTP request, config or secret lookup), so that a call that needs
	// none reads none. An error from it stops the guest, and the call
	// fails with that error.
	LoadGrants func(context.Context) (*grant.Set, error)
	// Requested, when not nil, is told of each HTTP request the guest made,
	// in order, when the call ends (before Invoke returns), with the
	// call's secrets masked in it; see Request.
	Requested func(Request)
	// Heartbeat receives the guest's heartbeats and carries cancellation
	// requests to it. With nil, heartbeats are checked and dropped, and only
	// ctx can stop the call. Its clock restarts when the guest starts
	// running (see Timeout).
	Heartbeat *Heartbeat
	// Timeout, when above zero, is the call's start-to-close timeout,
	// counted from when the guest starts running: the time spent loading
	// the version (a first call may compile it) or waiting for an instance
	// does not count, and the guest is stopped at the sooner of that and
	// ctx's deadline. Info.DeadlineUnixMilli becomes the deadline the
	// guest is stopped at, unless Info already holds a sooner one.
	Timeout time.Duration
	// Log receives the guest's log records (log host function, stdout,
	// stderr), with the call's secrets masked. Nil sends them to the
	// runtime's logger; a function that keeps them passes them on with
	// LogTo, so that the host's log still has every line.
	Log func(Record)
}

// Record is one line a guest logged.
type Record struct {
	Level slog.Level
	// Source is "log", "stdout" or "stderr" for what the guest wrote, and
	// "http" for the host's notes on its requests (why one got no
	// response, a body cut at its limit).
	Source  string
	Message string
	// Dropped is set on the note that ends the records of a call whose
	// log limits dropped some (it is also the note's message): what they
	// kept out. Nil on every other record.
	Dropped *Dropped
}

// LevelName is rec's level as the host writes it where people read
// records: debug, info, warn or error.
func (rec Record) LevelName() string { return strings.ToLower(rec.Level.String()) }

// Dropped is what a call's log limits (Config.MaxLogRecords and
// MaxLogBytes) kept out of its log.
type Dropped struct {
	Records, Bytes int
	// OnRecords is true when the record limit was reached first, false
	// for the byte limit.
	OnRecords bool
}

// LogTo writes rec to log as the runtime writes the records of a call that
// has no Log function: with the attributes that find the attempt among a
// node's records (abi/README.md §4).
func (c *Call) LogTo(log *slog.Logger, rec Record) {
	info := &c.Info
	log.Log(context.Background(), rec.Level, "plugin: "+rec.Message, "source", rec.Source,
		"plugin", info.Plugin, "activity", c.Activity, "instance", info.InstanceID, "step", info.StepID, "attempt", info.Attempt)
}

var nullJSON = []byte("null")

// Invoke runs one activity of a plugin version and returns its output. The
// call's deadline is ctx's; when it passes the guest is stopped, even in a
// loop without calls.
//
// The output is the bytes the guest passed to result (null when they were
// empty), with the call's secrets masked (see Secrets below), not parsed:
// the ABI says it is a JSON document, and every consumer decodes it
// anyway, so checking it here would be a second pass over it (on a 64 KiB
// output, ten times the cost of the call). A consumer
// that finds it is not JSON reports the guest's ABI violation; CheckOutput
// does that for a consumer that does not decode. The instance has gone
// back to the pool by then, and stays there (abi/README.md §7).
//
// # Errors
//
// Every error is a *CallError. errors.As finds a *GuestError when the
// activity ran and reported a failure. Otherwise errors.Is matches one of
// ErrTimeout, ErrCancelled, ErrTrap, ErrLimit, ErrProtocol,
// ErrUnknownActivity, ErrNotFound, ErrClosed, or context.Canceled when ctx
// was cancelled. An instance that failed in any way but a guest error is
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
func (r *Runtime) Invoke(ctx context.Context, version string, call Call) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return nil, &CallError{Version: version, Activity: call.Activity, Err: err}
	}
	var p *plugin
	for {
		var err error
		if p, err = r.plugin(ctx, version, r.fetch(version)); err != nil {
			return fail(err)
		}
		if !p.module.Has(call.Activity) {
			return fail(ErrUnknownActivity)
		}
		if p.pool.begin() {
			break
		}
		// The version was unloaded between the two steps; load it again
		// (or learn that the runtime is closed).
	}
	defer p.pool.calls.Done()
	in, err := p.pool.get(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			err = fmt.Errorf("%w: the deadline passed while an instance was made ready (%w)", ErrTimeout, err)
		}
		return fail(err)
	}

	// The clocks of the attempt start now that the guest is about to
	// run, not while its module compiled or an instance was made ready.
	// (Read only for them: a clock read is a tenth of a short call.)
	if call.Heartbeat != nil || call.Timeout > 0 {
		started := r.cfg.Now()
		if call.Heartbeat != nil {
			call.Heartbeat.restart(started)
		}
		if call.Timeout > 0 {
			// A sooner deadline of ctx stays the deadline.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, started.Add(call.Timeout))
			defer cancel()
		}
	}
	if d, ok := ctx.Deadline(); ok && (call.Info.DeadlineUnixMilli == 0 || d.UnixMilli() < call.Info.DeadlineUnixMilli) {
		// The guest is stopped at ctx's deadline: it must not read a
		// later one, nor 0, which says there is none (abi/README.md §9).
		call.Info.DeadlineUnixMilli = d.UnixMilli()
	}
	out, stderr, healthy, err := in.call(ctx, &call)
	if healthy {
		p.pool.put(in)
	} else {
		p.pool.discard(context.Background(), in)
	}
	if err != nil {
		ce := &CallError{Version: version, Activity: call.Activity, Err: err}
		if _, guest := err.(*GuestError); !guest {
			ce.Stderr = stderr // it may explain a trap or an exit
		}
		return nil, ce
	}
	return out, nil
}

// call runs call on the instance. It returns the guest's stderr (for
// failures) and whether the instance can be reused.
func (in *instance) call(ctx context.Context, call *Call) (out []byte, stderr string, healthy bool, err error) {
	// A copy, so that the caller's Call stays on its stack (one allocation
	// less per call); zeroed after, so that an idle instance holds no input.
	in.invoked = *call
	out, healthy, err = in.run(ctx, &in.invoked)
	if err != nil {
		err = in.cs.maskErr(err)
		stderr = in.cs.maskCut(string(in.cs.stderr), len(in.cs.stderr) >= stderrKeep)
	}
	in.invoked = Call{}
	return out, stderr, healthy, err
}

func (in *instance) run(ctx context.Context, call *Call) (out []byte, healthy bool, err error) {
	rt := in.pool.rt
	// The instance's call state is reused; the result buffer is not, since
	// it becomes the caller's output.
	cs := &in.cs
	keep, records := cs.keepRequest, cs.records[:0]
	*cs = callState{rt: rt, call: call, hb: call.Heartbeat, stderr: cs.stderr[:0], grants: call.Grants, version: in.pool.version}
	cs.keepRequest, cs.records = keep, records
	if call.Requested != nil {
		// Kept until the end of the call, and masked then.
		if cs.keepRequest == nil {
			cs.keepRequest = func(r Request) { cs.records = append(cs.records, r) }
		}
		cs.requestedTo, call.Requested = call.Requested, cs.keepRequest
	}
	input := call.Input
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
		stopWatch := cs.hb.watch(func() {
			grace.Store(time.AfterFunc(rt.cfg.CancelGrace, func() { cancel(ErrCancelled) }))
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
			cs.records[i] = Request{} // an idle instance keeps no record
		}
		cs.records = cs.records[:0]
		// Before the instance goes back to its pool: the next call on it
		// masks what this one read.
		rt.seen.add(call.Info.Plugin, in.pool.version, cs.secrets)
	}()

	// 1. A block for the request, from the guest's allocator.
	n := uint64(len(call.Activity)) + uint64(len(input))
	if limit := uint64(rt.cfg.MemoryLimitPages) * 65536; n >= limit {
		return nil, true, fmt.Errorf("%w: request of %d bytes cannot fit the guest's memory limit of %d bytes", ErrLimit, n, limit)
	}
	in.stack[0] = n
	in.resetStack()
	cs.export = abi.ExportAlloc
	if err := in.alloc.CallWithStack(wctx, in.stack[:]); err != nil {
		return nil, false, in.classify(ctx, callCtx, cs, abi.ExportAlloc, err)
	}
	ptr := uint32(in.stack[0])
	if ptr == 0 {
		return nil, false, fmt.Errorf("%w: %s could not allocate %d bytes for the request", ErrLimit, abi.ExportAlloc, n)
	}
	// 2. The request, in one copy.
	if !in.mem.WriteString(ptr, call.Activity) || !in.mem.Write(ptr+uint32(len(call.Activity)), input) {
		return nil, false, fmt.Errorf("%w: %s returned %d, and %d bytes there are outside memory (%d bytes)", ErrProtocol, abi.ExportAlloc, ptr, n, in.mem.Size())
	}
	// 3. The call.
	in.stack[0], in.stack[1], in.stack[2] = uint64(ptr), uint64(len(call.Activity)), uint64(len(input))
	in.resetStack()
	cs.export = abi.ExportInvoke
	if err := in.invoke.CallWithStack(wctx, in.stack[:]); err != nil {
		return nil, false, in.classify(ctx, callCtx, cs, abi.ExportInvoke, err)
	}
	if cs.violation != nil {
		return nil, false, cs.violation
	}
	return cs.outcome(abi.Status(in.stack[0]))
}

// CheckOutput returns nil when out is a JSON document, and otherwise an
// error matching ErrProtocol that names the violation.
func CheckOutput(out []byte) error {
	if json.Valid(out) {
		return nil
	}
	return fmt.Errorf("%w: output is not a JSON document: %s", ErrProtocol, excerpt(out))
}

// outcome interprets a returned status and the result the guest set.
func (cs *callState) outcome(status abi.Status) (out []byte, healthy bool, err error) {
	switch status {
	case abi.StatusOK:
		if !cs.resultSet {
			return nil, false, fmt.Errorf("%w: %s returned status 0 without calling result", ErrProtocol, abi.ExportInvoke)
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
		return nil, false, fmt.Errorf("%w: %s returned status %d; want 0, 1 or 2", ErrProtocol, abi.ExportInvoke, status)
	}
}

func decodeFailure(doc []byte, set bool) (*GuestError, error) {
	if !set {
		return nil, fmt.Errorf("%w: %s reported a failure without calling result", ErrProtocol, abi.ExportInvoke)
	}
	var ge GuestError
	if err := json.Unmarshal(doc, &ge); err != nil {
		return nil, fmt.Errorf("%w: failure is not the JSON document of abi/README.md §8 (%v): %s", ErrProtocol, err, excerpt(doc))
	}
	if ge.Code == "" {
		return nil, fmt.Errorf("%w: failure has no code: %s", ErrProtocol, excerpt(doc))
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
	case errors.Is(context.Cause(callCtx), ErrCancelled) && parent.Err() == nil:
		return fmt.Errorf("%w: stopped %s after the cancellation grace period", ErrCancelled, in.pool.rt.cfg.CancelGrace)
	case errors.Is(parent.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%w: the guest was stopped at its deadline", ErrTimeout)
	case parent.Err() != nil:
		return parent.Err()
	case cs.violation != nil:
		return cs.violation
	}
	if serr := stopped(err); serr != nil {
		return serr
	}
	if cs.outOfMemory || nearLimit(uint64(in.mem.Size()), uint64(in.pool.rt.cfg.MemoryLimitPages)*65536) {
		return fmt.Errorf("%w: memory: the guest ran out of its %d MiB (%v)", ErrLimit, in.pool.rt.cfg.MemoryLimitPages/16, err)
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("%w: the guest exited with code %d during %s", ErrTrap, exit.ExitCode(), export)
	}
	return fmt.Errorf("%w: %s: %v", ErrTrap, export, err)
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
