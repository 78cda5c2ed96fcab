package plugins_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
	"github.com/weftworks/weft/plugins/tape"
)

// tapedCall is one activity call of a record-then-replay test. Heartbeat
// gives the call a fresh Heartbeat (recorded and replayed alike).
type tapedCall struct {
	name      string
	activity  string
	input     string
	info      abi.Info
	lastHB    string
	grants    *grant.Set
	heartbeat bool
	timeout   time.Duration
	// kinds are kinds the tape must hold: proof that the call asked the
	// host what the test means it to.
	kinds []tape.Kind
}

func (tc tapedCall) call() call.Call {
	c := call.Call{Activity: tc.activity, Input: []byte(tc.input), Info: tc.info, Grants: tc.grants, Timeout: tc.timeout}
	if tc.lastHB != "" {
		c.LastHeartbeat = []byte(tc.lastHB)
	}
	if tc.heartbeat {
		c.Heartbeat = call.NewHeartbeat(time.Now())
	}
	return c
}

// taped is what recording a call kept.
type taped struct {
	out  []byte
	err  error
	tape *tape.Tape
}

// recording is how recordCalls records.
type recording int

const (
	// exact records each call with RecordExact: on a new instance.
	exact recording = iota
	// pooled runs each call once unrecorded, then records it on the
	// instance that call warmed, which must not make an instance.
	pooled
)

func (m recording) String() string { return [...]string{"exact", "pooled"}[m] }

// recordCalls runs calls on a fresh runtime of plugin, in order, each
// recorded as mode says, and returns their outputs and tapes (through the
// tape's encoding, as a store would keep them).
func recordCalls(t *testing.T, plugin string, calls []tapedCall, mode recording) []taped {
	t.Helper()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := testplugins.Load(t, rt, plugin)
	var got []taped
	for _, tc := range calls {
		if mode == pooled {
			_, _ = rt.Invoke(context.Background(), v, tc.call()) // a failure ("fail") leaves the instance healthy
		}
		before := rt.Stats(v).Created
		c := tc.call()
		c.Record, c.RecordExact = tape.NewRecorder(0), mode == exact
		out, err := rt.Invoke(context.Background(), v, c)
		made := rt.Stats(v).Created - before
		if mode == pooled && made != 0 || mode == exact && made != 1 {
			t.Errorf("%s: %s recording made %d instances", tc.name, mode, made)
		}
		tp := c.Record.Tape()
		if tp.Fresh != (mode == exact) {
			t.Errorf("%s: %s recording made a tape with Fresh %v", tc.name, mode, tp.Fresh)
		}
		b, merr := tp.Marshal()
		if merr != nil {
			t.Fatalf("%s: %v", tc.name, merr)
		}
		if tp, merr = tape.Unmarshal(b); merr != nil {
			t.Fatalf("%s: %v", tc.name, merr)
		}
		if tp.Truncated {
			t.Fatalf("%s: the tape is truncated without a cap", tc.name)
		}
		for _, k := range tc.kinds {
			if mode == pooled {
				break // the warm instance may not ask again (a seed drawn at its first call)
			}
			if !slicesContainsKind(tp.Entries, k) {
				t.Errorf("%s: the tape holds no %s entry: %s", tc.name, k, describeTape(tp))
			}
		}
		got = append(got, taped{out: out, err: err, tape: tp})
	}
	return got
}

func slicesContainsKind(es []tape.Entry, k tape.Kind) bool {
	for _, e := range es {
		if e.Kind == k {
			return true
		}
	}
	return false
}

// describeTape lists a tape's kinds and asks, for failure messages.
func describeTape(tp *tape.Tape) string {
	var b strings.Builder
	for i, e := range tp.Entries {
		if i == 40 {
			fmt.Fprintf(&b, " … (%d entries)", len(tp.Entries))
			break
		}
		fmt.Fprintf(&b, " %s %q;", e.Kind, e.Ask)
	}
	return b.String()
}

// replayCalls replays recorded calls, in the same order, on a fresh
// runtime of plugin, with no grants, and checks that each gives the same
// output (or error) and uses its whole tape.
func replayCalls(t *testing.T, plugin string, calls []tapedCall, recorded []taped) {
	t.Helper()
	for i, err := range replayResults(t, plugin, calls, recorded) {
		if err != nil {
			t.Errorf("%s: %v\nrecorded:%s", calls[i].name, err, describeTape(recorded[i].tape))
		}
	}
}

// replayResults replays recorded calls as replayCalls does and returns,
// for each, nil when it gave the recorded output (or error) using its
// whole tape, else why not: the divergence, or tape.Tape.Differs's error.
func replayResults(t *testing.T, plugin string, calls []tapedCall, recorded []taped) []error {
	t.Helper()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := testplugins.Load(t, rt, plugin)
	errs := make([]error, len(calls))
	for i, tc := range calls {
		c := tc.call()
		c.Grants = nil // a replay needs none: the tape answers
		c.Info = abi.Info{Attempt: 99}
		c.LastHeartbeat = nil
		tp := recorded[i].tape
		p := tape.NewPlayer(tp)
		c.Replay = p
		// A guest that waits for a clock that no longer moves is stopped.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := rt.Invoke(ctx, v, c)
		cancel()
		switch {
		case errors.Is(err, call.ErrDiverged):
			errs[i] = err
		case fmt.Sprint(err) != fmt.Sprint(recorded[i].err):
			errs[i] = tp.Differs(fmt.Sprintf("error %v, recorded %v", err, recorded[i].err))
		case !bytes.Equal(out, recorded[i].out):
			errs[i] = tp.Differs(fmt.Sprintf("output %s, recorded %s", out, recorded[i].out))
		case p.Left() != 0:
			errs[i] = tp.Differs(fmt.Sprintf("the replay ended early, %d entries left", p.Left()))
		}
	}
	return errs
}

// tinyPNG is a small PNG, base64-encoded, for the thumbnail plugin.
func tinyPNG(t *testing.T) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for y := range 30 {
		for x := range 40 {
			img.Set(x, y, color.RGBA{uint8(x * 6), uint8(y * 8), 90, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestTapeReplaysExamplePlugins records calls of the example plugins —
// activities that read the clocks, sleep, heartbeat, read their info, last
// heartbeat, configuration and random bytes — and replays them on another
// runtime: the same output, byte for byte, from the tape alone. Exact
// recordings (a new instance, its start on the tape) always replay so;
// pooled ones (on a warm instance: the tape holds the call alone) do too
// for every example today, thanks to the loose clocks and seeds of a
// replay of a tape that is not fresh (tape.Player): kit's sleep and work
// and thumbnail's resize read the clock more or less often on a new
// instance (a Go runtime's first scheduling, its collector), tally's top
// seeds Rust's HashMap at the instance's first use.
func TestTapeReplaysExamplePlugins(t *testing.T) {
	t.Parallel()
	info := abi.Info{InstanceID: "i-7", Workflow: "wf", StepID: "s", Plugin: "p", Attempt: 2, IdempotencyKey: "i-7/s/1"}
	text := strings.Repeat("the cat and the dog\nand a bird\n", 1100)
	tests := map[string][]tapedCall{
		"kit": {
			{name: "echo", activity: "echo", input: `{"a":[1,2,3]}`},
			{name: "upper", activity: "upper", input: `{"text":"shout"}`},
			// 64 KiB. (A replay's new instance may collect garbage where
			// the warm one did not, reading a clock the tape never held:
			// BenchmarkTape's replay of this call found it, after many
			// calls; tape.Player.ClockOr answers it, and its unit test
			// covers it.)
			{name: "upper 64 KiB", activity: "upper", input: `{"text":"` + strings.Repeat("abc ", 16<<10) + `"}`},
			{name: "info", activity: "info", info: info, timeout: time.Minute, kinds: []tape.Kind{tape.KindInfo}},
			{name: "work", activity: "work", input: `{"ms":6,"beat_ms":2}`, lastHB: `{"done_ms":1}`, info: info, heartbeat: true,
				kinds: []tape.Kind{tape.KindInfo, tape.KindLastHeartbeat, tape.KindClock, tape.KindHeartbeat, tape.KindPoll}},
			{name: "sleep", activity: "sleep", input: `{"ms":3}`, kinds: []tape.Kind{tape.KindPoll}},
			{name: "fail", activity: "fail", input: `{"code":"x","fail_attempts":2}`, info: info},
		},
		"ckit": {
			{name: "echo", activity: "echo", input: `"héllo"`},
			{name: "info", activity: "info", info: info, kinds: []tape.Kind{tape.KindInfo}},
			{name: "heartbeat", activity: "heartbeat", input: `{"n":3}`, heartbeat: true, kinds: []tape.Kind{tape.KindHeartbeat, tape.KindCancelled}},
		},
		"text": {
			{name: "slugify", activity: "slugify", input: `{"text":"Ça déménage, vite!"}`},
			{name: "wordcount", activity: "wordcount", input: `{"text":"b a b c a b\nd"}`},
			{name: "template", activity: "template", input: `{"template":"{{range $k, $v := .}}{{$k}}={{$v}};{{end}}","data":{"z":1,"a":2,"m":3}}`},
		},
		"thumbnail": {
			{name: "info", activity: "info", input: `{"image":"` + tinyPNG(t) + `"}`},
			{name: "resize", activity: "resize", input: `{"image":"` + tinyPNG(t) + `","width":8}`, heartbeat: true},
		},
		"tally": {
			{name: "count", activity: "count", input: `{"text":` + jsonString(text) + `}`, heartbeat: true, kinds: []tape.Kind{tape.KindHeartbeat}},
			{name: "top", activity: "top", input: `{"text":"b a b c a b the the the","n":3}`,
				grants: &grant.Set{Config: map[string]string{"stopwords": "the, a"}}, kinds: []tape.Kind{tape.KindConfig, tape.KindRandom}},
		},
	}
	// carried are the pooled recordings that do not replay exactly, and
	// why: their replay must say that the recorded instance carried state
	// from earlier calls. None today (see above); TestTapePooledRecording
	// checks the hint.
	carried := map[string]string{}
	for plugin, calls := range tests {
		for _, mode := range []recording{exact, pooled} {
			t.Run(plugin+"/"+mode.String(), func(t *testing.T) {
				t.Parallel()
				recorded := recordCalls(t, plugin, calls, mode)
				for i, r := range recorded {
					if r.err != nil && calls[i].name != "fail" {
						t.Fatalf("%s: %v", calls[i].name, r.err)
					}
				}
				if mode == exact {
					replayCalls(t, plugin, calls, recorded)
					return
				}
				for i, err := range replayResults(t, plugin, calls, recorded) {
					name := plugin + "/" + calls[i].name
					_, known := carried[name]
					switch {
					case err == nil && known:
						t.Errorf("%s: the pooled tape replayed exactly; drop it from carried", name)
					case err != nil && !known:
						t.Errorf("%s: the pooled tape did not replay exactly: %v\nrecorded:%s", name, err, describeTape(recorded[i].tape))
					case err != nil && !errors.Is(err, tape.ErrCarriedState):
						t.Errorf("%s: %v does not say that the instance carried state", name, err)
					}
				}
			})
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// loopbackGrants grants any port of 127.0.0.1, the configuration value url
// and the secret token from the environment variable env.
func loopbackGrants(url, env string) *grant.Set {
	return &grant.Set{
		Hosts:   []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}},
		Config:  map[string]string{"url": url},
		Secrets: map[string]string{"token": "env:" + env},
	}
}

const tapeToken = "t4pe-s3cr3t-t0ken-value"

// TestTapeReplaysOutboundRequests records the webhook's delivery and the
// tally's count_url against a loopback server, exactly and pooled, then
// replays both without reaching the server: the same outputs, the request
// records the same but for their durations, and no secret on the tape.
func TestTapeReplaysOutboundRequests(t *testing.T) {
	t.Setenv("WEFT_TAPE_TEST_TOKEN", tapeToken)
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Set-Cookie", "sid="+tapeToken)
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Plain", "kept")
		io.WriteString(w, "one two three\nfour five\n")
	}))
	defer srv.Close()
	calls := map[string][]tapedCall{
		"webhook": {{name: "deliver", activity: "deliver", input: `{"event":"shipped"}`, grants: loopbackGrants(srv.URL+"/hook", "WEFT_TAPE_TEST_TOKEN"),
			info: abi.Info{Plugin: "webhook", Attempt: 1, IdempotencyKey: "i-1/notify/1"}, kinds: []tape.Kind{tape.KindConfig, tape.KindSecret, tape.KindHTTP}}},
		"tally": {{name: "count_url", activity: "count_url", input: `{"url":"` + srv.URL + `/doc"}`, grants: loopbackGrants(srv.URL, "WEFT_TAPE_TEST_TOKEN"),
			kinds: []tape.Kind{tape.KindHTTP}}},
	}
	for _, mode := range []recording{exact, pooled} {
		t.Run(mode.String(), func(t *testing.T) { testTapeReplaysOutbound(t, srv, &served, calls, mode) })
	}
}

// testTapeReplaysOutbound is TestTapeReplaysOutboundRequests with calls
// recorded as mode says.
func testTapeReplaysOutbound(t *testing.T, srv *httptest.Server, served *atomic.Int64, calls map[string][]tapedCall, mode recording) {
	recorded := map[string][]taped{}
	for plugin, cs := range calls {
		recorded[plugin] = recordCalls(t, plugin, cs, mode)
		for i, r := range recorded[plugin] {
			if r.err != nil {
				t.Fatalf("%s %s: %v", plugin, cs[i].name, r.err)
			}
			b, err := r.tape.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			raw := fmt.Sprintf("%+v", r.tape.Entries)
			for _, e := range r.tape.Entries {
				raw += string(e.Ask) + string(e.Answer)
			}
			if strings.Contains(raw, tapeToken) || bytes.Contains(b, []byte(tapeToken)) {
				t.Errorf("%s: the tape holds the token: %s", plugin, describeTape(r.tape))
			}
			for _, e := range r.tape.Entries {
				if e.Kind == tape.KindHTTP && (!bytes.Contains(e.Answer, []byte("Set-Cookie: [secret]\n")) || !bytes.Contains(e.Answer, []byte("X-Plain: kept\n"))) {
					t.Errorf("%s: the response as taped: %q", plugin, e.Answer)
				}
				if plugin == "webhook" && e.Kind == tape.KindHTTP && !bytes.Contains(e.Ask, []byte("Authorization: [secret]\n")) {
					t.Errorf("webhook: the request as taped: %q", e.Ask)
				}
			}
		}
	}
	sent := served.Load()
	defer func() {
		if n := served.Load() - sent; n != 0 {
			t.Errorf("the replays reached the server %d times", n)
		}
	}()
	for plugin, cs := range calls {
		t.Run(plugin, func(t *testing.T) {
			var reqs []call.Request
			rt := testplugins.Runtime(t, plugins.Config{})
			v := testplugins.Load(t, rt, plugin)
			c := cs[0].call()
			c.Grants, c.Replay = nil, tape.NewPlayer(recorded[plugin][0].tape)
			c.Requested = func(r call.Request) { reqs = append(reqs, r) }
			out, err := rt.Invoke(context.Background(), v, c)
			if err != nil {
				t.Fatalf("replay: %v\ntape:%s", err, describeTape(recorded[plugin][0].tape))
			}
			if !bytes.Equal(out, recorded[plugin][0].out) {
				t.Errorf("replay output %s, recorded %s", out, recorded[plugin][0].out)
			}
			if c.Replay.Left() != 0 {
				t.Errorf("%d entries left", c.Replay.Left())
			}
			if len(reqs) != 1 || reqs[0].Status != 200 || reqs[0].Host != strings.TrimPrefix(srv.URL, "http://") {
				t.Errorf("replayed request records %+v", reqs)
			}
		})
	}
}

// TestTapeKeepsNoSecretValue: kit's log activity reads a granted secret
// (and logs it); neither the tape's entries nor its encoding hold the
// value, and a replay reads the value ReplaySecrets gives, or else the
// documented placeholder, masked alike in what the call hands back.
func TestTapeKeepsNoSecretValue(t *testing.T) {
	t.Setenv("WEFT_TAPE_KIT_SECRET", tapeToken)
	rt := testplugins.Runtime(t, plugins.Config{})
	v := testplugins.Load(t, rt, "kit")
	var logs []string
	c := call.Call{Activity: "log", Input: []byte(`{"secret":"api_key"}`), Info: abi.Info{Plugin: "kit", Attempt: 1},
		Grants: &grant.Set{Secrets: map[string]string{"api_key": "env:WEFT_TAPE_KIT_SECRET"}},
		Record: tape.NewRecorder(0), Log: func(r call.Record) { logs = append(logs, r.Message) }}
	out, err := rt.Invoke(context.Background(), v, c)
	if err != nil {
		t.Fatal(err)
	}
	tp := c.Record.Tape()
	b, err := tp.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(tp)
	if bytes.Contains(b, []byte(tapeToken)) || bytes.Contains(raw, []byte(tapeToken)) {
		t.Fatalf("the tape holds the secret: %s", raw)
	}
	var secretEntry *tape.Entry
	for i, e := range tp.Entries {
		if e.Kind == tape.KindSecret {
			secretEntry = &tp.Entries[i]
		}
	}
	if secretEntry == nil || string(secretEntry.Ask) != "api_key" || secretEntry.Answer != nil {
		t.Fatalf("no secret entry naming api_key without an answer: %s", describeTape(tp))
	}
	if !strings.Contains(strings.Join(logs, "\n"), "the secret is [secret]") {
		t.Fatalf("recorded logs %q", logs)
	}

	for _, tc := range []struct {
		name    string
		secrets func(string) ([]byte, bool)
		value   string
	}{
		{"placeholder", nil, call.ReplaySecret("api_key")},
		{"given", func(name string) ([]byte, bool) { return []byte("given-" + name), name == "api_key" }, "given-api_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs []string
			var got string
			rc := call.Call{Activity: "log", Input: []byte(`{"secret":"api_key"}`), Replay: tape.NewPlayer(tp), ReplaySecrets: tc.secrets,
				Log: func(r call.Record) { logs = append(logs, r.Message) }}
			if tc.secrets != nil {
				rc.ReplaySecrets = func(name string) ([]byte, bool) { v, ok := tc.secrets(name); got = string(v); return v, ok }
			}
			rout, err := rt.Invoke(context.Background(), v, rc)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rout, out) {
				t.Errorf("replay output %s, recorded %s", rout, out)
			}
			all := strings.Join(logs, "\n")
			if !strings.Contains(all, "the secret is [secret]") || strings.Contains(all, tc.value) {
				t.Errorf("replay logs %q: want the value %q masked", logs, tc.value)
			}
			if tc.secrets != nil && got != tc.value {
				t.Errorf("ReplaySecrets gave %q", got)
			}
		})
	}
}

// tapeModule's echo activity makes, for each byte of its input, a clock
// reading (of clock CLOCK), 8 random bytes, a poll_oneoff of one relative
// clock subscription of 0 ns, and a heartbeat without details; then it
// returns its input.
func tapeModule(clock int) watModule {
	return watModule{
		imports: `(import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "heartbeat" (func $heartbeat (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "clock_time_get" (func $clock (param i32 i64 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))`,
		exports: fmt.Sprintf(`
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 1024) (i32.const 32)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32)
    (local $i i32)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
      (drop (call $clock (i32.const %d) (i64.const 0) (i32.const 2048)))
      (drop (call $random (i32.const 2056) (i32.const 8)))
      (drop (call $poll (i32.const 2112) (i32.const 2176) (i32.const 1) (i32.const 2240)))
      (drop (call $heartbeat (i32.const 0) (i32.const 0)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $next)))
    (call $result (i32.add (local.get $p) (local.get $a)) (local.get $n)) (i32.const 0))`, clock),
	}
}

// loadWAT loads a WAT module into rt.
func loadWAT(t testing.TB, rt *plugins.Runtime, m watModule) string {
	t.Helper()
	man, err := rt.Load(context.Background(), testplugins.WAT(t, m.String()))
	if err != nil {
		t.Fatal(err)
	}
	return man.Version
}

// TestTapeDiverges: a replay whose guest asks something else than the tape
// holds — another clock, one call more, another heartbeat — stops with an
// error matching call.ErrDiverged whose *tape.Divergence names the first
// differing call; a guest that asks less ends early, and its call succeeds.
func TestTapeDiverges(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	monotonic, realtime := loadWAT(t, rt, tapeModule(1)), loadWAT(t, rt, tapeModule(0))
	ckit := testplugins.Load(t, rt, "ckit")
	ctx := context.Background()
	record := func(v, activity, input string) *tape.Tape {
		t.Helper()
		c := call.Call{Activity: activity, Input: []byte(input), Record: tape.NewRecorder(0), RecordExact: true, Heartbeat: call.NewHeartbeat(time.Now())}
		if _, err := rt.Invoke(ctx, v, c); err != nil {
			t.Fatal(err)
		}
		return c.Record.Tape()
	}
	replay := func(v, activity, input string, tp *tape.Tape) (*tape.Player, []byte, error) {
		p := tape.NewPlayer(tp)
		out, err := rt.Invoke(ctx, v, call.Call{Activity: activity, Input: []byte(input), Replay: p})
		return p, out, err
	}
	three := record(monotonic, "echo", `"a"`) // 3 bytes: 3 rounds of 4 calls
	if len(three.Entries) != 12 {
		t.Fatalf("the tape of 3 rounds holds %d entries:%s", len(three.Entries), describeTape(three))
	}
	for i, k := range []tape.Kind{tape.KindClock, tape.KindRandom, tape.KindPoll, tape.KindHeartbeat} {
		if e := three.Entries[4+i]; e.Kind != k {
			t.Fatalf("entry %d is %s, want %s:%s", 4+i, e.Kind, k, describeTape(three))
		}
	}

	for _, tc := range []struct {
		name          string
		version       string
		activity      string
		input         string
		tape          *tape.Tape
		index         int
		wantKind      tape.Kind
		wantAsk       string
		gotKind       tape.Kind
		gotAsk        string
		pastTheEnd    bool
		wantTruncated bool
	}{
		{name: "another clock", version: realtime, activity: "echo", input: `"a"`, tape: three,
			index: 0, wantKind: tape.KindClock, wantAsk: "1", gotKind: tape.KindClock, gotAsk: "0"},
		{name: "one round more", version: monotonic, activity: "echo", input: `"ab"`, tape: three,
			index: 12, gotKind: tape.KindClock, gotAsk: "1", pastTheEnd: true},
		{name: "another heartbeat", version: ckit, activity: "heartbeat", input: `{"n":2}`, tape: record(ckit, "heartbeat", `{"n":3}`),
			index: 2, wantKind: tape.KindHeartbeat, wantAsk: `{"n":3}`, gotKind: tape.KindCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := replay(tc.version, tc.activity, tc.input, tc.tape)
			if !errors.Is(err, call.ErrDiverged) {
				t.Fatalf("replay: %v, want an error matching call.ErrDiverged", err)
			}
			var d *tape.Divergence
			if !errors.As(err, &d) {
				t.Fatalf("replay: %v holds no *tape.Divergence", err)
			}
			if d.Index != tc.index || d.Want.Kind != tc.wantKind || string(d.Want.Ask) != tc.wantAsk || d.GotKind != tc.gotKind || string(d.GotAsk) != tc.gotAsk {
				t.Errorf("divergence at %d: want %s %q, got %s %q; want at %d: %s %q, got %s %q",
					d.Index, d.Want.Kind, d.Want.Ask, d.GotKind, d.GotAsk, tc.index, tc.wantKind, tc.wantAsk, tc.gotKind, tc.gotAsk)
			}
			if errors.Is(err, tape.ErrTruncated) {
				t.Errorf("%v matches tape.ErrTruncated; the tape was not cut", err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("call %d", tc.index+1)) {
				t.Errorf("the error %q does not name call %d", err, tc.index+1)
			}
		})
	}

	t.Run("ended early", func(t *testing.T) {
		p, out, err := replay(monotonic, "echo", `""`, three) // 2 rounds of the 3 recorded
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != `""` || p.Left() != 4 {
			t.Errorf("output %s with %d entries left, want 4 left", out, p.Left())
		}
	})

	t.Run("truncated", func(t *testing.T) {
		c := call.Call{Activity: "echo", Input: []byte(`"abcdef"`), Record: tape.NewRecorder(120), RecordExact: true}
		if _, err := rt.Invoke(ctx, monotonic, c); err != nil {
			t.Fatal(err)
		}
		cut := c.Record.Tape()
		if !cut.Truncated || len(cut.Entries) == 0 || len(cut.Entries) >= 32 {
			t.Fatalf("a tape capped at 120 bytes: %d entries, truncated %v", len(cut.Entries), cut.Truncated)
		}
		b, err := cut.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if cut, err = tape.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		_, _, err = replay(monotonic, "echo", `"abcdef"`, cut)
		var d *tape.Divergence
		if !errors.Is(err, call.ErrDiverged) || !errors.Is(err, tape.ErrTruncated) || !errors.As(err, &d) || !d.Truncated || d.Index != len(cut.Entries) {
			t.Fatalf("replay past a truncated tape's end: %v (%+v)", err, d)
		}
	})
}

// TestTapePooledRecording: a recording on the instance the pool gives
// makes no instance and its tape is not fresh; one on an instance the
// pool makes for it (the previous one timed out and was discarded) holds
// the instance's start and is fresh, and replays from it; a divergence
// of a replay of a tape that is not fresh says that the recorded
// instance carried state from earlier calls.
func TestTapePooledRecording(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
	kit := testplugins.Load(t, rt, "kit")
	ctx := context.Background()
	record := func(activity, input string) (*tape.Tape, int64) {
		t.Helper()
		before := rt.Stats(kit).Created
		c := call.Call{Activity: activity, Input: []byte(input), Record: tape.NewRecorder(0)}
		if _, err := rt.Invoke(ctx, kit, c); err != nil {
			t.Fatal(err)
		}
		return c.Record.Tape(), rt.Stats(kit).Created - before
	}
	warm, made := record("sleep", `{"ms":2}`)
	if made != 0 || warm.Fresh {
		t.Fatalf("a recording on the loaded instance made %d instances, fresh %v", made, warm.Fresh)
	}
	if _, err := rt.Invoke(ctx, kit, call.Call{Activity: "spin", Timeout: 50 * time.Millisecond}); !errors.Is(err, call.ErrTimeout) || rt.Stats(kit).Live != 0 {
		t.Fatalf("spin: %v, %+v; want a timeout that discards the instance", err, rt.Stats(kit))
	}
	fresh, made := record("sleep", `{"ms":2}`)
	if made != 1 || !fresh.Fresh || !slicesContainsKind(fresh.Entries, tape.KindRandom) || len(fresh.Entries) <= len(warm.Entries) {
		t.Fatalf("a recording on a new instance made %d instances, fresh %v:%s", made, fresh.Fresh, describeTape(fresh))
	}
	for _, tp := range []*tape.Tape{warm, fresh} {
		p := tape.NewPlayer(tp)
		out, err := rt.Invoke(ctx, kit, call.Call{Activity: "sleep", Input: []byte(`{"ms":2}`), Replay: p})
		if err != nil || string(out) != `{"ms":2}` || p.Left() != 0 {
			t.Errorf("replay of a tape fresh %v: %s, %v, %d left", tp.Fresh, out, err, p.Left())
		}
	}

	// A WAT guest reading 3 rounds of clock, random, poll and heartbeat,
	// replayed asking a round more.
	v := loadWAT(t, rt, tapeModule(1))
	c := call.Call{Activity: "echo", Input: []byte(`"a"`), Record: tape.NewRecorder(0), Heartbeat: call.NewHeartbeat(time.Now())}
	if _, err := rt.Invoke(ctx, v, c); err != nil {
		t.Fatal(err)
	}
	three := c.Record.Tape()
	if three.Fresh {
		t.Fatal("a recording on the loaded instance is fresh")
	}
	_, err := rt.Invoke(ctx, v, call.Call{Activity: "echo", Input: []byte(`"ab"`), Replay: tape.NewPlayer(three)})
	var d *tape.Divergence
	if !errors.Is(err, call.ErrDiverged) || !errors.Is(err, tape.ErrCarriedState) || !errors.As(err, &d) || !d.Carried ||
		!strings.Contains(err.Error(), "carried state from earlier calls") {
		t.Fatalf("a divergence from a tape that is not fresh: %v (%+v)", err, d)
	}
}

// TestTapeReplayDoesNotWait: a replay of kit's sleep answers poll_oneoff
// from the tape: a sleep of a second recorded replays at once.
func TestTapeReplayDoesNotWait(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit := testplugins.Load(t, rt, "kit")
	c := call.Call{Activity: "sleep", Input: []byte(`{"ms":1000}`), Record: tape.NewRecorder(0)}
	start := time.Now()
	if _, err := rt.Invoke(context.Background(), kit, c); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < time.Second {
		t.Fatalf("the recorded sleep took %v", d)
	}
	p := tape.NewPlayer(c.Record.Tape())
	// Less than the recorded sleep: a replay that slept would fail.
	ctx, cancel := context.WithTimeout(context.Background(), 900*time.Millisecond)
	defer cancel()
	out, err := rt.Invoke(ctx, kit, call.Call{Activity: "sleep", Input: []byte(`{"ms":1000}`), Replay: p})
	if err != nil || string(out) != `{"ms":1000}` || p.Left() != 0 {
		t.Fatalf("replay: %s, %v, %d left", out, err, p.Left())
	}
}

// TestTapeOffAddsNoAllocation: without Record and Replay, a host call
// allocates nothing: a call making 300 rounds of clock, random, poll and
// heartbeat allocates as much as one making 3.
func TestTapeOffAddsNoAllocation(t *testing.T) {
	rt := testplugins.Runtime(t, plugins.Config{})
	v := loadWAT(t, rt, tapeModule(1))
	allocs := func(input string) float64 {
		c := call.Call{Activity: "echo", Input: []byte(input)}
		return testing.AllocsPerRun(20, func() {
			if _, err := rt.Invoke(context.Background(), v, c); err != nil {
				t.Fatal(err)
			}
		})
	}
	few, many := allocs(`"a"`), allocs(jsonString(strings.Repeat("a", 298)))
	if many != few {
		t.Errorf("a call of 1200 host calls allocates %v times, one of 12 %v: host calls allocate", many, few)
	}
}

// BenchmarkTape compares calls with recording off, pooled (the default:
// on the instance the pool gives) and exact (RecordExact: on a new
// instance): kit's echo of 100 B, kit's upper of 64 KiB and webhook's
// delivery to a loopback server.
func BenchmarkTape(b *testing.B) {
	b.Setenv("WEFT_TAPE_BENCH_TOKEN", tapeToken)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	rt := testplugins.Runtime(b, plugins.Config{})
	kit, webhook := testplugins.Load(b, rt, "kit"), testplugins.Load(b, rt, "webhook")
	for _, bc := range []struct {
		name, version, activity string
		input                   []byte
		grants                  *grant.Set
	}{
		{"echo-100B", kit, "echo", jsonOfSize(100), nil},
		{"upper-64KiB", kit, "upper", []byte(`{"text":` + string(jsonOfSize(64<<10-10)) + `}`), nil},
		{"webhook", webhook, "deliver", []byte(`{"event":"shipped"}`), loopbackGrants(srv.URL+"/hook", "WEFT_TAPE_BENCH_TOKEN")},
	} {
		// replay: the call answered from a tape recorded (pooled) once
		// before, against the original call (off).
		for _, mode := range []string{"off", "pooled", "exact", "replay"} {
			b.Run(bc.name+"/record="+mode, func(b *testing.B) {
				ctx := context.Background()
				newCall := func() call.Call {
					return call.Call{Activity: bc.activity, Input: bc.input, Grants: bc.grants, Info: abi.Info{Plugin: "bench", IdempotencyKey: "k"}}
				}
				var recorded *tape.Tape
				if mode == "replay" {
					c := newCall()
					c.Record = tape.NewRecorder(0)
					if _, err := rt.Invoke(ctx, bc.version, c); err != nil {
						b.Fatal(err)
					}
					recorded = c.Record.Tape()
				}
				b.ReportAllocs()
				for b.Loop() {
					c := newCall()
					switch mode {
					case "pooled", "exact":
						c.Record, c.RecordExact = tape.NewRecorder(0), mode == "exact"
					case "replay":
						c.Replay = tape.NewPlayer(recorded)
					}
					if _, err := rt.Invoke(ctx, bc.version, c); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
