package plugins_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// hostileWAT is a plugin whose one activity, "run", executes its input as a
// program of 9-byte instructions [op u8][a u32 le][b u32 le], so that the
// fuzzer controls every pointer, length, status and result byte the guest
// hands the host:
//
//	op&7 = 0  result(a, b)
//	       1  log(op>>3, a, b)
//	       2  heartbeat(a, b)
//	       3  info(a, b)
//	       4  last_heartbeat(a, b)
//	       5  config(a, b, a, b)
//	       6  status := a
//	       7  result(the rest of the input, min(a, its length)); stop
const hostileWAT = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "log" (func $log (param i32 i32 i32)))
  (import "weft" "heartbeat" (func $hb (param i32 i32) (result i32)))
  (import "weft" "info" (func $info (param i32 i32) (result i32)))
  (import "weft" "last_heartbeat" (func $lhb (param i32 i32) (result i32)))
  (import "weft" "config" (func $config (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"run\"}]}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param $n i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 32768))
      (then (i32.const 0)) (else (i32.const 32768))))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 0) (i32.const 31)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $alen i32) (param $n i32) (result i32)
    (local $i i32) (local $end i32) (local $op i32) (local $a i32) (local $b i32) (local $status i32) (local $rest i32)
    (local.set $i (i32.add (local.get $p) (local.get $alen)))
    (local.set $end (i32.add (local.get $i) (local.get $n)))
    (block $done
      (loop $next
        (br_if $done (i32.gt_u (i32.add (local.get $i) (i32.const 9)) (local.get $end)))
        (local.set $op (i32.load8_u (local.get $i)))
        (local.set $a (i32.load (i32.add (local.get $i) (i32.const 1))))
        (local.set $b (i32.load (i32.add (local.get $i) (i32.const 5))))
        (local.set $i (i32.add (local.get $i) (i32.const 9)))
        (block $b7 (block $b6 (block $b5 (block $b4 (block $b3 (block $b2 (block $b1 (block $b0
          (br_table $b0 $b1 $b2 $b3 $b4 $b5 $b6 $b7 (i32.and (local.get $op) (i32.const 7))))
          (call $result (local.get $a) (local.get $b)) (br $next))
          (call $log (i32.shr_u (local.get $op) (i32.const 3)) (local.get $a) (local.get $b)) (br $next))
          (drop (call $hb (local.get $a) (local.get $b))) (br $next))
          (drop (call $info (local.get $a) (local.get $b))) (br $next))
          (drop (call $lhb (local.get $a) (local.get $b))) (br $next))
          (drop (call $config (local.get $a) (local.get $b) (local.get $a) (local.get $b))) (br $next))
          (local.set $status (local.get $a)) (br $next))
        (local.set $rest (i32.sub (local.get $end) (local.get $i)))
        (call $result (local.get $i)
          (select (local.get $a) (local.get $rest) (i32.lt_u (local.get $a) (local.get $rest))))
        (br $done)))
    (local.get $status)))`

// hostile encodes instructions for hostileWAT.
func hostile(ops ...any) []byte {
	var b []byte
	for i := 0; i < len(ops); {
		switch v := ops[i].(type) {
		case string: // raw trailing bytes for op 7
			b = append(b, v...)
			i++
		default:
			op, a, bb := ops[i].(int), ops[i+1].(int), ops[i+2].(int)
			b = append(b, byte(op))
			b = binary.LittleEndian.AppendUint32(b, uint32(a))
			b = binary.LittleEndian.AppendUint32(b, uint32(bb))
			i += 3
		}
	}
	return b
}

// ok is an input after which the guest answers {"ok":1}.
var ok = hostile(6, 0, 0, 7, 100, 0, `{"ok":1}`)

func FuzzHostileGuest(f *testing.F) {
	seeds := [][]byte{
		ok,
		hostile(0, 65000, 1000),           // result outside memory
		hostile(0, 0, 0xFFFFFFFF),         // result of 4 GiB
		hostile(0, 0xFFFFFFF0, 32),        // pointer wraps around
		hostile(6, 9, 0, 7, 100, 0, `{}`), // unknown status
		hostile(6, 0, 0, 7, 100, 0, `{"unterminated`),             // garbage output
		hostile(6, 1, 0, 7, 100, 0, `{"message":"no code"}`),      // failure without code
		hostile(6, 1, 0, 7, 100, 0, `not json at all`),            // garbage failure
		hostile(6, 2, 0, 7, 100, 0, `{"code":"boom"}`),            // panic status
		hostile(6, 1, 0, 7, 100, 0, `{"code":"x","details":[1]}`), // clean failure
		hostile(2, 32768, 5, 6, 0, 0, 7, 100, 0, `{}`),            // heartbeat details not JSON
		hostile(3, 65530, 100, 6, 0, 0, 7, 100, 0, `{}`),          // info buffer outside memory
		hostile(5, 70000, 4, 7, 100, 0, `{}`),                     // config key outside memory
		hostile(1, 0, 40000, 1, 0, 40000, 7, 100, 0, `{}`),        // log volume
		hostile(6, 0, 0),                    // status 0 without result
		hostile(4, 0, 10, 0, 0, 0, 6, 0, 0), // last heartbeat, empty result
	}
	for _, s := range seeds {
		f.Add(s)
	}
	rt := testplugins.Runtime(f, plugins.Config{PoolSize: 1, MaxOutputBytes: 4096, MaxLogBytes: 1024, Logger: discardLogger()})
	m, err := rt.Load(context.Background(), testplugins.WAT(f, hostileWAT))
	if err != nil {
		f.Fatal(err)
	}
	invoke := func(input []byte) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rt.Invoke(ctx, m.Version, call.Call{
			Activity:      "run",
			Input:         input,
			LastHeartbeat: []byte(`{"done_ms":1}`),
			Grants:        &grant.Set{Config: map[string]string{"": "empty key"}},
		})
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		out, err := invoke(input)
		if err == nil {
			if len(out) > 4096 {
				t.Fatalf("output of %d bytes passed the 4096-byte limit", len(out))
			}
			if cerr := call.CheckOutput(out); cerr != nil && !errors.Is(cerr, call.ErrProtocol) {
				t.Fatalf("CheckOutput: %v", cerr)
			}
		} else {
			var ce *call.Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T %v, want a *call.Error", err, err)
			}
			var ge *call.GuestError
			if !errors.As(err, &ge) && !errors.Is(err, call.ErrProtocol) && !errors.Is(err, call.ErrLimit) && !errors.Is(err, call.ErrTrap) {
				t.Fatalf("error %v is neither a guest error nor a protocol, limit or trap error", err)
			}
			if ge != nil && ge.Code == "" {
				t.Fatalf("guest error without code: %v", err)
			}
		}
		// Whatever happened, the plugin still serves.
		if out, err := invoke(ok); err != nil || string(out) != `{"ok":1}` {
			t.Fatalf("after %q: the next call gave %s, %v", input, out, err)
		}
	})
}

func FuzzLoad(f *testing.F) {
	valid := testplugins.WAT(f, watModule{}.String())
	f.Add(valid)
	f.Add(testplugins.WAT(f, hostileWAT))
	f.Add(valid[:len(valid)-3])
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte{})
	rt := testplugins.Runtime(f, plugins.Config{MaxModuleBytes: 1 << 20, Logger: discardLogger()})
	f.Fuzz(func(t *testing.T, wasm []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := rt.Load(ctx, wasm)
		if err != nil {
			if !errors.Is(err, plugins.ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			return
		}
		if len(m.Activities) == 0 || m.Version != plugins.Hash(wasm) {
			t.Fatalf("loaded %+v", m)
		}
		rt.Unload(ctx, m.Version)
	})
}

func TestGarbageOutputIsReturnedRawAndCheckOutputFlagsIt(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.WAT(t, hostileWAT))
	if err != nil {
		t.Fatal(err)
	}
	out, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "run", Input: hostile(6, 0, 0, 7, 100, 0, `{"unterminated`)})
	if err != nil || string(out) != `{"unterminated` {
		t.Fatalf("Invoke: %q, %v; want the guest's bytes as they are", out, err)
	}
	if err := call.CheckOutput(out); !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), "not a JSON document") {
		t.Fatalf("CheckOutput: %v, want ErrProtocol", err)
	}
	if err := call.CheckOutput([]byte(`{"ok":[1,2]}`)); err != nil {
		t.Fatalf("CheckOutput of JSON: %v", err)
	}
}
