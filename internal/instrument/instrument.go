// Package instrument rewrites a plugin's WebAssembly module before it is
// compiled, so that the host keeps control of the guest without help from
// the compiler: it can stop the guest, and the guest's stack and tables are
// bounded.
//
// The rewrite does three things:
//
//   - Interruption. Every function entry and every loop header subtracts a
//     weight (a 64th of the bytes of code it guards) from a fuel counter (a
//     new global, exported when Options.FuelExport names it, so that the
//     host can measure a call's work); when the counter runs out the
//     guest calls a host function (a new import), which checks the call's
//     context and either refills the counter or stops the guest. Code without loops or calls
//     runs straight through a function body at most once, so the guest
//     never runs longer than about 64 × Fuel bytes of its own code between
//     two visits to the host. Those visits are also
//     where the Go scheduler can preempt the goroutine, which it cannot do
//     inside machine code: without them one guest stalls every garbage
//     collection of the host.
//   - Stack. Every function entry subtracts an estimate of its frame from a
//     stack budget (another new global, exported so that the host sets it
//     before each call) and calls the host function when the budget is
//     spent; after each call instruction the caller puts back its own
//     value. A recursion is stopped long before wazero's own ceiling, which
//     lets one instance keep hundreds of MiB of stack.
//   - Tables. Each table gets a maximum no larger than the host's limit, so
//     that table.grow fails (returns -1) past it instead of growing a slice
//     in the host's heap without bound.
//
// The new import shifts the index of every function the module defines by
// one; the rewrite renumbers every reference (call, ref.func, exports, the
// start function, element segments, global initialisers and the name
// section). Custom sections that describe code offsets (DWARF, source maps)
// no longer match the rewritten code and are dropped.
//
// The rewrite accepts the WebAssembly 2.0 instruction set, which is what
// the host's compiler enables; it never allocates from a count the module
// cannot back, and it never panics on malformed input (FuzzRewrite).
package instrument

import (
	"errors"
	"fmt"

	"github.com/weftworks/weft/internal/wasmbin"
)

// Reasons the injected code passes to the host function.
const (
	// ReasonFuel: the fuel counter ran out. The host function returns the
	// new counter value (normally Fuel) or stops the guest.
	ReasonFuel = 0
	// ReasonStack: the stack budget is spent. The host function must stop
	// the guest; if it returns, the guest traps.
	ReasonStack = 1
)

// Fuel is the counter's initial value and the value the host function
// normally returns. A check charges a 64th of the bytes of code it guards
// (see weight), so the guest visits the host after at most about 64 × Fuel
// bytes of its code: tens of milliseconds in the worst case, about 0.2 ms
// for ordinary code.
const Fuel = 1 << 20

// Version identifies what Rewrite outputs. Bump it with every change that
// makes Rewrite give different bytes, a different Result or a different
// error for some input and Options (a new check, another weight, a
// constant such as Fuel, a renumbering fix): the host caches rewritten
// modules under it, and would otherwise keep loading an older rewrite's
// output.
const Version = 2

// weightDivisor: a check charges one unit per weightDivisor bytes guarded.
const weightDivisor = 64

// maxWeight caps the weight of one check, so that a huge loop body still
// runs the host function at least once every few passes.
const maxWeight = Fuel / 4

// maxLocals is the most locals (parameters included) a function may have
// before the rewrite adds one.
const maxLocals = 1 << 16

// Extern kinds of imports and exports.
const (
	KindFunc   = 0
	KindTable  = 1
	KindMemory = 2
	KindGlobal = 3
)

// Options configures a rewrite.
type Options struct {
	// ImportModule and ImportName name the host function the rewrite
	// imports. Its type is (reason i32) -> i32.
	ImportModule, ImportName string
	// StackExport names the exported mutable i32 global holding the stack
	// budget, which the host sets before each call into the guest.
	StackExport string
	// FuelExport, when not empty, names the exported mutable i32 global
	// holding the fuel counter, so that the host can read how much of it
	// a call used: the guest's work, in units of about 64 bytes of its
	// code run, the same on every run of the same code whatever the
	// machine's load (replays and shadow runs compare versions by it). A module that exports that name
	// already is refused, as for StackExport.
	FuelExport string
	// Stack is the stack budget's initial value, in the units of
	// FrameWeight.
	Stack int32
	// MaxTableElements is the largest maximum any table may have; a table
	// declared with a larger minimum is refused.
	MaxTableElements uint32
	// MaxTables is the most tables a module may declare.
	MaxTables int
	// MaxFunctionBytes, when positive, caps each function body once
	// instrumented at twice its value: compiling takes memory in
	// proportion to the largest body, and the checks the rewrite adds can
	// make a body of nothing but loops or calls several times larger
	// (ordinary code grows by a few percent).
	MaxFunctionBytes int
}

// Import is one import of the input module.
type Import struct {
	Module, Name string
	// Kind is KindFunc, KindTable, KindMemory or KindGlobal.
	Kind byte
}

// Result is a rewritten module.
type Result struct {
	// Wasm is the rewritten module.
	Wasm []byte
	// Imports lists the input module's imports, in order.
	Imports []Import
}

// ErrMalformed is matched by every error about the input module's bytes.
var ErrMalformed = errors.New("instrument: malformed module")

// Error is a failed rewrite: what is wrong with the module, and where.
type Error struct {
	Section string
	Err     error
}

func (e *Error) Error() string { return e.Section + ": " + e.Err.Error() }

// Unwrap returns ErrMalformed and the cause.
func (e *Error) Unwrap() []error { return []error{ErrMalformed, e.Err} }

// Section ids.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
)

var sectionNames = [...]string{"custom", "type", "import", "function", "table", "memory", "global", "export", "start", "element", "code", "data", "data count"}

// order is where a section stands in a module; custom sections have none.
func order(id byte) int {
	switch id {
	case secDataCount:
		return secElement*2 + 1 // between element and code
	default:
		return int(id) * 2
	}
}

type section struct {
	id      byte
	payload []byte
	offset  int // of the payload in the module
}

// module is what the rewrite learned from the input's declarations.
type module struct {
	opt Options

	sections        []section
	typeParams      []uint32 // parameter count of each type
	funcTypes       []uint32 // type index of each defined function
	imports         []Import
	importedFuncs   uint32
	importedGlobals uint32
	importedTables  uint32
	definedGlobals  uint32

	yieldType   uint32 // the new type (i32) -> i32
	yieldFunc   uint32 // the new import's function index
	fuelGlobal  uint32
	stackGlobal uint32

	// hasMemory: the module declares or imports a memory, so the rewrite
	// adds the chunked bulk-memory helpers (see bulk.go), of type
	// bulkType, at function indices fillFunc and fillFunc+1.
	hasMemory bool
	bulkType  uint32
	fillFunc  uint32
}

// Rewrite instruments wasm as the package doc says. An error matches
// ErrMalformed and names the section and offset at fault.
func Rewrite(wasm []byte, opt Options) (*Result, error) {
	m := &module{opt: opt}
	if err := m.split(wasm); err != nil {
		return nil, err
	}
	if err := m.declarations(); err != nil {
		return nil, err
	}
	m.yieldType = uint32(len(m.typeParams))
	m.bulkType = m.yieldType + 1
	m.yieldFunc = m.importedFuncs
	m.fillFunc = m.importedFuncs + 1 + uint32(len(m.funcTypes))
	m.fuelGlobal = m.importedGlobals + m.definedGlobals
	m.stackGlobal = m.fuelGlobal + 1
	out, err := m.emit(make([]byte, 0, len(wasm)+len(wasm)/8+256))
	if err != nil {
		return nil, err
	}
	return &Result{Wasm: out, Imports: m.imports}, nil
}

func (m *module) split(wasm []byte) error {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return &Error{Section: "header", Err: errors.New("not a WebAssembly 1.0 binary")}
	}
	d := wasmbin.NewReader(wasm, 0)
	d.Seek(wasmbin.HeaderLen)
	last := 0
	for d.Len() > 0 {
		sec := d.Section()
		if d.Err() != nil {
			return &Error{Section: "section header", Err: d.Err()}
		}
		id, at, payload := sec.ID, sec.At, sec.Payload.Buf()
		if id > secDataCount {
			return &Error{Section: "section header", Err: fmt.Errorf("at offset %d: unknown section id %d", at, id)}
		}
		if id != secCustom {
			if order(id) <= last {
				return &Error{Section: sectionNames[id] + " section", Err: fmt.Errorf("at offset %d: out of order or repeated", at)}
			}
			last = order(id)
		}
		m.sections = append(m.sections, section{id: id, payload: payload, offset: sec.Payload.Base()})
	}
	return nil
}

// declarations reads what the rewrite needs before it emits anything.
func (m *module) declarations() error {
	for _, s := range m.sections {
		d := wasmbin.NewReader(s.payload, s.offset)
		switch s.id {
		case secType:
			for n := d.Count(); n > 0 && d.OK(); n-- {
				if form := d.Byte(); form != 0x60 && d.OK() {
					d.Seek(d.Pos() - 1)
					d.Fail("type form 0x%02x is not a function type", form)
					break
				}
				params := d.Count()
				for i := uint32(0); i < params && d.OK(); i++ {
					d.ValueType()
				}
				for r := d.Count(); r > 0 && d.OK(); r-- {
					d.ValueType()
				}
				m.typeParams = append(m.typeParams, params)
			}
		case secImport:
			for n := d.Count(); n > 0 && d.OK(); n-- {
				imp := Import{Module: d.Name(), Name: d.Name(), Kind: d.Byte()}
				switch imp.Kind {
				case KindFunc:
					if t := d.U32(); uint64(t) >= uint64(len(m.typeParams)) && d.OK() {
						d.Fail("import %s.%s has type %d; the module declares %d types", imp.Module, imp.Name, t, len(m.typeParams))
					}
					m.importedFuncs++
				case KindTable:
					d.ValueType()
					d.Limits()
					m.importedTables++
				case KindMemory:
					d.Limits()
					m.hasMemory = true
				case KindGlobal:
					d.ValueType()
					d.Byte()
					m.importedGlobals++
				default:
					d.Fail("unknown import kind %d", imp.Kind)
				}
				if d.OK() {
					if imp.Module == m.opt.ImportModule {
						d.Fail("import %s.%s: module %q is reserved for the host", imp.Module, imp.Name, imp.Module)
					}
					m.imports = append(m.imports, imp)
				}
			}
		case secFunction:
			for n := d.Count(); n > 0 && d.OK(); n-- {
				m.funcTypes = append(m.funcTypes, d.U32())
			}
		case secMemory:
			n := d.Count()
			m.hasMemory = m.hasMemory || n > 0
			for ; n > 0 && d.OK(); n-- {
				d.Limits()
			}
		case secData:
			// Copied as it is, but checked: wazero's decoder allocates
			// from the counts before reading the entries.
			for n := d.Count(); n > 0 && d.OK(); n-- {
				switch d.U32() {
				case 0:
					m.constExpr(nil, d)
				case 1:
				case 2:
					d.U32()
					m.constExpr(nil, d)
				default:
					d.Fail("data segment flags")
				}
				d.ByteVec()
			}
		case secDataCount:
			if n := d.U32(); d.OK() && uint64(n) > uint64(len(s.payload)+s.offset) {
				d.Fail("data count %d exceeds the module's size", n)
			}
		case secGlobal:
			m.definedGlobals = d.U32()
		}
		// extend copies these sections' entries as they are: nothing may
		// follow them.
		if d.Err() == nil && (s.id == secType || s.id == secImport || s.id == secFunction) && d.Len() != 0 {
			d.Fail("%d bytes after the section's last entry", d.Len())
		}
		if d.Err() != nil {
			return &Error{Section: sectionNames[s.id] + " section", Err: d.Err()}
		}
	}
	return nil
}

// funcIndex maps a function index of the input to the output.
func (m *module) funcIndex(i uint32) uint32 {
	if i >= m.importedFuncs {
		return i + 1
	}
	return i
}

// emit appends the rewritten module to out.
func (m *module) emit(out []byte) ([]byte, error) {
	out = append(out, "\x00asm\x01\x00\x00\x00"...)
	// The sections the rewrite adds to, created where the module has none.
	added := []byte{secType, secImport, secFunction, secGlobal, secExport, secCode}
	missing := map[byte]bool{secType: true, secImport: true, secGlobal: true, secExport: true}
	if m.hasMemory { // the bulk-memory helpers need a body
		missing[secFunction], missing[secCode] = true, true
	}
	for _, s := range m.sections {
		delete(missing, s.id)
	}
	addMissing := func(before int) error {
		for _, id := range added {
			if missing[id] && order(id) < before {
				payload, err := m.rewrite(section{id: id})
				if err != nil {
					return &Error{Section: sectionNames[id] + " section", Err: err}
				}
				out = appendSection(out, id, payload)
				delete(missing, id)
			}
		}
		return nil
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			if err := addMissing(order(s.id)); err != nil {
				return nil, err
			}
		}
		payload, err := m.rewrite(s)
		if err != nil {
			return nil, &Error{Section: sectionNames[s.id] + " section", Err: err}
		}
		if payload != nil {
			out = appendSection(out, s.id, payload)
		}
	}
	if err := addMissing(1 << 30); err != nil {
		return nil, err
	}
	return out, nil
}

// The frame estimate (see frameWeight), in 8-byte slots: measured on
// wazero's compiler, a frame takes a few slots of its own, one per local,
// and spill slots that grow with the function's size.
const (
	frameBase        = 8
	frameCodeDivisor = 64
)
