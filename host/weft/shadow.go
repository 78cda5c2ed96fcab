package weft

import (
	"encoding/json"
	"fmt"
	"time"
)

// Shadow runs (docs/replay.md, "Shadow runs"): a candidate module of a
// plugin replays the plugin's recorded attempts, each answered from its
// tape, next to the version that recorded it, so that an operator sees
// how the candidate would have behaved on that traffic before it goes
// live.

// The bounds of a TapeQuery's Limit.
const (
	// DefaultShadowAttempts is how many recorded attempts a shadow run
	// replays when not told: the newest 100.
	DefaultShadowAttempts = 100
	// MaxShadowAttempts bounds a TapeQuery's Limit: a shadow run replays
	// each attempt twice, in the request that asked for it.
	MaxShadowAttempts = 1000
	// MaxShadowOutput bounds what a shadow report shows of one attempt's
	// outputs and diff, each: 16 KiB. A guest's output may be 1 MiB, and
	// a report of a thousand attempts holding two of them each would be
	// gigabytes; a replay of the one attempt shows it whole.
	MaxShadowOutput = 16 << 10
)

// ReplayNotRun is the outcome of an attempt a shadow run could not replay
// at all: its tape did not decode, its recorded version is gone (for a
// baseline), or the candidate has no such activity. ShadowAttempt.Error
// says which.
const ReplayNotRun ReplayOutcome = "not_run"

// ShadowSpeed compares the guest work of a candidate's replay with the
// recorded version's replay of the same tape.
type ShadowSpeed string

// The speeds. Guest work is counted in fuel (ReplayReport.Fuel), which
// does not depend on the machine's load: two replays of the same module
// on the same tape spend the same fuel, or nearly (a guest runtime that
// reads a live clock may vary it by a fraction of a percent).
const (
	// ShadowAlike: the candidate's fuel is within ShadowSpeedMargin of the
	// baseline's, or within ShadowSpeedFloor.
	ShadowAlike ShadowSpeed = "alike"
	// ShadowSlower: the candidate spent more than ShadowSpeedMargin times
	// the baseline's fuel.
	ShadowSlower ShadowSpeed = "slower"
	// ShadowFaster: the baseline spent more than ShadowSpeedMargin times
	// the candidate's.
	ShadowFaster ShadowSpeed = "faster"
	// ShadowSpeedUnknown: one of the two did not run.
	ShadowSpeedUnknown ShadowSpeed = ""
)

// ShadowSpeedMargin is the ratio of guest work past which a candidate is
// slower or faster than the recorded version: 10%.
const ShadowSpeedMargin = 1.10

// ShadowSpeedFloor is the least difference of guest work that makes a
// candidate slower or faster, in fuel: 1000, about 64 KB of guest code,
// a few microseconds. A call that does little would otherwise be slower
// by a branch or two.
const ShadowSpeedFloor = 1000

// CompareSpeed says how a candidate's fuel compares with a baseline's.
func CompareSpeed(candidate, baseline uint64) ShadowSpeed {
	switch {
	case candidate == 0 || baseline == 0:
		return ShadowSpeedUnknown
	case max(candidate, baseline)-min(candidate, baseline) < ShadowSpeedFloor:
		return ShadowAlike
	case float64(candidate) > float64(baseline)*ShadowSpeedMargin:
		return ShadowSlower
	case float64(baseline) > float64(candidate)*ShadowSpeedMargin:
		return ShadowFaster
	}
	return ShadowAlike
}

// ShadowReport is what a shadow run found: for each recorded attempt it
// replayed, newest first, how the candidate compares with the recording,
// and the sums.
type ShadowReport struct {
	// Plugin is the plugin whose attempts were replayed; CandidateVersion
	// the candidate module's hash.
	Plugin           string `json:"plugin"`
	CandidateVersion string `json:"candidate_version"`
	// Query is what selected the attempts, its Limit filled in.
	Query TapeQuery `json:"query"`
	// Attempts are the replayed attempts, newest first.
	Attempts []ShadowAttempt `json:"attempts"`
	// Summary sums them.
	Summary ShadowSummary `json:"summary"`
	// Duration is how long the shadow run took.
	Duration time.Duration `json:"duration"`
}

// ShadowAttempt is one recorded attempt as a shadow run replayed it.
type ShadowAttempt struct {
	// Key names the recorded attempt; Workflow, Activity and
	// RecordedVersion say what ran; RecordedAt when it was recorded.
	Key             TapeKey   `json:"key"`
	Workflow        string    `json:"workflow,omitempty"`
	Activity        string    `json:"activity"`
	RecordedVersion string    `json:"recorded_version"`
	RecordedAt      time.Time `json:"recorded_at"`
	// Outcome is how the candidate's replay compares with the recording;
	// ReplayNotRun with Error when it could not run.
	Outcome ReplayOutcome `json:"outcome"`
	// Error says why the attempt was not replayed (Outcome not_run).
	Error string `json:"error,omitempty"`
	// RecordedOutput and Output are the outputs, when each completed;
	// Diff is a JSON Patch (RFC 6902) from the recorded output to the
	// candidate's, when both completed with different documents.
	RecordedOutput json.RawMessage `json:"recorded_output,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	Diff           json.RawMessage `json:"diff,omitempty"`
	// OutputsOmitted says that an output or the diff was larger than
	// MaxShadowOutput and is left out of the report.
	OutputsOmitted bool `json:"outputs_omitted,omitempty"`
	// RecordedFailure and Failure say how each failed.
	RecordedFailure *ReplayFailure `json:"recorded_failure,omitempty"`
	Failure         *ReplayFailure `json:"failure,omitempty"`
	// Divergence is the first host call the candidate asked that the tape
	// does not hold, when Outcome is diverged or truncated.
	Divergence *ReplayDivergence `json:"divergence,omitempty"`
	// Baseline is how the recorded version replayed the same tape: same,
	// unless the tape does not replay (it was cut at its cap, or the
	// guest reads something outside the host) — then the candidate's
	// outcome says less.
	Baseline ReplayOutcome `json:"baseline"`
	// Fuel and BaselineFuel are the guest work of the candidate's and the
	// baseline's replays (ReplayReport.Fuel); Speed compares them.
	Fuel         uint64      `json:"fuel,omitempty"`
	BaselineFuel uint64      `json:"baseline_fuel,omitempty"`
	Speed        ShadowSpeed `json:"speed,omitempty"`
	// Duration and BaselineDuration are how long each replay ran: wall
	// time, which moves with the machine's load (Speed does not).
	Duration         time.Duration `json:"duration"`
	BaselineDuration time.Duration `json:"baseline_duration"`
}

// ShadowSummary sums a shadow run's attempts.
type ShadowSummary struct {
	// Attempts is how many were replayed (or tried).
	Attempts int `json:"attempts"`
	// Outcomes counts them by the candidate's outcome.
	Outcomes map[ReplayOutcome]int `json:"outcomes"`
	// Slower, Faster and Alike count them by speed.
	Slower int `json:"slower"`
	Faster int `json:"faster"`
	Alike  int `json:"alike"`
	// Fuel and BaselineFuel are the guest work of the attempts both
	// replays ran.
	Fuel         uint64 `json:"fuel"`
	BaselineFuel uint64 `json:"baseline_fuel"`
}

// Add counts a in s.
func (s *ShadowSummary) Add(a ShadowAttempt) {
	s.Attempts++
	if s.Outcomes == nil {
		s.Outcomes = make(map[ReplayOutcome]int)
	}
	s.Outcomes[a.Outcome]++
	switch a.Speed {
	case ShadowSlower:
		s.Slower++
	case ShadowFaster:
		s.Faster++
	case ShadowAlike:
		s.Alike++
	}
	if a.Speed != ShadowSpeedUnknown {
		s.Fuel += a.Fuel
		s.BaselineFuel += a.BaselineFuel
	}
}

// TapeQuery selects recorded attempts across instances by the plugin
// that ran them (store.Store.FindTapes), newest first: what a shadow run
// replays.
type TapeQuery struct {
	// Plugin is the plugin whose attempts to find; required.
	Plugin string `json:"plugin"`
	// Workflow, when not empty, keeps the attempts of instances of that
	// workflow only.
	Workflow string `json:"workflow,omitempty"`
	// Since, when not zero, keeps the tapes recorded at or after it.
	Since time.Time `json:"since,omitzero"`
	// Limit is how many to find at most, the newest: 1 to
	// MaxShadowAttempts.
	Limit int `json:"limit"`
}

// Check says what is wrong with q, as an error matching ErrInvalid.
func (q TapeQuery) Check() error {
	switch {
	case q.Plugin == "":
		return fmt.Errorf("%w: tape query: no plugin", ErrInvalid)
	case q.Limit < 1 || q.Limit > MaxShadowAttempts:
		return fmt.Errorf("%w: tape query: limit %d is not between 1 and %d", ErrInvalid, q.Limit, MaxShadowAttempts)
	}
	return nil
}
