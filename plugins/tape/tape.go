// Package tape is the pure core of recorded attempts (docs/replay.md): a
// Tape holds, in order, every answer the host gave a guest during one
// activity call — the call-info document, configuration values, heartbeat
// answers, the clocks, random bytes, what poll_oneoff said, each outbound
// request's response — so that the same module, given the same input and
// answered from the tape, runs the same call again anywhere. A Recorder
// builds a tape under a size cap; a Player answers from one and says where
// a guest first asked something else (a Divergence). The package imports
// no wazero, HTTP or store: the plugin runtime records and replays through
// it, and the stores keep its bytes.
package tape

import (
	"bytes"
	"errors"
	"fmt"
)

// Kind names a host call whose answer a tape keeps.
type Kind string

// The host calls a tape keeps (abi/README.md names each function).
const (
	KindInfo          Kind = "info"           // the call-info document
	KindLastHeartbeat Kind = "last_heartbeat" // an earlier attempt's details, or none
	KindConfig        Kind = "config"         // a configuration value, or none
	KindSecret        Kind = "secret"         // a secret read: its name only, never its value
	KindHeartbeat     Kind = "heartbeat"      // whether the host asked the guest to stop
	KindCancelled     Kind = "cancelled"      // the same, asked without a heartbeat
	KindHTTP          Kind = "http"           // an outbound request and its response, or its failure
	KindClock         Kind = "clock"          // clock_time_get: a clock's reading
	KindRandom        Kind = "random"         // random_get: the bytes given
	KindPoll          Kind = "poll"           // poll_oneoff: the events it returned
)

// No kind for fd_read: a guest's stdin is always at end of file, so what
// it reads never depends on the world. Nor for the other WASI functions a
// plugin may import: their answers are fixed (empty arguments and
// environment, clock_res_get, fd_write's counts, fd_fdstat_get) or end
// the call (proc_exit).

// Entry is one host call: what the guest asked and what it was answered.
type Entry struct {
	// Kind is the host call.
	Kind Kind `json:"k"`
	// Ask is what the guest asked, in the runtime's canonical form for
	// the kind (a config key, a secret's name, a clock's id, a length, a
	// request with its secrets masked); two calls that ask alike have
	// equal Asks. Empty for the calls that take no argument.
	Ask []byte `json:"a,omitempty"`
	// Answer is what the host answered, in the runtime's form for the
	// kind. A secret's entry never holds one: replay asks for the value
	// or uses a placeholder.
	Answer []byte `json:"r,omitempty"`
	// Value is a scalar answer: a clock's nanoseconds, a length, -1 for
	// "none", a status.
	Value int64 `json:"v,omitempty"`
}

// size is what e counts against a tape's cap.
func (e Entry) size() int { return len(e.Kind) + len(e.Ask) + len(e.Answer) + 8 }

// Tape is the recorded answers of one activity call, in order.
type Tape struct {
	// Entries are the host calls, in the order the guest made them.
	Entries []Entry `json:"entries"`
	// Truncated says that the cap stopped the recording: the guest made
	// calls after the last entry that the tape does not hold, and a
	// replay that reaches its end cannot go on.
	Truncated bool `json:"truncated,omitempty"`
	// Fresh says that the tape begins at its instance's start: its first
	// entries are the answers of the instance's initialisation, and the
	// guest had run nothing before. A replay then starts a new instance
	// from the tape and runs the call again byte for byte. A tape that is
	// not fresh was recorded on an instance that had served earlier
	// calls, whose state (a runtime's timers, seeds, heap) the tape does
	// not hold: a replay initialises a new instance live and answers only
	// the call from the tape, which most guests follow exactly, but not
	// all (see ErrCarriedState).
	Fresh bool `json:"fresh,omitempty"`
}

// ErrTruncated is why a replay stops at the end of a truncated tape.
var ErrTruncated = errors.New("tape: the tape was truncated at its size cap")

// ErrCarriedState is the hint on a replay of a tape that is not Fresh
// that diverged or gave another output: the recorded instance had served
// earlier calls, and what the guest kept from them (a Go runtime's timer
// base or heap, and so when its collector ran and read the clock; seeds
// drawn at its start) is not on the tape. Recording on a fresh instance
// (call.Call's RecordExact) removes the doubt.
var ErrCarriedState = errors.New("the recorded instance carried state from earlier calls that the tape does not hold; a tape recorded exactly (on a fresh instance) replays byte for byte")

// ErrDiffers is the error of a replay that ran to its end but whose
// output or error is not the recorded one (see Tape.Differs).
var ErrDiffers = errors.New("tape: the replay's result differs from the recorded one")

// Differs returns the error of a replay of t whose result is not the
// recorded one: what says how (the output, the error), matching
// ErrDiffers, and ErrCarriedState too when t is not Fresh, so that
// whoever shows it can say why.
func (t *Tape) Differs(what string) error {
	if t.Fresh {
		return fmt.Errorf("%w: %s", ErrDiffers, what)
	}
	return fmt.Errorf("%w: %s (%w)", ErrDiffers, what, ErrCarriedState)
}

// Recorder builds the tape of one call under a size cap. It is not safe
// for concurrent use: a guest makes one host call at a time.
type Recorder struct {
	cap  int
	used int
	tape Tape
}

// NewRecorder returns a Recorder that keeps entries while they total at
// most limit bytes (their Ask and Answer and a few bytes each); from the
// first that does not fit, it keeps none and marks the tape truncated.
// limit 0 or below keeps every entry.
func NewRecorder(limit int) *Recorder { return &Recorder{cap: limit} }

// Record appends e, or marks the tape truncated when e does not fit. Ask
// and Answer are copied: the caller may reuse their memory (a guest's).
func (r *Recorder) Record(e Entry) {
	if r.tape.Truncated {
		return
	}
	if n := e.size(); r.cap > 0 && r.used+n > r.cap {
		r.tape.Truncated = true
		return
	} else {
		r.used += n
	}
	e.Ask = bytes.Clone(e.Ask)
	e.Answer = bytes.Clone(e.Answer)
	r.tape.Entries = append(r.tape.Entries, e)
}

// MarkFresh says that the tape begins at its instance's start (Tape's
// Fresh): the runtime calls it when the call's instance was made for it
// and its initialisation recorded first.
func (r *Recorder) MarkFresh() { r.tape.Fresh = true }

// Tape returns the tape recorded so far. The Recorder keeps recording
// into its own copy.
func (r *Recorder) Tape() *Tape {
	t := r.tape
	t.Entries = append([]Entry(nil), r.tape.Entries...)
	return &t
}

// Divergence says where a replayed guest first asked the host something
// other than what the tape holds: a different call, the same call asking
// differently, or a call past the tape's end.
type Divergence struct {
	// Index is the entry's place in the tape (len(Entries) past its end).
	Index int
	// Want is the tape's entry there; zero past the end.
	Want Entry
	// GotKind and GotAsk are what the guest asked.
	GotKind Kind
	GotAsk  []byte
	// Truncated says that the tape ended at its cap: the guest asked
	// what the recording did not keep, which is not a divergence of the
	// guest's.
	Truncated bool
	// Carried says that the tape is not Fresh: the recorded guest may
	// have asked otherwise because of state it carried from earlier
	// calls (ErrCarriedState), not because it changed or the world did.
	// The error then matches ErrCarriedState and says so.
	Carried bool
}

// Error implements error, naming both calls, and the hint of
// ErrCarriedState when Carried.
func (d *Divergence) Error() string {
	var s string
	switch {
	case d.Truncated:
		s = fmt.Sprintf("tape: call %d (%s %q) is past the end of a truncated tape", d.Index+1, d.GotKind, d.GotAsk)
	case d.Want.Kind == "":
		s = fmt.Sprintf("tape: call %d (%s %q) is past the end of the tape", d.Index+1, d.GotKind, d.GotAsk)
	default:
		s = fmt.Sprintf("tape: call %d diverges: the guest asked %s %q, the tape holds %s %q",
			d.Index+1, d.GotKind, d.GotAsk, d.Want.Kind, d.Want.Ask)
	}
	if d.Carried {
		s += " (maybe because " + ErrCarriedState.Error() + ")"
	}
	return s
}

// Unwrap is ErrTruncated for a divergence at a truncated tape's end and
// ErrCarriedState for one on a tape that is not Fresh.
func (d *Divergence) Unwrap() []error {
	var errs []error
	if d.Truncated {
		errs = append(errs, ErrTruncated)
	}
	if d.Carried {
		errs = append(errs, ErrCarriedState)
	}
	return errs
}

// Player answers a replayed guest's host calls from a tape, in order. It
// is not safe for concurrent use.
//
// On a tape that is not Fresh, clock reads are matched loosely (Clock):
// how often a guest's runtime reads the clock depends on what it carried
// from earlier calls (a Go runtime's first scheduling on an instance runs
// its background workers, its collector runs when its heap says), which
// a replay on a new instance cannot reproduce. A read the tape does not
// hold there is answered with that clock's latest reading without moving
// on, and readings the guest does not ask for are passed over; every
// other call is matched exactly, but for a seed's worth of random bytes
// that the tape does not hold (Random). Loosely but not endlessly: after
// maxLoose such reads in a row a read diverges as on a fresh tape, since
// a guest waiting for its clock to move (a spin, a sleep) would otherwise
// wait forever on a clock that does not.
type Player struct {
	tape *Tape
	next int
	// clocks are the latest readings answered, by Ask, on a tape that is
	// not fresh; loose counts the reads answered from them in a row.
	clocks map[string]int64
	loose  int
}

// maxLoose is how many clock (or random) reads in a row a Player answers
// that the tape does not hold: a Go runtime's extra reads are a handful.
const maxLoose = 64

// maxLooseRandom is the most random bytes a read the tape does not hold
// may ask for (Random): a seed, not data.
const maxLooseRandom = 64

// NewPlayer returns a Player at the start of t.
func NewPlayer(t *Tape) *Player { return &Player{tape: t} }

// Next returns the tape's next entry when it is a call of kind asking
// ask, and moves past it; otherwise a *Divergence, and the Player stays
// where it is (every later call diverges too).
func (p *Player) Next(kind Kind, ask []byte) (Entry, error) {
	if !p.tape.Fresh && kind != KindClock {
		// Pass over the clock readings the guest did not ask for, when
		// what follows them is this call.
		i := p.next
		for i < len(p.tape.Entries) && p.tape.Entries[i].Kind == KindClock {
			i++
		}
		if i > p.next && i < len(p.tape.Entries) && p.tape.Entries[i].Kind == kind && bytes.Equal(p.tape.Entries[i].Ask, ask) {
			for ; p.next < i; p.next++ {
				p.remember(p.tape.Entries[p.next])
			}
		}
	}
	if p.next >= len(p.tape.Entries) {
		return Entry{}, &Divergence{Index: p.next, GotKind: kind, GotAsk: bytes.Clone(ask), Truncated: p.tape.Truncated, Carried: !p.tape.Fresh}
	}
	e := p.tape.Entries[p.next]
	if e.Kind != kind || !bytes.Equal(e.Ask, ask) {
		return Entry{}, &Divergence{Index: p.next, Want: e, GotKind: kind, GotAsk: bytes.Clone(ask), Carried: !p.tape.Fresh}
	}
	p.next++
	p.loose = 0
	if kind == KindClock && !p.tape.Fresh {
		p.remember(e)
	}
	return e, nil
}

// Clock answers a read of the clock ask (its id) as Next does, but on a
// tape that is not Fresh loosely (see Player): the next reading of that
// clock in the run of clock readings ahead, passing over the others';
// when the run holds none, the answer is its latest reading, or the
// tape's next reading of it when there has been none, and the Player
// stays where it is. A clock the tape never read, or the read after
// maxLoose such answers in a row, diverges.
func (p *Player) Clock(ask []byte) (Entry, error) { return p.ClockOr(ask, nil) }

// ClockOr is Clock, except that on a tape that is not Fresh a clock the
// tape never read is answered with live's reading of it, once, and then
// with that reading while the tape holds none: a guest's runtime that
// reads a clock at moments its start decides (a garbage collector's
// pacing) may read one on the replay's new instance that the recorded
// call, on an instance started long before, did not. The replay's start
// read the clocks live, so a live reading keeps them from going back.
// With live nil, such a read diverges, as Clock's does.
func (p *Player) ClockOr(ask []byte, live func() int64) (Entry, error) {
	if p.tape.Fresh || p.loose >= maxLoose {
		return p.Next(KindClock, ask)
	}
	// The run of clock readings ahead holds this clock's: take it,
	// passing over the other clocks' (time.Now reads two clocks, a
	// runtime's scheduler one).
	for i := p.next; i < len(p.tape.Entries) && p.tape.Entries[i].Kind == KindClock; i++ {
		if bytes.Equal(p.tape.Entries[i].Ask, ask) {
			for ; p.next < i; p.next++ {
				p.remember(p.tape.Entries[p.next])
			}
			return p.Next(KindClock, ask)
		}
	}
	v, ok := p.clocks[string(ask)]
	for i := p.next; !ok && i < len(p.tape.Entries); i++ {
		if e := p.tape.Entries[i]; e.Kind == KindClock && bytes.Equal(e.Ask, ask) {
			v, ok = e.Value, true
		}
	}
	if !ok {
		if live == nil {
			return p.Next(KindClock, ask)
		}
		v = live()
		p.remember(Entry{Kind: KindClock, Ask: ask, Value: v})
	}
	p.loose++
	return Entry{Kind: KindClock, Ask: ask, Value: v}, nil
}

// Random answers a read of random bytes (ask its length n in the
// runtime's form) as Next does, but on a tape that is not Fresh, when the
// tape does not hold the read and it asks for at most maxLooseRandom
// bytes, with n zero bytes, and the Player stays where it is: a guest
// that seeds something at its first use (Rust's HashMap keys, once per
// thread) did so before the recording on an instance that had served
// calls, and does it again on the replay's new instance. Zeros rather
// than random bytes, so that two replays of a tape agree.
func (p *Player) Random(ask []byte, n int) (Entry, error) {
	if p.tape.Fresh || n > maxLooseRandom || p.loose >= maxLoose || p.holds(KindRandom, ask) {
		return p.Next(KindRandom, ask)
	}
	p.loose++
	return Entry{Kind: KindRandom, Ask: ask, Answer: make([]byte, n)}, nil
}

// holds reports whether Next would answer a call of kind asking ask.
func (p *Player) holds(kind Kind, ask []byte) bool {
	i := p.next
	for !p.tape.Fresh && kind != KindClock && i < len(p.tape.Entries) && p.tape.Entries[i].Kind == KindClock {
		i++
	}
	return i < len(p.tape.Entries) && p.tape.Entries[i].Kind == kind && bytes.Equal(p.tape.Entries[i].Ask, ask)
}

// remember keeps a clock reading answered or passed over.
func (p *Player) remember(e Entry) {
	if p.clocks == nil {
		p.clocks = map[string]int64{}
	}
	p.clocks[string(e.Ask)] = e.Value
}

// Fresh reports whether the tape begins at its instance's start (Tape's
// Fresh): a replay then initialises its instance from the tape, and
// otherwise live.
func (p *Player) Fresh() bool { return p.tape.Fresh }

// Left is how many entries the guest has not asked for yet: a replay
// whose guest returned with entries left ended earlier than the recorded
// call did. On a tape that is not Fresh, clock readings are not counted:
// the guest may pass over them (see Player).
func (p *Player) Left() int {
	if p.tape.Fresh {
		return len(p.tape.Entries) - p.next
	}
	n := 0
	for _, e := range p.tape.Entries[p.next:] {
		if e.Kind != KindClock {
			n++
		}
	}
	return n
}
