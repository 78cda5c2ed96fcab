package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// These tests run hostile guests written in WAT against the host functions:
// each guest tries to outlast its deadline, its cancellation or a limit
// from inside a host function, where wazero cannot stop it.

// containWAT is the frame of every guest here: the imports, memory of the
// given number of pages, a manifest listing activities, weft_alloc placing
// the request at 4096, and weft_invoke(name, name_len, input_len) running
// body. Scratch memory starts at 8192. $ok sets the result null; a check
// that fails sets it to one character naming the check ($check).
const containWAT = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "log" (func $log (param i32 i32 i32)))
  (import "weft" "heartbeat" (func $heartbeat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (memory (export "memory") %d)
  (data (i32.const 0) "%s")
  (data (i32.const 2048) "null123456789abcdefghijklmnopqrstuvwxyz")
  (data (i32.const 2100) "sleeping")
  (global $failed (mut i32) (i32.const 0))
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 0) (i32.const %d)) (i32.const 0))
  (func $ok (call $result (i32.const 2048) (i32.const 4)))
  ;; $check records check n (1..35) as failed unless cond holds.
  (func $check (param $cond i32) (param $n i32)
    (if (i32.and (i32.eqz (local.get $cond)) (i32.eqz (global.get $failed)))
      (then (global.set $failed (local.get $n)))))
  (func $finish (result i32)
    (if (global.get $failed)
      (then (call $result (i32.add (i32.const 2051) (global.get $failed)) (i32.const 1)))
      (else (call $ok)))
    (i32.const 0))
  ;; $clocksub writes a clock subscription (48 bytes) at $at.
  (func $clocksub (param $at i32) (param $userdata i64) (param $id i32) (param $timeout i64) (param $flags i32)
    (i64.store (local.get $at) (local.get $userdata))
    (i64.store offset=8 (local.get $at) (i64.const 0)) ;; tag 0: clock
    (i64.store offset=16 (local.get $at) (i64.extend_i32_u (local.get $id)))
    (i64.store offset=24 (local.get $at) (local.get $timeout))
    (i64.store offset=32 (local.get $at) (i64.const 0))
    (i64.store offset=40 (local.get $at) (i64.extend_i32_u (local.get $flags))))
  ;; $fdsub writes an fd_read (tag 1) or fd_write (tag 2) subscription at $at.
  (func $fdsub (param $at i32) (param $userdata i64) (param $tag i32) (param $fd i32)
    (i64.store (local.get $at) (local.get $userdata))
    (i64.store offset=8 (local.get $at) (i64.extend_i32_u (local.get $tag)))
    (i64.store offset=16 (local.get $at) (i64.extend_i32_u (local.get $fd)))
    (i64.store offset=24 (local.get $at) (i64.const 0))
    (i64.store offset=32 (local.get $at) (i64.const 0))
    (i64.store offset=40 (local.get $at) (i64.const 0)))
  ;; $sleep sleeps $ns nanoseconds (relative, monotonic) in poll_oneoff.
  (func $sleep (param $ns i64) (result i32)
    (call $clocksub (i32.const 8192) (i64.const 42) (i32.const 1) (local.get $ns) (i32.const 0))
    (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)))
  (func (export "weft_invoke") (param $name i32) (param $len i32) (param $in i32) (result i32)
    (local $i i32) (local $t i64)
%s))`

// containGuest loads a guest whose weft_invoke runs body (WAT instructions
// returning the status) and returns its version.
func containGuest(t *testing.T, rt *plugins.Runtime, pages int, body string, activities ...string) string {
	t.Helper()
	var names []string
	for _, a := range activities {
		names = append(names, fmt.Sprintf(`{"name":%q}`, a))
	}
	manifest := `{"activities":[` + strings.Join(names, ",") + `]}`
	text := fmt.Sprintf(containWAT, pages, strings.ReplaceAll(manifest, `"`, `\"`), len(manifest), body)
	m, err := rt.Load(context.Background(), testplugins.WAT(t, text))
	if err != nil {
		t.Fatalf("loading the guest: %v", err)
	}
	return m.Version
}

// callDeadline is the deadline of the calls the host must stop; margin is
// how late it may stop them on a loaded two-core machine under -race.
const (
	callDeadline = 2 * time.Second
	margin       = 5 * time.Second
)

// invokeBounded runs call with a deadline of callDeadline and returns its
// error and how long it took. It fails the test, without waiting for the
// call, when the call outlives its deadline by more than margin (the
// runtime's cleanup then still waits for it).
func invokeBounded(t *testing.T, rt *plugins.Runtime, version string, call call.Call) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	type res struct {
		err     error
		elapsed time.Duration
	}
	done := make(chan res, 1)
	start := time.Now()
	go func() {
		_, err := rt.Invoke(ctx, version, call)
		done <- res{err, time.Since(start)}
	}()
	limit := time.NewTimer(callDeadline + margin)
	defer limit.Stop()
	select {
	case r := <-done:
		return r.elapsed, r.err
	case <-limit.C:
		t.Fatalf("%s: still running %s after the start of a call with a deadline of %s", call.Activity, callDeadline+margin, callDeadline)
		return 0, nil
	}
}

func TestContainmentSleepStopsAtDeadline(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	v := containGuest(t, rt, 1, `(drop (call $sleep (i64.const 3600000000000))) (call $finish)`, "sleep")
	elapsed, err := invokeBounded(t, rt, v, call.Call{Activity: "sleep"})
	if !errors.Is(err, call.ErrTimeout) {
		t.Fatalf("a guest sleeping an hour: %v after %s, want ErrTimeout", err, elapsed)
	}
	if elapsed < callDeadline {
		t.Errorf("stopped after %s, before its deadline of %s", elapsed, callDeadline)
	}
}

func TestContainmentSleepStopsOnCancel(t *testing.T) {
	t.Parallel()
	const grace = 100 * time.Millisecond
	rt := testplugins.Runtime(t, plugins.Config{CancelGrace: grace, Logger: discardLogger()})
	v := containGuest(t, rt, 1, `
    (call $log (i32.const 1) (i32.const 2100) (i32.const 8))
    (drop (call $sleep (i64.const 3600000000000)))
    (call $finish)`, "sleep")

	// A long deadline: only the cancellation may stop this call.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hb := call.NewHeartbeat(time.Now())
	sleeping := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := rt.Invoke(ctx, v, call.Call{Activity: "sleep", Heartbeat: hb, Log: func(call.Record) { once.Do(func() { close(sleeping) }) }})
		done <- err
	}()
	select {
	case <-sleeping:
	case err := <-done:
		t.Fatalf("the call ended before sleeping: %v", err)
	case <-ctx.Done():
		t.Fatal("the guest never started sleeping")
	}
	// Before the request: the grace period starts inside it, so elapsed
	// from here is never shorter than the time since it began.
	start := time.Now()
	hb.RequestCancel()
	limit := time.NewTimer(grace + margin)
	defer limit.Stop()
	select {
	case err := <-done:
		if !errors.Is(err, call.ErrCancelled) {
			t.Fatalf("a cancelled sleeping guest: %v after %s, want ErrCancelled", err, time.Since(start))
		}
		if elapsed := time.Since(start); elapsed < grace {
			t.Errorf("stopped %s after the request, before the grace period of %s", elapsed, grace)
		}
	case <-limit.C:
		t.Fatalf("a sleeping guest still runs %s after its cancellation (grace %s)", grace+margin, grace)
	}
}

func TestContainmentSleepersStopTogether(t *testing.T) {
	t.Parallel()
	const n = 4
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: n, Logger: discardLogger()})
	v := containGuest(t, rt, 1, `(drop (call $sleep (i64.const 3600000000000))) (call $finish)`, "sleep")
	ctx, cancel := context.WithTimeout(context.Background(), callDeadline)
	defer cancel()
	start := time.Now()
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := rt.Invoke(ctx, v, call.Call{Activity: "sleep"})
			errs <- err
		}()
	}
	limit := time.NewTimer(callDeadline + margin)
	defer limit.Stop()
	for i := range n {
		select {
		case err := <-errs:
			if !errors.Is(err, call.ErrTimeout) {
				t.Errorf("sleeper: %v, want ErrTimeout", err)
			}
		case <-limit.C:
			t.Fatalf("%d of %d sleepers still run %s after their deadline of %s", n-i, n, time.Since(start)-callDeadline, callDeadline)
		}
	}
}

// logCounter counts what reaches Call.Log.
type logCounter struct {
	mu      sync.Mutex
	records int
	bytes   int
	last    call.Record
}

func (c *logCounter) log(r call.Record) {
	c.mu.Lock()
	c.records++
	c.bytes += len(r.Message)
	c.last = r
	c.mu.Unlock()
}

// check verifies that at most max records and maxBytes bytes reached the
// log, plus a last record noting the drop.
func (c *logCounter) check(t *testing.T, maxRecords, maxBytes int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.records == 0 || !strings.Contains(c.last.Message, "dropped") {
		t.Fatalf("%d records, the last %+v; want the drop noted last", c.records, c.last)
	}
	if c.records-1 > maxRecords {
		t.Errorf("%d records besides the note reached the log, more than the limit of %d", c.records-1, maxRecords)
	}
	if b := c.bytes - len(c.last.Message); b > maxBytes {
		t.Errorf("%d bytes besides the note reached the log, more than the limit of %d", b, maxBytes)
	}
}

// fdWriteLoop writes, in a loop until it is stopped, 8000 iovecs that each
// point at the same 1 MiB (from 131072) to fd $fd. The iovecs are at 65536.
const fdWriteLoop = `
    (memory.fill (i32.const 131072) (i32.const %d) (i32.const 1048576))
    (loop $iov
      (i32.store (i32.add (i32.const 65536) (i32.shl (local.get $i) (i32.const 3))) (i32.const 131072))
      (i32.store offset=4 (i32.add (i32.const 65536) (i32.shl (local.get $i) (i32.const 3))) (i32.const 1048576))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $iov (i32.lt_u (local.get $i) (i32.const 8000))))
    (loop $write
      (drop (call $fd_write (i32.const %d) (i32.const 65536) (i32.const 8000) (i32.const 16380)))
      (br $write))
    (call $finish)`

func TestContainmentFdWriteStopsAtDeadline(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		fd, fill int
	}{
		{"newlines on stdout", 1, '\n'},
		{"one long line on stderr", 2, 'x'},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
			v := containGuest(t, rt, 20, fmt.Sprintf(fdWriteLoop, tt.fill, tt.fd), "write")
			var c logCounter
			elapsed, err := invokeBounded(t, rt, v, call.Call{Activity: "write", Log: c.log})
			if !errors.Is(err, call.ErrTimeout) {
				t.Fatalf("writing in a loop: %v after %s, want ErrTimeout", err, elapsed)
			}
			d := plugins.Config{}.WithDefaults()
			c.check(t, d.MaxLogRecords, d.MaxLogBytes)
		})
	}
}

// A guest may pass as many iovecs as its memory holds: 33 million empty ones
// in 256 MiB. Walking them takes seconds under the race detector, so the
// host must look at the deadline between iovecs.
func TestContainmentEmptyIovecsStopAtDeadline(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	// 4096 pages (256 MiB) of zeros: from 1 MiB on, 33423360 empty iovecs.
	v := containGuest(t, rt, 4096, `
    (loop $again
      (if (i32.eq (local.get $len) (i32.const 4))
        (then (drop (call $fd_read (i32.const 0) (i32.const 0x100000) (i32.const 33423360) (i32.const 16))))
        (else (drop (call $fd_write (i32.const 1) (i32.const 0x100000) (i32.const 33423360) (i32.const 16)))))
      (br $again))
    (call $finish)`, "read", "write")
	for _, activity := range []string{"read", "write"} {
		t.Run(activity, func(t *testing.T) {
			elapsed, err := invokeBounded(t, rt, v, call.Call{Activity: activity})
			if !errors.Is(err, call.ErrTimeout) {
				t.Fatalf("%s in a loop: %v after %s, want ErrTimeout", activity, err, elapsed)
			}
		})
	}
}

func TestContainmentLogRecordLimit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	v := containGuest(t, rt, 64, `
    (if (i32.eq (local.get $len) (i32.const 3))
      (then ;; "log": a million empty messages
        (loop $each
          (call $log (i32.const 1) (i32.const 0) (i32.const 0))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $each (i32.lt_u (local.get $i) (i32.const 1000000)))))
      (else ;; "stdout": 2 MiB of newlines in one write
        (memory.fill (i32.const 65536) (i32.const 10) (i32.const 2097152))
        (i32.store (i32.const 8192) (i32.const 65536))
        (i32.store (i32.const 8196) (i32.const 2097152))
        (call $check (i32.eqz (call $fd_write (i32.const 1) (i32.const 8192) (i32.const 1) (i32.const 8200))) (i32.const 1))
        (call $check (i32.eq (i32.load (i32.const 8200)) (i32.const 2097152)) (i32.const 2))))
    (call $finish)`, "log", "stdout")
	d := plugins.Config{}.WithDefaults()
	for _, tt := range []struct{ activity, note string }{
		{"log", "999000 records"},
		{"stdout", "log record limit of 1000 records reached"},
	} {
		t.Run(tt.activity, func(t *testing.T) {
			t.Parallel()
			var c logCounter
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if out, err := rt.Invoke(ctx, v, call.Call{Activity: tt.activity, Log: c.log}); err != nil || string(out) != "null" {
				t.Fatalf("%s: %s, %v", tt.activity, out, err)
			}
			c.check(t, d.MaxLogRecords, d.MaxLogBytes)
			if !strings.Contains(c.last.Message, tt.note) {
				t.Errorf("note %q does not say %q", c.last.Message, tt.note)
			}
		})
	}
}

func TestContainmentHeartbeatDetailsLimit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	// 2048 pages: 128 MiB. Each activity heartbeats a JSON string whose
	// size it picks by the length of its name; "oob" passes a length
	// larger than memory.
	v := containGuest(t, rt, 2048, `
    (local.set $i (i32.const 104857600)) ;; "big": 100 MiB
    (if (i32.eq (local.get $len) (i32.const 5)) (then (local.set $i (i32.const 65536)))) ;; "exact"
    (if (i32.eq (local.get $len) (i32.const 4)) (then (local.set $i (i32.const 65537)))) ;; "over"
    (memory.fill (i32.const 65536) (i32.const 97) (local.get $i))
    (i32.store8 (i32.const 65536) (i32.const 34))
    (i32.store8 (i32.add (i32.const 65535) (local.get $i)) (i32.const 34))
    (if (i32.eq (local.get $len) (i32.const 6)) (then (local.set $i (i32.const -1)))) ;; "oob123"
    (drop (call $heartbeat (i32.const 65536) (local.get $i)))
    (call $finish)`, "big", "exact", "over", "oob123")
	d := plugins.Config{}.WithDefaults()
	for _, tt := range []struct {
		activity string
		size     string
	}{
		{"big", "104857600 bytes"},
		{"over", "65537 bytes"},
		{"oob123", "4294967295 bytes"},
	} {
		t.Run(tt.activity, func(t *testing.T) {
			hb := call.NewHeartbeat(time.Now())
			_, err := rt.Invoke(context.Background(), v, call.Call{Activity: tt.activity, Heartbeat: hb})
			if !errors.Is(err, call.ErrLimit) || !strings.Contains(err.Error(), tt.size) || !strings.Contains(err.Error(), fmt.Sprint(d.MaxHeartbeatBytes)) {
				t.Fatalf("heartbeat of %s: %v; want ErrLimit naming the size and the limit of %d", tt.size, err, d.MaxHeartbeatBytes)
			}
			if details, _, beats := hb.Last(); beats != 0 || details != nil {
				t.Errorf("the refused heartbeat was recorded: %d beats, %d bytes", beats, len(details))
			}
		})
	}
	t.Run("exact", func(t *testing.T) {
		hb := call.NewHeartbeat(time.Now())
		if out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "exact", Heartbeat: hb}); err != nil || string(out) != "null" {
			t.Fatalf("heartbeat at the limit: %s, %v", out, err)
		}
		if details, _, beats := hb.Last(); beats != 1 || len(details) != d.MaxHeartbeatBytes {
			t.Errorf("recorded %d beats and %d bytes, want 1 and %d", beats, len(details), d.MaxHeartbeatBytes)
		}
	})
}

// pollWAT exercises poll_oneoff's semantics, one case per activity, chosen
// by the first letter of its name. Subscriptions are at 8192, events at
// 12288, the event count at 16380 and a clock reading at 16384.
const pollWAT = `
    (local.set $i (i32.load8_u (local.get $name)))
    (if (i32.eq (local.get $i) (i32.const 114)) (then ;; rel: relative 50ms
      (call $check (i32.eqz (call $sleep (i64.const 50000000))) (i32.const 1))
      (call $check (i32.eq (i32.load (i32.const 16380)) (i32.const 1)) (i32.const 2))
      (call $check (i64.eq (i64.load (i32.const 12288)) (i64.const 42)) (i32.const 3))
      (call $check (i32.eqz (i32.load16_u (i32.const 12296))) (i32.const 4))
      (call $check (i32.eqz (i32.load8_u (i32.const 12298))) (i32.const 5))))
    (if (i32.or (i32.eq (local.get $i) (i32.const 109)) (i32.eq (local.get $i) (i32.const 119))) (then
      ;; mono, wall: absolute, 50ms after the clock's reading
      (local.set $i (i32.eq (local.get $i) (i32.const 109))) ;; 1: monotonic, 0: realtime
      (call $check (i32.eqz (call $clock (local.get $i) (i64.const 0) (i32.const 16384))) (i32.const 1))
      (call $clocksub (i32.const 8192) (i64.const 7) (local.get $i) (i64.add (i64.load (i32.const 16384)) (i64.const 50000000)) (i32.const 1))
      (call $check (i32.eqz (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380))) (i32.const 2))
      (call $check (i32.eq (i32.load (i32.const 16380)) (i32.const 1)) (i32.const 3))
      (call $check (i64.eq (i64.load (i32.const 12288)) (i64.const 7)) (i32.const 4))))
    (if (i32.eq (local.get $i) (i32.const 112)) (then ;; past: absolute, long gone
      (call $clocksub (i32.const 8192) (i64.const 7) (i32.const 1) (i64.const 1) (i32.const 1))
      (call $check (i32.eqz (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380))) (i32.const 1))
      (call $check (i32.eq (i32.load (i32.const 16380)) (i32.const 1)) (i32.const 2))))
    (if (i32.eq (local.get $i) (i32.const 98)) (then ;; both: of two clocks only the first fires
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 1) (i64.const 10000000) (i32.const 0))
      (call $clocksub (i32.const 8240) (i64.const 2) (i32.const 0) (i64.const 3600000000000) (i32.const 0))
      (call $check (i32.eqz (call $poll (i32.const 8192) (i32.const 12288) (i32.const 2) (i32.const 16380))) (i32.const 1))
      (call $check (i32.eq (i32.load (i32.const 16380)) (i32.const 1)) (i32.const 2))
      (call $check (i64.eq (i64.load (i32.const 12288)) (i64.const 1)) (i32.const 3))))
    (if (i32.eq (local.get $i) (i32.const 105)) (then ;; io: descriptors are ready at once, the clock does not fire
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 1) (i64.const 3600000000000) (i32.const 0))
      (call $fdsub (i32.const 8240) (i64.const 2) (i32.const 2) (i32.const 1))
      (call $fdsub (i32.const 8288) (i64.const 3) (i32.const 1) (i32.const 0))
      (call $fdsub (i32.const 8336) (i64.const 4) (i32.const 2) (i32.const 7))
      (call $check (i32.eqz (call $poll (i32.const 8192) (i32.const 12288) (i32.const 4) (i32.const 16380))) (i32.const 1))
      (call $check (i32.eq (i32.load (i32.const 16380)) (i32.const 3)) (i32.const 2))
      (call $check (i64.eq (i64.load (i32.const 12288)) (i64.const 2)) (i32.const 3))
      (call $check (i32.eqz (i32.load16_u (i32.const 12296))) (i32.const 4))
      (call $check (i32.eq (i32.load8_u (i32.const 12298)) (i32.const 2)) (i32.const 5))
      (call $check (i64.eq (i64.load (i32.const 12320)) (i64.const 3)) (i32.const 6))
      (call $check (i32.eq (i32.load8_u (i32.const 12330)) (i32.const 1)) (i32.const 7))
      (call $check (i32.eqz (i32.load16_u (i32.const 12328))) (i32.const 8))
      (call $check (i64.eq (i64.load (i32.const 12352)) (i64.const 4)) (i32.const 9))
      (call $check (i32.eq (i32.load16_u (i32.const 12360)) (i32.const 8)) (i32.const 10))
      (call $check (i32.eq (i32.load8_u (i32.const 12362)) (i32.const 2)) (i32.const 11))))
    (if (i32.eq (local.get $i) (i32.const 101)) (then ;; errors: the call's errno
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 1) (i64.const 0) (i32.const 0))
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 0) (i32.const 16380)) (i32.const 28)) (i32.const 1))
      (call $check (i32.eq (call $poll (i32.const 65530) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 21)) (i32.const 2))
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 65530) (i32.const 1) (i32.const 16380)) (i32.const 21)) (i32.const 3))
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 65534)) (i32.const 21)) (i32.const 4))
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 0x10000000) (i32.const 16380)) (i32.const 21)) (i32.const 5))
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 1) (i64.const 0) (i32.const 2)) ;; unknown flags
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 28)) (i32.const 6))
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 2) (i64.const 0) (i32.const 1)) ;; absolute on a CPU clock
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 58)) (i32.const 7))
      (call $clocksub (i32.const 8192) (i64.const 1) (i32.const 9) (i64.const 0) (i32.const 1)) ;; absolute on no clock
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 28)) (i32.const 8))
      (call $fdsub (i32.const 8192) (i64.const 1) (i32.const 3) (i32.const 1)) ;; unknown event type
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 28)) (i32.const 9))
      (call $fdsub (i32.const 8192) (i64.const 1) (i32.const 1) (i32.const -1)) ;; negative descriptor
      (call $check (i32.eq (call $poll (i32.const 8192) (i32.const 12288) (i32.const 1) (i32.const 16380)) (i32.const 8)) (i32.const 10))))
    (call $finish)`

// poll_oneoff keeps WASI's semantics, with the host's clocks.
func TestContainmentPollOneoffSemantics(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	v := containGuest(t, rt, 1, pollWAT, "rel", "mono", "wall", "past", "both", "io", "errors")
	for _, tt := range []struct {
		activity string
		atLeast  time.Duration
	}{
		{"rel", 50 * time.Millisecond},
		{"mono", 50 * time.Millisecond},
		{"wall", 40 * time.Millisecond}, // the wall clock may be stepped
		{"past", 0},
		{"both", 10 * time.Millisecond},
		{"io", 0},
		{"errors", 0},
	} {
		t.Run(tt.activity, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			out, err := rt.Invoke(ctx, v, call.Call{Activity: tt.activity})
			elapsed := time.Since(start)
			if err != nil {
				t.Fatalf("%s: %v after %s", tt.activity, err, elapsed)
			}
			if string(out) != "null" {
				t.Fatalf("%s: check %s failed", tt.activity, out)
			}
			if elapsed < tt.atLeast {
				t.Errorf("%s returned after %s, before %s", tt.activity, elapsed, tt.atLeast)
			}
		})
	}
}
