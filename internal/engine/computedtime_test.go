package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// TestComputedTime runs delays and wait timeouts computed from the input
// through the engine, on its real timers: a delay waits what its
// expression says, an until in the past does not wait, a wait times out
// after its computed timeout, and a value that is no duration fails the
// step with the code expression. The history records what was computed.
func TestComputedTime(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: nap
steps:
  - { id: nap, delay: "${ input.seconds }" }
output: done
`)
	h.save(`
name: kickoff
steps:
  - { id: wait-start, delay: { until: "${ input.starts_at }" } }
output: started
`)
	h.save(`
name: approval
steps:
  - id: review
    wait: { event: order.approved, key: "${ input.id }", timeout: "${ input.ms }ms" }
`)
	tests := []struct {
		name, workflow string
		input          map[string]any
		// status and code are how the instance ends; armed is the data of
		// its timer_armed entry, when it has one.
		status  weft.Status
		code    string
		message string
		armed   map[string]any
		// untilIn, when set, is the input's starts_at: that long after the
		// instance starts.
		untilIn time.Duration
	}{
		{name: "seconds", workflow: "nap", input: map[string]any{"seconds": 0.05},
			status: weft.StatusCompleted, armed: map[string]any{"delay": "50ms"}},
		{name: "zero", workflow: "nap", input: map[string]any{"seconds": 0},
			status: weft.StatusCompleted, armed: map[string]any{"delay": "0s", "already_due": true}},
		{name: "until in the past", workflow: "kickoff", input: map[string]any{"starts_at": "2020-01-01T00:00:00+01:00"},
			status: weft.StatusCompleted, armed: map[string]any{"already_due": true}},
		{name: "until soon", workflow: "kickoff", untilIn: time.Second,
			status: weft.StatusCompleted, armed: map[string]any{}},
		{name: "not a duration", workflow: "nap", input: map[string]any{"seconds": "soon"},
			status: weft.StatusFailed, code: "expression",
			message: `step "nap", delay: expression "${ input.seconds }": "soon" is not a duration: want a number and a unit, e.g. 500ms, 30s, 72h or 7d, or a number of seconds`},
		{name: "wait timeout", workflow: "approval", input: map[string]any{"id": 1, "ms": 50},
			status: weft.StatusFailed, code: "timeout", message: "no order.approved stimulus within 50ms"},
		{name: "negative wait timeout", workflow: "approval", input: map[string]any{"id": 2, "ms": -50},
			status: weft.StatusFailed, code: "expression",
			message: `step "review", wait timeout: expression "${ input.ms }ms": -50ms is negative; want 0 (no timeout) or more`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			input := tt.input
			if tt.untilIn > 0 {
				input = map[string]any{"starts_at": time.Now().Add(tt.untilIn).Format(time.RFC3339Nano)}
			}
			inst := h.finish(tt.workflow, input)
			if inst.Status != tt.status {
				t.Fatalf("instance %s, error %+v; want %s", inst.Status, inst.Error, tt.status)
			}
			if tt.code != "" && (inst.Error == nil || inst.Error.Code != tt.code || inst.Error.Message != tt.message) {
				t.Errorf("error %+v; want code %s, message %s", inst.Error, tt.code, tt.message)
			}
			if tt.armed == nil {
				return
			}
			evs := h.history(inst.ID)
			if count(evs, weft.HistoryTimerArmed) != 1 || count(evs, weft.HistoryTimerFired) != 1 {
				t.Fatalf("history %v; want one timer armed and fired", types(evs))
			}
			for _, e := range evs {
				if e.Type != weft.HistoryTimerArmed {
					continue
				}
				var data map[string]any
				if err := json.Unmarshal(e.Data, &data); err != nil {
					t.Fatal(err)
				}
				if _, ok := data["due"].(string); !ok {
					t.Errorf("timer_armed %s has no due time", e.Data)
				}
				for k, want := range tt.armed {
					if data[k] != want {
						t.Errorf("timer_armed %s: %s is %v, want %v", e.Data, k, data[k], want)
					}
				}
				if _, ok := tt.armed["already_due"]; !ok && data["already_due"] != nil {
					t.Errorf("timer_armed %s says already due; want a timer that waited", e.Data)
				}
			}
		})
	}
}

// TestComputedDelaySuspendsOnItsTimer: a delay computed from the input
// suspends the instance on one durable timer due when the expression says.
func TestComputedDelaySuspendsOnItsTimer(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: remind
steps:
  - { id: remind, delay: "${ input.days }d${ input.hours }h" }
`)
	in, _ := json.Marshal(map[string]any{"days": 1, "hours": 12})
	before := time.Now()
	inst, _, err := h.e.Start(context.Background(), "remind", in, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := h.e.Wait(ctx, inst.ID)
	if err != nil || got.Status != weft.StatusSuspended {
		t.Fatalf("Wait: %v, %v; want suspended on its timer", got.Status, err)
	}
	timers, err := h.store.Timers(ctx, inst.ID)
	after := time.Now()
	if err != nil || len(timers) != 1 || timers[0].Due.Before(before.Add(36*time.Hour)) || timers[0].Due.After(after.Add(36*time.Hour)) {
		t.Fatalf("timers %+v, %v; want one due in 36 hours", timers, err)
	}
}
