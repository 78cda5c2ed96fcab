package apiv1

import (
	"encoding/json"
	"time"
)

// Recorded attempts (docs/replay.md, docs/http-api.md "Tapes"): the
// summaries of an instance's tapes are readable by every role, as its
// history is; a tape's contents and its replays, which hold the
// attempt's input, output and the host's answers, by admins only.

// TapeKey names one recorded attempt: the step as the history names it
// (step_path), its execution (exec) and the attempt number.
type TapeKey struct {
	InstanceID string `json:"instance_id"`
	StepPath   string `json:"step_path"`
	Exec       string `json:"exec"`
	Attempt    int    `json:"attempt"`
}

// TapeSummary is a recorded attempt without its contents: what a reader
// may see of it, enough to choose one to replay.
type TapeSummary struct {
	Key TapeKey `json:"key"`
	// Size is the tape's stored (compressed) bytes.
	Size int `json:"size"`
	// Truncated says the size cap stopped the recording.
	Truncated bool `json:"truncated"`
	// Outcome is how the attempt ended: completed, failed, timed_out or
	// cancelled.
	Outcome     string    `json:"outcome"`
	FailureCode string    `json:"failure_code,omitempty"`
	RecordedAt  time.Time `json:"recorded_at"`
	// Plugin, PluginVersion and Activity name the code that ran.
	Plugin        string `json:"plugin"`
	PluginVersion string `json:"plugin_version"`
	Activity      string `json:"activity"`
}

// Tape is a recorded attempt with its contents, for admins: what the
// attempt was given and ended with, and every answer the host gave it.
type Tape struct {
	TapeSummary
	// Input is the attempt's input; Output its output when it completed
	// (null otherwise), both JSON documents.
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	// Failure is how it failed, null when it completed.
	Failure *ReplayFailure `json:"failure"`
	// Fresh says the tape begins at the guest instance's start.
	Fresh bool `json:"fresh"`
	// Entries are the host calls in the order the guest made them.
	Entries []TapeEntry `json:"entries"`
}

// TapeEntry is one host call on a tape. Ask and Answer are strings when
// their bytes are UTF-8, else base64 with AskBase64 or AnswerBase64 set,
// so that a reader sees text as text and binary answers (random bytes)
// survive JSON.
type TapeEntry struct {
	Kind         string `json:"kind"`
	Ask          string `json:"ask,omitempty"`
	AskBase64    bool   `json:"ask_base64,omitempty"`
	Answer       string `json:"answer,omitempty"`
	AnswerBase64 bool   `json:"answer_base64,omitempty"`
	Value        int64  `json:"value,omitempty"`
}

// ReplayReport is what replaying a recorded attempt found (the API's
// form of weft.ReplayReport): the recording and the replay side by side.
type ReplayReport struct {
	Key             TapeKey `json:"key"`
	Activity        string  `json:"activity"`
	Plugin          string  `json:"plugin"`
	RecordedVersion string  `json:"recorded_version"`
	ReplayedVersion string  `json:"replayed_version"`
	// Outcome: same, different_output, diverged, failed, truncated or
	// ended_early.
	Outcome         string            `json:"outcome"`
	RecordedOutput  json.RawMessage   `json:"recorded_output,omitempty"`
	Output          json.RawMessage   `json:"output,omitempty"`
	RecordedFailure *ReplayFailure    `json:"recorded_failure,omitempty"`
	Failure         *ReplayFailure    `json:"failure,omitempty"`
	Divergence      *ReplayDivergence `json:"divergence,omitempty"`
	// Left is how many of the tape's calls the replay never asked.
	Left int `json:"left"`
	// DurationMS is how long the replay ran, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Fuel is the guest work the replay did (docs/replay.md, "Shadow
	// runs"), 0 when not measured.
	Fuel uint64 `json:"fuel,omitempty"`
}

// ReplayFailure is how an attempt failed.
type ReplayFailure struct {
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// ReplayDivergence is the first host call of a replay that the tape does
// not hold: its place, the tape's call there and what the guest asked.
type ReplayDivergence struct {
	Index int        `json:"index"`
	Want  ReplayCall `json:"want"`
	Got   ReplayCall `json:"got"`
	Note  string     `json:"note"`
}

// ReplayCall is a host call as a divergence shows it.
type ReplayCall struct {
	Kind string `json:"kind,omitempty"`
	Ask  string `json:"ask,omitempty"`
}
