package runner_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/runner"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestScripts drives instances event by event through the files in
// testdata and compares the exact action traces; testdata/README.md
// describes the format. `go test ./internal/runner -rewrite` writes what the
// runner does now as the expected outputs.
func TestScripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata (%v)", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			datadriven.RunTest(t, path, new(script).run)
		})
	}
}

// script is one file's instance: define compiles a definition and starts
// an instance of it; apply feeds it one event and prints the actions, one
// per line, history records left out.
type script struct {
	p  *runner.Program
	st *runner.State
	// issued lists the tokens the instance handed out, in order, for
	// apply's token= to name them.
	issued []issued
	// history is every record's type, in order, and records every
	// record.
	history []string
	records []runner.Record
}

// issued is a token handed out by an action: its kind ("invoke", "timer",
// "bookmark", "child") and label (an invoke's or a child's input, a
// bookmark's event/key; none for a timer).
type issued struct{ kind, label, token string }

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd != "define" && s.p == nil {
		d.Fatalf(t, "%s before define", d.Cmd)
	}
	// Only apply and records take arguments, and only apply and define an
	// input: a stray one would be silently ignored otherwise.
	if d.Cmd != "apply" && d.Cmd != "records" && len(d.CmdArgs) > 0 {
		d.Fatalf(t, "%s takes no arguments", d.Cmd)
	}
	if d.Cmd != "apply" && d.Cmd != "define" && d.Input != "" {
		d.Fatalf(t, "%s takes no input", d.Cmd)
	}
	switch d.Cmd {
	case "define":
		def, err := definition.Load([]byte(d.Input), nil)
		if err != nil {
			d.Fatalf(t, "definition: %v", err)
		}
		s.p = runner.Compile(def)
		s.reset()
		return "ok"
	case "reset":
		s.reset()
		return "ok"
	case "apply":
		return s.apply(t, d)
	case "status":
		return string(s.st.Status)
	case "error":
		e := s.st.Error
		if e == nil {
			return "none"
		}
		out := fmt.Sprintf("code=%s message=%q step=%q", e.Code, e.Message, e.Step)
		if e.Details != nil {
			out += " details=" + string(e.Details)
		}
		return out
	case "reload":
		// The store keeps the state as JSON: what Apply does next must not
		// depend on anything the round trip loses.
		b, err := json.Marshal(s.st)
		if err != nil {
			d.Fatalf(t, "marshal state: %v", err)
		}
		var back runner.State
		if err := json.Unmarshal(b, &back); err != nil {
			d.Fatalf(t, "unmarshal state: %v", err)
		}
		s.st = &back
		return "ok"
	case "history":
		if len(s.history) == 0 {
			return "none"
		}
		return strings.Join(s.history, "\n")
	case "records":
		if len(d.CmdArgs) != 1 || len(d.CmdArgs[0].Vals) > 0 {
			d.Fatalf(t, "records wants one history type")
		}
		var out []string
		for _, r := range s.records {
			if string(r.Type) == d.CmdArgs[0].Key {
				data, err := json.Marshal(r.Data)
				if err != nil {
					d.Fatalf(t, "record %s: %v", r.Type, err)
				}
				line := r.Path + " " + string(data)
				if r.Actor != "" {
					line += " by " + r.Actor
				}
				out = append(out, line)
			}
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	}
	d.Fatalf(t, "unknown directive %q", d.Cmd)
	return ""
}

// reset starts a new instance of the defined program.
func (s *script) reset() {
	s.st, s.issued, s.history, s.records = &runner.State{}, nil, nil, nil
}

// apply runs `apply at=D EVENT [token=REF]` with the event's fields as JSON
// input, and returns the trace.
func (s *script) apply(t *testing.T, d *datadriven.TestData) string {
	var (
		at        time.Duration
		name, ref string
		hasAt     bool
	)
	for _, arg := range d.CmdArgs {
		switch {
		case arg.Key == "at":
			arg.ExpectNumVals(t, 1)
			arg.Scan(t, 0, &at)
			hasAt = true
		case arg.Key == "token":
			ref = arg.SingleVal(t)
		case len(arg.Vals) == 0 && name == "":
			name = arg.Key
		default:
			d.Fatalf(t, "apply: unexpected argument %s", arg)
		}
	}
	if !hasAt || name == "" {
		d.Fatalf(t, "apply wants at=DURATION and an event")
	}
	// fields decodes the input into v, refusing fields v does not have so
	// that a misspelt one is not silently zero.
	fields := func(v any) {
		if d.Input == "" {
			return
		}
		dec := json.NewDecoder(strings.NewReader(d.Input))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			d.Fatalf(t, "%s fields: %v", name, err)
		}
		if dec.More() {
			d.Fatalf(t, "%s fields: more than one JSON value", name)
		}
	}
	// Only the events that answer an operation name its token.
	switch answers := name != "start" && name != "cancel" && name != "recover" && name != "retry-instance" && name != "pause" && name != "resume" && name != "reset-instance"; {
	case answers && ref == "":
		d.Fatalf(t, "%s wants token=REF", name)
	case !answers && ref != "":
		d.Fatalf(t, "%s takes no token", name)
	}
	token := func() string { return s.token(t, d, ref) }
	var ev runner.Input
	switch name {
	case "start":
		var f struct {
			Input json.RawMessage `json:"input"`
		}
		fields(&f)
		ev = runner.Start{Input: f.Input}
	case "activity-completed":
		var f struct {
			Output   any             `json:"output"`
			Requests json.RawMessage `json:"requests"`
		}
		fields(&f)
		ev = runner.ActivityCompleted{Token: token(), Output: f.Output, Requests: f.Requests}
	case "activity-failed":
		var f struct {
			Failure struct {
				Kind      retry.Kind `json:"kind"`
				Code      string     `json:"code"`
				Retryable bool       `json:"retryable"`
			} `json:"failure"`
			Message       string          `json:"message"`
			Details       json.RawMessage `json:"details"`
			LastHeartbeat json.RawMessage `json:"last_heartbeat"`
			Requests      json.RawMessage `json:"requests"`
		}
		fields(&f)
		if f.Failure.Kind == "" {
			d.Fatalf(t, "activity-failed wants failure.kind")
		}
		// A guest's failure says its code and retryability; any other
		// kind has them from retry.Of, as the engine's classification
		// gives them.
		cause := retry.Cause{Kind: f.Failure.Kind, Code: f.Failure.Code, Retryable: f.Failure.Retryable}
		if f.Failure.Kind != retry.KindActivity {
			if f.Failure.Code != "" || f.Failure.Retryable {
				d.Fatalf(t, "a %q failure takes its code and retryability from retry.Of", f.Failure.Kind)
			}
			cause = retry.Of(f.Failure.Kind)
		}
		ev = runner.ActivityFailed{Token: token(), Cause: cause, Message: f.Message, Details: f.Details, LastHeartbeat: f.LastHeartbeat, Requests: f.Requests}
	case "timer-fired":
		fields(&struct{}{})
		ev = runner.TimerFired{Token: token()}
	case "stimulus-delivered":
		var f struct {
			Payload any `json:"payload"`
		}
		fields(&f)
		ev = runner.StimulusDelivered{Token: token(), Payload: f.Payload}
	case "child-completed":
		var f struct {
			Output any `json:"output"`
		}
		fields(&f)
		ev = runner.ChildCompleted{Token: token(), Output: f.Output}
	case "child-failed":
		var f struct {
			Failure weft.Failure `json:"failure"`
		}
		fields(&f)
		ev = runner.ChildFailed{Token: token(), Failure: f.Failure}
	case "cancel":
		var f opFields
		fields(&f)
		ev = runner.Cancel{Op: f.op()}
	case "retry-instance":
		var f opFields
		fields(&f)
		ev = runner.Retry{Op: f.op()}
	case "reset-instance":
		var f struct {
			opFields
			Step string         `json:"step"`
			Vars map[string]any `json:"vars"`
		}
		fields(&f)
		ev = runner.Reset{Step: f.Step, Vars: f.Vars, Op: f.op()}
	case "pause":
		var f opFields
		fields(&f)
		ev = runner.Pause{Op: f.op()}
	case "resume":
		var f opFields
		fields(&f)
		ev = runner.Resume{Op: f.op()}
	case "activity-deferred":
		var f struct {
			Until  time.Duration `json:"until"`
			Reason string        `json:"reason"`
			Key    string        `json:"key"`
		}
		fields(&f)
		ev = runner.ActivityDeferred{Token: token(), Until: t0.Add(f.Until), Reason: f.Reason, Key: f.Key}
	case "recover":
		// The keys are token references too: the tokens of the attempts
		// that were lost.
		var f struct {
			Heartbeats map[string]json.RawMessage `json:"heartbeats"`
		}
		fields(&f)
		hb := map[string]json.RawMessage{}
		for r, details := range f.Heartbeats {
			hb[s.token(t, d, r)] = details
		}
		ev = runner.Recover{Heartbeats: hb}
	default:
		d.Fatalf(t, "unknown event %q", name)
	}
	now := t0.Add(at)
	// A fixed draw keeps retry delays the same from run to run.
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: now, Rand: func() float64 { return 0.5 }, VarsLimit: varsLimit}, ev)
	return s.trace(acts, now)
}

// opFields are the fields of an operator's action (cancel,
// retry-instance): its weft.Operation, with the time it was asked for as a
// duration from the test's epoch (none when absent).
// varsLimit is the scripts' Context.VarsLimit: small, so that a script
// can go past it.
const varsLimit = 200

type opFields struct {
	Reason      string         `json:"reason"`
	Actor       string         `json:"actor"`
	Batch       string         `json:"batch"`
	RequestedAt *time.Duration `json:"requested_at"`
}

func (f opFields) op() weft.Operation {
	op := weft.Operation{Actor: f.Actor, Reason: f.Reason, Batch: f.Batch}
	if f.RequestedAt != nil {
		op.At = t0.Add(*f.RequestedAt)
	}
	return op
}

// trace prints the actions one per line, remembers the tokens they hand
// out and the history they record; "ok" when it prints no line.
func (s *script) trace(acts []runner.Action, now time.Time) string {
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case runner.Invoke:
			v, _ := jsonv.Plain(a.Input) // a document read back: its value names it
			s.issue("invoke", fmt.Sprint(v), a.Token)
			in, _ := json.Marshal(a.Input)
			line := fmt.Sprintf("invoke %s.%s #%d %s key=%s", a.Plugin, a.Activity, a.Attempt, in, a.IdempotencyKey)
			if a.LastHeartbeat != nil {
				line += " last=" + string(a.LastHeartbeat)
			}
			if a.Slot != nil {
				line += fmt.Sprintf(" slot=%s/%d/%s", a.Slot.Key, a.Slot.Limit, a.Slot.Holder)
			}
			if a.Rate != nil {
				line += fmt.Sprintf(" rate=%s/%s", a.Rate.Key, a.Rate.Limit)
			}
			if a.Resumed != "" {
				line += " resumed=" + a.Resumed
			}
			out = append(out, line)
		case runner.ReleaseSlot:
			out = append(out, fmt.Sprintf("release-slot %s/%d/%s", a.Key, a.Limit, a.Holder))
		case runner.ArmTimer:
			s.issue("timer", "", a.Token)
			out = append(out, "timer +"+a.Due.Sub(now).String())
		case runner.CancelTimer:
			out = append(out, "cancel-timer")
		case runner.CreateBookmark:
			s.issue("bookmark", a.Event+"/"+a.Key, a.Token)
			out = append(out, "bookmark "+a.Event+"/"+a.Key)
		case runner.RemoveBookmark:
			out = append(out, "remove-bookmark")
		case runner.StartChild:
			s.issue("child", fmt.Sprint(a.Input), a.Token)
			in, _ := json.Marshal(a.Input)
			out = append(out, "child "+a.Workflow+" "+string(in))
		case runner.CancelActivity:
			out = append(out, "cancel-activity")
		case runner.CancelChild:
			out = append(out, "cancel-child")
		case runner.Persist:
			out = append(out, "persist")
		case runner.Finish:
			if a.Error != nil {
				out = append(out, fmt.Sprintf("finish %s %s: %s", a.Status, a.Error.Code, a.Error.Message))
			} else {
				o, _ := json.Marshal(a.Output)
				out = append(out, fmt.Sprintf("finish %s %s", a.Status, o))
			}
		case runner.Record:
			s.history = append(s.history, string(a.Type))
			s.records = append(s.records, a)
			switch a.Type {
			case weft.HistoryStepStarted, weft.HistoryStepCompleted, weft.HistoryStepFailed:
				// The typed field and the entry's data name the same step.
				if id, _ := a.Data["step"].(string); a.Step == "" || a.Step != id {
					out = append(out, fmt.Sprintf("BUG: %s record at %s: Step %q, data's step %q", a.Type, a.Path, a.Step, id))
				}
			}
			if a.Type == "event_refused" {
				out = append(out, "refused")
			}
		}
	}
	if len(out) == 0 {
		return "ok"
	}
	return strings.Join(out, "\n")
}

func (s *script) issue(kind, label, token string) {
	s.issued = append(s.issued, issued{kind: kind, label: label, token: token})
}

// token resolves a reference to a token the instance handed out:
//
//	KIND[:LABEL][#N]   the N-th (from 1) token of that kind, and label if
//	                   given; without #N the latest
//	literal:TOKEN      TOKEN itself, for one the instance never handed out
func (s *script) token(t *testing.T, d *datadriven.TestData, ref string) string {
	if tok, ok := strings.CutPrefix(ref, "literal:"); ok {
		return tok
	}
	sel, nth := ref, 0
	if i := strings.LastIndexByte(ref, '#'); i >= 0 {
		n, err := strconv.Atoi(ref[i+1:])
		if err != nil || n < 1 {
			d.Fatalf(t, "token %q: #N must count from 1", ref)
		}
		sel, nth = ref[:i], n
	}
	kind, label, byLabel := strings.Cut(sel, ":")
	switch kind {
	case "invoke", "timer", "bookmark", "child":
	default:
		d.Fatalf(t, "token %q: no kind invoke, timer, bookmark or child (literal:TOKEN for a made-up one)", ref)
	}
	var match []string
	for _, is := range s.issued {
		if is.kind == kind && (!byLabel || is.label == label) {
			match = append(match, is.token)
		}
	}
	switch {
	case len(match) == 0 || nth > len(match):
		d.Fatalf(t, "token %q: the instance handed out %d such", ref, len(match))
	case nth == 0:
		return match[len(match)-1]
	}
	return match[nth-1]
}

// TestProgramPlugins: a program lists each plugin its activities use once,
// in the order of first use, from every branch of the definition.
func TestProgramPlugins(t *testing.T) {
	def, err := definition.Load([]byte(`
name: p
steps:
  - { id: a, activity: kit.echo }
  - if: "${ input.x }"
    id: choose
    then: [{ id: b, activity: text.upper }]
    else: [{ id: c, activity: kit.upper }]
  - id: each
    foreach: "${ input.items }"
    as: item
    do: [{ id: d, activity: tally.add }]
  - id: both
    parallel:
      - steps: [{ id: e, activity: webhook.send }]
      - steps: [{ id: f, activity: kit.echo }]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := runner.Compile(def).Plugins()
	want := []string{"kit", "text", "tally", "webhook"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Plugins() = %v, want %v", got, want)
	}
}

// TestAttemptData: an attempt's input and output go into its records while
// they are within Context.AttemptDataLimit, and only their sizes beyond it
// (never a cut document); a limit of 0 records neither. Its log lines go
// into the record of its end, completed or failed.
func TestAttemptData(t *testing.T) {
	t.Parallel()
	def, err := definition.Load([]byte(`
name: p
steps:
  - { id: a, activity: kit.echo, input: { text: "${ input.text }" }, retry: { max_attempts: 2, initial_interval: 1s } }
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := runner.Compile(def)
	const input = `{"text":"hello"}` // 16 bytes, as the runner encodes the step's input
	output := json.RawMessage(`{"text": "HELLO"}`)
	logs := weft.AttemptLogs{
		Lines:   []weft.LogLine{{Time: t0, Level: "info", Source: "log", Message: "working"}},
		Dropped: &weft.LogsDropped{Records: 3, Bytes: 40, Limit: weft.LogLimitRecords},
	}
	tests := []struct {
		name  string
		limit int
		// want are the attempt fields of activity_scheduled and
		// activity_completed; absent ones must be absent.
		wantIn, wantOut map[string]any
	}{
		{"off", 0, map[string]any{}, map[string]any{}},
		{"within", 1 << 10, map[string]any{"input": json.RawMessage(input)}, map[string]any{"output": output}},
		{"at the limit", len(input), map[string]any{"input": json.RawMessage(input)}, map[string]any{"output_omitted_bytes": len(output)}},
		{"over", 8, map[string]any{"input_omitted_bytes": len(input)}, map[string]any{"output_omitted_bytes": len(output)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := &runner.State{}
			c := runner.Context{InstanceID: "i1", Now: t0, Rand: func() float64 { return 0.5 }, AttemptDataLimit: tt.limit}
			acts := p.Apply(st, c, runner.Start{Input: json.RawMessage(input)})
			inv := only[runner.Invoke](t, acts)
			if tt.limit > 0 && string(inv.InputJSON) != input {
				t.Errorf("Invoke.InputJSON = %s, want %s: the bytes the record has are the bytes sent", inv.InputJSON, input)
			}
			checkFields(t, record(t, acts, weft.HistoryActivityScheduled), tt.wantIn)

			// The first attempt fails with logs, the second completes.
			acts = p.Apply(st, c, runner.ActivityFailed{Token: inv.Token, Cause: retry.Of(retry.KindTimeout), Message: "slow", Logs: logs})
			failed := record(t, acts, weft.HistoryActivityFailed)
			if fmt.Sprint(failed.Data["logs"]) != fmt.Sprint(logs.Lines) || failed.Data["logs_dropped"] != logs.Dropped {
				t.Errorf("activity_failed data = %v, want the attempt's logs", failed.Data)
			}
			acts = p.Apply(st, c, runner.TimerFired{Token: only[runner.ArmTimer](t, acts).Token})
			inv = only[runner.Invoke](t, acts)
			checkFields(t, record(t, acts, weft.HistoryActivityScheduled), tt.wantIn)
			var out any
			_ = json.Unmarshal(output, &out)
			acts = p.Apply(st, c, runner.ActivityCompleted{Token: inv.Token, Output: out, OutputJSON: output, Logs: weft.AttemptLogs{Lines: logs.Lines}})
			completed := record(t, acts, weft.HistoryActivityCompleted)
			checkFields(t, completed, tt.wantOut)
			if fmt.Sprint(completed.Data["logs"]) != fmt.Sprint(logs.Lines) || completed.Data["logs_dropped"] != nil {
				t.Errorf("activity_completed data = %v, want the attempt's logs and no drop", completed.Data)
			}
			if st.Status != weft.StatusCompleted {
				t.Errorf("status %s, want completed", st.Status)
			}
		})
	}
	t.Run("output encoded when not given as JSON", func(t *testing.T) {
		t.Parallel()
		st := &runner.State{}
		c := runner.Context{InstanceID: "i1", Now: t0, Rand: func() float64 { return 0.5 }, AttemptDataLimit: 100}
		inv := only[runner.Invoke](t, p.Apply(st, c, runner.Start{Input: json.RawMessage(input)}))
		acts := p.Apply(st, c, runner.ActivityCompleted{Token: inv.Token, Output: map[string]any{"n": 1.0}})
		checkFields(t, record(t, acts, weft.HistoryActivityCompleted), map[string]any{"output": json.RawMessage(`{"n":1}`)})
	})
}

// only returns the one action of type T in acts.
func only[T runner.Action](t *testing.T, acts []runner.Action) T {
	t.Helper()
	var found []T
	for _, a := range acts {
		if v, ok := a.(T); ok {
			found = append(found, v)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("%d actions of type %T in %v, want 1", len(found), zero, acts)
	}
	return found[0]
}

// record returns the one record of type typ in acts.
func record(t *testing.T, acts []runner.Action, typ weft.HistoryType) runner.Record {
	t.Helper()
	var found []runner.Record
	for _, a := range acts {
		if r, ok := a.(runner.Record); ok && r.Type == typ {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s records in %v, want 1", len(found), typ, acts)
	}
	return found[0]
}

// checkFields checks a record's input and output fields against want, by
// their JSON: a field want lacks must be absent.
func checkFields(t *testing.T, r runner.Record, want map[string]any) {
	t.Helper()
	for _, k := range []string{"input", "input_omitted_bytes", "output", "output_omitted_bytes"} {
		got, _ := json.Marshal(r.Data[k])
		exp, _ := json.Marshal(want[k])
		if string(got) != string(exp) {
			t.Errorf("%s record: %s = %s, want %s", r.Type, k, got, exp)
		}
	}
}

// TestUnappliedEndKeepsItsLogs: an attempt's end the instance no longer
// waits for is recorded where the attempt ran, with its logs: refused
// while the instance runs (an unknown or superseded token), ignored once
// it has finished (a sibling branch failed it).
func TestUnappliedEndKeepsItsLogs(t *testing.T) {
	t.Parallel()
	def, err := definition.Load([]byte(`
name: p
steps:
  - id: both
    parallel:
      - steps: [ { id: slow, activity: kit.work, input: 1 } ]
      - steps: [ { id: bad, activity: kit.fail, input: 2, retry: { max_attempts: 1 } } ]
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := runner.Compile(def)
	st := &runner.State{}
	c := runner.Context{InstanceID: "i1", Now: t0, Rand: func() float64 { return 0.5 }}
	var slow, bad runner.Invoke
	for _, a := range p.Apply(st, c, runner.Start{}) {
		if inv, ok := a.(runner.Invoke); ok && inv.Activity == "work" {
			slow = inv
		} else if ok {
			bad = inv
		}
	}
	logs := weft.AttemptLogs{Lines: []weft.LogLine{{Time: t0, Level: "info", Source: "log", Message: "half done"}}}
	check := func(r runner.Record, path string) {
		t.Helper()
		if r.Path != path || r.Attempt != 1 || fmt.Sprint(r.Data["logs"]) != fmt.Sprint(logs.Lines) {
			t.Errorf("%s record at %q attempt %d, data %v; want at %q attempt 1 with the logs", r.Type, r.Path, r.Attempt, r.Data, path)
		}
	}

	acts := p.Apply(st, c, runner.ActivityCompleted{Token: "a-unknown", Output: 1, Logs: logs, Path: slow.Path, Attempt: 1})
	check(record(t, acts, weft.HistoryEventRefused), slow.Path)

	p.Apply(st, c, runner.ActivityFailed{Token: bad.Token, Cause: retry.Cause{Kind: retry.KindActivity, Code: "no"}, Message: "no"})
	if st.Status != weft.StatusFailed {
		t.Fatalf("status %s, want failed", st.Status)
	}
	acts = p.Apply(st, c, runner.ActivityCompleted{Token: slow.Token, Output: 1, Logs: logs, Path: slow.Path, Attempt: slow.Attempt})
	check(record(t, acts, weft.HistoryEventIgnored), slow.Path)
}
