// Package ckit_test tests the C plugin examples/plugins/ckit through the
// real host. It lives in a directory of its own because Go would take a
// directory of Go and C files for a cgo package.
package ckit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

func TestImportsOnlyTheHost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, testplugins.Bytes(t, "ckit"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range cm.ImportedFunctions() {
		if module, name, _ := f.Import(); module != abi.HostModule {
			t.Errorf("ckit imports %s.%s; want only the host functions of %q", module, name, abi.HostModule)
		}
	}
}

// The behaviours ckit shares with the Go kit (echo, upper, fail, info,
// spin) are tested on both plugins by the plugins package's tests
// (sameABI in plugins/invoke_test.go); this file tests what is ckit's own.

func TestHeartbeatActivityWithoutBeats(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	ckit := testplugins.Load(t, rt, "ckit")
	out, err := rt.Invoke(context.Background(), ckit, call.Call{Activity: "heartbeat", Input: []byte(`{}`)})
	if err != nil || string(out) != `{"beats":0,"cancelled":false}` {
		t.Fatalf("got %s, %v", out, err)
	}
}

// TestSameAsKit gives the Go kit and ckit the same calls and wants the
// same outputs, byte for byte, and the same failures. The Go kit is slow to
// compile under the race detector, so both subtests share one Runtime.
func TestSameAsKit(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit, ckit := testplugins.Load(t, rt, "kit"), testplugins.Load(t, rt, "ckit")
	t.Run("inputs", func(t *testing.T) {
		t.Parallel()
		testSameInputs(t, rt, kit, ckit)
	})
	t.Run("upper every rune", func(t *testing.T) {
		t.Parallel()
		testUpperEveryRune(t, rt, kit, ckit)
	})
}

// testSameInputs tries calls at the corners of encoding/json that ckit's
// decoder imitates. Only the messages of bad_input failures may differ.
func testSameInputs(t *testing.T, rt *plugins.Runtime, kit, ckit string) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		activity string
		input    string
		attempt  int
	}{
		{activity: "echo", input: `  {"a" : [1, 2.5e3, "\u00e9"]}  `},
		{activity: "upper", input: `{"text":"plain ascii"}`},
		{activity: "upper", input: `{"TEXT":"case-insensitive key"}`},
		{activity: "upper", input: `{"te\u0078t":"escaped key"}`},
		{activity: "upper", input: `{"text":"first","Text":"last wins"}`},
		{activity: "upper", input: `{"text":"kept","text":null}`},
		{activity: "upper", input: `{"text":null}`},
		{activity: "upper", input: `{}`},
		{activity: "upper", input: `null`},
		{activity: "upper", input: `{"other":{"deep":[1,{"x":"y"}]},"text":"after"}`},
		{activity: "upper", input: `{"text":"<b>&amp;</b> \u2028\u2029 \u0000\u001f\b\f\n\r\t \" \\ \/"}`},
		{activity: "upper", input: `{"text":"\ud83d\ude00 pair, \ud800 lone high, \udc00 lone low, \ud800\ud800 two highs"}`},
		{activity: "upper", input: "{\"text\":\"raw \xff\xfe invalid \xe2\x82 truncated \xed\xa0\x80 surrogate \xc0\xaf overlong\"}"},
		{activity: "upper", input: `{"text":"ß ŉ ǰ ΐ ﬀ ı i ǅ ǈ ǋ ᾈ ῼ ꭓ ｆ 𐐨 𞤢"}`},
		{activity: "upper", input: `{"text":"` + strings.Repeat("long ", 20000) + `"}`},
		{activity: "upper", input: `{"x":` + deep(9999) + `}`},
		{activity: "upper", input: `{"x":` + deep(10000) + `}`},
		{activity: "upper", input: `{"text":5}`},
		{activity: "upper", input: `{"text":true}`},
		{activity: "upper", input: `{"text":["a"]}`},
		{activity: "upper", input: `[1,2]`},
		{activity: "upper", input: `"text"`},
		{activity: "upper", input: `42`},
		{activity: "upper", input: `{"text":"unterminated`},
		{activity: "upper", input: `{"text":"x"} trailing`},
		{activity: "upper", input: `{"text":"bad escape \q"}`},
		{activity: "upper", input: "{\"text\":\"raw control \x01\"}"},
		{activity: "upper", input: `{"text":01}`},
		{activity: "upper", input: `{"a":-}`},
		{activity: "upper", input: `{"a":1.}`},
		{activity: "upper", input: `{"a":tru}`},
		{activity: "upper", input: `{"a" 1}`},
		{activity: "upper", input: `{"a":1,}`},
		{activity: "fail", input: `{"code":"c","message":"m","retryable":true}`, attempt: 1},
		{activity: "fail", input: `{"CODE":"c","Message":"m","RETRYABLE":true,"Fail_Attempts":1}`, attempt: 1},
		{activity: "fail", input: `{"CODE":"c","Message":"m","RETRYABLE":true,"Fail_Attempts":1}`, attempt: 2},
		{activity: "fail", input: `{"code":"c","meſſage":"long s folds to s","fail_attempts":1}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":2,"fail_attempts":null}`, attempt: 5},
		{activity: "fail", input: `{"code":"c","fail_attempts":0}`, attempt: 0},
		{activity: "fail", input: `{"code":"c","fail_attempts":-0}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":-9223372036854775808}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":9223372036854775807}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":9223372036854775808}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":1.5}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":1e2}`, attempt: 1},
		{activity: "fail", input: `{"code":"c","fail_attempts":1.0}`, attempt: 1},
		{activity: "fail", input: `{"code":"","message":""}`, attempt: 1},
		{activity: "fail", input: `{"code":"q\"uote\u0001","message":"line\nbreak <&>"}`, attempt: 1},
		{activity: "fail", input: `{"retryable":"yes"}`, attempt: 1},
		{activity: "fail", input: `{"retryable":1}`, attempt: 1},
		{activity: "fail", input: `{"code":7}`, attempt: 1},
		{activity: "info", input: `null`, attempt: 4},
		{activity: "info", input: `{"ignored":[1]}`, attempt: 4},
		{activity: "info", input: `[1]`, attempt: 4},
		{activity: "info", input: `5`, attempt: 4},
	}
	for i, tt := range tests {
		name := fmt.Sprintf("%d %s %.40s", i, tt.activity, tt.input)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := call.Call{Activity: tt.activity, Input: []byte(tt.input), Info: abi.Info{InstanceID: "i", Plugin: "p", Attempt: tt.attempt}}
			want, wantErr := rt.Invoke(context.Background(), kit, c)
			got, gotErr := rt.Invoke(context.Background(), ckit, c)
			if wantErr == nil {
				if gotErr != nil || string(got) != string(want) {
					t.Fatalf("ckit: %.200s, %v\nkit:  %.200s", got, gotErr, want)
				}
				return
			}
			var wantGE, gotGE *call.GuestError
			if !errors.As(wantErr, &wantGE) || !errors.As(gotErr, &gotGE) {
				t.Fatalf("ckit: %.200s, %v\nkit:  %v", got, gotErr, wantErr)
			}
			if gotGE.Code != wantGE.Code || gotGE.Retryable != wantGE.Retryable ||
				(wantGE.Code != abi.CodeBadInput && gotGE.Message != wantGE.Message) {
				t.Errorf("ckit: %+v\nkit:  %+v", gotGE, wantGE)
			}
		})
	}
}

// testUpperEveryRune upper-cases every Unicode code point with both
// plugins: ckit's upper_rune must agree with Go's strings.ToUpper.
func testUpperEveryRune(t *testing.T, rt *plugins.Runtime, kit, ckit string) {
	const chunk = 0x10000
	for lo := rune(0); lo <= 0x10FFFF; lo += chunk {
		var b strings.Builder
		for r := lo; r < lo+chunk; r++ {
			if r < 0xD800 || r > 0xDFFF {
				b.WriteRune(r)
			}
		}
		in, err := json.Marshal(map[string]string{"text": b.String()})
		if err != nil {
			t.Fatal(err)
		}
		c := call.Call{Activity: "upper", Input: in}
		want, err := rt.Invoke(context.Background(), kit, c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rt.Invoke(context.Background(), ckit, c)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("U+%04X-U+%04X: %s", lo, lo+chunk-1, firstDifference(t, got, want))
		}
	}
}

// firstDifference names the first rune that two upper outputs map
// differently.
func firstDifference(t *testing.T, got, want []byte) string {
	var g, w struct{ Text string }
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	gr, wr := []rune(g.Text), []rune(w.Text)
	for i := range min(len(gr), len(wr)) {
		if gr[i] != wr[i] {
			return fmt.Sprintf("rune %d: ckit U+%04X, kit U+%04X", i, gr[i], wr[i])
		}
	}
	return fmt.Sprintf("ckit %d runes, kit %d", len(gr), len(wr))
}

func TestTrapDiscardsInstance(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
	ckit := testplugins.Load(t, rt, "ckit")
	ctx := context.Background()

	_, err := rt.Invoke(ctx, ckit, call.Call{Activity: "trap"})
	if !errors.Is(err, call.ErrTrap) {
		t.Fatalf("error %v, want ErrTrap", err)
	}
	// The pool has one slot: the next call needs a fresh instance.
	if out, err := rt.Invoke(ctx, ckit, call.Call{Activity: "echo", Input: []byte(`1`)}); err != nil || string(out) != "1" {
		t.Fatalf("after trap: %s, %v", out, err)
	}
	if st := rt.Stats(ckit); st.Discarded != 1 || st.Created != 2 {
		t.Errorf("discarded %d and created %d instances, want 1 and 2", st.Discarded, st.Created)
	}
}

// TestOutOfMemoryIsAFailure gives upper more text than the instance's
// memory can hold three copies of: malloc fails, and ckit reports it rather
// than trap or write garbage.
func TestOutOfMemoryIsAFailure(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{MemoryLimitPages: 16, PoolSize: 1}) // 1 MiB
	ckit := testplugins.Load(t, rt, "ckit")
	ctx := context.Background()

	_, err := rt.Invoke(ctx, ckit, call.Call{Activity: "upper", Input: []byte(`{"text":"` + strings.Repeat("a", 400<<10) + `"}`)})
	var ge *call.GuestError
	if !errors.As(err, &ge) || ge.Code != "out_of_memory" || !ge.Retryable {
		t.Fatalf("error %v, want a retryable out_of_memory failure", err)
	}
	if out, err := rt.Invoke(ctx, ckit, call.Call{Activity: "upper", Input: []byte(`{"text":"` + strings.Repeat("a", 100<<10) + `"}`)}); err != nil || len(out) != 100<<10+len(`{"text":""}`) {
		t.Fatalf("the call after: %.50s, %v", out, err)
	}
	if st := rt.Stats(ckit); st.Discarded != 1 {
		t.Errorf("discarded %d instances, want the one that ran out of memory", st.Discarded)
	}
}

func TestHeartbeat(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.DiscardHandler)})
	ckit := testplugins.Load(t, rt, "ckit")
	ctx := context.Background()

	t.Run("all beats", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		out, err := rt.Invoke(ctx, ckit, call.Call{Activity: "heartbeat", Input: []byte(`{"n":5}`), Heartbeat: hb})
		if err != nil || string(out) != `{"beats":5,"cancelled":false}` {
			t.Fatalf("got %s, %v; want {beats: 5, cancelled: false}", out, err)
		}
		if details, _, beats := hb.Last(); beats != 5 || string(details) != `{"n":5}` {
			t.Errorf("%d heartbeats, last details %s; want 5 and {\"n\":5}", beats, details)
		}
	})
	t.Run("cancelled mid-way", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		var mu sync.Mutex
		var logs []string
		done := make(chan error, 1)
		go func() {
			_, err := rt.Invoke(ctx, ckit, call.Call{
				Activity:  "heartbeat",
				Input:     []byte(`{"n":1000000000000}`),
				Heartbeat: hb,
				Log: func(r call.Record) {
					mu.Lock()
					defer mu.Unlock()
					logs = append(logs, r.Message)
				},
			})
			done <- err
		}()
		waitFor(t, 10*time.Second, func() bool { _, _, n := hb.Last(); return n > 0 })
		hb.RequestCancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("heartbeat did not stop after cancellation")
		}
		var ge *call.GuestError
		if !errors.Is(err, call.ErrCancelled) || !errors.As(err, &ge) {
			t.Fatalf("error %v, want the guest's cancelled failure", err)
		}
		_, _, beats := hb.Last()
		mu.Lock()
		defer mu.Unlock()
		if want := fmt.Sprintf("cancelled at heartbeat %d", beats); len(logs) != 1 || logs[0] != want {
			t.Errorf("logs %q, want [%q]", logs, want)
		}
	})
	t.Run("cancelled before", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		hb.RequestCancel()
		_, err := rt.Invoke(ctx, ckit, call.Call{Activity: "heartbeat", Input: []byte(`{"n":3}`), Heartbeat: hb})
		if !errors.Is(err, call.ErrCancelled) {
			t.Fatalf("error %v, want ErrCancelled", err)
		}
		if _, _, beats := hb.Last(); beats != 1 {
			t.Errorf("%d heartbeats, want 1", beats)
		}
	})
	t.Run("cancelled after the last beat", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		hb.RequestCancel()
		out, err := rt.Invoke(ctx, ckit, call.Call{Activity: "heartbeat", Input: []byte(`{"n":0}`), Heartbeat: hb})
		if err != nil || string(out) != `{"beats":0,"cancelled":true}` {
			t.Fatalf("got %s, %v; want {beats: 0, cancelled: true}", out, err)
		}
	})
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(time.Millisecond)
	}
}
