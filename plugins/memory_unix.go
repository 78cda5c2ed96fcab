//go:build unix

package plugins

import (
	"golang.org/x/sys/unix"
)

// mappedMemory is a linear memory in a reservation of address space its
// maximum's size, made readable and writable as it grows.
type mappedMemory struct {
	adm        *admission // until the first allocation
	budget     *memoryBudget
	region     []byte // the whole reservation
	size       uint64 // the memory's size, counted against the budget
	accessible uint64 // bytes mapped readable and writable
}

// reserve maps max bytes of address space without access and makes the
// first initial bytes accessible; no memory is committed until the guest
// touches it.
func reserve(a *admission, initial, max uint64) (*mappedMemory, error) {
	b := a.budget
	if max == 0 {
		max = 1 // a memory with no pages still needs a distinct address
	}
	region, err := unix.Mmap(-1, 0, int(max), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil, err
	}
	m := &mappedMemory{adm: a, budget: b, region: region}
	if initial > 0 {
		if err := unix.Mprotect(region[:min(initial, max)], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			if uerr := unix.Munmap(region); uerr != nil {
				b.log.Error("plugins: unmapping a guest memory", "err", uerr)
			}
			return nil, err
		}
		m.accessible = min(initial, max)
	}
	return m, nil
}

// Reallocate implements experimental.LinearMemory. Growing makes the next
// pages accessible in place: the guest's memory never moves.
func (m *mappedMemory) Reallocate(size uint64) []byte {
	if size > uint64(len(m.region)) {
		return nil
	}
	if m.adm != nil {
		m.adm.claim(int64(max(size, m.size) - m.size))
		m.adm = nil
	} else if size > m.size && !m.budget.grow(int64(size-m.size)) {
		return nil
	}
	if size > m.size {
		if size > m.accessible {
			if err := unix.Mprotect(m.region[m.accessible:size], unix.PROT_READ|unix.PROT_WRITE); err != nil {
				m.budget.release(int64(size - m.size))
				return nil
			}
			m.accessible = size
		}
		m.size = size
	}
	return m.region[:size:size]
}

// Free implements experimental.LinearMemory: the memory returns to the
// system at once.
func (m *mappedMemory) Free() {
	if m.region == nil {
		return
	}
	m.budget.release(int64(m.size))
	if err := unix.Munmap(m.region); err != nil {
		m.budget.log.Error("plugins: unmapping a guest memory", "err", err)
	}
	m.region, m.size, m.accessible = nil, 0, 0
}
