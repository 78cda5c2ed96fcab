package runner_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/runner"
)

// orderV1 is the source of most cases below: an activity, a wait, an
// activity and a set.
const orderV1 = `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
output: "${ vars }"
`

// orderAtApprove brings an instance of orderV1 to rest at approve.
var orderAtApprove = []string{`start {"sku": "s1", "id": "o1"}`, "complete reserve"}

// TestPlanMigration: a state moves to another program when the step it is
// at, and every step it has yet to run, are in the target, in the same
// list, in the same order and of the same kind, and when the steps in
// progress can go on there; otherwise the plan says why not. A state that
// can move is moved by Apply and goes on under the target.
func TestPlanMigration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		v1, v2 string
		// drive brings the instance under v1 to the point to migrate
		// from (migDriver.do's commands).
		drive []string
		// problems are "STEP: part of the message" ("" for the state's
		// own); none means it can move.
		problems []string
		notes    []string
		// at are the plan's points, "STEP FROM -> TO".
		at []string
		// activities, when set, are the plan's.
		activities map[string][]string
		// For a state that can move: errorStep is its Error.Step after
		// Apply; then drives it under v2, after which it has status
		// final.
		errorStep string
		then      []string
		final     weft.Status
	}{
		{
			name: "same shape", v1: orderV1, v2: orderV1, drive: orderAtApprove,
			at:         []string{"approve steps[1] -> steps[1]"},
			activities: map[string][]string{"pay": {"charge"}},
			then:       []string{"deliver approved", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "step removed after the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"charge: step charge, which the instance has yet to run, is not in the target"},
		},
		{
			name: "step at the cursor removed", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"approve: step approve, where the instance is, is not in the target"},
		},
		{
			name: "step at the cursor moved into a branch", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - id: gate
    if: "${ input.manual }"
    then: [ { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval } ]
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"approve: step approve, where the instance is, moved from steps to steps[1].then"},
		},
		{
			name: "step moved out of a branch after the cursor", v1: `
name: order
steps:
  - { id: approve, wait: { event: approved, key: order } }
  - id: maybe
    if: "${ input.vip }"
    then: [ { id: bonus, set: { bonus: true } } ]
  - { id: done, set: { finished: true } }
`, v2: `
name: order
steps:
  - { id: approve, wait: { event: approved, key: order } }
  - { id: bonus, set: { bonus: true } }
  - { id: done, set: { finished: true } }
`, drive: []string{"start"},
			problems: []string{
				"maybe: step maybe, which the instance has yet to run, is not in the target",
				"bonus: step bonus moved from steps[1].then to steps",
			},
		},
		{
			name: "wait timeout changed", v1: strings.Replace(orderV1, "key: \"${ input.id }\"", "key: \"${ input.id }\", timeout: 1h", 1),
			v2:    strings.Replace(orderV1, "key: \"${ input.id }\"", "key: \"${ input.id }\", timeout: 2h", 1),
			drive: orderAtApprove,
			notes: []string{"wait step approve keeps the timeout it began with"},
			at:    []string{"approve steps[1] -> steps[1]"},
			// The timer armed under v1 still fails the wait.
			then: []string{"fire"}, final: weft.StatusFailed,
		},
		{
			name: "kind changed at the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, delay: 1h }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"approve: step approve, where the instance is, is a wait step and a delay step in the target"},
		},
		{
			name: "kind changed after the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: charge, workflow: payment }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"charge: step charge is an activity step and a workflow step in the target"},
		},
		{
			name: "step moved into a branch", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - id: paying
    if: "${ vars.approval.ok }"
    then: [ { id: charge, activity: pay.charge } ]
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"charge: step charge, which the instance has yet to run, moved from steps to steps[2].then"},
			notes:    []string{"new step paying will run"},
		},
		{
			name: "steps reordered after the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: done, set: { finished: true } }
  - { id: charge, activity: pay.charge }
`, drive: orderAtApprove,
			problems: []string{"done: step done comes before charge in the target"},
		},
		{
			name: "a step that ran moved after the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			problems: []string{"reserve: step reserve, which the instance has run, comes after approve in the target: it would run again"},
		},
		{
			name: "new step before the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: audit, set: { audited: true } }
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			notes: []string{"new step audit is before approve, where the instance is: it will not run in steps"},
			at:    []string{"approve steps[1] -> steps[2]"},
			then:  []string{"deliver approved", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "new step after the cursor", v1: orderV1, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, input: "${ input.sku }", output: reservation }
  - { id: approve, wait: { event: approved, key: "${ input.id }" }, output: approval }
  - { id: notify, activity: mail.send }
  - { id: charge, activity: pay.charge }
  - { id: done, set: { finished: true } }
`, drive: orderAtApprove,
			notes:      []string{"new step notify will run"},
			at:         []string{"approve steps[1] -> steps[1]"},
			activities: map[string][]string{"mail": {"send"}, "pay": {"charge"}},
			then:       []string{"deliver approved", "complete send", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "wait event renamed", v1: orderV1, v2: strings.Replace(orderV1, "event: approved", "event: order.approved", 1),
			drive:    orderAtApprove,
			problems: []string{"approve: step approve waits for event approved, and for order.approved in the target"},
		},
		{
			name: "wait key changed", v1: orderV1, v2: strings.Replace(orderV1, "key: \"${ input.id }\"", "key: \"${ input.sku }\"", 1),
			drive: orderAtApprove,
			at:    []string{"approve steps[1] -> steps[1]"},
			// The bookmark keeps the key it was created with.
			then: []string{"deliver approved", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "activity in its backoff calls another plugin", v1: orderV1, v2: strings.Replace(orderV1, "stock.reserve", "store.hold", 1),
			drive:      []string{`start {"sku": "s1", "id": "o1"}`, "fail reserve retryable"},
			notes:      []string{"activity step reserve now calls store.hold (was stock.reserve): its next attempt does"},
			at:         []string{"reserve steps[0] -> steps[0]"},
			activities: map[string][]string{"pay": {"charge"}, "store": {"hold"}},
			then:       []string{"fire", "complete hold", "deliver approved", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "running with an attempt in flight", v1: orderV1, v2: orderV1,
			drive:    []string{`start {"sku": "s1", "id": "o1"}`},
			problems: []string{": running: an attempt is in flight"},
		},
		{
			name: "completed", v1: orderV1, v2: orderV1,
			drive:    append(slices.Clone(orderAtApprove), "deliver approved", "complete charge"),
			problems: []string{": completed: finished"},
		},
		{
			name: "paused", v1: orderV1, v2: strings.Replace(orderV1, "pay.charge", "pay2.charge", 1),
			drive:      append(slices.Clone(orderAtApprove), "pause"),
			at:         []string{"approve steps[1] -> steps[1]"},
			activities: map[string][]string{"pay2": {"charge"}},
			// A stimulus that came while paused is held, and applied on
			// resume under v2.
			then: []string{"deliver approved", "resume", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "paused with an attempt in flight", v1: orderV1, v2: orderV1,
			drive:    []string{`start {"sku": "s1", "id": "o1"}`, "pause"},
			problems: []string{": running: an attempt is in flight"},
		},
		{
			name: "failed at a set step whose expression is fixed", v1: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, output: reservation }
  - { id: total, set: { sum: "${ vars.missing.amount }" } }
output: "${ vars.sum }"
`, v2: `
name: order
steps:
  - { id: reserve, activity: stock.reserve, output: reservation }
  - { id: audit, set: { audited: true } }
  - { id: total, set: { sum: "${ vars.reservation.amount }" } }
output: "${ vars.sum }"
`, drive: []string{"start", `complete reserve {"amount": 12}`},
			notes:     []string{"new step audit is before total, where the instance is: it will not run in steps"},
			at:        []string{"total steps[1] -> steps[2]"},
			errorStep: "steps[2]",
			then:      []string{"retry"}, final: weft.StatusCompleted,
		},
		{
			name: "failed activity moved to a fixed plugin", v1: orderV1, v2: strings.Replace(orderV1, "pay.charge", "pay2.charge", 1),
			drive:      append(slices.Clone(orderAtApprove), "deliver approved", "fail charge"),
			notes:      []string{"activity step charge now calls pay2.charge (was pay.charge): its next attempt does"},
			at:         []string{"charge steps[2] -> steps[2]"},
			activities: map[string][]string{"pay2": {"charge"}},
			errorStep:  "steps[2]",
			then:       []string{"retry", "complete charge"}, final: weft.StatusCompleted,
		},
		{
			name: "foreach mid-iteration with its do list grown", v1: `
name: fan
steps:
  - id: each
    foreach: "${ input.items }"
    as: item
    do:
      - { id: ship, activity: shipping.ship, input: "${ item }" }
      - { id: confirm, wait: { event: delivered, key: "${ item }" } }
  - { id: after, set: { all: true } }
`, v2: `
name: fan
steps:
  - id: each
    foreach: "${ input.items }"
    as: item
    do:
      - { id: ship, activity: shipping.ship, input: "${ item }" }
      - { id: label, set: { labelled: true } }
      - { id: confirm, wait: { event: delivered, key: "${ item }" } }
      - { id: thank, activity: mail.send, input: "${ item }" }
  - { id: after, set: { all: true } }
`, drive: []string{`start {"items": ["a", "b"]}`, "complete ship"},
			notes: []string{
				"new step label is before confirm, where the instance is: it will not run in steps[0].do#0",
				"new step thank will run",
			},
			at:         []string{"each steps[0] -> steps[0]", "confirm steps[0].do#0[1] -> steps[0].do#0[2]"},
			activities: map[string][]string{"mail": {"send"}, "shipping": {"ship"}},
			// Iteration 0 goes on with thank; iteration 1 runs all of v2's
			// do list.
			then:  []string{"deliver delivered", "complete send", "complete ship", "deliver delivered", "complete send"},
			final: weft.StatusCompleted,
		},
		{
			name: "foreach with its item renamed", v1: `
name: fan
steps:
  - id: each
    foreach: "${ input.items }"
    as: item
    do: [ { id: confirm, wait: { event: delivered, key: "${ item }" } } ]
`, v2: `
name: fan
steps:
  - id: each
    foreach: "${ input.items }"
    as: parcel
    do: [ { id: confirm, wait: { event: delivered, key: "${ parcel }" } } ]
`, drive: []string{`start {"items": ["a"]}`},
			problems: []string{"each: foreach step each, where the instance is, names its item item, and parcel in the target"},
		},
		{
			name: "parallel branch count changed while in it", v1: parallelV1, v2: `
name: both
steps:
  - id: fork
    parallel:
      - steps: [ { id: left, wait: { event: l, key: k } } ]
      - steps: [ { id: right, wait: { event: r, key: k } } ]
      - steps: [ { id: middle, set: { m: 1 } } ]
`, drive: []string{"start"},
			problems: []string{"fork: parallel step fork, where the instance is, has 2 branches, and 3 in the target"},
		},
		{
			name: "parallel with a branch done and another grown", v1: parallelV1, v2: `
name: both
steps:
  - id: fork
    parallel:
      - steps: [ { id: left, wait: { event: l, key: k } } ]
      - steps: [ { id: right, wait: { event: r, key: k } }, { id: tally, activity: kit.count } ]
`, drive: []string{"start", "deliver l"},
			notes:      []string{"new step tally will run"},
			at:         []string{"fork steps[0] -> steps[0]", "right steps[0].parallel[1][0] -> steps[0].parallel[1][0]"},
			activities: map[string][]string{"kit": {"count"}},
			then:       []string{"deliver r", "complete count"}, final: weft.StatusCompleted,
		},
		{
			name: "if whose chosen branch is gone", v1: `
name: gate
steps:
  - id: route
    if: "${ input.fast }"
    then: [ { id: quick, set: { quick: true } } ]
    else: [ { id: hold, wait: { event: release, key: k } } ]
`, v2: `
name: gate
steps:
  - id: route
    if: "${ input.fast }"
    then: [ { id: quick, set: { quick: true } } ]
`, drive: []string{`start {"fast": false}`},
			problems: []string{"route: step route, where the instance is, runs its else, which the target does not have"},
		},
		{
			name: "if whose chosen branch is kept", v1: `
name: gate
steps:
  - id: route
    if: "${ input.fast }"
    then: [ { id: quick, set: { quick: true } } ]
    else: [ { id: hold, wait: { event: release, key: k } } ]
`, v2: `
name: gate
steps:
  - { id: first, set: { first: true } }
  - id: route
    if: "${ input.fast }"
    then: [ { id: quick, set: { quick: true } } ]
    else: [ { id: hold, wait: { event: release, key: k } }, { id: log, activity: kit.log } ]
`, drive: []string{`start {"fast": false}`},
			notes: []string{"new step first is before route, where the instance is: it will not run in steps", "new step log will run"},
			at:    []string{"route steps[0] -> steps[1]", "hold steps[0].else[0] -> steps[1].else[0]"},
			then:  []string{"deliver release", "complete log"}, final: weft.StatusCompleted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newMigDriver(t, migProgram(t, tt.v1))
			for _, cmd := range tt.drive {
				d.do(cmd)
			}
			to := migProgram(t, tt.v2)
			before, err := json.Marshal(d.st)
			if err != nil {
				t.Fatal(err)
			}
			plan := runner.PlanMigration(d.st, d.p, to)
			after, _ := json.Marshal(d.st)
			if string(before) != string(after) {
				t.Errorf("PlanMigration changed the state:\n%s\nto\n%s", before, after)
			}

			var problems []string
			for _, p := range plan.Problems {
				problems = append(problems, p.Step+": "+p.Message)
			}
			if !reflect.DeepEqual(problems, tt.problems) {
				t.Errorf("problems:\n got %q\nwant %q", problems, tt.problems)
			}
			if plan.CanMove != (len(tt.problems) == 0) {
				t.Errorf("CanMove = %v with problems %q", plan.CanMove, problems)
			}
			if !reflect.DeepEqual(plan.Notes, tt.notes) {
				t.Errorf("notes:\n got %q\nwant %q", plan.Notes, tt.notes)
			}
			if tt.activities != nil && !reflect.DeepEqual(plan.Activities, tt.activities) {
				t.Errorf("activities = %v, want %v", plan.Activities, tt.activities)
			}
			if !plan.CanMove {
				if err := plan.Apply(d.st); err == nil {
					t.Errorf("Apply of a plan that cannot move succeeded")
				}
				if after, _ := json.Marshal(d.st); string(before) != string(after) {
					t.Errorf("a refused Apply changed the state")
				}
				return
			}
			var at []string
			for _, p := range plan.At {
				at = append(at, fmt.Sprintf("%s %s -> %s", p.Step, p.From, p.To))
			}
			if !reflect.DeepEqual(at, tt.at) {
				t.Errorf("at:\n got %q\nwant %q", at, tt.at)
			}

			tokens, seq := migTokens(d.st), d.st.Seq
			if err := plan.Apply(d.st); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if got := migTokens(d.st); !reflect.DeepEqual(got, tokens) || d.st.Seq != seq {
				t.Errorf("Apply changed tokens or Seq: %v, %d; want %v, %d", got, d.st.Seq, tokens, seq)
			}
			if got := migPoints(d.st); !reflect.DeepEqual(got, migTo(plan)) {
				t.Errorf("frames after Apply are at %q, want the plan's %q", got, migTo(plan))
			}
			var errorStep string
			if d.st.Error != nil {
				errorStep = d.st.Error.Step
			}
			if errorStep != tt.errorStep {
				t.Errorf("Error.Step = %q after Apply, want %q", errorStep, tt.errorStep)
			}

			// The moved state goes on under v2, after a round trip through
			// its JSON as the store keeps it.
			d.p = to
			d.reload()
			for _, cmd := range tt.then {
				d.do(cmd)
			}
			if tt.final != "" && d.st.Status != tt.final {
				t.Errorf("status %s after %q under v2, want %s (error %+v)", d.st.Status, tt.then, tt.final, d.st.Error)
			}
		})
	}
}

// parallelV1 is a parallel of two waits.
const parallelV1 = `
name: both
steps:
  - id: fork
    parallel:
      - steps: [ { id: left, wait: { event: l, key: k } } ]
      - steps: [ { id: right, wait: { event: r, key: k } } ]
`

// TestMigrationContinuesOnTheTarget: an instance suspended at a wait at
// steps[2] of v1 moves to v2, which inserts a step before the wait and
// another after it; the stimulus delivered to the bookmark v1 created
// resumes it, and it completes running v2's steps after the wait only.
func TestMigrationContinuesOnTheTarget(t *testing.T) {
	t.Parallel()
	d := newMigDriver(t, migProgram(t, `
name: order
steps:
  - { id: reserve, activity: stock.reserve, output: reservation }
  - { id: check, set: { checked: true } }
  - { id: approve, wait: { event: approved, key: order }, output: approval }
  - { id: ship, set: { shipped: true } }
output: "${ vars }"
`))
	d.do("start")
	d.do(`complete reserve {"id": "r1"}`)
	token := d.token("bookmark:approved")
	if d.st.Status != weft.StatusSuspended || d.st.Root.Index != 2 {
		t.Fatalf("status %s at steps[%d], want suspended at steps[2]", d.st.Status, d.st.Root.Index)
	}
	v2 := migProgram(t, `
name: order
steps:
  - { id: reserve, activity: stock.reserve, output: reservation }
  - { id: check, set: { checked: true } }
  - { id: fraud, set: { screened: true } }
  - { id: approve, wait: { event: approved, key: order }, output: approval }
  - { id: ship, set: { shipped: true } }
  - { id: thank, set: { thanked: true } }
output: "${ vars }"
`)
	plan := runner.PlanMigration(d.st, d.p, v2)
	if !plan.CanMove {
		t.Fatalf("cannot move: %+v", plan.Problems)
	}
	if err := plan.Apply(d.st); err != nil {
		t.Fatal(err)
	}
	if d.st.Root.Index != 3 {
		t.Fatalf("cursor at steps[%d] after Apply, want steps[3]", d.st.Root.Index)
	}
	d.p = v2
	acts := d.apply(runner.StimulusDelivered{Token: token, Payload: "yes"})
	if d.st.Status != weft.StatusCompleted {
		t.Fatalf("status %s, want completed; actions %v", d.st.Status, acts)
	}
	var steps []string
	for _, a := range acts {
		if r, ok := a.(runner.Record); ok && r.Type == weft.HistoryStepCompleted {
			steps = append(steps, r.Step+"@"+r.Path)
		}
	}
	if want := []string{"approve@steps[3]", "ship@steps[4]", "thank@steps[5]"}; !reflect.DeepEqual(steps, want) {
		t.Errorf("steps completed %q, want %q", steps, want)
	}
	want := map[string]any{"reservation": map[string]any{"id": "r1"}, "checked": true, "approval": "yes", "shipped": true, "thanked": true}
	if !reflect.DeepEqual(d.st.Vars, want) {
		t.Errorf("vars %v, want %v: the new step before the wait does not run", d.st.Vars, want)
	}
}

// TestMigrationApplyRefusesAnotherState: a plan moves the state it was
// made for; Apply to a state that has moved on since changes nothing.
func TestMigrationApplyRefusesAnotherState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		v1    string
		drive []string
		// then moves the state on after the plan.
		then string
	}{
		{"the cursor moved", orderV1, orderAtApprove, "deliver approved"},
		{"retried", orderV1, append(slices.Clone(orderAtApprove), "deliver approved", "fail charge"), "retry"},
		{"a branch finished", parallelV1, []string{"start"}, "deliver l"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newMigDriver(t, migProgram(t, tt.v1))
			for _, cmd := range tt.drive {
				d.do(cmd)
			}
			plan := runner.PlanMigration(d.st, d.p, d.p)
			if !plan.CanMove {
				t.Fatalf("cannot move: %+v", plan.Problems)
			}
			d.do(tt.then)
			before, _ := json.Marshal(d.st)
			if err := plan.Apply(d.st); err == nil || !strings.Contains(err.Error(), "changed since it was planned") {
				t.Errorf("Apply after %q: %v, want the state changed", tt.then, err)
			}
			if after, _ := json.Marshal(d.st); string(before) != string(after) {
				t.Errorf("a refused Apply changed the state")
			}
		})
	}
}

// migProgram compiles a definition.
func migProgram(t *testing.T, src string) *runner.Program {
	t.Helper()
	def, err := definition.Load([]byte(src), nil)
	if err != nil {
		t.Fatalf("definition: %v", err)
	}
	return runner.Compile(def)
}

// migDriver drives an instance event by event, remembering the latest
// token of each activity ("invoke:NAME"), bookmark ("bookmark:EVENT") and
// timer ("timer").
type migDriver struct {
	t      *testing.T
	p      *runner.Program
	st     *runner.State
	tokens map[string]string
	now    time.Time
}

func newMigDriver(t *testing.T, p *runner.Program) *migDriver {
	return &migDriver{t: t, p: p, st: &runner.State{}, tokens: map[string]string{}, now: t0}
}

func (d *migDriver) apply(ev runner.Input) []runner.Action {
	d.now = d.now.Add(time.Second)
	acts := d.p.Apply(d.st, runner.Context{InstanceID: "i1", Now: d.now, Rand: func() float64 { return 0.5 }}, ev)
	for _, a := range acts {
		switch a := a.(type) {
		case runner.Invoke:
			d.tokens["invoke:"+a.Activity] = a.Token
		case runner.CreateBookmark:
			d.tokens["bookmark:"+a.Event] = a.Token
		case runner.ArmTimer:
			d.tokens["timer"] = a.Token
		}
	}
	return acts
}

func (d *migDriver) token(key string) string {
	d.t.Helper()
	tok, ok := d.tokens[key]
	if !ok {
		d.t.Fatalf("no %s token handed out (have %v)", key, d.tokens)
	}
	return tok
}

// do runs one command:
//
//	start [INPUT]                 start the instance
//	complete ACTIVITY [OUTPUT]    complete its latest attempt
//	fail ACTIVITY [retryable]     fail its latest attempt
//	deliver EVENT                 deliver a stimulus to its latest bookmark
//	fire                          fire the latest timer
//	retry                         retry the failed instance
//	pause, resume                 pause or resume the instance
func (d *migDriver) do(cmd string) {
	d.t.Helper()
	name, rest, _ := strings.Cut(cmd, " ")
	arg, data, _ := strings.Cut(rest, " ")
	var value any
	if data != "" && (name == "complete" || name == "deliver") {
		if err := json.Unmarshal([]byte(data), &value); err != nil {
			d.t.Fatalf("%s: %v", cmd, err)
		}
	}
	switch name {
	case "start":
		d.apply(runner.Start{Input: json.RawMessage(rest)})
	case "complete":
		d.apply(runner.ActivityCompleted{Token: d.token("invoke:" + arg), Output: value})
	case "fail":
		cause := retry.Cause{Kind: retry.KindActivity, Code: "broken"}
		if data == "retryable" {
			cause = retry.Of(retry.KindTimeout)
		}
		d.apply(runner.ActivityFailed{Token: d.token("invoke:" + arg), Cause: cause, Message: "no"})
	case "deliver":
		d.apply(runner.StimulusDelivered{Token: d.token("bookmark:" + arg), Payload: value})
	case "fire":
		d.apply(runner.TimerFired{Token: d.token("timer")})
	case "retry":
		d.apply(runner.Retry{})
	case "pause":
		d.apply(runner.Pause{})
	case "resume":
		d.apply(runner.Resume{})
	default:
		d.t.Fatalf("unknown command %q", cmd)
	}
}

// reload replaces the state with its JSON round trip.
func (d *migDriver) reload() {
	d.t.Helper()
	b, err := json.Marshal(d.st)
	if err != nil {
		d.t.Fatal(err)
	}
	var back runner.State
	if err := json.Unmarshal(b, &back); err != nil {
		d.t.Fatal(err)
	}
	d.st = &back
}

// migTokens lists every token and execution in st's frames.
func migTokens(st *runner.State) []string {
	var out []string
	var walk func(f *runner.Frame)
	walk = func(f *runner.Frame) {
		if f == nil || f.Run == nil {
			return
		}
		out = append(out, f.Run.Exec, f.Run.Token, f.Run.TimeoutToken)
		for _, c := range f.Run.Children {
			walk(c)
		}
	}
	walk(st.Root)
	return out
}

// migPoints lists the path of the step under the cursor of every frame of
// st with work left, as MigrationPlan.At does.
func migPoints(st *runner.State) []string {
	var out []string
	var walk func(f *runner.Frame)
	walk = func(f *runner.Frame) {
		if f == nil || f.Done {
			return
		}
		out = append(out, fmt.Sprintf("%s[%d]", f.Path, f.Index))
		if f.Run != nil {
			for _, c := range f.Run.Children {
				walk(c)
			}
		}
	}
	walk(st.Root)
	return out
}

// migTo lists the plan's points' paths in the target.
func migTo(plan *runner.MigrationPlan) []string {
	var out []string
	for _, p := range plan.At {
		out = append(out, p.To)
	}
	return out
}
