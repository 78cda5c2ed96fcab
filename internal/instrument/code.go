package instrument

import (
	"fmt"

	"github.com/weftworks/weft/internal/wasmbin"
)

// Opcodes the rewrite reads or writes.
const (
	opUnreachable  = 0x00
	opBlock        = 0x02
	opLoop         = 0x03
	opIf           = 0x04
	opElse         = 0x05
	opEnd          = 0x0b
	opBrTable      = 0x0e
	opCall         = 0x10
	opCallIndirect = 0x11
	opSelectT      = 0x1c
	opLocalGet     = 0x20
	opLocalTee     = 0x22
	opGlobalGet    = 0x23
	opGlobalSet    = 0x24
	opI32Const     = 0x41
	opI64Const     = 0x42
	opF32Const     = 0x43
	opF64Const     = 0x44
	opI32LtS       = 0x48
	opI32LeS       = 0x4c
	opI32Sub       = 0x6b
	opDrop         = 0x1a
	opRefNull      = 0xd0
	opRefFunc      = 0xd2
	opPrefixFC     = 0xfc
	opPrefixSIMD   = 0xfd
	blockEmpty     = 0x40
	valI32         = 0x7f
)

// paddedConstLen is the length of an i32.const immediate written as a
// five-byte LEB128, so that a weight can be patched in once known.
const paddedConstLen = 5

// putPaddedSLEB writes v (0 ≤ v < 2^31) as a five-byte signed LEB128.
func putPaddedSLEB(b []byte, v uint32) {
	for i := 0; i < 4; i++ {
		b[i] = byte(v&0x7f) | 0x80
		v >>= 7
	}
	b[4] = byte(v & 0x7f)
}

// bodyRewriter rewrites function bodies. One is used for a whole code
// section, so its buffers are reused from body to body.
type bodyRewriter struct {
	m *module
	// loops holds, for each open block, the output offset of its weight's
	// placeholder and the input offset where its body starts; -1 for a
	// block that is not a loop.
	frames []frame
}

type frame struct {
	patch int // output offset of the loop's weight placeholder, or -1
	start int // input offset of the loop's body
}

// rewrite appends the instrumented form of one function body (without its
// size prefix) to out. body is the input body, base its offset in the
// module (for messages), params the function's parameter count.
func (r *bodyRewriter) rewrite(out []byte, body []byte, base int, params uint32) ([]byte, error) {
	m := r.m
	d := wasmbin.NewReader(body, base)
	groups := d.Count()
	groupsAt := d.Pos()
	locals := uint64(params)
	for i := uint32(0); i < groups && d.OK(); i++ {
		locals += uint64(d.U32())
		d.ValueType()
	}
	if d.Err() != nil {
		return out, fmt.Errorf("function body: locals: %w", d.Err())
	}
	if locals+2 > maxLocals {
		return out, fmt.Errorf("function body at offset %d: %d locals, more than %d", base, locals, maxLocals-2)
	}
	// Two new locals: this frame's stack budget, and a scratch i32 for the
	// fuel checks.
	saved, tmp := uint32(locals), uint32(locals)+1
	out = appendULEB(out, uint64(groups)+1)
	out = append(out, body[groupsAt:d.Pos()]...)
	out = append(out, 2, valI32)

	code := d.Pos()
	out = m.appendStackCheck(out, saved, m.frameWeight(locals, len(body)-code))
	out = m.appendFuelCheck(out, weight(len(body)-code), tmp)

	r.frames = append(r.frames[:0], frame{patch: -1})
	copied := code // input bytes before copied are in out
	for d.Len() > 0 && d.OK() {
		at := d.Pos()
		op := d.Byte()
		switch op {
		case opBlock, opIf:
			m.checkBlockType(d, blockType(d))
			r.frames = append(r.frames, frame{patch: -1})
		case opLoop:
			m.checkBlockType(d, blockType(d))
			out = append(out, body[copied:d.Pos()]...)
			copied = d.Pos()
			var patch int
			out, patch = m.appendFuelCheckPlaceholder(out, tmp)
			r.frames = append(r.frames, frame{patch: patch, start: d.Pos()})
		case opEnd:
			f := r.frames[len(r.frames)-1]
			r.frames = r.frames[:len(r.frames)-1]
			if f.patch >= 0 {
				putPaddedSLEB(out[f.patch:], uint32(weight(at-f.start)))
			}
			if len(r.frames) == 0 && d.Len() != 0 {
				d.Fail("instructions after the end of the function")
			}
		case opLocalGet, opLocalSet, opLocalTee:
			// Checked here: the rewrite adds locals, which an index out of
			// range in the input would name.
			if idx := d.U32(); uint64(idx) >= locals && d.OK() {
				d.Fail("local %d of a function with %d", idx, locals)
			}
		case opGlobalGet, opGlobalSet:
			m.checkGlobal(d, d.U32())
		case opCall:
			idx := d.U32()
			m.checkFunc(d, idx)
			if d.Err() != nil {
				break
			}
			out = append(out, body[copied:at]...)
			out = append(out, opCall)
			out = appendULEB(out, uint64(m.funcIndex(idx)))
			copied = d.Pos()
			out = m.appendStackRestore(out, saved)
		case opCallIndirect:
			m.checkType(d, d.U32())
			d.U32()
			if d.Err() != nil {
				break
			}
			out = append(out, body[copied:d.Pos()]...)
			copied = d.Pos()
			out = m.appendStackRestore(out, saved)
		case opRefFunc:
			idx := d.U32()
			m.checkFunc(d, idx)
			if d.Err() != nil {
				break
			}
			out = append(out, body[copied:at]...)
			out = append(out, opRefFunc)
			out = appendULEB(out, uint64(m.funcIndex(idx)))
			copied = d.Pos()
		case opPrefixFC:
			sub := d.U32()
			if (sub != fcMemoryCopy && sub != fcMemoryFill) || !m.hasMemory {
				d.Seek(at + 1)
				skipFC(d)
				break
			}
			// A bulk operation over hundreds of MiB would run for a long
			// time without a check: it goes through a chunked helper.
			helper := m.fillFunc
			if sub == fcMemoryCopy {
				m.checkMemory(d, d.U32())
				helper++
			}
			m.checkMemory(d, d.U32())
			if d.Err() != nil {
				break
			}
			out = append(out, body[copied:at]...)
			out = append(out, opCall)
			out = appendULEB(out, uint64(helper))
			copied = d.Pos()
		default:
			skipImmediates(d, op)
		}
	}
	if d.Err() != nil {
		return out, fmt.Errorf("function body: %w", d.Err())
	}
	if len(r.frames) != 0 {
		return out, fmt.Errorf("function body at offset %d: ends inside a block", base)
	}
	return append(out, body[copied:]...), nil
}

// skipImmediates skips the immediates of op, which was just read, failing
// on an opcode outside the features the host enables (WebAssembly 2.0).
func skipImmediates(d *wasmbin.Reader, op byte) {
	switch {
	case op == opUnreachable || op == 0x01 || op == opElse || op == 0x0f || op == opDrop || op == 0x1b:
	case op == 0x0c || op == 0x0d: // br, br_if
		d.U32()
	case op == opBrTable:
		for n := d.Count(); n > 0 && d.OK(); n-- {
			d.U32()
		}
		d.U32()
	case op == opSelectT:
		for n := d.Count(); n > 0 && d.OK(); n-- {
			d.ValueType()
		}
	case op == 0x25 || op == 0x26: // table.get, table.set
		d.U32()
	case op >= 0x28 && op <= 0x3e: // loads and stores
		memarg(d)
	case op == 0x3f || op == 0x40: // memory.size, memory.grow
		d.U32()
	case op == opI32Const:
		d.S32()
	case op == opI64Const:
		d.S64()
	case op == opF32Const:
		d.Skip(4)
	case op == opF64Const:
		d.Skip(8)
	case op >= 0x45 && op <= 0xc4: // numeric, sign extension
	case op == opRefNull:
		d.ValueType()
	case op == 0xd1: // ref.is_null
	case op == opPrefixFC:
		skipFC(d)
	case op == opPrefixSIMD:
		skipSIMD(d)
	default:
		d.Seek(d.Pos() - 1)
		d.Fail("opcode 0x%02x is not a WebAssembly 2.0 instruction", op)
	}
}

func memarg(d *wasmbin.Reader) {
	if align := d.U32(); align&0x40 != 0 { // multi-memory: a memory index follows
		d.U32()
	}
	d.U64()
}

func skipFC(d *wasmbin.Reader) {
	switch sub := d.U32(); {
	case sub <= 7: // saturating truncations
	case sub == 8: // memory.init
		d.U32()
		d.U32()
	case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		d.U32()
	case sub == 10, sub == 12, sub == 14: // memory.copy, table.init, table.copy
		d.U32()
		d.U32()
	default:
		d.Fail("instruction 0xfc %d is not a WebAssembly 2.0 instruction", sub)
	}
}

func skipSIMD(d *wasmbin.Reader) {
	// One byte, as wazero reads it (it reads the canonical two-byte
	// encoding of an opcode over 127 as that opcode and a nop).
	switch sub := uint32(d.Byte()); {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		memarg(d)
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		d.Skip(16)
	case sub >= 21 && sub <= 34: // lane extraction and replacement
		d.Byte()
	case sub >= 84 && sub <= 91: // lane loads and stores
		memarg(d)
		d.Byte()
	case sub <= 255: // no immediates; wazero refuses the unassigned ones
	default:
		d.Fail("instruction 0xfd %d is not a WebAssembly 2.0 instruction", sub)
	}
}

// constExpr rewrites a constant expression (ending with end), remapping
// ref.func, and appends it to out.
func (m *module) constExpr(out []byte, d *wasmbin.Reader) []byte {
	start := d.Pos()
	copied := start
	for d.OK() {
		at := d.Pos()
		switch op := d.Byte(); op {
		case opEnd:
			return append(out, d.Buf()[copied:d.Pos()]...)
		case opRefFunc:
			idx := d.U32()
			m.checkFunc(d, idx)
			out = append(out, d.Buf()[copied:at]...)
			out = append(out, opRefFunc)
			out = appendULEB(out, uint64(m.funcIndex(idx)))
			copied = d.Pos()
		case opI32Const:
			d.S32()
		case opI64Const:
			d.S64()
		case opF32Const:
			d.Skip(4)
		case opF64Const:
			d.Skip(8)
		case opGlobalGet:
			m.checkGlobal(d, d.U32())
		case opRefNull:
			d.ValueType()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case opPrefixSIMD:
			if d.Byte() != 12 {
				d.Fail("only v128.const is allowed in a constant expression")
			}
			d.Skip(16)
		default:
			d.Seek(d.Pos() - 1)
			d.Fail("opcode 0x%02x is not allowed in a constant expression", op)
		}
	}
	return out
}

// The rewrite adds a function import, functions, globals, locals and types
// at the end of their index spaces: an index that was out of range in the
// input would name them in the output, where wazero would accept it. Every
// index into those spaces is checked against the input's own.

func (m *module) checkFunc(d *wasmbin.Reader, idx uint32) {
	if n := uint64(m.importedFuncs) + uint64(len(m.funcTypes)); uint64(idx) >= n && d.OK() {
		d.Fail("function %d of a module with %d", idx, n)
	}
}

func (m *module) checkGlobal(d *wasmbin.Reader, idx uint32) {
	if n := uint64(m.importedGlobals) + uint64(m.definedGlobals); uint64(idx) >= n && d.OK() {
		d.Fail("global %d of a module with %d", idx, n)
	}
}

func (m *module) checkType(d *wasmbin.Reader, idx uint32) {
	if uint64(idx) >= uint64(len(m.typeParams)) && d.OK() {
		d.Fail("type %d of a module with %d", idx, len(m.typeParams))
	}
}

func (m *module) checkBlockType(d *wasmbin.Reader, idx int64) {
	if idx >= 0 {
		m.checkType(d, uint32(min(idx, 1<<32-1)))
	}
}

// checkMemory refuses a memory index other than 0, which WebAssembly 2.0
// has no other of.
func (m *module) checkMemory(d *wasmbin.Reader, idx uint32) {
	if idx != 0 && d.OK() {
		d.Fail("memory %d of a module with one", idx)
	}
}
