package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/testplugins"
)

// awaitBatch polls a batch until done says so, up to a minute.
func awaitBatch(t *testing.T, c *client.Client, id string, done func(*apiv1.Batch) bool) *apiv1.Batch {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := c.Batch(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if done(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %s after a minute: %+v", id, b)
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
}

// TestClientBatch: a signal batch over a query, started with hold, waits
// with its count; confirmed, it sends the event to each instance, which
// completes with its payload; its items and the list of batches show it.
// A document's problems come back with their paths; a confirm of a
// finished batch is a conflict, and no batch is not found.
func TestClientBatch(t *testing.T) {
	t.Parallel()
	c := newClient(t, startHost(t), adminToken)
	ctx := context.Background()
	src := []byte("name: sig\nsteps:\n  - id: w\n    wait: { event: sig.go, key: \"${ input.k }\" }\n    output: got\noutput: \"${ vars.got }\"\n")
	if _, _, err := c.PutWorkflow(ctx, "sig", src); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		req := apiv1.StartRequest{ID: fmt.Sprintf("sig-%d", i), Input: json.RawMessage(fmt.Sprintf(`{"k":"k%d"}`, i))}
		if _, _, err := c.StartUntil(ctx, "sig", req, time.Minute, apiv1.UntilSuspended); err != nil {
			t.Fatal(err)
		}
	}
	b, err := c.StartBatch(ctx, apiv1.BatchRequest{Op: apiv1.BatchSignal, Query: `workflow = "sig"`, Reason: "release them", Hold: true,
		Args: &apiv1.BatchArgs{Event: "sig.go", Payload: json.RawMessage(`{"ok": true}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Op != apiv1.BatchSignal || b.Actor != "ci" || b.Args == nil || b.Args.Event != "sig.go" || string(b.Args.Payload) != `{"ok":true}` {
		t.Fatalf("started: %+v (args %+v)", b, b.Args)
	}
	b = awaitBatch(t, c, b.ID, func(b *apiv1.Batch) bool { return b.Phase == apiv1.PhaseSelected })
	if b.Matched != 2 {
		t.Fatalf("selected %d instances, want 2", b.Matched)
	}
	if _, err := c.ConfirmBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	b = awaitBatch(t, c, b.ID, func(b *apiv1.Batch) bool { return b.Phase.Finished() })
	if b.Phase != apiv1.PhaseDone || b.Counts[apiv1.ItemDone] != 2 {
		t.Fatalf("finished: %+v", b)
	}
	for i := range 2 {
		in, err := c.Await(ctx, fmt.Sprintf("sig-%d", i), time.Minute, apiv1.UntilEnded)
		if err != nil || in.Status != apiv1.StatusCompleted || string(in.Output) != `{"ok":true}` {
			t.Fatalf("sig-%d: %+v, %v; want completed with the batch's payload", i, in, err)
		}
	}
	items, err := c.BatchItems(ctx, b.ID, client.BatchItemFilter{Outcome: apiv1.ItemDone, Limit: 1})
	if err != nil || len(items.Items) != 1 || items.NextCursor != "1" {
		t.Fatalf("first item: %+v, %v", items, err)
	}
	if items, err = c.BatchItems(ctx, b.ID, client.BatchItemFilter{After: 1}); err != nil || len(items.Items) != 1 || items.Items[0].Seq != 2 {
		t.Fatalf("the items after 1: %+v, %v", items, err)
	}
	list, err := c.Batches(ctx, client.ListOptions{})
	if err != nil || !slices.ContainsFunc(list.Items, func(x apiv1.Batch) bool { return x.ID == b.ID }) {
		t.Fatalf("Batches: %+v, %v", list, err)
	}
	if _, err := c.ConfirmBatch(ctx, b.ID); !errors.Is(err, client.ErrConflict) {
		t.Errorf("confirm of a done batch: %v, want a conflict", err)
	}
	if got, err := c.CancelBatch(ctx, b.ID, "too late"); err != nil || got.Phase != apiv1.PhaseDone {
		t.Errorf("cancel of a done batch: %+v, %v; want it as it is", got, err)
	}
	if _, err := c.Batch(ctx, "b-nope"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Batch of none: %v", err)
	}

	_, err = c.StartBatch(ctx, apiv1.BatchRequest{Op: apiv1.BatchReset, IDs: []string{"a", "a"}})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrInvalid) || len(e.Errors) != 2 || e.Errors[0].Path != "ids[1]" || e.Errors[1].Path != "args.step" {
		t.Fatalf("a bad document: %v, want its problems at ids[1] and args.step", err)
	}
	held, err := c.StartBatch(ctx, apiv1.BatchRequest{Op: apiv1.BatchCancel, IDs: []string{"sig-0"}, Hold: true})
	if err != nil {
		t.Fatal(err)
	}
	if held, err = c.CancelBatch(ctx, held.ID, "changed my mind"); err != nil || held.Phase != apiv1.PhaseCancelled || held.Cancelled == nil || held.Cancelled.Reason != "changed my mind" {
		t.Fatalf("cancelled: %+v, %v", held, err)
	}
}

// TestClientResetMigrate: ResetPoints lists a completed instance's steps,
// Reset runs it again from one; PlanMigration says a failed instance can
// move, Migrate refuses one that cannot with the plan in its error, and
// moves the failed one, which completes on the new version.
func TestClientResetMigrate(t *testing.T) {
	t.Parallel()
	cfg := node.Config{NodeID: "client-test"}
	cfg.Engine.VarsLimit = 1 << 16
	c := newClient(t, hosttest.New(t, hosttest.Options{API: api.Config{Tokens: hosttest.Tokens()}, Node: cfg}).URL, adminToken)
	ctx := context.Background()
	if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	twice := []byte("name: twice\nsteps:\n  - id: one\n    set: { a: 1 }\n  - { id: x, activity: kit.echo, input: \"${ vars.a }\", output: xr }\noutput: \"${ vars.xr }\"\n")
	if _, _, err := c.PutWorkflow(ctx, "twice", twice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Start(ctx, "twice", apiv1.StartRequest{ID: "tw-1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	points, err := c.ResetPoints(ctx, "tw-1")
	if err != nil || len(points) != 2 || points[1].Step != "x" || !points[1].Vars {
		t.Fatalf("ResetPoints: %+v, %v", points, err)
	}
	if _, err := c.Reset(ctx, "tw-1", "x", "once more"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reset(ctx, "tw-1", "nope", ""); !errors.Is(err, client.ErrConflict) {
		t.Errorf("Reset to no such step: %v, want a conflict", err)
	}

	v1 := []byte("name: roll\nsteps:\n  - id: a\n    wait: { event: go, key: \"${ input.k }\" }\n  - { id: b, activity: kit.fail, input: { message: bad }, retry: { max_attempts: 1 } }\n")
	v2 := []byte("name: roll\nsteps:\n  - { id: b, activity: kit.echo, input: { message: fixed }, output: b }\noutput: \"${ vars.b.message }\"\n")
	if _, _, err := c.PutWorkflow(ctx, "roll", v1); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"f", "w"} {
		if _, _, err := c.StartUntil(ctx, "roll", apiv1.StartRequest{ID: "roll-" + k, Input: json.RawMessage(`{"k":"` + k + `"}`)}, time.Minute, apiv1.UntilSuspended); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.SendEvent(ctx, apiv1.EventRequest{Name: "go", Key: "f"}); err != nil {
		t.Fatal(err)
	}
	if in, err := c.Await(ctx, "roll-f", time.Minute, apiv1.UntilEnded); err != nil || in.Status != apiv1.StatusFailed {
		t.Fatalf("roll-f: %+v, %v; want failed at b", in, err)
	}
	if _, _, err := c.PutWorkflow(ctx, "roll", v2); err != nil {
		t.Fatal(err)
	}
	plan, err := c.PlanMigration(ctx, "roll-f", apiv1.MigrateRequest{})
	if err != nil || !plan.CanMove || plan.ToVersion != 2 {
		t.Fatalf("PlanMigration: %+v, %v", plan, err)
	}
	_, err = c.Migrate(ctx, "roll-w", apiv1.MigrateRequest{})
	var e *client.Error
	if !errors.As(err, &e) || !errors.Is(err, client.ErrConflict) || e.Migration == nil || e.Migration.CanMove || e.Migration.Problems[0].Step != "a" {
		t.Fatalf("Migrate of the waiting instance: %v, want a conflict with the plan naming a", err)
	}
	if _, err := c.Migrate(ctx, "roll-f", apiv1.MigrateRequest{Then: apiv1.ThenRetry, Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	// It was failed, and ended: wait for the migration and the retry.
	for deadline := time.Now().Add(time.Minute); ; {
		in, err := c.Instance(ctx, "roll-f")
		if err != nil {
			t.Fatal(err)
		}
		if in.Status == apiv1.StatusCompleted {
			// b had begun: it keeps the input it was given, and calls
			// the new version's activity with it.
			if in.Version != 2 || string(in.Output) != `"bad"` {
				t.Fatalf("the migrated instance: version %d, output %s", in.Version, in.Output)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the migrated instance is %s after a minute, want completed", in.Status)
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
}
