package wasmbin

import (
	"errors"
	"fmt"
)

// Reader reads the WebAssembly binary format from a byte slice. The first
// error sticks: later reads return zero values and change nothing, so a
// caller checks Err once after a run of reads.
//
// A Reader's position (Pos) is an index into the bytes it reads (Buf);
// messages name offsets in the module, which are the position plus the
// base the Reader was made with.
type Reader struct {
	b    []byte
	pos  int
	base int
	err  error
}

// NewReader returns a Reader of b, which starts at offset base in the
// module (0 for the whole module).
func NewReader(b []byte, base int) *Reader { return &Reader{b: b, base: base} }

// Err returns the first error, or nil.
func (r *Reader) Err() error { return r.err }

// OK reports whether no read has failed.
func (r *Reader) OK() bool { return r.err == nil }

// Buf returns all the bytes the Reader reads, including those read.
func (r *Reader) Buf() []byte { return r.b }

// Pos returns the index in Buf of the next byte to read.
func (r *Reader) Pos() int { return r.pos }

// Seek moves to index pos of Buf, which must be within it (or at its end).
func (r *Reader) Seek(pos int) {
	if pos < 0 || pos > len(r.b) {
		panic(fmt.Sprintf("wasmbin: seek to %d of %d bytes", pos, len(r.b)))
	}
	r.pos = pos
}

// Base returns the offset in the module of Buf's first byte.
func (r *Reader) Base() int { return r.base }

// Offset returns the offset in the module of the next byte to read.
func (r *Reader) Offset() int { return r.base + r.pos }

// Len returns the number of bytes left.
func (r *Reader) Len() int { return len(r.b) - r.pos }

// Fail records an error at the current offset, unless one is recorded.
func (r *Reader) Fail(format string, args ...any) {
	r.failAt(r.pos, fmt.Errorf(format, args...))
}

// failAt records err at index pos of Buf, unless an error is recorded.
func (r *Reader) failAt(pos int, err error) {
	if r.err == nil {
		r.err = &Error{Offset: r.base + pos, Err: err}
	}
}

// Error is a failed read: the offset in the module where it failed, and
// what was wrong there.
type Error struct {
	Offset int
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("at offset %d: %v", e.Offset, e.Err) }

// Unwrap returns what was wrong.
func (e *Error) Unwrap() error { return e.Err }

// Fits reports whether n more bytes are left, failing otherwise.
func (r *Reader) Fits(n uint64) bool {
	if r.err != nil {
		return false
	}
	if n > uint64(r.Len()) {
		r.Fail("length %d exceeds the %d bytes left", n, r.Len())
		return false
	}
	return true
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if !r.Fits(1) {
		return 0
	}
	c := r.b[r.pos]
	r.pos++
	return c
}

// Peek returns the next byte without reading it; false if none is left or
// a read has failed (Peek itself never fails).
func (r *Reader) Peek() (byte, bool) {
	if r.err != nil || r.pos >= len(r.b) {
		return 0, false
	}
	return r.b[r.pos], true
}

// Take reads the next n bytes, returning them without copying (nil if they
// are not there).
func (r *Reader) Take(n uint64) []byte {
	if !r.Fits(n) {
		return nil
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b
}

// Skip reads past the next n bytes.
func (r *Reader) Skip(n uint64) { r.Take(n) }

// Sub reads the next n bytes and returns a Reader of them, whose messages
// name offsets in the module. If they are not there, the returned Reader
// carries r's error.
func (r *Reader) Sub(n uint64) *Reader {
	at := r.pos
	b := r.Take(n)
	return &Reader{b: b, base: r.base + at, err: r.err}
}

// leb runs one of the LEB128 decoders at the current position.
func leb[T any](r *Reader, decode func([]byte) (T, int, error)) T {
	var zero T
	if r.err != nil {
		return zero
	}
	v, n, err := decode(r.b[r.pos:])
	if err != nil {
		r.failAt(r.pos, err)
		return zero
	}
	r.pos += n
	return v
}

// U32 reads an unsigned LEB128 u32.
func (r *Reader) U32() uint32 { return leb(r, U32) }

// U64 reads an unsigned LEB128 u64.
func (r *Reader) U64() uint64 { return leb(r, U64) }

// S32 reads a signed LEB128 s32.
func (r *Reader) S32() int32 { return leb(r, S32) }

// S33 reads a signed LEB128 s33.
func (r *Reader) S33() int64 { return leb(r, S33) }

// S64 reads a signed LEB128 s64.
func (r *Reader) S64() int64 { return leb(r, S64) }

// IsLEB128 reports whether err is about a malformed LEB128 integer.
func IsLEB128(err error) bool {
	var e *LEB128Error
	return errors.As(err, &e)
}
