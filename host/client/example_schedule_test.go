package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/weftworks/weft/internal/hosttest"
)

// Save a schedule that starts a workflow at 09:00 on weekdays in Berlin,
// read when it fires next, and pause it with a note.
func ExampleClient_PutSchedule() {
	c, stop := exampleClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	// A schedule starts a saved workflow, its latest version at each fire.
	if _, _, err := c.PutWorkflow(ctx, "report", []byte(`
name: report
steps:
  - { id: day, set: { day: "${ input.day }" } }
output: "${ vars.day }"
`)); err != nil {
		log.Fatal(err)
	}

	s, created, err := c.PutSchedule(ctx, "morning-report", []byte(`
id: morning-report
workflow: report
input:
  day: "${ schedule.time }"
spec:
  cron: "0 9 * * MON-FRI"
  time_zone: Europe/Berlin
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.ID, "starts", s.Workflow, "created", created)
	// Fire times are answered in UTC.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("next at", s.NextFires[0].In(berlin).Format("15:04"), "Berlin time, then", len(s.NextFires)-1, "more")

	s, err = c.PauseSchedule(ctx, "morning-report", "the warehouse is migrating")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("paused:", s.Paused, s.Note, "- next fires:", len(s.NextFires))
	// Output:
	// morning-report starts report created true
	// next at 09:00 Berlin time, then 9 more
	// paused: true the warehouse is migrating - next fires: 0
}
