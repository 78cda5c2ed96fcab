package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestServeRetention: `weft serve` with a short engine.retention deletes a
// finished instance once it has passed, after which the instance answers
// 404; an instance of a workflow with retention 0 stays.
func TestServeRetention(t *testing.T) {
	t.Parallel()
	bin := buildWeft(t)
	p := startProcess(t, bin, "--data-dir", t.TempDir(), "--set", "plugins.cache_dir="+testplugins.CacheDir(t),
		"--set", "engine.retention=1s", "--set", "engine.retention_interval=50ms")
	c, err := client.New(client.Config{Server: "http://" + p.addr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, src := range map[string]string{
		"quick": "name: quick\nsteps: [{id: a, set: {x: 1}}]\n",
		"kept":  "name: kept\nretention: 0\nsteps: [{id: a, set: {x: 1}}]\n",
	} {
		if _, _, err := c.PutWorkflow(ctx, name, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	quick, _, err := c.Start(ctx, "quick", apiv1.StartRequest{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if quick.Status != apiv1.StatusCompleted || quick.DeleteAfter.IsZero() {
		t.Fatalf("quick = %s, delete_after %s; want completed, to be deleted", quick.Status, quick.DeleteAfter)
	}
	kept, _, err := c.Start(ctx, "kept", apiv1.StartRequest{}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if kept.Status != apiv1.StatusCompleted || !kept.DeleteAfter.IsZero() {
		t.Fatalf("kept = %s, delete_after %s; want completed, kept forever", kept.Status, kept.DeleteAfter)
	}

	if m := p.waitLog(t, "deleted finished instances past their retention"); m["count"] != float64(1) {
		t.Errorf("the sweep logged %v, want a count of 1", m)
	}
	if _, err := c.Instance(ctx, quick.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("quick after its retention: %v, want 404", err)
	}
	if _, err := c.History(ctx, quick.ID, client.ListOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("quick's history after its retention: %v, want 404", err)
	}
	if _, err := c.Instance(ctx, kept.ID); err != nil {
		t.Errorf("kept: %v, want it kept", err)
	}
}
