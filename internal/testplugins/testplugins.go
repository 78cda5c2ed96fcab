// Package testplugins gives tests the example plugins as built .wasm files.
// It builds a plugin when its output is missing or older than its sources
// and caches it in bin/plugins, the directory `make plugins` writes, so a
// test run after `make plugins` builds nothing and a test run alone still
// works. Builds are serialised across test processes with a file lock.
package testplugins

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// Root returns the repository's root directory.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/weftworks/weft\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testplugins: not inside the weft repository")
		}
		dir = parent
	}
}

var mu sync.Mutex // serialises builds within one test process

// Path returns the path of the built example plugin examples/plugins/name:
// a Go plugin built with stock Go, a C plugin (a directory of .c files)
// built with clang and wasi-libc, or a Rust plugin (a directory with a
// Cargo.toml) built with Debian's cargo and rustc, as `make plugins` builds
// them.
func Path(t testing.TB, name string) string {
	t.Helper()
	root := Root(t)
	return build(t, root, filepath.Join(root, "examples", "plugins", name), filepath.Join(root, "bin", "plugins", name+".wasm"))
}

// Testdata returns the path of a test plugin built from the directory dir,
// relative to the repository's root (such as "plugins/testdata/sandbox").
func Testdata(t testing.TB, dir string) string {
	t.Helper()
	root := Root(t)
	name := strings.ReplaceAll(filepath.ToSlash(filepath.Clean(dir)), "/", "-")
	return build(t, root, filepath.Join(root, dir), filepath.Join(root, "bin", "plugins", "test", name+".wasm"))
}

func build(t testing.TB, root, src, out string) string {
	t.Helper()
	name := filepath.Base(src)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	unlock := lockFile(t, filepath.Join(root, "bin", "plugins", ".build.lock"))
	defer unlock()

	isC := len(glob(t, src, ".c")) > 0
	_, err := os.Stat(filepath.Join(src, "Cargo.toml"))
	isRust := err == nil
	var deps []string
	switch {
	case isC:
		deps = append(glob(t, src, ".c"), glob(t, src, ".h")...)
	case isRust:
		deps = append(glob(t, src, ".rs"), glob(t, filepath.Join(root, "sdk", "rust"), ".rs")...)
		for _, f := range []string{"Cargo.toml", "Cargo.lock", filepath.Join(".cargo", "config.toml")} {
			if _, err := os.Stat(filepath.Join(src, f)); err == nil {
				deps = append(deps, filepath.Join(src, f))
			}
		}
		deps = append(deps, filepath.Join(root, "sdk", "rust", "Cargo.toml"))
	default:
		deps = append(deps, glob(t, src, ".go")...)
		deps = append(deps, glob(t, filepath.Join(root, "sdk"), ".go")...)
		deps = append(deps, glob(t, filepath.Join(root, "abi"), ".go")...)
		deps = append(deps, filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum"), filepath.Join(root, "abi", "go.mod"), filepath.Join(root, "sdk", "go.mod"),
			filepath.Join(root, "examples", "go.mod"), filepath.Join(root, "examples", "go.sum"), filepath.Join(root, "plugins", "testdata", "go.mod"))
	}
	if len(deps) == 0 {
		t.Fatalf("testplugins: no sources in %s", src)
	}
	if upToDate(out, deps) {
		return out
	}
	tmp := out + ".tmp"
	var cmd *exec.Cmd
	switch {
	case isC:
		need(t, "clang", "clang, lld, wasi-libc and libclang-rt-dev-wasm32")
		args := append([]string{"--target=wasm32-wasi", "-mexec-model=reactor", "-O2", "-Wall", "-o", tmp}, glob(t, src, ".c")...)
		cmd = exec.Command("clang", args...)
	case isRust:
		needRust(t)
		cmd = exec.Command(rustCargo, "build", "--release", "--offline", "--locked", "--target", "wasm32-wasi", "--quiet")
		cmd.Env = append(os.Environ(), "RUSTC="+rustRustc, "CARGO_TARGET_DIR="+filepath.Join(root, "bin", "cargo"))
	default:
		cmd = exec.Command("go", "build", "-buildmode=c-shared", "-o", tmp, ".")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	}
	cmd.Dir = src
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testplugins: building %s: %v\n%s", name, err, b)
	}
	if isRust {
		// cargo names the library of a crate a-b a_b.wasm; the crate is
		// named as its directory.
		built := filepath.Join(root, "bin", "cargo", "wasm32-wasi", "release", strings.ReplaceAll(name, "-", "_")+".wasm")
		b, err := os.ReadFile(built)
		if err != nil {
			t.Fatalf("testplugins: building %s: cargo wrote no module: %v", name, err)
		}
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Debian's Rust toolchain, as the Makefile's RUST_CARGO and RUST_RUSTC
// name it: rustup's rustc may come first on PATH, without the wasm32-wasi
// target.
const (
	rustCargo = "/usr/bin/cargo"
	rustRustc = "/usr/bin/rustc"
)

// needRust fails the test when a Debian package that building a Rust
// plugin offline needs is missing.
func needRust(t testing.TB) {
	t.Helper()
	var missing []string
	for _, p := range []struct{ pattern, pkg string }{
		{rustRustc, "rustc"},
		{rustCargo, "cargo"},
		{"/usr/lib/rustlib/wasm32-wasi", "libstd-rust-dev-wasm32"},
		{"/usr/share/cargo/registry/serde_json-*", "librust-serde-json-dev"},
	} {
		if m, _ := filepath.Glob(p.pattern); len(m) == 0 {
			missing = append(missing, p.pkg)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("testplugins: Debian's Rust toolchain is incomplete: install the Debian packages %s (make deps does)", strings.Join(missing, ", "))
	}
}

// Bytes returns the built example plugin examples/plugins/name.
func Bytes(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Manifested returns a module whose weft_manifest answers manifest (a
// JSON document without backslashes) and whose activities return null.
func Manifested(t testing.TB, manifest string) []byte {
	t.Helper()
	return WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) (i32.const 0)))`,
		strings.ReplaceAll(manifest, `"`, `\"`), len(manifest)))
}

// Constant returns a module with the one activity, which answers output
// (a JSON document without backslashes) whatever its input, asking the
// host nothing: a candidate that behaves otherwise than a recording, for
// replays and shadow runs.
func Constant(t testing.TB, activity, output string) []byte {
	t.Helper()
	manifest := fmt.Sprintf(`{"activities":[{"name":%q}]}`, activity)
	esc := func(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
	// The output at 1024, the call's request after it, with 64 KiB of
	// room: an output of any size fits.
	in := (1024 + len(output) + 7) &^ 7
	pages := (in + 64<<10 + 64<<10 - 1) / (64 << 10)
	return WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") %d)
  (data (i32.const 16) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (if (result i32) (i32.gt_u (local.get 0) (i32.const 65536)) (then (i32.const 0)) (else (i32.const %d))))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (data (i32.const 1024) "%s")
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    (call $result (i32.const 1024) (i32.const %d)) (i32.const 0)))`,
		pages, esc(manifest), in, len(manifest), esc(output), len(output)))
}

// WAT compiles WebAssembly text to a module with wat2wasm.
func WAT(t testing.TB, text string) []byte {
	t.Helper()
	need(t, "wat2wasm", "wabt")
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", "-o", out, in).CombinedOutput(); err != nil {
		t.Fatalf("testplugins: wat2wasm: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func need(t testing.TB, tool, debianPackages string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("testplugins: %s not found: install the Debian packages %s (make test does)", tool, debianPackages)
	}
}

func glob(t testing.TB, dir, ext string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// target is where cargo builds when run by hand without
		// CARGO_TARGET_DIR: its files are outputs, not sources.
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "target") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ext) && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

func upToDate(out string, deps []string) bool {
	o, err := os.Stat(out)
	if err != nil {
		return false
	}
	for _, d := range deps {
		s, err := os.Stat(d)
		if err != nil || s.ModTime().After(o.ModTime()) {
			return false
		}
	}
	return true
}

func lockFile(t testing.TB, path string) (unlock func()) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// Blocks while another test process builds.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("testplugins: locking %s: %v", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}
}

// CacheDir returns the compilation cache that every test process shares,
// bin/cache/wazero: compiling a Go plugin takes a second, and tens of seconds
// under the race detector, while loading it from the cache takes about
// 50 ms. wazero writes cache entries atomically, so concurrent test
// processes can share it.
func CacheDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(t), "bin", "cache", "wazero")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Runtime returns a plugins.Runtime over a blob store in a temporary
// directory, closed when the test ends. Unless cfg sets one, it uses the
// shared compilation cache.
func Runtime(t testing.TB, cfg plugins.Config) *plugins.Runtime {
	t.Helper()
	return RuntimeIn(t, t.TempDir(), cfg)
}

// RuntimeIn is Runtime with the blob store in dir.
func RuntimeIn(t testing.TB, dir string, cfg plugins.Config) *plugins.Runtime {
	t.Helper()
	if cfg.CacheDir == "" {
		cfg.CacheDir = CacheDir(t)
	}
	blobs, err := blobfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := plugins.New(context.Background(), cfg, blobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	return rt
}

// Load loads the example plugin name into rt and returns its version.
func Load(t testing.TB, rt *plugins.Runtime, name string) string {
	t.Helper()
	m, err := rt.Load(context.Background(), Bytes(t, name))
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	return m.Version
}
