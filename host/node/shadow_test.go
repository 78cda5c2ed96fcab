package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// shadowed is a workflow that keeps the tape of every attempt of its one
// activity, cls.act, which it gives {"k": <the instance's k>}.
const shadowed = `
name: shadowed
record: all
steps:
  - id: act
    activity: cls.act
    input: { k: "${ input.k }" }
    retry: { max_attempts: 1 }
`

// The classes of input a shadow test sends, by the letter in its k, and
// what the candidate of clsModule does with each.
const (
	classSame      = 'S' // echoes, as the recorded version does
	classDifferent = 'D' // answers {"k":"X"}
	classDiverged  = 'V' // asks whether it is cancelled first
	classFailed    = 'F' // fails with the code nope
	classSlower    = 'W' // spins before echoing
	classFaster    = 'Q' // echoes; the recorded version spins first
)

// clsModule is a plugin with one activity, act, which echoes its input,
// an object whose last member is a one-letter string (the class,
// found at the input's third byte from its end). The recorded version
// (candidate false) spins a loop before echoing class Q; the candidate
// treats the classes as the constants above say.
func clsModule(t *testing.T, candidate bool) []byte {
	t.Helper()
	const manifest = `{"activities":[{"name":"act"}]}`
	var body string
	if !candidate {
		body = `(if (i32.eq (local.get $c) (i32.const 81)) (then (call $spin)))`
	} else {
		body = `
    (if (i32.eq (local.get $c) (i32.const 68)) (then
      (call $result (i32.const 512) (i32.const 9)) (return (i32.const 0))))
    (if (i32.eq (local.get $c) (i32.const 86)) (then (drop (call $cancelled))))
    (if (i32.eq (local.get $c) (i32.const 70)) (then
      (call $result (i32.const 600) (i32.const 45)) (return (i32.const 1))))
    (if (i32.eq (local.get $c) (i32.const 87)) (then (call $spin)))`
	}
	return testplugins.WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "cancelled" (func $cancelled (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "%s")
  (data (i32.const 512) "{\"k\":\"X\"}")
  (data (i32.const 600) "{\"code\":\"nope\",\"message\":\"candidate refuses\"}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (func $spin (local $i i32)
    (local.set $i (i32.const 200000))
    (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i))))
  (func (export "weft_invoke") (param $p i32) (param $alen i32) (param $ilen i32) (result i32) (local $in i32) (local $c i32)
    (local.set $in (i32.add (local.get $p) (local.get $alen)))
    (local.set $c (i32.load8_u (i32.sub (i32.add (local.get $in) (local.get $ilen)) (i32.const 3))))
    %s
    (call $result (local.get $in) (local.get $ilen)) (i32.const 0)))`,
		strings.ReplaceAll(manifest, `"`, `\"`), len(manifest), body))
}

// runShadowed opens a node, stores clsModule's recorded version as
// plugin cls, and runs one instance of shadowed per class in classes,
// in turn; it returns the node and each instance's class by its id.
func runShadowed(t *testing.T, classes string) (*node.Node, map[string]byte) {
	t.Helper()
	cfg := config(t.TempDir())
	cfg.Engine.Tapes = engine.TapeConfig{Policy: weft.DefaultRecordPolicy}
	n, _, _ := open(t, cfg)
	return n, recordClasses(t, n, classes)
}

// recordClasses stores clsModule's recorded version as plugin cls on n,
// and runs one instance of shadowed per class in classes, in turn; it
// returns each instance's class by its id.
func recordClasses(t *testing.T, n *node.Node, classes string) map[string]byte {
	t.Helper()
	ctx := context.Background()
	if _, _, err := n.PutPlugin(ctx, "cls", clsModule(t, false)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Engine().SaveDefinition(ctx, []byte(shadowed)); err != nil {
		t.Fatal(err)
	}
	class := make(map[string]byte, len(classes))
	ids := make([]string, 0, len(classes))
	for i := range len(classes) {
		inst, _, err := n.Engine().Start(ctx, "shadowed", json.RawMessage(fmt.Sprintf(`{"k":%q}`, classes[i:i+1])), "")
		if err != nil {
			t.Fatal(err)
		}
		class[inst.ID] = classes[i]
		ids = append(ids, inst.ID)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		if got, err := n.Engine().WaitFinished(wctx, id); err != nil || got.Status != weft.StatusCompleted {
			t.Fatalf("instance %s of class %c: %+v, %v; want completed", id, class[id], got, err)
		}
	}
	return class
}

// TestShadowClassifies: a candidate that differs from the recorded version
// in one way per class of input, shadowed over 100 recorded attempts,
// has each attempt classified by what it did differently, and the sums
// add up.
func TestShadowClassifies(t *testing.T) {
	t.Parallel()
	var classes strings.Builder
	for i := range 100 {
		classes.WriteByte("SDVFWQ"[i%6])
	}
	n, class := runShadowed(t, classes.String())
	ctx := context.Background()
	cand := clsModule(t, true)
	before, err := n.GetPlugin(ctx, "cls")
	if err != nil {
		t.Fatal(err)
	}

	rep, err := n.Shadow(ctx, "cls", cand, weft.TapeQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if rep.CandidateVersion != plugins.Hash(cand) || rep.Query.Plugin != "cls" || len(rep.Attempts) != 100 || rep.Summary.Attempts != 100 {
		t.Fatalf("report of %s over %d attempts (summary %+v), want the candidate %s over 100", rep.CandidateVersion, len(rep.Attempts), rep.Summary, plugins.Hash(cand))
	}
	want := map[byte]struct {
		outcome weft.ReplayOutcome
		speed   weft.ShadowSpeed
	}{
		classSame:      {weft.ReplaySame, weft.ShadowAlike},
		classDifferent: {weft.ReplayDifferentOutput, weft.ShadowAlike},
		classDiverged:  {weft.ReplayDiverged, weft.ShadowSpeedUnknown},
		classFailed:    {weft.ReplayFailed, weft.ShadowAlike},
		classSlower:    {weft.ReplaySame, weft.ShadowSlower},
		classFaster:    {weft.ReplaySame, weft.ShadowFaster},
	}
	wantSum := weft.ShadowSummary{Attempts: 100, Outcomes: map[weft.ReplayOutcome]int{}}
	seen := map[string]bool{}
	for i, a := range rep.Attempts {
		c, ok := class[a.Key.InstanceID]
		if !ok || seen[a.Key.InstanceID] {
			t.Fatalf("attempt %d of the report, %s: not one of the instances run, or twice", i, a.Key)
		}
		seen[a.Key.InstanceID] = true
		if i > 0 && a.RecordedAt.After(rep.Attempts[i-1].RecordedAt) {
			t.Errorf("attempt %d recorded at %s, after the one before it (%s): want newest first", i, a.RecordedAt, rep.Attempts[i-1].RecordedAt)
		}
		w := want[c]
		if a.Outcome != w.outcome || a.Baseline != weft.ReplaySame || a.Workflow != "shadowed" || a.Activity != "act" || a.Error != "" {
			t.Errorf("class %c (%s): outcome %s, baseline %s, workflow %q, activity %q, error %q; want %s, same, shadowed, act, none",
				c, a.Key, a.Outcome, a.Baseline, a.Workflow, a.Activity, a.Error, w.outcome)
			continue
		}
		// A diverged replay stops at the call the tape does not hold: its
		// fuel is not the whole attempt's, and no speed is said.
		if w.speed != weft.ShadowSpeedUnknown && a.Speed != w.speed {
			t.Errorf("class %c (%s): speed %q (fuel %d, baseline %d), want %q", c, a.Key, a.Speed, a.Fuel, a.BaselineFuel, w.speed)
		}
		if a.BaselineFuel == 0 {
			t.Errorf("class %c (%s): no baseline fuel", c, a.Key)
		}
		switch c {
		case classDifferent:
			var diff []map[string]any
			if err := json.Unmarshal(a.Diff, &diff); err != nil || fmt.Sprint(diff) != "[map[op:replace path:/k value:X]]" {
				t.Errorf("class D (%s): diff %s, want the replacement of /k by X", a.Key, a.Diff)
			}
		case classDiverged:
			if d := a.Divergence; d == nil || d.Got.Kind != "cancelled" || d.Index != 0 {
				t.Errorf("class V (%s): divergence %+v, want the guest's cancelled at call 0", a.Key, d)
			}
		case classFailed:
			if a.Failure == nil || a.Failure.Code != "nope" || a.RecordedFailure != nil || string(a.RecordedOutput) != `{"k":"F"}` {
				t.Errorf("class F (%s): failure %+v, recorded %+v %s; want nope where the recording completed", a.Key, a.Failure, a.RecordedFailure, a.RecordedOutput)
			}
		}
		if a.Diff != nil && c != classDifferent {
			t.Errorf("class %c (%s): diff %s, want none", c, a.Key, a.Diff)
		}
		wantSum.Outcomes[a.Outcome]++
		switch a.Speed {
		case weft.ShadowSlower:
			wantSum.Slower++
		case weft.ShadowFaster:
			wantSum.Faster++
		case weft.ShadowAlike:
			wantSum.Alike++
		}
	}
	got := rep.Summary
	if fmt.Sprint(got.Outcomes) != fmt.Sprint(wantSum.Outcomes) || got.Slower != wantSum.Slower || got.Faster != wantSum.Faster || got.Alike != wantSum.Alike {
		t.Errorf("summary %+v, want %+v", got, wantSum)
	}
	if got.Outcomes[weft.ReplaySame] != 17+16+16 || got.Slower != 16 || got.Faster != 16 {
		t.Errorf("summary %+v: want 49 same, 16 slower, 16 faster", got)
	}

	// The candidate was tried, not uploaded.
	after, err := n.GetPlugin(ctx, "cls")
	if err != nil {
		t.Fatal(err)
	}
	if after.Current.Version != before.Current.Version || len(after.Versions) != len(before.Versions) {
		t.Errorf("plugin cls after the shadow run: %+v, want it as before: %+v", after, before)
	}
	if stored, err := n.Runtime().Stored(ctx, rep.CandidateVersion); err != nil || stored {
		t.Errorf("candidate stored after the shadow run: %v, %v; want not", stored, err)
	}
}

// TestShadowSelects: a shadow run replays the newest attempts its query
// selects, says which attempts it could not replay, and refuses what it
// cannot run at all.
func TestShadowSelects(t *testing.T) {
	t.Parallel()
	n, class := runShadowed(t, "SSSSD")
	ctx := context.Background()

	rep, err := n.Shadow(ctx, "cls", clsModule(t, false), weft.TapeQuery{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != 3 || rep.Summary.Outcomes[weft.ReplaySame] != 3 || rep.Summary.Alike != 3 {
		t.Fatalf("the recorded version shadowed over the newest 3: %+v, want 3 same and alike", rep.Summary)
	}
	// The three newest: no attempt left out was recorded after them.
	reported := map[string]bool{}
	for _, a := range rep.Attempts {
		reported[a.Key.InstanceID] = true
	}
	oldest := rep.Attempts[len(rep.Attempts)-1].RecordedAt
	for id := range class {
		recs, err := n.Tapes(ctx, id)
		if err != nil || len(recs) != 1 {
			t.Fatalf("tapes of %s: %+v, %v; want one", id, recs, err)
		}
		if !reported[id] && recs[0].RecordedAt.After(oldest) {
			t.Errorf("attempt %s recorded at %s left out of the newest 3 (the oldest of them at %s)", recs[0].Key, recs[0].RecordedAt, oldest)
		}
	}
	if rep, err := n.Shadow(ctx, "cls", clsModule(t, false), weft.TapeQuery{Workflow: "other"}); err != nil || len(rep.Attempts) != 0 {
		t.Errorf("shadow run over another workflow: %+v, %v; want no attempts", rep, err)
	}

	// A candidate without the activity: every attempt not run, and why.
	rep, err = n.Shadow(ctx, "cls", testplugins.Manifested(t, `{"activities":[{"name":"other"}]}`), weft.TapeQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Summary.Outcomes[weft.ReplayNotRun] != 5 || !strings.Contains(rep.Attempts[0].Error, `no activity "act"`) {
		t.Errorf("shadow run of a candidate without act: %+v (first %+v), want 5 not run naming the activity", rep.Summary, rep.Attempts[0])
	}

	// A candidate whose output is larger than a report shows: left out,
	// and said so; the recorded output, small, is kept.
	big := `{"big":"` + strings.Repeat("x", weft.MaxShadowOutput) + `"}`
	rep, err = n.Shadow(ctx, "cls", testplugins.Constant(t, "act", big), weft.TapeQuery{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a := rep.Attempts[0]; a.Outcome != weft.ReplayDifferentOutput || !a.OutputsOmitted || a.Output != nil || a.Diff != nil || a.RecordedOutput == nil {
		t.Errorf("shadow run of a candidate with a %d-byte output: %s, omitted %v, output %d bytes, diff %d bytes, recorded %s; want the output and diff left out",
			len(big), a.Outcome, a.OutputsOmitted, len(a.Output), len(a.Diff), a.RecordedOutput)
	}

	for _, tc := range []struct {
		name   string
		plugin string
		wasm   []byte
		q      weft.TapeQuery
		want   error
	}{
		{"unknown plugin", "nope", clsModule(t, true), weft.TapeQuery{}, weft.ErrNotFound},
		{"not a module", "cls", []byte("not wasm"), weft.TapeQuery{}, plugins.ErrInvalid},
		{"limit past the bound", "cls", clsModule(t, true), weft.TapeQuery{Limit: weft.MaxShadowAttempts + 1}, weft.ErrInvalid},
	} {
		if _, err := n.Shadow(ctx, tc.plugin, tc.wasm, tc.q); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestShadowOnARedisCluster: attempts recorded by one node into a store
// divided in partitions over a Redis Cluster are all found, newest first,
// and replayed by another node after the first one is gone, which loads
// the recorded version from the shared blob store.
func TestShadowOnARedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterOf(t, 3, 0)
	nodeOf := func(id string) (*node.Node, func()) {
		cfg := clusterConfig(t, id)
		cfg.RedisCluster = cl.Addrs()
		cfg.RedisPartitions = 8
		cfg.Engine.Tapes = engine.TapeConfig{Policy: weft.DefaultRecordPolicy}
		n, _, stop := open(t, cfg)
		return n, stop
	}
	a, stopA := nodeOf("a")
	class := recordClasses(t, a, "SDVFWQSDVFWQ")
	stopA()

	b, _ := nodeOf("b")
	rep, err := b.Shadow(context.Background(), "cls", clsModule(t, true), weft.TapeQuery{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Attempts) != len(class) {
		t.Fatalf("%d attempts in the report, want the %d recorded", len(rep.Attempts), len(class))
	}
	want := map[byte]weft.ReplayOutcome{classSame: weft.ReplaySame, classDifferent: weft.ReplayDifferentOutput, classDiverged: weft.ReplayDiverged,
		classFailed: weft.ReplayFailed, classSlower: weft.ReplaySame, classFaster: weft.ReplaySame}
	for i, a := range rep.Attempts {
		if c := class[a.Key.InstanceID]; a.Outcome != want[c] || a.Baseline != weft.ReplaySame {
			t.Errorf("class %c (%s): outcome %s, baseline %s (%s); want %s, same", c, a.Key, a.Outcome, a.Baseline, a.Error, want[c])
		}
		if i > 0 && a.RecordedAt.After(rep.Attempts[i-1].RecordedAt) {
			t.Errorf("attempt %d recorded at %s, after the one before it (%s): want newest first", i, a.RecordedAt, rep.Attempts[i-1].RecordedAt)
		}
	}
	if rep.Summary.Slower != 2 || rep.Summary.Faster != 2 {
		t.Errorf("summary %+v, want 2 slower and 2 faster", rep.Summary)
	}
}
