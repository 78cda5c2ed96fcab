package plugins

import (
	"context"
	"encoding/binary"
	"math"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/tape"
)

// WASI preview 1 poll_oneoff layout: a subscription is 48 bytes (userdata
// u64, tag u8 at 8, the tag's contents from 16), an event 32 (userdata u64,
// error u16 at 8, type u8 at 10, fd_readwrite from 16).
const (
	subscriptionSize = 48
	eventSize        = 32

	eventTypeClock   = 0
	eventTypeFdRead  = 1
	eventTypeFdWrite = 2

	subclockAbstime = 1

	// pollCheckEvery is how many subscriptions poll_oneoff decodes or
	// answers between two looks at the call's context: a guest may pass
	// millions.
	pollCheckEvery = 4096
)

var le = binary.LittleEndian

// pollOneoff is poll_oneoff(in, out, nsubscriptions, result.nevents). It
// decodes subscriptions as wazero's does, but waits on the call's context
// as well as the clock, so that a deadline or a cancellation stops a
// sleeping guest at once (wazero's sleeps with time.Sleep), and it keeps
// WASI's semantics where wazero simplifies:
//
//   - Clock subscriptions, relative (flags 0, any clock ID, as wazero) or
//     absolute (flags 1) on CLOCK_REALTIME or CLOCK_MONOTONIC (the clock
//     clock_time_get reads); absolute on the CPU-time clocks is ENOTSUP,
//     on another ID or with other flags EINVAL. A relative timeout of 2^63
//     ns or more waits for ever (for the call's deadline), where wazero
//     returned at once.
//   - fd_read and fd_write subscriptions on stdin, stdout and stderr are
//     ready at once (stdin is at end of file, output is captured): their
//     event has error 0 and nbytes 0. Any other descriptor gets an event
//     with error EBADF; a negative one makes the call return EBADF.
//   - When a descriptor event is ready, poll_oneoff returns without
//     waiting; otherwise it waits until the earliest clock subscription
//     fires. It reports the events that occurred, in subscription order,
//     and writes their count to result.nevents (wazero always reported
//     every subscription, after sleeping the shortest timeout).
//   - nsubscriptions 0 is EINVAL; subscriptions, events or result.nevents
//     outside memory are EFAULT (also when nsubscriptions × 48 overflows,
//     which made wazero's fail with a Go panic).
func pollOneoff(ctx context.Context, mod api.Module, stack []uint64) {
	const fn = abi.WASIModule + ".poll_oneoff"
	stopIfDone(ctx, fn)
	stack[0] = uint64(poll(ctx, fn, mod.Memory(), uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])))
}

// poll implements pollOneoff and returns its errno.
func poll(ctx context.Context, fn string, mem api.Memory, in, out, nsubscriptions, resultNevents uint32) uint32 {
	if nsubscriptions == 0 {
		return errnoInval
	}
	inLen, outLen := uint64(nsubscriptions)*subscriptionSize, uint64(nsubscriptions)*eventSize
	if inLen > math.MaxUint32 || outLen > math.MaxUint32 {
		return errnoFault
	}
	inBuf, ok := mem.Read(in, uint32(inLen))
	if !ok {
		return errnoFault
	}
	outBuf, ok := mem.Read(out, uint32(outLen))
	if !ok {
		return errnoFault
	}
	if _, ok := mem.Read(resultNevents, 4); !ok {
		return errnoFault
	}

	// First pass: decode every subscription, so that a bad one fails the
	// call before anything is written or waited for, and find what to
	// wait for. Times are taken once, so that both passes agree.
	now := time.Now()
	wallNow, monoNow := uint64(now.UnixNano()), uint64(now.Sub(monotonicBase))
	var ready bool                       // some descriptor event is ready
	wait := time.Duration(math.MaxInt64) // until the earliest clock fires
	for i := range nsubscriptions {
		if i%pollCheckEvery == pollCheckEvery-1 {
			stopIfDone(ctx, fn)
		}
		sub := inBuf[i*subscriptionSize:][:subscriptionSize]
		switch sub[8] {
		case eventTypeClock:
			d, errno := clockWait(sub, wallNow, monoNow)
			if errno != errnoSuccess {
				return errno
			}
			wait = min(wait, d)
		case eventTypeFdRead, eventTypeFdWrite:
			if int32(le.Uint32(sub[16:])) < 0 {
				return errnoBadf
			}
			ready = true
		default:
			return errnoInval
		}
	}

	// A call that records or replays: the subscriptions are its Ask; a
	// replay writes the tape's events without waiting.
	cs := taping(ctx)
	var ask []byte
	if cs != nil {
		ask = pollAsk(inBuf, nsubscriptions)
		if cs.play != nil {
			e := cs.replay(tape.KindPoll, ask)
			n := uint32(len(e.Answer) / eventSize)
			if len(e.Answer)%eventSize != 0 || n > nsubscriptions {
				cs.badTape(tape.KindPoll, "%d bytes of events for %d subscriptions", len(e.Answer), nsubscriptions)
			}
			copy(outBuf, e.Answer)
			if !mem.WriteUint32Le(resultNevents, n) {
				return errnoFault // checked above; memory only grows
			}
			cs.record(tape.KindPoll, ask, e.Answer, 0)
			return errnoSuccess
		}
	}

	if !ready && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			stopIfDone(ctx, fn)
		}
	}
	// A clock has fired when its wait is at most the time waited; when
	// nothing else was ready, the earliest has fired by definition.
	fired := time.Since(now)
	if !ready {
		fired = max(fired, wait)
	}

	// Second pass: the events that occurred, without gaps.
	var nevents uint32
	for i := range nsubscriptions {
		if i%pollCheckEvery == pollCheckEvery-1 {
			stopIfDone(ctx, fn)
		}
		sub := inBuf[i*subscriptionSize:][:subscriptionSize]
		// Read before writing: a guest may overlap out with in.
		typ, userdata := sub[8], le.Uint64(sub)
		var errno uint16
		switch typ {
		case eventTypeClock:
			if d, _ := clockWait(sub, wallNow, monoNow); d > fired {
				continue
			}
		default:
			if fd := le.Uint32(sub[16:]); fd > 2 {
				errno = errnoBadf
			}
		}
		evt := outBuf[nevents*eventSize:][:eventSize]
		clear(evt) // nbytes and flags of a descriptor event are 0
		le.PutUint64(evt, userdata)
		le.PutUint16(evt[8:], errno)
		evt[10] = typ
		nevents++
	}
	if !mem.WriteUint32Le(resultNevents, nevents) {
		return errnoFault // checked above; memory only grows
	}
	if cs != nil {
		cs.record(tape.KindPoll, ask, outBuf[:nevents*eventSize], 0)
	}
	return errnoSuccess
}

// clockWait decodes a clock subscription and returns how long after
// wallNow/monoNow (the same instant on the two clocks) it fires.
func clockWait(sub []byte, wallNow, monoNow uint64) (time.Duration, uint32) {
	id := le.Uint32(sub[16:])
	timeout := le.Uint64(sub[24:])
	// precision, at 32, may be ignored.
	switch le.Uint16(sub[40:]) {
	case 0: // relative: the same on every clock (wazero ignores the ID)
		return time.Duration(min(timeout, math.MaxInt64)), errnoSuccess
	case subclockAbstime:
		var now uint64
		switch id {
		case clockRealtime:
			now = wallNow
		case clockMonotonic:
			now = monoNow
		case clockProcessCPUTimeID, clockThreadCPUTimeID:
			return 0, errnoNotsup
		default:
			return 0, errnoInval
		}
		if timeout <= now {
			return 0, errnoSuccess
		}
		return time.Duration(min(timeout-now, math.MaxInt64)), errnoSuccess
	default:
		return 0, errnoInval
	}
}
