package wasmbin

import "fmt"

// The preamble of every module this package reads: the magic and version 1
// of the binary format.
const (
	Magic   = "\x00asm"
	Version = "\x01\x00\x00\x00"
	// HeaderLen is the preamble's length, the offset of the first section.
	HeaderLen = 8
)

// CheckHeader checks the preamble of a module: the magic, then version 1.
func CheckHeader(wasm []byte) error {
	if len(wasm) < HeaderLen || string(wasm[:4]) != Magic {
		return fmt.Errorf("not a WebAssembly binary (no \\0asm magic)")
	}
	if string(wasm[4:HeaderLen]) != Version {
		return fmt.Errorf("binary format version %x, want 1", wasm[4:HeaderLen])
	}
	return nil
}

// Section is one section of a module.
type Section struct {
	ID byte
	// At is the offset in the module of the section's id byte.
	At int
	// Payload is the section's content, after its id and size; Payload's
	// offset in the module is At plus the length of the id and size.
	Payload *Reader
}

// Section reads one section: an id byte, a u32 size and that many bytes.
// The size must fit in what is left. After an error, the Section is the
// zero value.
func (r *Reader) Section() Section {
	at := r.pos
	id := r.Byte()
	size := r.U32()
	if r.err != nil {
		return Section{}
	}
	if uint64(size) > uint64(r.Len()) {
		r.failAt(r.pos, fmt.Errorf("section %d: size %d exceeds the %d bytes left", id, size, r.Len()))
		return Section{}
	}
	return Section{ID: id, At: r.base + at, Payload: r.Sub(uint64(size))}
}
