package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
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

// jsonLogger is a logger as a traced node's: JSON lines into buf, at info
// and above, wrapped by tracing.LogHandler.
func jsonLogger(buf *logtest.Buffer) *slog.Logger {
	return slog.New(tracing.LogHandler(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// logLine is what TestLogLinesCarryTrace reads of a JSON log line.
type logLine struct {
	Msg      string `json:"msg"`
	Node     string `json:"node"`
	Instance string `json:"instance"`
	Workflow string `json:"workflow"`
	Step     string `json:"step"`
	Attempt  int    `json:"attempt"`
	TraceID  string `json:"trace_id"`
	SpanID   string `json:"span_id"`
}

// linesOf decodes the JSON lines in buf that name instance id.
func linesOf(t *testing.T, buf *logtest.Buffer, id string) []logLine {
	t.Helper()
	var out []logLine
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if l.Instance == id {
			out = append(out, l)
		}
	}
	return out
}

// TestLogLinesCarryTrace: with tracing on and the node's logger wrapped
// by tracing.LogHandler, every line about an instance — its guest's lines
// from a failing attempt and its retry, the takeover by another node
// after the first stopped mid-attempt, the recovery that queued it —
// carries the instance's id and workflow, and the trace_id and span_id of
// a span of the instance's trace: a guest's line its attempt's span, the
// takeover the execution's.
func TestLogLinesCarryTrace(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	var buf logtest.Buffer
	trA, expA := newTracer(t)
	trB, expB := newTracer(t)
	node := func(name string, tr *tracing.Tracer) (*engine.Engine, func() func()) {
		e, err := engine.New(engine.Config{
			NodeID: name, LockTTL: lockTTL, RecoveryInterval: 50 * time.Millisecond, TimerInterval: 10 * time.Millisecond,
			Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond},
			Tracer:    tr, Logger: jsonLogger(&buf),
		}, c.store, local.New(local.Config{}), memqueue.New(100), c.rt)
		if err != nil {
			t.Fatal(err)
		}
		return e, func() func() {
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = e.Run(ctx); close(done) }()
			stop := func() { cancel(); <-done }
			t.Cleanup(stop)
			return stop
		}
	}
	a, runA := node("node-a", trA)
	if _, _, err := a.SaveDefinition(ctx, []byte(`
name: chatter
persistence: activity
steps:
  - id: talk
    activity: kit.log
    input: { lines: ["first", "warn:careful"], fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 10ms }
  - { id: work, activity: kit.work, input: { ms: 600, beat_ms: 50 } }
`)); err != nil {
		t.Fatal(err)
	}
	stopA := runA()
	inst, _, err := a.Start(ctx, "chatter", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Both attempts of talk logged on A, and it holds the instance's
	// lease (work runs, or is about to): A stops, B takes it over.
	c.waitStored(inst.ID, "talk's attempts logged on A, its lease A's", func(in *weft.Instance) bool {
		n := 0
		for _, l := range linesOf(t, &buf, inst.ID) {
			if strings.HasPrefix(l.Msg, "plugin: careful") {
				n++
			}
		}
		return n == 2 && in.Status == weft.StatusRunning && in.Lease.Node == "node-a"
	})
	stopA()
	b, runB := node("node-b", trB)
	runB()
	if done := c.waitFinished(b, inst.ID); done.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", done.Status, done.Error)
	}
	_, sc := storedTrace(t, c.store.GetInstance, inst.ID)

	// The spans the lines name are exported once they end (the instance's
	// when it finished, B's last turn as it returns): poll for all of them.
	lines := linesOf(t, &buf, inst.ID)
	for _, l := range lines {
		if l.TraceID == "" || l.SpanID == "" {
			t.Fatalf("line %q on %s has trace_id %q span_id %q: want both", l.Msg, l.Node, l.TraceID, l.SpanID)
		}
	}
	spans := map[string]tracetest.SpanStub{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		clear(spans)
		for _, s := range append(expA.GetSpans(), expB.GetSpans()...) {
			if s.SpanContext.TraceID() == sc.TraceID() {
				spans[s.SpanContext.SpanID().String()] = s
			}
		}
		missing := ""
		for _, l := range lines {
			if _, ok := spans[l.SpanID]; !ok {
				missing = l.Msg + " (span " + l.SpanID + ")"
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("line %q names no span of the instance's trace %s within 30s", missing, sc.TraceID())
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}

	var guest, takeover int
	for _, l := range lines {
		if l.TraceID != sc.TraceID().String() || l.Workflow != "chatter" {
			t.Errorf("line %q on %s: trace_id %q, workflow %q; want %s, chatter", l.Msg, l.Node, l.TraceID, l.Workflow, sc.TraceID())
		}
		s := spans[l.SpanID]
		switch {
		case strings.HasPrefix(l.Msg, "plugin: "):
			guest++
			if s.Name != tracing.SpanAttempt || attr(s, "weft.attempt").AsInt64() != int64(l.Attempt) || attr(s, "weft.step.id").String() != l.Step {
				t.Errorf("guest line %q (step %s, attempt %d) under span %s %v, want its attempt's", l.Msg, l.Step, l.Attempt, s.Name, s.Attributes)
			}
		case strings.HasPrefix(l.Msg, "taking over"):
			takeover++
			if l.Node != "node-b" || s.Name != tracing.SpanExecution || !hasEvent(s, "takeover") {
				t.Errorf("takeover line on %s under span %s %v, want B's turn that took the instance over", l.Node, s.Name, s.Events)
			}
		}
	}
	if guest < 4 || takeover != 1 {
		t.Errorf("%d guest lines, %d takeover lines about %s; want 4 (two by each attempt of talk) and 1:\n%s", guest, takeover, inst.ID, buf.String())
	}
}
