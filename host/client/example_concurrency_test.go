package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/hosttest"
)

// Let one export run at a time per tenant, start two for one tenant, and
// read the tenant's key: the first holds its slot, the second waits in
// the key's line.
func ExampleClient_ConcurrencyKey() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "export", []byte(`
name: export
concurrency: { key: "${ input.tenant }", limit: 1 }
steps:
  - { id: done, wait: { event: export.done, key: "${ input.job }" } }
`)); err != nil {
		log.Fatal(err)
	}
	// The first suspends at its wait, holding its tenant's slot.
	first := apiv1.StartRequest{ID: "export-1", Input: json.RawMessage(`{"tenant": "acme", "job": "1"}`)}
	if _, _, err := c.StartUntil(ctx, "export", first, 30*time.Second, apiv1.UntilSuspended); err != nil {
		log.Fatal(err)
	}
	second := apiv1.StartRequest{ID: "export-2", Input: json.RawMessage(`{"tenant": "acme", "job": "2"}`)}
	if _, _, err := c.Start(ctx, "export", second, 0); err != nil {
		log.Fatal(err)
	}

	// The second joins the line as it is created, and is marked waiting
	// when it would start: wait for that.
	var in *apiv1.Instance
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := c.Instance(ctx, "export-2")
		if err == nil && got.Concurrency != nil && !got.Concurrency.WaitingSince.IsZero() {
			in = got
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("export-2 is not waiting after 30s: %+v, %v", got, err)
		}
	}
	line, err := c.ConcurrencyKey(ctx, "export", "acme", client.ListOptions{})
	if err != nil {
		log.Fatal(err)
	}
	k := line.Key
	fmt.Printf("%s %q: %d/%d running (%s), %d waiting (%s), policy %s\n",
		k.Workflow, k.Key, k.Running, k.Limit, k.Holders[0].InstanceID, k.Waiting, line.Waiting[0].InstanceID, k.Policy)
	fmt.Println(in.ID, in.Status, "waiting for a slot:", !in.Concurrency.WaitingSince.IsZero())
	// Output:
	// export "acme": 1/1 running (export-1), 1 waiting (export-2), policy queue
	// export-2 pending waiting for a slot: true
}
