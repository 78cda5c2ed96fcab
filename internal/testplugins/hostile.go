package testplugins

import "testing"

// Guest is a hand-written plugin with one activity, "go", for tests that
// attack the host from inside. Its module imports weft.result, weft.log,
// weft.heartbeat and WASI's poll_oneoff and fd_write (as $result, $log,
// $heartbeat, $poll and $fd_write), has two pages of memory holding the
// manifest at 0 (30 bytes), one table, and weft_alloc returning 4096.
type Guest struct {
	// Extra declares more functions.
	Extra string
	// Init is _initialize's body.
	Init string
	// Manifest is weft_manifest's body; empty returns the manifest.
	Manifest string
	// Body is weft_invoke's body (params: name, name length, input length).
	Body string
}

// Module compiles the guest with wat2wasm.
func (g Guest) Module(t testing.TB) []byte {
	t.Helper()
	manifest := g.Manifest
	if manifest == "" {
		manifest = `(call $result (i32.const 0) (i32.const 30)) (i32.const 0)`
	}
	return WAT(t, `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "log" (func $log (param i32 i32 i32)))
  (import "weft" "heartbeat" (func $heartbeat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (table 1 funcref)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"go\"}]}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "_initialize") `+g.Init+`)
  (func (export "weft_manifest") (result i32) `+manifest+`)
  `+g.Extra+`
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) `+g.Body+`))`)
}
