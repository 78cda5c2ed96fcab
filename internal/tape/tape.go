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
}

// ErrTruncated is why a replay stops at the end of a truncated tape.
var ErrTruncated = errors.New("tape: the tape was truncated at its size cap")

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
}

// Error implements error, naming both calls.
func (d *Divergence) Error() string {
	switch {
	case d.Truncated:
		return fmt.Sprintf("tape: call %d (%s %q) is past the end of a truncated tape", d.Index+1, d.GotKind, d.GotAsk)
	case d.Want.Kind == "":
		return fmt.Sprintf("tape: call %d (%s %q) is past the end of the tape", d.Index+1, d.GotKind, d.GotAsk)
	}
	return fmt.Sprintf("tape: call %d diverges: the guest asked %s %q, the tape holds %s %q",
		d.Index+1, d.GotKind, d.GotAsk, d.Want.Kind, d.Want.Ask)
}

// Unwrap is ErrTruncated for a divergence at a truncated tape's end.
func (d *Divergence) Unwrap() error {
	if d.Truncated {
		return ErrTruncated
	}
	return nil
}

// Player answers a replayed guest's host calls from a tape, in order. It
// is not safe for concurrent use.
type Player struct {
	tape *Tape
	next int
}

// NewPlayer returns a Player at the start of t.
func NewPlayer(t *Tape) *Player { return &Player{tape: t} }

// Next returns the tape's next entry when it is a call of kind asking
// ask, and moves past it; otherwise a *Divergence, and the Player stays
// where it is (every later call diverges too).
func (p *Player) Next(kind Kind, ask []byte) (Entry, error) {
	if p.next >= len(p.tape.Entries) {
		return Entry{}, &Divergence{Index: p.next, GotKind: kind, GotAsk: bytes.Clone(ask), Truncated: p.tape.Truncated}
	}
	e := p.tape.Entries[p.next]
	if e.Kind != kind || !bytes.Equal(e.Ask, ask) {
		return Entry{}, &Divergence{Index: p.next, Want: e, GotKind: kind, GotAsk: bytes.Clone(ask)}
	}
	p.next++
	return e, nil
}

// Left is how many entries the guest has not asked for yet: a replay
// whose guest returned with entries left ended earlier than the recorded
// call did.
func (p *Player) Left() int { return len(p.tape.Entries) - p.next }
