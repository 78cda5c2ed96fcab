package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

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

// TestEventPayloadThatCannotBeDecoded: an event whose payload is JSON the
// instances cannot decode (a number out of float64's range) is refused
// before anything is stored, rather than left in the inbox of an
// instance that would never get past it.
func TestEventPayloadThatCannotBeDecoded(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx := context.Background()
	_, err := h.e.Signal(ctx, weft.Event{ID: "huge", Name: "order.approved", Key: "o-1", Payload: json.RawMessage(`{"n":1e400}`)})
	if !errors.Is(err, weft.ErrInvalid) || !strings.Contains(err.Error(), "huge") || !strings.Contains(err.Error(), "1e400") {
		t.Fatalf("signal with 1e400: %v, want ErrInvalid naming the event and the number", err)
	}
	if _, err := h.store.GetStimulus(ctx, "huge"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("the refused event was stored: %v", err)
	}
}

// TestOutputThatCannotBeDecoded: a guest's output that is valid JSON the
// engine cannot decode fails the attempt as a protocol error that says
// why, not with an empty cause.
func TestOutputThatCannotBeDecoded(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return answers{Plugins: p, out: []byte(`{"n":1e400}`)} }))
	h.save(`
name: huge
steps:
  - { id: echo, activity: kit.echo, input: 1, retry: { max_attempts: 1 } }
`)
	inst := h.finish("huge", nil)
	if inst.Status != weft.StatusFailed || inst.Error == nil || inst.Error.Code != "protocol" ||
		!strings.Contains(inst.Error.Message, "cannot be decoded") || !strings.Contains(inst.Error.Message, "1e400") || strings.Contains(inst.Error.Message, "<nil>") {
		t.Errorf("instance %s, error %+v; want failed with a protocol error naming the number", inst.Status, inst.Error)
	}
}
