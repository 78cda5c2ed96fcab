package plugins

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unsafe"

	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// Recording and replaying a call's host answers (call.Call's Record,
// RecordExact and Replay; internal/tape). A recording runs on the instance
// the pool gives; only RecordExact, or an instance made for the call,
// puts the instance's _initialize on the tape and marks it fresh
// (pool.get, pool.fresh). A replay runs on a new instance, initialised
// from a fresh tape or live otherwise. Each host function whose answer depends on the
// world asks taping for the call's state: nil when the call neither
// records nor replays, which is the whole cost of the feature then. The
// canonical Ask and Answer of each kind:
//
//   - info: no Ask; Answer the info document. Recorded at the guest's first
//     read only: the document is the same for the whole call, and later
//     reads (a sized read asks twice) answer the same bytes.
//   - last_heartbeat: no Ask; Answer the details, Value -1 when there are
//     none. Recorded once, as info.
//   - config: Ask the key; Answer the value, Value -1 when unset.
//   - secret: Ask the name; no Answer, ever. A replay answers
//     Call.ReplaySecrets's value or call.ReplaySecret(name).
//   - heartbeat: Ask the details as the host keeps them (masked); Value 1
//     when the host asked the guest to stop, else 0.
//   - cancelled: no Ask; Value 1 or 0.
//   - http: Ask "METHOD URL\n", the guest's header lines sorted by name
//     (values of secret-looking headers replaced by "[secret]"), then
//     "body sha256:HEX N\n" or "no body\n"; the call's secrets masked
//     throughout. Value the status, and Answer the response's header
//     lines, an empty line and the body, as the http_response_* functions
//     serve them (secret-looking header values and the call's secrets
//     masked: a replayed guest reads "[secret]" there); or Value the
//     negative abi.HTTPError and Answer its reason ("unreachable", …).
//   - clock: Ask the clock's id in decimal; Value its reading in ns. A
//     replay of a tape that is not fresh matches them loosely: how often
//     a runtime reads its clock depends on its state (tape.Player).
//   - random: Ask the length in decimal; Answer the bytes. A replay of a
//     tape that is not fresh answers a seed the tape does not hold with
//     zeros (tape.Player.Random).
//   - poll: Ask the subscriptions, a line each ("clock id=1 flags=0
//     userdata=…", "fd_read fd=0 userdata=…"); Answer the events written,
//     32 bytes each. A clock's timeout is not in the Ask: a guest computes
//     it from its own clock readings and timers, and a replay of a tape
//     that is not fresh starts from another instance's (a Go runtime's
//     timers count from readings taken before the call, which the tape
//     does not hold), so the number differs where the guest does not.
//     Which clock, relative or absolute (flags) and the userdata still
//     tell one wait from another; the Answer says which fired.
//
// An Ask longer than maxAsk is kept as "sha256:HEX (N bytes)": a guest
// may ask with most of its memory, and only equality matters.
//
// Only answers the guest can read are recorded: a host call that stops the
// guest (a grant refused, a limit, a secret that does not resolve, the
// deadline) ends the tape there, and so does an ABI violation; a replay
// stops at the same call, past the tape's end, with a divergence.

// maxAsk is the longest Ask a tape keeps as it is.
const maxAsk = 1024

// taping returns the state of the call in progress when it records or
// replays (or of the _initialize of a fresh instance for one), and nil
// otherwise.
func taping(ctx context.Context) *callState {
	cs := callOf(ctx)
	if cs == nil || cs.rec == nil && cs.play == nil {
		return nil
	}
	return cs
}

// tapeOn reports whether the call records or replays.
func (cs *callState) tapeOn() bool { return cs.rec != nil || cs.play != nil }

// replaying reports whether the call answers from a tape.
func (cs *callState) replaying() bool { return cs.play != nil }

// record appends an entry to the call's tape when it records.
func (cs *callState) record(kind tape.Kind, ask, answer []byte, value int64) {
	if r := cs.rec; r != nil {
		r.Record(tape.Entry{Kind: kind, Ask: ask, Answer: answer, Value: value})
	}
}

// replay returns the tape's next entry, which must be a call of kind
// asking ask; otherwise it stops the guest with an error matching
// call.ErrDiverged and the *tape.Divergence.
func (cs *callState) replay(kind tape.Kind, ask []byte) tape.Entry {
	e, err := cs.play.Next(kind, ask)
	if err != nil {
		cs.fail(fmt.Errorf("%w: %w", call.ErrDiverged, err))
	}
	return e
}

// replayClock is replay for a read of clock id, which a tape that is not
// fresh answers loosely, with a live reading for a clock the tape never
// read (tape.Player.ClockOr).
func (cs *callState) replayClock(ask []byte, id uint32) tape.Entry {
	e, err := cs.play.ClockOr(ask, func() int64 { return int64(readClock(id)) })
	if err != nil {
		cs.fail(fmt.Errorf("%w: %w", call.ErrDiverged, err))
	}
	return e
}

// replayRandom is replay for a read of n random bytes, which a tape that
// is not fresh may answer without holding it (tape.Player.Random).
func (cs *callState) replayRandom(ask []byte, n int) tape.Entry {
	e, err := cs.play.Random(ask, n)
	if err != nil {
		cs.fail(fmt.Errorf("%w: %w", call.ErrDiverged, err))
	}
	return e
}

// badTape stops the guest for a tape entry that cannot be the answer it
// says (a tape this runtime did not write, or a corrupt one).
func (cs *callState) badTape(kind tape.Kind, format string, args ...any) {
	cs.fail(fmt.Errorf("%w: %s entry: "+format, append([]any{tape.ErrMalformed, kind}, args...)...))
}

// askOf returns b as an Ask: itself, or its digest when longer than
// maxAsk.
func askOf(b []byte) []byte {
	if len(b) <= maxAsk {
		return b
	}
	sum := sha256.Sum256(b)
	return fmt.Appendf(nil, "sha256:%s (%d bytes)", hex.EncodeToString(sum[:]), len(b))
}

// numberAsk is the Ask of a numeric argument, in decimal, in buf.
func numberAsk(buf *[20]byte, n uint64) []byte { return strconv.AppendUint(buf[:0], n, 10) }

// secretHeader reports whether a header's values may be credentials: a
// tape keeps "[secret]" in their place.
func secretHeader(name []byte) bool {
	var buf [64]byte // lowered here, not on the heap, for the usual names
	var n string
	if len(name) <= len(buf) {
		for i, c := range name {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
		n = unsafe.String(&buf[0], len(name)) // read only, within this call
		if len(name) == 0 {
			n = ""
		}
	} else {
		n = strings.ToLower(string(name))
	}
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	for _, w := range []string{"token", "secret", "password", "passwd", "api-key", "apikey", "session", "signature", "credential", "auth"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// appendHeaderLines appends "Name: value\n" lines to dst as a tape keeps
// them: secret-looking values replaced, the call's secrets masked in the
// rest.
func (cs *callState) appendHeaderLines(dst, lines []byte) []byte {
	for len(lines) > 0 {
		var l []byte
		l, lines, _ = bytes.Cut(lines, []byte{'\n'})
		name, _, _ := bytes.Cut(l, []byte{':'})
		if secretHeader(name) {
			dst = append(dst, name...)
			dst = append(dst, ": "+secretMark+"\n"...)
			continue
		}
		dst = cs.appendMasked(dst, l)
		dst = append(dst, '\n')
	}
	return dst
}

// appendMasked appends b to dst with the call's secrets masked (mask).
func (cs *callState) appendMasked(dst, b []byte) []byte { return append(dst, cs.maskedBytes(b)...) }

// maskedBytes is b with the call's secrets masked (mask): b itself when
// it holds none, which is the usual case and costs no copy.
func (cs *callState) maskedBytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	forms := cs.maskForms()
	s := unsafe.String(&b[0], len(b)) // read only, within this call
	for _, f := range forms {
		if strings.Contains(s, f) {
			return []byte(maskWith(forms, string(b)))
		}
	}
	return b
}

// httpAsk is the Ask of an outbound request: see the kinds above.
func (cs *callState) httpAsk(method string, rawURL []byte, header http.Header, body []byte) []byte {
	u := askOf(cs.maskedBytes(rawURL))
	raw := formatHeaderLines(header)
	ask := make([]byte, 0, len(method)+len(u)+len(raw)+112)
	ask = append(ask, method...)
	ask = append(ask, ' ')
	ask = append(ask, u...)
	ask = append(ask, '\n')
	start := len(ask)
	ask = cs.appendHeaderLines(ask, raw)
	if len(ask)-start > maxAsk {
		digest := askOf(ask[start:])
		ask = append(ask[:start], "headers "...)
		ask = append(ask, digest...)
		ask = append(ask, '\n')
	}
	if len(body) == 0 {
		return append(ask, "no body\n"...)
	}
	// Masked before hashing: a replay reads another value for a secret,
	// which the guest may send in the body.
	sum := sha256.Sum256(cs.maskedBytes(body))
	ask = append(ask, "body sha256:"...)
	ask = hex.AppendEncode(ask, sum[:])
	ask = append(ask, ' ')
	ask = strconv.AppendInt(ask, int64(len(body)), 10)
	return append(ask, '\n')
}

// httpAnswer is the Answer of a response: its header lines as the tape
// keeps them, an empty line, and its body with the call's secrets masked.
func (cs *callState) httpAnswer(r *response) []byte {
	a := cs.appendHeaderLines(make([]byte, 0, len(r.header)+len(r.body)+16), r.header)
	a = append(a, '\n')
	return cs.appendMasked(a, r.body)
}

// responseOf decodes httpAnswer's form.
func responseOf(answer []byte) (*response, bool) {
	if len(answer) > 0 && answer[0] == '\n' {
		return &response{body: answer[1:]}, true
	}
	// Header lines are never empty, and a value holds no line break: the
	// first empty line ends them.
	i := bytes.Index(answer, []byte("\n\n"))
	if i < 0 {
		return nil, false
	}
	return &response{header: answer[:i+1], body: answer[i+2:]}, true
}

// pollAsk is the Ask of poll_oneoff's subscriptions: see the kinds above.
func pollAsk(in []byte, n uint32) []byte {
	var ask []byte
	for i := range n {
		sub := in[i*subscriptionSize:][:subscriptionSize]
		if i > 0 {
			ask = append(ask, '\n')
		}
		switch sub[8] {
		case eventTypeClock:
			ask = fmt.Appendf(ask, "clock id=%d flags=%d userdata=%d", le.Uint32(sub[16:]), le.Uint16(sub[40:]), le.Uint64(sub))
		case eventTypeFdRead:
			ask = fmt.Appendf(ask, "fd_read fd=%d userdata=%d", int32(le.Uint32(sub[16:])), le.Uint64(sub))
		default:
			ask = fmt.Appendf(ask, "fd_write fd=%d userdata=%d", int32(le.Uint32(sub[16:])), le.Uint64(sub))
		}
	}
	return askOf(ask)
}

// replaySecret returns the value a replayed guest reads for the secret
// name.
func (cs *callState) replaySecret(name string) string {
	if f := cs.call.ReplaySecrets; f != nil {
		if v, ok := f(name); ok {
			return string(v)
		}
	}
	return call.ReplaySecret(name)
}

// seenSecrets is the values of cs.secrets the runtime remembers to mask
// in later calls: all of them, but a replay's placeholders.
func (cs *callState) seenSecrets() map[string]string {
	if !cs.replaying() {
		return cs.secrets
	}
	var real map[string]string
	for name, v := range cs.secrets {
		if v == call.ReplaySecret(name) {
			continue
		}
		if real == nil {
			real = map[string]string{}
		}
		real[name] = v
	}
	return real
}
