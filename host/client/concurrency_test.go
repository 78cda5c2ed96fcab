package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestClientConcurrency reads a workflow's concurrency keys through the
// client: the list, of every workflow and of one, a key with its holder
// and its line a page at a time, and the errors of a key nobody holds
// and of a name no workflow could have.
func TestClientConcurrency(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()

	src := []byte("name: export\nconcurrency: { key: \"${ input.tenant }\", limit: 1 }\nsteps:\n  - { id: done, wait: { event: export.done, key: \"${ input.n }\" } }\n")
	if _, _, err := c.PutWorkflow(ctx, "export", src); err != nil {
		t.Fatal(err)
	}
	start := func(n string, wait time.Duration) {
		t.Helper()
		req := apiv1.StartRequest{ID: "export-" + n, Input: json.RawMessage(`{"tenant": "acme", "n": "` + n + `"}`)}
		if _, _, err := c.StartUntil(ctx, "export", req, wait, apiv1.UntilSuspended); err != nil {
			t.Fatal(err)
		}
	}
	// One holds the slot (it suspends at its wait), then two wait for
	// one, in the order they came.
	start("1", 30*time.Second)
	for i, n := range []string{"2", "3"} {
		start(n, 0)
		awaitLine(t, c, "export", "acme", func(l *apiv1.ConcurrencyLine) bool {
			return len(l.Key.Holders) == 1 && l.Key.Waiting == i+1
		})
	}

	page, err := c.ConcurrencyKeys(ctx, "", client.ListOptions{})
	if err != nil || len(page.Items) != 1 || page.NextCursor != "" {
		t.Fatalf("ConcurrencyKeys: %+v, %v", page, err)
	}
	k := page.Items[0]
	if k.Workflow != "export" || k.Key != "acme" || k.Limit != 1 || k.Policy != apiv1.PolicyQueue || k.Running != 1 || k.Waiting != 2 ||
		k.Holders[0].InstanceID != "export-1" || k.OldestWait.IsZero() {
		t.Errorf("ConcurrencyKeys' key: %+v", k)
	}
	if page, err := c.ConcurrencyKeys(ctx, "other", client.ListOptions{Limit: 10}); err != nil || len(page.Items) != 0 {
		t.Errorf("ConcurrencyKeys of another workflow: %+v, %v", page, err)
	}

	var line []string
	opts := client.ListOptions{Limit: 1}
	for {
		l, err := c.ConcurrencyKey(ctx, "export", "acme", opts)
		if err != nil {
			t.Fatalf("ConcurrencyKey: %v", err)
		}
		for _, w := range l.Waiting {
			line = append(line, w.InstanceID)
		}
		if l.NextCursor == "" {
			break
		}
		opts.Cursor = l.NextCursor
	}
	if !slices.Equal(line, []string{"export-2", "export-3"}) {
		t.Errorf("the line, a waiter a page: %q, want export-2 then export-3", line)
	}
	in, err := c.Instance(ctx, "export-3")
	if err != nil || in.Concurrency == nil || in.Concurrency.Key != "acme" || in.Concurrency.WaitingSince.IsZero() {
		t.Errorf("Instance of a waiter: %+v, %v", in, err)
	}

	if _, err := c.ConcurrencyKey(ctx, "export", "", client.ListOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ConcurrencyKey of the key nobody holds: %v, want ErrNotFound", err)
	}
	var e *client.Error
	if _, err := c.ConcurrencyKeys(ctx, "Not/A Name", client.ListOptions{}); !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Errors[0].Path != "workflow" {
		t.Errorf("ConcurrencyKeys of a malformed name: %v", err)
	}
	if _, err := c.ConcurrencyKey(ctx, "Not/A Name", "acme", client.ListOptions{}); !errors.As(err, &e) || e.Status != 400 || e.Errors[0].Path != "workflow" {
		t.Errorf("ConcurrencyKey of a malformed name: %v", err)
	}
}

// awaitLine polls a concurrency key until done says it is as wanted, and
// fails the test after 30 seconds.
func awaitLine(t *testing.T, c *client.Client, workflow, key string, done func(*apiv1.ConcurrencyLine) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := c.ConcurrencyKey(context.Background(), workflow, key, client.ListOptions{})
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("ConcurrencyKey %s %q: %v", workflow, key, err)
		}
		if err == nil && done(l) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("concurrency key %q of %s is not as wanted after 30s: %+v, %v", key, workflow, l, err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}

// TestClientStepConcurrency reads a key of the activity steps'
// concurrency limits through the client: an instance's attempt holds its
// one slot (it sleeps), the next two instances' attempts wait in its
// line, shown as their instances, a page at a time; a key nobody holds is
// ErrNotFound, an empty one ErrInvalid naming key.
func TestClientStepConcurrency(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()
	if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	src := []byte("name: sync\nsteps:\n  - id: call\n    activity: kit.sleep\n    input: { ms: 600000 }\n    timeout: 15m\n    concurrency: { key: partner-api, limit: 1 }\n")
	if _, _, err := c.PutWorkflow(ctx, "sync", src); err != nil {
		t.Fatal(err)
	}
	// One at a time, so that the line's order is theirs.
	for i, id := range []string{"sync-1", "sync-2", "sync-3"} {
		if _, _, err := c.Start(ctx, "sync", apiv1.StartRequest{ID: id}, 0); err != nil {
			t.Fatal(err)
		}
		awaitStepLine(t, c, "partner-api", func(l *apiv1.ConcurrencyLine) bool {
			return len(l.Key.Holders) == 1 && l.Key.Waiting == i
		})
	}

	var line []string
	opts := client.ListOptions{Limit: 1}
	for {
		l, err := c.StepConcurrencyKey(ctx, "partner-api", opts)
		if err != nil {
			t.Fatalf("StepConcurrencyKey: %v", err)
		}
		k := l.Key
		if !k.Step || k.Workflow != "" || k.Key != "partner-api" || k.Limit != 1 || k.Running != 1 || k.Holders[0].InstanceID != "sync-1" || k.OldestWait.IsZero() {
			t.Fatalf("StepConcurrencyKey's key: %+v", k)
		}
		for _, w := range l.Waiting {
			line = append(line, w.InstanceID)
		}
		if l.NextCursor == "" {
			break
		}
		opts.Cursor = l.NextCursor
	}
	if !slices.Equal(line, []string{"sync-2", "sync-3"}) {
		t.Errorf("the step key's line, a waiter a page: %q, want sync-2 then sync-3", line)
	}

	if _, err := c.StepConcurrencyKey(ctx, "other", client.ListOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("StepConcurrencyKey of a key nobody holds: %v, want ErrNotFound", err)
	}
	var e *client.Error
	if _, err := c.StepConcurrencyKey(ctx, "", client.ListOptions{}); !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Errors[0].Path != "key" {
		t.Errorf("StepConcurrencyKey of the empty key: %v, want ErrInvalid naming key", err)
	}
}

// awaitStepLine polls a step concurrency key until done says it is as
// wanted, and fails the test after 30 seconds.
func awaitStepLine(t *testing.T, c *client.Client, key string, done func(*apiv1.ConcurrencyLine) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := c.StepConcurrencyKey(context.Background(), key, client.ListOptions{})
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("StepConcurrencyKey %q: %v", key, err)
		}
		if err == nil && done(l) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("step concurrency key %q is not as wanted after 30s: %+v, %v", key, l, err)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
