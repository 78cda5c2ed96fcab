package wasmbin

// Count reads a vector's length and checks that that many entries of at
// least one byte each fit in what is left, so that no caller allocates from
// a count the module cannot back. It returns 0 after an error.
func (r *Reader) Count() uint32 {
	n := r.U32()
	if !r.Fits(uint64(n)) {
		return 0
	}
	return n
}

// ByteVec reads a vector of bytes (a u32 length, then the bytes), returning
// them without copying.
func (r *Reader) ByteVec() []byte { return r.Take(uint64(r.U32())) }

// Name reads a name: a vector of bytes, as a string. Like wazero, it does
// not check that the bytes are UTF-8.
func (r *Reader) Name() string { return string(r.ByteVec()) }
