// Package plugintest tests a Weft plugin from Go's tests: it builds the
// plugin, calls its activities in the host's own sandbox, and returns
// everything a call did — its output or failure, what it logged, each
// heartbeat and each HTTP request — for the test to assert on.
//
// A call runs `weft plugin call -o json`, the command-line tool of the
// host the plugin will run on, so a test sees exactly what the host does
// (the same limits, grants and failure classification) and the plugin's
// module needs nothing but the SDK's (and the abi module the SDK
// requires): this package uses the standard library only. The weft
// command is found in the WEFT environment variable (a path), or else on
// PATH; a test fails, saying so, when it is in neither.
//
//	func TestGreet(t *testing.T) {
//		p := plugintest.Build(t, ".")
//		res := p.Call(t, "greet", plugintest.Call{Input: map[string]string{"name": "Ada"}})
//		var out struct{ Greeting string }
//		res.Decode(t, &out)
//		if out.Greeting != "hello, Ada" {
//			t.Errorf("greeting %q", out.Greeting)
//		}
//	}
//
// Each call starts a process that loads the plugin; the host caches the
// compiled module in the user's cache directory, so only the first call
// after a rebuild compiles it.
package plugintest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Plugin is a built plugin module and the weft command that runs it.
type Plugin struct {
	// Path is the .wasm file.
	Path string
	weft string
}

// Build builds the Go plugin whose main package is in dir with the go
// command on PATH (GOOS=wasip1 GOARCH=wasm, -buildmode=c-shared, as the
// SDK's README says), into a directory removed when the test ends, and
// opens it. Building links a module of a few MB, which takes a second or
// more: build once per package (in TestMain, or in a test whose subtests
// share the Plugin) rather than once per test.
func Build(t testing.TB, dir string) *Plugin {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("plugintest: building %s: no go command: %v", dir, err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(absDir(t, dir))+".wasm")
	cmd := exec.Command(goTool, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("plugintest: building %s: %v\n%s", dir, err, b)
	}
	return Open(t, out)
}

// Open returns the plugin module at path (built by Build, by make, or
// from another language) after checking it as the host checks an upload
// (`weft plugin check`); a refused module fails the test with the host's
// reasons.
func Open(t testing.TB, path string) *Plugin {
	t.Helper()
	p := &Plugin{Path: path, weft: weftCommand(t)}
	cmd := exec.Command(p.weft, "plugin", "check", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		t.Fatalf("plugintest: weft plugin check %s: %v\n%s", path, err, stderr.Bytes())
	}
	return p
}

// weftCommand finds the weft command: $WEFT, else weft on PATH.
func weftCommand(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("WEFT"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("plugintest: WEFT=%s: %v", p, err)
		}
		return p
	}
	p, err := exec.LookPath("weft")
	if err != nil {
		t.Fatal("plugintest: no weft command: set WEFT to its path (bin/weft after `make build` in a clone of Weft) or put it on PATH")
	}
	return p
}

func absDir(t testing.TB, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("plugintest: %v", err)
	}
	return abs
}

// Call is one activity call's inputs. The zero value calls with a null
// input, as attempt 1, with nothing granted.
type Call struct {
	// Input is the input document: []byte or json.RawMessage as they are
	// (they must hold JSON), anything else encoded with encoding/json.
	Input any
	// Attempt is the attempt number the plugin sees; 0 means 1.
	Attempt int
	// LastHeartbeat is the details a previous attempt recorded, encoded
	// like Input; nil means none.
	LastHeartbeat any
	// Config is the configuration the operator granted.
	Config map[string]string
	// Secrets are the granted secrets' values. They reach the host through
	// its environment, never its command line.
	Secrets map[string]string
	// Hosts are the host patterns the plugin's HTTP requests may reach, as
	// in a grant: [http://]host[:port], *.example.com, an IP.
	Hosts []string
	// PrivateNetworks lets Hosts reach loopback and private addresses, as
	// a test server on 127.0.0.1 needs.
	PrivateNetworks bool
	// CancelAtHeartbeat requests cancellation when that heartbeat (counted
	// from 1) arrives, so that the heartbeat answers "cancelled"; 0 never.
	CancelAtHeartbeat int
	// Timeout is the call's deadline; 0 means 30 s.
	Timeout time.Duration
}

// Result is what a call did.
type Result struct {
	// Activity is the activity called.
	Activity string `json:"activity"`
	// Output is the activity's output document; nil when it failed.
	Output json.RawMessage `json:"output,omitempty"`
	// Failure says why the call failed; nil when it succeeded.
	Failure *Failure `json:"failure,omitempty"`
	// Logs are what the plugin logged (through the log host function,
	// stdout and stderr) and the host's notes on its requests, in order.
	Logs []Log `json:"logs"`
	// Heartbeats are the details of each heartbeat, in order; "null" for
	// one sent without details.
	Heartbeats []json.RawMessage `json:"heartbeats"`
	// Requests are the plugin's HTTP requests, in order.
	Requests []Request `json:"requests"`
}

// Failure is a failed call as the host's retry policy sees it.
type Failure struct {
	// Kind is "activity" when the plugin reported the failure; otherwise
	// what the host saw: "timeout", "trap", "limit", "protocol",
	// "cancelled", "unknown_activity", "not_granted" or "host".
	Kind string `json:"kind"`
	// Code is the plugin's failure code for kind "activity", and the kind
	// otherwise.
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
	// Retryable says whether a step's retry policy would try again.
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details,omitempty"`
}

// Error implements error.
func (f *Failure) Error() string {
	s := f.Kind + " failure " + f.Code
	if f.Message != "" {
		s += ": " + f.Message
	}
	if f.Retryable {
		s += " (retryable)"
	}
	return s
}

// Log is one log record.
type Log struct {
	// Level is "debug", "info", "warn" or "error".
	Level string `json:"level"`
	// Source is "log" for the log host function, "stdout" or "stderr" for
	// a line the plugin wrote there, "http" for the host's notes.
	Source  string `json:"source"`
	Message string `json:"message"`
}

// Request is one HTTP request the plugin made.
type Request struct {
	Method string `json:"method"`
	// Host is the URL's host, with the port when it is not the scheme's
	// default; Path is its path without the query.
	Host string `json:"host"`
	Path string `json:"path"`
	// Status is the response's status; 0 when no response was used.
	Status int `json:"status,omitempty"`
	// Error says why no response was used: "timeout", "unreachable",
	// "tls", "bad_response", "not_granted", "limit" or "cancelled".
	Error string `json:"error,omitempty"`
}

// Call calls activity and returns what the call did; a failure of the
// activity is in the Result, not a failure of the test. The test fails
// only when the call could not be made: bad inputs, or the weft command
// failing to run it.
func (p *Plugin) Call(t testing.TB, activity string, c Call) Result {
	t.Helper()
	args := []string{"plugin", "call", p.Path, activity, "-o", "json"}
	if c.Input != nil {
		args = append(args, "-input", string(document(t, "Input", c.Input)))
	}
	if c.Attempt != 0 {
		args = append(args, "-attempt", strconv.Itoa(c.Attempt))
	}
	if c.LastHeartbeat != nil {
		args = append(args, "-last-heartbeat", string(document(t, "LastHeartbeat", c.LastHeartbeat)))
	}
	if c.CancelAtHeartbeat != 0 {
		args = append(args, "-cancel-at-heartbeat", strconv.Itoa(c.CancelAtHeartbeat))
	}
	if c.Timeout != 0 {
		args = append(args, "-timeout", c.Timeout.String())
	}
	for k, v := range c.Config {
		args = append(args, "-config", k+"="+v)
	}
	for _, h := range c.Hosts {
		args = append(args, "-host", h)
	}
	if c.PrivateNetworks {
		args = append(args, "-private-networks")
	}
	env := os.Environ()
	i := 0
	for name, value := range c.Secrets {
		v := fmt.Sprintf("WEFT_PLUGINTEST_SECRET_%d", i)
		i++
		env = append(env, v+"="+value)
		args = append(args, "-secret", name+"=env:"+v)
	}

	cmd := exec.CommandContext(t.Context(), p.weft, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// Exit status 1 is a failed call, described on stdout like a success.
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1 && stdout.Len() > 0) {
		t.Fatalf("plugintest: weft plugin call %s %s: %v\n%s", p.Path, activity, err, stderr.Bytes())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("plugintest: weft plugin call %s %s printed what is not its JSON result (%v):\n%s\n%s", p.Path, activity, err, stdout.Bytes(), stderr.Bytes())
	}
	return res
}

// document returns v as a JSON document.
func document(t testing.TB, field string, v any) []byte {
	t.Helper()
	var b []byte
	switch v := v.(type) {
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatalf("plugintest: Call.%s: %v", field, err)
		}
	}
	if !json.Valid(b) {
		t.Fatalf("plugintest: Call.%s is not a JSON document: %q", field, b)
	}
	return b
}

// Decode decodes the output into v, failing the test when the call failed
// or the output does not decode.
func (r Result) Decode(t testing.TB, v any) {
	t.Helper()
	if r.Failure != nil {
		t.Fatalf("%s: %v", r.Activity, r.Failure)
	}
	if err := json.Unmarshal(r.Output, v); err != nil {
		t.Fatalf("%s: decoding the output %s: %v", r.Activity, r.Output, err)
	}
}

// Failed returns the failure, failing the test when the call succeeded.
func (r Result) Failed(t testing.TB) *Failure {
	t.Helper()
	if r.Failure == nil {
		t.Fatalf("%s succeeded with %s, want a failure", r.Activity, r.Output)
	}
	return r.Failure
}

// Logged reports whether a log record's message contains s.
func (r Result) Logged(s string) bool {
	for _, l := range r.Logs {
		if strings.Contains(l.Message, s) {
			return true
		}
	}
	return false
}
