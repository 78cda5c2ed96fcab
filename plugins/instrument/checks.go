package instrument

// The code the rewrite injects. Each piece leaves the operand stack as it
// found it, so it is valid wherever an instruction may stand.

// frameWeight estimates the stack a call of a function takes, in the units
// of Options.Stack: a fixed cost for the frame (return address, saved
// registers, spill slots) and a slot per local and parameter.
func (m *module) frameWeight(params uint32, locals uint64, codeLen int) int32 {
	return int32(frameBase + locals + uint64(codeLen)/frameCodeDivisor)
}

// clampWeight bounds a fuel weight to [1, maxWeight].
func clampWeight(n int) int32 {
	return int32(max(1, min(n, maxWeight)))
}

// appendStackCheck charges this frame to the stack budget, stopping the
// guest when the budget is spent, and keeps what is left in the local
// saved so that calls can restore it:
//
//	global.get $stack; i32.const w; i32.sub; local.tee $saved
//	i32.const 0; i32.lt_s
//	if; i32.const ReasonStack; call $host; drop; unreachable; end
//	local.get $saved; global.set $stack
func (m *module) appendStackCheck(out []byte, saved uint32, w int32) []byte {
	out = append(out, opGlobalGet)
	out = appendULEB(out, uint64(m.stackGlobal))
	out = append(out, opI32Const)
	out = appendSLEB(out, int64(w))
	out = append(out, opI32Sub, opLocalTee)
	out = appendULEB(out, uint64(saved))
	out = append(out, opI32Const, 0, opI32LtS, opIf, blockEmpty, opI32Const, ReasonStack, opCall)
	out = appendULEB(out, uint64(m.yieldFunc))
	out = append(out, opDrop, opUnreachable, opEnd)
	return m.appendStackRestore(out, saved)
}

// appendStackRestore puts this frame's budget back after a call returns,
// whatever the callee charged:
//
//	local.get $saved; global.set $stack
func (m *module) appendStackRestore(out []byte, saved uint32) []byte {
	out = append(out, opLocalGet)
	out = appendULEB(out, uint64(saved))
	out = append(out, opGlobalSet)
	return appendULEB(out, uint64(m.stackGlobal))
}

// appendFuelCheck charges w to the fuel counter and visits the host when it
// runs out:
//
//	global.get $fuel; i32.const w; i32.sub; global.set $fuel
//	global.get $fuel; i32.const 0; i32.le_s
//	if; i32.const ReasonFuel; call $host; global.set $fuel; end
func (m *module) appendFuelCheck(out []byte, w int32) []byte {
	out, at := m.appendFuelCheckPlaceholder(out)
	putPaddedSLEB(out[at:], uint32(w))
	return out
}

// appendFuelCheckPlaceholder appends a fuel check whose weight is a
// five-byte placeholder, and returns the placeholder's offset in out, for a
// loop whose weight is known only at its end.
func (m *module) appendFuelCheckPlaceholder(out []byte) ([]byte, int) {
	out = append(out, opGlobalGet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	out = append(out, opI32Const)
	at := len(out)
	out = append(out, make([]byte, paddedConstLen)...)
	out = append(out, opI32Sub, opGlobalSet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	out = append(out, opGlobalGet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	out = append(out, opI32Const, 0, opI32LeS, opIf, blockEmpty, opI32Const, ReasonFuel, opCall)
	out = appendULEB(out, uint64(m.yieldFunc))
	out = append(out, opGlobalSet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	return append(out, opEnd), at
}
