package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/tape"
)

// failing is a workflow whose one activity fails its only attempt.
const failing = `
name: failing
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, message: not now }
    retry: { max_attempts: 1 }
`

// infos is a workflow that keeps the tape of every attempt of its one
// activity, which completes with its call's information.
const infos = `
name: infos
record: all
steps:
  - { id: look, activity: kit.info, input: {} }
`

// finishOn runs an instance of workflow on n and returns it finished with
// status want, and its tapes.
func finishOn(t *testing.T, n *node.Node, workflow string, want weft.Status) (*weft.Instance, []weft.TapeRecord) {
	t.Helper()
	ctx := context.Background()
	inst, _, err := n.Engine().Start(ctx, workflow, json.RawMessage(`null`), "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := n.Engine().WaitFinished(wctx, inst.ID)
	if err != nil || got.Status != want {
		t.Fatalf("instance of %s: %+v, %v; want %s", workflow, got, err, want)
	}
	recs, err := n.Tapes(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got, recs
}

// runFailed opens a node that keeps tapes under policy, capped at
// maxBytes, runs an instance of failing on it, and returns the node and
// the key of the failed attempt's tape.
func runFailed(t *testing.T, maxBytes int) (*node.Node, weft.TapeKey) {
	t.Helper()
	cfg := config(t.TempDir())
	cfg.Engine.Tapes = engine.TapeConfig{Policy: weft.DefaultRecordPolicy, MaxBytes: maxBytes}
	n, _, _ := open(t, cfg)
	ctx := context.Background()
	if _, _, err := n.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{failing, infos} {
		if _, _, err := n.Engine().SaveDefinition(ctx, []byte(def)); err != nil {
			t.Fatal(err)
		}
	}
	got, recs := finishOn(t, n, "failing", weft.StatusFailed)
	if len(recs) != 1 || recs[0].Key.Attempt != 1 || recs[0].Outcome != weft.TapeFailed || recs[0].FailureCode != "busy" ||
		recs[0].PluginVersion != got.Plugins["kit"] {
		t.Fatalf("tapes %+v, want attempt 1's, failed with busy", recs)
	}
	return n, recs[0].Key
}

// TestReplayAttempt: a failed attempt's tape replays against its own
// version as the same failure, a completed one's as the same output;
// against candidate modules with an activity of the same name it does
// not: one that returns null asking nothing differs in its output,
// one that asks for random bytes first diverges, and the report names
// that call and the tape's; an unknown tape is not found, a
// candidate without the activity invalid; the stored bytes decode.
func TestReplayAttempt(t *testing.T) {
	t.Parallel()
	n, key := runFailed(t, weft.DefaultTapeBytes)
	ctx := context.Background()

	rec, data, err := n.Tape(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := tape.UnmarshalAttempt(data)
	if err != nil || rec.Key != key || a.FailureCode != "busy" || a.Tape == nil || len(a.Tape.Entries) == 0 {
		t.Fatalf("tape %+v: %+v, %v", rec, a, err)
	}

	r, err := n.ReplayAttempt(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplaySame || r.Failure == nil || r.Failure.Code != "busy" || r.Failure.Message != "not now" ||
		r.RecordedFailure == nil || r.RecordedFailure.Code != "busy" || r.ReplayedVersion != r.RecordedVersion ||
		r.RecordedVersion != rec.PluginVersion || r.Activity != "fail" || r.Plugin != "kit" || r.Divergence != nil || r.Left != 0 {
		t.Errorf("replay against the recorded version: %+v (failure %+v)", r, r.Failure)
	}

	_, recs := finishOn(t, n, "infos", weft.StatusCompleted)
	if len(recs) != 1 || recs[0].Outcome != weft.TapeCompleted {
		t.Fatalf("tapes of infos: %+v, want one, completed", recs)
	}
	r, err = n.ReplayAttempt(ctx, recs[0].Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplaySame || len(r.Output) == 0 || string(r.Output) != string(r.RecordedOutput) || r.Failure != nil {
		t.Errorf("replay of a completed attempt against its version: %+v", r)
	}
	_, data, err = n.Tape(ctx, recs[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	if a, err = tape.UnmarshalAttempt(data); err != nil {
		t.Fatal(err)
	}
	// A candidate whose info returns null at once, asking nothing: its
	// output differs. One that returns nothing at all fails.
	r, err = n.ReplayAttempt(ctx, recs[0].Key, infoModule(t, false))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplayDifferentOutput || string(r.Output) != "null" || r.ReplayedVersion == r.RecordedVersion ||
		r.Left != len(a.Tape.Entries) || r.Divergence != nil || r.Failure != nil {
		t.Errorf("replay against a candidate that returns null: %s output %s failure %+v left %d, want different_output, the tape's %d calls left",
			r.Outcome, r.Output, r.Failure, r.Left, len(a.Tape.Entries))
	}
	r, err = n.ReplayAttempt(ctx, recs[0].Key, testplugins.Manifested(t, `{"activities":[{"name":"info"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplayFailed || r.Failure == nil || r.Failure.Code != "protocol" || r.Output != nil {
		t.Errorf("replay against a candidate that returns nothing: %s output %s failure %+v, want failed (protocol)", r.Outcome, r.Output, r.Failure)
	}
	// A candidate whose info first asks for 128 random bytes, which
	// kit's never did at that point: it diverges there. (A read of at
	// most 64 bytes, a seed, would be answered loosely on a tape that
	// does not begin at its instance's start: docs/replay.md.)
	r, err = n.ReplayAttempt(ctx, recs[0].Key, infoModule(t, true))
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Divergence; r.Outcome != weft.ReplayDiverged || d == nil || d.Got.Kind != string(tape.KindRandom) || d.Want.Kind == "" ||
		d.Want.Kind == d.Got.Kind || d.Note == "" || r.Failure == nil {
		t.Errorf("replay against a candidate that asks for random bytes first: %+v (divergence %+v), want diverged at a random call", r, d)
	}

	if _, err := n.ReplayAttempt(ctx, weft.TapeKey{InstanceID: key.InstanceID, StepPath: key.StepPath, Exec: key.Exec, Attempt: 9}, nil); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("replaying a tape that does not exist: %v, want not found", err)
	}
	if _, err := n.ReplayAttempt(ctx, key, testplugins.Bytes(t, "tally")); !errors.Is(err, weft.ErrInvalid) {
		t.Errorf("a candidate without the activity: %v, want invalid", err)
	}
}

// infoModule is a module whose info activity returns null, after asking
// for 128 random bytes when random is set.
func infoModule(t *testing.T, random bool) []byte {
	ask := ""
	if random {
		ask = "(drop (call $random (i32.const 4096) (i32.const 128)))"
	}
	const manifest = `{"activities":[{"name":"info"}]}`
	return testplugins.WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (data (i32.const 1024) "null")
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    %s (call $result (i32.const 1024) (i32.const 4)) (i32.const 0)))`,
		strings.ReplaceAll(manifest, `"`, `\"`), len(manifest), ask))
}

// TestReplayTruncatedTape: a tape cut at its cap replays as truncated:
// the guest asked past its end.
func TestReplayTruncatedTape(t *testing.T) {
	t.Parallel()
	n, key := runFailed(t, 1)
	rec, _, err := n.Tape(context.Background(), key)
	if err != nil || !rec.Truncated {
		t.Fatalf("tape %+v, %v; want truncated", rec, err)
	}
	r, err := n.ReplayAttempt(context.Background(), key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplayTruncated || r.Divergence == nil || r.Divergence.Index != 0 {
		t.Errorf("replay of a truncated tape: %+v (divergence %+v), want truncated at call 0", r, r.Divergence)
	}
}

// TestReplayWithTheServerStopped: the webhook plugin's recorded delivery
// to a loopback server replays to the same output after the server is
// gone, answered from its tape, and reaches nothing.
func TestReplayWithTheServerStopped(t *testing.T) {
	t.Setenv("WEFT_NODE_REPLAY_TOKEN", "replay-token-0123456789")
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"received":true}`)
	}))
	cfg := config(t.TempDir())
	cfg.Engine.Tapes = engine.TapeConfig{Policy: weft.RecordPolicy{Mode: weft.RecordAll}}
	n, _, _ := open(t, cfg)
	ctx := context.Background()
	if _, _, err := n.PutPlugin(ctx, "webhook", testplugins.Bytes(t, "webhook")); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"hosts":[{"pattern":"http://127.0.0.1:*","private_networks":true}],
		"config":{"url":%q},"secrets":{"token":"env:WEFT_NODE_REPLAY_TOKEN"}}`, srv.URL+"/hook")
	if _, _, err := n.PutGrants(ctx, "webhook", []byte(doc), weft.AnyRevision); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Engine().SaveDefinition(ctx, []byte(`
name: notify
steps: [ { id: deliver, activity: webhook.deliver, input: { event: shipped } } ]
`)); err != nil {
		t.Fatal(err)
	}
	_, recs := finishOn(t, n, "notify", weft.StatusCompleted)
	if len(recs) != 1 || served.Load() != 1 {
		t.Fatalf("tapes %+v after %d deliveries, want one of one", recs, served.Load())
	}
	srv.Close()

	r, err := n.ReplayAttempt(ctx, recs[0].Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != weft.ReplaySame || string(r.Output) != string(r.RecordedOutput) || r.Fuel == 0 {
		t.Errorf("replay with the server stopped: %s, output %s, recorded %s, fuel %d; want the same output", r.Outcome, r.Output, r.RecordedOutput, r.Fuel)
	}
	if got := served.Load(); got != 1 {
		t.Errorf("the server was reached %d times, want once (the recording)", got)
	}
}
