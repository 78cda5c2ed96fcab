package instrument

// The code the rewrite injects. Each piece leaves the operand stack as it
// found it, so it is valid wherever an instruction may stand.

// frameWeight estimates the stack a call of a function takes, in the units
// of Options.Stack: a fixed cost for the frame (return address, saved
// registers, spill slots) and a slot per local and parameter.
func (m *module) frameWeight(locals uint64, codeLen int) int32 {
	return int32(frameBase + locals + uint64(codeLen)/frameCodeDivisor)
}

// weight is the fuel a check charges for guarding n bytes of code: n/64,
// within [1, maxWeight].
//
// Why not n: one pass through a function or loop body runs at most its
// bytes, but usually far less. Stock Go compiles each function into one
// loop whose every jump between blocks goes back through the header, so
// charging the whole body per pass made Go guests visit the host every 3µs.
// Charging a 64th keeps the worst case bounded (a loop whose straight-line
// body is all of its bytes runs about 64 × Fuel bytes of code between two
// visits: tens of milliseconds) while ordinary code visits the host every
// 0.2 ms or so (measured: 41 visits in a 7 ms call of the kit's upper).
func weight(n int) int32 {
	return int32(max(1, min(n/weightDivisor, maxWeight)))
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
// runs out; tmp is a scratch i32 local, or noLocal:
//
//	global.get $fuel; i32.const w; i32.sub; local.tee $tmp; global.set $fuel
//	local.get $tmp; i32.const 0; i32.le_s
//	if; i32.const ReasonFuel; call $host; global.set $fuel; end
//
// (without a scratch local, a second global.get replaces local.tee and
// local.get).
func (m *module) appendFuelCheck(out []byte, w int32, tmp uint32) []byte {
	out, at := m.appendFuelCheckPlaceholder(out, tmp)
	putPaddedSLEB(out[at:], uint32(w))
	return out
}

// noLocal says a fuel check has no scratch local.
const noLocal = ^uint32(0)

// appendFuelCheckPlaceholder appends a fuel check whose weight is a
// five-byte placeholder, and returns the placeholder's offset in out, for a
// loop whose weight is known only at its end.
func (m *module) appendFuelCheckPlaceholder(out []byte, tmp uint32) ([]byte, int) {
	out = append(out, opGlobalGet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	out = append(out, opI32Const)
	at := len(out)
	out = append(out, make([]byte, paddedConstLen)...)
	out = append(out, opI32Sub)
	if tmp != noLocal {
		out = append(out, opLocalTee)
		out = appendULEB(out, uint64(tmp))
	}
	out = append(out, opGlobalSet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	if tmp != noLocal {
		out = append(out, opLocalGet)
		out = appendULEB(out, uint64(tmp))
	} else {
		out = append(out, opGlobalGet)
		out = appendULEB(out, uint64(m.fuelGlobal))
	}
	out = append(out, opI32Const, 0, opI32LeS, opIf, blockEmpty, opI32Const, ReasonFuel, opCall)
	out = appendULEB(out, uint64(m.yieldFunc))
	out = append(out, opGlobalSet)
	out = appendULEB(out, uint64(m.fuelGlobal))
	return append(out, opEnd), at
}
