package engine_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins"
)

// chattyFlow's step logs on every attempt and fails the first one.
const chattyFlow = `
name: chatty
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["first", "warn:careful"], stdout: "to stdout\n", fail_attempts: 1, pad: "${ input.pad }" }
    retry: { max_attempts: 3, initial_interval: 10ms }
    output: said
output: "${ vars.said }"
`

// attemptData is what TestAttemptHistory reads of an entry's data.
type attemptData struct {
	Input              json.RawMessage `json:"input"`
	InputOmittedBytes  int             `json:"input_omitted_bytes"`
	Output             json.RawMessage `json:"output"`
	OutputOmittedBytes int             `json:"output_omitted_bytes"`
	weft.AttemptLogs
}

func decodeData(t *testing.T, e weft.HistoryEntry) attemptData {
	t.Helper()
	var d attemptData
	if len(e.Data) > 0 {
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatalf("%s entry's data %s: %v", e.Type, e.Data, err)
		}
	}
	return d
}

// TestAttemptHistory: each attempt's history entries keep its input (as
// sent) and output while they are within the engine's AttemptDataLimit and
// their sizes beyond it, and the entry that ends each attempt keeps the
// lines its guest logged, by the log host function and stdout, on the node
// that ran it.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		limit   int
		pad     string
		omitted bool
	}{
		{"within the limit", 1 << 10, "p", false},
		{"over the limit", 1 << 10, strings.Repeat("p", 2<<10), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, AttemptDataLimit: tt.limit}))
			h.save(chattyFlow)
			before := time.Now().UTC()
			inst := h.finish("chatty", map[string]any{"pad": tt.pad})
			if inst.Status != weft.StatusCompleted || string(inst.Output) != `{"attempt":2}` {
				t.Fatalf("instance %s output %s error %+v, want completed by attempt 2", inst.Status, inst.Output, inst.Error)
			}
			sent, _ := json.Marshal(map[string]any{"lines": []string{"first", "warn:careful"}, "stdout": "to stdout\n", "fail_attempts": 1, "pad": tt.pad})
			var scheduled, ended []weft.HistoryEntry
			for _, e := range h.history(inst.ID) {
				switch e.Type {
				case weft.HistoryActivityScheduled:
					scheduled = append(scheduled, e)
				case weft.HistoryActivityCompleted, weft.HistoryActivityFailed:
					ended = append(ended, e)
				}
			}
			if len(scheduled) != 2 || len(ended) != 2 || ended[0].Type != weft.HistoryActivityFailed || ended[1].Type != weft.HistoryActivityCompleted {
				t.Fatalf("attempts: scheduled %v, ended %v; want two, the first failed", types(scheduled), types(ended))
			}
			for i, e := range scheduled {
				d := decodeData(t, e)
				switch {
				case tt.omitted && (d.Input != nil || d.InputOmittedBytes != len(sent)):
					t.Errorf("attempt %d scheduled with input %s, input_omitted_bytes %d; want none and %d", i+1, d.Input, d.InputOmittedBytes, len(sent))
				case !tt.omitted && (string(d.Input) != string(sent) || d.InputOmittedBytes != 0):
					t.Errorf("attempt %d scheduled with input %s, input_omitted_bytes %d; want %s", i+1, d.Input, d.InputOmittedBytes, sent)
				}
			}
			if d := decodeData(t, ended[1]); string(d.Output) != `{"attempt":2}` || d.OutputOmittedBytes != 0 {
				t.Errorf("activity_completed output %s, output_omitted_bytes %d; want {\"attempt\":2}", d.Output, d.OutputOmittedBytes)
			}
			for i, e := range ended {
				attempt := i + 1
				if e.Attempt != attempt || e.Node != "n1" || e.StepPath != "steps[0]" {
					t.Errorf("%s entry of attempt %d: attempt %d, node %q, step %q", e.Type, attempt, e.Attempt, e.Node, e.StepPath)
				}
				d := decodeData(t, e)
				var got []string
				for _, l := range d.Lines {
					got = append(got, l.Level+" "+l.Source+" "+l.Message)
					if l.Time.Before(before) || l.Time.After(time.Now()) {
						t.Errorf("line %q at %s, not during the test", l.Message, l.Time)
					}
				}
				want := []string{
					"info log first (attempt " + strconv.Itoa(attempt) + ")",
					"warn log careful (attempt " + strconv.Itoa(attempt) + ")",
					"info stdout to stdout",
				}
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Errorf("attempt %d logged:\n%s\nwant:\n%s", attempt, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if d.Dropped != nil {
					t.Errorf("attempt %d: logs_dropped %+v, want none", attempt, d.Dropped)
				}
			}
		})
	}
}

// TestAttemptHistoryOff: with AttemptDataLimit 0 (the zero Config) no
// input or output is recorded, but the log lines are.
func TestAttemptHistoryOff(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(chattyFlow)
	inst := h.finish("chatty", map[string]any{"pad": "p"})
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s, error %+v", inst.Status, inst.Error)
	}
	lines := 0
	for _, e := range h.history(inst.ID) {
		d := decodeData(t, e)
		if d.Input != nil || d.Output != nil || d.InputOmittedBytes != 0 || d.OutputOmittedBytes != 0 {
			t.Errorf("%s entry records %s: want no input or output", e.Type, e.Data)
		}
		lines += len(d.Lines)
	}
	if lines != 6 {
		t.Errorf("%d log lines in the history, want 3 for each of 2 attempts", lines)
	}
}

// TestAttemptLogsDropped: what the runtime's log limits kept out of an
// attempt's lines is noted in its entry, as logs_dropped and as the
// runtime's note, the last line.
func TestAttemptLogsDropped(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPlugins(plugins.Config{MaxLogRecords: 2}))
	h.save(`
name: chatty
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["first", "second", "third"], fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 10ms }
`)
	inst := h.finish("chatty", nil)
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s, error %+v", inst.Status, inst.Error)
	}
	ends := 0
	for _, e := range h.history(inst.ID) {
		if e.Type != weft.HistoryActivityCompleted && e.Type != weft.HistoryActivityFailed {
			continue
		}
		ends++
		d := decodeData(t, e)
		// Two lines fit; the third is dropped.
		want := weft.LogsDropped{Records: 1, Bytes: len("third (attempt 1)"), Limit: weft.LogLimitRecords}
		if d.Dropped == nil || *d.Dropped != want {
			t.Errorf("attempt %d: logs_dropped %+v, want %+v", e.Attempt, d.Dropped, want)
		}
		if n := len(d.Lines); n != 3 || !strings.Contains(d.Lines[n-1].Message, "log record limit of 2 records reached") || d.Lines[n-1].Level != "warn" {
			t.Errorf("attempt %d logged %+v: want two lines and the runtime's note", e.Attempt, d.Lines)
		}
	}
	if ends != 2 {
		t.Errorf("%d attempts ended, want 2", ends)
	}
}
