package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/hosttest"
)

// Record every attempt of a workflow, replay one, then try a candidate
// build of the plugin over all of them before uploading it: a shadow run
// says, per recorded attempt, whether the candidate would have answered
// the same. Here the candidate is the version that recorded them, so it
// does; PutPlugin with the candidate's bytes would promote it.
func ExampleClient_Shadow() {
	c, stop := examplePluginClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	kit := examplePlugin("kit")
	if _, _, err := c.PutPlugin(ctx, "kit", kit); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.PutWorkflow(ctx, "shout", []byte(`
name: shout
record: all
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input }" } }
`)); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"ada", "grace"} {
		if _, _, err := c.Start(ctx, "shout", apiv1.StartRequest{ID: "shout-" + name, Input: []byte(`"` + name + `"`)}, time.Minute); err != nil {
			log.Fatal(err)
		}
	}

	tapes, err := c.Tapes(ctx, "shout-ada")
	if err != nil {
		log.Fatal(err)
	}
	// A tape's step may be named by its path, as listed, or its id.
	r, err := c.ReplayAttempt(ctx, apiv1.TapeKey{InstanceID: "shout-ada", StepPath: "up", Attempt: 1}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s attempt %d of %s.%s replays: %s\n", tapes[0].Key.StepPath, tapes[0].Key.Attempt, tapes[0].Plugin, tapes[0].Activity, r.Outcome)

	rep, err := c.Shadow(ctx, "kit", kit, client.ShadowQuery{Last: 10, Workflow: "shout"})
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range rep.Attempts {
		fmt.Printf("%s: %s, %s\n", a.Key.InstanceID, a.Outcome, a.Speed)
	}
	fmt.Printf("%d attempts, %d the same\n", rep.Summary.Attempts, rep.Summary.Outcomes["same"])
	// Output:
	// steps[0] attempt 1 of kit.upper replays: same
	// shout-grace: same, alike
	// shout-ada: same, alike
	// 2 attempts, 2 the same
}
