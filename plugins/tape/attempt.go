package tape

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
)

// Attempt is the recording of one activity attempt, what a replay needs
// besides the module: what the attempt was given (Activity, Input), what
// it ended with (Output, or FailureCode and FailureMessage), the code
// that ran (Plugin, PluginVersion) and the host's answers (Tape). The
// stores keep its Marshal bytes as a tape's data; weft.TapeRecord
// summarises it.
type Attempt struct {
	// Activity is the activity's name in the plugin's manifest.
	Activity string
	// Plugin and PluginVersion (the module's hash) name the code that
	// ran; a replay without a candidate loads that module.
	Plugin, PluginVersion string
	// Input is the JSON document the attempt was given.
	Input []byte
	// Output is the JSON document the attempt returned; empty when it
	// failed.
	Output []byte
	// FailureCode and FailureMessage say how it failed; empty when it
	// completed.
	FailureCode, FailureMessage string
	// Tape is the host's answers, nil when none were recorded.
	Tape *Tape
}

// The encoded form of an Attempt: gzip of
//
//	magic "WEFTATTM" | version (1 byte) | flags (1 byte: bit 0 has a tape)
//	| activity | plugin | plugin version | input | output | failure code
//	| failure message | tape
//
// each field a uvarint length and its bytes, the tape in its own encoded
// form (Tape.Marshal). The envelope has its own magic and version so that
// either can change without the other, and a tape's bytes are never read
// as an attempt's or the reverse.
const (
	attemptMagic   = "WEFTATTM"
	attemptVersion = 1
)

// Marshal encodes a.
func (a *Attempt) Marshal() ([]byte, error) {
	var tb []byte
	var flags byte
	if a.Tape != nil {
		var err error
		if tb, err = a.Tape.Marshal(); err != nil {
			return nil, fmt.Errorf("tape: encoding attempt of %s: %w", a.Activity, err)
		}
		flags |= 1
	}
	var raw bytes.Buffer
	raw.WriteString(attemptMagic)
	raw.WriteByte(attemptVersion)
	raw.WriteByte(flags)
	var n [binary.MaxVarintLen64]byte
	for _, b := range [][]byte{[]byte(a.Activity), []byte(a.Plugin), []byte(a.PluginVersion), a.Input, a.Output,
		[]byte(a.FailureCode), []byte(a.FailureMessage), tb} {
		raw.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		raw.Write(b)
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("tape: compressing attempt of %s: %w", a.Activity, err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("tape: compressing attempt of %s: %w", a.Activity, err)
	}
	return out.Bytes(), nil
}

// UnmarshalAttempt decodes an Attempt that Marshal encoded. Anything
// else — a bare tape, another format, a later version, unknown flags,
// bytes cut short or left over, a tape that does not decode, more than
// MaxDecoded inflated — is an error matching ErrMalformed that says what
// is wrong.
func UnmarshalAttempt(b []byte) (*Attempt, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: attempt: not gzip: %v", ErrMalformed, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("%w: attempt: inflating: %v", ErrMalformed, err)
	}
	if len(raw) > MaxDecoded {
		return nil, fmt.Errorf("%w: attempt: more than %d bytes inflated", ErrMalformed, MaxDecoded)
	}
	if len(raw) < len(attemptMagic)+2 || string(raw[:len(attemptMagic)]) != attemptMagic {
		return nil, fmt.Errorf("%w: attempt: no %s header", ErrMalformed, attemptMagic)
	}
	if v := raw[len(attemptMagic)]; v != attemptVersion {
		return nil, fmt.Errorf("%w: attempt: version %d, this host reads version %d", ErrMalformed, v, attemptVersion)
	}
	flags := raw[len(attemptMagic)+1]
	if flags&^1 != 0 {
		return nil, fmt.Errorf("%w: attempt: unknown flags %#x", ErrMalformed, flags)
	}
	// The envelope's fields in their order, named for errors.
	names := [...]string{"activity", "plugin", "plugin version", "input", "output", "failure code", "failure message", "tape"}
	at := len(attemptMagic) + 2
	var fields [len(names)][]byte
	for i, name := range names {
		n, w := binary.Uvarint(raw[at:])
		if w <= 0 {
			return nil, fmt.Errorf("%w: attempt: the %s's length at byte %d is not a varint", ErrMalformed, name, at)
		}
		at += w
		if n > uint64(len(raw)-at) {
			return nil, fmt.Errorf("%w: attempt: the %s of %d bytes at byte %d runs past the end", ErrMalformed, name, n, at)
		}
		if n > 0 {
			fields[i] = raw[at : at+int(n)]
		}
		at += int(n)
	}
	if at != len(raw) {
		return nil, fmt.Errorf("%w: attempt: %d bytes after the last field", ErrMalformed, len(raw)-at)
	}
	a := &Attempt{
		Activity: string(fields[0]), Plugin: string(fields[1]), PluginVersion: string(fields[2]),
		Input: fields[3], Output: fields[4], FailureCode: string(fields[5]), FailureMessage: string(fields[6]),
	}
	hasTape := flags&1 == 1
	switch {
	case hasTape && len(fields[7]) == 0:
		return nil, fmt.Errorf("%w: attempt: flagged with a tape, has none", ErrMalformed)
	case !hasTape && len(fields[7]) > 0:
		return nil, fmt.Errorf("%w: attempt: a tape of %d bytes not flagged", ErrMalformed, len(fields[7]))
	case hasTape:
		t, err := Unmarshal(fields[7])
		if err != nil {
			return nil, fmt.Errorf("attempt's tape: %w", err)
		}
		a.Tape = t
	}
	return a, nil
}
