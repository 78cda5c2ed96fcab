package plugins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
	"github.com/weftworks/weft/plugins/tape"
)

// callState is what the host functions know about the call in progress.
type callState struct {
	rt   *Runtime
	call *call.Call // nil during _initialize and weft_manifest
	hb   *call.Heartbeat

	// export is the export the guest is in: weft_abi_version,
	// weft_manifest, weft_alloc or weft_invoke; empty with initialising
	// set for _initialize. Which host functions a guest may call depends
	// on it (abi/README.md §4).
	export       string
	initialising bool

	result    []byte
	resultSet bool
	// violation is the first ABI violation a host function saw; the host
	// function also stops the guest.
	violation error

	info []byte // encoded lazily, or the tape's
	// lastHB is the last heartbeat's details the guest reads, found at
	// its first read (lastHBRead): the call's, or the tape's.
	lastHB     []byte
	lastHBRead bool
	// configKeyMax is the length of the longest key in call.Config, found
	// lazily (configKeyMaxSet): a longer key is not looked up at all.
	configKeyMax    int
	configKeyMaxSet bool

	// turn is when the guest's current turn on its thread began: the
	// export call's start (begin), then its last yield (share).
	turn time.Time

	// ctx is the export call's own context (begin), for the stdout
	// and stderr writers, which wazero calls without one, and for what a
	// host function starts that may outlive the call.
	ctx context.Context

	// The log limits: logRecords records of logBytes bytes were logged.
	// At the first record that does not fit, logFull is set and everything
	// after it is dropped and only counted, without being looked at;
	// flushLogs then notes the drop.
	logRecords     int
	logBytes       int
	logFull        bool
	fullOnRecords  bool // the record limit, not the byte limit, was hit
	droppedRecords int
	droppedBytes   int
	droppedStdio   bool // stdout/stderr bytes were dropped without being split into lines
	stdoutLine     []byte
	stderrLine     []byte
	// stderr keeps the first bytes the guest wrote to stderr, where a Go
	// runtime puts the reason for a crash, for the error.
	stderr []byte
	// http is the call's outbound HTTP.
	http httpState
	// secrets are the secret values the guest read in this call, by name:
	// resolved once per call (a sized read asks twice), masked in all the
	// call hands back (mask.go), and added to the runtime's seen values
	// when it ends.
	secrets map[string]string
	// version is the plugin version the call runs, for the seen values.
	version string
	// masks are the forms of the values the call masks (maskForms), built
	// for masksFor secrets read.
	masks      []string
	masksBuilt bool
	masksFor   int
	// requestedTo is the Call's Requested: the call's request records are
	// kept in records (by keepRequest, which the Call gets in its place)
	// and handed to it masked at the end of the call, when every secret
	// the guest read is known. keepRequest and records' array are the
	// instance's, reused from call to call.
	requestedTo func(call.Request)
	keepRequest func(call.Request)
	records     []call.Request

	// grants are the call's grants: Call.Grants, or once grantsRead,
	// what Call.LoadGrants returned (needGrants).
	grants     *grant.Set
	grantsRead bool

	// rec and play are the call's Record and Replay (also while an
	// instance made for it initialises from or onto its tape: pool.fresh,
	// pool.get); nil when it does neither.
	rec  *tape.Recorder
	play *tape.Player

	// outOfMemory is set when the guest said so on stderr (Go's runtime,
	// wasi-libc's abort) before trapping.
	outOfMemory bool

	// fuel is the instance's fuel counter while weft_invoke runs for a
	// call that measures its work (call.Call.Fuel), else nil; the check
	// host function adds to fuelRefilled what each refill gives the
	// counter (see instance.measureFuel).
	fuel         api.MutableGlobal
	fuelRefilled int64
}

type callKey struct{}

// callContext is the context of a call into the guest, which wazero hands
// to the host functions the guest calls during it: the call's own context,
// with its call state as a value. An instance reuses one from call to call
// (a context.WithValue per call is an allocation), so nothing may keep it
// past the call: a host function that starts something that may outlive
// the call derives its context from callState.ctx instead.
type callContext struct {
	context.Context
	cs *callState
}

// Value implements context.Context.
func (c *callContext) Value(key any) any {
	if key == (callKey{}) {
		return c.cs
	}
	return c.Context.Value(key)
}

// begin makes cs the call into the guest in progress, and returns its
// context: ctx with cs, which gets ctx for the stdout and stderr writers
// (wazero calls them without a context).
func (in *instance) begin(ctx context.Context, cs *callState) context.Context {
	cs.ctx = ctx
	cs.turn = time.Now()
	in.cur = callContext{Context: ctx, cs: cs}
	return &in.cur
}

// end ends the call into the guest in progress.
func (in *instance) end() { in.cur = callContext{} }

func callOf(ctx context.Context) *callState {
	cs, _ := ctx.Value(callKey{}).(*callState)
	return cs
}

// abort records an ABI violation and stops the guest: a host function that
// panics makes wazero unwind the guest and return an error from the export
// call.
func (cs *callState) abort(format string, args ...any) {
	err := fmt.Errorf("%w: "+format, append([]any{call.ErrProtocol}, args...)...)
	if cs.violation == nil {
		cs.violation = err
	}
	panic(err)
}

// limit stops the guest for exceeding a limit, with an error matching
// call.ErrLimit.
func (cs *callState) limit(format string, args ...any) {
	err := fmt.Errorf("%w: "+format, append([]any{call.ErrLimit}, args...)...)
	if cs.violation == nil {
		cs.violation = err
	}
	panic(err)
}

// inside reports whether the n bytes at ptr lie inside the guest's memory;
// with n = 0, whether ptr is at most its size (abi/README.md §4).
func inside(mod api.Module, ptr, n uint32) bool {
	return uint64(ptr)+uint64(n) <= uint64(mod.Memory().Size())
}

// read returns the n bytes at ptr in guest memory (not a copy), aborting
// the call when they are not all inside it. A pair of length 0 is checked
// too: the ABI holds every pair to memory, so a guest's bad pointer shows
// the first time it is passed, not only once there is something to read.
func (cs *callState) read(mod api.Module, fn string, ptr, n uint32) []byte {
	if !inside(mod, ptr, n) {
		cs.abort("%s.%s: %d bytes at %d are outside memory (%d bytes)", abi.HostModule, fn, n, ptr, mod.Memory().Size())
	}
	if n == 0 {
		return nil
	}
	b, _ := mod.Memory().Read(ptr, n) // inside memory: cannot fail
	return b
}

// where names the export the guest is in, for errors.
func (cs *callState) where() string {
	if cs.export == "" && cs.initialising {
		return abi.ExportInitialize
	}
	return cs.export
}

// inInvoke returns the call state for a host function only weft_invoke may
// call, aborting the guest otherwise: weft_alloc runs during an activity
// call too, but the ABI gives it nothing to ask the host for.
func inInvoke(ctx context.Context, fn string) *callState {
	cs := callOf(ctx)
	if cs == nil {
		panic(fmt.Errorf("%w: %s.%s called outside an export call", call.ErrProtocol, abi.HostModule, fn))
	}
	if cs.call == nil || cs.export != abi.ExportInvoke {
		cs.abort("%s.%s called from %s; only %s may call it", abi.HostModule, fn, cs.where(), abi.ExportInvoke)
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
	fn(abi.ImportSecret, hostSecret, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	fn(abi.ImportHTTPRequest, hostHTTPRequest, []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32})
	fn(abi.ImportHTTPResponseHeaders, hostHTTPResponseHeaders, []api.ValueType{i32, i32}, []api.ValueType{i32})
	fn(abi.ImportHTTPResponseBody, hostHTTPResponseBody, []api.ValueType{i32, i32}, []api.ValueType{i32})
	_, err := b.Instantiate(ctx)
	return err
}

func hostResult(ctx context.Context, mod api.Module, stack []uint64) {
	cs := callOf(ctx)
	if cs == nil {
		panic(fmt.Errorf("%w: %s.%s called outside an export call", call.ErrProtocol, abi.HostModule, abi.ImportResult))
	}
	if (cs.call == nil || cs.export != abi.ExportInvoke) && cs.export != abi.ExportManifest {
		cs.abort("%s.%s called from %s; only %s and %s may call it", abi.HostModule, abi.ImportResult, cs.where(), abi.ExportInvoke, abi.ExportManifest)
	}
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportResult)
	ptr, n := uint32(stack[0]), uint32(stack[1])
	if int64(n) > int64(cs.rt.cfg.MaxOutputBytes) {
		cs.limit("output: %d bytes, more than the limit of %d", n, cs.rt.cfg.MaxOutputBytes)
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
		panic(fmt.Errorf("%w: %s.%s called outside an export call", call.ErrProtocol, abi.HostModule, abi.ImportLog))
	}
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportLog)
	level := slog.LevelInfo
	switch int32(stack[0]) {
	case abi.LevelDebug:
		level = slog.LevelDebug
	case abi.LevelWarn:
		level = slog.LevelWarn
	case abi.LevelError:
		level = slog.LevelError
	}
	// Not copied: emit copies only what it logs.
	msg := cs.read(mod, abi.ImportLog, uint32(stack[1]), uint32(stack[2]))
	cs.emit(level, "log", msg)
}

func hostHeartbeat(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportHeartbeat)
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportHeartbeat)
	ptr, n := uint32(stack[0]), uint32(stack[1])
	// Before looking at the bytes: validating and keeping large details
	// costs the host time and memory, and the store their size again at
	// every persistence.
	if int64(n) > int64(cs.rt.cfg.MaxHeartbeatBytes) {
		cs.limit("heartbeat details: %d bytes, more than the limit of %d", n, cs.rt.cfg.MaxHeartbeatBytes)
	}
	details := cs.read(mod, abi.ImportHeartbeat, ptr, n)
	if details != nil && !json.Valid(details) {
		cs.abort("%s.%s: details are not a JSON document: %s", abi.HostModule, abi.ImportHeartbeat, excerpt(details))
	}
	// Persisted and served as they are: no secret in them.
	if details != nil {
		details = cs.maskDoc(details, withheldDetails)
	}
	if cs.tapeOn() {
		ask := askOf(details)
		var stop bool
		if cs.play != nil {
			stop = cs.replay(tape.KindHeartbeat, ask).Value != 0
			if cs.hb != nil { // a watcher still sees the progress; the tape answers
				cs.hb.Beat(details, cs.rt.cfg.Now())
			}
		} else {
			stop = cs.hb != nil && cs.hb.Beat(details, cs.rt.cfg.Now())
		}
		cs.record(tape.KindHeartbeat, ask, nil, int64(b2u(stop)))
		stack[0] = b2u(stop)
		return
	}
	if cs.hb == nil { // nobody watches this call: nothing to record, nothing can cancel it
		stack[0] = 0
		return
	}
	stack[0] = b2u(cs.hb.Beat(details, cs.rt.cfg.Now()))
}

func hostCancelled(ctx context.Context, _ api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportCancelled)
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportCancelled)
	if cs.tapeOn() {
		var stop bool
		if cs.play != nil {
			stop = cs.replay(tape.KindCancelled, nil).Value != 0
		} else {
			stop = cs.hb != nil && cs.hb.CancelRequested()
		}
		cs.record(tape.KindCancelled, nil, nil, int64(b2u(stop)))
		stack[0] = b2u(stop)
		return
	}
	stack[0] = b2u(cs.hb != nil && cs.hb.CancelRequested())
}

func hostInfo(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportInfo)
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportInfo)
	if cs.info == nil {
		if cs.play != nil {
			cs.info = cs.replay(tape.KindInfo, nil).Answer
			if len(cs.info) == 0 {
				cs.badTape(tape.KindInfo, "no document")
			}
		} else {
			info := cs.call.Info
			if info.Activity == "" {
				info.Activity = cs.call.Activity
			}
			cs.info, _ = json.Marshal(info)
		}
		cs.record(tape.KindInfo, nil, cs.info, 0)
	}
	cs.writeSized(mod, abi.ImportInfo, cs.info, true, uint32(stack[0]), uint32(stack[1]), stack)
}

func hostLastHeartbeat(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportLastHeartbeat)
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportLastHeartbeat)
	if !cs.lastHBRead {
		cs.lastHB, cs.lastHBRead = cs.call.LastHeartbeat, true
		if cs.tapeOn() {
			if cs.play != nil {
				e := cs.replay(tape.KindLastHeartbeat, nil)
				cs.lastHB = e.Answer
				if e.Value == -1 {
					cs.lastHB = nil
				}
			}
			cs.record(tape.KindLastHeartbeat, nil, cs.lastHB, noneIf(len(cs.lastHB) == 0))
		}
	}
	lhb := cs.lastHB
	cs.writeSized(mod, abi.ImportLastHeartbeat, lhb, len(lhb) > 0, uint32(stack[0]), uint32(stack[1]), stack)
}

func hostConfig(ctx context.Context, mod api.Module, stack []uint64) {
	cs := inInvoke(ctx, abi.ImportConfig)
	stopIfDone(ctx, abi.HostModule+"."+abi.ImportConfig)
	key := cs.read(mod, abi.ImportConfig, uint32(stack[0]), uint32(stack[1]))
	if cs.play != nil {
		ask := askOf(key)
		e := cs.replay(tape.KindConfig, ask)
		cs.record(tape.KindConfig, ask, e.Answer, e.Value)
		cs.writeSized(mod, abi.ImportConfig, e.Answer, e.Value != -1, uint32(stack[2]), uint32(stack[3]), stack)
		return
	}
	cs.needGrants()
	if !cs.configKeyMaxSet {
		for k := range cs.config() {
			cs.configKeyMax = max(cs.configKeyMax, len(k))
		}
		cs.configKeyMaxSet = true
	}
	var v string
	var ok bool
	if len(key) <= cs.configKeyMax { // hashing a key of the whole memory takes a while
		v, ok = cs.config()[string(key)]
	}
	if cs.rec != nil {
		cs.record(tape.KindConfig, askOf(key), []byte(v), noneIf(!ok))
	}
	cs.writeSized(mod, abi.ImportConfig, []byte(v), ok, uint32(stack[2]), uint32(stack[3]), stack)
}

// config returns the call's configuration values.
func (cs *callState) config() map[string]string {
	if cs.grants == nil {
		return nil
	}
	return cs.grants.Config
}

// needGrants reads the call's grants with Call.LoadGrants, the first time
// a host function needs them; an error stops the guest with it.
func (cs *callState) needGrants() {
	if cs.grantsRead || cs.call.LoadGrants == nil {
		return
	}
	// The guest waits on the store, not hung: as for an HTTP request.
	if cs.hb != nil {
		defer cs.hb.HostWait(cs.rt.cfg.Now)()
	}
	g, err := cs.call.LoadGrants(cs.ctx)
	if err != nil {
		cs.fail(err)
	}
	cs.grants, cs.grantsRead = g, true
}

// writeSized implements the "(buf, cap) -> len" convention: write v at buf
// when it fits in capacity, and return its length (or NotFound).
//
// The buffer must lie inside memory whether or not anything is written
// (abi/README.md §4): a guest passing a bad buffer would otherwise fail
// only once a value happens to fit. cap 0 with buf at most the memory's
// size (0 in particular) is the length-only probe the Go SDK makes.
func (cs *callState) writeSized(mod api.Module, fn string, v []byte, found bool, buf, capacity uint32, stack []uint64) {
	if !inside(mod, buf, capacity) {
		cs.abort("%s.%s: buffer of %d bytes at %d is outside memory (%d bytes)", abi.HostModule, fn, capacity, buf, mod.Memory().Size())
	}
	if !found {
		stack[0] = api.EncodeI32(abi.NotFound)
		return
	}
	if uint32(len(v)) <= capacity && len(v) > 0 {
		mod.Memory().Write(buf, v) // inside memory: cannot fail
	}
	stack[0] = uint64(uint32(len(v)))
}

// noneIf is a tape entry's Value: -1 for "none" when none is set.
func noneIf(none bool) int64 {
	if none {
		return -1
	}
	return 0
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// logRoom returns how many bytes one more record may have, or -1 when no
// record fits any more in this call.
func (cs *callState) logRoom() int {
	if cs.logFull || cs.logRecords >= cs.rt.cfg.MaxLogRecords {
		return -1
	}
	return cs.rt.cfg.MaxLogBytes - cs.logBytes
}

// drop counts records and bytes that the log limits keep out, and closes
// the log for the rest of the call: once something was dropped, whatever
// follows is dropped too, so that it can be counted without being read.
func (cs *callState) drop(records, n int) {
	if !cs.logFull {
		cs.logFull = true
		cs.fullOnRecords = cs.logRecords >= cs.rt.cfg.MaxLogRecords
	}
	cs.droppedRecords += records
	cs.droppedBytes += n
}

// emit sends one log record, within the call's log limits.
func (cs *callState) emit(level slog.Level, source string, msg []byte) {
	if len(msg) > cs.logRoom() {
		cs.drop(1, len(msg))
		return
	}
	cs.logRecords++
	cs.logBytes += len(msg)
	cs.deliver(call.Record{Level: level, Source: source, Message: cs.mask(string(msg))})
}

// deliver hands a record to the call's log function or the runtime's
// logger, with the export call's context (its trace, when it has one).
func (cs *callState) deliver(rec call.Record) {
	ctx := cs.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	switch {
	case cs.call == nil:
		cs.rt.log.Log(ctx, rec.Level, "plugin: "+rec.Message, "source", rec.Source)
	case cs.call.Log != nil:
		cs.call.Log(rec)
	default:
		cs.call.LogToContext(ctx, cs.rt.log, rec)
	}
}

// flushLogs emits unterminated stdout/stderr lines and a note about what
// the log limits dropped; it runs once at the end of a call.
func (cs *callState) flushLogs() {
	if len(cs.stdoutLine) > 0 {
		cs.emit(slog.LevelInfo, "stdout", cs.stdoutLine)
		cs.stdoutLine = nil
	}
	if len(cs.stderrLine) > 0 {
		cs.emit(slog.LevelWarn, "stderr", cs.stderrLine)
		cs.stderrLine = nil
	}
	if !cs.logFull {
		return
	}
	cfg := cs.rt.cfg
	reason := fmt.Sprintf("log volume limit of %d bytes reached", cfg.MaxLogBytes)
	if cs.fullOnRecords {
		reason = fmt.Sprintf("log record limit of %d records reached", cfg.MaxLogRecords)
	}
	note := fmt.Sprintf("%s: %d records and %d bytes dropped", reason, cs.droppedRecords, cs.droppedBytes)
	if cs.droppedStdio {
		note += " (stdout and stderr past the limit are counted in bytes, not lines)"
	}
	// The note itself always goes out, once.
	cs.deliver(call.Record{Level: slog.LevelWarn, Source: "log", Message: note,
		Dropped: &call.Dropped{Records: cs.droppedRecords, Bytes: cs.droppedBytes, OnRecords: cs.fullOnRecords}})
	cs.logFull, cs.droppedRecords, cs.droppedBytes, cs.droppedStdio = false, 0, 0, false
}

const stderrKeep = 2048

// oomScan is how much of each stderr write is searched for "out of
// memory": runtimes print the message in a short write of its own, and
// searching all of a large write would cost time for every byte.
const oomScan = 1024

// strayLimit is how many writes a guest makes outside any call (which
// should not happen) the runtime logs per stream of an instance.
const strayLimit = 10

func (cs *callState) stderrTail() string { return string(cs.stderr) }

// guestWriter receives a guest's stdout or stderr and turns it into log
// records of the call in progress, a line each. wazero's fd_write calls
// Write once per iovec, so Write looks at the call's context and costs
// nothing per byte once the log limits are reached: a guest can pass
// millions of iovecs of megabytes each.
type guestWriter struct {
	in     *instance
	source string
	// stray counts writes outside a call.
	stray int
}

// Write implements io.Writer.
func (w *guestWriter) Write(p []byte) (int, error) {
	cs := w.in.cur.cs
	if cs == nil {
		// Between calls nothing runs in the guest; be safe anyway, and
		// bounded.
		if w.stray < strayLimit {
			w.stray++
			w.in.pool.rt.log.Warn("plugin output outside a call", "source", w.source, "text", w.in.pool.rt.maskStray(w.in.pool.version, excerpt(p)))
		}
		return len(p), nil
	}
	if cs.ctx != nil {
		stopIfDone(cs.ctx, abi.WASIModule+".fd_write")
	}
	line, level := &cs.stdoutLine, slog.LevelInfo
	if w.source == "stderr" {
		line, level = &cs.stderrLine, slog.LevelWarn
		if room := stderrKeep - len(cs.stderr); room > 0 {
			cs.stderr = append(cs.stderr, p[:min(room, len(p))]...)
		}
		if !cs.outOfMemory && bytes.Contains(p[:min(len(p), oomScan)], []byte("out of memory")) {
			cs.outOfMemory = true
		}
	}
	rest := p
	for len(rest) > 0 {
		room := cs.logRoom() - len(*line) // how much longer the line may grow
		if room < 0 {
			// No line fits any more: drop the pending one and count the
			// rest without splitting it.
			if len(*line) > 0 {
				cs.drop(1, len(*line))
				*line = (*line)[:0]
			}
			cs.drop(0, len(rest))
			cs.droppedStdio = true
			break
		}
		// The line ends within room, or it does not fit: look no further.
		i := bytes.IndexByte(rest[:min(len(rest), room+1)], '\n')
		if i < 0 {
			if len(rest) > room {
				cs.drop(1, len(*line)+len(rest))
				cs.droppedStdio = true
				*line = (*line)[:0]
				break
			}
			*line = append(*line, rest...)
			break
		}
		*line = append(*line, rest[:i]...)
		cs.emit(level, w.source, *line)
		*line = (*line)[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}
