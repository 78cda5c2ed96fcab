// Package wasmgen generates valid WebAssembly modules from arbitrary bytes,
// for fuzz targets that need modules that pass validation (mutated bytes
// almost never do): functions with nested blocks, bounded loops, if/else,
// branches and br_table, direct, imported and indirect calls, ref.func,
// memory.fill and memory.copy, a table filled by an element segment, a
// start function and two mutable globals.
//
// Every generated program terminates: loops run at most three times,
// recursion is bounded by a parameter that every call decreases, and calls
// stand only outside loops. The exported "run" (i32) -> i32 returns a hash
// of what ran, so that two engines' runs can be compared.
package wasmgen

// HostFunc is what the generated modules import as env.h in Module mode:
// h(x) = 3x + 1.
func HostFunc(x int32) int32 { return 3*x + 1 }

// Module generates a module that imports env.h (i32) -> i32 and exports
// "run" (i32) -> i32 and "memory".
func Module(data []byte) []byte { return generate(data, false) }

// Plugin generates a Weft plugin (abi/README.md): it imports weft.result,
// exports the ABI's functions and memory, and lists one activity, "run",
// whose output is a one-digit JSON number taken from run(3).
func Plugin(data []byte) []byte { return generate(data, true) }

const (
	typeI32I32 = 0 // (i32) -> i32
	typeVoid   = 1 // () -> ()
	typeResult = 2 // (i32, i32) -> ()
	typeNoArgs = 3 // () -> i32
	typeInvoke = 4 // (i32, i32, i32) -> i32
)

const manifest = `{"activities":[{"name":"run"}]}`

type gen struct {
	data    []byte
	pos     int
	funcs   int // defined functions with the run signature
	imports int
	plugin  bool
}

func (g *gen) next() int {
	if g.pos >= len(g.data) {
		return 0
	}
	b := g.data[g.pos]
	g.pos++
	return int(b)
}

func generate(data []byte, plugin bool) []byte {
	g := &gen{data: data, plugin: plugin, imports: 1}
	g.funcs = 1 + g.next()%4
	run := g.imports       // the first defined function
	start := run + g.funcs // the start function
	var out []byte
	out = append(out, "\x00asm\x01\x00\x00\x00"...)

	out = section(out, 1, vec(5,
		[]byte{0x60, 1, 0x7f, 1, 0x7f},
		[]byte{0x60, 0, 0},
		[]byte{0x60, 2, 0x7f, 0x7f, 0},
		[]byte{0x60, 0, 1, 0x7f},
		[]byte{0x60, 3, 0x7f, 0x7f, 0x7f, 1, 0x7f},
	))
	if plugin {
		out = section(out, 2, vec(1, cat(name("weft"), name("result"), []byte{0, typeResult})))
	} else {
		out = section(out, 2, vec(1, cat(name("env"), name("h"), []byte{0, typeI32I32})))
	}
	types := make([][]byte, 0, g.funcs+5)
	for i := 0; i < g.funcs; i++ {
		types = append(types, []byte{typeI32I32})
	}
	types = append(types, []byte{typeVoid})
	if plugin {
		types = append(types, []byte{typeNoArgs}, []byte{typeI32I32}, []byte{typeNoArgs}, []byte{typeInvoke})
	}
	out = section(out, 3, vec(len(types), types...))
	out = section(out, 4, vec(1, []byte{0x70, 1, byte(g.funcs), byte(g.funcs)}))
	out = section(out, 5, vec(1, []byte{0, 1}))
	out = section(out, 6, vec(2, []byte{0x7f, 1, 0x41, 0, 0x0b}, []byte{0x7f, 1, 0x41, 5, 0x0b}))
	exports := [][]byte{cat(name("memory"), []byte{2, 0})}
	if plugin {
		for i, n := range []string{"weft_abi_version", "weft_alloc", "weft_manifest", "weft_invoke"} {
			exports = append(exports, cat(name(n), []byte{0}, uleb(start+1+i)))
		}
	} else {
		exports = append(exports, cat(name("run"), []byte{0}, uleb(run)))
	}
	out = section(out, 7, vec(len(exports), exports...))
	out = section(out, 8, uleb(start))
	elem := []byte{0, 0x41, 0, 0x0b}
	elem = append(elem, uleb(g.funcs)...)
	for i := 0; i < g.funcs; i++ {
		elem = append(elem, uleb(run+i)...)
	}
	out = section(out, 9, vec(1, elem))

	bodies := make([][]byte, 0, g.funcs+5)
	for i := 0; i < g.funcs; i++ {
		var b []byte
		b = append(b, 1, 4, 0x7f) // four i32 locals: loop counters by depth
		b = g.stmts(b, 0)
		b = append(b, 0x23, 0, 0x20, 0, 0x6a, 0x0b) // global.get 0; local.get 0; i32.add; end
		bodies = append(bodies, sized(b))
	}
	bodies = append(bodies, sized([]byte{0, 0x41, 7, 0x24, 0, 0x0b})) // start: acc = 7
	if plugin {
		bodies = append(bodies,
			sized([]byte{0, 0x41, 1, 0x0b}),          // weft_abi_version
			sized([]byte{0, 0x41, 0x80, 0x08, 0x0b}), // weft_alloc: 1024
			sized(cat([]byte{0, 0x41, 0, 0x41}, sleb(len(manifest)), []byte{ // weft_manifest
				0x10, 0, 0x41, 0, 0x0b})),
			sized(cat([]byte{0, // weft_invoke: store8(512, '0' + run(3) & 7); result(512, 1); 0
				0x41, 0x80, 0x04, 0x41, 3, 0x10}, uleb(run), []byte{0x41, 7, 0x71, 0x41, 0x30, 0x6a, 0x3a, 0, 0,
				0x41, 0x80, 0x04, 0x41, 1, 0x10, 0, 0x41, 0, 0x0b})),
		)
	}
	out = section(out, 10, vec(len(bodies), bodies...))
	if plugin {
		out = section(out, 11, vec(1, cat([]byte{0, 0x41, 0, 0x0b}, name(manifest))))
	}
	return out
}

// stmts appends up to three stack-neutral statements at nesting depth.
func (g *gen) stmts(b []byte, depth int) []byte {
	for n := g.next() % 4; n > 0; n-- {
		b = g.stmt(b, depth)
	}
	return b
}

func (g *gen) stmt(b []byte, depth int) []byte {
	mix := func(b []byte, op byte) []byte { return append(b, 0x23, 0, op, 0x24, 0) } // acc = acc op x
	switch g.next() % 11 {
	case 0: // acc += c
		b = append(b, 0x23, 0, 0x41)
		b = append(b, sleb(g.next()-128)...)
		return append(b, 0x6a, 0x24, 0)
	case 1: // block, maybe left by a branch
		if depth >= 3 {
			return b
		}
		b = append(b, 0x02, 0x40)
		b = g.stmts(b, depth+1)
		if g.next()%2 == 0 {
			b = append(b, 0x0c, 0) // br 0
		}
		return append(b, 0x0b)
	case 2: // a loop that runs 1-3 times on its own counter
		if depth >= 3 {
			return b
		}
		c := byte(1 + depth)
		b = append(b, 0x41, byte(1+g.next()%3), 0x21, c, 0x03, 0x40)
		b = g.stmts(b, depth+1)
		return append(b, 0x20, c, 0x41, 1, 0x6b, 0x22, c, 0x0d, 0, 0x0b)
	case 3: // if p > 0: acc += f(p - 1)
		if depth != 0 {
			return b
		}
		b = append(b, 0x20, 0, 0x04, 0x40, 0x20, 0, 0x41, 1, 0x6b, 0x10)
		b = append(b, uleb(g.imports+g.next()%g.funcs)...)
		return append(mix(b, 0x6a), 0x0b)
	case 4: // acc ^= h(p)
		if g.plugin {
			return b
		}
		b = append(b, 0x20, 0, 0x10, 0)
		return mix(b, 0x73)
	case 5: // if p > 0: acc += table[j](p - 1)
		if depth != 0 {
			return b
		}
		b = append(b, 0x20, 0, 0x04, 0x40, 0x20, 0, 0x41, 1, 0x6b, 0x41)
		b = append(b, sleb(g.next()%g.funcs)...)
		b = append(b, 0x11, typeI32I32, 0)
		return append(mix(b, 0x6a), 0x0b)
	case 6: // if p is odd … else …
		if depth >= 3 {
			return b
		}
		b = append(b, 0x20, 0, 0x41, 1, 0x71, 0x04, 0x40)
		b = g.stmts(b, depth+1)
		b = append(b, 0x05)
		b = g.stmts(b, depth+1)
		return append(b, 0x0b)
	case 8: // memory.fill or memory.copy over a small range, then acc += a word of it
		b = append(b, 0x41)
		b = append(b, sleb(2048+g.next()*8)...)
		b = append(b, 0x41)
		if g.next()%2 == 0 {
			b = append(b, sleb(g.next())...)
			b = append(b, 0x41)
			b = append(b, sleb(g.next()*4)...)
			b = append(b, 0xfc, 11, 0) // memory.fill
		} else {
			b = append(b, sleb(2048+g.next()*8)...)
			b = append(b, 0x41)
			b = append(b, sleb(g.next()*4)...)
			b = append(b, 0xfc, 10, 0, 0) // memory.copy
		}
		b = append(b, 0x41)
		b = append(b, sleb(2048+g.next()*8)...)
		b = append(b, 0x28, 2, 0) // i32.load
		return mix(b, 0x6a)
	case 9: // a br_table on p out of two nested blocks
		b = append(b, 0x02, 0x40, 0x02, 0x40, 0x20, 0, 0x0e, 2, 0, 1, byte(g.next()%2), 0x0b)
		b = append(b, 0x23, 0, 0x41, 3, 0x6a, 0x24, 0, 0x0b) // acc += 3 after the inner block
		return b
	case 10: // g2 += 1; acc ^= g2
		b = append(b, 0x23, 1, 0x41, 1, 0x6a, 0x24, 1, 0x23, 1)
		return mix(b, 0x73)
	default: // acc += ref.is_null(ref.func f)
		b = append(b, 0xd2)
		b = append(b, uleb(g.imports+g.next()%g.funcs)...)
		b = append(b, 0xd1)
		return mix(b, 0x6a)
	}
}

func uleb(v int) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func sleb(v int) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func name(s string) []byte { return append(uleb(len(s)), s...) }

func sized(b []byte) []byte { return append(uleb(len(b)), b...) }

func vec(n int, items ...[]byte) []byte { return append(uleb(n), cat(items...)...) }

func section(out []byte, id byte, payload []byte) []byte {
	out = append(out, id)
	out = append(out, uleb(len(payload))...)
	return append(out, payload...)
}
