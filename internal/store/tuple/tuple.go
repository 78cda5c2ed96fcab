// Package tuple is the order-preserving encoding of the stores' composite
// keys: a key is a sequence of components whose encodings, concatenated,
// sort byte-wise as the tuples sort component by component, and no
// component's encoding is a prefix of another's. Both stores use it: bbolt
// for its bucket keys, Redis for the members of its sorted-set indexes.
//
//   - A string is escaped (0x00 becomes 0x00 0xFF) and terminated by
//     0x00 0x01.
//   - A time is its Unix nanoseconds as 8 big-endian bytes with the sign bit
//     flipped, so that times before 1970 sort first.
//   - A number is 8 big-endian bytes.
package tuple

import (
	"encoding/binary"
	"time"
)

// AppendString appends the encoding of s to b.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			b = append(b, 0, 0xFF)
		} else {
			b = append(b, s[i])
		}
	}
	return append(b, 0, 1)
}

// ReadString decodes the string component at the front of b and returns
// it with the rest of b; ok is false when b does not start with one.
func ReadString[B ~string | ~[]byte](b B) (s string, rest B, ok bool) {
	var out []byte
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0 {
			continue
		}
		switch b[i+1] {
		case 1:
			out = append(out, b[:i]...)
			return string(out), b[i+2:], true
		case 0xFF:
			out = append(out, b[:i+1]...)
			b = b[i+2:]
			i = -1
		default:
			return "", rest, false
		}
	}
	return "", rest, false
}

// Times outside int64 nanoseconds, which AppendTime clamps to.
var (
	minTime = time.Unix(0, -1<<63)
	maxTime = time.Unix(0, 1<<63-1)
)

// AppendTime appends the encoding of t to b. Times outside int64
// nanoseconds (before 1678, after 2262) are clamped, so that a timer due
// in the year 3000 sorts last, not before every other.
func AppendTime(b []byte, t time.Time) []byte {
	switch {
	case t.Before(minTime):
		t = minTime
	case t.After(maxTime):
		t = maxTime
	}
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano())^(1<<63))
}

// ReadTime decodes the time component at the front of b, in UTC.
func ReadTime(b []byte) (t time.Time, rest []byte, ok bool) {
	if len(b) < 8 {
		return time.Time{}, nil, false
	}
	n := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
	return time.Unix(0, n).UTC(), b[8:], true
}

// AppendUint64 appends the encoding of v to b.
func AppendUint64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

// PrefixEnd returns the exclusive upper bound of the keys that start with
// p, which must end with a string component: p ends with 0x00 0x01, and
// every key in [p, p[:len-1]+0x02) starts with p.
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	end[len(end)-1] = 2
	return end
}
