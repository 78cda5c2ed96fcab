package plugins_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// watModule assembles a WAT plugin from parts; each part left empty gets a
// valid default, so a test changes only what it is about.
type watModule struct {
	imports  string
	memory   string
	version  string // body of weft_abi_version
	manifest string // the manifest JSON
	exports  string // replaces all the weft_* exports when set
	extra    string
}

func (m watModule) String() string {
	imports := m.imports
	if imports == "" {
		imports = `(import "weft" "result" (func $result (param i32 i32)))`
	}
	memory := m.memory
	if memory == "" {
		memory = `(memory (export "memory") 1)`
	}
	version := m.version
	if version == "" {
		version = "(i32.const 1)"
	}
	manifest := m.manifest
	if manifest == "" {
		manifest = `{"activities":[{"name":"echo"}]}`
	}
	exports := m.exports
	if exports == "" {
		exports = `
  (func (export "weft_abi_version") (result i32) ` + version + `)
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 1024) (i32.const ` + strconv.Itoa(len(manifest)) + `)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32)
    (call $result (i32.add (local.get $p) (local.get $a)) (local.get $n)) (i32.const 0))`
	}
	return "(module\n  " + imports + "\n  " + memory + "\n  (data (i32.const 1024) " + watString(manifest) + ")" + exports + "\n  " + m.extra + "\n)"
}

// watString quotes s as a WAT string literal.
func watString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			b.WriteString(`\` + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&0xf]))
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

func TestWATModuleDefaultsAreValid(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.WAT(t, watModule{}.String()))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "echo", Input: []byte(`{"ok":true}`)})
	if err != nil || string(out) != `{"ok":true}` {
		t.Fatalf("echo: %s, %v", out, err)
	}
}

func TestValidationRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wasm func(t *testing.T) []byte
		// want are regular expressions that must each match one problem.
		want []string
	}{
		{
			name: "not wasm",
			wasm: func(*testing.T) []byte { return []byte("this is not a module") },
			want: []string{`not a valid WebAssembly module`},
		},
		{
			name: "truncated module",
			wasm: func(t *testing.T) []byte { b := testplugins.WAT(t, watModule{}.String()); return b[:len(b)/2] },
			want: []string{`not a valid WebAssembly module`},
		},
		{
			name: "too large",
			wasm: func(*testing.T) []byte { return bytes.Repeat([]byte{0}, 2<<20) },
			want: []string{`module is 2097152 bytes, larger than the limit of 1048576`},
		},
		{
			name: "import from another module",
			wasm: wat(watModule{imports: `(import "weft" "result" (func $result (param i32 i32))) (import "env" "socket" (func (param i32) (result i32)))`}),
			want: []string{`import env\.socket: module "env" is not allowed`},
		},
		{
			name: "WASI functions the host does not provide, each named",
			wasm: wat(watModule{imports: `(import "weft" "result" (func $result (param i32 i32)))
				(import "wasi_snapshot_preview1" "sock_open" (func (param i32 i32 i32) (result i32)))
				(import "wasi_snapshot_preview1" "sock_connect" (func (param i32 i32 i32) (result i32)))
				(import "wasi_unstable" "fd_write" (func (param i32 i32 i32 i32) (result i32)))`}),
			want: []string{
				`import wasi_snapshot_preview1\.sock_open: not a WASI preview 1 function the host provides`,
				`import wasi_snapshot_preview1\.sock_connect: not a WASI preview 1 function the host provides`,
				`import wasi_unstable\.fd_write: module "wasi_unstable" is not allowed`,
			},
		},
		{
			name: "unknown host function",
			wasm: wat(watModule{imports: `(import "weft" "result" (func $result (param i32 i32))) (import "weft" "open_socket" (func))`}),
			want: []string{`import weft\.open_socket: the host module has no such function`},
		},
		{
			name: "host function with the wrong type",
			wasm: wat(watModule{imports: `(import "weft" "result" (func $result (param i32 i32))) (import "weft" "heartbeat" (func (param i64)))`}),
			want: []string{`import weft\.heartbeat: type \(i64\)->\(\), want \(i32,i32\)->\(i32\)`},
		},
		{
			name: "imported memory",
			wasm: wat(watModule{memory: `(import "env" "memory" (memory 1)) (export "memory" (memory 0))`}),
			want: []string{`import env\.memory: importing a memory is not allowed`},
		},
		{
			name: "no exports at all",
			wasm: wat(watModule{exports: " "}),
			want: []string{`export weft_abi_version: missing`, `export weft_alloc: missing`, `export weft_invoke: missing`, `export weft_manifest: missing`},
		},
		{
			name: "export with the wrong type",
			wasm: wat(watModule{exports: `
				(func (export "weft_abi_version") (result i32) (i32.const 1))
				(func (export "weft_alloc") (param i64) (result i32) (i32.const 0))
				(func (export "weft_manifest") (result i32) (i32.const 0))
				(func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0))`}),
			want: []string{`export weft_alloc: type \(i64\)->\(i32\), want \(i32\)->\(i32\)`},
		},
		{
			name: "command module",
			wasm: wat(watModule{extra: `(func (export "_start"))`}),
			want: []string{`export _start: the module is a WASI command; build a reactor`},
		},
		{
			name: "no memory export",
			wasm: wat(watModule{memory: `(memory 1)`}),
			want: []string{`export memory: missing`},
		},
		{
			name: "several problems at once",
			wasm: wat(watModule{imports: `(import "weft" "result" (func $result (param i32 i32))) (import "env" "f" (func))`, extra: `(func (export "_start"))`}),
			want: []string{`import env\.f`, `export _start`},
		},
		{
			name: "ABI version from the future",
			wasm: wat(watModule{version: "(i32.const 2)"}),
			want: []string{`ABI version 2: this host implements version 1`},
		},
		{
			name: "manifest not JSON",
			wasm: wat(watModule{manifest: `activities: echo`}),
			want: []string{`manifest: not the JSON document`},
		},
		{
			name: "manifest with unknown fields",
			wasm: wat(watModule{manifest: `{"activities":[{"name":"echo"}],"exports":1}`}),
			want: []string{`manifest: not the JSON document.*unknown field "exports"`},
		},
		{
			name: "manifest with bytes after the document",
			wasm: wat(watModule{manifest: "{\"activities\":[{\"name\":\"echo\"}]}\x00\x00\x00"}),
			want: []string{`manifest: 3 bytes after the JSON document of abi/README\.md §6, at offset 32: "\\x00\\x00\\x00"`},
		},
		{
			name: "manifest without activities",
			wasm: wat(watModule{manifest: `{"activities":[]}`}),
			want: []string{`manifest: lists no activities`},
		},
		{
			name: "manifest with bad and duplicate names",
			wasm: wat(watModule{manifest: `{"activities":[{"name":"Echo"},{"name":"a.b"},{"name":"ok"},{"name":"ok"}]}`}),
			want: []string{`activities\[0\]\.name "Echo"`, `activities\[1\]\.name "a\.b"`, `activities\[3\]\.name "ok": listed twice`},
		},
		{
			name: "initialiser traps",
			wasm: wat(watModule{extra: `(func (export "_initialize") unreachable)`}),
			want: []string{`instantiating: .*unreachable`},
		},
		{
			name: "manifest export traps",
			wasm: wat(watModule{exports: `
				(func (export "weft_abi_version") (result i32) (i32.const 1))
				(func (export "weft_alloc") (param i32) (result i32) (i32.const 0))
				(func (export "weft_manifest") (result i32) unreachable)
				(func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0))`}),
			want: []string{`calling weft_manifest: .*unreachable`},
		},
		{
			name: "manifest pointer outside memory",
			wasm: wat(watModule{exports: `
				(func (export "weft_abi_version") (result i32) (i32.const 1))
				(func (export "weft_alloc") (param i32) (result i32) (i32.const 0))
				(func (export "weft_manifest") (result i32) (call $result (i32.const 65000) (i32.const 1000)) (i32.const 0))
				(func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0))`}),
			want: []string{`weft\.result: 1000 bytes at 65000 are outside memory \(65536 bytes\)`},
		},
	}
	rt := testplugins.Runtime(t, plugins.Config{MaxModuleBytes: 1 << 20})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := rt.Load(context.Background(), tt.wasm(t))
			var ve *plugins.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, plugins.ErrInvalid) {
				t.Fatalf("error %v, want a *ValidationError", err)
			}
			for _, w := range tt.want {
				re := regexp.MustCompile(w)
				found := false
				for _, p := range ve.Problems {
					found = found || re.MatchString(p)
				}
				if !found {
					t.Errorf("no problem matches %q; problems:\n%s", w, strings.Join(ve.Problems, "\n"))
				}
			}
		})
	}
}

func wat(m watModule) func(*testing.T) []byte {
	return func(t *testing.T) []byte { t.Helper(); return testplugins.WAT(t, m.String()) }
}

func TestRefusedModuleIsNotStored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt := testplugins.RuntimeIn(t, dir, plugins.Config{})
	wasm := testplugins.WAT(t, watModule{version: "(i32.const 7)"}.String())
	if _, err := rt.Load(context.Background(), wasm); err == nil {
		t.Fatal("loaded a module of ABI version 7")
	}
	if _, err := rt.Module(context.Background(), plugins.Hash(wasm)); !errors.Is(err, plugins.ErrNotFound) {
		t.Fatalf("Module after a refusal: %v, want ErrNotFound", err)
	}
	entries, _ := os.ReadDir(dir + "/sha256")
	if len(entries) != 0 {
		t.Errorf("blob store holds %d entries after a refusal", len(entries))
	}
}

// The WAT plugin in abi/README.md §12 must be a valid plugin: the
// specification's own example is tested.
func TestABIReadmeExample(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(testplugins.Root(t) + "/abi/README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```wat\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("no ```wat block in abi/README.md")
	}
	rt := testplugins.Runtime(t, plugins.Config{})
	mod, err := rt.Load(context.Background(), testplugins.WAT(t, string(m[1])))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.Invoke(context.Background(), mod.Version, call.Call{Activity: "echo", Input: []byte(`[1,"two"]`)})
	if err != nil || string(out) != `[1,"two"]` {
		t.Fatalf("echo: %s, %v", out, err)
	}
}
