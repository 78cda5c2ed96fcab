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

	"github.com/weftworks/weft/internal/tape"
	"github.com/weftworks/weft/plugins/call"
)

// Recording and replaying a call's host answers (call.Call's Record and
// Replay; internal/tape). Each host function whose answer depends on the
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
//   - clock: Ask the clock's id in decimal; Value its reading in ns.
//   - random: Ask the length in decimal; Answer the bytes.
//   - poll: Ask the subscriptions, a line each ("clock id=1 timeout=… flags=0
//     userdata=…", "fd_read fd=0 userdata=…"); Answer the events written,
//     32 bytes each.
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
func secretHeader(name string) bool {
	n := strings.ToLower(name)
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

// tapeHeaderLines returns "Name: value\n" lines as a tape keeps them:
// secret-looking values replaced, the call's secrets masked in the rest.
func (cs *callState) tapeHeaderLines(lines []byte) []byte {
	var out []byte
	for len(lines) > 0 {
		var l []byte
		l, lines, _ = bytes.Cut(lines, []byte{'\n'})
		name, _, _ := bytes.Cut(l, []byte{':'})
		if secretHeader(string(name)) {
			out = append(out, name...)
			out = append(out, ": "+secretMark+"\n"...)
			continue
		}
		out = append(out, cs.mask(string(l))...)
		out = append(out, '\n')
	}
	return out
}

// httpAsk is the Ask of an outbound request: see the kinds above.
func (cs *callState) httpAsk(method string, rawURL []byte, header http.Header, body []byte) []byte {
	u := cs.mask(string(rawURL))
	if len(u) > maxAsk {
		u = string(askOf([]byte(u)))
	}
	ask := make([]byte, 0, len(method)+len(u)+128)
	ask = append(ask, method...)
	ask = append(ask, ' ')
	ask = append(ask, u...)
	ask = append(ask, '\n')
	lines := cs.tapeHeaderLines(formatHeaderLines(header))
	if len(lines) > maxAsk {
		ask = append(ask, "headers "...)
		ask = append(ask, askOf(lines)...)
		ask = append(ask, '\n')
	} else {
		ask = append(ask, lines...)
	}
	if len(body) == 0 {
		return append(ask, "no body\n"...)
	}
	// Masked before hashing: a replay reads another value for a secret,
	// which the guest may send in the body.
	sum := sha256.Sum256([]byte(cs.mask(string(body))))
	return fmt.Appendf(ask, "body sha256:%s %d\n", hex.EncodeToString(sum[:]), len(body))
}

// httpAnswer is the Answer of a response: its header lines as the tape
// keeps them, an empty line, and its body with the call's secrets masked.
func (cs *callState) httpAnswer(r *response) []byte {
	a := cs.tapeHeaderLines(r.header)
	a = append(a, '\n')
	return append(a, cs.mask(string(r.body))...)
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
			ask = fmt.Appendf(ask, "clock id=%d timeout=%d flags=%d userdata=%d", le.Uint32(sub[16:]), le.Uint64(sub[24:]), le.Uint16(sub[40:]), le.Uint64(sub))
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
