package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
)

// TestPluginNew does what the scaffold's README tells a newcomer to do,
// outside the repository: weft plugin new, make test build check (the
// test calls the plugin through plugintest and the weft command), then
// push the plugin to a host and run the README's workflow. The module
// proxy is off: the plugin's module needs nothing but the SDK.
func TestPluginNew(t *testing.T) {
	if testing.Short() {
		t.Skip("builds weft and a plugin")
	}
	t.Parallel()
	for _, tool := range []string{"make", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	bin := buildWeft(t)
	dir := filepath.Join(t.TempDir(), "demo")
	sdk := filepath.Join(testplugins.Root(t), "sdk")

	cmd := exec.Command(bin, "plugin", "new", "demo", "-dir", dir, "-sdk", sdk)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("weft plugin new: %v\n%s", err, out)
	}
	for _, f := range []string{"go.mod", "main.go", "plugin_test.go", "Makefile", "README.md", ".gitignore", "demo-demo.yaml"} {
		if !strings.Contains(string(out), filepath.Join(dir, f)) {
			t.Errorf("weft plugin new did not list %s:\n%s", f, out)
		}
	}

	// The Makefile runs the weft command that wrote it; WEFT is unset so
	// that the default is what is used.
	env := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT=") {
			env = append(env, kv)
		}
	}
	mk := exec.Command("make", "test", "build", "check")
	mk.Dir, mk.Env = dir, env
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make test build check: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "greet") || !strings.Contains(string(out), "reserve") {
		t.Errorf("make check does not list both activities:\n%s", out)
	}
	if sum, err := os.ReadFile(filepath.Join(dir, "go.sum")); err == nil && len(bytes.TrimSpace(sum)) > 0 {
		t.Errorf("the plugin's go.sum is not empty:\n%s", sum)
	}

	// The workflow it wrote, on a host, as its README says: by make demo
	// (below), and step by step.
	wf := filepath.Join(dir, "demo-demo.yaml")
	// A host process without the race detector: the upload compiles the
	// plugin, which takes many times longer under it.
	host := startProcess(t, bin, "--data-dir", t.TempDir(), "--set", "plugins.cache_dir="+testplugins.CacheDir(t), "--set", "engine.timer_interval=10ms")
	weft := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--server", "http://"+host.addr)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("weft %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
		}
		return string(out)
	}
	weft("plugin", "push", filepath.Join(dir, "demo.wasm"))
	weft("plugin", "grant", "demo", "--config", "greeting=welcome")
	weft("workflow", "put", wf)
	var in instanceJSON
	if err := json.Unmarshal([]byte(weft("run", "demo-demo", "--input", `{"name": "Ada"}`, "--wait", "-o", "json")), &in); err != nil {
		t.Fatal(err)
	}
	if in.Status != "completed" {
		t.Fatalf("status %s, error %+v", in.Status, in.Error)
	}
	var output struct{ Greeting, Reservation string }
	if err := json.Unmarshal(in.Output, &output); err != nil {
		t.Fatal(err)
	}
	if output.Greeting != "welcome, Ada!" || !strings.HasPrefix(output.Reservation, "r-") {
		t.Errorf("output %s, want the configured greeting and a reservation", in.Output)
	}
	history := weft("instance", "history", in.ID)
	if n := strings.Count(history, `"code":"busy"`); n != 2 {
		t.Errorf("the history shows %d busy attempts, want 2 (the README says so):\n%s", n, history)
	}
	// make demo does the same, through the Makefile's weft.
	demo := exec.Command("make", "demo")
	demo.Dir, demo.Env = dir, append(env, "WEFT_SERVER=http://"+host.addr)
	if out, err := demo.CombinedOutput(); err != nil || !strings.Contains(string(out), "status:    completed") {
		t.Errorf("make demo: %v\n%s", err, out)
	}
}

// TestPluginNewRefuses: what plugin new will not do, said clearly.
func TestPluginNewRefuses(t *testing.T) {
	t.Parallel()
	notEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad name", []string{"Demo!"}, exitUsage, `invalid plugin name "Demo!"`},
		{"no name", nil, exitUsage, "usage: weft plugin new NAME"},
		{"not empty", []string{"demo", "-dir", notEmpty}, exitFailed, "exists and is not empty"},
		{"not the SDK", []string{"demo", "-dir", filepath.Join(t.TempDir(), "d"), "-sdk", t.TempDir()}, exitUsage, "-sdk"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := pluginNew(tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}

	// The SDK is found above the current directory, as in a clone.
	dir := filepath.Join(t.TempDir(), "found")
	var stdout, stderr bytes.Buffer
	if code := pluginNew([]string{"found", "-dir", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "=> " + filepath.Join(testplugins.Root(t), "sdk") + "\n"; !strings.Contains(string(mod), want) {
		t.Errorf("go.mod does not replace the SDK with this repository's:\n%s", mod)
	}
}
