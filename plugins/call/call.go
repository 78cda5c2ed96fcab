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
	"github.com/weftworks/weft/plugins/tape"
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

	// Record, when not nil, receives every answer of the host that
	// depends on the world, in the order the guest asked (docs/replay.md):
	// the info document, the last heartbeat, configuration values, which
	// secrets it read (their names, never their values), heartbeat and
	// cancellation answers, each HTTP request's response or failure (with
	// secret-looking header values and the call's secrets masked), the
	// clocks, random bytes and what poll_oneoff returned. With nil nothing
	// is recorded, at the cost of a nil check per host call. The call
	// runs on whatever instance the pool gives, as without Record, so
	// recording costs only the entries; when that instance was made for
	// the call, its initialisation is on the tape too and the tape is
	// Fresh (see RecordExact).
	Record *tape.Recorder
	// RecordExact makes a call that records run on a new instance whose
	// initialisation is on the tape too (a Fresh tape), at the cost of
	// an instantiation (milliseconds for a Go guest): a guest's state
	// from its start and its earlier calls (a runtime's random seeds,
	// the clock readings its timers count from, its heap) is part of
	// what it observes, and only a tape that begins at the instance's
	// start holds all of it, so that a replay runs the call again byte
	// for byte whatever the guest. Without it, a replay initialises a
	// new instance live and answers the call from the tape, which most
	// guests follow exactly; one that does not is reported with
	// tape.ErrCarriedState. Ignored without Record.
	RecordExact bool
	// Replay, when not nil, answers those host calls from a tape instead
	// of the world: no network, no real clock, no sleep, no rate limiter,
	// no grants (the tape's requests were granted when recorded, and
	// nothing leaves the host). It runs on a new instance: initialised
	// from the tape when the tape is Fresh, and otherwise live (the real
	// clocks and random bytes, nothing compared with or taken from the
	// tape), the tape answering the call itself. The guest runs in the same sandbox, under
	// the same deadline (Timeout and ctx); its info document is the
	// tape's, so it reads the recorded deadline. The first host call that
	// differs from the tape stops the guest with an error matching
	// ErrDiverged (and tape.ErrCarriedState too when the tape is not
	// Fresh: see RecordExact). A guest that returns with entries left on the tape
	// "ended early": the call succeeds, and Replay.Left() is above zero.
	Replay *tape.Player
	// ReplaySecrets, when not nil, gives a replayed guest the value of
	// the secret it reads; with nil, or when it returns false, the guest
	// reads ReplaySecret(name), since a tape never holds a secret's value.
	ReplaySecrets func(name string) ([]byte, bool)
	// Fuel, when not nil, has Invoke add the guest work the call did, in
	// fuel units of about 64 bytes of guest code run each (the
	// instrumentation's counter, package instrument): the same for every
	// run of one module on the same answers, whatever the machine's load,
	// so that replays and shadow runs can say whether a candidate version
	// is slower or faster than the recorded one. It counts weft_invoke,
	// not the instance's initialisation nor the request's allocation,
	// and is added whether the call succeeds or fails. With nil nothing is
	// measured, at the cost of a nil check. Calls in flight at once must
	// not share one counter.
	Fuel *uint64
}

// replaySecretPrefix starts the value a replayed guest reads for a secret
// that Call.ReplaySecrets does not give.
const replaySecretPrefix = "replay:secret:"

// ReplaySecret is the value a replayed guest reads for the secret name
// when Call.ReplaySecrets does not give one: "replay:secret:" and the
// name. The runtime masks it as it masks a secret's value, so that an
// output that held a masked secret when recorded holds it masked again.
func ReplaySecret(name string) string { return replaySecretPrefix + name }

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
