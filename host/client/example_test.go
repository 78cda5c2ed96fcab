package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/hosttest"
)

// exampleHost starts the host an example talks to: a real node and API
// on a free loopback port, with an admin token (hosttest.AdminToken) and
// a reader token (hosttest.ReaderToken). A program dials its own host
// instead, such as http://127.0.0.1:8080.
func exampleHost() *hosttest.Host {
	h, err := hosttest.Start(hosttest.Options{API: api.Config{Tokens: hosttest.Tokens()}})
	if err != nil {
		log.Fatal(err)
	}
	return h
}

// exampleClient starts a host (exampleHost) and returns a client of it
// with token, as ExampleNew makes one, and what stops the host.
func exampleClient(token string) (c *client.Client, stop func()) {
	h := exampleHost()
	c, err := client.New(client.Config{Server: h.URL, Token: token})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() { _ = h.Close() }
}

// Make a client of a host, with the bearer token to send.
func ExampleNew() {
	h := exampleHost()
	defer h.Close()

	c, err := client.New(client.Config{Server: h.URL, Token: hosttest.ReaderToken})
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Ready(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	// Output: ready
}

// Save a workflow, start an instance of it and wait for it to end, in one
// call: Start with a wait answers when the instance has ended (or when
// the wait runs out).
func ExampleClient_Start() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()

	// A workflow of set steps only, which needs no plugin.
	w, _, err := c.PutWorkflow(ctx, "greet", []byte(`
name: greet
steps:
  - id: hello
    set: { greeting: "Hello, ${ input.name }!" }
output: "${ vars.greeting }"
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("saved", w.Name, "version", w.Version)

	in, created, err := c.Start(ctx, "greet", apiv1.StartRequest{
		ID:    "greet-1",
		Input: json.RawMessage(`{"name": "Ada"}`),
	}, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.ID, created, in.Status, string(in.Output))
	// Output:
	// saved greet version 1
	// greet-1 true completed "Hello, Ada!"
}

// Start an instance ahead of the ready queue: a start's Priority (1,
// served first, to 5) goes before the one the workflow's definition
// computes, and 0 leaves the definition's. The fairness key, a lane in
// which a tenant's instances take turns with other tenants', is always
// the definition's.
func ExampleClient_Start_priority() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "export", []byte(`
name: export
priority: "${ input.plan == 'pro' ? 2 : 4 }"
fairness: { key: "${ input.tenant }" }
steps:
  - { id: mark, set: { done: true } }
`)); err != nil {
		log.Fatal(err)
	}

	for _, req := range []apiv1.StartRequest{
		{ID: "export-free", Input: json.RawMessage(`{"plan": "free", "tenant": "acme"}`)},
		{ID: "export-urgent", Input: json.RawMessage(`{"plan": "free", "tenant": "acme"}`), Priority: 1},
	} {
		in, _, err := c.Start(ctx, "export", req, 0)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(in.ID, "priority", in.Priority, "lane", in.FairnessKey)
	}

	// Out of 1 to 5, the start is refused, naming the field.
	_, _, err := c.Start(ctx, "export", apiv1.StartRequest{Priority: 9}, 0)
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(errors.Is(err, client.ErrInvalid), e.Errors[0].Path)
	}
	// Output:
	// export-free priority 4 lane acme
	// export-urgent priority 1 lane acme
	// true priority
}

// List instances, a page at a time, oldest first.
func ExampleClient_Instances() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "double", []byte(`
name: double
steps:
  - { id: twice, set: { n: "${ input.n * 2 }" } }
output: "${ vars.n }"
`)); err != nil {
		log.Fatal(err)
	}
	for n := 1; n <= 3; n++ {
		req := apiv1.StartRequest{ID: fmt.Sprintf("double-%d", n), Input: json.RawMessage(fmt.Sprintf(`{"n": %d}`, n))}
		if _, _, err := c.Start(ctx, "double", req, 30*time.Second); err != nil {
			log.Fatal(err)
		}
	}

	f := client.InstanceFilter{Workflow: "double", Oldest: true, ListOptions: client.ListOptions{Limit: 2}}
	for {
		page, err := c.Instances(ctx, f)
		if err != nil {
			log.Fatal(err)
		}
		for _, in := range page.Items {
			fmt.Println(in.ID, in.Status, string(in.Output))
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	// Output:
	// double-1 completed 2
	// double-2 completed 4
	// double-3 completed 6
}

// Send an event to an instance that waits for it: the event's name and
// correlation key are those of the wait step, and its payload is the
// step's result.
func ExampleClient_SendEvent() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "approval", []byte(`
name: approval
steps:
  - id: review
    wait: { event: order.approved, key: "${ input.order }" }
    output: decision
output: "approved by ${ vars.decision.by }"
`)); err != nil {
		log.Fatal(err)
	}

	// Wait until the instance suspends on its wait step.
	in, _, err := c.StartUntil(ctx, "approval", apiv1.StartRequest{ID: "approval-7", Input: json.RawMessage(`{"order": "7"}`)},
		30*time.Second, apiv1.UntilSuspended)
	if err != nil {
		log.Fatal(err)
	}
	b := in.WaitingOn.Bookmarks[0]
	fmt.Println(in.ID, in.Status, "on", b.Event, b.Key)

	res, err := c.SendEvent(ctx, apiv1.EventRequest{Name: "order.approved", Key: "7", Payload: json.RawMessage(`{"by": "ops"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("resumed", res.Resumed)

	if in, err = c.Await(ctx, "approval-7", 30*time.Second, apiv1.UntilEnded); err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.ID, in.Status, string(in.Output))
	// Output:
	// approval-7 suspended on order.approved 7
	// resumed [approval-7]
	// approval-7 completed "approved by ops"
}

// An error answer is an *Error, which errors.Is matches against the
// sentinel of its status and errors.As finds with the server's problem
// document.
func ExampleError() {
	c, stop := exampleClient(hosttest.ReaderToken)
	defer stop()
	ctx := context.Background()

	_, err := c.Instance(ctx, "order-404")
	fmt.Println(errors.Is(err, client.ErrNotFound))
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status, e.Detail)
	}

	// A reader's token may read, not write.
	_, _, err = c.PutWorkflow(ctx, "x", []byte("name: x\nsteps: [{id: s, set: {x: 1}}]\n"))
	fmt.Println(errors.Is(err, client.ErrForbidden))
	fmt.Println(err)
	// Output:
	// true
	// 404 no instance "order-404"
	// true
	// 403 Forbidden: token "dash" has role reader; this route needs admin
}
