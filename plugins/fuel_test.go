package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// upperInput is the kit's upper input with a text of n bytes.
func upperInput(n int) []byte {
	return fmt.Appendf(nil, `{"text":%q}`, strings.Repeat("abcdefgh", n/8+1)[:n])
}

// Call.Fuel measures the guest's work: a call replayed on a fresh instance
// from the same tape uses the same fuel every time, whatever the load of
// the machine; more work uses more; a failing call is measured too; the
// counter adds up; and a call without one works as before.
func TestFuelMeasuresGuestWork(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := testplugins.Load(t, rt, "kit")
	ctx := context.Background()

	// A tape of a fresh instance, so that each replay runs the same
	// initialisation and call again, byte for byte.
	rec := call.Call{Activity: "upper", Input: upperInput(100), Record: tape.NewRecorder(0), RecordExact: true}
	want, err := rt.Invoke(ctx, v, rec)
	if err != nil {
		t.Fatal(err)
	}
	replayed := func() uint64 {
		t.Helper()
		var fuel uint64
		c := call.Call{Activity: "upper", Input: rec.Input, Replay: tape.NewPlayer(rec.Record.Tape()), Fuel: &fuel}
		out, err := rt.Invoke(ctx, v, c)
		if err != nil || string(out) != string(want) {
			t.Fatalf("replay: %s, %v; recorded %s", out, err, want)
		}
		return fuel
	}
	first, second := replayed(), replayed()
	if first == 0 || first != second {
		t.Errorf("two replays of one tape used %d and %d fuel; want the same amount above 0", first, second)
	}

	// On the pool's instances: more input, more work.
	pooled := func(activity string, input []byte) (uint64, error) {
		t.Helper()
		var fuel uint64
		_, err := rt.Invoke(ctx, v, call.Call{Activity: activity, Input: input, Fuel: &fuel})
		return fuel, err
	}
	small, err := pooled("upper", upperInput(100))
	if err != nil {
		t.Fatal(err)
	}
	large, err := pooled("upper", upperInput(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	if small == 0 || large <= 2*small {
		t.Errorf("upper used %d fuel on 100 bytes, %d on 64 KiB; want more than twice as much", small, large)
	}
	failed, err := pooled("fail", []byte(`{"code":"nope"}`))
	var ge *call.GuestError
	if !errors.As(err, &ge) || failed == 0 {
		t.Errorf("fail: %v, %d fuel; want a guest error and its work measured", err, failed)
	}

	// The counter adds up across calls.
	var total uint64
	for range 2 {
		if _, err := rt.Invoke(ctx, v, call.Call{Activity: "echo", Input: []byte(`"x"`), Fuel: &total}); err != nil {
			t.Fatal(err)
		}
	}
	one, _ := pooled("echo", []byte(`"x"`))
	if total <= one {
		t.Errorf("two echo calls added %d fuel to one counter, one call %d; want the sum", total, one)
	}

	if out, err := rt.Invoke(ctx, v, call.Call{Activity: "echo", Input: []byte(`"x"`)}); err != nil || string(out) != `"x"` {
		t.Errorf("echo without Fuel: %s, %v", out, err)
	}
}

// A version loaded with LoadUnstored is invoked like any other while it is
// loaded, is never in the blob store, and is gone after Unload; Load of the
// same bytes stores it.
func TestLoadUnstored(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt := testplugins.RuntimeIn(t, dir, plugins.Config{MaxModuleBytes: 1 << 20})
	blobs, err := blobfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wasm := testplugins.Bytes(t, "ckit")

	m, err := rt.LoadUnstored(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	if m.Version != plugins.Hash(wasm) || !m.Has("echo") {
		t.Fatalf("LoadUnstored described %s with %v; want %s with echo", m.Version, m.Activities, plugins.Hash(wasm))
	}
	if out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: "echo", Input: []byte(`{"a":1}`)}); err != nil || string(out) != `{"a":1}` {
		t.Fatalf("echo on the unstored version: %s, %v", out, err)
	}
	if _, err := blobs.Get(ctx, m.Version); !errors.Is(err, plugins.ErrNotFound) {
		t.Errorf("the blob store's Get of the unstored version: %v, want ErrNotFound", err)
	}
	if stored, err := rt.Stored(ctx, m.Version); stored || err != nil {
		t.Errorf("Stored of the unstored version: %v, %v; want false", stored, err)
	}

	rt.Unload(ctx, m.Version)
	_, err = rt.Invoke(ctx, m.Version, call.Call{Activity: "echo", Input: []byte(`1`)})
	if !errors.Is(err, plugins.ErrNotFound) || !strings.Contains(err.Error(), m.Version) {
		t.Errorf("echo after Unload: %v; want ErrNotFound naming %s", err, m.Version)
	}

	if _, err := rt.Load(ctx, wasm); err != nil {
		t.Fatal(err)
	}
	if stored, err := rt.Stored(ctx, m.Version); !stored || err != nil {
		t.Errorf("Stored after Load: %v, %v; want true", stored, err)
	}

	for name, bad := range map[string][]byte{
		"not WebAssembly":     []byte("not a module"),
		"over MaxModuleBytes": make([]byte, 1<<20+1),
	} {
		if _, err := rt.LoadUnstored(ctx, bad); !errors.Is(err, plugins.ErrInvalid) {
			t.Errorf("LoadUnstored of %s: %v, want ErrInvalid", name, err)
		}
		if stored, err := rt.Stored(ctx, plugins.Hash(bad)); stored || err != nil {
			t.Errorf("Stored of a refused module (%s): %v, %v; want false", name, stored, err)
		}
	}
}
