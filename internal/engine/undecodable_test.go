package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins/call"
)

// answers is an engine.Plugins whose every call completes with out.
type answers struct {
	engine.Plugins
	out []byte
}

func (p answers) Invoke(context.Context, string, call.Call) ([]byte, error) { return p.out, nil }

// TestEventPayloadBeyondFloat64: an event whose payload holds a number
// beyond float64's range is taken, and its payload passes whole, as its
// bytes, into the variable of the wait that receives it and out as the
// instance's output. (Before payloads were kept as their bytes, the
// instance could not decode it; it was refused at ingress so as not to
// block an inbox.)
func TestEventPayloadBeyondFloat64(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save("name: huge\nsteps:\n  - { id: w, wait: { event: order.approved, key: o-1 }, output: w }\noutput: \"${ vars.w }\"\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, _, err := h.e.Start(ctx, "huge", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h.e.Wait(ctx, inst.ID); err != nil || got.Status != weft.StatusSuspended {
		t.Fatalf("instance %s is not suspended on its wait: %v", inst.ID, err)
	}
	if _, err := h.e.Signal(ctx, weft.Event{ID: "huge", Name: "order.approved", Key: "o-1", Payload: json.RawMessage(`{"n":1e400}`)}); err != nil {
		t.Fatalf("signal with 1e400: %v", err)
	}
	done, err := h.e.WaitFinished(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != weft.StatusCompleted || string(done.Output) != `{"n":1e400}` {
		t.Errorf("instance %s output %s error %+v; want completed with the payload whole", done.Status, done.Output, done.Error)
	}
}

// TestOutputBeyondFloat64: a guest's output holding a number beyond
// float64's range passes whole into its variable and out; an expression
// that computes on it fails, naming the variable and why.
func TestOutputBeyondFloat64(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return answers{Plugins: p, out: []byte(`{"n":1e400}`)} }))
	h.save(`
name: huge
steps:
  - { id: echo, activity: kit.echo, input: 1, output: out }
output: "${ vars.out }"
`)
	if inst := h.finish("huge", nil); inst.Status != weft.StatusCompleted || string(inst.Output) != `{"n":1e400}` {
		t.Errorf("instance %s output %s error %+v; want completed with the output whole", inst.Status, inst.Output, inst.Error)
	}
	h.save(`
name: computes
steps:
  - { id: echo, activity: kit.echo, input: 1, output: out }
output: "${ vars.out.n + 1 }"
`)
	inst := h.finish("computes", nil)
	if inst.Status != weft.StatusFailed || inst.Error == nil || !strings.Contains(inst.Error.Message, "vars.out") || !strings.Contains(inst.Error.Message, "1e400") {
		t.Errorf("instance %s, error %+v; want failed naming vars.out and the number", inst.Status, inst.Error)
	}
}

// TestOutputNotUTF8: a guest's output whose strings hold bytes that are
// not UTF-8 has them replaced with U+FFFD, as encoding/json did when it
// decoded every output.
func TestOutputNotUTF8(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return answers{Plugins: p, out: []byte("\"a\xffb\"")} }))
	h.save("name: latin\nsteps:\n  - { id: echo, activity: kit.echo, input: 1, output: out }\noutput: \"${ vars.out }\"\n")
	if inst := h.finish("latin", nil); inst.Status != weft.StatusCompleted || string(inst.Output) != "\"a\uFFFDb\"" {
		t.Errorf("instance %s output %q error %+v; want completed with U+FFFD", inst.Status, inst.Output, inst.Error)
	}
}
