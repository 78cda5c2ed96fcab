// Package tally_test tests the Rust plugin examples/plugins/tally, and
// through it the Rust kit in sdk/rust, by loading the built module into the
// real host.
package tally_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// TestTally runs the tests that can share one Runtime, so that the module
// compiles once.
func TestTally(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.Bytes(t, "tally"))
	if err != nil {
		t.Fatalf("loading tally: %v", err)
	}
	p := plugin{rt: rt, version: m.Version}
	t.Run("Manifest", func(t *testing.T) {
		t.Parallel()
		var names []string
		for _, a := range m.Activities {
			names = append(names, a.Name)
			if a.Description == "" {
				t.Errorf("activity %s has no description", a.Name)
			}
		}
		if want := []string{"count", "top", "count_url"}; !reflect.DeepEqual(names, want) {
			t.Errorf("activities %q, want %q", names, want)
		}
		if want := (&abi.Needs{Config: []string{"stopwords"}}); !reflect.DeepEqual(m.Needs, want) {
			t.Errorf("needs %+v, want %+v", m.Needs, want)
		}
	})
	for _, tt := range []struct {
		name string
		test func(*testing.T, plugin)
	}{
		{"Count", testCount},
		{"Top", testTop},
		{"Failures", testFailures},
		{"Heartbeat", testHeartbeat},
		{"CountURL", testCountURL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.test(t, p)
		})
	}
}

// plugin is tally loaded into a Runtime.
type plugin struct {
	rt      *plugins.Runtime
	version string
}

// result is one call: its output or error, and what it logged.
type result struct {
	out  string
	err  error
	logs []call.Record
}

// invoke calls activity with input, under g, as attempt.
func (p plugin) invoke(activity, input string, g *grant.Set, attempt int) result {
	var mu sync.Mutex
	var r result
	out, err := p.rt.Invoke(context.Background(), p.version, call.Call{
		Activity: activity, Input: []byte(input), Grants: g,
		Info: abi.Info{Plugin: "tally", Attempt: attempt},
		Log: func(rec call.Record) {
			mu.Lock()
			defer mu.Unlock()
			r.logs = append(r.logs, rec)
		},
	})
	r.out, r.err = string(out), err
	return r
}

// call invokes activity with input and fails the test on an error.
func (p plugin) call(t *testing.T, activity, input string) string {
	t.Helper()
	r := p.invoke(activity, input, nil, 1)
	if r.err != nil {
		t.Fatalf("%s %s: %v", activity, input, r.err)
	}
	return r.out
}

// textInput is {"text": text}.
func textInput(t *testing.T, text string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func testCount(t *testing.T, p plugin) {
	for _, tt := range []struct {
		name, text, want string
	}{
		{"empty", "", `{"bytes":0,"chars":0,"lines":0,"words":0}`},
		{"one line", "the cat sat", `{"bytes":11,"chars":11,"lines":1,"words":3}`},
		{"last line without newline", "a\n\nb", `{"bytes":4,"chars":4,"lines":3,"words":2}`},
		{"punctuation is no word", "Hello, world! — fin.\n", `{"bytes":23,"chars":21,"lines":1,"words":3}`},
		{"apostrophes", "don't 'quote' me ’n’ rock’n’roll ''", `{"bytes":43,"chars":35,"lines":1,"words":5}`},
		{"runes, not bytes", "naïve café 東京 42", `{"bytes":22,"chars":16,"lines":1,"words":4}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := p.call(t, "count", textInput(t, tt.text)); got != tt.want {
				t.Errorf("count %q: %s, want %s", tt.text, got, tt.want)
			}
		})
	}
}

func testTop(t *testing.T, p plugin) {
	const text = "The cat and the hat. THE END, and the cat's hat; don't 'quote' me."
	stop := func(v string) *grant.Set { return &grant.Set{Config: map[string]string{"stopwords": v}} }
	for _, tt := range []struct {
		name    string
		input   string
		grants  *grant.Set
		want    string
		wantLog string // the one info record; empty: none
	}{
		{
			name:  "default n, no stop words",
			input: `{"text":` + mustJSON(t, text) + `}`,
			want:  `{"distinct":9,"top":[{"count":4,"word":"the"},{"count":2,"word":"and"},{"count":2,"word":"hat"},{"count":1,"word":"cat"},{"count":1,"word":"cat's"},{"count":1,"word":"don't"},{"count":1,"word":"end"},{"count":1,"word":"me"},{"count":1,"word":"quote"}]}`,
		},
		{
			name:  "n",
			input: `{"text":` + mustJSON(t, text) + `,"n":2}`,
			want:  `{"distinct":9,"top":[{"count":4,"word":"the"},{"count":2,"word":"and"}]}`,
		},
		{
			name:    "stop words from config",
			input:   `{"text":` + mustJSON(t, text) + `,"n":3}`,
			grants:  stop("The, and  me"),
			want:    `{"distinct":6,"top":[{"count":2,"word":"hat"},{"count":1,"word":"cat"},{"count":1,"word":"cat's"}]}`,
			wantLog: "skipped 7 occurrences of 3 stop words",
		},
		{
			name:   "other config keys change nothing",
			input:  `{"text":"b a b","n":1}`,
			grants: &grant.Set{Config: map[string]string{"other": "b"}},
			want:   `{"distinct":2,"top":[{"count":2,"word":"b"}]}`,
		},
		{
			name:    "empty stop list",
			input:   `{"text":"b a b"}`,
			grants:  stop(" , "),
			want:    `{"distinct":2,"top":[{"count":2,"word":"b"},{"count":1,"word":"a"}]}`,
			wantLog: "",
		},
		{
			name:  "case folds beyond ASCII",
			input: `{"text":"ÉTÉ été Été"}`,
			want:  `{"distinct":1,"top":[{"count":3,"word":"été"}]}`,
		},
		{
			name:  "empty text",
			input: `{"text":"","n":1000}`,
			want:  `{"distinct":0,"top":[]}`,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := p.invoke("top", tt.input, tt.grants, 1)
			if r.err != nil || r.out != tt.want {
				t.Fatalf("top: %s, %v\nwant %s", r.out, r.err, tt.want)
			}
			var logs []string
			for _, rec := range r.logs {
				logs = append(logs, fmt.Sprintf("%s %s %s", rec.Source, rec.Level, rec.Message))
			}
			var want []string
			if tt.wantLog != "" {
				want = []string{"log INFO " + tt.wantLog}
			}
			if !reflect.DeepEqual(logs, want) {
				t.Errorf("logs %q, want %q", logs, want)
			}
		})
	}
}

func testFailures(t *testing.T, p plugin) {
	for _, tt := range []struct {
		name, activity, input string
		wantMessage           string
	}{
		{"text missing", "count", `{}`, "text: want a string, got null"},
		{"text not a string", "count", `{"text":["a"]}`, `text: want a string, got ["a"]`},
		{"input not an object", "count", `"just text"`, "text: want a string, got null"},
		{"input null", "top", `null`, "text: want a string, got null"},
		{"n zero", "top", `{"text":"a","n":0}`, "n: want an integer from 1 to 1000, got 0"},
		{"n too large", "top", `{"text":"a","n":1001}`, "got 1001"},
		{"n negative", "top", `{"text":"a","n":-1}`, "got -1"},
		{"n a fraction", "top", `{"text":"a","n":1.5}`, "got 1.5"},
		{"n a string", "top", `{"text":"a","n":"3"}`, `got "3"`},
		{"url not a string", "count_url", `{"url":5}`, "url: want a string, got 5"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := p.invoke(tt.activity, tt.input, nil, 1)
			var ge *call.GuestError
			if !errors.As(r.err, &ge) {
				t.Fatalf("got %s, %v; want a *GuestError", r.out, r.err)
			}
			if ge.Code != "bad_input" || ge.Retryable || !strings.Contains(ge.Message, tt.wantMessage) {
				t.Errorf("got %+v, want non-retryable bad_input with a message containing %q", ge, tt.wantMessage)
			}
		})
	}
}

// lines returns n lines of two words each.
func lines(n int) string { return strings.Repeat("two words\n", n) }

func testHeartbeat(t *testing.T, p plugin) {
	ctx := context.Background()
	t.Run("every 1000 lines", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		out, err := p.rt.Invoke(ctx, p.version, call.Call{Activity: "count", Input: []byte(textInput(t, lines(2500))), Heartbeat: hb})
		if want := `{"bytes":25000,"chars":25000,"lines":2500,"words":5000}`; err != nil || string(out) != want {
			t.Fatalf("got %s, %v; want %s", out, err, want)
		}
		if details, _, beats := hb.Last(); beats != 2 || string(details) != `{"lines":2000}` {
			t.Errorf("%d heartbeats, last details %s; want 2 and {\"lines\":2000}", beats, details)
		}
	})
	t.Run("none for a short text", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		if _, err := p.rt.Invoke(ctx, p.version, call.Call{Activity: "count", Input: []byte(textInput(t, lines(999))), Heartbeat: hb}); err != nil {
			t.Fatal(err)
		}
		if _, _, beats := hb.Last(); beats != 0 {
			t.Errorf("%d heartbeats, want 0", beats)
		}
	})
	t.Run("stops when cancelled", func(t *testing.T) {
		t.Parallel()
		hb := call.NewHeartbeat(time.Now())
		hb.RequestCancel()
		_, err := p.rt.Invoke(ctx, p.version, call.Call{Activity: "count", Input: []byte(textInput(t, lines(5000))), Heartbeat: hb})
		var ge *call.GuestError
		if !errors.Is(err, call.ErrCancelled) || !errors.As(err, &ge) || ge.Code != "cancelled" || ge.Retryable {
			t.Fatalf("error %v, want the guest's non-retryable cancelled failure", err)
		}
		if _, _, beats := hb.Last(); beats != 1 {
			t.Errorf("%d heartbeats, want 1: the count stops at the first", beats)
		}
	})
}

func testCountURL(t *testing.T, p plugin) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/doc":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "one two\nthree\n")
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slow-down":
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	granted := &grant.Set{Hosts: []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}}}

	t.Run("a document", func(t *testing.T) {
		t.Parallel()
		r := p.invoke("count_url", `{"url":"`+srv.URL+`/doc"}`, granted, 3)
		if want := `{"bytes":14,"chars":14,"content_type":"text/plain; charset=utf-8","lines":2,"status":200,"words":3}`; r.err != nil || r.out != want {
			t.Fatalf("got %s, %v; want %s", r.out, r.err, want)
		}
		// The log record carries the status, the size and the attempt
		// from the call info.
		if len(r.logs) != 1 || r.logs[0].Message != "status 200, 14 bytes, attempt 3" {
			t.Errorf("logs %+v, want one record of status, size and attempt", r.logs)
		}
	})

	// unreachable is a loopback address nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + l.Addr().String() + "/"
	l.Close()

	for _, tt := range []struct {
		name          string
		url           string
		wantCode      string
		wantRetryable bool
		wantDetails   string
	}{
		{"server error", srv.URL + "/busy", "http_status", true, `{"status":503}`},
		{"throttled", srv.URL + "/slow-down", "http_status", true, `{"status":429}`},
		{"not found", srv.URL + "/missing", "http_status", false, `{"status":404}`},
		{"unreachable", unreachable, "http_unreachable", true, ""},
		{"not http", "ftp://127.0.0.1/x", "bad_request", false, ""},
		{"user information", "http://me:pw@127.0.0.1/", "bad_request", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := p.invoke("count_url", `{"url":`+mustJSON(t, tt.url)+`}`, granted, 1)
			var ge *call.GuestError
			if !errors.As(r.err, &ge) {
				t.Fatalf("got %s, %v; want a *GuestError", r.out, r.err)
			}
			if ge.Code != tt.wantCode || ge.Retryable != tt.wantRetryable || string(ge.Details) != tt.wantDetails {
				t.Errorf("got %+v (details %s), want %s, retryable %v, details %s", ge, ge.Details, tt.wantCode, tt.wantRetryable, tt.wantDetails)
			}
		})
	}

	t.Run("host not granted", func(t *testing.T) {
		t.Parallel()
		r := p.invoke("count_url", `{"url":"`+srv.URL+`/doc"}`, nil, 1)
		if !errors.Is(r.err, call.ErrNotGranted) {
			t.Fatalf("got %s, %v; want the host to stop the call with not_granted", r.out, r.err)
		}
	})
}

// TestInvalidRequestKeepsTheInstance: the kit refuses a request that would
// break the ABI before the host sees it, so the call fails as the plugin
// says and the instance is reused; sent, the request would be an ABI
// violation that discards it.
func TestInvalidRequestKeepsTheInstance(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
	version := testplugins.Load(t, rt, "tally")
	ctx := context.Background()
	for _, url := range []string{"http://127.0.0.1/ spaced", "http://127.0.0.1/é"} {
		_, err := rt.Invoke(ctx, version, call.Call{Activity: "count_url", Input: []byte(`{"url":` + mustJSON(t, url) + `}`)})
		var ge *call.GuestError
		if !errors.As(err, &ge) || ge.Code != "bad_request" || !strings.Contains(ge.Message, "printable ASCII") {
			t.Fatalf("%q: error %v, want the kit's bad_request", url, err)
		}
	}
	if st := rt.Stats(version); st.Created != 1 || st.Discarded != 0 {
		t.Errorf("created %d and discarded %d instances, want 1 and 0", st.Created, st.Discarded)
	}
}

// TestModuleShape checks what the kit's export! and the build make of the
// module: a WASI reactor with the ABI's exports, and imports of only the
// host functions the plugin calls.
func TestModuleShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := wazero.NewRuntime(ctx)
	defer r.Close(ctx)
	cm, err := r.CompileModule(ctx, testplugins.Bytes(t, "tally"))
	if err != nil {
		t.Fatal(err)
	}
	exports := cm.ExportedFunctions()
	for _, name := range []string{abi.ExportInitialize, abi.ExportABIVersion, abi.ExportAlloc, abi.ExportManifest, abi.ExportInvoke} {
		if _, ok := exports[name]; !ok {
			t.Errorf("export %s missing", name)
		}
	}
	if _, ok := exports[abi.ExportStart]; ok {
		t.Errorf("exports %s: a WASI command, not a reactor", abi.ExportStart)
	}
	host := map[string]bool{}
	for _, f := range cm.ImportedFunctions() {
		module, name, _ := f.Import()
		switch module {
		case abi.HostModule:
			host[name] = true
		case abi.WASIModule:
		default:
			t.Errorf("imports %s.%s", module, name)
		}
	}
	for _, name := range []string{"result", "log", "heartbeat", "config", "info", "http_request", "http_response_headers", "http_response_body"} {
		if !host[name] {
			t.Errorf("does not import %s.%s, which it calls", abi.HostModule, name)
		}
	}
	// tally never asks for a secret or an earlier attempt's heartbeat:
	// rustc links only the host functions a plugin calls (abi/README.md §11).
	for _, name := range []string{"secret", "last_heartbeat", "cancelled"} {
		if host[name] {
			t.Errorf("imports %s.%s, which it never calls", abi.HostModule, name)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
