package plugins

import (
	"fmt"

	"github.com/weftworks/weft/internal/wasmbin"
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
// It reads the binary through package wasmbin, as the instrumenter does, so
// the two and wazero agree on every integer's length (a u32 in at most five
// bytes).
//
// precheck is not a validator: where it meets a construct it does not know
// (a feature wazero refuses anyway), it stops checking that section and lets
// wazero report the error.
//
// It also refuses a function body larger than the limit (compiling takes
// memory in proportion to the largest function) and a table larger than
// the limit, the configured ones.
func precheck(wasm []byte, lim limits) error {
	if err := wasmbin.CheckHeader(wasm); err != nil {
		return err
	}
	r := wasmbin.NewReader(wasm, 0)
	r.Seek(wasmbin.HeaderLen)
	for r.Len() > 0 {
		sec := r.Section()
		if r.Err() != nil {
			return fmt.Errorf("section header: %w", r.Err())
		}
		if err := checkSection(sec.ID, sec.Payload, lim); err != nil {
			return fmt.Errorf("section %d: %w", sec.ID, err)
		}
	}
	return nil
}

// limits are the configured bounds precheck applies.
type limits struct {
	functionBytes int
	tableElements uint32
}

func checkSection(id byte, s *wasmbin.Reader, lim limits) error {
	switch id {
	case 0: // custom
		name := s.Name()
		if s.OK() && name == "name" {
			if err := checkNames(s); err != nil {
				return err
			}
		}
	case 1: // type
		for n := s.Count(); s.OK() && n > 0; n-- {
			if s.Byte() != 0x60 {
				return s.Err() // rec/sub types: not enabled, wazero refuses
			}
			skipValueTypes(s, s.Count())
			skipValueTypes(s, s.Count())
		}
	case 2: // import
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.Name()
			s.Name()
			if !importDesc(s, lim) {
				return s.Err()
			}
		}
	case 3: // function
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.U32()
		}
	case 4: // table
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.Byte() // reference type
			tableLimits(s, lim)
		}
	case 5: // memory
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.Limits()
		}
	case 6: // global
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.Byte() // value type
			s.Byte() // mutability
			if !constExpr(s) {
				return s.Err()
			}
		}
	case 7: // export
		for n := s.Count(); s.OK() && n > 0; n-- {
			s.Name()
			s.Byte()
			s.U32()
		}
	case 9: // element
		for n := s.Count(); s.OK() && n > 0; n-- {
			if !element(s) {
				return s.Err()
			}
		}
	case 10: // code
		for n := s.Count(); s.OK() && n > 0; n-- {
			size := s.U32()
			if !s.Fits(uint64(size)) {
				break
			}
			if int64(size) > int64(lim.functionBytes) {
				return fmt.Errorf("a function body of %d bytes, more than the limit of %d (plugins.max_function_bytes)", size, lim.functionBytes)
			}
			body := s.Sub(uint64(size))
			var locals uint64
			for d := body.Count(); body.OK() && d > 0; d-- {
				locals += uint64(body.U32())
				body.ValueType()
			}
			if body.Err() != nil {
				return fmt.Errorf("function body: %w", body.Err())
			}
			if locals > maxLocals {
				return fmt.Errorf("a function declares %d locals, more than %d", locals, maxLocals)
			}
		}
	case 11: // data
		for n := s.Count(); s.OK() && n > 0; n-- {
			switch s.U32() {
			case 0:
				if !constExpr(s) {
					return s.Err()
				}
			case 1:
			case 2:
				s.U32()
				if !constExpr(s) {
					return s.Err()
				}
			default:
				return s.Err()
			}
			s.ByteVec()
		}
	case 12: // data count
		if c := s.U32(); s.OK() && uint64(c) > uint64(s.Base()+len(s.Buf())) {
			return fmt.Errorf("data count %d exceeds the module's size", c)
		}
	}
	return s.Err()
}

// checkNames bounds the name section's maps; wazero decodes it eagerly.
func checkNames(s *wasmbin.Reader) error {
	for s.OK() && s.Len() > 0 {
		sub := s.Byte()
		size := s.U32()
		if !s.Fits(uint64(size)) {
			return nil // s's error
		}
		r := s.Sub(uint64(size))
		switch sub {
		case 1: // function names
			for n := r.Count(); r.OK() && n > 0; n-- {
				r.U32()
				r.Name()
			}
		case 2: // local names
			for n := r.Count(); r.OK() && n > 0; n-- {
				r.U32()
				for m := r.Count(); r.OK() && m > 0; m-- {
					r.U32()
					r.Name()
				}
			}
		}
		if r.Err() != nil {
			return fmt.Errorf("name section: %w", r.Err())
		}
	}
	return nil
}

func skipValueTypes(r *wasmbin.Reader, n uint32) {
	for ; r.OK() && n > 0; n-- {
		r.ValueType()
	}
}

func tableLimits(r *wasmbin.Reader, lim limits) {
	if l := r.Limits(); r.OK() && l.Min > uint64(lim.tableElements) {
		r.Fail("a table of %d elements, more than the limit of %d", l.Min, lim.tableElements)
	}
}

// importDesc skips an import's description; false means an unknown kind.
func importDesc(r *wasmbin.Reader, lim limits) bool {
	switch r.Byte() {
	case 0: // function
		r.U32()
	case 1: // table
		r.Byte()
		tableLimits(r, lim)
	case 2: // memory
		r.Limits()
	case 3: // global
		r.Byte()
		r.Byte()
	default:
		return false
	}
	return r.OK()
}

// constExpr skips a constant expression; false means an instruction
// precheck does not know (wazero refuses those in constant expressions).
func constExpr(r *wasmbin.Reader) bool {
	for r.OK() {
		switch op := r.Byte(); op {
		case 0x0b: // end
			return true
		case 0x41: // i32.const
			r.S32()
		case 0x42: // i64.const
			r.S64()
		case 0x43:
			r.Skip(4)
		case 0x44:
			r.Skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			r.U32()
		case 0xd0: // ref.null
			r.S33()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			if r.U32() != 12 {
				return false
			}
			r.Skip(16)
		default:
			return false
		}
	}
	return false
}

// element skips one element segment; false means an unknown layout.
func element(r *wasmbin.Reader) bool {
	flags := r.U32()
	if flags > 7 {
		return false
	}
	if flags&2 != 0 && flags&1 == 0 { // explicit table index
		r.U32()
	}
	if flags&1 == 0 && !constExpr(r) { // active: offset expression
		return false
	}
	if flags&3 != 0 { // element kind or reference type
		r.Byte()
	}
	n := r.Count()
	for ; r.OK() && n > 0; n-- {
		if flags&4 != 0 {
			if !constExpr(r) {
				return false
			}
		} else {
			r.U32()
		}
	}
	return r.OK()
}
