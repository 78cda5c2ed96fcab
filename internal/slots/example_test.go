package slots_test

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/internal/slots"
)

// One slot for customer-42: the second instance waits, and gets the slot
// when the first releases it.
func Example() {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := slots.Params{Limit: 1, Lease: 30 * time.Second}
	st := slots.State{Key: "customer-42"}

	st, d, _ := slots.Acquire(st, "i-1", p, now)
	fmt.Println("i-1", d.Outcome, "until", d.Expiry.Format(time.TimeOnly))
	st, d, _ = slots.Acquire(st, "i-2", p, now.Add(time.Second))
	fmt.Println("i-2", d.Outcome)
	st, d, _ = slots.Release(st, "i-1", p, now.Add(5*time.Second))
	fmt.Println("i-1", d.Outcome, "; wake", d.Promoted[0].ID, "until", d.Promoted[0].Expiry.Format(time.TimeOnly))
	s := st.Stats()
	fmt.Println("running", s.Running, "waiting", s.Waiting)
	// Output:
	// i-1 granted until 12:00:30
	// i-2 waiting
	// i-1 released ; wake i-2 until 12:00:35
	// running 1 waiting 0
}

// Only the latest matters: each newcomer cancels the older ones, and a
// holder being cancelled keeps its slot until it releases it.
func ExampleAcquire_cancelOldest() {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	p := slots.Params{Limit: 1, Policy: slots.CancelOldest, Lease: time.Minute}
	st := slots.State{Key: "deploy-main"}
	for i, id := range []string{"build-1", "build-2", "build-3"} {
		var d slots.Decision
		st, d, _ = slots.Acquire(st, id, p, now.Add(time.Duration(i)*time.Second))
		fmt.Println(id, d.Outcome, "cancel", d.Cancel)
	}
	_, d, _ := slots.Release(st, "build-1", p, now.Add(10*time.Second))
	fmt.Println("build-1", d.Outcome, "; wake", d.Promoted[0].ID)
	// Output:
	// build-1 granted cancel []
	// build-2 waiting cancel [{build-1 true}]
	// build-3 waiting cancel [{build-2 false}]
	// build-1 released ; wake build-3
}
