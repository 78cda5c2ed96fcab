package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
)

// fakeHost records what an activity asks of the host.
type fakeHost struct {
	beats   [][]byte
	cancel  bool
	infoDoc []byte
	last    []byte
	cfg     map[string]string
	logs    []string
	polls   int

	// secrets are the granted secrets; asking for another panics, as the
	// real host stops the call. secretCaps records each buffer's size.
	secrets    map[string]string
	secretCaps []int
	// serve answers HTTP requests (a negative status is an abi.HTTPError);
	// reqs records them, and headerCaps and bodyCaps the size of each
	// buffer the guest read the response into.
	serve      func(fakeRequest) (status int32, header, body string)
	reqs       []fakeRequest
	resp       *fakeResponse
	headerCaps []int
	bodyCaps   []int
}

// fakeRequest is what the guest passed to http_request.
type fakeRequest struct {
	method, url, header, body string
}

// fakeResponse is the last response of the call.
type fakeResponse struct {
	header, body string
}

func (h *fakeHost) heartbeat(d []byte) bool {
	h.beats = append(h.beats, append([]byte(nil), d...))
	return h.cancel
}
func (h *fakeHost) cancelled() bool                { h.polls++; return h.cancel }
func (h *fakeHost) info() []byte                   { return h.infoDoc }
func (h *fakeHost) lastHeartbeat() ([]byte, bool)  { return h.last, h.last != nil }
func (h *fakeHost) config(k string) (string, bool) { v, ok := h.cfg[k]; return v, ok }
func (h *fakeHost) log(level int32, msg string) {
	h.logs = append(h.logs, fmt.Sprintf("%d %s", level, msg))
}

func (h *fakeHost) secret(name string, buf []byte) int32 {
	h.secretCaps = append(h.secretCaps, len(buf))
	v, ok := h.secrets[name]
	if !ok {
		panic("not_granted: secret " + name)
	}
	return writeSized(buf, v)
}

func (h *fakeHost) httpRequest(method, url string, header, body []byte) int32 {
	r := fakeRequest{method: method, url: url, header: string(header), body: string(body)}
	h.reqs = append(h.reqs, r)
	status, rh, rb := h.serve(r)
	h.resp = nil
	if status >= 0 {
		h.resp = &fakeResponse{header: rh, body: rb}
	}
	return status
}

func (h *fakeHost) httpResponseHeaders(buf []byte) int32 {
	h.headerCaps = append(h.headerCaps, len(buf))
	if h.resp == nil {
		return abi.NotFound
	}
	return writeSized(buf, h.resp.header)
}

func (h *fakeHost) httpResponseBody(buf []byte) int32 {
	h.bodyCaps = append(h.bodyCaps, len(buf))
	if h.resp == nil {
		return abi.NotFound
	}
	return writeSized(buf, h.resp.body)
}

// writeSized is the host's side of the sized convention: v is written
// only when it fits, and its length returned either way.
func writeSized(buf []byte, v string) int32 {
	if len(v) <= len(buf) {
		copy(buf, v)
	}
	return int32(len(v))
}

type greetIn struct {
	Name string `json:"name"`
}
type greetOut struct {
	Greeting string `json:"greeting"`
}

func init() {
	Needs(Requirements{Hosts: []string{"api.example.com"}, Config: []string{"url"}, Secrets: []string{"token"}})
	Needs(Requirements{Hosts: []string{"http://10.0.0.7:*"}, Config: []string{"url", "region"}}) // url once
	Register("greet", Typed(func(ctx *Context, in greetIn) (greetOut, error) {
		if in.Name == "" {
			return greetOut{}, NonRetryable("no_name", "name is required")
		}
		return greetOut{Greeting: "hello, " + in.Name}, nil
	}))
	RegisterWithDescription("raw", "returns its input", func(_ *Context, in []byte) ([]byte, error) { return in, nil })
	Register("boom", func(*Context, []byte) ([]byte, error) { panic(fmt.Sprintf("kaboom %d", 42)) })
	Register("plain-error", func(*Context, []byte) ([]byte, error) { return nil, errors.New("disk on fire") })
	Register("wrapped", func(*Context, []byte) ([]byte, error) {
		return nil, fmt.Errorf("charging: %w", (&Error{Code: "card_declined", Message: "no"}).WithDetails(map[string]int{"tries": 2}))
	})
	Register("beat", func(ctx *Context, _ []byte) ([]byte, error) {
		for i := 1; i <= 3; i++ {
			if ctx.Heartbeat(map[string]int{"i": i}) {
				return nil, ErrCancelled
			}
		}
		return []byte(`"done"`), nil
	})
	Register("resume", func(ctx *Context, _ []byte) ([]byte, error) {
		var last struct {
			I int `json:"i"`
		}
		found := ctx.LastHeartbeat(&last)
		v, _ := ctx.Config("region")
		info := ctx.Info()
		ctx.Logf(LevelWarn, "attempt %d", info.Attempt)
		return json.Marshal(map[string]any{"found": found, "i": last.I, "region": v, "attempt": info.Attempt, "key": info.IdempotencyKey, "activity": info.Activity})
	})
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		activity   string
		input      string
		host       fakeHost
		wantStatus abi.Status
		want       string
	}{
		{name: "typed", activity: "greet", input: `{"name":"Ada"}`, wantStatus: abi.StatusOK, want: `{"greeting":"hello, Ada"}`},
		{name: "typed error", activity: "greet", input: `{}`, wantStatus: abi.StatusError, want: `{"code":"no_name","message":"name is required","retryable":false}`},
		{name: "typed bad input", activity: "greet", input: `[`, wantStatus: abi.StatusError, want: `{"code":"bad_input","message":"decoding input: unexpected end of JSON input","retryable":false}`},
		{name: "raw", activity: "raw", input: `[1]`, wantStatus: abi.StatusOK, want: `[1]`},
		{name: "unknown", activity: "nope\"", wantStatus: abi.StatusError, want: `{"code":"unknown_activity","message":"no activity named \"nope\\\"\"","retryable":false}`},
		{name: "panic", activity: "boom", wantStatus: abi.StatusPanic, want: `{"code":"panic","message":"kaboom 42","retryable":true}`},
		{name: "plain error is retryable", activity: "plain-error", wantStatus: abi.StatusError, want: `{"code":"error","message":"disk on fire","retryable":true}`},
		{name: "wrapped error keeps code and details", activity: "wrapped", wantStatus: abi.StatusError, want: `{"code":"card_declined","message":"no","retryable":false,"details":{"tries":2}}`},
		{name: "heartbeats", activity: "beat", wantStatus: abi.StatusOK, want: `"done"`},
		{name: "cancelled", activity: "beat", host: fakeHost{cancel: true}, wantStatus: abi.StatusError, want: `{"code":"cancelled","message":"activity cancelled","retryable":false}`},
		{
			name: "info, last heartbeat, config", activity: "resume",
			host:       fakeHost{infoDoc: []byte(`{"attempt":3,"idempotency_key":"k"}`), last: []byte(`{"i":2}`), cfg: map[string]string{"region": "eu"}},
			wantStatus: abi.StatusOK, want: `{"activity":"resume","attempt":3,"found":true,"i":2,"key":"k","region":"eu"}`,
		},
		{
			name: "no last heartbeat", activity: "resume", host: fakeHost{infoDoc: []byte(`{"attempt":1}`)},
			wantStatus: abi.StatusOK, want: `{"activity":"resume","attempt":1,"found":false,"i":0,"key":"","region":""}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := tt.host
			status, result := dispatch(&h, tt.activity, []byte(tt.input))
			if status != tt.wantStatus || string(result) != tt.want {
				t.Errorf("got %d %s\nwant %d %s", status, result, tt.wantStatus, tt.want)
			}
			if !json.Valid(result) {
				t.Errorf("result is not JSON: %s", result)
			}
		})
	}
}

func TestHeartbeatDetails(t *testing.T) {
	t.Parallel()
	h := &fakeHost{}
	ctx := &Context{host: h}
	ctx.Heartbeat(nil)
	ctx.Heartbeat([]byte(`{"raw":1}`))
	ctx.Heartbeat(json.RawMessage(`[2]`))
	ctx.Heartbeat(struct {
		N int `json:"n"`
	}{3})
	ctx.Heartbeat(func() {}) // not encodable: no details, a warning
	want := []string{"", `{"raw":1}`, `[2]`, `{"n":3}`, ""}
	if len(h.beats) != len(want) {
		t.Fatalf("%d beats, want %d", len(h.beats), len(want))
	}
	for i, w := range want {
		if string(h.beats[i]) != w {
			t.Errorf("beat %d: %q, want %q", i, h.beats[i], w)
		}
	}
	if len(h.logs) != 1 {
		t.Errorf("logs %q, want one warning", h.logs)
	}
}

// testManifest is the manifest document (abi/README.md), to decode what
// the SDK encodes by hand.
type testManifest struct {
	Activities []struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	} `json:"activities"`
	Needs *Requirements `json:"needs,omitempty"`
}

func TestManifest(t *testing.T) {
	t.Parallel()
	var m testManifest
	if err := json.Unmarshal(manifest(), &m); err != nil {
		t.Fatalf("manifest %s: %v", manifest(), err)
	}
	names := ""
	for _, a := range m.Activities {
		names += a.Name + " "
		if a.Name == "raw" && a.Description != "returns its input" {
			t.Errorf("raw's description %q", a.Description)
		}
	}
	if names != "beat boom greet plain-error raw resume wrapped " {
		t.Errorf("activities %q, want them sorted", names)
	}
	const wantNeeds = `,"needs":{"hosts":["api.example.com","http://10.0.0.7:*"],"config":["url","region"],"secrets":["token"]}}`
	if !strings.HasSuffix(string(manifest()), wantNeeds) {
		t.Errorf("manifest %s\ndoes not end with %s", manifest(), wantNeeds)
	}
}

func TestAppendNeeds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		needs Requirements
		want  string
	}{
		{Requirements{}, ``},
		{Requirements{Hosts: []string{}}, ``},
		{Requirements{Secrets: []string{"a\"b"}}, `,"needs":{"secrets":["a\"b"]}`},
		{Requirements{Hosts: []string{"*.example.com"}, Secrets: []string{"k"}}, `,"needs":{"hosts":["*.example.com"],"secrets":["k"]}`},
	} {
		got := string(appendNeeds(nil, &tt.needs))
		if got != tt.want {
			t.Errorf("%+v: %s, want %s", tt.needs, got, tt.want)
		}
		var back testManifest
		if err := json.Unmarshal([]byte(`{"activities":[]`+got+`}`), &back); err != nil {
			t.Errorf("%+v: %v", tt.needs, err)
		}
	}
}

func TestNeedsRefusesBadNames(t *testing.T) {
	t.Parallel()
	for _, n := range []Requirements{
		{Config: []string{""}},
		{Config: []string{"a=b"}},
		{Secrets: []string{"has space"}},
		{Secrets: []string{"tab\t"}},
		{Secrets: []string{strings.Repeat("k", 257)}},
		{Config: []string{"ünï"}},
		{Hosts: []string{""}},
		{Hosts: []string{"api.example.com ", "ok.example.com"}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Needs(%+v) did not panic", n)
				}
			}()
			Needs(n)
		}()
	}
}

func TestRegisterRefusesBadNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "Upper", "a.b", "greet"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(name, func(*Context, []byte) ([]byte, error) { return nil, nil })
		}()
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote\" backslash\\ nl\n tab\t", "\x00\x1f\x7f", "héllo ☃", "\xff\xfe invalid utf8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, b, err)
		}
		// encoding/json replaces invalid UTF-8 with U+FFFD; compare through it.
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q round-tripped to %q, want %q", s, back, wantBack)
		}
	})
}
