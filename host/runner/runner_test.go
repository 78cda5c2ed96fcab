package runner_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/definition"
	"github.com/weftworks/weft/host/retry"
	"github.com/weftworks/weft/host/runner"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// script drives one instance: each call applies an event at a time offset
// and returns a compact trace of the actions (history records left out).
type script struct {
	t  *testing.T
	p  *runner.Program
	st *runner.State
	// tokens remembers the last token per kind of action, for the test to
	// answer: "invoke", "timer", "bookmark", "child".
	tokens map[string]string
}

func newScript(t *testing.T, yaml string) *script {
	t.Helper()
	def, err := definition.Load([]byte(yaml), nil)
	if err != nil {
		t.Fatalf("definition: %v", err)
	}
	return &script{t: t, p: runner.Compile(def), st: &runner.State{}, tokens: map[string]string{}}
}

func (s *script) apply(after time.Duration, ev runner.Event) string {
	s.t.Helper()
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0.Add(after), Rand: func() float64 { return 0.5 }}, ev)
	var out []string
	for _, a := range acts {
		switch a := a.(type) {
		case runner.Invoke:
			s.tokens["invoke"] = a.Token
			in, _ := json.Marshal(a.Input)
			line := fmt.Sprintf("invoke %s.%s #%d %s key=%s", a.Plugin, a.Activity, a.Attempt, in, a.IdempotencyKey)
			if a.LastHeartbeat != nil {
				line += " last=" + string(a.LastHeartbeat)
			}
			out = append(out, line)
		case runner.ArmTimer:
			s.tokens["timer"] = a.Token
			out = append(out, "timer +"+a.Due.Sub(t0.Add(after)).String())
		case runner.CancelTimer:
			out = append(out, "cancel-timer")
		case runner.CreateBookmark:
			s.tokens["bookmark"] = a.Token
			out = append(out, "bookmark "+a.Event+"/"+a.Key)
		case runner.RemoveBookmark:
			out = append(out, "remove-bookmark")
		case runner.StartChild:
			s.tokens["child"] = a.Token
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
			if a.Type == "event_refused" {
				out = append(out, "refused")
			}
		}
	}
	return strings.Join(out, "; ")
}

func (s *script) expect(after time.Duration, ev runner.Event, want string) {
	s.t.Helper()
	if got := s.apply(after, ev); got != want {
		s.t.Fatalf("after %T:\n got: %s\nwant: %s", ev, got, want)
	}
}

func (s *script) token(kind string) string { return s.tokens[kind] }

func TestSequenceWithSetAndOutput(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: seq
steps:
  - id: prep
    set: { greeting: "hello ${ input.name }" }
  - id: shout
    activity: kit.upper
    input: { text: "${ vars.greeting }" }
    output: shouted
output: "${ vars.shouted.text }"
`)
	s.expect(0, runner.Start{Input: map[string]any{"name": "ada"}}, `invoke kit.upper #1 {"text":"hello ada"} key=i1/shout/e2`)
	if s.st.Status != runner.StatusRunning {
		t.Fatalf("status %s, want running", s.st.Status)
	}
	s.expect(time.Second, runner.ActivityCompleted{Token: s.token("invoke"), Output: map[string]any{"text": "HELLO ADA"}}, `finish completed "HELLO ADA"; persist`)
}

func TestRetryThenSuccessKeepsKeyAndHandsOverHeartbeat(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: retrying
steps:
  - id: work
    activity: kit.work
    input: { ms: 100 }
    retry: { max_attempts: 3, initial_interval: 500ms, backoff: 2 }
`)
	s.expect(0, runner.Start{}, `invoke kit.work #1 {"ms":100} key=i1/work/e1`)
	first := s.token("invoke")
	s.expect(time.Second, runner.ActivityFailed{Token: first, Failure: retry.Of(retry.KindHeartbeatTimeout), Message: "no heartbeat", LastHeartbeat: json.RawMessage(`{"done_ms":40}`)}, `timer +500ms; persist`)
	if s.st.Status != runner.StatusSuspended {
		t.Fatalf("status %s while waiting to retry, want suspended", s.st.Status)
	}
	// The first attempt's late completion is refused.
	s.expect(1200*time.Millisecond, runner.ActivityCompleted{Token: first, Output: "late"}, `refused; persist`)
	s.expect(1500*time.Millisecond, runner.TimerFired{Token: s.token("timer")}, `invoke kit.work #2 {"ms":100} key=i1/work/e1 last={"done_ms":40}`)
	s.expect(2*time.Second, runner.ActivityCompleted{Token: s.token("invoke"), Output: 1}, `finish completed null; persist`)
}

func TestFailures(t *testing.T) {
	t.Parallel()
	const def = `
name: failing
steps:
  - id: charge
    activity: payments.charge
    retry: { max_attempts: 2, initial_interval: 1s, non_retryable: [card_declined] }
`
	tests := []struct {
		name    string
		failure retry.Failure
		want    string
	}{
		{"listed code", retry.Failure{Kind: retry.KindActivity, Code: "card_declined", Retryable: true}, `finish failed card_declined: boom; persist`},
		{"plugin says not retryable", retry.Failure{Kind: retry.KindActivity, Code: "bad"}, `finish failed bad: boom; persist`},
		{"retryable", retry.Failure{Kind: retry.KindActivity, Code: "busy", Retryable: true}, `timer +1s; persist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScript(t, def)
			s.apply(0, runner.Start{})
			s.expect(time.Second, runner.ActivityFailed{Token: s.token("invoke"), Failure: tt.failure, Message: "boom"}, tt.want)
		})
	}
	t.Run("attempts exhausted", func(t *testing.T) {
		t.Parallel()
		s := newScript(t, def)
		s.apply(0, runner.Start{})
		busy := retry.Failure{Kind: retry.KindActivity, Code: "busy", Retryable: true}
		s.apply(time.Second, runner.ActivityFailed{Token: s.token("invoke"), Failure: busy})
		s.apply(2*time.Second, runner.TimerFired{Token: s.token("timer")})
		s.expect(3*time.Second, runner.ActivityFailed{Token: s.token("invoke"), Failure: busy, Message: "still busy"}, `finish failed busy: still busy; persist`)
		if s.st.Error == nil || s.st.Error.Step != "steps[0]" {
			t.Errorf("error %+v, want the failing step's path", s.st.Error)
		}
	})
	t.Run("fail step", func(t *testing.T) {
		t.Parallel()
		s := newScript(t, `
name: f
steps:
  - id: nope
    fail: { code: too_big, message: "total ${ input.total } is too big" }
`)
		s.expect(0, runner.Start{Input: map[string]any{"total": 5000}}, `finish failed too_big: total 5000 is too big; persist`)
	})
}

func TestIfElse(t *testing.T) {
	t.Parallel()
	const def = `
name: branching
steps:
  - id: check
    if: "${ input.total > 1000 }"
    then:
      - { id: review, activity: kit.echo, input: big }
    else:
      - { id: small, set: { size: small } }
  - { id: done, set: { finished: true } }
output: "${ vars }"
`
	big := newScript(t, def)
	big.expect(0, runner.Start{Input: map[string]any{"total": 5000}}, `invoke kit.echo #1 "big" key=i1/review/e2`)
	big.expect(time.Second, runner.ActivityCompleted{Token: big.token("invoke")}, `finish completed {"finished":true}; persist`)

	small := newScript(t, def)
	small.expect(0, runner.Start{Input: map[string]any{"total": 10}}, `finish completed {"finished":true,"size":"small"}; persist`)
}

func TestForeachConcurrency(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: fan
steps:
  - id: each
    foreach: "${ input.items }"
    as: item
    concurrency: 2
    do:
      - { id: ship, activity: shipping.ship, input: "${ item }" }
`)
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0}, runner.Start{Input: map[string]any{"items": []any{"a", "b", "c"}}})
	invokes := tokensOf(acts)
	if len(invokes) != 2 {
		t.Fatalf("%d invokes with concurrency 2, want 2", len(invokes))
	}
	// One finishes: the third iteration starts.
	acts = s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0.Add(time.Second)}, runner.ActivityCompleted{Token: invokes["a"]})
	third := tokensOf(acts)
	if len(third) != 1 || third["c"] == "" {
		t.Fatalf("after one completion: invokes %v, want c", third)
	}
	s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0.Add(2 * time.Second)}, runner.ActivityCompleted{Token: invokes["b"]})
	if s.st.Status != runner.StatusRunning {
		t.Fatalf("status %s with c in flight", s.st.Status)
	}
	s.expect(3*time.Second, runner.ActivityCompleted{Token: third["c"]}, `finish completed null; persist`)
}

func TestForeachEmptyList(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: none
steps:
  - { id: each, foreach: "${ input.items }", as: item, do: [ { id: x, activity: kit.echo } ] }
`)
	s.expect(0, runner.Start{Input: map[string]any{"items": []any{}}}, `finish completed null; persist`)
}

// tokensOf maps each invoke's input (a string) to its token.
func tokensOf(acts []runner.Action) map[string]string {
	m := map[string]string{}
	for _, a := range acts {
		if inv, ok := a.(runner.Invoke); ok {
			m[fmt.Sprint(inv.Input)] = inv.Token
		}
	}
	return m
}

func TestParallel(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: par
steps:
  - id: notify
    parallel:
      - steps: [ { id: mail, activity: notify.email, input: mail, output: m } ]
      - steps: [ { id: sms, activity: notify.sms, input: sms, output: s } ]
output: "${ vars }"
`)
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0}, runner.Start{})
	tok := tokensOf(acts)
	if len(tok) != 2 {
		t.Fatalf("invokes %v, want both branches", tok)
	}
	s.expect(time.Second, runner.ActivityCompleted{Token: tok["sms"], Output: "sent"}, ``)
	s.expect(2*time.Second, runner.ActivityCompleted{Token: tok["mail"], Output: "mailed"}, `finish completed {"m":"mailed","s":"sent"}; persist`)
}

func TestWaitAndStimulus(t *testing.T) {
	t.Parallel()
	const def = `
name: approval
steps:
  - id: review
    wait: { event: order.approved, key: "${ input.id }", timeout: 72h }
    output: approval
output: "${ vars.approval.by }"
`
	s := newScript(t, def)
	s.expect(0, runner.Start{Input: map[string]any{"id": 42}}, `bookmark order.approved/42; timer +72h0m0s; persist`)
	if s.st.Status != runner.StatusSuspended {
		t.Fatalf("status %s, want suspended", s.st.Status)
	}
	s.expect(time.Hour, runner.StimulusDelivered{Token: s.token("bookmark"), Payload: map[string]any{"by": "ada"}}, `cancel-timer; remove-bookmark; finish completed "ada"; persist`)

	timeout := newScript(t, def)
	timeout.apply(0, runner.Start{Input: map[string]any{"id": 7}})
	timeout.expect(72*time.Hour, runner.TimerFired{Token: timeout.token("timer")}, `remove-bookmark; finish failed timeout: no order.approved stimulus within 72h0m0s; persist`)
}

func TestDelayAndChild(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: parent
steps:
  - { id: cool, delay: 10s }
  - { id: audit, workflow: audit-trail, input: "${ input }", output: audit }
output: "${ vars.audit }"
`)
	s.expect(0, runner.Start{Input: "x"}, `timer +10s; persist`)
	s.expect(10*time.Second, runner.TimerFired{Token: s.token("timer")}, `child audit-trail "x"; persist`)
	s.expect(11*time.Second, runner.ChildCompleted{Token: s.token("child"), Output: "ok"}, `finish completed "ok"; persist`)
}

func TestCancelStopsEverything(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: busy
steps:
  - id: both
    parallel:
      - steps: [ { id: slow, activity: kit.work } ]
      - steps: [ { id: later, wait: { event: go, key: k, timeout: 1h } } ]
`)
	s.apply(0, runner.Start{})
	s.expect(time.Second, runner.Cancel{Reason: "operator"}, `cancel-activity; remove-bookmark; cancel-timer; finish cancelled cancelled: operator; persist`)
	// The state keeps why, as it keeps a failure: the engine writes it as
	// the instance's error.
	if e := s.st.Error; e == nil || e.Code != "cancelled" || e.Message != "operator" || e.Step != "" {
		t.Fatalf("state error after a cancel = %+v, want code cancelled with the reason", e)
	}
	s.expect(2*time.Second, runner.ActivityCompleted{Token: s.token("invoke")}, ``)
}

func TestPersistenceStrategies(t *testing.T) {
	t.Parallel()
	def := func(persistence, persist string) string {
		return `
name: p
persistence: ` + persistence + `
steps:
  - { id: one, activity: kit.echo` + persist + ` }
  - { id: two, activity: kit.echo }
`
	}
	tests := []struct{ name, def, want string }{
		{"lazy does not persist between activities", def("lazy", ""), `invoke kit.echo #1 null key=i1/two/e3`},
		{"activity persists after each", def("activity", ""), `invoke kit.echo #1 null key=i1/two/e3; persist`},
		{"persist: never overrides activity", def("activity", ", persist: never"), `invoke kit.echo #1 null key=i1/two/e3`},
		{"persist: always overrides lazy", def("lazy", ", persist: always"), `invoke kit.echo #1 null key=i1/two/e3; persist`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScript(t, tt.def)
			s.apply(0, runner.Start{})
			s.expect(time.Second, runner.ActivityCompleted{Token: s.token("invoke")}, tt.want)
		})
	}
}

// State survives a JSON round trip mid-run, as it does through the store.
func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: rt
steps:
  - id: each
    foreach: "${ input.items }"
    as: item
    concurrency: 2
    do:
      - { id: ship, activity: shipping.ship, input: "${ item }", output: last }
      - { id: rest, delay: 1s }
output: "${ vars.last }"
`)
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0}, runner.Start{Input: map[string]any{"items": []any{"a", "b"}}})
	tok := tokensOf(acts)
	b, err := json.Marshal(s.st)
	if err != nil {
		t.Fatal(err)
	}
	var back runner.State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	s.st = &back
	s.expect(time.Second, runner.ActivityCompleted{Token: tok["a"], Output: "A"}, `timer +1s`)
	timerA := s.token("timer")
	s.expect(time.Second, runner.ActivityCompleted{Token: tok["b"], Output: "B"}, `timer +1s; persist`)
	s.apply(2*time.Second, runner.TimerFired{Token: timerA})
	got := s.apply(2*time.Second, runner.TimerFired{Token: s.token("timer")})
	if got != `finish completed "B"; persist` {
		t.Fatalf("finish: %s", got)
	}
}

func TestHistoryRecords(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: h
steps:
  - { id: one, activity: kit.echo, retry: { max_attempts: 2, initial_interval: 1s } }
`)
	var types []string
	collect := func(acts []runner.Action) {
		for _, a := range acts {
			if r, ok := a.(runner.Record); ok {
				types = append(types, r.Type)
			}
		}
	}
	c := runner.Context{InstanceID: "i1", Now: t0}
	collect(s.p.Apply(s.st, c, runner.Start{}))
	collect(s.p.Apply(s.st, c, runner.ActivityFailed{Token: s.st.Root.Run.Token, Failure: retry.Of(retry.KindTimeout)}))
	collect(s.p.Apply(s.st, c, runner.TimerFired{Token: s.st.Root.Run.Token}))
	collect(s.p.Apply(s.st, c, runner.ActivityCompleted{Token: s.st.Root.Run.Token}))
	want := []string{"instance_started", "step_started", "activity_scheduled", "activity_failed", "retry_scheduled", "activity_scheduled", "activity_completed", "step_completed", "instance_completed"}
	if strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("history:\n got %v\nwant %v", types, want)
	}
}

func TestRuntimeExpressionErrorFailsTheInstance(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: expr
steps:
  - { id: use, activity: kit.echo, input: "${ vars.missing.id }" }
`)
	got := s.apply(0, runner.Start{})
	if !strings.HasPrefix(got, `finish failed expression: step "use", input: expression "${ vars.missing.id }"`) || !strings.HasSuffix(got, "; persist") {
		t.Fatalf("got %s, want the instance failed with code expression, naming the step, its field and the expression", got)
	}
}

func TestFailingBranchCancelsItsSibling(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: siblings
steps:
  - id: both
    parallel:
      - steps: [ { id: long, activity: kit.work, input: long } ]
      - steps: [ { id: short, activity: kit.fail, input: short, retry: { max_attempts: 1 } } ]
`)
	tok := tokensOf(s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0}, runner.Start{}))
	s.expect(time.Second, runner.ActivityFailed{Token: tok["short"], Failure: retry.Failure{Kind: retry.KindActivity, Code: "nope"}, Message: "no"},
		`cancel-activity; finish failed nope: no; persist`)
	// The cancelled sibling's late result changes nothing.
	s.expect(2*time.Second, runner.ActivityCompleted{Token: tok["long"]}, ``)
	if s.st.Error == nil || s.st.Error.Step != "steps[0].parallel[1][0]" {
		t.Errorf("error %+v, want the short step's path", s.st.Error)
	}
}

func TestRecoverReschedulesOrphanedAttempts(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: orphan
steps:
  - id: both
    parallel:
      - steps: [ { id: a, activity: kit.work, input: a } ]
      - steps: [ { id: b, activity: kit.work, input: b } ]
`)
	first := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0}, runner.Start{})
	tok := tokensOf(first)
	keys := map[string]string{}
	for _, a := range first {
		if inv, ok := a.(runner.Invoke); ok {
			keys[fmt.Sprint(inv.Input)] = inv.IdempotencyKey
		}
	}
	// The execution running them died; a new one recovers, with the
	// details a's attempt persisted before it was lost (b's had none).
	acts := s.p.Apply(s.st, runner.Context{InstanceID: "i1", Now: t0.Add(time.Minute)}, runner.Recover{
		Heartbeats: map[string]json.RawMessage{tok["a"]: json.RawMessage(`{"done_ms":40}`), "a999": json.RawMessage(`{"stale":true}`)},
	})
	again := map[string]runner.Invoke{}
	for _, a := range acts {
		if inv, ok := a.(runner.Invoke); ok {
			again[fmt.Sprint(inv.Input)] = inv
		}
	}
	if len(again) != 2 || again["a"].Attempt != 2 || again["b"].Attempt != 2 || again["a"].Token == tok["a"] {
		t.Fatalf("after Recover: %+v; want both rescheduled as attempt 2 with new tokens", again)
	}
	if string(again["a"].LastHeartbeat) != `{"done_ms":40}` || again["b"].LastHeartbeat != nil {
		t.Errorf("recovered attempts' last heartbeats: a=%s b=%s; want a's persisted details and none for b", again["a"].LastHeartbeat, again["b"].LastHeartbeat)
	}
	if again["a"].IdempotencyKey != keys["a"] || again["b"].IdempotencyKey != keys["b"] {
		t.Errorf("idempotency keys %s, %s; want the first attempts' %v", again["a"].IdempotencyKey, again["b"].IdempotencyKey, keys)
	}
	// A late completion of the dead attempt is refused.
	s.expect(2*time.Minute, runner.ActivityCompleted{Token: tok["a"]}, `refused`)
	s.apply(2*time.Minute, runner.ActivityCompleted{Token: again["a"].Token})
	s.expect(2*time.Minute, runner.ActivityCompleted{Token: again["b"].Token}, `finish completed null; persist`)
}

// TestNonFiniteInputFailsWithoutAnAttempt: an activity's input that JSON
// cannot hold (1/0 is +Inf) fails the step when it starts, as any
// expression error does: no attempt is invoked, so none can be retried.
func TestNonFiniteInputFailsWithoutAnAttempt(t *testing.T) {
	t.Parallel()
	s := newScript(t, `
name: expr
steps:
  - { id: div, activity: kit.echo, input: { ratio: "${ 1/0 }" }, retry: { max_attempts: 5 } }
`)
	got := s.apply(0, runner.Start{})
	if strings.Contains(got, "invoke") || !strings.HasPrefix(got, `finish failed expression: step "div", input: expression "${ 1/0 }": yields +Inf`) {
		t.Fatalf("got %s, want the instance failed with code expression, naming the step, its field and the expression, and nothing invoked", got)
	}
}
