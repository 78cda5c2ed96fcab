package plugins

import (
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
	"github.com/weftworks/weft/plugins/call"
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
// only when its initial memory fits, reserved before it starts (idle
// instances of any version are closed to make room, oldest first), and a
// memory.grow beyond the budget fails in the guest as it would at the
// guest's own maximum.
type memoryBudget struct {
	log   *slog.Logger
	limit int64
	used  atomic.Int64
	// evict closes idle instances until need bytes are free or none is
	// left; it reports whether need bytes are free.
	evict func(need int64) bool
}

// admission is the budget one instantiation reserved before it started,
// and the memories it allocated, so that a failed instantiation (which
// wazero leaves to its caller to clean up) gives both back. It is the
// MemoryAllocator of that instantiation.
type admission struct {
	budget   *memoryBudget
	reserved int64 // admitted and counted, not yet claimed by a memory
	memories []experimental.LinearMemory
}

// admit reserves n bytes for the memory of an instance about to be
// created, evicting idle instances when needed.
func (b *memoryBudget) admit(n int64) (*admission, error) {
	for {
		used := b.used.Load()
		if used+n <= b.limit {
			if b.used.CompareAndSwap(used, used+n) {
				return &admission{budget: b, reserved: n}, nil
			}
			continue
		}
		if b.evict == nil || !b.evict(used+n-b.limit) {
			return nil, &BudgetError{Used: used, Limit: b.limit, Need: n}
		}
	}
}

// grow counts n more bytes for a growing memory if they fit, evicting idle
// instances first when they do not.
func (b *memoryBudget) grow(n int64) bool {
	adm, err := b.admit(n)
	if err != nil {
		return false
	}
	adm.reserved = 0 // counted for good
	return true
}

func (b *memoryBudget) release(n int64) { b.used.Add(-n) }

// Memory returns how many bytes the guests' memories take together, and
// the budget they must fit (Config.MaxMemory).
func (r *Runtime) Memory() (used, limit int64) { return r.budget.used.Load(), r.budget.limit }

// Allocate implements experimental.MemoryAllocator.
func (a *admission) Allocate(initial, max uint64) experimental.LinearMemory {
	var lm experimental.LinearMemory
	if m, err := reserve(a, initial, max); err == nil {
		lm = m
	} else {
		lm = &heapMemory{adm: a, budget: a.budget, max: max}
	}
	a.memories = append(a.memories, lm)
	return lm
}

// claim counts a memory's first n bytes: from the reservation, and beyond
// it unconditionally (wazero cannot handle a failed first allocation).
func (a *admission) claim(n int64) {
	from := min(n, a.reserved)
	a.reserved -= from
	a.budget.used.Add(n - from)
}

// done gives back what the instantiation reserved and did not claim.
func (a *admission) done() {
	a.budget.release(a.reserved)
	a.reserved = 0
}

// abort frees every memory a failed instantiation allocated, and the rest
// of its reservation.
func (a *admission) abort() {
	for _, m := range a.memories {
		m.Free()
	}
	a.memories = nil
	a.done()
}

// heapMemory is a linear memory in a Go slice, for systems where reserve
// fails.
type heapMemory struct {
	adm     *admission // until the first allocation
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
	if grow := int64(size) - m.counted; m.adm != nil {
		m.adm.claim(max(grow, 0))
		m.adm = nil
		m.counted = max(m.counted, int64(size))
	} else if grow > 0 {
		if !m.budget.grow(grow) {
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

// BudgetError says that the guests' memories leave no room for a new
// instance under Config.MaxMemory, and no idle instance is left to close: a
// condition of the host, which may pass. It matches call.ErrLimit.
type BudgetError struct {
	// Used and Limit are the guests' memories and the budget, Need what
	// the new instance needs, in bytes.
	Used, Limit, Need int64
}

// Error implements error.
func (e *BudgetError) Error() string {
	return fmt.Sprintf("%v: memory: the guests' memories use %d of the host's %d MiB (plugins.max_memory), and no idle instance is left to release for %d MiB more", call.ErrLimit, e.Used>>20, e.Limit>>20, max(e.Need>>20, 1))
}

// Unwrap returns call.ErrLimit.
func (e *BudgetError) Unwrap() error { return call.ErrLimit }
