package plugins_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// infoModule's echo activity returns its call-info document.
var infoModule = watModule{
	imports: `(import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "info" (func $info (param i32 i32) (result i32)))`,
	exports: `
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 1024) (i32.const 32)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32)
    (call $result (i32.const 8192) (call $info (i32.const 8192) (i32.const 4096))) (i32.const 0))`,
}

// TestClocksStartWhenTheGuestRuns: an attempt's heartbeat clock and its
// start-to-close timeout count from when the guest starts, not from when
// the attempt was made (its version may still have had to compile).
func TestClocksStartWhenTheGuestRuns(t *testing.T) {
	t.Parallel()
	// The fake clock runs near the real one: the timeout becomes a real
	// context deadline.
	made := time.Now().Truncate(time.Millisecond)
	var now atomic.Pointer[time.Time]
	now.Store(&made)
	rt := testplugins.Runtime(t, plugins.Config{Now: func() time.Time { return *now.Load() }})
	ctx := context.Background()
	m, err := rt.Load(ctx, testplugins.WAT(t, infoModule.String()))
	if err != nil {
		t.Fatal(err)
	}
	hb := call.NewHeartbeat(made)
	// The version took 3 s to be ready: the guest starts at made+3s.
	started := made.Add(3 * time.Second)
	now.Store(&started)
	out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "echo", Heartbeat: hb, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, at, beats := hb.Last(); !at.Equal(started) || beats != 0 {
		t.Errorf("last sign of life %v (%d beats), want the guest's start %v", at, beats, started)
	}
	var info abi.Info
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("info %q: %v", out, err)
	}
	if want := started.Add(10 * time.Second).UnixMilli(); info.DeadlineUnixMilli != want {
		t.Errorf("deadline %d, want %d (start + timeout)", info.DeadlineUnixMilli, want)
	}

	// A sooner deadline of the context stays the deadline.
	soon := time.Now().Add(time.Minute)
	cctx, cancel := context.WithDeadline(ctx, soon)
	defer cancel()
	out, err = rt.Invoke(cctx, m.Version, call.Call{Activity: "echo", Timeout: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.DeadlineUnixMilli != soon.UnixMilli() {
		t.Errorf("deadline %d, want the context's %d", info.DeadlineUnixMilli, soon.UnixMilli())
	}
}
