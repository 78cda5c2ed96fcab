package heartbeat_test

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/plugins/call"
)

// *call.Heartbeat, the record the guest's heartbeat call writes, is a
// Pulse as it is.
var _ heartbeat.Pulse = (*call.Heartbeat)(nil)

// The core is driven step by step: Tick with the time, renew the batch
// (here pretend), Report the outcomes, act on the actions.
func Example() {
	s, _ := heartbeat.New(heartbeat.Config{}) // tick 100ms, cycle 2s
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hb := call.NewHeartbeat(start)
	s.Track(heartbeat.Item{ID: "attempt:order-1/charge/1", Kind: heartbeat.Activity,
		TTL: 8 * time.Second, HeartbeatTimeout: 5 * time.Second, Pulse: hb})
	s.Track(heartbeat.Item{ID: "instance:order-1", Kind: heartbeat.InstanceLease, TTL: 8 * time.Second})

	r := s.Tick(start)
	for _, rn := range r.Renew {
		fmt.Println("renew", rn.ID)
	}
	s.Report(r.Seq, []heartbeat.Outcome{heartbeat.OK, heartbeat.OK})

	// The guest never beats; a few cycles later it is timed out.
	for at := start; at.Before(start.Add(8 * time.Second)); at = at.Add(100 * time.Millisecond) {
		r := s.Tick(at)
		for _, a := range r.Actions {
			fmt.Println(at.Sub(start), a)
		}
		s.Report(r.Seq, []heartbeat.Outcome{heartbeat.OK, heartbeat.OK})
	}
	// Output:
	// renew attempt:order-1/charge/1
	// renew instance:order-1
	// 6s heartbeat-timeout attempt:order-1/charge/1 details=""
}
