package wasmbin

import (
	"errors"
	"strings"
	"testing"
)

// Errors name the offset in the module where the read failed, including
// from a Reader of a part of the module.
func TestReaderErrorsNameTheOffset(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		read   func(r *Reader) *Reader // returns the Reader that failed
		in     []byte
		base   int
		offset int
		want   string
	}{
		{"6-byte u32", func(r *Reader) *Reader { r.Byte(); r.U32(); return r }, []byte{0, 0x80, 0x80, 0x80, 0x80, 0x80, 0}, 0, 1, "LEB128 longer than 32 bits"},
		{"unused bits", func(r *Reader) *Reader { r.U32(); return r }, []byte{0xff, 0xff, 0xff, 0xff, 0x7f}, 100, 100, "unused bits"},
		{"truncated", func(r *Reader) *Reader { r.S64(); return r }, []byte{0x80}, 7, 7, "truncated after 1 bytes"},
		{"count", func(r *Reader) *Reader { r.Count(); return r }, []byte{5, 1, 2}, 10, 11, "length 5 exceeds the 2 bytes left"},
		{"name", func(r *Reader) *Reader { r.Name(); return r }, []byte{3, 'a'}, 0, 1, "length 3 exceeds the 1 bytes left"},
		{"sub", func(r *Reader) *Reader { r.Byte(); s := r.Sub(3); s.Byte(); s.U32(); return s }, []byte{0, 0, 0x80, 0x80}, 20, 22, "truncated"},
		{"section size", func(r *Reader) *Reader { r.Section(); return r }, []byte{1, 9, 0}, 8, 10, "section 1: size 9 exceeds the 1 bytes left"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := NewReader(c.in, c.base)
			r = c.read(r)
			var e *Error
			if !errors.As(r.Err(), &e) || e.Offset != c.offset || !strings.Contains(e.Error(), c.want) {
				t.Fatalf("error %v, want one at offset %d containing %q", r.Err(), c.offset, c.want)
			}
			// The first error sticks.
			before := r.Err()
			r.U32()
			r.Fail("later")
			if r.Err() != before || r.U32() != 0 || r.Byte() != 0 {
				t.Errorf("after the error: %v", r.Err())
			}
		})
	}
}

func TestSections(t *testing.T) {
	t.Parallel()
	wasm := []byte("\x00asm\x01\x00\x00\x00\x01\x02\xaa\xbb\x00\x00\x0b\x01\x00")
	if err := CheckHeader(wasm); err != nil {
		t.Fatal(err)
	}
	r := NewReader(wasm, 0)
	r.Seek(HeaderLen)
	var got []Section
	for r.Len() > 0 {
		got = append(got, r.Section())
	}
	if r.Err() != nil || len(got) != 3 {
		t.Fatalf("%d sections, error %v", len(got), r.Err())
	}
	for i, want := range []struct {
		id      byte
		at      int
		payload string
	}{{1, 8, "\xaa\xbb"}, {0, 12, ""}, {11, 14, "\x00"}} {
		s := got[i]
		if s.ID != want.id || s.At != want.at || string(s.Payload.Buf()) != want.payload || s.Payload.Base() != want.at+2 {
			t.Errorf("section %d: id %d at %d, payload %x at %d; want id %d at %d, payload %x", i, s.ID, s.At, s.Payload.Buf(), s.Payload.Base(), want.id, want.at, want.payload)
		}
	}
	for _, bad := range []string{"", "\x00asm", "\x00ASM\x01\x00\x00\x00", "\x00asm\x02\x00\x00\x00"} {
		if CheckHeader([]byte(bad)) == nil {
			t.Errorf("CheckHeader(%q) accepted it", bad)
		}
	}
}

func TestLimitsAndValueTypes(t *testing.T) {
	t.Parallel()
	// (ref null 0x70-as-s33), i32, limits {1, 2}, memory64 limits {2^40}
	r := NewReader([]byte{0x63, 0x70, 0x7f, 0x01, 0x01, 0x02, 0x04, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20}, 0)
	if b := r.ValueType(); b != 0x63 || r.Pos() != 2 {
		t.Errorf("ValueType %#x, at %d", b, r.Pos())
	}
	if b := r.ValueType(); b != 0x7f {
		t.Errorf("ValueType %#x", b)
	}
	if l := r.Limits(); l != (Limits{Flags: 1, Min: 1, Max: 2, HasMax: true}) {
		t.Errorf("Limits %+v", l)
	}
	if l := r.Limits(); l != (Limits{Flags: 4, Min: 1 << 40}) || r.Err() != nil || r.Len() != 0 {
		t.Errorf("Limits %+v, error %v, %d bytes left", l, r.Err(), r.Len())
	}
}
