package wasmbin

import (
	"errors"
	"math"
	"testing"
)

// TestLEB128 pins the edge cases of the specification's integers: the
// longest encodings, and the encodings one byte too long, with stray unused
// bits, or cut short.
func TestLEB128(t *testing.T) {
	t.Parallel()
	type result struct {
		v       int64 // unsigned readers: the value as uint64, converted
		n       int
		problem LEB128Problem
	}
	for _, c := range []struct {
		name string
		read func([]byte) (int64, int, error)
		in   []byte
		want result
	}{
		// u32
		{"u32 zero", u32, []byte{0x00}, result{0, 1, 0}},
		{"u32 127", u32, []byte{0x7f}, result{127, 1, 0}},
		{"u32 128", u32, []byte{0x80, 0x01}, result{128, 2, 0}},
		{"u32 max, 5 bytes", u32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, result{math.MaxUint32, 5, 0}},
		{"u32 zero padded to 5 bytes", u32, []byte{0x80, 0x80, 0x80, 0x80, 0x00}, result{0, 5, 0}},
		{"u32 in 6 bytes", u32, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, result{0, 5, TooLong}},
		{"u32 max in 6 bytes", u32, []byte{0xff, 0xff, 0xff, 0xff, 0x8f, 0x00}, result{0, 5, TooLong}},
		{"u32 unused bit 4 set", u32, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, result{0, 5, UnusedBits}},
		{"u32 unused bit 6 set", u32, []byte{0x80, 0x80, 0x80, 0x80, 0x40}, result{0, 5, UnusedBits}},
		{"u32 empty", u32, nil, result{0, 0, Truncated}},
		{"u32 truncated", u32, []byte{0x80, 0x80}, result{0, 2, Truncated}},
		{"u32 trailing bytes are not read", u32, []byte{0x01, 0xff}, result{1, 1, 0}},
		// u64
		{"u64 max, 10 bytes", u64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, result{-1, 10, 0}},
		{"u64 unused bits", u64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, result{0, 10, UnusedBits}},
		{"u64 in 11 bytes", u64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, result{0, 10, TooLong}},
		// s32
		{"s32 -1", s32, []byte{0x7f}, result{-1, 1, 0}},
		{"s32 63", s32, []byte{0x3f}, result{63, 1, 0}},
		{"s32 64", s32, []byte{0xc0, 0x00}, result{64, 2, 0}},
		{"s32 -64", s32, []byte{0x40}, result{-64, 1, 0}},
		{"s32 max", s32, []byte{0xff, 0xff, 0xff, 0xff, 0x07}, result{math.MaxInt32, 5, 0}},
		{"s32 min", s32, []byte{0x80, 0x80, 0x80, 0x80, 0x78}, result{math.MinInt32, 5, 0}},
		{"s32 -1 padded to 5 bytes", s32, []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, result{-1, 5, 0}},
		{"s32 positive with unused bits set", s32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, result{0, 5, UnusedBits}},
		{"s32 negative with unused bits clear", s32, []byte{0x80, 0x80, 0x80, 0x80, 0x70}, result{0, 5, UnusedBits}},
		{"s32 in 6 bytes", s32, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, result{0, 5, TooLong}},
		{"s32 truncated", s32, []byte{0xff}, result{0, 1, Truncated}},
		// s33
		{"s33 max", s33, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, result{1<<32 - 1, 5, 0}},
		{"s33 min", s33, []byte{0x80, 0x80, 0x80, 0x80, 0x70}, result{-1 << 32, 5, 0}},
		{"s33 unused bits", s33, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, result{0, 5, UnusedBits}},
		{"s33 in 6 bytes", s33, []byte{0x82, 0x80, 0x80, 0x80, 0x80, 0x00}, result{0, 5, TooLong}},
		// s64
		{"s64 max", s64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, result{math.MaxInt64, 10, 0}},
		{"s64 min", s64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}, result{math.MinInt64, 10, 0}},
		{"s64 last byte 0x01", s64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, result{0, 10, UnusedBits}},
		{"s64 last byte 0x7e", s64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7e}, result{0, 10, UnusedBits}},
		{"s64 in 11 bytes", s64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, result{0, 10, TooLong}},
		{"s64 truncated", s64, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, result{0, 9, Truncated}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v, n, err := c.read(c.in)
			var problem LEB128Problem
			if err != nil {
				var e *LEB128Error
				if !errors.As(err, &e) {
					t.Fatalf("error %v is not a *LEB128Error", err)
				}
				problem = e.Problem
				if e.Read != n {
					t.Errorf("error says %d bytes read, the reader %d", e.Read, n)
				}
			}
			if got := (result{v, n, problem}); got != c.want {
				t.Errorf("got %+v (%v), want %+v", got, err, c.want)
			}
		})
	}
}

func u32(b []byte) (int64, int, error) {
	v, n, err := U32(b)
	return int64(v), n, err
}

func u64(b []byte) (int64, int, error) {
	v, n, err := U64(b)
	return int64(v), n, err
}

func s32(b []byte) (int64, int, error) {
	v, n, err := S32(b)
	return int64(v), n, err
}

func s33(b []byte) (int64, int, error) { return S33(b) }
func s64(b []byte) (int64, int, error) { return S64(b) }

// The readers agree with the encoders the instrumenter and the tests use
// on every value they encode.
func TestLEB128RoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range []int64{0, 1, 63, 64, 127, 128, -1, -64, -65, math.MaxInt32, math.MinInt32, 1<<32 - 1, -1 << 32, math.MaxInt64, math.MinInt64} {
		b := appendSLEB(nil, v)
		if got, n, err := S64(b); err != nil || got != v || n != len(b) {
			t.Errorf("S64(%x) = %d, %d, %v; want %d, %d", b, got, n, err, v, len(b))
		}
		if v >= -1<<32 && v < 1<<32 {
			if got, n, err := S33(b); err != nil || got != v || n != len(b) {
				t.Errorf("S33(%x) = %d, %d, %v; want %d, %d", b, got, n, err, v, len(b))
			}
		}
		u := uint64(v)
		b = appendULEB(nil, u)
		if got, n, err := U64(b); err != nil || got != u || n != len(b) {
			t.Errorf("U64(%x) = %d, %d, %v; want %d, %d", b, got, n, err, u, len(b))
		}
	}
}

func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
