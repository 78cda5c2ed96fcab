// Package wasmbin reads the WebAssembly binary format: the one reader that
// the plugin runtime's precheck (plugins/precheck.go) and the instrumenter
// (internal/instrument) share, so that the two, and wazero after them, agree
// on where every integer, name and section ends.
//
// LEB128 integers are read as the specification says (binary format,
// "Integers"): an integer of N bits takes at most ceil(N/7) bytes, and the
// bits of the last byte beyond the N are zero (unsigned) or copies of the
// sign bit (signed). wazero decodes them the same way; a reader that accepted
// a longer encoding would disagree with it on where the next field starts.
//
// A [Reader] keeps its first error and returns zero values after it, so a
// caller checks [Reader.Err] once after a run of reads. Every error names the
// offset in the module at which the read failed. Counts are checked against
// the bytes left before they are returned, so no caller ever allocates from
// a count the module cannot back.
package wasmbin
