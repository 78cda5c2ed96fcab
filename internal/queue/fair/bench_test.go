package fair_test

import (
	"strconv"
	"testing"

	"github.com/weftworks/weft/internal/queue/fair"
)

// BenchmarkOrder measures the order's CPU and allocations per operation
// with 100,000 queued entries spread over 1, 100 and 10,000 keys (weights
// 1 to 3, at the default priority, where every pop is served): pop+push
// pops the next entry and pushes it back (the steady state of a busy
// queue, each key keeping its backlog); remove+push removes an entry from
// the middle of the order and pushes it back.
//
//	go test -run '^$' -bench BenchmarkOrder -benchmem ./internal/queue/fair
func BenchmarkOrder(b *testing.B) {
	const queued = 100_000
	for _, keys := range []int{1, 100, 10_000} {
		entries := make([]fair.Entry, queued)
		for i := range entries {
			k := i % keys
			entries[i] = fair.Entry{ID: "instance-" + strconv.Itoa(i), Key: "tenant-" + strconv.Itoa(k), Weight: 1 + k%3, At: epoch}
		}
		fill := func(b *testing.B) *fair.Order {
			var o fair.Order
			for _, e := range entries {
				o.Push(e)
			}
			return &o
		}
		b.Run("keys="+strconv.Itoa(keys)+"/pop+push", func(b *testing.B) {
			o := fill(b)
			b.ReportAllocs()
			for b.Loop() {
				e, _ := o.Pop()
				o.Push(e)
			}
		})
		b.Run("keys="+strconv.Itoa(keys)+"/remove+push", func(b *testing.B) {
			o := fill(b)
			b.ReportAllocs()
			// A stride coprime with the count visits the entries in an
			// order unrelated to their places in the lanes.
			i := 0
			for b.Loop() {
				e, _ := o.Remove(entries[i].ID)
				o.Push(e)
				i = (i + 7919) % queued
			}
		})
	}
}
