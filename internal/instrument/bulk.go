package instrument

// The bulk-memory helpers. memory.fill and memory.copy are single
// instructions that may touch the whole memory (hundreds of MiB, with a
// page fault per 4 KiB on first touch): tens of milliseconds without a
// check. The rewrite replaces each with a call to a helper that does the
// same in chunks of bulkChunk bytes, with a fuel check between chunks.
//
// Semantics are kept: a helper first checks the whole range, and when it
// is out of bounds performs the original instruction on it, which traps
// exactly as before without writing anything; an in-bounds copy runs its
// chunks forwards or backwards as the overlap requires.

const (
	fcMemoryCopy = 10
	fcMemoryFill = 11
	// bulkChunk is the size of one chunk, in bytes.
	bulkChunk = 1 << 20
)

// More opcodes the helpers use.
const (
	opBr         = 0x0c
	opBrIf       = 0x0d
	opReturn     = 0x0f
	opLocalSet   = 0x21
	opMemorySize = 0x3f
	opI32LeU     = 0x4d
	opI32Add     = 0x6a
	opI64GtU     = 0x56
	opI64Add     = 0x7c
	opI64Shl     = 0x86
	opI64ExtendU = 0xad
)

// Locals of a helper: its three parameters.
const (
	argDst   = 0
	argSrc   = 1 // memory.copy's source; memory.fill's value
	argCount = 2
)

// appendOutOfBounds appends: if (i64(addr) + i64(n) > i64(memory.size) <<
// 16) { the original instruction; return }.
func appendOutOfBounds(out []byte, addr byte, original []byte) []byte {
	out = append(out,
		opLocalGet, addr, opI64ExtendU, opLocalGet, argCount, opI64ExtendU, opI64Add,
		opMemorySize, 0, opI64ExtendU, opI64Const, 16, opI64Shl,
		opI64GtU, opIf, blockEmpty,
		opLocalGet, argDst, opLocalGet, argSrc, opLocalGet, argCount)
	out = append(out, original...)
	return append(out, opReturn, opEnd)
}

// appendAdvance appends local[l] += bulkChunk.
func appendAdvance(out []byte, l byte) []byte {
	out = append(out, opLocalGet, l, opI32Const)
	out = appendSLEB(out, bulkChunk)
	return append(out, opI32Add, opLocalSet, l)
}

// appendChunks appends a loop that, while count > bulkChunk, runs chunk
// (which finds its operands in the locals) on bulkChunk bytes, then
// advances what step says and charges the fuel; then the rest, with
// count bytes.
func (m *module) appendChunks(out []byte, chunk func([]byte, bool) []byte, step func([]byte) []byte) []byte {
	out = append(out, opBlock, blockEmpty, opLoop, blockEmpty,
		opLocalGet, argCount, opI32Const)
	out = appendSLEB(out, bulkChunk)
	out = append(out, opI32LeU, opBrIf, 1)
	out = chunk(out, true)
	out = step(out)
	out = append(out, opLocalGet, argCount, opI32Const)
	out = appendSLEB(out, bulkChunk)
	out = append(out, opI32Sub, opLocalSet, argCount)
	out = m.appendFuelCheck(out, maxWeight, noLocal)
	out = append(out, opBr, 0, opEnd, opEnd)
	out = chunk(out, false)
	return append(out, opEnd)
}

// fillHelper is memory.fill(dst, value, count) in chunks.
func (m *module) fillHelper(out []byte) []byte {
	out = append(out, 0) // no locals beyond the parameters
	out = appendOutOfBounds(out, argDst, []byte{opPrefixFC, fcMemoryFill, 0})
	return m.appendChunks(out, func(out []byte, whole bool) []byte {
		out = append(out, opLocalGet, argDst, opLocalGet, argSrc)
		if whole {
			out = append(out, opI32Const)
			out = appendSLEB(out, bulkChunk)
		} else {
			out = append(out, opLocalGet, argCount)
		}
		return append(out, opPrefixFC, fcMemoryFill, 0)
	}, func(out []byte) []byte { return appendAdvance(out, argDst) })
}

// copyHelper is memory.copy(dst, src, count) in chunks: forwards when the
// destination is below the source, backwards otherwise, so that no chunk
// overwrites source bytes a later chunk reads.
func (m *module) copyHelper(out []byte) []byte {
	original := []byte{opPrefixFC, fcMemoryCopy, 0, 0}
	out = append(out, 0)
	out = appendOutOfBounds(out, argDst, original)
	out = appendOutOfBounds(out, argSrc, original)
	copyChunk := func(out []byte, whole bool) []byte {
		out = append(out, opLocalGet, argDst, opLocalGet, argSrc)
		if whole {
			out = append(out, opI32Const)
			out = appendSLEB(out, bulkChunk)
		} else {
			out = append(out, opLocalGet, argCount)
		}
		return append(out, original...)
	}
	// Forwards: copy the lowest chunk, then move both addresses up.
	out = append(out, opLocalGet, argDst, opLocalGet, argSrc, opI32LeU, opIf, blockEmpty)
	out = m.appendChunks(out, copyChunk, func(out []byte) []byte {
		return appendAdvance(appendAdvance(out, argDst), argSrc)
	})
	out = out[:len(out)-1] // the helper's end follows the else branch
	out = append(out, opReturn, opEnd)
	// Backwards: copy the highest chunk, at dst+count-chunk, then shrink.
	highest := func(out []byte, whole bool) []byte {
		if !whole {
			return copyChunk(out, false)
		}
		for _, l := range []byte{argDst, argSrc} {
			out = append(out, opLocalGet, l, opLocalGet, argCount, opI32Add, opI32Const)
			out = appendSLEB(out, bulkChunk)
			out = append(out, opI32Sub)
		}
		out = append(out, opI32Const)
		out = appendSLEB(out, bulkChunk)
		return append(out, original...)
	}
	return m.appendChunks(out, highest, func(out []byte) []byte { return out })
}
