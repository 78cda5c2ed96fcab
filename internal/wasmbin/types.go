package wasmbin

// Value types that are followed by a heap type: (ref null ht) and (ref ht).
const (
	refNull = 0x63
	ref     = 0x64
)

// ValueType reads a value type: one byte, or a reference type (0x63 or
// 0x64) followed by its heap type, an s33. It returns the first byte.
func (r *Reader) ValueType() byte {
	b := r.Byte()
	if (b == refNull || b == ref) && r.OK() {
		r.S33()
	}
	return b
}

// Limits are the limits of a table or memory type.
type Limits struct {
	Flags  byte
	Min    uint64
	Max    uint64
	HasMax bool // bit 0 of Flags: Max is present
}

// Limits reads a limits structure: its flags, its minimum and, if flag bit
// 0 is set, its maximum. Bit 2 (memory64 and table64) makes them u64s;
// otherwise they are u32s.
func (r *Reader) Limits() Limits {
	l := Limits{Flags: r.Byte()}
	read := func() uint64 { return uint64(r.U32()) }
	if l.Flags&4 != 0 {
		read = r.U64
	}
	l.Min = read()
	if l.Flags&1 != 0 {
		l.Max, l.HasMax = read(), true
	}
	return l
}
