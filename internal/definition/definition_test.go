package definition

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// fakeCatalog knows plugins with their activities and saved workflows.
type fakeCatalog struct {
	activities map[string][]string
	workflows  map[string]*Definition
}

func (c fakeCatalog) HasPlugin(p string) bool { _, ok := c.activities[p]; return ok }
func (c fakeCatalog) HasActivity(p, a string) bool {
	return contains(c.activities[p], a)
}
func (c fakeCatalog) Activities(p string) []string { return c.activities[p] }
func (c fakeCatalog) Workflow(name string) (*Definition, bool) {
	d, ok := c.workflows[name]
	return d, ok
}

func mustParse(t *testing.T, src string) *Definition {
	t.Helper()
	d, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func specCatalog(t *testing.T) fakeCatalog {
	return fakeCatalog{
		activities: map[string][]string{
			"payments": {"charge"}, "shipping": {"ship"}, "notify": {"email", "sms"},
		},
		workflows: map[string]*Definition{
			"audit-trail": mustParse(t, "name: audit-trail\nsteps: [{id: log, set: {logged: true}}]"),
		},
	}
}

func TestSpecExample(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"testdata/order-fulfilment.yaml", "testdata/order-fulfilment.json"} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			def, err := Load(data, specCatalog(t))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if err := validateDefinition(def, specCatalog(t)); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if def.Name != "order-fulfilment" || def.Persistence != PersistenceLazy || len(def.Steps) != 7 {
				t.Fatalf("got %+v", def)
			}
			if def.Triggers[0].Event != "order.created" {
				t.Errorf("trigger = %q", def.Triggers[0].Event)
			}
			charge := def.Steps[0]
			want := Retry{MaxAttempts: 5, InitialInterval: 500 * time.Millisecond, Backoff: 2, MaxInterval: 30 * time.Second, Jitter: true, NonRetryable: []string{"card_declined"}}
			if charge.Kind != KindActivity || charge.Activity.Plugin != "payments" || charge.Activity.Name != "charge" ||
				charge.Activity.Timeout != 30*time.Second || charge.Activity.HeartbeatTimeout != 10*time.Second ||
				charge.Output != "charge" || charge.Persist != PersistAlways || !reflect.DeepEqual(charge.Activity.Retry, want) {
				t.Errorf("charge = %+v %+v", charge, charge.Activity)
			}
			review, ok := def.Step("review")
			if !ok || review.Wait.Event != "order.approved" || review.Wait.Timeout != 72*time.Hour || review.Output != "approval" {
				t.Errorf("review = %+v", review)
			}
			ship, _ := def.Step("ship-items")
			if ship.Foreach.As != "item" || ship.Foreach.Concurrency != 4 || ship.Foreach.Do[0].ID != "ship" {
				t.Errorf("ship-items = %+v", ship.Foreach)
			}
			if n := len(def.Steps[3].Parallel); n != 2 {
				t.Errorf("parallel branches = %d", n)
			}
			if def.Steps[4].Delay != 10*time.Second || def.Steps[5].Workflow.Name != "audit-trail" {
				t.Errorf("delay/workflow = %v %+v", def.Steps[4].Delay, def.Steps[5].Workflow)
			}
			var ids []string
			def.Walk(func(_ string, s *Step) bool { ids = append(ids, s.ID); return true })
			if got := strings.Join(ids, ","); got != "charge,big-order,review,ship-items,ship,notify,mail,sms,cool-off,audit,done" {
				t.Errorf("walk order = %s", got)
			}
		})
	}
}

// base is a valid definition; each problem case replaces one step.
func withStep(step string) string {
	return "name: wf\nsteps:\n  - " + strings.ReplaceAll(step, "\n", "\n    ") + "\n"
}

func TestProblems(t *testing.T) {
	t.Parallel()
	cat := specCatalog(t)
	cat.workflows["loop-b"] = mustParse(t, "name: loop-b\nsteps: [{id: s, workflow: wf}]")
	tests := []struct {
		name, src, path, msg string
	}{
		{"syntax", "name: wf\nsteps: [\n", RootPath, "syntax error"},
		{"empty", "", RootPath, "empty document"},
		{"not a map", "[1, 2]", RootPath, "want a workflow definition"},
		{"unknown top field", "name: wf\nstep: []\nsteps: [{id: a, delay: 1s}]", "step", `unknown field "step"`},
		{"missing name", "steps: [{id: a, delay: 1s}]", "name", "required"},
		{"bad name", "name: Order_Flow!\nsteps: [{id: a, delay: 1s}]", "name", "invalid workflow name"},
		{"name wrong type", "name: 12\nsteps: [{id: a, delay: 1s}]", "name", "got a number, want a string"},
		{"persistence", "name: wf\npersistence: eager\nsteps: [{id: a, delay: 1s}]", "persistence", `unknown persistence "eager"`},
		{"no steps", "name: wf\nsteps: []", "steps", "at least one step"},
		{"trigger event missing", "name: wf\ntriggers: [{}]\nsteps: [{id: a, delay: 1s}]", "triggers[0].event", "required"},
		{"trigger bad event", "name: wf\ntriggers: [{event: 'a b'}]\nsteps: [{id: a, delay: 1s}]", "triggers[0].event", "invalid event name"},
		{"trigger unknown field", "name: wf\ntriggers: [{event: e, when: x}]\nsteps: [{id: a, delay: 1s}]", "triggers[0].when", `unknown field "when"`},
		{"unknown step kind", withStep("id: a\nsleep: 1s"), "steps[0].sleep", `unknown step kind or field "sleep"`},
		{"no kind", withStep("id: a"), "steps[0]", "step has no kind"},
		{"two kinds", withStep("id: a\ndelay: 1s\nset: {x: 1}"), "steps[0]", "step has 2 kinds (delay, set)"},
		{"field of another kind", withStep("id: a\ndelay: 1s\nas: x"), "steps[0].as", `field "as" does not apply to delay steps`},
		{"unknown field", withStep("id: a\nactivity: payments.charge\ntimeuot: 1s"), "steps[0].timeuot", `unknown field "timeuot"`},
		{"step not a map", "name: wf\nsteps: [{id: a, delay: 1s}, 7]", "steps[1]", "got a number, want a step"},
		{"missing id", withStep("delay: 1s"), "steps[0].id", "required"},
		{"bad id", withStep("id: Big Order\ndelay: 1s"), "steps[0].id", "invalid step id"},
		{"duplicate id nested", withStep("id: a\nif: ${ true }\nthen: [{id: a, delay: 1s}]"), "steps[0].then[0].id", `duplicate step id "a", first used at steps[0]`},
		{"bad persist", withStep("id: a\ndelay: 1s\npersist: sometimes"), "steps[0].persist", `unknown persist "sometimes"`},
		{"unknown plugin", withStep("id: a\nactivity: billing.charge"), "steps[0].activity", `unknown plugin "billing"`},
		{"unknown activity", withStep("id: a\nactivity: payments.refund"), "steps[0].activity", `plugin "payments" has no activity "refund"`},
		{"activity without dot", withStep("id: a\nactivity: charge"), "steps[0].activity", "is not <plugin>.<activity>"},
		{"expression does not compile", withStep("id: a\nactivity: payments.charge\ninput: {amount: '${ input.total + }'}"), "steps[0].input.amount", "does not compile"},
		{"unknown variable", withStep("id: a\nactivity: payments.charge\ninput: '${ item }'"), "steps[0].input", "unknown name item"},
		{"unterminated expression", withStep("id: a\nactivity: payments.charge\ninput: 'x ${ input'"), "steps[0].input", "unterminated"},
		{"bad duration", withStep("id: a\nactivity: payments.charge\ntimeout: 30 seconds"), "steps[0].timeout", `invalid duration "30 seconds"`},
		{"duration not a string", withStep("id: a\ndelay: 30"), "steps[0].delay", "want a duration"},
		{"zero delay", withStep("id: a\ndelay: 0s"), "steps[0].delay", "greater than zero"},
		{"heartbeat over timeout", withStep("id: a\nactivity: payments.charge\ntimeout: 10s\nheartbeat_timeout: 1m"), "steps[0].heartbeat_timeout", "heartbeat_timeout 1m0s is larger than timeout 10s"},
		{"timeout over schedule_to_close", withStep("id: a\nactivity: payments.charge\ntimeout: 10m\nschedule_to_close: 1m"), "steps[0].timeout", "larger than schedule_to_close"},
		{"retry max_attempts", withStep("id: a\nactivity: payments.charge\nretry: {max_attempts: 0}"), "steps[0].retry.max_attempts", "at least 1"},
		{"retry backoff", withStep("id: a\nactivity: payments.charge\nretry: {backoff: 0.5}"), "steps[0].retry.backoff", "backoff 0.5 must be at least 1"},
		{"retry initial_interval", withStep("id: a\nactivity: payments.charge\nretry: {initial_interval: 0s}"), "steps[0].retry.initial_interval", "greater than zero"},
		{"retry max_interval", withStep("id: a\nactivity: payments.charge\nretry: {initial_interval: 10s, max_interval: 1s}"), "steps[0].retry.max_interval", "less than initial_interval"},
		{"retry jitter type", withStep("id: a\nactivity: payments.charge\nretry: {jitter: maybe}"), "steps[0].retry.jitter", "want true or false"},
		{"retry unknown field", withStep("id: a\nactivity: payments.charge\nretry: {attempts: 3}"), "steps[0].retry.attempts", `unknown field "attempts"`},
		{"retry non_retryable", withStep("id: a\nactivity: payments.charge\nretry: {non_retryable: [ok, 3]}"), "steps[0].retry.non_retryable[1]", "want a string"},
		{"wait key missing", withStep("id: a\nif: ${ true }\nthen: [{id: w, wait: {event: e}}]"), "steps[0].then[0].wait.key", "required"},
		{"wait event missing", withStep("id: w\nwait: {key: k}"), "steps[0].wait.event", "required"},
		{"wait unknown field", withStep("id: w\nwait: {event: e, key: k, until: x}"), "steps[0].wait.until", `unknown field "until"`},
		{"if not bool", withStep("id: a\nif: ${ 1 + 2 }\nthen: [{id: b, delay: 1s}]"), "steps[0].if", "expected bool"},
		{"if template", withStep("id: a\nif: x ${ true }\nthen: [{id: b, delay: 1s}]"), "steps[0].if", "always yields a string"},
		{"if literal string", withStep("id: a\nif: yes please\nthen: [{id: b, delay: 1s}]"), "steps[0].if", "got a string, want a boolean"},
		{"if without then", withStep("id: a\nif: ${ true }"), "steps[0].then", "at least one step"},
		{"foreach not list", withStep("id: a\nforeach: ${ 'abc' }\nas: x\ndo: [{id: b, delay: 1s}]"), "steps[0].foreach", "want a list"},
		{"foreach as missing", withStep("id: a\nforeach: ${ input.items }\ndo: [{id: b, delay: 1s}]"), "steps[0].as", "required"},
		{"foreach as reserved", withStep("id: a\nforeach: ${ input.items }\nas: vars\ndo: [{id: b, delay: 1s}]"), "steps[0].as", "reserved"},
		{"foreach concurrency", withStep("id: a\nforeach: ${ input.items }\nas: x\nconcurrency: 0\ndo: [{id: b, delay: 1s}]"), "steps[0].concurrency", "at least 1"},
		{"foreach shadows", withStep("id: a\nforeach: ${ input.items }\nas: x\ndo: [{id: b, foreach: '${ x }', as: x, do: [{id: c, delay: 1s}]}]"), "steps[0].do[0].as", "hides"},
		{"parallel empty", withStep("id: a\nparallel: []"), "steps[0].parallel", "at least one branch"},
		{"parallel branch empty", withStep("id: a\nparallel: [{steps: []}]"), "steps[0].parallel[0].steps", "at least one step"},
		{"unknown workflow", withStep("id: a\nworkflow: nowhere"), "steps[0].workflow", `unknown workflow "nowhere"`},
		{"workflow cycle", withStep("id: a\nworkflow: loop-b"), "steps[0].workflow", "cycle of child workflows: wf → loop-b → wf"},
		{"output on delay", withStep("id: a\ndelay: 1s\noutput: x"), "steps[0].output", `field "output" does not apply to delay steps`},
		{"bad output name", withStep("id: a\nactivity: payments.charge\noutput: my-var"), "steps[0].output", "invalid variable name"},
		{"set bad name", withStep("id: a\nset: {'a b': 1}"), `steps[0].set["a b"]`, "invalid variable name"},
		{"fail without code", withStep("id: a\nfail: {message: oops}"), "steps[0].fail.code", "required"},
		{"fail message type", withStep("id: a\nfail: {code: x, message: [1]}"), "steps[0].fail.message", "want a string"},
		{"nan", withStep("id: a\nset: {x: .nan}"), "steps[0].set.x", "not finite"},
		{"merge key", "name: wf\nsteps: [{<<: {id: a}, delay: 1s}]", "steps[0]", "merge keys"},
		{"two documents", "name: wf\n---\nname: x\n", RootPath, "more than one YAML document"},
		{"record unknown", "name: wf\nrecord: failures\nsteps: [{id: a, delay: 1s}]", "record", `record policy "failures": want off, failed, all or a percentage`},
		{"record bare fraction", "name: wf\nrecord: 0.05\nsteps: [{id: a, delay: 1s}]", "record", "got a number, want off, failed, all or a percentage of attempts such as 5% (write 5% for a share of 0.05)"},
		{"record zero percent", withStep("id: a\nactivity: payments.charge\nrecord: 0%"), "steps[0].record", "more than 0% and at most 100%"},
		{"record over 100 percent", withStep("id: a\nactivity: payments.charge\nrecord: 150%"), "steps[0].record", "more than 0% and at most 100%"},
		{"record not a string", withStep("id: a\nactivity: payments.charge\nrecord: [all]"), "steps[0].record", "got a list, want off, failed, all"},
		{"record on a delay", withStep("id: a\ndelay: 1s\nrecord: all"), "steps[0].record", `field "record" does not apply to delay steps`},
		{"record nested", withStep("id: a\nif: ${ true }\nthen: [{id: b, activity: payments.charge, record: everything}]"), "steps[0].then[0].record", `record policy "everything"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tt.src), cat)
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) || !errors.Is(err, weft.ErrInvalidDefinition) {
				t.Fatalf("Load = %v, want a *weft.DefinitionError", err)
			}
			for _, p := range ve.Problems {
				if p.Path == tt.path && strings.Contains(p.Message, tt.msg) {
					return
				}
			}
			t.Errorf("no problem at %s containing %q in:\n%v", tt.path, tt.msg, strings.ReplaceAll(err.Error(), "; ", "\n"))
		})
	}
}

func TestManyProblems(t *testing.T) {
	t.Parallel()
	src := `name: Bad Name
persistence: sometimes
triggers: [{event: ""}]
steps:
  - id: a
    activity: payments.nope
    timeout: 5s
    heartbeat_timeout: 10s
    retry: {backoff: 0, max_attempts: 0}
  - id: a
    wait: {event: e}
  - id: c
    foreach: "${ input.items }"
    as: item
    concurrency: 0
    do:
      - {id: d, sleep: 1s}
      - {id: e, activity: payments.charge, input: "${ itme }"}
`
	_, err := Load([]byte(src), specCatalog(t))
	var ve *weft.DefinitionError
	if !errors.As(err, &ve) {
		t.Fatalf("Load = %v", err)
	}
	want := []string{
		"name", "persistence", "triggers[0].event",
		"steps[0].activity", "steps[0].heartbeat_timeout", "steps[0].retry.backoff", "steps[0].retry.max_attempts",
		"steps[1].id", "steps[1].wait.key",
		"steps[2].concurrency", "steps[2].do[0].sleep", "steps[2].do[1].input",
	}
	got := map[string]bool{}
	for _, p := range ve.Problems {
		got[p.Path] = true
		if p.Path == "" || p.Line == 0 {
			t.Errorf("problem without a location: %+v", p)
		}
	}
	for _, p := range want {
		if !got[p] {
			t.Errorf("missing a problem at %s", p)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(ve.Problems), len(want), strings.ReplaceAll(err.Error(), "; ", "\n"))
	}
	for i := 1; i < len(ve.Problems); i++ {
		if ve.Problems[i].Line < ve.Problems[i-1].Line {
			t.Errorf("problems not in document order: %v before %v", ve.Problems[i-1], ve.Problems[i])
		}
	}
}

func TestCycles(t *testing.T) {
	t.Parallel()
	wf := func(name string, children ...string) *Definition {
		src := "name: " + name + "\nsteps:\n  - {id: s0, delay: 1s}\n"
		for i := range children {
			src += "  - {id: c" + string(rune('a'+i)) + ", workflow: placeholder}\n"
		}
		d := mustParse(t, src)
		for i, c := range children {
			d.Steps[i+1].Workflow.Name = c // Parse would refuse a → a
		}
		return d
	}
	chain := map[string]*Definition{}
	for i := 1; i < 200; i++ {
		name := "w" + strconv.Itoa(i)
		if i == 199 {
			chain[name] = wf(name)
		} else {
			chain[name] = wf(name, "w"+strconv.Itoa(i+1))
		}
	}
	tests := []struct {
		name    string
		def     *Definition
		catalog map[string]*Definition
		want    string // "" for no problem
	}{
		{"a→a", wf("a", "a"), nil, "cycle of child workflows: a → a"},
		{"a→b→a", wf("a", "b"), map[string]*Definition{"b": wf("b", "a"), "a": wf("a")}, "cycle of child workflows: a → b → a"},
		{"a→b→c→b", wf("a", "b"), map[string]*Definition{"b": wf("b", "c"), "c": wf("c", "b")}, "cycle of child workflows: b → c → b"},
		{"diamond", wf("a", "b", "c"), map[string]*Definition{"b": wf("b", "d"), "c": wf("c", "d"), "d": wf("d")}, ""},
		{"deep chain", wf("a", "w1"), chain, ""},
		{"new version breaks old cycle", wf("a", "b"), map[string]*Definition{"b": wf("b", "a"), "a": wf("a", "b")}, "a → b → a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := validateDefinition(tt.def, fakeCatalog{workflows: tt.catalog})
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestHash(t *testing.T) {
	t.Parallel()
	yamlSrc, err := os.ReadFile("testdata/order-fulfilment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jsonSrc, err := os.ReadFile("testdata/order-fulfilment.json")
	if err != nil {
		t.Fatal(err)
	}
	base := mustParse(t, string(yamlSrc)).Hash()
	same := map[string]string{
		"json":                 string(jsonSrc),
		"comments and spacing": "# a comment\n" + strings.ReplaceAll(string(yamlSrc), ": ", ":   "),
		"canonical":            string(mustParse(t, string(yamlSrc)).Canonical()),
	}
	for name, src := range same {
		if got := mustParse(t, src).Hash(); got != base {
			t.Errorf("%s: hash %s, want %s", name, got, base)
		}
	}
	if len(base) != 64 {
		t.Errorf("hash %q is not sha256 hex", base)
	}
	small := "name: wf\nsteps: [{id: a, activity: p.q, input: {x: 1, y: '${ input.y }'}}]"
	smallHash := mustParse(t, small).Hash()
	equal := []string{
		"{\"steps\": [{\"input\": {\"y\": \"${ input.y }\", \"x\": 1}, \"activity\": \"p.q\", \"id\": \"a\"}], \"name\": \"wf\"}",
		"name: wf\npersistence: lazy\nsteps: [{id: a, activity: p.q, input: {x: 1.0, y: '${ input.y }'}, retry: {max_attempts: 3}}]",
	}
	for _, src := range equal {
		if got := mustParse(t, src).Hash(); got != smallHash {
			t.Errorf("%s: hash differs", src)
		}
	}
	changed := []string{
		strings.Replace(small, "x: 1", "x: 2", 1),
		strings.Replace(small, "x: 1", "x: '1'", 1),
		strings.Replace(small, "input.y", "input.z", 1),
		strings.Replace(small, "p.q", "p.r", 1),
		strings.Replace(small, "id: a", "id: b", 1),
		strings.Replace(small, "}}]", "}, timeout: 1s}]", 1),
		strings.Replace(small, "}}]", "}, retry: {jitter: true}}]", 1),
		small + "\npersistence: activity",
		small + "\ntriggers: [{event: e}]",
		small + "\noutput: 1",
	}
	for _, src := range changed {
		if got := mustParse(t, src).Hash(); got == smallHash {
			t.Errorf("%s: hash unchanged", src)
		}
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"500ms", 500 * time.Millisecond, true},
		{"72h", 72 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d12h", 36 * time.Hour, true},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"-1d", 0, false},
		{"99999999999d", 0, false},
		{"30", 0, false},
		{"2 seconds", 0, false}, // has a "d": once refused without the hint
		{"1d12 hours", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v", tt.in, got, err)
		}
		if err != nil && !strings.Contains(err.Error(), "e.g. 500ms, 30s, 72h or 7d") {
			t.Errorf("ParseDuration(%q): %v, without the hint", tt.in, err)
		}
	}
}

// TestMisspeltNamesGetOneProblemAndASuggestion: a misspelt step kind is
// one problem with a suggestion, not three (the unknown field, the step
// without a kind, the fields that need one); a misspelt field or activity
// gets a suggestion too.
func TestMisspeltNamesGetOneProblemAndASuggestion(t *testing.T) {
	t.Parallel()
	cat := specCatalog(t)
	tests := []struct {
		name, src string
		want      []string
	}{
		{"kind", "name: x\nsteps:\n  - id: a\n    activty: payments.charge\n    input: {a: 1}\n",
			[]string{`steps[0].activty: unknown step kind or field "activty"; did you mean activity?`}},
		{"field", "name: x\nsteps:\n  - id: a\n    activity: payments.charge\n    inptu: {a: 1}\n",
			[]string{`steps[0].inptu: unknown field "inptu"; did you mean input?`}},
		{"activity", "name: x\nsteps:\n  - id: a\n    activity: payments.chrage\n",
			[]string{`steps[0].activity: plugin "payments" has no activity "chrage"; did you mean charge?`}},
		{"nothing close", "name: x\nsteps:\n  - id: a\n    frobnicate: 1\n",
			[]string{`steps[0].frobnicate: unknown step kind or field "frobnicate"; step kinds are activity`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tt.src), cat)
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) {
				t.Fatalf("Load: %v, want a *weft.DefinitionError", err)
			}
			if len(ve.Problems) != len(tt.want) {
				t.Errorf("%d problems, want %d: %v", len(ve.Problems), len(tt.want), err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\nwant it to contain %s", err, w)
				}
			}
		})
	}
}

// TestDuplicateKeysAreRefused: a key twice in one map, at any depth and in
// YAML or JSON, is one problem at the second key, naming it and where the
// first is. yaml.v3 does not refuse it when decoding into a yaml.Node, and
// encoding/json never does: before, the last one silently won.
func TestDuplicateKeysAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, path, msg string
		line, column         int
	}{
		{"top level", "name: wf\nsteps: [{id: a, delay: 1s}]\nname: other\n", "name",
			`duplicate key "name": it is already at line 1, column 1 of this map`, 3, 1},
		{"step field", "name: wf\nsteps:\n  - id: a\n    activity: payments.charge\n    timeout: 10s\n    timeout: 1m\n", "steps[0].timeout",
			`duplicate key "timeout": it is already at line 5, column 5 of this map`, 6, 5},
		{"quoted and plain spelling", "name: wf\nsteps:\n  - id: a\n    'id': b\n    delay: 1s\n", "steps[0].id",
			`duplicate key "id": it is already at line 3, column 5 of this map`, 4, 5},
		{"inside a value", "name: wf\nsteps:\n  - id: a\n    activity: payments.charge\n    input: {amount: 1, amount: 2}\n", "steps[0].input.amount",
			`duplicate key "amount": it is already at line 5, column 13 of this map`, 5, 24},
		{"nested step", "name: wf\nsteps:\n  - id: a\n    if: ${ true }\n    then:\n      - {id: b, delay: 1s, delay: 2s}\n", "steps[0].then[0].delay",
			`duplicate key "delay": it is already at line 6, column 17 of this map`, 6, 28},
		{"retry policy", "name: wf\nsteps:\n  - id: a\n    activity: payments.charge\n    retry: {max_attempts: 2, max_attempts: 5}\n", "steps[0].retry.max_attempts",
			`duplicate key "max_attempts"`, 5, 30},
		{"set variable", "name: wf\nsteps:\n  - id: a\n    set: {x: 1, x: 2}\n", "steps[0].set.x",
			`duplicate key "x": it is already at line 4, column 11 of this map`, 4, 17},
		{"json", "{\"name\": \"wf\",\n \"steps\": [{\"id\": \"a\", \"delay\": \"1s\", \"delay\": \"2s\"}]}\n", "steps[0].delay",
			`duplicate key "delay": it is already at line 2, column 24 of this map`, 2, 39},
		{"json top level", `{"name": "wf", "steps": [{"id": "a", "delay": "1s"}], "name": "x"}`, "name",
			`duplicate key "name": it is already at line 1, column 2 of this map`, 1, 55},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tt.src), specCatalog(t))
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) {
				t.Fatalf("Load = %v, want a *weft.DefinitionError", err)
			}
			if len(ve.Problems) != 1 {
				t.Fatalf("got %d problems, want the duplicate only:\n%s", len(ve.Problems), strings.ReplaceAll(err.Error(), "; ", "\n"))
			}
			p := ve.Problems[0]
			if p.Path != tt.path || !strings.Contains(p.Message, tt.msg) || p.Line != tt.line || p.Column != tt.column {
				t.Errorf("problem %+v, want %s: %s… at line %d, column %d", p, tt.path, tt.msg, tt.line, tt.column)
			}
		})
	}
}

// TestParseSavedToleratesDuplicateKeys: a version saved before duplicate
// keys were refused still parses for the engine, the last key winning as
// it did then, so that its instances keep running.
func TestParseSavedToleratesDuplicateKeys(t *testing.T) {
	t.Parallel()
	src := []byte("name: wf\nsteps:\n  - id: a\n    delay: 1s\n    persist: never\n    persist: always\n  - {id: b, set: {x: 1, x: 2}}\n")
	if _, err := Parse(src); err == nil {
		t.Fatal("Parse accepts duplicate keys")
	}
	def, err := ParseSaved(src)
	if err != nil {
		t.Fatalf("ParseSaved: %v", err)
	}
	if def.Steps[0].Persist != PersistAlways {
		t.Errorf("persist %q, want the last one, always", def.Steps[0].Persist)
	}
	v, err := def.Steps[1].Set[0].Value.Eval(Env{})
	if err != nil || v != 2 {
		t.Errorf("x = %v, %v; want the last one, 2", v, err)
	}
	// What ParseSaved tolerates is only what was accepted before.
	if _, err := ParseSaved([]byte("name: wf\nsteps: [{id: a, delay: 0s}]\n")); err == nil {
		t.Error("ParseSaved accepts a zero delay")
	}
}

// hostCatalog is specCatalog on a host whose activity_timeout is timeout.
type hostCatalog struct {
	fakeCatalog
	timeout time.Duration
}

func (c hostCatalog) DefaultActivityTimeout() time.Duration { return c.timeout }

// TestHeartbeatTimeoutAgainstTheEffectiveTimeout: heartbeat_timeout may not
// exceed the step's timeout, the explicit one or, without one, the host's
// default (what the catalog says, DefaultActivityTimeout when it says
// nothing). The problem names the step by its path and both values. A nil
// catalog knows no host and checks only an explicit timeout.
func TestHeartbeatTimeoutAgainstTheEffectiveTimeout(t *testing.T) {
	t.Parallel()
	step := func(fields string) string {
		return withStep("id: poll\nactivity: payments.charge\n" + fields)
	}
	spec := specCatalog(t)
	tests := []struct {
		name, src string
		cat       Catalog
		want      string // the problem at steps[0].heartbeat_timeout; "" for none
	}{
		{"over the explicit timeout", step("timeout: 10s\nheartbeat_timeout: 1m"), spec,
			"heartbeat_timeout 1m0s is larger than timeout 10s"},
		{"over the default timeout", step("heartbeat_timeout: 15m"), spec,
			"heartbeat_timeout 15m0s is larger than timeout 10m0s, the host's default for a step without one (engine.activity_timeout); set a timeout of at least 15m0s, or a shorter heartbeat_timeout"},
		{"over the host's own default", step("heartbeat_timeout: 2m"), hostCatalog{spec, time.Minute},
			"heartbeat_timeout 2m0s is larger than timeout 1m0s, the host's default"},
		{"within the host's own default", step("heartbeat_timeout: 15m"), hostCatalog{spec, time.Hour}, ""},
		{"equal to the default", step("heartbeat_timeout: 10m"), spec, ""},
		{"an explicit timeout over the default", step("timeout: 1h\nheartbeat_timeout: 15m"), spec, ""},
		{"nested", withStep("id: a\nif: ${ true }\nthen: [{id: poll, activity: payments.charge, heartbeat_timeout: 11m}]"), spec,
			"heartbeat_timeout 11m0s is larger than timeout 10m0s, the host's default"},
		{"no catalog", step("heartbeat_timeout: 15m"), nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Load([]byte(tt.src), tt.cat)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load = %v, want no problem", err)
				}
				return
			}
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 {
				t.Fatalf("Load = %v, want one problem", err)
			}
			p := ve.Problems[0]
			path := "steps[0].heartbeat_timeout"
			if tt.name == "nested" {
				path = "steps[0].then[0].heartbeat_timeout"
			}
			if p.Path != path || !strings.HasPrefix(p.Message, tt.want) || p.Line == 0 {
				t.Errorf("problem %+v, want at %s: %s…", p, path, tt.want)
			}
		})
	}
}

// validateDefinition is validate's problems as Load reports them: a
// *weft.DefinitionError, or nil.
func validateDefinition(def *Definition, catalog Catalog) error {
	ps := validate(def, catalog)
	if len(ps) == 0 {
		return nil
	}
	e := &weft.DefinitionError{Problems: ps}
	if def != nil {
		e.Name = def.Name
	}
	return e
}
