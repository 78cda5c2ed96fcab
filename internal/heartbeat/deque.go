package heartbeat

// deque is a ring buffer of entries with pushes at both ends. Its capacity
// is a power of two.
type deque struct {
	buf  []*entry
	head int
	n    int
}

func (d *deque) len() int { return d.n }

func (d *deque) grow() {
	if d.n < len(d.buf) {
		return
	}
	buf := make([]*entry, max(16, 2*len(d.buf)))
	for i := range d.n {
		buf[i] = d.buf[(d.head+i)&(len(d.buf)-1)]
	}
	d.buf, d.head = buf, 0
}

func (d *deque) pushBack(e *entry) {
	d.grow()
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = e
	d.n++
}

func (d *deque) pushFront(e *entry) {
	d.grow()
	d.head = (d.head - 1) & (len(d.buf) - 1)
	d.buf[d.head] = e
	d.n++
}

// popFront removes and returns the first entry; the deque must not be empty.
func (d *deque) popFront() *entry {
	e := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	return e
}
