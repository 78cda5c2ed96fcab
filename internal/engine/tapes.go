package engine

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/plugins/tape"
)

// Recorded attempts (docs/replay.md): an attempt whose step's policy
// records runs with a tape.Recorder; when it ends, and its policy keeps
// the tape of that outcome, the engine writes the recording (a
// tape.Attempt) to the store before the commit that records the
// attempt's end. A tape that cannot be written is logged and counted
// (TapeErrors, TapeObserver), never more: a recording is a diagnosis
// aid, and must not fail the attempt or the instance.

// TapeConfig is the host's record policy and the cap on one tape.
type TapeConfig struct {
	// Policy is what a workflow and its steps fall back on when their
	// definition has no record (definition.Definition.RecordPolicy). The
	// zero policy keeps no tape.
	Policy weft.RecordPolicy
	// MaxBytes caps one attempt's tape (tape.NewRecorder); past it the
	// recording stops and the tape is marked truncated. Defaults to
	// weft.DefaultTapeBytes; at most weft.MaxTapeBytes.
	MaxBytes int
}

// TapeObserver is told of each tape the engine writes: err is nil when
// it was stored. An Observer that implements it counts them (a metric of
// tapes written and of those lost); the engine asserts it once per
// write, only when a tape is kept.
type TapeObserver interface {
	TapeWritten(outcome weft.TapeOutcome, err error)
}

// TapeErrors is how many tapes this engine could not write since it was
// made: each is logged too.
func (e *Engine) TapeErrors() uint64 { return e.tapeErrors.Load() }

// recordPolicy is the record policy of the step that inv is an attempt of.
// The host's policy decides alone when the definition has none: no look
// at the step then.
func (x *execution) recordPolicy(inv runner.Invoke) weft.RecordPolicy {
	host := x.e.cfg.Tapes.Policy
	def := x.prog.Definition()
	if x.recordSaid == 0 {
		x.recordSaid = 1
		if !def.Record.IsZero() || stepsRecord(def.Steps) {
			x.recordSaid = 2
		}
	}
	if x.recordSaid == 1 {
		return host
	}
	return def.RecordPolicy(x.stepOf(inv.Path), host)
}

// stepsRecord reports whether a step of steps, or of the lists inside
// them, has a record of its own.
func stepsRecord(steps []*definition.Step) bool {
	for _, s := range steps {
		switch {
		case s == nil:
		case s.Activity != nil:
			if !s.Activity.Record.IsZero() {
				return true
			}
		case s.If != nil:
			if stepsRecord(s.If.Then) || stepsRecord(s.If.Else) {
				return true
			}
		case s.Foreach != nil:
			if stepsRecord(s.Foreach.Do) {
				return true
			}
		case s.Parallel != nil:
			for _, b := range s.Parallel {
				if stepsRecord(b.Steps) {
					return true
				}
			}
		}
	}
	return false
}

// stepOf is the definition's step at path ("steps[2].do[0]", or
// "steps[2].do#1[0]" in a foreach's second iteration), nil when the path
// names none.
func (x *execution) stepOf(path string) *definition.Step {
	path = withoutIterations(path)
	open := strings.LastIndexByte(path, '[')
	if open < 0 || !strings.HasSuffix(path, "]") {
		return nil
	}
	i, err := strconv.Atoi(path[open+1 : len(path)-1])
	if err != nil {
		return nil
	}
	return x.stepAt(path[:open], i)
}

// withoutIterations is path without its iteration marks ("#1" in
// "steps[2].do#1[0]"): the definition's name of the step that each
// iteration runs.
func withoutIterations(path string) string {
	if !strings.ContainsRune(path, '#') {
		return path
	}
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		if path[i] != '#' {
			b.WriteByte(path[i])
			continue
		}
		for i+1 < len(path) && '0' <= path[i+1] && path[i+1] <= '9' {
			i++
		}
	}
	return b.String()
}

// tapeOutcome is the outcome of the attempt end in.
func tapeOutcome(in runner.Input) (weft.TapeOutcome, bool) {
	switch in := in.(type) {
	case runner.ActivityCompleted:
		return weft.TapeCompleted, true
	case runner.ActivityFailed:
		return weft.TapeOutcome(attemptOutcome(in.Cause)), true
	}
	return "", false
}

// execOf is the exec part of an idempotency key "<instance>/<step>/<exec>".
func execOf(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}

// keepTape writes the recording of the attempt f when its policy keeps
// the tape of the end in. Errors are logged and counted, not returned.
func (x *execution) keepTape(f flight, in runner.Input) {
	if f.tape == nil {
		return
	}
	outcome, ok := tapeOutcome(in)
	if !ok {
		return
	}
	inv := f.inv
	key := weft.TapeKey{InstanceID: x.inst.ID, StepPath: inv.Path, Exec: execOf(inv.IdempotencyKey), Attempt: inv.Attempt}
	if !f.tape.policy.Keep(key, outcome) {
		return
	}
	t := f.tape.rec.Tape()
	a := tape.Attempt{Activity: inv.Activity, Plugin: inv.Plugin, PluginVersion: f.tape.version, Input: f.tape.input, Tape: t}
	rec := weft.TapeRecord{Key: key, Truncated: t.Truncated, Outcome: outcome, Plugin: inv.Plugin, PluginVersion: f.tape.version, Activity: inv.Activity,
		Workflow: x.inst.Workflow}
	switch in := in.(type) {
	case runner.ActivityCompleted:
		a.Output = in.OutputJSON
	case runner.ActivityFailed:
		a.FailureCode, a.FailureMessage = in.Cause.Code, in.Message
		rec.FailureCode = in.Cause.Code
	}
	data, err := a.Marshal()
	if err == nil {
		// Not cancelled with the execution: a run that ends at once
		// (the node shutting down) still has its attempt's tape.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), x.e.cfg.AcquireTimeout)
		err = x.e.store.PutTape(ctx, rec, data)
		cancel()
	}
	if o, ok := x.e.cfg.Observer.(TapeObserver); ok {
		o.TapeWritten(outcome, err)
	}
	if err != nil {
		x.e.tapeErrors.Add(1)
		x.logAt(slog.LevelWarn, "writing an attempt's tape; the attempt goes on without it", "tape", key.String(), "outcome", outcome, "err", err)
	}
}

// recording is what an attempt that records carries until it ends.
type recording struct {
	policy  weft.RecordPolicy
	rec     *tape.Recorder
	version string
	input   []byte
}
