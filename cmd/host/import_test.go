package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInstanceImportReplacesOnlyWithReplace: `weft instance import` over
// an instance that exists is refused (exit 1, naming it and --replace's
// query) and leaves it as it is; with --replace it replaces it; with
// --id NEW it makes a copy under NEW, which the original does not stop.
func TestInstanceImportReplacesOnlyWithReplace(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "greet.yaml", "name: greet\nsteps:\n  - id: up\n    activity: kit.upper\n    input: { text: \"${ input.name }\" }\n    output: up\noutput: \"${ vars.up.text }\"\n"))
	ts.ok(t, "run", "greet", "--input", `{"name":"ida"}`, "--id", "greet-imp", "--wait")
	state := filepath.Join(t.TempDir(), "state.json")
	ts.ok(t, "instance", "export", "greet-imp", "--file", state)

	r := ts.weft(t, nil, "instance", "import", state)
	if r.code != exitFailed || !strings.Contains(r.stderr, `instance "greet-imp" exists`) || !strings.Contains(r.stderr, "replace") {
		t.Errorf("import over greet-imp: exit %d\nstdout: %s\nstderr: %s\nwant exit 1 naming the instance and how to replace it", r.code, r.stdout, r.stderr)
	}
	if out := ts.ok(t, "instance", "import", state, "--replace"); !strings.Contains(out, "instance greet-imp replaced (status completed)") {
		t.Errorf("import --replace: %s", out)
	}
	if out := ts.ok(t, "instance", "import", state, "--id", "greet-copy"); !strings.Contains(out, "instance greet-copy created (status completed)") {
		t.Errorf("import --id greet-copy: %s", out)
	}
	for _, id := range []string{"greet-imp", "greet-copy"} {
		if in := ts.waitStatus(t, id, "completed"); string(in.Output) != `"IDA"` {
			t.Errorf("%s: output %s", id, in.Output)
		}
	}
	if r := ts.weft(t, nil, "instance", "import", state, "--id", "greet-copy"); r.code != exitFailed {
		t.Errorf("a second import as greet-copy: exit %d, want 1\nstderr: %s", r.code, r.stderr)
	}
}
