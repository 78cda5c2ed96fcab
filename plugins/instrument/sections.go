package instrument

import (
	"fmt"
	"strings"
)

// rewrite returns the output payload of one section; nil drops it. A
// section with no payload is one the rewrite creates.
func (m *module) rewrite(s section) ([]byte, error) {
	d := &decoder{b: s.payload, base: s.offset}
	var out []byte
	switch s.id {
	case secCustom:
		return m.custom(d)
	case secType:
		out = m.extend(d, 2)
		out = append(out, 0x60, 1, valI32, 1, valI32)         // (i32) -> i32
		out = append(out, 0x60, 3, valI32, valI32, valI32, 0) // (i32, i32, i32) -> ()
	case secImport:
		out = m.extend(d, 1)
		out = appendName(out, m.opt.ImportModule)
		out = appendName(out, m.opt.ImportName)
		out = append(out, KindFunc)
		out = appendULEB(out, uint64(m.yieldType))
	case secGlobal:
		n := m.count(d)
		out = appendULEB(make([]byte, 0, len(s.payload)+32), uint64(n)+2)
		for ; n > 0 && d.ok(); n-- {
			start := d.off
			d.valueType()
			d.byte() // mutability
			out = append(out, d.b[start:d.off]...)
			out = m.constExpr(out, d)
		}
		for _, v := range []int64{Fuel, int64(m.opt.Stack)} {
			out = append(out, valI32, 1, opI32Const) // mutable i32
			out = appendSLEB(out, v)
			out = append(out, opEnd)
		}
	case secExport:
		n := m.count(d)
		out = appendULEB(make([]byte, 0, len(s.payload)+32), uint64(n)+1)
		for ; n > 0 && d.ok(); n-- {
			name := d.name()
			if name == m.opt.StackExport && d.ok() {
				d.fail("export %q: the name is reserved for the host", name)
			}
			kind := d.byte()
			idx := d.u32()
			switch kind {
			case KindFunc:
				m.checkFunc(d, idx)
				idx = m.funcIndex(idx)
			case KindGlobal:
				m.checkGlobal(d, idx)
			}
			out = appendName(out, name)
			out = append(out, kind)
			out = appendULEB(out, uint64(idx))
		}
		out = appendName(out, m.opt.StackExport)
		out = append(out, KindGlobal)
		out = appendULEB(out, uint64(m.stackGlobal))
	case secFunction:
		if !m.hasMemory {
			return s.payload, nil
		}
		out = m.extend(d, 2)
		out = appendULEB(out, uint64(m.bulkType))
		out = appendULEB(out, uint64(m.bulkType))
	case secTable:
		out = m.tables(d)
	case secStart:
		idx := d.u32()
		m.checkFunc(d, idx)
		out = appendULEB(nil, uint64(m.funcIndex(idx)))
	case secElement:
		out = m.elements(d)
	case secCode:
		return m.code(d)
	default:
		return s.payload, nil
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the section's last entry", len(d.b)-d.off)
	}
	return out, d.err
}

// extend copies a vector's entries after its count increased by n.
func (m *module) extend(d *decoder, n uint32) []byte {
	count := m.count(d)
	out := appendULEB(make([]byte, 0, len(d.b)+32), uint64(count)+uint64(n))
	out = append(out, d.b[d.off:]...)
	d.off = len(d.b) // declarations checked the entries
	return out
}

// count reads a vector's count; a section the rewrite creates (nil, unlike
// an empty section in the input, which is malformed) has none.
func (m *module) count(d *decoder) uint32 {
	if d.b == nil {
		return 0
	}
	return d.count()
}

// tables bounds every table's maximum by the host's limit.
func (m *module) tables(d *decoder) []byte {
	n := d.count()
	if total := uint64(n) + uint64(m.importedTables); total > uint64(m.opt.MaxTables) {
		d.fail("%d tables, more than the limit of %d", total, m.opt.MaxTables)
		return nil
	}
	out := appendULEB(nil, uint64(n))
	for ; n > 0 && d.ok(); n-- {
		start := d.off
		d.valueType()
		typ := d.b[start:d.off]
		flags, min, max, hasMax := d.limits()
		if !d.ok() {
			break
		}
		if flags&^1 != 0 {
			d.fail("table limits flags 0x%02x are not WebAssembly 2.0", flags)
			break
		}
		limit := uint64(m.opt.MaxTableElements)
		if min > limit {
			d.fail("a table of %d elements, more than the limit of %d", min, limit)
			break
		}
		if !hasMax || max > limit {
			max = limit
		}
		out = append(out, typ...)
		out = append(out, 1)
		out = appendULEB(out, min)
		out = appendULEB(out, max)
	}
	return out
}

// elements renumbers the functions element segments refer to.
func (m *module) elements(d *decoder) []byte {
	n := d.count()
	out := appendULEB(make([]byte, 0, len(d.b)+16), uint64(n))
	for ; n > 0 && d.ok(); n-- {
		flags := d.u32()
		if flags > 7 {
			d.fail("element segment flags %d", flags)
			break
		}
		out = appendULEB(out, uint64(flags))
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				out = appendULEB(out, uint64(d.u32())) // table index
			}
			out = m.constExpr(out, d)
		}
		if flags&3 != 0 { // element kind or reference type
			start := d.off
			if flags&4 != 0 {
				d.valueType()
			} else {
				d.byte()
			}
			out = append(out, d.b[start:d.off]...)
		}
		items := d.count()
		out = appendULEB(out, uint64(items))
		for ; items > 0 && d.ok(); items-- {
			if flags&4 != 0 {
				out = m.constExpr(out, d)
			} else {
				idx := d.u32()
				m.checkFunc(d, idx)
				out = appendULEB(out, uint64(m.funcIndex(idx)))
			}
		}
	}
	return out
}

// code rewrites every function body.
func (m *module) code(d *decoder) ([]byte, error) {
	n := m.count(d)
	if d.ok() && int(n) != len(m.funcTypes) {
		d.fail("%d bodies for %d functions", n, len(m.funcTypes))
	}
	helpers := uint64(0)
	if m.hasMemory {
		helpers = 2
	}
	out := appendULEB(make([]byte, 0, len(d.b)+len(d.b)/4+256), uint64(n)+helpers)
	r := &bodyRewriter{m: m}
	var body []byte
	for i := uint32(0); i < n && d.ok(); i++ {
		size := d.u32()
		at := d.off
		in := d.bytes(size)
		if d.err != nil {
			break
		}
		t := m.funcTypes[i]
		if int(t) >= len(m.typeParams) {
			d.fail("function %d has type %d; the module declares %d types", m.importedFuncs+i, t, len(m.typeParams))
			break
		}
		var err error
		body, err = r.rewrite(body[:0], in, d.base+at, m.typeParams[t])
		if err != nil {
			return nil, err
		}
		if limit := 2 * m.opt.MaxFunctionBytes; limit > 0 && len(body) > limit {
			return nil, fmt.Errorf("function body at offset %d: %d bytes once instrumented (%d before), more than twice the limit of %d", d.base+at, len(body), len(in), m.opt.MaxFunctionBytes)
		}
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d bytes after the last function body", len(d.b)-d.off)
	}
	if m.hasMemory {
		body = m.fillHelper(body[:0])
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
		body = m.copyHelper(body[:0])
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	return out, d.err
}

// custom keeps a custom section, renumbers the name section, and drops the
// sections that describe code offsets, which the rewrite changes.
func (m *module) custom(d *decoder) ([]byte, error) {
	name := d.name()
	if d.err != nil {
		return nil, d.err
	}
	switch {
	case strings.HasPrefix(name, ".debug_"), name == "sourceMappingURL", name == "external_debug_info":
		return nil, nil
	case name == "name":
		out, err := m.names(d)
		if err != nil {
			// wazero reads the name section for messages only; a malformed
			// one is dropped rather than refused.
			return nil, nil
		}
		return out, nil
	}
	return d.b, nil
}

// names renumbers the function indices of the name section's function,
// local and label name maps.
func (m *module) names(d *decoder) ([]byte, error) {
	out := appendName(make([]byte, 0, len(d.b)+8), "name")
	for d.off < len(d.b) && d.ok() {
		sub := d.byte()
		size := d.u32()
		body := d.bytes(size)
		if d.err != nil {
			break
		}
		s := &decoder{b: body}
		var o []byte
		switch sub {
		case 1: // function names
			n := s.count()
			o = appendULEB(make([]byte, 0, len(body)+8), uint64(n))
			for ; n > 0 && s.ok(); n-- {
				o = appendULEB(o, uint64(m.funcIndex(s.u32())))
				start := s.off
				s.bytes(s.u32())
				o = append(o, body[start:s.off]...)
			}
		case 2, 3: // local names, label names: maps of maps by function
			n := s.count()
			o = appendULEB(make([]byte, 0, len(body)+8), uint64(n))
			for ; n > 0 && s.ok(); n-- {
				o = appendULEB(o, uint64(m.funcIndex(s.u32())))
				start := s.off
				for k := s.count(); k > 0 && s.ok(); k-- {
					s.u32()
					s.bytes(s.u32())
				}
				o = append(o, body[start:s.off]...)
			}
		default:
			o = body
		}
		if s.err == nil && s.off != len(body) && (sub == 1 || sub == 2 || sub == 3) {
			s.fail("trailing bytes")
		}
		if s.err != nil {
			return nil, fmt.Errorf("name subsection %d: %w", sub, s.err)
		}
		out = append(out, sub)
		out = appendULEB(out, uint64(len(o)))
		out = append(out, o...)
	}
	return out, d.err
}
