package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
)

// callState is what the host functions know about the call in progress.
type callState struct {
	rt   *Runtime
	call *Call // nil during _initialize and weft_manifest
	hb   *Heartbeat

	// initialising and inManifest mark calls outside weft_invoke.
	initialising bool
	inManifest   bool

	result    []byte
	resultSet bool
	// violation is the first ABI violation a host function saw; the host
	// function also stops the guest.
	violation error

	info []byte // encoded lazily

	logBytes   int
	logDropped int
	stdoutLine []byte
	stderrLine []byte
	// stderr keeps the first bytes the guest wrote to stderr, where a Go
	// runtime puts the reason for a crash, for the error.
	stderr []byte
	// outOfMemory is set when the guest said so on stderr (Go's runtime,
	// wasi-libc's abort) before trapping.
	outOfMemory bool
}

type callKey struct{}

// withCall attaches cs to ctx; wazero hands the context of the export call
// to the host functions that the guest calls during it.
func withCall(ctx context.Context, cs *callState) context.Context {
	return context.WithValue(ctx, callKey{}, cs)
}

func callOf(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}

// abort records an ABI violation and stops the guest: a host function that
// panics makes wazero unwind the guest and return an error from the export
// call.
func (cs *callState) abort(format string, args ...any) {
	err := fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, args...)...)
	if cs.violation == nil {
		cs.violation = err
	}
	panic(err)
}

// read copies n bytes at ptr out of guest memory, aborting the call when
// they are not all inside it.
func (cs *callState) read(mod api.Module, fn string, ptr, n uint32) []byte {
	if n == 0 {
		return nil
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		cs.abort("%s.%s: %d bytes at %d are outside memory (%d bytes)", abi.HostModule, fn, n, ptr, mod.Memory().Size())
	}
	return b
}

// inInvoke returns the call state for a host function only weft_invoke may
// call, aborting the guest otherwise.
func inInvoke(ctx context.Context, fn string) *callState {
	cs := callOf(ctx)
	if cs == nil || cs.call == nil {
		if cs == nil {
			panic(fmt.Errorf("%w: %s.%s called outside an export call", ErrProtocol, abi.HostModule, fn))
		}
		cs.abort("%s.%s called outside %s", abi.HostModule, fn, abi.ExportInvoke)
	}
	return cs
}

func (r *Runtime) instantiateHostModule(ctx context.Context) error {
	i32 := api.ValueTypeI32
	b := r.rt.NewHostModuleBuilder(abi.HostModule)
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).WithName(name).Export(name)
	}
	fn(abi.ImportResult, hostResult, []api.ValueType{i32, i32}, nil)
	fn(abi.ImportLog, hostLog, []api.ValueType{i32, i32, i32}, nil)
	fn(abi.ImportHeartbeat, hostHeartbeat, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportCancelled, hostCancelled, nil, []api.ValueType{i32})
	fn(abi.ImportInfo, hostInfo, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportLastHeartbeat, hostLastHeartbeat, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportConfig, hostConfig, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	_, err := b.Instantiate(ctx)
	return err
}

func hostResult(ctx context.Context, mod api.Module, stack []uint64) {
	cs := callOf(ctx)
	if cs == nil || (cs.call == nil && !cs.inManifest) {
		if cs == nil {
			panic(fmt.Errorf("%w: %s.%s called outside an export call", ErrProtocol, abi.HostModule, abi.ImportResult))
		}
		cs.abort("%s.%s called outside %s and %s", abi.HostModule, abi.ImportResult, abi.ExportInvoke, abi.ExportManifest)
	}
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if int64(n) > int64(cs.rt.cfg.MaxOutputBytes) {
		err := fmt.Errorf("%w: output: %d bytes, more than the limit of %d", ErrLimit, n, cs.rt.cfg.MaxOutputBytes)
		if cs.violation == nil {
			cs.violation = err
		}
		panic(err)
	}
	b := cs.read(mod, abi.ImportResult, ptr, n)
	// The bytes belong to the guest: copy them, reusing the buffer of an
	// earlier result in this call.
	cs.result = append(cs.result[:0], b...)
	cs.resultSet = true
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	cs := callOf(ctx)
	if cs == nil {
		panic(fmt.Errorf("%w: %s.%s called outside an export call", ErrProtocol, abi.HostModule, abi.ImportLog))
	}
	level := slog.LevelInfo
	switch int32(stack[0]) {
	case abi.LevelDebug:
		level = slog.LevelDebug
	case abi.LevelWarn:
		level = slog.LevelWarn
	case abi.LevelError:
		level = slog.LevelError
	}
	msg := cs.read(mod, abi.ImportLog, uint32(stack[1]), uint32(stack[2]))
	cs.emit(level, "log", msg)
}

func hostHeartbeat(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportHeartbeat)
	details := cs.read(mod, abi.ImportHeartbeat, uint32(stack[0]), uint32(stack[1]))
	if details != nil && !json.Valid(details) {
		cs.abort("%s.%s: details are not a JSON document: %s", abi.HostModule, abi.ImportHeartbeat, excerpt(details))
	}
	if cs.hb == nil { // nobody watches this call: nothing to record, nothing can cancel it
		stack[0] = 0
		return
	}
	stack[0] = b2u(cs.hb.beat(details, cs.rt.cfg.Now()))
}

func hostCancelled(ctx context.Context, _ api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportCancelled)
	stack[0] = b2u(cs.hb != nil && cs.hb.CancelRequested())
}

func hostInfo(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportInfo)
	if cs.info == nil {
		info := cs.call.Info
		if info.Activity == "" {
			info.Activity = cs.call.Activity
		}
		cs.info, _ = json.Marshal(info)
	}
	cs.writeSized(mod, abi.ImportInfo, cs.info, true, uint32(stack[0]), uint32(stack[1]), stack)
}

func hostLastHeartbeat(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportLastHeartbeat)
	lhb := cs.call.LastHeartbeat
	cs.writeSized(mod, abi.ImportLastHeartbeat, lhb, len(lhb) > 0, uint32(stack[0]), uint32(stack[1]), stack)
}

func hostConfig(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportConfig)
	key := cs.read(mod, abi.ImportConfig, uint32(stack[0]), uint32(stack[1]))
	v, ok := cs.call.Config[string(key)]
	cs.writeSized(mod, abi.ImportConfig, []byte(v), ok, uint32(stack[2]), uint32(stack[3]), stack)
}

// writeSized implements the "(buf, cap) -> len" convention: write v at buf
// when it fits in capacity, and return its length (or NotFound).
func (cs *callState) writeSized(mod api.Module, fn string, v []byte, found bool, buf, capacity uint32, stack []uint64) {
	if !found {
		stack[0] = api.EncodeI32(abi.NotFound)
		return
	}
	if uint32(len(v)) <= capacity && len(v) > 0 {
		if !mod.Memory().Write(buf, v) {
			cs.abort("%s.%s: buffer of %d bytes at %d is outside memory (%d bytes)", abi.HostModule, fn, capacity, buf, mod.Memory().Size())
		}
	}
	stack[0] = uint64(uint32(len(v)))
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// emit sends one log record, within the call's log volume limit.
func (cs *callState) emit(level slog.Level, source string, msg []byte) {
	if cs.logBytes+len(msg) > cs.rt.cfg.MaxLogBytes {
		cs.logDropped += len(msg)
		return
	}
	cs.logBytes += len(msg)
	rec := Record{Level: level, Source: source, Message: string(msg)}
	if cs.call != nil && cs.call.Log != nil {
		cs.call.Log(rec)
		return
	}
	attrs := []any{"source", source}
	if cs.call != nil {
		attrs = append(attrs, "activity", cs.call.Activity, "instance", cs.call.Info.InstanceID, "step", cs.call.Info.StepID)
	}
	cs.rt.log.Log(context.Background(), level, "plugin: "+rec.Message, attrs...)
}

// flushLogs emits unterminated stdout/stderr lines and a note about dropped
// bytes; it runs once at the end of a call.
func (cs *callState) flushLogs() {
	if len(cs.stdoutLine) > 0 {
		cs.emit(slog.LevelInfo, "stdout", cs.stdoutLine)
		cs.stdoutLine = nil
	}
	if len(cs.stderrLine) > 0 {
		cs.emit(slog.LevelWarn, "stderr", cs.stderrLine)
		cs.stderrLine = nil
	}
	if cs.logDropped > 0 {
		dropped := cs.logDropped
		cs.logDropped = 0
		cs.logBytes = 0 // the note itself always goes out
		cs.emit(slog.LevelWarn, "log", fmt.Appendf(nil, "log volume limit of %d bytes reached: %d bytes dropped", cs.rt.cfg.MaxLogBytes, dropped))
	}
}

const stderrKeep = 2048

func (cs *callState) stderrTail() string { return string(cs.stderr) }

// guestWriter receives a guest's stdout or stderr and turns it into log
// records of the call in progress, a line each.
type guestWriter struct {
	in     *instance
	source string
}

// Write implements io.Writer.
func (w *guestWriter) Write(p []byte) (int, error) {
	cs := w.in.cur
	if cs == nil {
		// Between calls nothing runs in the guest; be safe anyway.
		w.in.pool.rt.log.Warn("plugin output outside a call", "source", w.source, "text", string(p))
		return len(p), nil
	}
	line, level := &cs.stdoutLine, slog.LevelInfo
	if w.source == "stderr" {
		line, level = &cs.stderrLine, slog.LevelWarn
		if room := stderrKeep - len(cs.stderr); room > 0 {
			cs.stderr = append(cs.stderr, p[:min(room, len(p))]...)
		}
		if bytes.Contains(p, []byte("out of memory")) {
			cs.outOfMemory = true
		}
	}
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(*line)+len(rest) > cs.rt.cfg.MaxLogBytes {
				// A line without end larger than the whole budget.
				cs.logDropped += len(*line) + len(rest)
				*line = (*line)[:0]
			} else {
				*line = append(*line, rest...)
			}
			return len(p), nil
		}
		*line = append(*line, rest[:i]...)
		cs.emit(level, w.source, *line)
		*line = (*line)[:0]
		rest = rest[i+1:]
	}
}
