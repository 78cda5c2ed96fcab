package instrument

import (
	"fmt"
)

// decoder reads the WebAssembly binary format. The first error sticks: later
// reads return zero values, so a caller checks err once after a run of reads.
type decoder struct {
	b   []byte
	off int
	err error
	// base is added to offsets in error messages, so that a decoder over a
	// section's bytes reports offsets in the module.
	base int
}

func (d *decoder) ok() bool { return d.err == nil }

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("at offset %d: %s", d.base+d.off, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) left() int { return len(d.b) - d.off }

func (d *decoder) fits(n uint64) bool {
	if d.err != nil {
		return false
	}
	if n > uint64(d.left()) {
		d.fail("length %d exceeds the %d bytes left", n, d.left())
		return false
	}
	return true
}

func (d *decoder) byte() byte {
	if !d.fits(1) {
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (d *decoder) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		// At most ceil(bits/7) bytes, as wazero reads them: a longer
		// encoding read here would make the two disagree on where the
		// next instruction starts.
		if shift >= bits {
			d.fail("LEB128 longer than %d bits", bits)
			return 0
		}
		c := d.byte()
		if d.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb skips a signed LEB128 of at most bits bits.
func (d *decoder) sleb(bits uint) { d.uleb(bits) }

func (d *decoder) u32() uint32 { return uint32(d.uleb(32)) }

// count reads a vector length and checks that that many entries of at least
// one byte each fit in what is left, so that no caller ever allocates from a
// count the module cannot back.
func (d *decoder) count() uint32 {
	n := d.u32()
	if !d.fits(uint64(n)) {
		return 0
	}
	return n
}

func (d *decoder) bytes(n uint32) []byte {
	if !d.fits(uint64(n)) {
		return nil
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) name() string { return string(d.bytes(d.u32())) }

// valueType skips a value type: one byte, or a reference type with a heap
// type, and returns its first byte.
func (d *decoder) valueType() byte {
	b := d.byte()
	if b == 0x63 || b == 0x64 {
		d.sleb(33)
	}
	return b
}

// blockType reads a block type: empty (0x40), a value type, or a type
// index, which it returns (-1 for the others).
func (d *decoder) blockType() int64 {
	if !d.fits(1) {
		return -1
	}
	switch c := d.b[d.off]; {
	case c == 0x40 || (c >= 0x6f && c <= 0x7f):
		d.off++
		return -1
	case c == 0x63 || c == 0x64:
		d.valueType()
		return -1
	}
	start := d.off
	v := d.uleb(33)
	if n := uint(d.off-start) * 7; n < 64 && v&(1<<(n-1)) != 0 {
		d.fail("block type %d is negative", int64(v)-int64(1)<<n)
		return -1
	}
	return int64(v)
}

// limits reads a limits structure: its flags, minimum and maximum.
func (d *decoder) limits() (flags byte, min, max uint64, hasMax bool) {
	flags = d.byte()
	bits := uint(32)
	if flags&4 != 0 { // memory64
		bits = 64
	}
	min = d.uleb(bits)
	if flags&1 != 0 {
		max, hasMax = d.uleb(bits), true
	}
	return
}

// appendULEB appends v as an unsigned LEB128.
func appendULEB(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v != 0 {
			b = append(b, c|0x80)
			continue
		}
		return append(b, c)
	}
}

// appendSLEB appends v as a signed LEB128.
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

func appendName(b []byte, s string) []byte {
	b = appendULEB(b, uint64(len(s)))
	return append(b, s...)
}

// appendSection appends a section with its id and size.
func appendSection(b []byte, id byte, payload []byte) []byte {
	b = append(b, id)
	b = appendULEB(b, uint64(len(payload)))
	return append(b, payload...)
}
