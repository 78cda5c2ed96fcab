package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// TestClientPauseResume: Pause pauses a suspended instance, whose Paused
// then says who paused it and why; Resume resumes it, and the event sent
// meanwhile, held, lets it complete. A resume of an instance that is not
// paused is a conflict; a pause of none, not found.
func TestClientPauseResume(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()
	src := []byte("name: held\nsteps:\n  - id: ok\n    wait: { event: held.ok, key: \"${ input.k }\" }\n    output: got\noutput: \"${ vars.got }\"\n")
	if _, _, err := c.PutWorkflow(ctx, "held", src); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.StartUntil(ctx, "held", apiv1.StartRequest{Input: json.RawMessage(`{"k":"a"}`), ID: "held-1"}, time.Minute, apiv1.UntilSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, "held-1", ""); !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), "not paused") {
		t.Fatalf("Resume of a suspended instance: %v, want a conflict saying it is not paused", err)
	}
	if _, err := c.Pause(ctx, "nope", ""); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("Pause of no instance: %v, want ErrNotFound", err)
	}
	if _, err := c.Pause(ctx, "held-1", "looking into it"); err != nil {
		t.Fatal(err)
	}
	var in *apiv1.Instance
	deadline := time.Now().Add(time.Minute)
	for {
		var err error
		if in, err = c.Instance(ctx, "held-1"); err != nil {
			t.Fatal(err)
		}
		if in.Status == apiv1.StatusPaused {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("held-1 is %s after a minute, want paused", in.Status)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
	if p := in.Paused; p == nil || p.Actor != "ci" || p.Reason != "looking into it" || p.Since.IsZero() {
		t.Fatalf("paused held-1 shows %+v, want ci's pause with its reason", in.Paused)
	}
	if _, err := c.SendEvent(ctx, apiv1.EventRequest{Name: "held.ok", Key: "a", Payload: json.RawMessage(`"yes"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resume(ctx, "held-1", "done looking"); err != nil {
		t.Fatal(err)
	}
	if in, err := c.Await(ctx, "held-1", time.Minute, apiv1.UntilEnded); err != nil || in.Status != apiv1.StatusCompleted || string(in.Output) != `"yes"` {
		t.Fatalf("after the resume: %+v, %v; want completed with the held event's payload", in, err)
	}
}
