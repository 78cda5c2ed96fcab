package fair_test

import (
	"strconv"
	"testing"

	"github.com/weftworks/weft/internal/queue/fair"
)

// TestSteadyStateAllocatesNothing: once the order has held as many entries
// and keys as it holds now, a pop and a push reuse the freed slots, and
// reading every lane allocates nothing (package doc, "Costs").
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	var o fair.Order
	for i := range 1000 {
		o.Push(fair.Entry{ID: "i" + strconv.Itoa(i), Key: "k" + strconv.Itoa(i%10), Priority: 1 + i%5, Weight: 1 + i%3})
	}
	if n := testing.AllocsPerRun(1000, func() {
		e, _ := o.Pop()
		o.Push(e)
	}); n != 0 {
		t.Errorf("a pop and a push allocate %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		for l := range o.Lanes() {
			_ = l
		}
	}); n != 0 {
		t.Errorf("Lanes allocates %v times", n)
	}
}
