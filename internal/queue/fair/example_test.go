package fair_test

import (
	"fmt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue/fair"
)

// Tenant a has a backlog and weight 2, tenant b a little work at the
// default weight, and one start of b carries priority 1: it goes first,
// then a and b take turns, a two pops per turn.
func Example() {
	var o fair.Order
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		o.Push(fair.Entry{ID: id, Key: "a", Weight: 2})
	}
	o.Push(fair.Entry{ID: "b1", Key: "b"})
	o.Push(fair.Entry{ID: "b2", Key: "b"})
	o.Push(fair.Entry{ID: "urgent", Key: "b", Priority: weft.HighestPriority})
	for l := range o.Lanes() {
		fmt.Printf("priority %d, key %s: %d queued\n", l.Priority, l.Key, l.Queued)
	}
	for e, ok := o.Pop(); ok; e, ok = o.Pop() {
		fmt.Print(e.ID, " ")
	}
	fmt.Println()
	// Output:
	// priority 1, key b: 1 queued
	// priority 3, key a: 5 queued
	// priority 3, key b: 2 queued
	// urgent a1 a2 b1 a3 a4 b2 a5
}
