package sdk

// sized reads a value from a host function of the ABI's sized convention,
// "(buf, cap) -> len": the host writes the value into buf only when it
// fits, returns its length either way, and returns -1 when there is no
// value. sized tries a buffer of first bytes and, when the value is
// longer, calls once more with a buffer of exactly its length. It reports
// false when there is no value, or when the value grew between the two
// calls (so that the second call wrote nothing).
func sized(call func(buf []byte) int32, first int) ([]byte, bool) {
	buf := make([]byte, first)
	n := call(buf)
	if n < 0 {
		return nil, false
	}
	if int(n) > len(buf) {
		buf = make([]byte, n)
		if n = call(buf); n < 0 || int(n) > len(buf) {
			return nil, false
		}
	}
	return buf[:n], true
}
