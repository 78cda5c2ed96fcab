package plugins_test

// The ABI conformance suite: each test enforces one section of
// abi/README.md, the normative document, against the host, with plugins
// written by hand in WAT so that nothing but the document stands between
// them and the host. A test is named for the section it enforces.

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// guestManifest is the manifest of an abiGuest, at address 16.
const guestManifest = `{"activities":[{"name":"run"}]}`

// abiGuest is a plugin written by hand for one check. It imports every host
// function of §4 under its own name ($result, $log, $heartbeat, $cancelled,
// $info, $last_heartbeat, $config, $secret, $http_request,
// $http_response_headers, $http_response_body), has one page of memory
// (65,536 bytes) with the manifest at 16 and the UTF-8 "key" at 8, and
// offers the activity "run". $ret passes a signed i32 to result as a JSON
// number, using the bytes below 65000. Each field replaces the body of one
// export; an empty field gives that export the behaviour of a plain plugin.
type abiGuest struct {
	imports  string // more imports
	init     string // _initialize's body; empty: no _initialize
	version  string // weft_abi_version's body
	alloc    string // weft_alloc's body (param $n)
	manifest string // weft_manifest's body
	invoke   string // weft_invoke's body (params $p $a $n); default: output null
	extra    string // more functions, data and exports
}

func (g abiGuest) String() string {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	init := ""
	if g.init != "" {
		init = `(func (export "_initialize") ` + g.init + `)`
	}
	return `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "log" (func $log (param i32 i32 i32)))
  (import "weft" "heartbeat" (func $heartbeat (param i32 i32) (result i32)))
  (import "weft" "cancelled" (func $cancelled (result i32)))
  (import "weft" "info" (func $info (param i32 i32) (result i32)))
  (import "weft" "last_heartbeat" (func $last_heartbeat (param i32 i32) (result i32)))
  (import "weft" "config" (func $config (param i32 i32 i32 i32) (result i32)))
  (import "weft" "secret" (func $secret (param i32 i32 i32 i32) (result i32)))
  (import "weft" "http_request" (func $http_request (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "weft" "http_response_headers" (func $http_response_headers (param i32 i32) (result i32)))
  (import "weft" "http_response_body" (func $http_response_body (param i32 i32) (result i32)))
  ` + g.imports + `
  (memory (export "memory") 1)
  (data (i32.const 8) "key")
  (data (i32.const 16) ` + watString(guestManifest) + `)
  ` + init + `
  (func (export "weft_abi_version") (result i32) ` + or(g.version, `(i32.const 1)`) + `)
  (func (export "weft_alloc") (param $n i32) (result i32) ` + or(g.alloc, `(i32.const 4096)`) + `)
  (func (export "weft_manifest") (result i32) ` + or(g.manifest, `(call $result (i32.const 16) (i32.const `+strconv.Itoa(len(guestManifest))+`)) (i32.const 0)`) + `)
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32) ` + or(g.invoke, `(call $result (i32.const 0) (i32.const 0)) (i32.const 0)`) + `)
  (func $ret (param $v i32)
    (local $at i32) (local $u i32)
    (local.set $at (i32.const 65000))
    (local.set $u (local.get $v))
    (if (i32.lt_s (local.get $v) (i32.const 0)) (then (local.set $u (i32.sub (i32.const 0) (local.get $v)))))
    (loop $digit
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at) (i32.add (i32.const 48) (i32.rem_u (local.get $u) (i32.const 10))))
      (local.set $u (i32.div_u (local.get $u) (i32.const 10)))
      (br_if $digit (local.get $u)))
    (if (i32.lt_s (local.get $v) (i32.const 0)) (then
      (local.set $at (i32.sub (local.get $at) (i32.const 1)))
      (i32.store8 (local.get $at) (i32.const 45))))
    (call $result (local.get $at) (i32.sub (i32.const 65000) (local.get $at))))
  ` + g.extra + `
)`
}

// load loads g into rt and returns its version.
func (g abiGuest) load(t *testing.T, rt *plugins.Runtime) string {
	t.Helper()
	m, err := rt.Load(context.Background(), testplugins.WAT(t, g.String()))
	if err != nil {
		t.Fatalf("loading the guest: %v", err)
	}
	return m.Version
}

// §4: every (buf, cap) pair of a sized function lies inside memory, whether
// or not the host writes anything there; cap 0 with buf at most the
// memory's size (0 in particular) asks for the length alone.
func TestABISection4SizedBuffersLieInsideMemory(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cr3t-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	ac := call.Call{
		Activity:      "run",
		LastHeartbeat: []byte(`{"done":7}`),
		Grants:        &grant.Set{Config: map[string]string{"key": "config-value"}, Secrets: map[string]string{"key": "file:" + secretFile}},
	}
	fns := []struct {
		name string
		call string // a call with the arguments $buf and $cap still to close
		// length is what the call returns when it is valid.
		length string
	}{
		{"info", `(call $info`, strconv.Itoa(len(mustJSON(t, abi.Info{Activity: "run"})))},
		{"last_heartbeat", `(call $last_heartbeat`, "10"},
		{"config", `(call $config (i32.const 8) (i32.const 3)`, "12"},
		{"secret", `(call $secret (i32.const 8) (i32.const 3)`, "12"},
		{"http_response_headers", `(call $http_response_headers`, "-1"}, // no response in this call
		{"http_response_body", `(call $http_response_body`, "-1"},
	}
	cases := []struct {
		name     string
		buf, cap uint32
		// outside is the error for a pair outside memory; empty when the
		// pair is valid.
		outside string
	}{
		{name: "length-only probe at 0", buf: 0, cap: 0},
		{name: "length-only probe at the memory's end", buf: 65536, cap: 0},
		{name: "a buffer that fits", buf: 16384, cap: 1024},
		{name: "a buffer ending at the memory's end", buf: 65536 - 1024, cap: 1024},
		{name: "cap 0 past the memory's end", buf: 65537, cap: 0, outside: "buffer of 0 bytes at 65537 is outside memory (65536 bytes)"},
		{name: "a buffer that wraps around", buf: 0xFFFFFFF0, cap: 8, outside: "buffer of 8 bytes at 4294967280 is outside memory (65536 bytes)"},
		{name: "a buffer far longer than memory", buf: 16384, cap: 0x7FFFFFFF, outside: "buffer of 2147483647 bytes at 16384 is outside memory (65536 bytes)"},
	}
	for _, fn := range fns {
		t.Run(fn.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
					g := abiGuest{invoke: `(call $ret ` + fn.call + ` (i32.const ` + strconv.FormatUint(uint64(c.buf), 10) + `) (i32.const ` + strconv.FormatUint(uint64(c.cap), 10) + `))) (i32.const 0)`}
					v := g.load(t, rt)
					out, err := rt.Invoke(context.Background(), v, ac)
					if c.outside != "" {
						want := "weft." + fn.name + ": " + c.outside
						if !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), want) {
							t.Fatalf("%s, %v; want an ABI violation saying %q", out, err, want)
						}
						if st := rt.Stats(v); st.Discarded != 1 {
							t.Errorf("%d instances discarded, want the one that broke the ABI", st.Discarded)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
					if fn.length != "" && string(out) != fn.length {
						t.Errorf("returned %s, want the length %s", out, fn.length)
					}
				})
			}
		})
	}
}

// §4: every other pointer/length pair lies inside memory too, a pair of
// length 0 included (its pointer at most the memory's size).
func TestABISection4EmptyPairsLieInsideMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fn, call string
	}{
		{"result", `(call $result (i32.const 65537) (i32.const 0))`},
		{"log", `(call $log (i32.const 1) (i32.const 65537) (i32.const 0))`},
		{"heartbeat", `(drop (call $heartbeat (i32.const 65537) (i32.const 0)))`},
		{"config", `(drop (call $config (i32.const 65537) (i32.const 0) (i32.const 0) (i32.const 0)))`},
		{"secret", `(drop (call $secret (i32.const 65537) (i32.const 0) (i32.const 0) (i32.const 0)))`},
		{"http_request", `(drop (call $http_request (i32.const 65537) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))`},
	}
	for _, tt := range tests {
		t.Run(tt.fn, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
			v := abiGuest{invoke: tt.call + ` (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`}.load(t, rt)
			_, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run"})
			want := "weft." + tt.fn + ": 0 bytes at 65537 are outside memory (65536 bytes)"
			if !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%v; want an ABI violation saying %q", err, want)
			}
			if st := rt.Stats(v); st.Discarded != 1 {
				t.Errorf("%d instances discarded, want 1", st.Discarded)
			}
		})
	}
	// The same calls at the memory's end are valid: 0 is what the Go
	// SDK passes for an empty slice, and the end is still inside.
	for _, at := range []string{"0", "65536"} {
		t.Run("empty pairs at "+at, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{})
			var body strings.Builder
			for _, tt := range tests[:3] {
				body.WriteString(strings.ReplaceAll(tt.call, "65537", at))
			}
			v := abiGuest{invoke: body.String() + `(call $result (i32.const ` + at + `) (i32.const 0)) (i32.const 0)`}.load(t, rt)
			if out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run"}); err != nil || string(out) != "null" {
				t.Fatalf("%s, %v; want null", out, err)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// hostCalls are a call of each host function of §4, as a statement; the
// ones that need data use "key" at 8 and abiGuestURL at 100.
var hostCalls = []struct{ fn, call string }{
	{"result", `(call $result (i32.const 0) (i32.const 0))`},
	{"log", `(call $log (i32.const 1) (i32.const 8) (i32.const 3))`},
	{"heartbeat", `(drop (call $heartbeat (i32.const 0) (i32.const 0)))`},
	{"cancelled", `(drop (call $cancelled))`},
	{"info", `(drop (call $info (i32.const 0) (i32.const 0)))`},
	{"last_heartbeat", `(drop (call $last_heartbeat (i32.const 0) (i32.const 0)))`},
	{"config", `(drop (call $config (i32.const 8) (i32.const 3) (i32.const 0) (i32.const 0)))`},
	{"secret", `(drop (call $secret (i32.const 8) (i32.const 3) (i32.const 0) (i32.const 0)))`},
	{"http_request", `(drop (call $http_request (i32.const 0) (i32.const 0) (i32.const 100) (i32.const 23) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))`},
	{"http_response_headers", `(drop (call $http_response_headers (i32.const 0) (i32.const 0)))`},
	{"http_response_body", `(drop (call $http_response_body (i32.const 0) (i32.const 0)))`},
}

// abiGuestURL is the URL hostCalls' http_request asks for: a host granted
// to no plugin, so the request is refused before any is sent.
const abiGuestURL = `(data (i32.const 100) "http://example.invalid/")`

// §4: log may be called from every export, result from weft_invoke and
// weft_manifest, every other host function from weft_invoke alone.
// Elsewhere the call is an ABI violation: while a version loads, its
// upload is refused; in weft_alloc, the activity call fails and the
// instance is discarded.
func TestABISection4WhereEachHostFunctionMayBeCalled(t *testing.T) {
	t.Parallel()
	allowed := func(fn, export string) bool {
		switch fn {
		case "log":
			return true
		case "result":
			return export == "weft_manifest" || export == "weft_invoke"
		}
		return export == "weft_invoke"
	}
	manifest := `(call $result (i32.const 16) (i32.const ` + strconv.Itoa(len(guestManifest)) + `)) (i32.const 0)`
	exports := []struct {
		name  string
		guest func(call string) abiGuest
	}{
		{"_initialize", func(call string) abiGuest { return abiGuest{init: call} }},
		{"weft_abi_version", func(call string) abiGuest { return abiGuest{version: call + ` (i32.const 1)`} }},
		{"weft_manifest", func(call string) abiGuest { return abiGuest{manifest: call + manifest} }},
		{"weft_alloc", func(call string) abiGuest { return abiGuest{alloc: call + ` (i32.const 4096)`} }},
		{"weft_invoke", func(call string) abiGuest {
			return abiGuest{invoke: call + ` (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`}
		}},
	}
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cr3t-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	ac := call.Call{Activity: "run", Grants: &grant.Set{Secrets: map[string]string{"key": "file:" + secretFile}}}
	rt := testplugins.Runtime(t, plugins.Config{Logger: discardLogger()})
	for _, export := range exports {
		for _, hc := range hostCalls {
			t.Run(hc.fn+" from "+export.name, func(t *testing.T) {
				t.Parallel()
				g := export.guest(hc.call)
				g.extra = abiGuestURL
				m, err := rt.Load(context.Background(), testplugins.WAT(t, g.String()))
				only := "only weft_invoke may call it"
				if hc.fn == "result" {
					only = "only weft_invoke and weft_manifest may call it"
				}
				violation := "weft." + hc.fn + " called from " + export.name + "; " + only
				loading := export.name != "weft_alloc" && export.name != "weft_invoke"
				if loading && !allowed(hc.fn, export.name) {
					if !errors.Is(err, plugins.ErrInvalid) || !strings.Contains(err.Error(), violation) {
						t.Fatalf("load: %v; want the upload refused saying %q", err, violation)
					}
					return
				}
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				_, err = rt.Invoke(context.Background(), m.Version, ac)
				if allowed(hc.fn, export.name) {
					// http_request is refused for the host, which is no
					// ABI violation.
					if err != nil && (hc.fn != "http_request" || !errors.Is(err, call.ErrNotGranted)) {
						t.Fatalf("call: %v", err)
					}
					return
				}
				if !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), violation) {
					t.Fatalf("call: %v; want an ABI violation saying %q", err, violation)
				}
				if st := rt.Stats(m.Version); st.Discarded != 1 {
					t.Errorf("%d instances discarded, want 1", st.Discarded)
				}
			})
		}
	}
}

// §4: what log records during an activity call (weft_alloc, weft_invoke)
// goes to the activity's log; what it records while a version loads
// (_initialize, weft_abi_version, weft_manifest) goes to the host's log.
func TestABISection4LogFromEveryExport(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	say := func(at int, s string) string {
		return `(call $log (i32.const 1) (i32.const ` + strconv.Itoa(at) + `) (i32.const ` + strconv.Itoa(len(s)) + `))`
	}
	g := abiGuest{
		init:     say(200, "from-init"),
		version:  say(210, "from-version") + ` (i32.const 1)`,
		manifest: say(230, "from-manifest") + ` (call $result (i32.const 16) (i32.const ` + strconv.Itoa(len(guestManifest)) + `)) (i32.const 0)`,
		alloc:    say(250, "from-alloc") + ` (i32.const 4096)`,
		invoke:   say(270, "from-invoke") + ` (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`,
		extra: `(data (i32.const 200) "from-init") (data (i32.const 210) "from-version") (data (i32.const 230) "from-manifest")
		  (data (i32.const 250) "from-alloc") (data (i32.const 270) "from-invoke")`,
	}
	v := g.load(t, rt)
	var got []string
	if _, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run", Log: func(r call.Record) { got = append(got, r.Message) }}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "from-alloc from-invoke" {
		t.Errorf("the activity's log has %q, want what weft_alloc and weft_invoke logged", got)
	}
	host := logs.String()
	for _, want := range []string{"from-init", "from-version", "from-manifest"} {
		if !strings.Contains(host, want) {
			t.Errorf("the host's log lacks %q:\n%s", want, host)
		}
	}
	for _, not := range []string{"from-alloc", "from-invoke"} {
		if strings.Contains(host, not) {
			t.Errorf("the host's log has the activity's %q:\n%s", not, host)
		}
	}
}

// §6: the manifest is one JSON document. Whitespace may follow it;
// anything else is refused, and the refusal says what follows.
func TestABISection6ManifestIsOneJSONDocument(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	tests := []struct {
		name, after string
		// want is the refusal; empty when the manifest is accepted.
		want string
	}{
		{name: "whitespace", after: " \n\t\r\n"},
		{name: "NUL bytes", after: "\x00\x00\x00", want: `manifest: 3 bytes after the JSON document of abi/README.md §6, at offset 31: "\x00\x00\x00"`},
		{name: "a second document", after: "\n{}", want: `manifest: 2 bytes after the JSON document of abi/README.md §6, at offset 32: "{}"`},
		{name: "text", after: " trailing", want: `manifest: 8 bytes after the JSON document of abi/README.md §6, at offset 32: "trailing"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := guestManifest + tt.after
			g := abiGuest{
				manifest: `(call $result (i32.const 1024) (i32.const ` + strconv.Itoa(len(doc)) + `)) (i32.const 0)`,
				extra:    `(data (i32.const 1024) ` + watString(doc) + `)`,
			}
			_, err := rt.Load(context.Background(), testplugins.WAT(t, g.String()))
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ve *plugins.ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0] != tt.want {
				t.Fatalf("%v; want the one problem %q", err, tt.want)
			}
		})
	}
}

// §4: last_heartbeat gives the details the host hands the attempt (the
// engine hands it the latest any earlier attempt recorded; see
// internal/runner), and -1 when there are none.
func TestABISection4LastHeartbeat(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := abiGuest{invoke: `(local $len i32)
	  (local.set $len (call $last_heartbeat (i32.const 1024) (i32.const 4096)))
	  (if (i32.lt_s (local.get $len) (i32.const 0)) (then (call $ret (local.get $len)) (return (i32.const 0))))
	  (call $result (i32.const 1024) (local.get $len)) (i32.const 0)`}.load(t, rt)
	for _, last := range []string{`{"done_ms":40}`, `[1,"two"]`, ``} {
		out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run", LastHeartbeat: []byte(last)})
		want := last
		if last == "" {
			want = "-1"
		}
		if err != nil || string(out) != want {
			t.Errorf("with %q: %s, %v; want %s", last, out, err, want)
		}
	}
}

// §7: an output that is not JSON is handed over as it is, for the consumer
// to report (CheckOutput), and the instance is kept; a call that never
// called result fails and its instance is discarded.
func TestABISection7Output(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, invoke string
		// out is the output; empty when the call fails with err.
		out, err  string
		discarded int64
	}{
		{name: "empty result is null", invoke: `(call $result (i32.const 0) (i32.const 0)) (i32.const 0)`, out: "null"},
		{name: "output that is not JSON", invoke: `(call $result (i32.const 8) (i32.const 3)) (i32.const 0)`, out: "key"},
		{name: "status 0 without result", invoke: `(i32.const 0)`, err: "weft_invoke returned status 0 without calling result", discarded: 1},
		{name: "status 1 without result", invoke: `(i32.const 1)`, err: "weft_invoke reported a failure without calling result", discarded: 1},
		{name: "status 2 without result", invoke: `(i32.const 2)`, err: "weft_invoke reported a failure without calling result", discarded: 1},
		{name: "status 3", invoke: `(call $result (i32.const 0) (i32.const 0)) (i32.const 3)`, err: "weft_invoke returned status 3; want 0, 1 or 2", discarded: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
			v := abiGuest{invoke: tt.invoke}.load(t, rt)
			out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run"})
			if tt.err == "" {
				if err != nil || string(out) != tt.out {
					t.Fatalf("%q, %v; want %q", out, err, tt.out)
				}
			} else if !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("%q, %v; want an ABI violation saying %q", out, err, tt.err)
			}
			if st := rt.Stats(v); st.Discarded != tt.discarded {
				t.Errorf("%d instances discarded, want %d", st.Discarded, tt.discarded)
			}
			if cerr := call.CheckOutput(out); tt.name == "output that is not JSON" && !errors.Is(cerr, call.ErrProtocol) {
				t.Errorf("CheckOutput(%q): %v, want an ABI violation", out, cerr)
			}
		})
	}
}

// §8: a failure document is decoded while the host holds the instance: one
// that is not a JSON object with a code discards it, whatever the status;
// retryable is false when absent.
func TestABISection8Failures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc string
		status    int
		// err is the ABI violation; empty when the failure is the guest's.
		err       string
		retryable bool
		discarded int64
	}{
		{name: "retryable absent", doc: `{"code":"card_declined"}`, status: 1},
		{name: "retryable true", doc: `{"code":"busy","retryable":true}`, status: 1, retryable: true},
		{name: "status 2 discards", doc: `{"code":"panic","message":"boom"}`, status: 2, discarded: 1},
		{name: "not JSON", doc: `card declined`, status: 1, err: "failure is not the JSON document of abi/README.md §8", discarded: 1},
		{name: "not an object", doc: `"card_declined"`, status: 1, err: "failure is not the JSON document of abi/README.md §8", discarded: 1},
		{name: "code not a string", doc: `{"code":5}`, status: 1, err: "failure is not the JSON document of abi/README.md §8", discarded: 1},
		{name: "no code", doc: `{"message":"declined"}`, status: 1, err: "failure has no code", discarded: 1},
		{name: "empty code", doc: `{"code":""}`, status: 2, err: "failure has no code", discarded: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
			v := abiGuest{
				invoke: `(call $result (i32.const 1024) (i32.const ` + strconv.Itoa(len(tt.doc)) + `)) (i32.const ` + strconv.Itoa(tt.status) + `)`,
				extra:  `(data (i32.const 1024) ` + watString(tt.doc) + `)`,
			}.load(t, rt)
			_, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run"})
			var ge *call.GuestError
			switch {
			case tt.err != "":
				if !errors.Is(err, call.ErrProtocol) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("%v; want an ABI violation saying %q", err, tt.err)
				}
			case !errors.As(err, &ge):
				t.Fatalf("%v; want the guest's failure", err)
			case ge.Retryable != tt.retryable:
				t.Errorf("retryable %v, want %v", ge.Retryable, tt.retryable)
			}
			if st := rt.Stats(v); st.Discarded != tt.discarded {
				t.Errorf("%d instances discarded, want %d", st.Discarded, tt.discarded)
			}
		})
	}
}

// §3: what the host does when weft_alloc gives it no block for the request.
func TestABISection3NoBlockForTheRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, alloc string
		input       []byte
		sentinel    error
		err         string
		discarded   int64
	}{
		{
			name: "weft_alloc returns 0", alloc: `(i32.const 0)`, input: []byte(`{"a":1}`),
			sentinel: call.ErrLimit, err: "weft_alloc could not allocate 10 bytes for the request", discarded: 1,
		},
		{
			name: "a block that runs past memory", alloc: `(i32.const 65530)`, input: []byte(`{"a":1}`),
			sentinel: call.ErrProtocol, err: "weft_alloc returned 65530, and 10 bytes there are outside memory (65536 bytes)", discarded: 1,
		},
		{
			// weft_alloc would trap: it is not called.
			name: "a request larger than the memory limit", alloc: `unreachable`, input: []byte(`"` + strings.Repeat("x", 2<<16) + `"`),
			sentinel: call.ErrLimit, err: "request of 131077 bytes cannot fit the guest's memory limit of 131072 bytes",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1, MemoryLimitPages: 2})
			v := abiGuest{alloc: tt.alloc}.load(t, rt)
			_, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run", Input: tt.input})
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("%v; want %v saying %q", err, tt.sentinel, tt.err)
			}
			if st := rt.Stats(v); st.Discarded != tt.discarded {
				t.Errorf("%d instances discarded, want %d", st.Discarded, tt.discarded)
			}
		})
	}
}

// §8: the failure code each way the host ends an attempt leads to, and
// whether the retry policy retries it (heartbeat_timeout is the engine's,
// tested there).
func TestABISection8HostFailureCodes(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secretFile, []byte("s3cr3t-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	readSecret := `(drop (call $secret (i32.const 8) (i32.const 3) (i32.const 0) (i32.const 0))) (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`
	spin := `(loop $spin (br $spin)) (i32.const 0)`
	fail := func(doc string) abiGuest {
		return abiGuest{
			invoke: `(call $result (i32.const 1024) (i32.const ` + strconv.Itoa(len(doc)) + `)) (i32.const 1)`,
			extra:  `(data (i32.const 1024) ` + watString(doc) + `)`,
		}
	}
	tests := []struct {
		name  string
		guest abiGuest
		// call changes the call; cancel, when set, requests cancellation
		// before it starts.
		call      func(*call.Call)
		timeout   bool
		cancel    bool
		version   string // replaces the guest's version when set
		code      string
		retryable bool
	}{
		{name: "timeout", guest: abiGuest{invoke: spin}, timeout: true, code: "timeout", retryable: true},
		{name: "trap", guest: abiGuest{invoke: `unreachable`}, code: "trap", retryable: true},
		{name: "proc_exit", guest: abiGuest{
			imports: `(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))`,
			invoke:  `(call $exit (i32.const 3)) (i32.const 0)`,
		}, code: "trap", retryable: true},
		{name: "limit", guest: abiGuest{alloc: `(i32.const 0)`}, code: "limit", retryable: true},
		{name: "host: version not stored", guest: abiGuest{}, version: strings.Repeat("0", 64), code: "host", retryable: true},
		{name: "host: secret unresolved on this node", guest: abiGuest{invoke: readSecret}, call: func(c *call.Call) {
			c.Grants = &grant.Set{Secrets: map[string]string{"key": "file:" + secretFile + ".missing"}}
		}, code: "host", retryable: true},
		{name: "protocol", guest: abiGuest{invoke: `(call $result (i32.const 0) (i32.const 0)) (i32.const 7)`}, code: "protocol"},
		{name: "unknown_activity", guest: abiGuest{}, call: func(c *call.Call) { c.Activity = "nope" }, code: "unknown_activity"},
		{name: "not_granted", guest: abiGuest{invoke: readSecret}, code: "not_granted"},
		{name: "cancelled after the grace period", guest: abiGuest{invoke: spin}, cancel: true, code: "cancelled"},
		{name: "cancelled by the guest, retryable said", guest: fail(`{"code":"cancelled","retryable":true}`), code: "cancelled"},
		{name: "a guest's code is its own", guest: fail(`{"code":"timeout"}`), code: "timeout"},
	}
	rt := testplugins.Runtime(t, plugins.Config{CancelGrace: 10 * time.Millisecond})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := tt.guest.load(t, rt)
			if tt.version != "" {
				v = tt.version
			}
			ac := call.Call{Activity: "run", Grants: &grant.Set{}}
			if tt.call != nil {
				tt.call(&ac)
			}
			if tt.cancel {
				ac.Heartbeat = call.NewHeartbeat(time.Now())
				ac.Heartbeat.RequestCancel()
			}
			ctx := context.Background()
			if tt.timeout {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			}
			_, err := rt.Invoke(ctx, v, ac)
			if err == nil {
				t.Fatal("the call succeeded")
			}
			f := classify.Cause(err)
			if f.Code != tt.code || f.Retryable != tt.retryable {
				t.Errorf("%v: code %q retryable %v, want %q %v", err, f.Code, f.Retryable, tt.code, tt.retryable)
			}
		})
	}
}

// §9: deadline_unix_ms is when the host stops the attempt, and 0 only when
// nothing will; the call's own deadline wins over a later one in Info.
func TestABISection9Deadline(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := abiGuest{invoke: `(call $result (i32.const 1024) (call $info (i32.const 1024) (i32.const 4096))) (i32.const 0)`}.load(t, rt)
	soon := time.Now().Add(time.Hour)
	tests := []struct {
		name     string
		deadline time.Time // of the context; zero for none
		info     int64
		want     int64
	}{
		{name: "no deadline", want: 0},
		{name: "the context's", deadline: soon, want: soon.UnixMilli()},
		{name: "the context's, sooner than Info's", deadline: soon, info: soon.Add(time.Hour).UnixMilli(), want: soon.UnixMilli()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if !tt.deadline.IsZero() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, tt.deadline)
				defer cancel()
			}
			out, err := rt.Invoke(ctx, v, call.Call{Activity: "run", Info: abi.Info{DeadlineUnixMilli: tt.info}})
			if err != nil {
				t.Fatal(err)
			}
			var info abi.Info
			if err := json.Unmarshal(out, &info); err != nil {
				t.Fatalf("info %q: %v", out, err)
			}
			if info.DeadlineUnixMilli != tt.want {
				t.Errorf("deadline_unix_ms %d, want %d", info.DeadlineUnixMilli, tt.want)
			}
		})
	}
}

// §4: with no log function of its own in the call (as under weft serve),
// the activity's log is the host's logger: one record per line, at its
// level, with the message "plugin: " and the text and attributes that find
// the attempt.
func TestABISection4TheActivitysLogIsTheHostsLog(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	v := abiGuest{invoke: `(call $log (i32.const 3) (i32.const 8) (i32.const 3)) (call $result (i32.const 0) (i32.const 0)) (i32.const 0)`}.load(t, rt)
	info := abi.Info{InstanceID: "i-1", StepID: "charge", Plugin: "payments", Attempt: 2}
	if _, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run", Info: info}); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "plugin: key" {
			got = append(got, rec)
		}
	}
	want := map[string]any{"level": "ERROR", "msg": "plugin: key", "source": "log", "plugin": "payments", "activity": "run", "instance": "i-1", "step": "charge", "attempt": float64(2)}
	if len(got) != 1 {
		t.Fatalf("%d records of the guest's message, want 1:\n%s", len(got), logs.String())
	}
	for k, w := range want {
		if got[0][k] != w {
			t.Errorf("%s: %v, want %v (record %v)", k, got[0][k], w, got[0])
		}
	}
}

// §2 and §5: a module with forbidden imports is refused before it is
// instantiated (its _initialize never runs), in one ValidationError that
// names every such import, whatever its kind and module.
func TestABISection2EveryForbiddenImportIsNamed(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	allowed := `(import "weft" "result" (func $result (param i32 i32))) (import "weft" "log" (func $log (param i32 i32 i32)))`
	initialise := `(data (i32.const 2000) "initialised") (func (export "_initialize") (call $log (i32.const 1) (i32.const 2000) (i32.const 11)))`
	named := map[string]string{
		"global":                    `import weft.g: importing a global is not allowed; plugins import only functions`,
		"table":                     `import weft.t: importing a table is not allowed; plugins import only functions`,
		"memory":                    `import env.mem: importing a memory is not allowed; export one named "memory"`,
		"function of env":           `import env.foo: module "env" is not allowed; plugins import only from "weft" and "wasi_snapshot_preview1"`,
		"function of weft":          `import weft.nope: the host module has no such function`,
		"host function's type":      `import weft.heartbeat: type (i64)->(), want (i32,i32)->(i32)`,
		"WASI function":             `import wasi_snapshot_preview1.sock_open: not a WASI preview 1 function the host provides (abi/README.md §5)`,
		"function of wasi_unstable": `import wasi_unstable.fd_write: module "wasi_unstable" is not allowed; plugins import only from "weft" and "wasi_snapshot_preview1"`,
	}
	imports := map[string]string{
		"global":                    `(import "weft" "g" (global i32))`,
		"table":                     `(import "weft" "t" (table 1 funcref))`,
		"function of env":           `(import "env" "foo" (func))`,
		"function of weft":          `(import "weft" "nope" (func))`,
		"host function's type":      `(import "weft" "heartbeat" (func (param i64)))`,
		"WASI function":             `(import "wasi_snapshot_preview1" "sock_open" (func (param i32 i32 i32) (result i32)))`,
		"function of wasi_unstable": `(import "wasi_unstable" "fd_write" (func (param i32 i32 i32 i32) (result i32)))`,
	}
	memory := `(import "env" "mem" (memory 1)) (export "memory" (memory 0))`
	refused := func(t *testing.T, m watModule, want ...string) {
		t.Helper()
		_, err := rt.Load(context.Background(), testplugins.WAT(t, m.String()))
		var ve *plugins.ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("%v; want a *ValidationError", err)
		}
		if len(ve.Problems) != len(want) {
			t.Errorf("%d problems, want %d:\n%s", len(ve.Problems), len(want), strings.Join(ve.Problems, "\n"))
		}
		for _, w := range want {
			found := false
			for _, p := range ve.Problems {
				found = found || p == w
			}
			if !found {
				t.Errorf("no problem says %q:\n%s", w, strings.Join(ve.Problems, "\n"))
			}
		}
	}
	t.Run("all at once", func(t *testing.T) {
		t.Parallel()
		all := allowed
		for _, imp := range imports {
			all += " " + imp
		}
		want := make([]string, 0, len(named))
		for _, w := range named {
			want = append(want, w)
		}
		refused(t, watModule{imports: all, memory: memory, extra: initialise}, want...)
	})
	for kind, imp := range imports {
		t.Run(kind+" alone", func(t *testing.T) {
			t.Parallel()
			refused(t, watModule{imports: allowed + " " + imp, extra: initialise}, named[kind])
		})
	}
	t.Run("memory alone", func(t *testing.T) {
		t.Parallel()
		refused(t, watModule{imports: allowed, memory: memory, extra: initialise}, named["memory"])
	})
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "initialised") {
			t.Errorf("a refused module was instantiated:\n%s", logs.String())
		}
	})
}
