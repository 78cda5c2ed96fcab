package sdk

// sized reads a value from a host function of the ABI's sized convention,
// "(buf, cap) -> len": the host writes the value into buf only when it
// fits, returns its length either way, and returns -1 when there is no
// value. sized first calls with no buffer, which only asks for the length,
// then once more with a buffer of exactly that length: host calls cost a
// guest far less than a speculative buffer it must allocate and zero, and
// an empty value costs no allocation at all. It reports false when there
// is no value, or when the value grew between the two calls (so that the
// second call wrote nothing).
func sized(call func(buf []byte) int32) ([]byte, bool) {
	n := call(nil)
	switch {
	case n < 0:
		return nil, false
	case n == 0:
		return []byte{}, true
	}
	buf := make([]byte, n)
	if n = call(buf); n < 0 || int(n) > len(buf) {
		return nil, false
	}
	return buf[:n], true
}
