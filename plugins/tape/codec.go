package tape

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The encoded form of a tape: gzip of
//
//	magic "WEFTTAPE" | version (1 byte) | flags (1 byte: bit 0 truncated,
//	bit 1 fresh; a tape written before bit 1 decodes as not fresh)
//	| entry count (uvarint) | entries
//
// where an entry is its kind, ask and answer, each a uvarint length and
// the bytes, and its value as a zig-zag varint. Binary rather than JSON:
// answers are mostly bytes (documents, bodies, random bytes) that JSON
// would grow by a third in base64 before gzip took it back.
const (
	magic   = "WEFTTAPE"
	version = 1

	flagTruncated = 1 << 0
	flagFresh     = 1 << 1
)

// MaxDecoded bounds what Unmarshal inflates: a tape's entries are capped
// when recorded (a setting well below this), so more is a corrupt or
// hostile tape, refused before it takes the memory.
const MaxDecoded = 256 << 20

// ErrMalformed is the error of bytes that are not a tape this package
// wrote.
var ErrMalformed = errors.New("tape: malformed")

// Marshal encodes t.
func (t *Tape) Marshal() ([]byte, error) {
	var raw bytes.Buffer
	raw.WriteString(magic)
	raw.WriteByte(version)
	var flags byte
	if t.Truncated {
		flags |= flagTruncated
	}
	if t.Fresh {
		flags |= flagFresh
	}
	raw.WriteByte(flags)
	var n [binary.MaxVarintLen64]byte
	raw.Write(n[:binary.PutUvarint(n[:], uint64(len(t.Entries)))])
	for _, e := range t.Entries {
		for _, b := range [][]byte{[]byte(e.Kind), e.Ask, e.Answer} {
			raw.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
			raw.Write(b)
		}
		raw.Write(n[:binary.PutVarint(n[:], e.Value)])
	}
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, fmt.Errorf("tape: compressing: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("tape: compressing: %w", err)
	}
	return out.Bytes(), nil
}

// Unmarshal decodes a tape Marshal encoded. Anything else — another
// format, a later version, bytes cut short or left over, lengths past
// the data, more than MaxDecoded inflated — is an error matching
// ErrMalformed that says what is wrong and where.
func Unmarshal(b []byte) (*Tape, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%w: not gzip: %v", ErrMalformed, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxDecoded+1))
	if err != nil {
		return nil, fmt.Errorf("%w: inflating: %v", ErrMalformed, err)
	}
	if len(raw) > MaxDecoded {
		return nil, fmt.Errorf("%w: more than %d bytes inflated", ErrMalformed, MaxDecoded)
	}
	d := decoder{b: raw}
	if len(raw) < len(magic)+2 || string(raw[:len(magic)]) != magic {
		return nil, fmt.Errorf("%w: no %s header", ErrMalformed, magic)
	}
	if v := raw[len(magic)]; v != version {
		return nil, fmt.Errorf("%w: version %d, this host reads version %d", ErrMalformed, v, version)
	}
	flags := raw[len(magic)+1]
	if flags&^(flagTruncated|flagFresh) != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrMalformed, flags)
	}
	d.at = len(magic) + 2
	count := d.uvarint("the entry count")
	// Every entry takes at least four bytes: a count above what is left
	// is a lie, refused before it sizes a slice.
	if d.err == nil && count > uint64(len(raw)-d.at)/4 {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", ErrMalformed, count, len(raw)-d.at)
	}
	t := &Tape{Truncated: flags&flagTruncated != 0, Fresh: flags&flagFresh != 0, Entries: make([]Entry, 0, count)}
	for i := uint64(0); i < count && d.err == nil; i++ {
		var e Entry
		e.Kind = Kind(d.bytes(i, "kind"))
		e.Ask = d.bytes(i, "ask")
		e.Answer = d.bytes(i, "answer")
		e.Value = d.varint(i)
		if d.err == nil && e.Kind == "" {
			d.err = fmt.Errorf("entry %d has no kind", i+1)
		}
		t.Entries = append(t.Entries, e)
	}
	if d.err == nil && d.at != len(raw) {
		d.err = fmt.Errorf("%d bytes after the last entry", len(raw)-d.at)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, d.err)
	}
	return t, nil
}

// decoder reads the inflated form; its first error stops it.
type decoder struct {
	b   []byte
	at  int
	err error
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.at:])
	if n <= 0 {
		d.err = fmt.Errorf("%s at byte %d is not a varint", what, d.at)
		return 0
	}
	d.at += n
	return v
}

func (d *decoder) varint(i uint64) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.at:])
	if n <= 0 {
		d.err = fmt.Errorf("entry %d's value at byte %d is not a varint", i+1, d.at)
		return 0
	}
	d.at += n
	return v
}

func (d *decoder) bytes(i uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	n, w := binary.Uvarint(d.b[d.at:])
	if w <= 0 {
		d.err = fmt.Errorf("entry %d's %s length at byte %d is not a varint", i+1, what, d.at)
		return nil
	}
	d.at += w
	if n > uint64(len(d.b)-d.at) {
		d.err = fmt.Errorf("entry %d's %s of %d bytes at byte %d runs past the end", i+1, what, n, d.at)
		return nil
	}
	if n == 0 {
		return nil
	}
	out := d.b[d.at : d.at+int(n)]
	d.at += int(n)
	return out
}
