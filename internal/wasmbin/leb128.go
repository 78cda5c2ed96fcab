package wasmbin

import "fmt"

// LEB128Problem says what is wrong with a LEB128 integer.
type LEB128Problem int

// The ways a LEB128 integer can be malformed.
const (
	// Truncated: the input ends before the integer's last byte.
	Truncated LEB128Problem = iota + 1
	// TooLong: the integer's last byte would come after ceil(N/7) bytes.
	TooLong
	// UnusedBits: the last byte's bits beyond the integer's N bits are not
	// zero (unsigned) or not copies of the sign bit (signed).
	UnusedBits
)

// LEB128Error is a malformed LEB128 integer of Bits bits.
type LEB128Error struct {
	Problem LEB128Problem
	Bits    uint // the integer's width: 32, 33 or 64
	Signed  bool
	Read    int // bytes read before the problem was found
}

func (e *LEB128Error) Error() string {
	kind := "unsigned"
	if e.Signed {
		kind = "signed"
	}
	switch e.Problem {
	case Truncated:
		return fmt.Sprintf("%s LEB128 of %d bits truncated after %d bytes", kind, e.Bits, e.Read)
	case TooLong:
		return fmt.Sprintf("LEB128 longer than %d bits (%s, more than %d bytes)", e.Bits, kind, maxBytes(e.Bits))
	case UnusedBits:
		if e.Signed {
			return fmt.Sprintf("signed LEB128 of %d bits: the unused bits of its last byte do not extend its sign", e.Bits)
		}
		return fmt.Sprintf("unsigned LEB128 of %d bits: the unused bits of its last byte are not zero", e.Bits)
	}
	return fmt.Sprintf("%s LEB128 of %d bits: malformed", kind, e.Bits)
}

// maxBytes is ceil(bits/7), the longest encoding of an integer of bits bits.
func maxBytes(bits uint) int { return int(bits+6) / 7 }

// U32 decodes an unsigned LEB128 u32 at the start of b, returning it and
// the number of bytes it takes (at most 5).
func U32(b []byte) (uint32, int, error) {
	v, n, err := uleb(b, 32)
	return uint32(v), n, err
}

// U64 decodes an unsigned LEB128 u64 at the start of b, returning it and
// the number of bytes it takes (at most 10).
func U64(b []byte) (uint64, int, error) { return uleb(b, 64) }

// S32 decodes a signed LEB128 s32 at the start of b, returning it and the
// number of bytes it takes (at most 5).
func S32(b []byte) (int32, int, error) {
	v, n, err := sleb(b, 32)
	return int32(v), n, err
}

// S33 decodes a signed LEB128 s33 (a block type or heap type) at the start
// of b, returning it and the number of bytes it takes (at most 5).
func S33(b []byte) (int64, int, error) { return sleb(b, 33) }

// S64 decodes a signed LEB128 s64 at the start of b, returning it and the
// number of bytes it takes (at most 10).
func S64(b []byte) (int64, int, error) { return sleb(b, 64) }

// uleb decodes an unsigned LEB128 of bits bits (at most 64).
func uleb(b []byte, bits uint) (uint64, int, error) {
	last := maxBytes(bits)
	var v uint64
	for i := 0; ; i++ {
		if i == last {
			return 0, i, &LEB128Error{Problem: TooLong, Bits: bits, Read: i}
		}
		if i == len(b) {
			return 0, i, &LEB128Error{Problem: Truncated, Bits: bits, Read: i}
		}
		c := b[i]
		shift := uint(i) * 7
		if c&0x80 == 0 {
			// The last byte holds bits shift..shift+6; those at or above
			// bits must be zero.
			if used := bits - shift; used < 7 && c>>used != 0 {
				return 0, i + 1, &LEB128Error{Problem: UnusedBits, Bits: bits, Read: i + 1}
			}
			return v | uint64(c)<<shift, i + 1, nil
		}
		v |= uint64(c&0x7f) << shift
	}
}

// sleb decodes a signed LEB128 of bits bits (at most 64).
func sleb(b []byte, bits uint) (int64, int, error) {
	last := maxBytes(bits)
	var v int64
	for i := 0; ; i++ {
		if i == last {
			return 0, i, &LEB128Error{Problem: TooLong, Bits: bits, Signed: true, Read: i}
		}
		if i == len(b) {
			return 0, i, &LEB128Error{Problem: Truncated, Bits: bits, Signed: true, Read: i}
		}
		c := b[i]
		shift := uint(i) * 7
		if c&0x80 != 0 {
			v |= int64(c&0x7f) << shift
			continue
		}
		if used := bits - shift; used < 7 {
			// The bits from the sign bit (used-1) up to bit 6 must all
			// be equal: zero for a positive value, one for a negative.
			if rest := (c & 0x7f) >> (used - 1); rest != 0 && rest != 0x7f>>(used-1) {
				return 0, i + 1, &LEB128Error{Problem: UnusedBits, Bits: bits, Signed: true, Read: i + 1}
			}
		}
		v |= int64(c&0x7f) << shift
		if end := shift + 7; end < 64 && c&0x40 != 0 {
			v |= -1 << end // sign extension
		}
		return v, i + 1, nil
	}
}
