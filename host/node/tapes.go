package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// Recorded attempts (docs/replay.md): the node lists an instance's
// tapes, reads one, and replays one against the version that recorded
// it or a candidate module, to see whether the candidate would have
// behaved alike given the same world.

// Tapes returns the summaries of an instance's recorded attempts, in the
// order of its definition and executions; an error matching
// weft.ErrNotFound when there is no such instance.
func (n *Node) Tapes(ctx context.Context, instanceID string) ([]weft.TapeRecord, error) {
	recs, err := n.store.ListTapes(ctx, instanceID)
	if err != nil {
		return nil, fmt.Errorf("node: listing the tapes of instance %s: %w", instanceID, err)
	}
	return recs, nil
}

// Tape returns the summary and the stored bytes (a tape.Attempt's
// Marshal) of one recorded attempt, or an error matching
// weft.ErrNotFound. The bytes hold the attempt's input, output and the
// host's answers: callers show them to administrators only.
func (n *Node) Tape(ctx context.Context, key weft.TapeKey) (*weft.TapeRecord, []byte, error) {
	if err := key.Check(); err != nil {
		return nil, nil, err
	}
	rec, data, err := n.store.GetTape(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("node: reading tape %s: %w", key, err)
	}
	return rec, data, nil
}

// ReplayAttempt runs a recorded attempt again, answered from its tape,
// and reports how the replay compares with the recording. candidate, when
// not nil, is a module (wasm) to run in place of the recorded version:
// it is loaded into the runtime without being stored or recorded as a
// version of any plugin, and must have the attempt's activity. With
// nil the recorded version runs, read from the blob store when it is not
// loaded. The replay makes no request and reads no secret (the guest
// reads call.ReplaySecret(name)); it runs under the runtime's limits and
// the engine's activity timeout.
//
// Errors are about the replay, not the guest: a tape that does not exist
// (weft.ErrNotFound) or does not decode, a module that does not load, a
// candidate without the activity (weft.ErrInvalid). How the guest fared
// is the report's Outcome.
func (n *Node) ReplayAttempt(ctx context.Context, key weft.TapeKey, candidate []byte) (*weft.ReplayReport, error) {
	_, data, err := n.Tape(ctx, key)
	if err != nil {
		return nil, err
	}
	a, err := tape.UnmarshalAttempt(data)
	if err != nil {
		return nil, fmt.Errorf("node: tape %s: %w", key, err)
	}
	version := a.PluginVersion
	if candidate != nil {
		m, release, err := n.loadCandidate(ctx, candidate)
		if err != nil {
			return nil, fmt.Errorf("node: replaying tape %s: loading the candidate module: %w", key, err)
		}
		defer release()
		if !m.Has(a.Activity) {
			return nil, fmt.Errorf("%w: node: replaying tape %s: the candidate module (version %s) has no activity %q", weft.ErrInvalid, key, m.Version, a.Activity)
		}
		version = m.Version
	} else if _, err := n.rt.Module(ctx, version); err != nil {
		return nil, fmt.Errorf("node: replaying tape %s: loading plugin %s version %s: %w", key, a.Plugin, version, err)
	}

	timeout := n.activityTimeout()
	r, err := Replay(ctx, n.rt, version, a, key, timeout, func(rec call.Record) {
		n.log.Debug("replay: plugin: "+rec.Message, "tape", key.String(), "source", rec.Source, "level", rec.LevelName())
	})
	if err != nil {
		return nil, fmt.Errorf("node: replaying tape %s: %w", key, err)
	}
	n.replayed(metrics.ReplayAsked, r.Outcome)
	n.log.Info("attempt replayed", "tape", key.String(), "version", version, "outcome", r.Outcome, "duration", r.Duration)
	return r, nil
}

// Replay runs the recorded attempt a again on rt's version, answered from
// its tape (no request leaves, no time passes for a sleep), under
// timeout, and reports how it compares with the recording: what
// ReplayAttempt does on a host, and `weft plugin call --replay` offline
// with no host. key names the attempt in the report and the guest's info;
// log, when not nil, receives the guest's log records. The error is
// ctx's when it ended the replay; a guest's failure is in the report.
func Replay(ctx context.Context, rt *plugins.Runtime, version string, a *tape.Attempt, key weft.TapeKey, timeout time.Duration, log func(call.Record)) (*weft.ReplayReport, error) {
	t := a.Tape
	if t == nil {
		t = &tape.Tape{}
	}
	player := tape.NewPlayer(t)
	r := &weft.ReplayReport{
		Key: key, Activity: a.Activity, Plugin: a.Plugin, RecordedVersion: a.PluginVersion, ReplayedVersion: version,
	}
	c := call.Call{
		Activity: a.Activity, Input: a.Input, Timeout: timeout, Replay: player, Log: log, Fuel: &r.Fuel,
		// The guest reads the tape's info document; this one names the
		// call in the host's log.
		Info: abi.Info{InstanceID: key.InstanceID, Plugin: a.Plugin, Activity: a.Activity, Attempt: key.Attempt},
	}
	start := time.Now()
	out, err := rt.Invoke(ctx, version, c)
	r.Duration, r.Left = time.Since(start), player.Left()
	if a.FailureCode != "" {
		r.RecordedFailure = &weft.ReplayFailure{Code: a.FailureCode, Message: a.FailureMessage}
	} else if call.CheckOutput(a.Output) == nil {
		r.RecordedOutput = a.Output
	}
	if err == nil {
		if err = call.CheckOutput(out); err == nil {
			r.Output = out
		} else {
			err = &call.Error{Version: version, Activity: a.Activity, Err: err}
		}
	}
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	classifyReplay(r, a, out, err)
	return r, nil
}

// classifyReplay sets r's Outcome, Failure and Divergence from the
// replay's end (out, err) against the recording a.
func classifyReplay(r *weft.ReplayReport, a *tape.Attempt, out []byte, err error) {
	var d *tape.Divergence
	switch {
	case errors.Is(err, call.ErrDiverged):
		r.Outcome = weft.ReplayDiverged
		if errors.Is(err, tape.ErrTruncated) {
			r.Outcome = weft.ReplayTruncated
		}
		r.Failure = &weft.ReplayFailure{Code: "diverged", Message: err.Error()}
		if errors.As(err, &d) {
			r.Divergence = &weft.ReplayDivergence{
				Index: d.Index,
				Want:  weft.ReplayCall{Kind: string(d.Want.Kind), Ask: string(d.Want.Ask)},
				Got:   weft.ReplayCall{Kind: string(d.GotKind), Ask: string(d.GotAsk)},
				Note:  d.Error(),
			}
		}
		return
	case err != nil:
		r.Failure = &weft.ReplayFailure{Code: classify.Cause(err).Code, Message: err.Error()}
		var ge *call.GuestError
		if errors.As(err, &ge) {
			r.Failure.Message = ge.Message
		}
		if a.FailureCode == "" || a.FailureCode != r.Failure.Code {
			r.Outcome = weft.ReplayFailed
			return
		}
	case a.FailureCode != "" || !bytes.Equal(out, a.Output):
		// It completed where the recording failed, or with other bytes.
		r.Outcome = weft.ReplayDifferentOutput
		return
	}
	// It ended as the recording did: with the same output, or the same
	// failure.
	r.Outcome = weft.ReplaySame
	if r.Left > 0 {
		r.Outcome = weft.ReplayEndedEarly
	}
}
