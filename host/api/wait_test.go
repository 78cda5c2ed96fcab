package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// napFlow sleeps through a 1s delay and then works: it suspends on the way
// to completing.
const napFlow = `
name: nap
steps:
  - { id: rest, delay: 1s }
  - { id: up, activity: kit.upper, input: { text: "rested" }, output: up }
output: "${ vars.up.text }"
`

// flakyFlow fails twice and is retried after a 100ms backoff each time:
// it suspends between attempts.
const flakyFlow = `
name: flaky
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, retryable: true, fail_attempts: 2 }
    retry: { max_attempts: 5, initial_interval: 100ms, backoff: 1 }
    output: result
output: "${ vars.result.attempt }"
`

// sleeperFlow suspends for an hour: it does not end during a test.
const sleeperFlow = `
name: sleeper
steps:
  - { id: nap, delay: 1h }
`

// TestWaitEndsWithTheInstance: ?wait= on a start answers when the instance
// ends, not when it suspends for a delay or a retry's backoff; with
// until=suspended it answers at the suspension; an instance that has not
// ended when the wait does is answered as it is, with the start's status.
func TestWaitEndsWithTheInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("nap", napFlow)
	h.putWorkflow("flaky", flakyFlow)
	h.putWorkflow("sleeper", sleeperFlow)

	t.Run("a delay", func(t *testing.T) {
		t.Parallel()
		var in instance
		h.do("POST", "/v1/workflows/nap/instances?wait=1m", map[string]any{}).want(t, http.StatusCreated).json(t, &in)
		if in.Status != "completed" || string(in.Output) != `"RESTED"` {
			t.Fatalf("instance = %+v, output %s; want completed after its delay", in, in.Output)
		}
	})
	t.Run("a retry after a backoff", func(t *testing.T) {
		t.Parallel()
		var in instance
		h.do("POST", "/v1/workflows/flaky/instances?wait=1m", map[string]any{}).want(t, http.StatusCreated).json(t, &in)
		if in.Status != "completed" || string(in.Output) != "3" {
			t.Fatalf("instance = %+v, output %s; want completed on the third attempt", in, in.Output)
		}
	})
	t.Run("until suspended", func(t *testing.T) {
		t.Parallel()
		var in instance
		h.do("POST", "/v1/workflows/sleeper/instances?wait=2m&until=suspended", map[string]any{"id": "sleeper-early"}).
			want(t, http.StatusCreated).json(t, &in)
		if in.Status != "suspended" || in.WaitingOn == nil || len(in.WaitingOn.Timers) != 1 {
			t.Fatalf("instance = %+v; want suspended on its timer", in)
		}
	})
	t.Run("until ended, explicitly", func(t *testing.T) {
		t.Parallel()
		var in instance
		h.do("POST", "/v1/workflows/nap/instances?wait=1m&until=ended", map[string]any{}).want(t, http.StatusCreated).json(t, &in)
		if in.Status != "completed" {
			t.Fatalf("instance = %+v; want completed", in)
		}
	})
	t.Run("the wait ends first", func(t *testing.T) {
		t.Parallel()
		// The wait is long enough for a loaded machine to bring the
		// instance to its delay.
		start := time.Now()
		var in instance
		h.do("POST", "/v1/workflows/sleeper/instances?wait=5s", map[string]any{"id": "sleeper-late"}).want(t, http.StatusCreated).json(t, &in)
		if in.Status != "suspended" || in.WaitingOn == nil || len(in.WaitingOn.Timers) != 1 {
			t.Fatalf("instance = %+v; want 201 with the instance suspended, as it is", in)
		}
		if d := time.Since(start); d < 5*time.Second {
			t.Fatalf("answered after %s, before the wait of 5s ended", d)
		}
		// Again with the same id: 200, the existing instance, after the wait.
		h.do("POST", "/v1/workflows/sleeper/instances?wait=100ms", map[string]any{"id": "sleeper-late"}).want(t, http.StatusOK).json(t, &in)
		if in.ID != "sleeper-late" || in.Status != "suspended" {
			t.Fatalf("instance = %+v", in)
		}
	})
}

// TestGetWaits: GET /v1/instances/{id}?wait= waits for an existing
// instance the same way.
func TestGetWaits(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("nap", napFlow)
	h.putWorkflow("sleeper", sleeperFlow)

	var started instance
	h.do("POST", "/v1/workflows/nap/instances", map[string]any{"id": "nap-1"}).want(t, http.StatusCreated).json(t, &started)
	var in instance
	h.do("GET", "/v1/instances/nap-1?wait=1m", nil).want(t, http.StatusOK).json(t, &in)
	if in.Status != "completed" || string(in.Output) != `"RESTED"` || in.WaitingOn == nil || len(in.WaitingOn.Timers) != 0 {
		t.Fatalf("instance = %+v, output %s; want completed", in, in.Output)
	}
	// An ended instance is answered at once, whatever the wait.
	start := time.Now()
	h.do("GET", "/v1/instances/nap-1?wait=5m", nil).want(t, http.StatusOK).json(t, &in)
	if in.Status != "completed" || time.Since(start) > time.Minute {
		t.Fatalf("instance = %+v after %s", in, time.Since(start))
	}

	h.do("POST", "/v1/workflows/sleeper/instances", map[string]any{"id": "sleeper-1"}).want(t, http.StatusCreated)
	h.do("GET", "/v1/instances/sleeper-1?wait=2m&until=suspended", nil).want(t, http.StatusOK).json(t, &in)
	if in.Status != "suspended" || in.WaitingOn == nil || len(in.WaitingOn.Timers) != 1 {
		t.Fatalf("instance = %+v; want suspended on its timer", in)
	}
	h.do("GET", "/v1/instances/sleeper-1?wait=200ms", nil).want(t, http.StatusOK).json(t, &in)
	if in.Status != "suspended" {
		t.Fatalf("instance = %+v; want 200 with the instance as it is", in)
	}
	// Cancelling ends the instance, and so the wait.
	answered := make(chan instance, 1)
	go func() {
		var got instance
		r := h.request("GET", "/v1/instances/sleeper-1?wait=2m", readerSecret, "", nil)
		_ = json.Unmarshal(r.body, &got)
		answered <- got
	}()
	h.do("POST", "/v1/instances/sleeper-1/cancel", nil).want(t, http.StatusAccepted)
	select {
	case got := <-answered:
		if got.Status != "cancelled" {
			t.Fatalf("the waiting GET answered %+v; want cancelled", got)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiting GET did not answer within a minute of the cancel")
	}
}

// TestWaitParameters: bad values of wait and until are 400s naming the
// parameter; waiting on a missing instance is a 404.
func TestWaitParameters(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	h.do("POST", "/v1/workflows/greet/instances?wait=1m", map[string]any{"id": "g-1", "input": map[string]any{"name": "x"}}).want(t, http.StatusCreated)
	for _, tc := range []struct {
		name, method, path string
		status             int
		field, says        string
	}{
		{"bad until on start", "POST", "/v1/workflows/greet/instances?wait=1s&until=done", 400, "until", `must be ended or suspended, got "done"`},
		{"bad until on show", "GET", "/v1/instances/g-1?wait=1s&until=Suspended", 400, "until", `got "Suspended"`},
		{"until without wait", "GET", "/v1/instances/g-1?until=suspended", 400, "until", "needs wait"},
		{"bad wait on show", "GET", "/v1/instances/g-1?wait=soon", 400, "wait", "duration"},
		{"wait too long on show", "GET", "/v1/instances/g-1?wait=6m", 400, "wait", "5m0s"},
		{"negative wait", "GET", "/v1/instances/g-1?wait=-1s", 400, "wait", "from 0s"},
		{"missing instance", "GET", "/v1/instances/nope?wait=1s", 404, "", `no instance "nope"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.request(tc.method, tc.path, adminSecret, "application/json", nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			p := r.problem(t)
			if !strings.Contains(p.Detail, tc.says) {
				t.Fatalf("detail %q does not say %q", p.Detail, tc.says)
			}
			if tc.field == "" {
				return
			}
			if len(p.Errors) != 1 || p.Errors[0].Path != tc.field || !strings.Contains(p.Detail, tc.field+": ") {
				t.Fatalf("problem does not name %q: %s", tc.field, r.body)
			}
		})
	}
	// wait=0s is no wait, and until may qualify it.
	var in instance
	h.do("GET", "/v1/instances/g-1?wait=0s&until=suspended", nil).want(t, http.StatusOK).json(t, &in)
	if in.ID != "g-1" {
		t.Fatalf("instance = %+v", in)
	}
}

// TestWaitEndsWhenTheClientHangsUp: a client that hangs up during a wait
// does not leave the request waiting for the rest of it: the request ends
// and is logged with 499.
func TestWaitEndsWhenTheClientHangsUp(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("sleeper", sleeperFlow)
	h.do("POST", "/v1/workflows/sleeper/instances?wait=1m&until=suspended", map[string]any{"id": "hung-1"}).want(t, http.StatusCreated)

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /v1/instances/hung-1?wait=5m HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", readerSecret)
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	// The request's log line is written when it ends: long before the
	// 5m wait would.
	deadline := time.Now().Add(time.Minute)
	for !loggedHangUp(h, "/v1/instances/hung-1") {
		if time.Now().After(deadline) {
			t.Fatalf("no request of /v1/instances/hung-1 ended with 499 within a minute of the hang-up:\n%s", h.logs)
		}
		time.Sleep(10 * time.Millisecond) // polling the log, with a deadline
	}
}

// loggedHangUp reports whether the access log has a request of path that
// ended with 499.
func loggedHangUp(h *host, path string) bool {
	sc := bufio.NewScanner(strings.NewReader(h.logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Msg    string `json:"msg"`
			Path   string `json:"path"`
			Status int    `json:"status"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "http request" && line.Path == path && line.Status == 499 {
			return true
		}
	}
	return false
}
