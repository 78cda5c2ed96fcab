package call

import (
	"sync"
	"time"
)

// Heartbeat is the in-memory liveness record of one activity attempt. The
// guest's heartbeat host function writes it (no I/O); the engine's heartbeat
// scheduler reads it and persists the details, and requests cancellation
// through it. A Heartbeat is safe for concurrent use.
//
// # The runtime's side
//
// Restart, Beat, Watch and HostWait are for the runtime that runs the
// call (plugins.Runtime.Invoke); the caller reads Last and CancelRequested
// and calls OnBeat and RequestCancel.
type Heartbeat struct {
	mu        sync.Mutex
	details   []byte
	at        time.Time
	beats     uint64
	cancelled bool
	onCancel  func()
	onBeat    func(details []byte, n uint64)
	// waiting counts the host calls in flight that wait on the world (an
	// outbound HTTP request), and clock is the runtime's: while one is in
	// flight the guest cannot beat, yet waits on the host rather than
	// hangs, so Last reports the clock's now.
	waiting int
	clock   func() time.Time
}

// NewHeartbeat returns a Heartbeat for an attempt that started at start;
// until the guest beats, Last reports start as the last sign of life.
func NewHeartbeat(start time.Time) *Heartbeat { return &Heartbeat{at: start} }

// Last returns a copy of the latest details (nil when the guest recorded
// none), the time of the last sign of life, and how many heartbeats arrived.
func (h *Heartbeat) Last() (details []byte, at time.Time, beats uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.details != nil {
		details = append([]byte(nil), h.details...)
	}
	at = h.at
	if h.waiting > 0 {
		at = h.clock()
	}
	return details, at, h.beats
}

// OnBeat arranges for f to run after each heartbeat the guest sends, with
// the heartbeat's details (nil when it sent none; only valid during the
// call) and how many heartbeats arrived, this one included. f runs on the
// guest's goroutine before the heartbeat returns to it, so a cancellation
// f requests is the heartbeat's answer: tools use it to cancel an attempt
// at a given heartbeat. Set it before the call starts.
func (h *Heartbeat) OnBeat(f func(details []byte, n uint64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.onBeat = f
}

// RequestCancel asks the attempt to stop. The guest sees it on its next
// heartbeat or cancelled call; a guest that has not returned after the
// runtime's grace period is stopped. Calling it again does nothing.
func (h *Heartbeat) RequestCancel() {
	h.mu.Lock()
	if h.cancelled {
		h.mu.Unlock()
		return
	}
	h.cancelled = true
	f := h.onCancel
	h.mu.Unlock()
	if f != nil {
		f()
	}
}

// CancelRequested reports whether RequestCancel was called.
func (h *Heartbeat) CancelRequested() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelled
}

// Restart makes now the attempt's last sign of life, when the guest starts
// running: the time its module took to load is not the guest's silence.
// Heartbeats already recorded are kept. For the runtime.
func (h *Heartbeat) Restart(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.After(h.at) {
		h.at = now
	}
}

// Beat records a heartbeat from the guest at now, then runs the OnBeat
// function. details == nil keeps the earlier details. It reports whether
// cancellation was requested, the heartbeat's answer to the guest. For
// the runtime.
func (h *Heartbeat) Beat(details []byte, now time.Time) (cancelled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if details != nil {
		h.details = append(h.details[:0], details...)
	}
	h.at = now
	h.beats++
	f, n := h.onBeat, h.beats
	if f == nil {
		return h.cancelled
	}
	h.mu.Unlock()
	f(details, n)
	h.mu.Lock()
	return h.cancelled
}

// Watch arranges for f to run when cancellation is requested (at once if
// it already was) and returns a function that stops watching: the runtime
// stops a guest that has not returned a grace period after. For the
// runtime.
func (h *Heartbeat) Watch(f func()) (stop func()) {
	h.mu.Lock()
	if h.cancelled {
		h.mu.Unlock()
		f()
		return func() {}
	}
	h.onCancel = f
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.onCancel = nil
		h.mu.Unlock()
	}
}

// HostWait marks a host call that waits on the world (an outbound HTTP
// request, reading the grants), timed by clock, as begun, and returns the
// function that ends it: until then the attempt counts as alive, and its
// end is a sign of life. For the runtime.
func (h *Heartbeat) HostWait(clock func() time.Time) (end func()) {
	h.mu.Lock()
	h.waiting++
	h.clock = clock
	h.mu.Unlock()
	return func() {
		now := clock()
		h.mu.Lock()
		h.waiting--
		if now.After(h.at) {
			h.at = now
		}
		h.mu.Unlock()
	}
}
