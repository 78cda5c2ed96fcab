package queue_test

import (
	"fmt"
	"testing"

	"github.com/weftworks/weft/internal/queue"
)

func TestFairShare(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ capacity, want int }{
		{1, 1}, {8, 1}, {199, 1}, {200, 2}, {1024, 10}, {10_000, 100}, {10_099, 100},
	} {
		if got := queue.FairShare(tt.capacity); got != tt.want {
			t.Errorf("FairShare(%d) = %d, want %d", tt.capacity, got, tt.want)
		}
	}
}

func TestAdmits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		capacity, queued, lane int
		want                   bool
	}{
		{"room", 10_000, 9_999, 9_999, true},
		{"full, lane at its share", 10_000, 10_000, 100, false},
		{"full, lane below its share", 10_000, 10_000, 99, true},
		{"full, new lane", 10_000, 10_000, 0, true},
		{"short lane below 2×C", 10_000, 19_999, 0, true},
		{"short lane at 2×C", 10_000, 20_000, 0, false},
		{"long lane at 2×C", 10_000, 20_000, 5_000, false},
		{"capacity 1, full, new lane", 1, 1, 0, true},
		{"capacity 1, full, lane of 1", 1, 1, 1, false},
		{"capacity 1 at 2×C", 1, 2, 0, false},
		{"capacity 8 (share 1), full, lane of 1", 8, 8, 1, false},
		{"capacity 8 (share 1), full, new lane", 8, 15, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := queue.Admits(tt.capacity, tt.queued, tt.lane); got != tt.want {
				t.Errorf("Admits(capacity %d, queued %d, lane %d) = %v, want %v", tt.capacity, tt.queued, tt.lane, got, tt.want)
			}
		})
	}
}

// A tenant's backlog fills a queue of 10,000 items: another tenant's first
// items still get in, up to its fair share of 100.
func ExampleAdmits() {
	const capacity = 10_000
	fmt.Println(queue.FairShare(capacity))
	fmt.Println(queue.Admits(capacity, 10_000, 0))   // tenant B's first item
	fmt.Println(queue.Admits(capacity, 10_099, 99))  // its 100th
	fmt.Println(queue.Admits(capacity, 10_100, 100)) // its 101st waits
	fmt.Println(queue.Admits(capacity, 20_000, 0))   // 2×capacity: everyone waits
	// Output:
	// 100
	// true
	// true
	// false
	// false
}
