package sdk

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildsOutsideTheRepository builds a plugin the way a plugin author
// outside the repository does: a module of its own, in a temporary
// directory, that requires only the SDK (and, through it, the abi module),
// both replaced by this clone's directories since no version is published.
// The module proxy is off, so that the build fails if the SDK's or the
// ABI's module needed anything but the standard library; and the plugin's
// module graph must hold nothing but them, and its go.sum nothing at all
// (none of the host's modules: fiber, redis, wazero…).
func TestBuildsOutsideTheRepository(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	sdkDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abiDir := filepath.Join(filepath.Dir(sdkDir), "abi")
	dir := t.TempDir()
	if rel, err := filepath.Rel(filepath.Dir(sdkDir), dir); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary directory %s is inside the repository", dir)
	}
	files := map[string]string{
		"go.mod": `module example.com/greet

go 1.24

require github.com/weftworks/weft/sdk v0.0.0-00010101000000-000000000000

require github.com/weftworks/weft/abi v0.0.0-00010101000000-000000000000 // indirect

replace (
	github.com/weftworks/weft/abi => ` + abiDir + `
	github.com/weftworks/weft/sdk => ` + sdkDir + `
)
`,
		"main.go": `package main

import "github.com/weftworks/weft/sdk"

type in struct{ Name string ` + "`json:\"name\"`" + ` }
type out struct{ Greeting string ` + "`json:\"greeting\"`" + ` }

func init() {
	sdk.Needs(sdk.Requirements{Hosts: []string{"api.example.com"}, Secrets: []string{"token"}})
	sdk.Register("greet", sdk.Typed(func(ctx *sdk.Context, in in) (out, error) {
		if in.Name == "" {
			return out{}, sdk.NonRetryable("no_name", "name is required")
		}
		if _, err := ctx.Get("https://api.example.com/?token=" + ctx.Secret("token")); err != nil {
			return out{}, sdk.Retryable("http", err.Error())
		}
		return out{Greeting: "hello, " + in.Name}, nil
	}))
}

func main() {}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// -mod=mod lets the go command write go.sum, were there anything to
	// write; with the proxy off it can fetch nothing.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local")
	run := func(extra []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(env, extra...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return string(b)
	}

	run([]string{"GOOS=wasip1", "GOARCH=wasm"}, "build", "-buildmode=c-shared", "-o", "greet.wasm", ".")
	wasm, err := os.ReadFile(filepath.Join(dir, "greet.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatal("greet.wasm is not a WebAssembly module")
	}
	for _, export := range []string{"weft_abi_version", "weft_alloc", "weft_manifest", "weft_invoke"} {
		if !bytes.Contains(wasm, []byte(export)) {
			t.Errorf("greet.wasm does not name %s", export)
		}
	}

	mods := strings.Fields(run(nil, "list", "-m", "-f", "{{.Path}}", "all"))
	if want := []string{"example.com/greet", "github.com/weftworks/weft/abi", "github.com/weftworks/weft/sdk"}; strings.Join(mods, " ") != strings.Join(want, " ") {
		t.Errorf("the plugin's module graph is %q, want %q", mods, want)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(sum)); s != "" {
		t.Errorf("go.sum is not empty:\n%s", s)
	}
}
