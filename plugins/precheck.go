package plugins

import (
	"errors"
	"fmt"
)

// Limits on what a module may declare, checked before wazero decodes it.
const (
	// maxLocals is the most locals one function may declare (V8's limit).
	maxLocals = 50000
)

// precheck walks a module's binary structure and refuses any vector count,
// byte length or table size that cannot fit in the bytes that remain, or
// exceeds the limits above.
//
// # Why
//
// wazero's decoder allocates from counts in the binary before reading the
// entries (make([]Import, count)), so a 20-byte module declaring four billion
// imports would make it allocate hundreds of gigabytes and the Go runtime
// abort the whole host with a fatal out-of-memory error. Every entry of a
// vector takes at least one byte, so a count larger than the bytes left is
// always malformed; refusing it bounds the decoder's allocations by the
// module's size.
//
// Upstream: wazero v1.12.0 sizes these slices from the declared counts
// (internal/wasm/binary/section.go: make([]wasm.Import, vs) and its
// siblings), and so does its main branch as of its August 2025 snapshot.
// No wazero issue tracks it that we could find; one should be filed with
// the modules of TestPrecheckRefusesAllocationBombs as the reproduction.
// Remove the count checks when wazero bounds a count by the bytes left
// (those modules then fail to decode without precheck, instead of
// exhausting memory); keep the body-size and table limits, which are this
// host's policy.
//
// precheck is not a validator: where it meets a construct it does not know
// (a feature wazero refuses anyway), it stops checking that section and lets
// wazero report the error.
//
// It also refuses a function body larger than the limit (compiling takes
// memory in proportion to the largest function) and a table larger than
// the limit, the configured ones.
func precheck(wasm []byte, lim limits) error {
	r := &reader{b: wasm, lim: lim}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return errors.New("not a WebAssembly binary (no \\0asm magic)")
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return fmt.Errorf("binary format version %x, want 1", wasm[4:8])
	}
	r.off = 8
	for r.off < len(r.b) {
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return fmt.Errorf("section header at offset %d: %w", r.off, r.err)
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return fmt.Errorf("section %d at offset %d: size %d exceeds the %d bytes left", id, r.off, size, len(r.b)-r.off)
		}
		s := &reader{b: r.b[:r.off+int(size)], off: r.off, lim: r.lim}
		if err := checkSection(id, s); err != nil {
			return fmt.Errorf("section %d: %w", id, err)
		}
		r.off += int(size)
	}
	return nil
}

func checkSection(id byte, s *reader) error {
	switch id {
	case 0: // custom
		name := s.name()
		if s.err == nil && name == "name" {
			checkNames(s)
		}
	case 1: // type
		for n := s.count(); s.ok() && n > 0; n-- {
			if s.byte() != 0x60 {
				return s.err // rec/sub types: not enabled, wazero refuses
			}
			s.skipValueTypes(s.count())
			s.skipValueTypes(s.count())
		}
	case 2: // import
		for n := s.count(); s.ok() && n > 0; n-- {
			s.name()
			s.name()
			if !s.importDesc() {
				return s.err
			}
		}
	case 3: // function
		for n := s.count(); s.ok() && n > 0; n-- {
			s.u32()
		}
	case 4: // table
		for n := s.count(); s.ok() && n > 0; n-- {
			s.byte() // reference type
			s.tableLimits()
		}
	case 5: // memory
		for n := s.count(); s.ok() && n > 0; n-- {
			s.limits()
		}
	case 6: // global
		for n := s.count(); s.ok() && n > 0; n-- {
			s.byte() // value type
			s.byte() // mutability
			if !s.constExpr() {
				return s.err
			}
		}
	case 7: // export
		for n := s.count(); s.ok() && n > 0; n-- {
			s.name()
			s.byte()
			s.u32()
		}
	case 9: // element
		for n := s.count(); s.ok() && n > 0; n-- {
			if !s.element() {
				return s.err
			}
		}
	case 10: // code
		for n := s.count(); s.ok() && n > 0; n-- {
			size := s.u32()
			if !s.fits(uint64(size)) {
				break
			}
			if int64(size) > int64(s.lim.functionBytes) {
				return fmt.Errorf("a function body of %d bytes, more than the limit of %d (plugins.max_function_bytes)", size, s.lim.functionBytes)
			}
			body := &reader{b: s.b[:s.off+int(size)], off: s.off}
			var locals uint64
			for d := body.count(); body.ok() && d > 0; d-- {
				locals += uint64(body.u32())
				body.valueType()
			}
			if body.err != nil {
				return fmt.Errorf("function body: %w", body.err)
			}
			if locals > maxLocals {
				return fmt.Errorf("a function declares %d locals, more than %d", locals, maxLocals)
			}
			s.off += int(size)
		}
	case 11: // data
		for n := s.count(); s.ok() && n > 0; n-- {
			switch s.u32() {
			case 0:
				if !s.constExpr() {
					return s.err
				}
			case 1:
			case 2:
				s.u32()
				if !s.constExpr() {
					return s.err
				}
			default:
				return s.err
			}
			s.bytes()
		}
	case 12: // data count
		if c := s.u32(); s.ok() && uint64(c) > uint64(len(s.b)) {
			return fmt.Errorf("data count %d exceeds the module's size", c)
		}
	}
	return s.err
}

// checkNames bounds the name section's maps; wazero decodes it eagerly.
func checkNames(s *reader) {
	for s.ok() && s.off < len(s.b) {
		sub := s.byte()
		size := s.u32()
		if !s.fits(uint64(size)) {
			return
		}
		r := &reader{b: s.b[:s.off+int(size)], off: s.off}
		switch sub {
		case 1: // function names
			for n := r.count(); r.ok() && n > 0; n-- {
				r.u32()
				r.name()
			}
		case 2: // local names
			for n := r.count(); r.ok() && n > 0; n-- {
				r.u32()
				for m := r.count(); r.ok() && m > 0; m-- {
					r.u32()
					r.name()
				}
			}
		}
		if r.err != nil {
			s.err = fmt.Errorf("name section: %w", r.err)
			return
		}
		s.off += int(size)
	}
}

// reader decodes the parts of the binary format precheck needs. The first
// error sticks; later reads return zero values.
type reader struct {
	b   []byte
	off int
	err error
	lim limits
}

// limits are the configured bounds precheck applies.
type limits struct {
	functionBytes int
	tableElements uint32
}

func (r *reader) ok() bool { return r.err == nil }

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at offset %d: "+format, append([]any{r.off}, args...)...)
	}
}

// fits reports whether n more bytes are left, failing otherwise.
func (r *reader) fits(n uint64) bool {
	if r.err != nil {
		return false
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("length %d exceeds the %d bytes left", n, len(r.b)-r.off)
		return false
	}
	return true
}

func (r *reader) byte() byte {
	if !r.fits(1) {
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// leb reads an unsigned LEB128 of at most maxBits.
func (r *reader) leb(maxBits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= maxBits+7 {
			r.fail("LEB128 longer than %d bits", maxBits)
			return 0
		}
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint64(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.leb(32)) }
func (r *reader) s33()        { r.leb(33) }
func (r *reader) s64()        { r.leb(64) }

// count reads a vector length and checks that that many entries of at least
// one byte each can fit in what is left.
func (r *reader) count() uint32 {
	n := r.u32()
	r.fits(uint64(n))
	if r.err != nil {
		return 0
	}
	return n
}

func (r *reader) skip(n uint64) {
	if r.fits(n) {
		r.off += int(n)
	}
}

func (r *reader) bytes() { r.skip(uint64(r.u32())) }

func (r *reader) name() string {
	n := uint64(r.u32())
	if !r.fits(n) {
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s
}

func (r *reader) skipValueTypes(n uint32) {
	for ; r.ok() && n > 0; n-- {
		r.valueType()
	}
}

// valueType skips a value type: one byte, or (ref null? ht) with a heap type.
func (r *reader) valueType() {
	if b := r.byte(); (b == 0x63 || b == 0x64) && r.ok() {
		r.s33()
	}
}

func (r *reader) limits() (min uint32) {
	flags := r.byte()
	min = r.u32()
	if flags&1 != 0 {
		r.u32()
	}
	return min
}

func (r *reader) tableLimits() {
	if min := r.limits(); r.ok() && min > r.lim.tableElements {
		r.fail("a table of %d elements, more than the limit of %d", min, r.lim.tableElements)
	}
}

// importDesc skips an import's description; false means an unknown kind.
func (r *reader) importDesc() bool {
	switch r.byte() {
	case 0: // function
		r.u32()
	case 1: // table
		r.byte()
		r.tableLimits()
	case 2: // memory
		r.limits()
	case 3: // global
		r.byte()
		r.byte()
	default:
		return false
	}
	return r.ok()
}

// constExpr skips a constant expression; false means an instruction
// precheck does not know (wazero refuses those in constant expressions).
func (r *reader) constExpr() bool {
	for r.ok() {
		switch op := r.byte(); op {
		case 0x0b: // end
			return true
		case 0x41, 0x42: // i32.const, i64.const
			r.s64()
		case 0x43:
			r.skip(4)
		case 0x44:
			r.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.u32()
		case 0xd0: // ref.null
			r.s33()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			if r.u32() != 12 {
				return false
			}
			r.skip(16)
		default:
			return false
		}
	}
	return false
}

// element skips one element segment; false means an unknown layout.
func (r *reader) element() bool {
	flags := r.u32()
	if flags > 7 {
		return false
	}
	if flags&2 != 0 && flags&1 == 0 { // explicit table index
		r.u32()
	}
	if flags&1 == 0 && !r.constExpr() { // active: offset expression
		return false
	}
	if flags&3 != 0 { // element kind or reference type
		r.byte()
	}
	n := r.count()
	for ; r.ok() && n > 0; n-- {
		if flags&4 != 0 {
			if !r.constExpr() {
				return false
			}
		} else {
			r.u32()
		}
	}
	return r.ok()
}
