package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/tape"
)

// tapeSecretWorkflow records every attempt of its two steps: the webhook
// delivers to the hostile server with the bearer token (secret "token"),
// and kit logs the value of the secret "api_key" (the same value).
const tapeSecretWorkflow = `name: tapesecret
record: all
steps:
  - id: deliver
    activity: webhook.deliver
    input: { event: order.shipped, order: 42 }
    retry: { max_attempts: 1 }
  - id: log
    activity: kit.log
    input: { lines: ["info:logging the secret next"], secret: api_key }
    retry: { max_attempts: 1 }
`

// tapeSecretHost is `weft serve` in-process on a data directory the test
// names, so that the test can stop it and read its store file.
type tapeSecretHost struct {
	*testServer
	stop func()
}

// startTapeSecretHost starts a host as startServer does, on dataDir, seeded
// from seed; stop shuts it down (once; the test's cleanup calls it too).
func startTapeSecretHost(t *testing.T, dataDir, seed string) *tapeSecretHost {
	t.Helper()
	ts := &testServer{logs: &logtest.Buffer{}, workflows: t.TempDir()}
	cfg, err := config.Load(parseHostFlags(t,
		"--listen", "127.0.0.1:0", "--data-dir", dataDir, "--workflows-dir", ts.workflows, "--seed", seed,
		"--set", "plugins.cache_dir="+testplugins.CacheDir(t), "--set", "engine.timer_interval=10ms", "--node-id", "test",
	).sources(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(ts.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := openServer(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	s.start()
	ts.url = "http://" + s.addr()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("host log:\n%s", ts.logs)
		}
	})
	return &tapeSecretHost{testServer: ts, stop: stop}
}

// secretSearch finds a secret's value, in the forms a leak would take, in
// what a user can get from the host.
type secretSearch struct {
	secret string
	// forms are what is searched for, each with its name.
	forms []struct{ name, value string }
	// seen names every answer searched, for the report.
	seen []string
}

func newSecretSearch(secret string) *secretSearch {
	s := &secretSearch{secret: secret}
	add := func(name, v string) { s.forms = append(s.forms, struct{ name, value string }{name, v}) }
	add("value", secret)
	// Any 16 bytes of it: a cut excerpt quoting the start of the value is
	// a leak too.
	for i := 0; i+16 <= len(secret); i++ {
		add(fmt.Sprintf("value[%d:%d]", i, i+16), secret[i:i+16])
	}
	add("hex", hex.EncodeToString([]byte(secret)))
	add("HEX", strings.ToUpper(hex.EncodeToString([]byte(secret))))
	// Base64 at each alignment within a longer text: the characters
	// that encode only the value's bytes (the first and last group may
	// mix in the neighbours' bits).
	for shift := range 3 {
		b := append(make([]byte, shift), secret...)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			e := enc.EncodeToString(b)
			add(fmt.Sprintf("base64 (shift %d)", shift), e[4:len(e)-4])
		}
	}
	return s
}

// check searches data, and every gzip stream in it (recursively),
// reporting each form of the secret found as a leak in what.
func (s *secretSearch) check(t *testing.T, what string, data []byte) {
	t.Helper()
	s.seen = append(s.seen, what)
	for _, leak := range s.find(data) {
		t.Errorf("LEAK: %s%s", what, leak)
	}
}

// find returns where data, or a gzip stream in it, holds a form of the
// secret: the first form found in each, with the text around it (the
// value itself replaced by <SECRET>).
func (s *secretSearch) find(data []byte) []string {
	var leaks []string
	for _, part := range expandGzip(data, 0) {
		for _, f := range s.forms {
			if i := bytes.Index(part.data, []byte(f.value)); i >= 0 {
				ctx := part.data[max(0, i-120):min(len(part.data), i+len(f.value)+120)]
				ctx = bytes.ReplaceAll(ctx, []byte(s.secret), []byte("<SECRET>"))
				leaks = append(leaks, fmt.Sprintf("%s holds the secret's %s at byte %d: %q", part.where, f.name, i, ctx))
				break
			}
		}
	}
	return leaks
}

// gzipPart is data, or what a gzip stream in it inflated to.
type gzipPart struct {
	where string
	data  []byte
}

// expandGzip returns data and what every gzip stream starting inside it
// inflates to, and theirs in turn (a stored attempt envelope holds a
// gzipped tape; a bundle holds the envelope). A stream cut short gives
// what it inflated before the cut.
func expandGzip(data []byte, depth int) []gzipPart {
	parts := []gzipPart{{data: data}}
	if depth > 4 {
		return parts
	}
	for at := 0; ; at++ {
		i := bytes.Index(data[at:], []byte{0x1f, 0x8b, 0x08})
		if i < 0 {
			break
		}
		at += i
		zr, err := gzip.NewReader(bytes.NewReader(data[at:]))
		if err != nil {
			continue
		}
		zr.Multistream(false)
		inflated, _ := io.ReadAll(io.LimitReader(zr, 64<<20))
		if len(inflated) == 0 {
			continue
		}
		for _, p := range expandGzip(inflated, depth+1) {
			parts = append(parts, gzipPart{where: fmt.Sprintf(" (gzip at byte %d)%s", at, p.where), data: p.data})
		}
	}
	return parts
}

// TestTapeSecret: no answer a user can get about an attempt that read a
// secret holds the secret's value (as it is, any 16 bytes of it, in hex
// or base64), on a real host with the embedded store, recording every
// attempt (record: all). The webhook plugin reads the secret "token" and
// sends it as a bearer token to a hostile loopback server, which echoes it
// back in a header (X-Echo, a name that does not look secret) and in a
// body that is not UTF-8 (so that the API renders it in base64); kit logs
// the value of the secret "api_key". The instance completes. Searched:
// weft attempt ls, each tape as JSON and as its envelope (and inflated),
// each replay (API and CLI), each exported bundle (raw and decoded) and
// its offline replay, the instance, its history, logs and state, the
// metrics, every CLI output, the host's log, and, after the host stops,
// every key and value of the store (its Pebble keys, read through Pebble)
// and every file of the data directory, raw and inflated. And the
// recording is there: the webhook's tape holds its secret read (name only)
// and its request, whose recorded answer says [secret] where the server
// echoed the value.
func TestTapeSecret(t *testing.T) {
	t.Parallel()
	random := make([]byte, 24)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	secret := hex.EncodeToString(random)
	search := newSecretSearch(secret)
	dir := t.TempDir()
	secretFile := writeFile(t, dir, "token", secret)

	var mu sync.Mutex
	var received []string
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		mu.Lock()
		received = append(received, auth)
		mu.Unlock()
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Type", "application/octet-stream")
		// Not UTF-8: the tape's JSON view gives it in base64.
		fmt.Fprintf(w, "\xff\xfe\x00you sent: %s\n{\"token\":%q}", auth, strings.TrimPrefix(auth, "Bearer "))
	}))
	t.Cleanup(hostile.Close)

	seed := t.TempDir()
	for _, name := range []string{"webhook", "kit"} {
		if err := os.Symlink(testplugins.Path(t, name), filepath.Join(seed, name+".wasm")); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, seed, "tapesecret.yaml", tapeSecretWorkflow)
	dataDir := filepath.Join(dir, "data")
	h := startTapeSecretHost(t, dataDir, seed)

	// Every CLI run's stdout and stderr are searched.
	weft := func(t *testing.T, wantCodes []int, args ...string) result {
		t.Helper()
		r := h.weft(t, nil, args...)
		search.check(t, "weft "+strings.Join(args, " ")+" stdout", []byte(r.stdout))
		search.check(t, "weft "+strings.Join(args, " ")+" stderr", []byte(r.stderr))
		for _, c := range wantCodes {
			if r.code == c {
				return r
			}
		}
		t.Fatalf("weft %s: exit %d, want %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, wantCodes, r.stdout, r.stderr)
		return r
	}
	// get answers an API request's body, searched.
	get := func(t *testing.T, method, path, accept string) []byte {
		t.Helper()
		req, err := http.NewRequest(method, h.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		var head bytes.Buffer
		if err := resp.Header.Write(&head); err != nil {
			t.Fatal(err)
		}
		search.check(t, method+" "+path+" (Accept "+accept+") headers", head.Bytes())
		search.check(t, method+" "+path+" (Accept "+accept+")", body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s\n%s", method, path, resp.Status, body)
		}
		return body
	}

	weft(t, []int{exitOK}, "plugin", "grant", "webhook", "--host", "http://127.0.0.1:*", "--private-networks",
		"--config", "url="+hostile.URL+"/hook", "--secret", "token=file:"+secretFile)
	weft(t, []int{exitOK}, "plugin", "grant", "kit", "--secret", "api_key=file:"+secretFile)

	// 1. The run: the webhook's request reaches the server with the
	// secret, and the instance completes.
	var in instanceJSON
	if err := json.Unmarshal([]byte(weft(t, []int{exitOK}, "run", "tapesecret", "--id", "tsec-1", "--wait", "-o", "json").stdout), &in); err != nil {
		t.Fatal(err)
	}
	if in.Status != "completed" {
		t.Fatalf("instance tsec-1 is %s (%+v), want completed", in.Status, in.Error)
	}
	mu.Lock()
	if len(received) != 1 || received[0] != "Bearer "+secret {
		t.Errorf("the server received Authorization %d times, want once the bearer token (same as granted: %t)", len(received),
			len(received) == 1 && received[0] == "Bearer "+secret)
	}
	mu.Unlock()

	// 2. Every answer about it.
	var page apiv1.Page[apiv1.TapeSummary]
	if err := json.Unmarshal([]byte(weft(t, []int{exitOK}, "attempt", "ls", "tsec-1", "-o", "json").stdout), &page); err != nil {
		t.Fatal(err)
	}
	weft(t, []int{exitOK}, "attempt", "ls", "tsec-1")
	get(t, http.MethodGet, "/v1/instances/tsec-1/tapes", "")
	byPlugin := map[string]apiv1.TapeSummary{}
	for _, s := range page.Items {
		byPlugin[s.Plugin] = s
	}
	if len(page.Items) != 2 || byPlugin["webhook"].Activity != "deliver" || byPlugin["kit"].Activity != "log" {
		t.Fatalf("attempt ls: %+v, want a tape of webhook.deliver and of kit.log", page.Items)
	}
	tapes := map[string]apiv1.Tape{}
	for _, s := range page.Items {
		q := "?" + url.Values{"step": {s.Key.StepPath}, "exec": {s.Key.Exec}}.Encode()
		base := fmt.Sprintf("/v1/instances/tsec-1/tapes/%d", s.Key.Attempt)
		var tp apiv1.Tape
		if err := json.Unmarshal(get(t, http.MethodGet, base+q, ""), &tp); err != nil {
			t.Fatal(err)
		}
		tapes[s.Plugin] = tp
		get(t, http.MethodGet, base+q, "application/json")
		envelope := get(t, http.MethodGet, base+q, "application/octet-stream")
		a, err := tape.UnmarshalAttempt(envelope)
		if err != nil {
			t.Fatalf("the envelope of %s's tape: %v", s.Plugin, err)
		}
		search.check(t, s.Plugin+"'s envelope, decoded", decodedAttempt(t, a))

		var rr apiv1.ReplayReport
		if err := json.Unmarshal(get(t, http.MethodPost, base+"/replay"+q, ""), &rr); err != nil {
			t.Fatal(err)
		}
		// The webhook's replay reads [secret] where the server echoed
		// the value: its response_bytes may differ (docs/replay.md,
		// "Privacy"). It asks what the tape holds: it never diverges.
		if rr.Outcome != "same" && (s.Plugin == "kit" || rr.Outcome != "different_output") {
			t.Errorf("the replay of %s's tape: %s, %+v", s.Plugin, rr.Outcome, rr)
		}
		t.Logf("replay of %s.%s: %s (recorded %s, replayed %s)", s.Plugin, s.Activity, rr.Outcome, rr.RecordedOutput, rr.Output)
		attempt := fmt.Sprint(s.Key.Attempt)
		weft(t, []int{exitOK, exitFailed}, "attempt", "replay", "tsec-1", "--step", s.Key.StepPath, "--attempt", attempt, "--exec", s.Key.Exec, "-o", "json")
		weft(t, []int{exitOK, exitFailed}, "attempt", "replay", "tsec-1", "--step", s.Key.StepPath, "--attempt", attempt, "--exec", s.Key.Exec)

		bundle := filepath.Join(dir, s.Plugin+".bundle")
		weft(t, []int{exitOK}, "attempt", "export", "tsec-1", "--step", s.Key.StepPath, "--attempt", attempt, "--exec", s.Key.Exec,
			"--module", testplugins.Path(t, s.Plugin), "--file", bundle)
		b, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		search.check(t, s.Plugin+"'s bundle file", b)
		_, ba, err := tape.UnmarshalBundle(b)
		if err != nil {
			t.Fatalf("the bundle of %s's tape: %v", s.Plugin, err)
		}
		search.check(t, s.Plugin+"'s bundle, decoded", decodedAttempt(t, ba))
		weft(t, []int{exitOK, exitFailed}, "plugin", "call", "--replay", bundle, "-o", "json")
	}
	get(t, http.MethodGet, "/v1/instances/tsec-1", "")
	history := get(t, http.MethodGet, "/v1/instances/tsec-1/history", "")
	logs := get(t, http.MethodGet, "/v1/instances/tsec-1/logs", "")
	get(t, http.MethodGet, "/v1/instances/tsec-1/state", "")
	get(t, http.MethodGet, "/v1/instances/tsec-1/reset-points", "")
	get(t, http.MethodGet, "/metrics", "")
	weft(t, []int{exitOK}, "instance", "show", "tsec-1", "-o", "json")
	weft(t, []int{exitOK}, "instance", "history", "tsec-1", "-o", "json")
	weft(t, []int{exitOK}, "plugin", "show", "webhook")
	weft(t, []int{exitOK}, "plugin", "show", "kit")

	// 3. What was recorded is there, masked.
	if !bytes.Contains(history, []byte(`"/hook"`)) {
		t.Errorf("the history does not record the webhook's request:\n%s", history)
	}
	if !bytes.Contains(logs, []byte("the secret is [secret]")) {
		t.Errorf("the instance's logs do not hold kit's masked line:\n%s", logs)
	}
	checkTapeMasked(t, tapes["webhook"], "token", func(answer string) bool {
		head, body, ok := strings.Cut(answer, "\n\n")
		return ok && strings.Contains(head+"\n", "X-Echo: Bearer [secret]\n") &&
			strings.Contains(body, "you sent: Bearer [secret]\n") && strings.Contains(body, `{"token":"[secret]"}`)
	})
	checkTapeMasked(t, tapes["kit"], "api_key", nil)

	// The host's log, then the store once the host is stopped: every
	// key and value of the store, and every file of the data
	// directory as it is.
	if !strings.Contains(h.logs.String(), "the secret is [secret]") {
		t.Errorf("the host's log does not hold kit's masked line")
	}
	search.check(t, "the host's log", []byte(h.logs.String()))
	h.stop()
	search.check(t, "the host's log after shutdown", []byte(h.logs.String()))
	checkStore(t, search, filepath.Join(dataDir, "store"))
	files := 0
	err := filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		search.check(t, "the file "+p, b)
		return nil
	})
	if err != nil || files == 0 {
		t.Errorf("walking the data directory: %d files, %v", files, err)
	}
	t.Logf("searched %d answers for the secret's %d forms", len(search.seen), len(search.forms))
}

// decodedAttempt is every field of a decoded attempt envelope and its
// tape's entries, one after the other.
func decodedAttempt(t *testing.T, a *tape.Attempt) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, s := range []string{a.Activity, a.Plugin, a.PluginVersion, string(a.Input), string(a.Output), a.FailureCode, a.FailureMessage} {
		b.WriteString(s)
		b.WriteByte('\n')
	}
	if a.Tape == nil {
		t.Errorf("the attempt of %s.%s has no tape", a.Plugin, a.Activity)
		return b.Bytes()
	}
	for _, e := range a.Tape.Entries {
		fmt.Fprintf(&b, "%s %d\n%s\n%s\n", e.Kind, e.Value, e.Ask, e.Answer)
	}
	return b.Bytes()
}

// checkTapeMasked checks that tp recorded the secret name read without a
// value, and, when httpAnswer is set, an http entry whose answer (decoded
// from base64 when the API gave it so) it accepts.
func checkTapeMasked(t *testing.T, tp apiv1.Tape, name string, httpAnswer func(string) bool) {
	t.Helper()
	var readSecret, sawHTTP bool
	var answers []string
	for _, e := range tp.Entries {
		answer := e.Answer
		if e.AnswerBase64 {
			b, err := base64.StdEncoding.DecodeString(e.Answer)
			if err != nil {
				t.Fatalf("tape of %s: an answer in base64 does not decode: %v", tp.Plugin, err)
			}
			answer = string(b)
		}
		switch e.Kind {
		case string(tape.KindSecret):
			if e.Ask == name && answer == "" {
				readSecret = true
			}
		case string(tape.KindHTTP):
			answers = append(answers, answer)
			if httpAnswer != nil && httpAnswer(answer) {
				sawHTTP = true
			}
		}
	}
	if !readSecret {
		t.Errorf("the tape of %s.%s has no secret entry naming %q without an answer: %+v", tp.Plugin, tp.Activity, name, tp.Entries)
	}
	if httpAnswer != nil && !sawHTTP {
		t.Errorf("the tape of %s.%s has no http entry with the echo masked as [secret]; its http answers: %q", tp.Plugin, tp.Activity, answers)
	}
}

// checkStore opens the Pebble store in dir read-only and searches every
// key and value it holds (every bucket's: a bucket is a key prefix). It
// fails unless it met a stored attempt envelope (a tape), so that a
// search of an empty or unreadable store cannot pass.
func checkStore(t *testing.T, search *secretSearch, dir string) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietPebble{}})
	if err != nil {
		t.Fatalf("opening the store %s: %v", dir, err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatalf("reading the store %s: %v", dir, err)
	}
	pairs, envelopes := 0, 0
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err != nil {
			t.Fatalf("reading the store %s at key %q: %v", dir, k, err)
		}
		pairs++
		search.check(t, fmt.Sprintf("the store's key %q", k), k)
		search.check(t, fmt.Sprintf("the store's value at %q", k), v)
		if _, err := tape.UnmarshalAttempt(v); err == nil {
			envelopes++
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		t.Fatalf("reading the store %s: %v", dir, err)
	}
	if envelopes < 2 {
		t.Errorf("the store %s: %d key/value pairs, %d of them tapes (attempt envelopes), want 2 tapes", dir, pairs, envelopes)
	}
	t.Logf("the store: %d key/value pairs, %d tapes", pairs, envelopes)
}

// quietPebble drops the logs of a Pebble store opened by a test.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)  {}
func (quietPebble) Errorf(string, ...any) {}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: fatal: "+format, args...))
}

// TestTapeSecretSearch: the search TestTapeSecret relies on finds the
// value as it is, cut to 16 bytes, in hex and in base64 at any alignment,
// inside gzip streams nested in other bytes (an envelope in a bundle); it
// finds nothing in the masked text or in another value.
func TestTapeSecretSearch(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef0123456789abcdef01234567"
	s := newSecretSearch(secret)
	gz := func(b []byte) []byte {
		var out bytes.Buffer
		zw := gzip.NewWriter(&out)
		if _, err := zw.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // in the leak found; "" for none
	}{
		{"value", []byte("Bearer " + secret), "value at byte 7"},
		{"cut", []byte(`"` + secret[3:25] + `…"`), "value[3:19]"},
		{"hex", []byte(hex.EncodeToString([]byte("x" + secret))), "hex"},
		{"base64, shift 0", []byte(base64.StdEncoding.EncodeToString([]byte("abc" + secret))), "base64"},
		{"base64, shift 1", []byte(base64.StdEncoding.EncodeToString([]byte("a" + secret + "z"))), "base64"},
		{"base64, shift 2", []byte(base64.URLEncoding.EncodeToString([]byte("ab" + secret))), "base64"},
		{"nested gzip", append([]byte("WEFTBNDL\x01 module"), gz(append([]byte("WEFTATTM"), gz([]byte("X-Echo: "+secret))...))...), "(gzip at byte 16) (gzip at byte 8) holds the secret's value"},
		{"masked", []byte("X-Echo: Bearer [secret]\n" + base64.StdEncoding.EncodeToString([]byte("Bearer [secret]"))), ""},
		{"another value", []byte("fedcba9876543210fedcba9876543210"), ""},
	} {
		leaks := s.find(tc.data)
		switch {
		case tc.want == "" && len(leaks) > 0:
			t.Errorf("%s: found %q", tc.name, leaks)
		case tc.want != "" && !strings.Contains(strings.Join(leaks, "\n"), tc.want):
			t.Errorf("%s: found %q, want a leak saying %q", tc.name, leaks, tc.want)
		}
		for _, l := range leaks {
			if strings.Contains(l, secret) {
				t.Errorf("%s: the report quotes the value: %s", tc.name, l)
			}
		}
	}
}
