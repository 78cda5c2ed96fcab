package plugins

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// memoryBudget backs the guests' linear memories and holds their total
// within Config.MaxMemory.
//
// # Why
//
// wazero keeps a linear memory in a Go slice and grows it by copying: a
// guest growing to 256 MiB makes the host allocate and copy hundreds of MiB
// while holding up garbage collection, and the memory of a closed instance
// returns to the system only when the Go runtime gets round to it. Here a
// memory is a reservation of address space the size of its maximum
// (mapped without access), made accessible page by page as the guest
// grows: growing never copies, the garbage collector never sees guest
// memory, and closing an instance unmaps it at once. Where the system
// cannot map memory this way, a slice on the Go heap is the fallback.
//
// Every memory's size counts against the budget. An instance is created
// only when its initial memory fits (idle instances of any version are
// closed to make room, oldest first), and a memory.grow beyond the budget
// fails in the guest as it would at the guest's own maximum.
type memoryBudget struct {
	log   *slog.Logger
	limit int64
	used  atomic.Int64
	// evict closes idle instances until need bytes are free or none is
	// left; it reports whether need bytes are free.
	evict func(need int64) bool
}

// Allocate implements experimental.MemoryAllocator.
func (b *memoryBudget) Allocate(initial, max uint64) experimental.LinearMemory {
	if m, err := reserve(b, initial, max); err == nil {
		return m
	}
	return &heapMemory{budget: b, max: max}
}

// admit makes room for a memory of n bytes about to be created, evicting
// idle instances when needed. It reserves nothing: the new memory counts
// when it is allocated, so two instances admitted at once may overshoot
// the budget by one initial memory.
func (b *memoryBudget) admit(n int64) error {
	for {
		used := b.used.Load()
		if used+n <= b.limit {
			return nil
		}
		if b.evict == nil || !b.evict(used+n-b.limit) {
			return fmt.Errorf("%w: memory: the guests' memories use %d of the host's %d MiB (plugins.max_memory), and no idle instance is left to release for %d MiB more", ErrLimit, used>>20, b.limit>>20, max(n>>20, 1))
		}
	}
}

// take counts n more bytes. A memory's first allocation is always counted
// (admit made room for it, and wazero cannot handle its failure); a growth
// is counted only when it fits, after evicting idle instances if needed.
func (b *memoryBudget) take(n int64, first bool) bool {
	if first {
		b.used.Add(n)
		return true
	}
	return b.admit(n) == nil && b.add(n)
}

// add counts n bytes if they still fit.
func (b *memoryBudget) add(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *memoryBudget) release(n int64) { b.used.Add(-n) }

// heapMemory is a linear memory in a Go slice, for systems where reserve
// fails.
type heapMemory struct {
	budget  *memoryBudget
	max     uint64
	buf     []byte
	counted int64 // bytes counted against the budget
}

// Reallocate implements experimental.LinearMemory.
func (m *heapMemory) Reallocate(size uint64) []byte {
	if size > m.max {
		return nil
	}
	if grow := int64(size) - m.counted; grow > 0 {
		if !m.budget.take(grow, m.buf == nil) {
			return nil
		}
		m.counted = int64(size)
	}
	if size > uint64(cap(m.buf)) {
		buf := make([]byte, size, min(max(size, 2*uint64(cap(m.buf))), m.max))
		copy(buf, m.buf)
		m.buf = buf
	}
	m.buf = m.buf[:size]
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *heapMemory) Free() {
	m.budget.release(m.counted)
	m.counted, m.buf = 0, nil
}
