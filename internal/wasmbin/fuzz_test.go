package wasmbin

import (
	"errors"
	"math/big"
	"testing"
)

// FuzzReader checks the LEB128 decoders against the specification's
// definition, computed with big integers (an encoding of at most ceil(N/7)
// bytes whose value is in range), and walks the input as a module's
// sections, checking that reads never panic, never move backwards and fail
// with an offset inside the input.
func FuzzReader(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00})
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x01\x05\x01\x60\x00\x01\x7f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkLEB(t, "U32", b, 32, false, func(b []byte) (*big.Int, int, error) {
			v, n, err := U32(b)
			return new(big.Int).SetUint64(uint64(v)), n, err
		})
		checkLEB(t, "U64", b, 64, false, func(b []byte) (*big.Int, int, error) {
			v, n, err := U64(b)
			return new(big.Int).SetUint64(v), n, err
		})
		checkLEB(t, "S32", b, 32, true, func(b []byte) (*big.Int, int, error) {
			v, n, err := S32(b)
			return big.NewInt(int64(v)), n, err
		})
		checkLEB(t, "S33", b, 33, true, func(b []byte) (*big.Int, int, error) {
			v, n, err := S33(b)
			return big.NewInt(v), n, err
		})
		checkLEB(t, "S64", b, 64, true, func(b []byte) (*big.Int, int, error) {
			v, n, err := S64(b)
			return big.NewInt(v), n, err
		})
		walk(t, b)
	})
}

// checkLEB compares decode with the specification's definition.
func checkLEB(t *testing.T, name string, b []byte, bits uint, signed bool, decode func([]byte) (*big.Int, int, error)) {
	t.Helper()
	want, wantN, ok := referenceLEB(b, bits, signed)
	got, n, err := decode(b)
	switch {
	case ok && err != nil:
		t.Fatalf("%s(%x): %v, want %v in %d bytes", name, b, err, want, wantN)
	case !ok && err == nil:
		t.Fatalf("%s(%x) = %v in %d bytes, want an error", name, b, got, n)
	case ok && (got.Cmp(want) != 0 || n != wantN):
		t.Fatalf("%s(%x) = %v in %d bytes, want %v in %d", name, b, got, n, want, wantN)
	case err != nil:
		var e *LEB128Error
		if !errors.As(err, &e) || e.Bits != bits || e.Signed != signed || n > len(b) {
			t.Fatalf("%s(%x): error %#v after %d bytes", name, b, err, n)
		}
	}
}

// referenceLEB decodes b as the specification defines an integer of bits
// bits: at most ceil(bits/7) bytes, the value within the type's range.
func referenceLEB(b []byte, bits uint, signed bool) (*big.Int, int, bool) {
	v := new(big.Int)
	for i := 0; i < len(b) && i < int(bits+6)/7; i++ {
		v.Or(v, new(big.Int).Lsh(big.NewInt(int64(b[i]&0x7f)), 7*uint(i)))
		if b[i]&0x80 != 0 {
			continue
		}
		width := 7 * uint(i+1)
		lo, hi := big.NewInt(0), new(big.Int).Lsh(big.NewInt(1), bits) // [lo, hi)
		if signed {
			if b[i]&0x40 != 0 {
				v.Sub(v, new(big.Int).Lsh(big.NewInt(1), width))
			}
			hi.Rsh(hi, 1)
			lo.Neg(hi)
		}
		return v, i + 1, v.Cmp(lo) >= 0 && v.Cmp(hi) < 0
	}
	return nil, 0, false
}

// walk reads b as a module's sections and each section as vectors of
// names, checking the Reader's invariants.
func walk(t *testing.T, b []byte) {
	r := NewReader(b, 0)
	if CheckHeader(b) == nil {
		r.Seek(HeaderLen)
	}
	for r.OK() && r.Len() > 0 {
		before := r.Pos()
		s := r.Section()
		if r.OK() && (r.Pos() <= before || s.At != before || s.Payload.Base()+len(s.Payload.Buf()) != r.Pos()) {
			t.Fatalf("section at %d: at %d, payload at %d of %d bytes, reader now at %d", before, s.At, s.Payload.Base(), len(s.Payload.Buf()), r.Pos())
		}
		if !r.OK() {
			break
		}
		p := s.Payload
		for n := p.Count(); p.OK() && n > 0; n-- {
			at := p.Pos()
			p.Name()
			p.ValueType()
			p.Limits()
			if p.OK() && p.Pos() <= at {
				t.Fatalf("reads at %d did not advance", at)
			}
		}
		checkError(t, p.Err(), p.Base(), p.Base()+len(p.Buf()))
	}
	checkError(t, r.Err(), 0, len(b))
}

// checkError checks that err, if any, is an *Error at an offset in [lo, hi].
func checkError(t *testing.T, err error, lo, hi int) {
	t.Helper()
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Offset < lo || e.Offset > hi {
		t.Fatalf("error %v: want an *Error at an offset in [%d, %d]", err, lo, hi)
	}
}
