package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins/call"
)

// The payload survival tests (issue 40): what becomes of a document that a
// definition passes whole ("${ input }", "${ vars.x }") on each way it can
// travel through an instance and back out as its output.

// The paths a payload takes, each a workflow of payloadWorkflows but the
// first.
const (
	// pathGuest is the activity's input as the guest got it.
	pathGuest = "guest"
	// pathActivity is the instance's input through an activity (kit.echo)
	// into a variable, and the variable as the output.
	pathActivity = "activity"
	// pathSet is the input into a variable by a set step, and the
	// variable as the output.
	pathSet = "set"
	// pathChild is the input as a child workflow's input, the child's
	// output (pathSet's) into a variable, and the variable as the output.
	pathChild = "child"
	// pathWait is an event's payload as a wait step's output into a
	// variable, and the variable as the output.
	pathWait = "wait"
)

// payloadWorkflows are the definitions of the paths.
var payloadWorkflows = map[string]string{
	pathActivity: "name: byactivity\nsteps:\n  - { id: a, activity: kit.echo, input: \"${ input }\", output: a }\noutput: \"${ vars.a }\"\n",
	pathSet:      "name: byset\nsteps:\n  - { id: s, set: { x: \"${ input }\" } }\noutput: \"${ vars.x }\"\n",
	pathChild:    "name: bychild\nsteps:\n  - { id: c, workflow: byset, input: \"${ input }\", output: c }\noutput: \"${ vars.c }\"\n",
	pathWait:     "name: bywait\nsteps:\n  - { id: w, wait: { event: payload, key: \"${ input.k }\" }, output: w }\noutput: \"${ vars.w }\"\n",
}

// payloadSpy keeps the input each instance's attempt sent the guest.
type payloadSpy struct {
	inner engine.Plugins
	mu    sync.Mutex
	in    map[string][]byte
}

// Invoke keeps c's input and calls the runtime.
func (s *payloadSpy) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	s.mu.Lock()
	s.in[c.Info.InstanceID] = bytes.Clone(c.Input)
	s.mu.Unlock()
	return s.inner.Invoke(ctx, version, c)
}

// input is what the guest got from instance id's attempt; nil if none.
func (s *payloadSpy) input(id string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.in[id]
}

// payloadTrip is what became of a payload on one path: the bytes that
// came back, or, when none did, why.
type payloadTrip struct {
	got    []byte
	failed string
}

func (p payloadTrip) String() string {
	if p.failed != "" {
		return "no bytes (" + p.failed + ")"
	}
	return showPayload(p.got)
}

// showPayload quotes b, cut short when long.
func showPayload(b []byte) string {
	if len(b) > 80 {
		return fmt.Sprintf("%q…(%d bytes)", b[:80], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// payloadHost is a host with the paths' workflows saved, its attempts
// watched by spy, and the engine as the host configures the data path
// (payloadEngineConfig).
func payloadHost(t *testing.T) (*host, *payloadSpy) {
	spy := &payloadSpy{in: map[string][]byte{}}
	cfg := payloadEngineConfig()
	cfg.TimerInterval = 10 * time.Millisecond
	h := newHost(t, withConfig(cfg), withPluginsWrapped(func(p engine.Plugins) engine.Plugins { spy.inner = p; return spy }))
	for _, p := range []string{pathSet, pathActivity, pathChild, pathWait} {
		h.save(payloadWorkflows[p])
	}
	return h, spy
}

// payloadTrips sends in along every path of h (the wait's only when wait
// is set: an event has no empty payload) and returns what came back on
// each; key tells this payload's wait and event from the others'.
func payloadTrips(t *testing.T, h *host, spy *payloadSpy, key string, in []byte, wait bool) map[string]payloadTrip {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids := map[string]string{}
	for _, p := range []string{pathActivity, pathSet, pathChild} {
		inst, _, err := h.e.Start(ctx, "by"+p, in, "")
		if err != nil {
			t.Fatalf("starting by%s on %s: %v", p, showPayload(in), err)
		}
		ids[p] = inst.ID
	}
	if wait {
		inst, _, err := h.e.Start(ctx, "bywait", json.RawMessage(`{"k":"`+key+`"}`), "")
		if err != nil {
			t.Fatalf("starting bywait for %s: %v", key, err)
		}
		ids[pathWait] = inst.ID
		if got, err := h.e.Wait(ctx, inst.ID); err != nil || got.Status != weft.StatusSuspended {
			t.Fatalf("instance %s (bywait %s) is not suspended on its wait: %v", inst.ID, key, err)
		}
		if _, err := h.e.Signal(ctx, weft.Event{ID: key, Name: "payload", Key: key, Payload: json.RawMessage(in)}); err != nil {
			t.Fatalf("signalling payload %s to %s with %s: %v", key, inst.ID, showPayload(in), err)
		}
	}
	trips := map[string]payloadTrip{}
	for p, id := range ids {
		done, err := h.e.WaitFinished(ctx, id)
		if err != nil {
			t.Fatalf("waiting for instance %s (by%s) on %s: %v", id, p, showPayload(in), err)
		}
		switch {
		case done.Status == weft.StatusCompleted:
			trips[p] = payloadTrip{got: done.Output}
		case done.Error != nil:
			trips[p] = payloadTrip{failed: string(done.Status) + ": " + done.Error.Message}
		default:
			trips[p] = payloadTrip{failed: string(done.Status)}
		}
	}
	if got := spy.input(ids[pathActivity]); got != nil {
		trips[pathGuest] = payloadTrip{got: got}
	} else {
		trips[pathGuest] = payloadTrip{failed: "not invoked"}
	}
	return trips
}

// TestPayloadSurvives: the payloads that reach the guest and come back,
// through every path, byte for byte: a definition that passes a document
// whole passes its bytes (issue 40), escapes, number forms, member order
// and duplicate names included. An empty input is the JSON null, and an
// event cannot carry it (no wait).
func TestPayloadSurvives(t *testing.T) {
	h, spy := payloadHost(t)
	for i, c := range []struct {
		name string
		in   string
	}{
		{"empty input", ""},
		{"null", `null`},
		{"empty string", `""`},
		{"empty object", `{}`},
		{"array nested 1000 deep", strings.Repeat("[", 1000) + strings.Repeat("]", 1000)},
		{"object nested 1000 deep", strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000)},
		{"non-ASCII", `"héllo wörld 日本語 🎉"`},
		{"smallest subnormal", `5e-324`},
		{"negative zero", `-0`},
		{"0.1", `0.1`},
		{"1 MiB string", `"` + strings.Repeat("x", 1<<20-2) + `"`},
		{"escapes", `"\u0000 \" \\ \/ \b \f \n \r \t \u2028"`},
		{"escaped non-ASCII", `"\u00e9"`},
		{"largest float64", `1.7976931348623157e308`},
		{"beyond float64", `1e400`},
		{"big integer", `12345678901234567890123`},
		{"2^53+1", `9007199254740993`},
		{"1.0", `1.0`},
		{"1E2", `1E2`},
		{"member order", `{"b":1,"a":2}`},
		{"duplicate names", `{"a":1,"a":2}`},
		{"HTML characters", `"<a href=\"x\">&amp;</a>"`},
		{"raw U+2028", "\"a\u2028b\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := []byte(c.in)
			if c.in == "" {
				want = []byte("null")
			}
			trips := payloadTrips(t, h, spy, "s"+strconv.Itoa(i), []byte(c.in), c.in != "")
			for _, p := range []string{pathGuest, pathActivity, pathSet, pathChild, pathWait} {
				got, ok := trips[p]
				if !ok {
					continue
				}
				if got.failed != "" || !bytes.Equal(got.got, want) {
					t.Errorf("%s by %s: got %v, want %s unchanged", c.name, p, got, showPayload(want))
				}
			}
		})
	}
}

// TestPayloadChanged: the payloads that do not come back as they went in,
// and what each becomes, the same on every path. By design: whitespace
// between tokens is dropped where a payload enters (the stores keep JSON
// compacted), and bytes that are not UTF-8 become U+FFFD (JSON is UTF-8).
func TestPayloadChanged(t *testing.T) {
	h, spy := payloadHost(t)
	for i, c := range []struct {
		// becomes is what in comes back as on every path.
		name, in, becomes string
	}{
		{name: "invalid UTF-8", in: "\"a\xffb\"", becomes: "\"a\ufffdb\""},
		{name: "whitespace", in: `{ "b" : 1 , "a" : [ 1 , 2 ] }`, becomes: `{"b":1,"a":[1,2]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			trips := payloadTrips(t, h, spy, "c"+strconv.Itoa(i), []byte(c.in), true)
			for _, p := range []string{pathGuest, pathActivity, pathSet, pathChild, pathWait} {
				if got, ok := trips[p]; ok && (got.failed != "" || string(got.got) != c.becomes) {
					t.Errorf("%s by %s: got %v, want %s", c.name, p, got, showPayload([]byte(c.becomes)))
				}
			}
		})
	}
}
