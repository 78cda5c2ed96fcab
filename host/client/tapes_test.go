package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/tape"
)

// TestTapes walks the recorded attempts through the client: an
// instance's tapes, one tape by its step's id, its stored bytes, a
// replay of it against the recorded version and against a candidate,
// and shadow runs of the plugin. A reader may list tapes but not read or
// replay one, nor run a shadow run; an unknown tape and an unknown
// plugin are ErrNotFound; a key without its step is refused before any
// request.
func TestTapes(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	admin, reader := newClient(t, url, adminToken), newClient(t, url, readerToken)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kit := testplugins.Bytes(t, "kit")
	if _, _, err := admin.PutPlugin(ctx, "kit", kit); err != nil {
		t.Fatal(err)
	}
	if _, _, err := admin.PutWorkflow(ctx, "shout", []byte("name: shout\nrecord: all\nsteps:\n  - { id: up, activity: kit.upper, input: { text: \"${ input }\" } }\n")); err != nil {
		t.Fatal(err)
	}
	in, _, err := admin.Start(ctx, "shout", apiv1.StartRequest{ID: "shout-1", Input: []byte(`"ada"`)}, time.Minute)
	if err != nil || in.Status != apiv1.StatusCompleted {
		t.Fatalf("Start: %+v, %v", in, err)
	}

	tapes, err := reader.Tapes(ctx, "shout-1")
	if err != nil || len(tapes) != 1 || tapes[0].Activity != "upper" || tapes[0].Key.StepPath != "steps[0]" {
		t.Fatalf("Tapes: %+v, %v", tapes, err)
	}
	key := tapes[0].Key
	byID := apiv1.TapeKey{InstanceID: "shout-1", StepPath: "up", Attempt: 1}
	tp, err := admin.Tape(ctx, byID)
	if err != nil || tp.Key != key || !strings.Contains(string(tp.Output), "ADA") || tp.Entries == nil {
		t.Fatalf("Tape by the step's id: %+v, %v", tp, err)
	}
	env, err := admin.TapeEnvelope(ctx, key)
	if err != nil {
		t.Fatalf("TapeEnvelope: %v", err)
	}
	if a, err := tape.UnmarshalAttempt(env); err != nil || a.Activity != "upper" || a.PluginVersion != tapes[0].PluginVersion {
		t.Fatalf("TapeEnvelope: %d bytes that decode to %+v, %v", len(env), a, err)
	}
	r, err := admin.ReplayAttempt(ctx, key, nil)
	if err != nil || r.Outcome != "same" || r.ReplayedVersion != tapes[0].PluginVersion {
		t.Fatalf("ReplayAttempt: %+v, %v", r, err)
	}
	// A candidate whose activity returns no result fails where the
	// recording completed.
	r, err = admin.ReplayAttempt(ctx, byID, testplugins.Manifested(t, `{"activities":[{"name":"upper"}]}`))
	if err != nil || r.Outcome != "failed" || r.Failure == nil || r.ReplayedVersion == tapes[0].PluginVersion {
		t.Fatalf("ReplayAttempt of a candidate: %+v, %v", r, err)
	}

	rep, err := admin.Shadow(ctx, "kit", kit, client.ShadowQuery{Last: 10, Workflow: "shout", Since: time.Now().Add(-time.Hour)})
	if err != nil || rep.Query.Limit != 10 || rep.Query.Workflow != "shout" || len(rep.Attempts) != 1 || rep.Attempts[0].Key != key ||
		rep.Attempts[0].Outcome != "same" || rep.Summary.Outcomes["same"] != 1 {
		t.Fatalf("Shadow: %+v, %v", rep, err)
	}
	if rep, err := admin.Shadow(ctx, "kit", kit, client.ShadowQuery{Since: time.Now().Add(time.Hour)}); err != nil || len(rep.Attempts) != 0 || rep.Query.Limit != 100 {
		t.Fatalf("Shadow of no attempt: %+v, %v", rep, err)
	}

	if _, err := reader.Tape(ctx, key); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Tape as a reader: %v", err)
	}
	// Refused from the headers, before the body is read: a small one,
	// which the client has sent whole by then.
	if _, err := reader.Shadow(ctx, "kit", []byte("x"), client.ShadowQuery{}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("Shadow as a reader: %v", err)
	}
	if _, err := admin.TapeEnvelope(ctx, apiv1.TapeKey{InstanceID: "shout-1", StepPath: "up", Attempt: 2}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("TapeEnvelope of no tape: %v", err)
	}
	if _, err := admin.Shadow(ctx, "nobody", kit, client.ShadowQuery{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Shadow of no plugin: %v", err)
	}
	var ce *client.Error
	if _, err := admin.Shadow(ctx, "kit", nil, client.ShadowQuery{}); !errors.As(err, &ce) || !errors.Is(err, client.ErrInvalid) || !strings.Contains(ce.Detail, "candidate module is required") {
		t.Errorf("Shadow without a module: %v", err)
	}
	if _, err := admin.Tape(ctx, apiv1.TapeKey{InstanceID: "shout-1", Attempt: 1}); err == nil || errors.As(err, &ce) {
		t.Errorf("Tape without a step: %v, want an error of the client's", err)
	}
}
