package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// flakyWorkflow is a workflow whose one activity fails its first attempt
// and completes the second; record is its workflow-level record line and
// step its step's, each empty for none.
func flakyWorkflow(name, record, step string) string {
	return fmt.Sprintf(`
name: %s
%s
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, message: not yet, retryable: true, fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 10ms }
    output: result
    %s
output: "${ vars.result.attempt }"
`, name, record, step)
}

// tapeWrites is an engine.Observer that is also an engine.TapeObserver:
// it counts the tapes written and lost.
type tapeWrites struct {
	*counted
	mu             sync.Mutex
	written, erred int
}

func (o *tapeWrites) TapeWritten(_ weft.TapeOutcome, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.erred++
		return
	}
	o.written++
}

// TestRecordPolicyKeepsTapes: under the host's default policy (failed)
// the failed first attempt keeps its tape and the completed second does
// not (in either store); a workflow's record: all keeps both; a step's record: off, over a
// host policy of all, keeps none. A kept tape reads back as the
// attempt's recording: its input, its failure or output, its version and
// the host's answers.
func TestRecordPolicyKeepsTapes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name         string
		host         weft.RecordPolicy
		record, step string
		redis        bool
		want         map[int]weft.TapeOutcome // by attempt
	}{
		{name: "failed", host: weft.DefaultRecordPolicy, want: map[int]weft.TapeOutcome{1: weft.TapeFailed}},
		{name: "failed redis", host: weft.DefaultRecordPolicy, redis: true, want: map[int]weft.TapeOutcome{1: weft.TapeFailed}},
		{name: "all", host: weft.DefaultRecordPolicy, record: "record: all", want: map[int]weft.TapeOutcome{1: weft.TapeFailed, 2: weft.TapeCompleted}},
		{name: "off", host: weft.RecordPolicy{Mode: weft.RecordAll}, step: "record: off", want: map[int]weft.TapeOutcome{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obs := &tapeWrites{counted: newCounted()}
			opts := []hostOption{withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, Observer: obs,
				Tapes: engine.TapeConfig{Policy: tt.host}})}
			if tt.redis {
				opts = append(opts, withRedisStore())
			}
			h := newHost(t, opts...)
			h.save(flakyWorkflow("flaky", tt.record, tt.step))
			inst := h.finish("flaky", nil)
			if inst.Status != weft.StatusCompleted || string(inst.Output) != "2" {
				t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
			}
			ctx := context.Background()
			recs, err := h.store.ListTapes(ctx, inst.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[int]weft.TapeOutcome{}
			for _, r := range recs {
				got[r.Key.Attempt] = r.Outcome
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("tapes %+v, want outcomes by attempt %v", recs, tt.want)
			}
			obs.mu.Lock()
			written, erred := obs.written, obs.erred
			obs.mu.Unlock()
			if written != len(tt.want) || erred != 0 || h.e.TapeErrors() != 0 {
				t.Errorf("observer saw %d tapes written, %d lost (engine: %d); want %d, 0", written, erred, h.e.TapeErrors(), len(tt.want))
			}
			version := inst.Plugins["kit"]
			for _, r := range recs {
				if r.Key.InstanceID != inst.ID || r.Key.StepPath != "steps[0]" || r.Key.Exec == "" ||
					r.Plugin != "kit" || r.PluginVersion != version || r.Activity != "fail" || r.Workflow != "flaky" || r.Size == 0 || r.Truncated {
					t.Errorf("tape summary %+v", r)
				}
				if r.Outcome == weft.TapeFailed && r.FailureCode != "busy" {
					t.Errorf("failed tape's code %q, want busy", r.FailureCode)
				}
				_, data, err := h.store.GetTape(ctx, r.Key)
				if err != nil {
					t.Fatal(err)
				}
				a, err := tape.UnmarshalAttempt(data)
				if err != nil {
					t.Fatalf("tape %s: %v", r.Key, err)
				}
				var in map[string]any
				if err := json.Unmarshal(a.Input, &in); err != nil || in["code"] != "busy" {
					t.Errorf("tape %s: input %s (%v)", r.Key, a.Input, err)
				}
				if a.Activity != "fail" || a.Plugin != "kit" || a.PluginVersion != version || a.Tape == nil || len(a.Tape.Entries) == 0 {
					t.Errorf("tape %s: %+v", r.Key, a)
				}
				switch r.Key.Attempt {
				case 1:
					if a.FailureCode != "busy" || a.FailureMessage != "not yet" || a.Output != nil {
						t.Errorf("tape of attempt 1: failure %q %q output %s", a.FailureCode, a.FailureMessage, a.Output)
					}
				case 2:
					if a.FailureCode != "" || string(a.Output) != `{"attempt":2}` {
						t.Errorf("tape of attempt 2: failure %q output %s", a.FailureCode, a.Output)
					}
				}
			}
		})
	}
}

// failingTapes is a store whose PutTape always fails.
type failingTapes struct{ store.Store }

func (failingTapes) PutTape(context.Context, weft.TapeRecord, []byte) error {
	return fmt.Errorf("tapes are down")
}

// TestTapeWriteFailureIsHarmless: a tape the store refuses is logged and
// counted, and the instance runs on as it would have.
func TestTapeWriteFailureIsHarmless(t *testing.T) {
	t.Parallel()
	obs := &tapeWrites{counted: newCounted()}
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, Observer: obs,
		Tapes: engine.TapeConfig{Policy: weft.RecordPolicy{Mode: weft.RecordAll}}}),
		withStore(func(s store.Store) store.Store { return failingTapes{s} }))
	h.save(flakyWorkflow("flaky", "", ""))
	inst := h.finish("flaky", nil)
	if inst.Status != weft.StatusCompleted || string(inst.Output) != "2" {
		t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.erred != 2 || obs.written != 0 || h.e.TapeErrors() != 2 {
		t.Errorf("observer saw %d lost, %d written; engine counted %d; want 2, 0, 2", obs.erred, obs.written, h.e.TapeErrors())
	}
}

// recordsCalls records whether each call the engine makes records.
type recordsCalls struct {
	engine.Plugins
	mu      sync.Mutex
	records []bool
}

func (p *recordsCalls) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	p.mu.Lock()
	p.records = append(p.records, c.Record != nil)
	p.mu.Unlock()
	return p.Plugins.Invoke(ctx, version, c)
}

// TestRecordOffRecordsNothing: with no policy (the zero Config) and none
// in the definition, attempts run without a recorder.
func TestRecordOffRecordsNothing(t *testing.T) {
	t.Parallel()
	pl := &recordsCalls{}
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { pl.Plugins = p; return pl }))
	h.save(flakyWorkflow("flaky", "", ""))
	inst := h.finish("flaky", nil)
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", inst.Status, inst.Error)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if fmt.Sprint(pl.records) != "[false false]" {
		t.Errorf("calls recorded: %v, want [false false]", pl.records)
	}
	if recs, err := h.store.ListTapes(context.Background(), inst.ID); err != nil || len(recs) != 0 {
		t.Errorf("tapes %+v, %v; want none", recs, err)
	}
}

// TestRecordInsideForeach: a step inside a foreach keeps its own record
// policy in every iteration, though its path names the iteration
// ("steps[0].do#1[0]").
func TestRecordInsideForeach(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: each
steps:
  - id: each
    foreach: "${ input.words }"
    as: w
    do:
      - { id: up, activity: kit.upper, input: { text: "${ w }" }, record: all }
      - { id: echo, activity: kit.echo, input: 1 }
`)
	inst := h.finish("each", map[string]any{"words": []any{"x", "y"}})
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", inst.Status, inst.Error)
	}
	recs, err := h.store.ListTapes(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range recs {
		paths = append(paths, r.Key.StepPath)
	}
	if fmt.Sprint(paths) != "[steps[0].do#0[0] steps[0].do#1[0]]" {
		t.Errorf("tapes of %v, want the upper step's in both iterations and no echo's", paths)
	}
}

// TestTapeConfigValidate: MaxBytes defaults to weft.DefaultTapeBytes;
// a policy ParseRecordPolicy would not make and a cap out of 1 to
// weft.MaxTapeBytes are refused, naming the field.
func TestTapeConfigValidate(t *testing.T) {
	t.Parallel()
	c := engine.Config{}.WithDefaults()
	if c.Tapes.MaxBytes != weft.DefaultTapeBytes || !c.Tapes.Policy.IsZero() {
		t.Errorf("defaults: %+v, want no policy and %d bytes", c.Tapes, weft.DefaultTapeBytes)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tapes engine.TapeConfig
		field string
	}{
		{engine.TapeConfig{Policy: weft.RecordPolicy{Mode: "failures"}, MaxBytes: 1}, "Tapes.Policy"},
		{engine.TapeConfig{Policy: weft.RecordPolicy{Mode: weft.RecordSample, Percent: 0}, MaxBytes: 1}, "Tapes.Policy"},
		{engine.TapeConfig{MaxBytes: -1}, "Tapes.MaxBytes"},
		{engine.TapeConfig{MaxBytes: weft.MaxTapeBytes + 1}, "Tapes.MaxBytes"},
	} {
		bad := c
		bad.Tapes = tt.tapes
		var ce *engine.ConfigError
		if err := bad.Validate(); !errors.As(err, &ce) || ce.Field != tt.field {
			t.Errorf("%+v: %v, want a ConfigError on %s", tt.tapes, err, tt.field)
		}
	}
}
