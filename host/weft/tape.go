package weft

import (
	"cmp"

	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"
)

// Recorded attempts (docs/replay.md): the host may keep, for an activity
// attempt, the tape of every answer it gave the guest (plugins/tape), so
// that the attempt can be run again anywhere, answered from the tape. A
// RecordPolicy says which attempts keep theirs, a TapeKey names a tape,
// and a TapeRecord is what the stores list of one.

// RecordMode is the kind of a RecordPolicy.
type RecordMode string

// The record modes. The empty mode is "not said": the policy of the
// enclosing scope applies (a step's the workflow's, a workflow's the
// host's tapes.policy).
const (
	// RecordOff keeps no tape.
	RecordOff RecordMode = "off"
	// RecordFailed keeps the tapes of the attempts that failed (outcome
	// failed or timed_out): the ones someone will want to replay. The
	// host's default.
	RecordFailed RecordMode = "failed"
	// RecordAll keeps every attempt's tape.
	RecordAll RecordMode = "all"
	// RecordSample keeps the tapes of the failed attempts, as
	// RecordFailed does, and of a sample of the others: RecordPolicy.Percent
	// percent of them, chosen by their key (TapeKey.Sampled), so that every
	// node decides alike for the same attempt.
	RecordSample RecordMode = "sample"
)

// RecordPolicy says which activity attempts keep their tape. Its text
// form, in definitions (`record:`) and in the configuration
// (tapes.policy), is "off", "failed", "all", or a percentage such as "5%"
// or "0.5%" (more than 0, at most 100): a sample of all attempts, the
// failed ones always kept. A bare fraction ("0.05") is refused: "5%" says
// the same without the doubt whether 1 means one percent or all. The zero
// RecordPolicy is "not said" (IsZero): use Or to fall back on the
// enclosing scope's.
type RecordPolicy struct {
	// Mode is the policy's kind; empty for "not said".
	Mode RecordMode
	// Percent is RecordSample's share of the attempts that did not fail,
	// in (0, 100]; 0 for the other modes.
	Percent float64
}

// DefaultRecordPolicy is the host's policy when tapes.policy is not set:
// failed attempts only.
var DefaultRecordPolicy = RecordPolicy{Mode: RecordFailed}

// ParseRecordPolicy parses a policy's text form (see RecordPolicy). The
// error matches ErrInvalid and lists the forms accepted.
func ParseRecordPolicy(s string) (RecordPolicy, error) {
	switch RecordMode(s) {
	case RecordOff, RecordFailed, RecordAll:
		return RecordPolicy{Mode: RecordMode(s)}, nil
	}
	num, isPercent := strings.CutSuffix(s, "%")
	f, err := strconv.ParseFloat(num, 64)
	switch {
	case err != nil || strings.Trim(num, "0123456789.") != "":
		return RecordPolicy{}, fmt.Errorf("%w: record policy %q: want off, failed, all or a percentage of attempts such as 5%%", ErrInvalid, s)
	case !isPercent:
		return RecordPolicy{}, fmt.Errorf("%w: record policy %q: a sample is a percentage of attempts: write %s%%", ErrInvalid, s, strconv.FormatFloat(f*100, 'g', -1, 64))
	case math.IsNaN(f) || f <= 0 || f > 100:
		return RecordPolicy{}, fmt.Errorf("%w: record policy %q: a sample is more than 0%% and at most 100%% of attempts (off records none)", ErrInvalid, s)
	}
	return RecordPolicy{Mode: RecordSample, Percent: f}, nil
}

// String returns the policy's text form; "" for the zero policy.
func (p RecordPolicy) String() string {
	if p.Mode == RecordSample {
		return strconv.FormatFloat(p.Percent, 'g', -1, 64) + "%"
	}
	return string(p.Mode)
}

// MarshalText implements encoding.TextMarshaler: the text form.
func (p RecordPolicy) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with
// ParseRecordPolicy; the empty text is the zero policy.
func (p *RecordPolicy) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*p = RecordPolicy{}
		return nil
	}
	q, err := ParseRecordPolicy(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// Check reports a policy that ParseRecordPolicy would not return: an
// unknown mode, a sample's share out of (0, 100], a share on another
// mode. The zero policy is valid. The error matches ErrInvalid.
func (p RecordPolicy) Check() error {
	switch p.Mode {
	case "", RecordOff, RecordFailed, RecordAll:
		if p.Percent != 0 {
			return fmt.Errorf("%w: record policy %q with a share of %g%%: only a sample has one", ErrInvalid, p.Mode, p.Percent)
		}
	case RecordSample:
		if math.IsNaN(p.Percent) || p.Percent <= 0 || p.Percent > 100 {
			return fmt.Errorf("%w: record policy: a sample is more than 0%% and at most 100%% of attempts, got %g%%", ErrInvalid, p.Percent)
		}
	default:
		return fmt.Errorf("%w: record policy %q: want off, failed, all or a percentage of attempts such as 5%%", ErrInvalid, string(p.Mode))
	}
	return nil
}

// IsZero reports whether the policy is "not said".
func (p RecordPolicy) IsZero() bool { return p.Mode == "" }

// Or returns p, or fallback when p is not said: a step's policy Or its
// workflow's, Or the host's.
func (p RecordPolicy) Or(fallback RecordPolicy) RecordPolicy {
	if p.IsZero() {
		return fallback
	}
	return p
}

// Records reports whether an attempt under the policy must be recorded
// while it runs: whether its outcome decides (Keep) or not, the answers
// are only known as they are given. Only off (and the zero policy, which
// callers resolve with Or first) records nothing.
func (p RecordPolicy) Records() bool {
	return p.Mode == RecordFailed || p.Mode == RecordAll || p.Mode == RecordSample
}

// Keep reports whether the tape of the attempt key, which ended with
// outcome, is kept under the policy.
func (p RecordPolicy) Keep(key TapeKey, outcome TapeOutcome) bool {
	switch p.Mode {
	case RecordAll:
		return true
	case RecordFailed:
		return outcome.Failed()
	case RecordSample:
		return outcome.Failed() || key.Sampled(p.Percent)
	}
	return false
}

// TapeOutcome is how a recorded attempt ended: the outcomes of the
// attempts' spans (docs/observability.md).
type TapeOutcome string

// The outcomes of a recorded attempt.
const (
	TapeCompleted TapeOutcome = "completed"
	TapeFailed    TapeOutcome = "failed"
	TapeTimedOut  TapeOutcome = "timed_out"
	TapeCancelled TapeOutcome = "cancelled"
)

// Failed reports whether the outcome is a failure of the attempt (failed
// or timed out), which RecordFailed keeps. A cancelled attempt was
// stopped by the host (a cancel, a lost lease), not by what it did.
func (o TapeOutcome) Failed() bool { return o == TapeFailed || o == TapeTimedOut }

// Limits of tapes.
const (
	// DefaultTapeBytes is the host's cap on one attempt's tape when
	// tapes.max_bytes is not set: 1 MiB.
	DefaultTapeBytes = 1 << 20
	// MaxTapeBytes bounds tapes.max_bytes: 64 MiB.
	MaxTapeBytes = 64 << 20
	// MaxTapeData bounds the stored bytes of one tape (the compressed
	// form of a tape recorded under at most MaxTapeBytes, with room for
	// the encoding's overhead); a store refuses more.
	MaxTapeData = MaxTapeBytes + MaxTapeBytes/4
	// MaxTapeStepPath bounds a TapeKey's StepPath and MaxTapeExec its
	// Exec, in bytes.
	MaxTapeStepPath = 1024
	MaxTapeExec     = 64
)

// TapeKey names the tape of one activity attempt: the instance, the step
// as its history entries name it (HistoryEntry.StepPath, "steps[2].do[0]"),
// the step's execution (the runner's Exec, "e17": the last part of the
// attempts' idempotency key "<instance>/<step id>/<exec>", the same for
// every attempt of one execution and different for each iteration of a
// loop), and the attempt (from 1).
type TapeKey struct {
	InstanceID string `json:"instance_id"`
	StepPath   string `json:"step_path"`
	Exec       string `json:"exec"`
	Attempt    int    `json:"attempt"`
}

// String returns "<instance>/<step path>/<exec>/<attempt>", for errors and
// logs.
func (k TapeKey) String() string {
	return k.InstanceID + "/" + k.StepPath + "/" + k.Exec + "/" + strconv.Itoa(k.Attempt)
}

// Check reports a key the stores cannot keep: an instance id that
// CheckID refuses, an empty or too long step path or exec, a NUL byte in
// either, an attempt below 1. The error matches ErrInvalid.
func (k TapeKey) Check() error {
	if err := CheckID("tape's instance id", k.InstanceID); err != nil {
		return err
	}
	for _, f := range []struct {
		what, v string
		max     int
	}{{"step path", k.StepPath, MaxTapeStepPath}, {"exec", k.Exec, MaxTapeExec}} {
		switch {
		case f.v == "":
			return fmt.Errorf("%w: tape %s: empty %s", ErrInvalid, k, f.what)
		case len(f.v) > f.max:
			return fmt.Errorf("%w: tape %s: %s is %d bytes, more than %d", ErrInvalid, k, f.what, len(f.v), f.max)
		case strings.IndexByte(f.v, 0) >= 0:
			return fmt.Errorf("%w: tape %s: %s holds a NUL byte", ErrInvalid, k, f.what)
		}
	}
	if k.Attempt < 1 {
		return fmt.Errorf("%w: tape %s: attempt %d, want 1 or more", ErrInvalid, k, k.Attempt)
	}
	return nil
}

// Compare orders the keys of one instance as ListTapes lists them: by
// step path, then exec, then attempt, where the numbers inside a path or
// an exec compare as numbers ("steps[2]" before "steps[10]", "e9" before
// "e10"), so that a list reads in the order of the definition and of
// the executions. Keys of different instances compare by instance id
// first.
func (k TapeKey) Compare(o TapeKey) int {
	if c := strings.Compare(k.InstanceID, o.InstanceID); c != 0 {
		return c
	}
	if c := naturalCompare(k.StepPath, o.StepPath); c != 0 {
		return c
	}
	if c := naturalCompare(k.Exec, o.Exec); c != 0 {
		return c
	}
	switch {
	case k.Attempt < o.Attempt:
		return -1
	case k.Attempt > o.Attempt:
		return 1
	}
	return 0
}

// Sampled reports whether the attempt is in a sample of percent percent
// of all attempts: a hash of the key below the share, so that the same
// attempt is in or out of the sample on every node, and a retry of the
// attempt's write decides as the first did.
func (k TapeKey) Sampled(percent float64) bool {
	if percent >= 100 {
		return true
	}
	if percent <= 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(k.String()))
	// The top 53 bits as a fraction in [0, 1).
	return float64(h.Sum64()>>11)/(1<<53) < percent/100
}

// naturalCompare compares a and b byte by byte, except that runs of
// decimal digits compare by their value (then by length, so that "01"
// and "1" are not equal).
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			na, nb := digits(a), digits(b)
			ta, tb := strings.TrimLeft(a[:na], "0"), strings.TrimLeft(b[:nb], "0")
			if len(ta) != len(tb) {
				return cmp.Compare(len(ta), len(tb))
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			if na != nb {
				return cmp.Compare(na, nb)
			}
			a, b = a[na:], b[nb:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits is the length of the run of digits s starts with.
func digits(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// TapeRecord is what the stores keep and list of a tape besides its bytes:
// its key, what it recorded, and how it ended.
type TapeRecord struct {
	Key TapeKey `json:"key"`
	// Size is the stored bytes of the tape (its compressed form); the
	// store sets it.
	Size int `json:"size"`
	// Truncated says that the size cap (tapes.max_bytes) stopped the
	// recording: a replay cannot go past the tape's end.
	Truncated bool `json:"truncated,omitempty"`
	// Outcome is how the attempt ended.
	Outcome TapeOutcome `json:"outcome"`
	// FailureCode is the failure's code when the attempt failed.
	FailureCode string `json:"failure_code,omitempty"`
	// RecordedAt is when the store wrote the tape (its clock); the store
	// sets it.
	RecordedAt time.Time `json:"recorded_at"`
	// Plugin, PluginVersion (the version hash the instance pins) and
	// Activity name the code that ran: a replay loads that very module.
	Plugin        string `json:"plugin"`
	PluginVersion string `json:"plugin_version"`
	Activity      string `json:"activity"`
	// Workflow is the name of the instance's workflow, by which a shadow
	// run may select tapes (TapeQuery.Workflow).
	Workflow string `json:"workflow,omitempty"`
}

// ReplayOutcome is how a replayed attempt compares with its recording.
type ReplayOutcome string

// The outcomes of a replay, from the most alike.
const (
	// ReplaySame: the replay ended as the recording did (the same output
	// bytes, or the same failure code) having asked every call the tape
	// holds.
	ReplaySame ReplayOutcome = "same"
	// ReplayDifferentOutput: the replay completed with an output other
	// than the recording's, or completed where the recording failed.
	ReplayDifferentOutput ReplayOutcome = "different_output"
	// ReplayDiverged: the guest asked the host something other than what
	// the tape holds (ReplayReport.Divergence says where).
	ReplayDiverged ReplayOutcome = "diverged"
	// ReplayFailed: the replay failed where the recording completed, or
	// failed with another code.
	ReplayFailed ReplayOutcome = "failed"
	// ReplayTruncated: the guest went past the end of a tape cut at its
	// size cap: the recording cannot say what came next.
	ReplayTruncated ReplayOutcome = "truncated"
	// ReplayEndedEarly: the replay ended as the recording did, with calls
	// on the tape it never asked.
	ReplayEndedEarly ReplayOutcome = "ended_early"
)

// ReplayReport is what replaying a recorded attempt found: the recording
// and the replay side by side, and how they compare.
type ReplayReport struct {
	// Key names the recorded attempt.
	Key TapeKey `json:"key"`
	// Activity and Plugin name what ran.
	Activity string `json:"activity"`
	Plugin   string `json:"plugin"`
	// RecordedVersion is the version hash the attempt ran; ReplayedVersion
	// the one the replay ran: the same, or a candidate's.
	RecordedVersion string `json:"recorded_version"`
	ReplayedVersion string `json:"replayed_version"`
	// Outcome is how the replay compares with the recording.
	Outcome ReplayOutcome `json:"outcome"`
	// RecordedOutput and Output are the outputs, when each completed.
	RecordedOutput json.RawMessage `json:"recorded_output,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	// RecordedFailure and Failure say how each failed, nil when it
	// completed.
	RecordedFailure *ReplayFailure `json:"recorded_failure,omitempty"`
	Failure         *ReplayFailure `json:"failure,omitempty"`
	// Divergence says where the replay first asked what the tape does
	// not hold; nil unless Outcome is diverged or truncated.
	Divergence *ReplayDivergence `json:"divergence,omitempty"`
	// Left is how many of the tape's calls the replay never asked.
	Left int `json:"left,omitempty"`
	// Duration is how long the replay ran.
	Duration time.Duration `json:"duration"`
	// Fuel is the guest work the replay did, in the instrumentation's
	// fuel (about 64 bytes of guest code run each): unlike Duration, it
	// does not move with the machine's load (docs/replay.md, "Shadow
	// runs").
	Fuel uint64 `json:"fuel,omitempty"`
}

// ReplayFailure is how an attempt failed: its code and message.
type ReplayFailure struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// ReplayDivergence is the first host call of a replay that the tape
// does not hold.
type ReplayDivergence struct {
	// Index is the call's place in the tape, from 0 (the tape's length
	// past its end).
	Index int `json:"index"`
	// Want is the tape's call there, zero past the end; Got what the
	// guest asked.
	Want ReplayCall `json:"want"`
	Got  ReplayCall `json:"got"`
	// Note says it in words.
	Note string `json:"note"`
}

// ReplayCall is a host call as a divergence shows it: its kind (a host
// function, tape.Kind) and what it asked, in the runtime's canonical
// form.
type ReplayCall struct {
	Kind string `json:"kind,omitempty"`
	Ask  string `json:"ask,omitempty"`
}
