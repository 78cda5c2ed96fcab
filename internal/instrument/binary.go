package instrument

import (
	"github.com/weftworks/weft/internal/wasmbin"
)

// blockType reads a block type: empty (0x40), a value type, or a type
// index, which it returns (-1 for the others).
func blockType(d *wasmbin.Reader) int64 {
	c, ok := d.Peek()
	if !ok {
		d.Fits(1) // fails, unless d has failed already
		return -1
	}
	switch {
	case c == 0x40 || (c >= 0x6f && c <= 0x7f):
		d.Byte()
		return -1
	case c == 0x63 || c == 0x64:
		d.ValueType()
		return -1
	}
	at := d.Pos()
	v := d.S33()
	if v < 0 && d.OK() {
		d.Seek(at)
		d.Fail("block type %d is negative", v)
		return -1
	}
	return v
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
