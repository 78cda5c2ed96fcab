package instrument

import (
	"fmt"
	"strings"

	"github.com/weftworks/weft/internal/wasmbin"
)

// rewrite returns the output payload of one section; nil drops it. A
// section with no payload is one the rewrite creates.
func (m *module) rewrite(s section) ([]byte, error) {
	d := wasmbin.NewReader(s.payload, s.offset)
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
		for ; n > 0 && d.OK(); n-- {
			start := d.Pos()
			d.ValueType()
			d.Byte() // mutability
			out = append(out, d.Buf()[start:d.Pos()]...)
			out = m.constExpr(out, d)
		}
		for _, v := range []int64{Fuel, int64(m.opt.Stack)} {
			out = append(out, valI32, 1, opI32Const) // mutable i32
			out = appendSLEB(out, v)
			out = append(out, opEnd)
		}
	case secExport:
		n := m.count(d)
		added := uint64(1)
		if m.opt.FuelExport != "" {
			added++
		}
		out = appendULEB(make([]byte, 0, len(s.payload)+32), uint64(n)+added)
		for ; n > 0 && d.OK(); n-- {
			name := d.Name()
			if (name == m.opt.StackExport || m.opt.FuelExport != "" && name == m.opt.FuelExport) && d.OK() {
				d.Fail("export %q: the name is reserved for the host", name)
			}
			kind := d.Byte()
			idx := d.U32()
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
		if m.opt.FuelExport != "" {
			out = appendName(out, m.opt.FuelExport)
			out = append(out, KindGlobal)
			out = appendULEB(out, uint64(m.fuelGlobal))
		}
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
		idx := d.U32()
		m.checkFunc(d, idx)
		out = appendULEB(nil, uint64(m.funcIndex(idx)))
	case secElement:
		out = m.elements(d)
	case secCode:
		return m.code(d)
	default:
		return s.payload, nil
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d bytes after the section's last entry", d.Len())
	}
	return out, d.Err()
}

// extend copies a vector's entries after its count increased by n.
func (m *module) extend(d *wasmbin.Reader, n uint32) []byte {
	count := m.count(d)
	out := appendULEB(make([]byte, 0, len(d.Buf())+32), uint64(count)+uint64(n))
	out = append(out, d.Buf()[d.Pos():]...)
	d.Seek(len(d.Buf())) // declarations checked the entries
	return out
}

// count reads a vector's count; a section the rewrite creates (nil, unlike
// an empty section in the input, which is malformed) has none.
func (m *module) count(d *wasmbin.Reader) uint32 {
	if d.Buf() == nil {
		return 0
	}
	return d.Count()
}

// tables bounds every table's maximum by the host's limit.
func (m *module) tables(d *wasmbin.Reader) []byte {
	n := d.Count()
	if total := uint64(n) + uint64(m.importedTables); total > uint64(m.opt.MaxTables) {
		d.Fail("%d tables, more than the limit of %d", total, m.opt.MaxTables)
		return nil
	}
	out := appendULEB(nil, uint64(n))
	for ; n > 0 && d.OK(); n-- {
		start := d.Pos()
		d.ValueType()
		typ := d.Buf()[start:d.Pos()]
		l := d.Limits()
		flags, min, max := l.Flags, l.Min, l.Max
		if !d.OK() {
			break
		}
		if flags&^1 != 0 {
			d.Fail("table limits flags 0x%02x are not WebAssembly 2.0", flags)
			break
		}
		limit := uint64(m.opt.MaxTableElements)
		if min > limit {
			d.Fail("a table of %d elements, more than the limit of %d", min, limit)
			break
		}
		if !l.HasMax || max > limit {
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
func (m *module) elements(d *wasmbin.Reader) []byte {
	n := d.Count()
	out := appendULEB(make([]byte, 0, len(d.Buf())+16), uint64(n))
	for ; n > 0 && d.OK(); n-- {
		flags := d.U32()
		if flags > 7 {
			d.Fail("element segment flags %d", flags)
			break
		}
		out = appendULEB(out, uint64(flags))
		if flags&1 == 0 { // active
			if flags&2 != 0 {
				out = appendULEB(out, uint64(d.U32())) // table index
			}
			out = m.constExpr(out, d)
		}
		if flags&3 != 0 { // element kind or reference type
			start := d.Pos()
			if flags&4 != 0 {
				d.ValueType()
			} else {
				d.Byte()
			}
			out = append(out, d.Buf()[start:d.Pos()]...)
		}
		items := d.Count()
		out = appendULEB(out, uint64(items))
		for ; items > 0 && d.OK(); items-- {
			if flags&4 != 0 {
				out = m.constExpr(out, d)
			} else {
				idx := d.U32()
				m.checkFunc(d, idx)
				out = appendULEB(out, uint64(m.funcIndex(idx)))
			}
		}
	}
	return out
}

// code rewrites every function body.
func (m *module) code(d *wasmbin.Reader) ([]byte, error) {
	n := m.count(d)
	if d.OK() && int(n) != len(m.funcTypes) {
		d.Fail("%d bodies for %d functions", n, len(m.funcTypes))
	}
	helpers := uint64(0)
	if m.hasMemory {
		helpers = 2
	}
	out := appendULEB(make([]byte, 0, len(d.Buf())+len(d.Buf())/4+256), uint64(n)+helpers)
	r := &bodyRewriter{m: m}
	var body []byte
	for i := uint32(0); i < n && d.OK(); i++ {
		size := d.U32()
		at := d.Pos()
		in := d.Take(uint64(size))
		if d.Err() != nil {
			break
		}
		t := m.funcTypes[i]
		if int(t) >= len(m.typeParams) {
			d.Fail("function %d has type %d; the module declares %d types", m.importedFuncs+i, t, len(m.typeParams))
			break
		}
		var err error
		body, err = r.rewrite(body[:0], in, d.Base()+at, m.typeParams[t])
		if err != nil {
			return nil, err
		}
		if limit := 2 * m.opt.MaxFunctionBytes; limit > 0 && len(body) > limit {
			return nil, fmt.Errorf("function body at offset %d: %d bytes once instrumented (%d before), more than twice the limit of %d", d.Base()+at, len(body), len(in), m.opt.MaxFunctionBytes)
		}
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail("%d bytes after the last function body", d.Len())
	}
	if m.hasMemory {
		body = m.fillHelper(body[:0])
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
		body = m.copyHelper(body[:0])
		out = appendULEB(out, uint64(len(body)))
		out = append(out, body...)
	}
	return out, d.Err()
}

// custom keeps a custom section, renumbers the name section, and drops the
// sections that describe code offsets, which the rewrite changes.
func (m *module) custom(d *wasmbin.Reader) ([]byte, error) {
	name := d.Name()
	if d.Err() != nil {
		return nil, d.Err()
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
	return d.Buf(), nil
}

// names renumbers the function indices of the name section's function,
// local and label name maps.
func (m *module) names(d *wasmbin.Reader) ([]byte, error) {
	out := appendName(make([]byte, 0, len(d.Buf())+8), "name")
	for d.Len() > 0 && d.OK() {
		sub := d.Byte()
		size := d.U32()
		body := d.Take(uint64(size))
		if d.Err() != nil {
			break
		}
		s := wasmbin.NewReader(body, d.Offset()-len(body))
		var o []byte
		switch sub {
		case 1: // function names
			n := s.Count()
			o = appendULEB(make([]byte, 0, len(body)+8), uint64(n))
			for ; n > 0 && s.OK(); n-- {
				o = appendULEB(o, uint64(m.funcIndex(s.U32())))
				start := s.Pos()
				s.ByteVec()
				o = append(o, body[start:s.Pos()]...)
			}
		case 2, 3: // local names, label names: maps of maps by function
			n := s.Count()
			o = appendULEB(make([]byte, 0, len(body)+8), uint64(n))
			for ; n > 0 && s.OK(); n-- {
				o = appendULEB(o, uint64(m.funcIndex(s.U32())))
				start := s.Pos()
				for k := s.Count(); k > 0 && s.OK(); k-- {
					s.U32()
					s.ByteVec()
				}
				o = append(o, body[start:s.Pos()]...)
			}
		default:
			o = body
		}
		if s.Err() == nil && s.Pos() != len(body) && (sub == 1 || sub == 2 || sub == 3) {
			s.Fail("trailing bytes")
		}
		if s.Err() != nil {
			return nil, fmt.Errorf("name subsection %d: %w", sub, s.Err())
		}
		out = append(out, sub)
		out = appendULEB(out, uint64(len(o)))
		out = append(out, o...)
	}
	return out, d.Err()
}
