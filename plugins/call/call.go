// Package call is what a caller of the plugin runtime sees of an activity
// call, without the runtime: the call itself (Call), what its guest leaves
// behind (Record, Request), the heartbeat through which the caller watches
// and cancels it (Heartbeat), and the errors that say how it failed
// (Error, GuestError and the sentinels). The engine, the retry classifier
// and the metrics build and read calls with it alone, so that none of them
// links wazero; plugins.Runtime.Invoke runs them.
package call

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

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

// LogTo writes rec to log as LogToContext does, without a context: the
// record carries no trace.
func (c *Call) LogTo(log *slog.Logger, rec Record) { c.LogToContext(context.Background(), log, rec) }

// LogToContext writes rec to log as the runtime writes the records of a
// call that has no Log function: with the attributes that find the
// attempt among a node's records (abi/README.md §4), and logged with ctx,
// the call's, so that a logger wrapped by tracing.LogHandler adds the
// attempt span's trace_id and span_id: a guest's line leads to its
// attempt's trace.
func (c *Call) LogToContext(ctx context.Context, log *slog.Logger, rec Record) {
	if !log.Enabled(ctx, rec.Level) {
		return
	}
	info := &c.Info
	log.Log(ctx, rec.Level, "plugin: "+rec.Message, "source", rec.Source,
		"plugin", info.Plugin, "activity", c.Activity, "instance", info.InstanceID, "workflow", info.Workflow,
		"step", info.StepID, "attempt", info.Attempt)
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

// Dropped is what a call's log limits (plugins.Config's MaxLogRecords
// and MaxLogBytes) kept out of its log.
type Dropped struct {
	Records, Bytes int
	// OnRecords is true when the record limit was reached first, false
	// for the byte limit.
	OnRecords bool
}

// CheckOutput returns nil when out is a JSON document, and otherwise an
// error matching ErrProtocol that names the violation. The runtime hands
// outputs back unparsed (every consumer decodes them anyway); a consumer
// that does not decode one checks it with this.
func CheckOutput(out []byte) error {
	if json.Valid(out) {
		return nil
	}
	const max = 64
	if len(out) > max {
		return fmt.Errorf("%w: output is not a JSON document: %q… (%d bytes)", ErrProtocol, out[:max], len(out))
	}
	return fmt.Errorf("%w: output is not a JSON document: %q", ErrProtocol, out)
}
