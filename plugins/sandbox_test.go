package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

func loadFile(t testing.TB, rt *plugins.Runtime, path string) string {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt.Load(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	return m.Version
}

// A Go plugin that reads files links path_open and friends; it loads, and
// finds nothing to read.
func TestFilesystemPluginSeesNoFiles(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/escape"))
	out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "read"})
	var ge *call.GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("read /: %s, %v; want the activity to fail", out, err)
	}
	if strings.Contains(ge.Message, "root:") {
		t.Fatalf("the guest read a file: %s", ge.Message)
	}
}

// The inert WASI functions are the host's stubs: each returns EBADF (8)
// whatever it is asked, including for the descriptors a WASI
// implementation would treat as stdio or a preopened directory.
func TestInertWASIFunctionsReturnEBADF(t *testing.T) {
	t.Parallel()
	const module = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_pwrite" (func $fd_pwrite (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_readdir" (func $fd_readdir (param i32 i32 i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "sock_accept" (func $sock_accept (param i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_unlink_file" (func $unlink (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"probe\"}]}/etc/passwdtruefalse")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 0) (i32.const 33)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    (local $ok i32) (local $fd i32)
    (local.set $ok (i32.const 1))
    ;; fds 0-4: stdio, and where a preopened directory would be
    (loop $each
      (local.set $ok (i32.and (local.get $ok) (i32.eq (i32.const 8)
        (call $path_open (local.get $fd) (i32.const 0) (i32.const 33) (i32.const 11) (i32.const 0) (i64.const -1) (i64.const -1) (i32.const 0) (i32.const 2048)))))
      (local.set $ok (i32.and (local.get $ok) (i32.eq (i32.const 8)
        (call $fd_pwrite (local.get $fd) (i32.const 0) (i32.const 0) (i64.const 0) (i32.const 2048)))))
      (local.set $ok (i32.and (local.get $ok) (i32.eq (i32.const 8)
        (call $fd_readdir (local.get $fd) (i32.const 2048) (i32.const 64) (i64.const 0) (i32.const 2052)))))
      (local.set $ok (i32.and (local.get $ok) (i32.eq (i32.const 8)
        (call $sock_accept (local.get $fd) (i32.const 0) (i32.const 2048)))))
      (local.set $ok (i32.and (local.get $ok) (i32.eq (i32.const 8)
        (call $unlink (local.get $fd) (i32.const 33) (i32.const 11)))))
      (local.set $fd (i32.add (local.get $fd) (i32.const 1)))
      (br_if $each (i32.lt_u (local.get $fd) (i32.const 5))))
    (if (local.get $ok)
      (then (call $result (i32.const 44) (i32.const 4)))
      (else (call $result (i32.const 48) (i32.const 5))))
    (i32.const 0)))`
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.WAT(t, module))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "probe"})
	if err != nil || string(out) != "true" {
		t.Fatalf("probe: %s, %v; want every inert function to return EBADF", out, err)
	}
}

func TestSandboxFromInside(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))
	before := time.Now().Unix()
	out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "probe", Grants: &grant.Set{Config: map[string]string{"greeting": "hej"}}})
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Stdin   string   `json:"stdin"`
		Env     []string `json:"env"`
		Home    string   `json:"home"`
		Args    []string `json:"args"`
		NowUnix int64    `json:"now_unix"`
		SleptMS int64    `json:"slept_ms"`
		Random  bool     `json:"random"`
		Config  string   `json:"config"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	// The test process has HOME and PATH set; none of it may reach the guest.
	if len(p.Env) != 0 || p.Home != "" {
		t.Errorf("guest sees environment %q, HOME %q; want none", p.Env, p.Home)
	}
	if len(p.Args) != 0 {
		t.Errorf("guest sees arguments %q; want none", p.Args)
	}
	if p.Stdin != "0 EOF" {
		t.Errorf("stdin read gave %q, want 0 EOF", p.Stdin)
	}
	if p.NowUnix < before || p.NowUnix > time.Now().Unix() {
		t.Errorf("guest wall clock %d is not the real time", p.NowUnix)
	}
	if p.SleptMS < 20 {
		t.Errorf("a 20ms sleep took %dms: the monotonic clock or sleeping is fake", p.SleptMS)
	}
	if !p.Random {
		t.Error("random source gave zeros")
	}
	if p.Config != "hej" {
		t.Errorf("config greeting %q, want hej", p.Config)
	}
}

// recorder collects log records.
type recorder struct {
	mu   sync.Mutex
	recs []call.Record
}

func (r *recorder) log(rec call.Record) {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}

func TestGuestLogsCapturedWithinVolumeLimit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MaxLogBytes: 4096})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))

	t.Run("small", func(t *testing.T) {
		t.Parallel()
		var rec recorder
		if _, err := rt.Invoke(context.Background(), v, call.Call{Activity: "noise", Input: []byte(`{"lines":2,"size":3}`), Log: rec.log}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rec.recs {
			got = append(got, r.Source+"/"+r.Level.String()+": "+r.Message)
		}
		want := []string{
			"log/INFO: log 0 xxx", "stdout/INFO: stdout 0 xxx", "stderr/WARN: stderr 0 xxx",
			"log/INFO: log 1 xxx", "stdout/INFO: stdout 1 xxx", "stderr/WARN: stderr 1 xxx",
			"stdout/INFO: unterminated",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
	t.Run("over the limit", func(t *testing.T) {
		t.Parallel()
		var rec recorder
		if _, err := rt.Invoke(context.Background(), v, call.Call{Activity: "noise", Input: []byte(`{"lines":100,"size":100}`), Log: rec.log}); err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, r := range rec.recs[:len(rec.recs)-1] {
			total += len(r.Message)
		}
		if total > 4096 {
			t.Errorf("%d bytes logged, more than the 4096 limit", total)
		}
		last := rec.recs[len(rec.recs)-1]
		if last.Level != slog.LevelWarn || !strings.Contains(last.Message, "log volume limit of 4096 bytes reached") {
			t.Errorf("last record %+v, want the dropped-bytes note", last)
		}
		// The note counts the drop for a caller that keeps the records.
		if d := last.Dropped; d == nil || d.OnRecords || d.Records == 0 || d.Bytes < d.Records || total+d.Bytes < 100*3*100 {
			t.Errorf("last record's Dropped = %+v, want the records and bytes over the byte limit", d)
		}
		for _, r := range rec.recs[:len(rec.recs)-1] {
			if r.Dropped != nil {
				t.Errorf("record %q has Dropped %+v; only the note does", r.Message, r.Dropped)
			}
		}
	})
}

func TestGuestExitDiscardsInstanceAndKeepsStderr(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1, Logger: discardLogger()})
	v := loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/sandbox"))
	_, err := rt.Invoke(context.Background(), v, call.Call{Activity: "exit"})
	var ce *call.Error
	if !errors.Is(err, call.ErrTrap) || !errors.As(err, &ce) {
		t.Fatalf("error %v, want ErrTrap", err)
	}
	if !strings.Contains(err.Error(), "exited with code 3") || !strings.Contains(ce.Stderr, "exiting with 3") {
		t.Errorf("error %q with stderr %q: want the exit code and the guest's stderr", err, ce.Stderr)
	}
	if _, err := rt.Invoke(context.Background(), v, call.Call{Activity: "noise", Input: []byte(`{}`)}); err != nil {
		t.Fatalf("call after exit: %v", err)
	}
}
