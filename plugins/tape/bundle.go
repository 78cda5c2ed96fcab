package tape

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// Bundle is a recorded attempt made portable: the module that ran and
// the attempt's envelope (Attempt.Marshal's bytes), so that the attempt
// replays offline, on a laptop, with nothing of the host that recorded
// it (weft attempt export writes one, weft plugin call --replay runs it).
type Bundle struct {
	// Module is the plugin module's bytes (wasm).
	Module []byte
	// Attempt is the attempt's envelope, as the stores keep it.
	Attempt []byte
}

// The encoded form of a Bundle, not compressed (a module compresses
// little, the envelope is compressed already):
//
//	magic "WEFTBNDL" | version (1 byte) | sha256 of the module (32 bytes)
//	| module | attempt
//
// each of the last two a uvarint length and its bytes. The module's hash
// catches a bundle damaged on its way; the magic and version keep a
// later format, or a bare envelope or module, from being read as this
// one.
const (
	bundleMagic   = "WEFTBNDL"
	bundleVersion = 1
	// MaxBundlePart bounds the module and the envelope of a bundle each,
	// as MaxDecoded bounds a tape.
	MaxBundlePart = MaxDecoded
)

// ModuleSum returns the hex sha256 of the bundle's module.
func (b *Bundle) ModuleSum() string {
	s := sha256.Sum256(b.Module)
	return hex.EncodeToString(s[:])
}

// Marshal encodes b. An empty or oversized part, or an envelope that does
// not decode, is refused: a bundle that cannot replay is not written.
func (b *Bundle) Marshal() ([]byte, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(len(bundleMagic) + 1 + sha256.Size + 2*binary.MaxVarintLen64 + len(b.Module) + len(b.Attempt))
	out.WriteString(bundleMagic)
	out.WriteByte(bundleVersion)
	sum := sha256.Sum256(b.Module)
	out.Write(sum[:])
	var n [binary.MaxVarintLen64]byte
	for _, p := range [][]byte{b.Module, b.Attempt} {
		out.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		out.Write(p)
	}
	return out.Bytes(), nil
}

// check refuses a bundle Marshal must not write.
func (b *Bundle) check() error {
	switch {
	case len(b.Module) == 0:
		return fmt.Errorf("tape: bundle: no module")
	case len(b.Module) > MaxBundlePart:
		return fmt.Errorf("tape: bundle: a module of %d bytes, more than %d", len(b.Module), MaxBundlePart)
	case len(b.Attempt) == 0:
		return fmt.Errorf("tape: bundle: no attempt")
	case len(b.Attempt) > MaxBundlePart:
		return fmt.Errorf("tape: bundle: an attempt of %d bytes, more than %d", len(b.Attempt), MaxBundlePart)
	}
	if _, err := UnmarshalAttempt(b.Attempt); err != nil {
		return fmt.Errorf("tape: bundle: %w", err)
	}
	return nil
}

// UnmarshalBundle decodes a bundle that Marshal encoded, and its attempt.
// Anything else — another format, a later version, a module whose hash is
// not the one recorded, parts empty, cut short, oversized or followed by
// bytes, an envelope that does not decode — is an error matching
// ErrMalformed that says what is wrong.
func UnmarshalBundle(data []byte) (*Bundle, *Attempt, error) {
	head := len(bundleMagic) + 1 + sha256.Size
	if len(data) < len(bundleMagic) || string(data[:len(bundleMagic)]) != bundleMagic {
		return nil, nil, fmt.Errorf("%w: bundle: no %s header: not a bundle that weft attempt export wrote", ErrMalformed, bundleMagic)
	}
	if len(data) < head {
		return nil, nil, fmt.Errorf("%w: bundle: %d bytes, shorter than its header", ErrMalformed, len(data))
	}
	if v := data[len(bundleMagic)]; v != bundleVersion {
		return nil, nil, fmt.Errorf("%w: bundle: version %d, this weft reads version %d", ErrMalformed, v, bundleVersion)
	}
	want := data[len(bundleMagic)+1 : head]
	at := head
	var parts [2][]byte
	for i, name := range [...]string{"module", "attempt"} {
		n, w := binary.Uvarint(data[at:])
		if w <= 0 {
			return nil, nil, fmt.Errorf("%w: bundle: the %s's length at byte %d is not a varint", ErrMalformed, name, at)
		}
		at += w
		switch {
		case n == 0:
			return nil, nil, fmt.Errorf("%w: bundle: an empty %s", ErrMalformed, name)
		case n > MaxBundlePart:
			return nil, nil, fmt.Errorf("%w: bundle: a %s of %d bytes, more than %d", ErrMalformed, name, n, MaxBundlePart)
		case n > uint64(len(data)-at):
			return nil, nil, fmt.Errorf("%w: bundle: the %s of %d bytes at byte %d runs past the end", ErrMalformed, name, n, at)
		}
		parts[i] = data[at : at+int(n)]
		at += int(n)
	}
	if at != len(data) {
		return nil, nil, fmt.Errorf("%w: bundle: %d bytes after the attempt", ErrMalformed, len(data)-at)
	}
	if sum := sha256.Sum256(parts[0]); !bytes.Equal(sum[:], want) {
		return nil, nil, fmt.Errorf("%w: bundle: the module's sha256 is %x, the bundle recorded %x: it was damaged", ErrMalformed, sum, want)
	}
	a, err := UnmarshalAttempt(parts[1])
	if err != nil {
		return nil, nil, fmt.Errorf("bundle: %w", err)
	}
	return &Bundle{Module: parts[0], Attempt: parts[1]}, a, nil
}
