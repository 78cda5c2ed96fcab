package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/redistest"
)

// TestRunWaitWaitsOnTheServer: `weft run --wait` waits through a delay
// (during which the instance is suspended) to the outcome, in one long
// request rather than by polling; --wait=DURATION ends with exit 6 when
// the instance has not ended by then.
func TestRunWaitWaitsOnTheServer(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	dir := t.TempDir()
	nap := writeFile(t, dir, "nap.yaml", "name: nap\nsteps:\n  - { id: rest, delay: 1s }\n  - { id: up, activity: kit.upper, input: { text: rested }, output: up }\noutput: \"${ vars.up.text }\"\n")
	flaky := writeFile(t, dir, "flaky.yaml", "name: flaky\nsteps:\n  - id: try\n    activity: kit.fail\n    input: { code: busy, retryable: true, fail_attempts: 2 }\n    retry: { max_attempts: 5, initial_interval: 100ms, backoff: 1 }\n    output: result\noutput: \"${ vars.result.attempt }\"\n")
	sleeper := writeFile(t, dir, "sleeper.yaml", "name: sleeper\nsteps:\n  - { id: nap, delay: 1h }\n")
	ts.ok(t, "workflow", "put", nap, flaky, sleeper)

	out := ts.ok(t, "run", "nap", "--id", "nap-1", "--wait")
	for _, want := range []string{"status:    completed", `output:    "RESTED"`} {
		if !strings.Contains(out, want) {
			t.Errorf("run --wait lacks %q:\n%s", want, out)
		}
	}
	// One request: the start's wait answers with the outcome.
	if shows, starts := requests(t, ts); shows != 0 || starts != 1 {
		t.Errorf("run --wait sent %d starts and %d shows of the instance, want 1 and 0", starts, shows)
	}

	var in instanceJSON
	ts.okJSON(t, &in, "run", "flaky", "--wait")
	if in.Status != "completed" || string(in.Output) != "3" {
		t.Errorf("run flaky --wait: %+v, want completed on the third attempt", in)
	}

	// Long enough for a loaded machine to bring the new instance to its
	// delay before the wait ends.
	start := time.Now()
	r := ts.weft(t, nil, "run", "sleeper", "--id", "sleeper-1", "--wait=5s")
	if r.code != exitPending || !strings.Contains(r.stdout, "status:    suspended") || !strings.Contains(r.stderr, "the wait ended with the instance suspended") {
		t.Errorf("run sleeper --wait=5s: exit %d (want %d)\nstdout: %s\nstderr: %s", r.code, exitPending, r.stdout, r.stderr)
	}
	if d := time.Since(start); d < 5*time.Second {
		t.Errorf("run --wait=5s returned after %s", d)
	}
	if shows, starts := requests(t, ts); shows != 0 || starts != 3 {
		t.Errorf("after three runs, %d starts and %d shows of an instance, want 3 and 0", starts, shows)
	}
	// Waiting for an instance that exists (the same id) waits too.
	r = ts.weft(t, nil, "run", "sleeper", "--id", "sleeper-1", "--wait=300ms", "-o", "json")
	if r.code != exitPending || !strings.Contains(r.stdout, `"status": "suspended"`) {
		t.Errorf("run an existing id --wait=300ms: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// TestWaitAcrossACluster: a wait through one node of a cluster answers
// when the instance ends, whichever node runs it.
func TestWaitAcrossACluster(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	a := startServer(t, "--store", "redis", "--redis-addr", redis.Addr(), "--node-id", "a")
	b := startServer(t, "--store", "redis", "--redis-addr", redis.Addr(), "--node-id", "b")
	nap := writeFile(t, t.TempDir(), "nap.yaml", "name: nap\nsteps:\n  - { id: rest, delay: 1s }\n  - { id: up, activity: kit.upper, input: { text: rested }, output: up }\noutput: \"${ vars.up.text }\"\n")
	a.ok(t, "workflow", "put", nap)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ca, err := client.New(client.Config{Server: a.url})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := client.New(client.Config{Server: b.url})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		id := fmt.Sprintf("nap-%d", i)
		if _, _, err := ca.Start(ctx, "nap", apiv1.StartRequest{ID: id}, 0); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			in, err := cb.Await(ctx, id, time.Minute, apiv1.UntilSuspended)
			if err != nil || (in.Status != apiv1.StatusSuspended && !in.Terminal()) {
				t.Fatalf("Await %s until suspended through the other node: %+v, %v", id, in, err)
			}
		}
		in, err := cb.Await(ctx, id, time.Minute, "")
		if err != nil || in.Status != apiv1.StatusCompleted || string(in.Output) != `"RESTED"` {
			t.Fatalf("Await %s through the other node: %+v, %v; want completed", id, in, err)
		}
	}
}

// requests returns how many requests of GET /v1/instances/{id} and of
// POST /v1/workflows/{name}/instances the server answered, from its
// metrics (the access log has successes at debug only).
func requests(t *testing.T, ts *testServer) (shows, starts int) {
	t.Helper()
	res, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d, %v", res.StatusCode, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "weft_http_requests_total{") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		n, err := strconv.Atoi(value)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		switch {
		case strings.Contains(labels, `method="GET"`) && strings.Contains(labels, `route="/v1/instances/:id"`):
			shows += n
		case strings.Contains(labels, `method="POST"`) && strings.Contains(labels, `route="/v1/workflows/:name/instances"`):
			starts += n
		}
	}
	return shows, starts
}
