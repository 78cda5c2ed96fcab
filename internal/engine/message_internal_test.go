package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/runner"
)

// TestDecodeMessage: each kind of inbox message becomes the runner input or
// history record it stands for, and one that does not decode is a failure
// with a code or an error, never an empty failure.
func TestDecodeMessage(t *testing.T) {
	t.Parallel()
	msg := func(kind weft.MessageKind, payload string) weft.Message {
		return weft.Message{ID: "m1", Kind: kind, Token: "t1", Payload: json.RawMessage(payload)}
	}
	withOp := func(m weft.Message, op weft.Operation) weft.Message {
		m.Op = &op
		return m
	}
	op := weft.Operation{Actor: "alice", Reason: "by ops", Batch: "b-1", At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	tests := []struct {
		name    string
		m       weft.Message
		input   runner.Input
		note    *weft.HistoryEntry
		wantErr string
		// failCode and failMessage check a ChildFailed by its code and a
		// part of its message.
		failCode, failMessage string
	}{
		{name: "stimulus", m: msg(weft.MessageStimulus, `{"ok":true}`), input: runner.StimulusDelivered{Token: "t1", Payload: map[string]any{"ok": true}}},
		{name: "stimulus without a payload", m: msg(weft.MessageStimulus, ``), input: runner.StimulusDelivered{Token: "t1"}},
		{name: "stimulus not JSON", m: msg(weft.MessageStimulus, `{`), wantErr: "inbox message m1: the stimulus payload"},
		{name: "child completed", m: msg(weft.MessageChild, `{"id":"c1","status":"completed","output":[1]}`), input: runner.ChildCompleted{Token: "t1", Output: []any{1.0}}},
		{name: "child failed", m: msg(weft.MessageChild, `{"id":"c1","status":"failed","error":{"code":"declined","message":"card declined"}}`), failCode: "declined", failMessage: "card declined"},
		{name: "child failed without an error", m: msg(weft.MessageChild, `{"id":"c1","status":"failed"}`), failCode: "failed", failMessage: "child c1 failed"},
		{name: "child cancelled", m: msg(weft.MessageChild, `{"id":"c1","status":"cancelled","error":{"code":"cancelled","message":"by ops"}}`), failCode: "cancelled", failMessage: "child c1 cancelled: by ops"},
		{name: "child end not an object", m: msg(weft.MessageChild, `"done"`), failCode: CodeCorruptMessage, failMessage: "inbox message m1"},
		{name: "child output not JSON", m: msg(weft.MessageChild, `{"id":"c1","status":"completed","output":{"a":}}`), failCode: CodeCorruptMessage},
		{name: "child end without a status", m: msg(weft.MessageChild, `{"id":"c1"}`), failCode: CodeCorruptMessage, failMessage: `status ""`},
		{name: "cancel", m: withOp(msg(weft.MessageCancel, `"by ops"`), op), input: runner.Cancel{Op: op}},
		{name: "cancel without an op", m: msg(weft.MessageCancel, `"by ops"`), input: runner.Cancel{Op: weft.Operation{Reason: "by ops"}}},
		{name: "cancel whose op has no reason", m: withOp(msg(weft.MessageCancel, `"by ops"`), weft.Operation{Actor: "alice"}), input: runner.Cancel{Op: weft.Operation{Actor: "alice", Reason: "by ops"}}},
		{name: "cancel with a reason not a string", m: msg(weft.MessageCancel, `42`), input: runner.Cancel{Op: weft.Operation{Reason: "42"}}},
		{name: "retry", m: withOp(msg(weft.MessageRetry, `{"reason":"by ops","seq":7}`), op), input: runner.Retry{Op: op}},
		{name: "retry without an op", m: msg(weft.MessageRetry, `{"reason":"fixed","seq":7}`), input: runner.Retry{Op: weft.Operation{Reason: "fixed"}}},
		{name: "note", m: msg(weft.MessageNote, `{"type":"late_completion_refused","step_path":"a","attempt":2,"node":"n2"}`),
			note: &weft.HistoryEntry{Type: "late_completion_refused", StepPath: "a", Attempt: 2, Node: "n2", Data: json.RawMessage(`{"type":"late_completion_refused","step_path":"a","attempt":2,"node":"n2"}`)}},
		{name: "note not an object", m: msg(weft.MessageNote, `[]`), wantErr: "inbox message m1: the note"},
		{name: "unknown kind", m: msg("telegram", `{}`), wantErr: `unknown kind "telegram"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeMessage(tt.m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.failCode != "" {
				f, ok := got.input.(runner.ChildFailed)
				if !ok || f.Token != "t1" || f.Failure.Code != tt.failCode || !strings.Contains(f.Failure.Message, tt.failMessage) {
					t.Fatalf("input = %#v, want ChildFailed with code %q and a message containing %q", got.input, tt.failCode, tt.failMessage)
				}
				return
			}
			// Payloads and outputs come as documents: compared decoded.
			switch in := got.input.(type) {
			case runner.StimulusDelivered:
				in.Payload = plainValue(t, in.Payload)
				got.input = in
			case runner.ChildCompleted:
				in.Output = plainValue(t, in.Output)
				got.input = in
			}
			if !reflect.DeepEqual(got.input, tt.input) || !reflect.DeepEqual(got.note, tt.note) {
				t.Fatalf("decodeMessage = %#v, %#v; want %#v, %#v", got.input, got.note, tt.input, tt.note)
			}
		})
	}
}

// TestLateNoteLogs: a refused attempt's note carries its log lines into
// the history entry it becomes, as data.logs and data.logs_dropped, where
// the logs endpoint reads them; a note written before notes carried logs
// reads as one without lines.
func TestLateNoteLogs(t *testing.T) {
	t.Parallel()
	logs := weft.AttemptLogs{
		Lines:   []weft.LogLine{{Time: time.Date(2026, 11, 24, 14, 15, 22, 0, time.UTC), Level: "info", Source: "stdout", Message: "charged"}},
		Dropped: &weft.LogsDropped{Records: 2, Bytes: 30, Limit: weft.LogLimitBytes},
	}
	payload, err := json.Marshal(lateNote{Type: weft.HistoryLateCompletionRefused, Outcome: "completed", StepPath: "steps[0]", Attempt: 1, Node: "n2", Reason: "fenced", AttemptLogs: logs})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		payload string
		want    weft.AttemptLogs
	}{
		{"with logs", string(payload), logs},
		{"written before logs", `{"type":"late_completion_refused","outcome":"completed","step_path":"steps[0]","attempt":1,"node":"n2","reason":"fenced"}`, weft.AttemptLogs{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeMessage(weft.Message{ID: "late:1", Kind: weft.MessageNote, Payload: json.RawMessage(tt.payload)})
			if err != nil {
				t.Fatal(err)
			}
			if got.note == nil || got.note.StepPath != "steps[0]" || got.note.Attempt != 1 || got.note.Node != "n2" {
				t.Fatalf("note = %+v, want the attempt's entry", got.note)
			}
			var back weft.AttemptLogs
			if err := json.Unmarshal(got.note.Data, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tt.want) {
				t.Errorf("the entry's logs = %+v, want %+v", back, tt.want)
			}
		})
	}
}

// plainValue is x decoded when it is a document.
func plainValue(t *testing.T, x any) any {
	t.Helper()
	v, err := jsonv.Plain(x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
