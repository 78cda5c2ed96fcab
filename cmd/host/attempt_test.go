package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/internal/testplugins"
)

// nullFailModule is a candidate module with the activity "fail" that
// returns null at once, asking the host nothing.
func nullFailModule(t *testing.T) []byte {
	const manifest = `{"activities":[{"name":"fail"}]}`
	return testplugins.WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (data (i32.const 1024) "null")
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    (call $result (i32.const 1024) (i32.const 4)) (i32.const 0)))`,
		strings.ReplaceAll(manifest, `"`, `\"`), len(manifest)))
}

// TestCLIAttempt: a failed attempt's tape (the host's default policy keeps
// those) is listed by weft attempt ls, as a table and as JSON; weft
// attempt replay against the recorded version reports the same failure
// and exits 0, with -o json too; against a candidate --plugin that
// returns null it reports a different output and exits 1; a step with
// no tape exits 4; --step is required. weft attempt export bundles it
// with the recorded module, which the host serves (--module supplies
// it instead; another module is refused; once the host keeps the
// version no more, the export says to pass it), and weft plugin call
// --replay runs the bundle offline: the same with its module, a
// different output with the candidate.
func TestCLIAttempt(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dir := t.TempDir()
	ts.ok(t, "workflow", "put", writeFile(t, dir, "failonce.yaml",
		"name: failonce\nsteps:\n  - id: try\n    activity: kit.fail\n    input: { code: busy, message: not now }\n    retry: { max_attempts: 1 }\n"))
	if r := ts.weft(t, nil, "run", "failonce", "--id", "fo-1", "--wait"); r.code != exitFailed {
		t.Fatalf("run failonce: exit %d, %s", r.code, r.stderr)
	}

	table := ts.ok(t, "attempt", "ls", "fo-1")
	if !regexp.MustCompile(`(?m)^STEP +EXEC +ATTEMPT +OUTCOME +CODE +SIZE +TRUNCATED +PLUGIN +ACTIVITY\nsteps\[0\] +\S+ +1 +failed +busy +\d+ +false +kit@\S+ +fail\n$`).MatchString(table) {
		t.Errorf("attempt ls:\n%s", table)
	}
	var page apiv1.Page[apiv1.TapeSummary]
	ts.okJSON(t, &page, "attempt", "ls", "fo-1")
	if len(page.Items) != 1 || page.Items[0].Key.InstanceID != "fo-1" || page.Items[0].FailureCode != "busy" {
		t.Fatalf("attempt ls -o json: %+v", page)
	}
	step := page.Items[0].Key.StepPath

	out := ts.ok(t, "attempt", "replay", "fo-1", "--step", step, "--attempt", "1")
	if !strings.Contains(out, ": same\n") || !strings.Contains(out, "recorded: failed: busy: not now") ||
		!strings.Contains(out, "replayed: failed: busy: not now") || !strings.Contains(out, "(the recorded one)") {
		t.Errorf("attempt replay:\n%s", out)
	}
	var r apiv1.ReplayReport
	ts.okJSON(t, &r, "attempt", "replay", "fo-1", "--step", step, "--attempt", "1", "--exec", page.Items[0].Key.Exec)
	if r.Outcome != "same" || r.Failure == nil || r.Failure.Code != "busy" || r.Key != page.Items[0].Key {
		t.Errorf("attempt replay -o json: %+v", r)
	}

	wasm := filepath.Join(dir, "candidate.wasm")
	if err := os.WriteFile(wasm, nullFailModule(t), 0o644); err != nil {
		t.Fatal(err)
	}
	res := ts.weft(t, nil, "attempt", "replay", "fo-1", "--step", step, "--attempt", "1", "--plugin", wasm, "-o", "json")
	r = apiv1.ReplayReport{}
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil || res.code != exitFailed || r.Outcome != "different_output" || string(r.Output) != "null" {
		t.Errorf("attempt replay --plugin: exit %d, %+v, %v\nstdout: %s\nstderr: %s", res.code, r, err, res.stdout, res.stderr)
	}
	res = ts.weft(t, nil, "attempt", "replay", "fo-1", "--step", step, "--attempt", "1", "--plugin", wasm)
	if res.code != exitFailed || !strings.Contains(res.stdout, "different_output") || !strings.Contains(res.stdout, "outputs equal: false") {
		t.Errorf("attempt replay --plugin: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}

	// The bundle of the attempt, with the recorded module the host
	// serves, replays offline as the same failure; with the candidate,
	// differently. --module supplies the module instead: the recorded
	// version's is taken, another is refused.
	bundle := filepath.Join(dir, "fo-1.bundle")
	if res := ts.weft(t, nil, "attempt", "export", "fo-1", "--step", step, "--attempt", "1", "--file", bundle); res.code != exitOK || !strings.Contains(res.stderr, "wrote "+bundle) {
		t.Fatalf("attempt export: exit %d, %s", res.code, res.stderr)
	}
	given := filepath.Join(dir, "given.bundle")
	ts.ok(t, "attempt", "export", "fo-1", "--step", "try", "--attempt", "1", "--module", testplugins.Path(t, "kit"), "--file", given)
	if a, b := readBytes(t, bundle), readBytes(t, given); !bytes.Equal(a, b) {
		t.Errorf("the bundle with the host's module (%d bytes) differs from the one with --module (%d bytes)", len(a), len(b))
	}
	if res := ts.weft(t, nil, "attempt", "export", "fo-1", "--step", step, "--attempt", "1", "--module", testplugins.Path(t, "text"), "--file", filepath.Join(dir, "x")); res.code != exitFailed || !strings.Contains(res.stderr, "pass that module") {
		t.Errorf("attempt export with another module: exit %d, %s", res.code, res.stderr)
	}
	res = ts.weft(t, nil, "plugin", "call", "--replay", bundle, "-o", "json")
	r = apiv1.ReplayReport{}
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil || res.code != exitOK || r.Outcome != "same" || r.Failure == nil || r.Failure.Code != "busy" ||
		r.ReplayedVersion != page.Items[0].PluginVersion {
		t.Errorf("plugin call --replay: exit %d, %+v, %v\nstdout: %s\nstderr: %s", res.code, r, err, res.stdout, res.stderr)
	}
	res = ts.weft(t, nil, "plugin", "call", "--replay", bundle, "--plugin", wasm)
	if res.code != exitFailed || !strings.Contains(res.stdout, "replay of kit.fail: different_output") {
		t.Errorf("plugin call --replay --plugin: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if res := ts.weft(t, nil, "plugin", "call", "--replay", wasm); res.code != exitFailed || !strings.Contains(res.stderr, "not a bundle") {
		t.Errorf("plugin call --replay of a module: exit %d, %s", res.code, res.stderr)
	}

	// Once the host keeps the recorded version no more, the export says
	// to pass the module, which still works.
	ts.ok(t, "plugin", "rm", "kit", "--force")
	if res := ts.weft(t, nil, "attempt", "export", "fo-1", "--step", step, "--attempt", "1", "--file", filepath.Join(dir, "y")); res.code != exitNotFound || !strings.Contains(res.stderr, "--module FILE.wasm") {
		t.Errorf("attempt export of a version the host no longer keeps: exit %d, %s", res.code, res.stderr)
	}
	ts.ok(t, "attempt", "export", "fo-1", "--step", step, "--attempt", "1", "--module", testplugins.Path(t, "kit"), "--file", filepath.Join(dir, "y"))

	if res := ts.weft(t, nil, "attempt", "replay", "fo-1", "--step", "steps[9]", "--attempt", "1"); res.code != exitNotFound {
		t.Errorf("attempt replay of no tape: exit %d, %s", res.code, res.stderr)
	}
	if res := ts.weft(t, nil, "attempt", "replay", "fo-1", "--attempt", "1"); res.code != exitUsage || !strings.Contains(res.stderr, "--step") {
		t.Errorf("attempt replay without --step: exit %d, %s", res.code, res.stderr)
	}
}

// readBytes returns a file's contents.
func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
