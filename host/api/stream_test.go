package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// sse is one server-sent event.
type sse struct {
	name string
	data string
}

// openStream opens an event stream as token and returns its events, in
// order; the channel closes when the stream ends. The stream is closed
// when the test ends.
func (h *host) openStream(path, token string) (*http.Response, <-chan sse) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", h.url+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { res.Body.Close() })
	events := make(chan sse, 100)
	if res.StatusCode != http.StatusOK {
		close(events)
		return res, events
	}
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" {
					events <- ev
				}
				ev = sse{}
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return res, events
}

// next returns the next event that match accepts, failing the test after
// a minute or when the stream ends first.
func next(t *testing.T, events <-chan sse, what string, match func(sse) bool) sse {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			if match(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// instanceEvent matches an instance event of id with status.
func instanceEvent(t *testing.T, id, status string) func(sse) bool {
	return func(ev sse) bool {
		if ev.name != "instance" {
			return false
		}
		var in instance
		if err := json.Unmarshal([]byte(ev.data), &in); err != nil {
			t.Fatalf("instance event %q: %v", ev.data, err)
		}
		return in.ID == id && in.Status == status
	}
}

// TestStreamOfInstances: the list stream tells of an instance as it is
// created and as it completes, and only of the workflow asked for.
func TestStreamOfInstances(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	h.putWorkflow("hold", holdFlow)
	res, all := h.openStream("/v1/streams/instances", readerSecret)
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream answered %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	_, holds := h.openStream("/v1/streams/instances?workflow=hold", readerSecret)

	h.do("POST", "/v1/workflows/greet/instances", map[string]any{"id": "s-1", "input": map[string]any{"name": "ada"}}).want(t, http.StatusCreated)
	next(t, all, "s-1 completed", instanceEvent(t, "s-1", "completed"))
	h.do("POST", "/v1/workflows/hold/instances", map[string]any{"id": "s-2"}).want(t, http.StatusCreated)
	next(t, all, "s-2 suspended", instanceEvent(t, "s-2", "suspended"))
	ev := next(t, holds, "s-2 on the hold stream", func(ev sse) bool { return ev.name == "instance" })
	if !strings.Contains(ev.data, `"id":"s-2"`) {
		t.Errorf("the hold stream told first of %s, want s-2 (s-1 is another workflow's)", ev.data)
	}
	h.do("DELETE", "/v1/instances/s-2", nil).want(t, http.StatusNoContent)
	next(t, all, "s-2 deleted", func(ev sse) bool { return ev.name == "deleted" && ev.data == `{"id":"s-2"}` })
}

// TestStreamOfOneInstance: an instance's stream starts with the instance,
// tells of each change, and ends once it has finished; an unknown one is
// a 404 before any stream.
func TestStreamOfOneInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("hold", holdFlow)
	h.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": "one"}).want(t, http.StatusCreated)
	_, events := h.openStream("/v1/instances/one/stream", readerSecret)
	first := next(t, events, "the instance", func(sse) bool { return true })
	if !instanceEvent(t, "one", "suspended")(first) || !strings.Contains(first.data, `"waiting_on":{"bookmarks":[{"event":"hold.released"`) {
		t.Fatalf("first event %+v, want the suspended instance with what it waits on", first)
	}
	h.do("POST", "/v1/events", map[string]any{"name": "hold.released", "key": "fixed"}).want(t, http.StatusAccepted)
	next(t, events, "one completed", instanceEvent(t, "one", "completed"))
	select {
	case ev, ok := <-events:
		if ok {
			t.Fatalf("event %+v after the instance finished, want the stream's end", ev)
		}
	case <-time.After(time.Minute):
		t.Fatal("the stream did not end after the instance finished")
	}
	h.request("GET", "/v1/instances/nobody/stream", readerSecret, "", nil).want(t, http.StatusNotFound)
}

// TestStreamsAreBounded: one stream more than MaxStreams is a 503; a
// closed stream frees its place; open streams do not hold a shutdown
// (the host's cleanup checks it).
func TestStreamsAreBounded(t *testing.T) {
	t.Parallel()
	// Keep-alives often, so that a closed stream is found soon.
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), MaxStreams: 1, StreamPoll: 50 * time.Millisecond}})
	res, _ := h.openStream("/v1/streams/instances", readerSecret)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %d", res.StatusCode)
	}
	r := h.request("GET", "/v1/streams/instances", readerSecret, "", nil).want(t, http.StatusServiceUnavailable)
	if p := r.problem(t); !strings.Contains(p.Detail, "1 event streams open") {
		t.Errorf("detail %q", p.Detail)
	}
	res.Body.Close()
	// The place is freed once the writer sees its client gone: at its
	// next write, a keep-alive at the latest.
	deadline := time.Now().Add(time.Minute)
	for {
		res2, _ := h.openStream("/v1/streams/instances", readerSecret)
		if res2.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's place was not freed within a minute")
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
}
