package plugins

import (
	"unicode/utf8"

	"github.com/weftworks/weft/plugins/call"
)

// bounded returns r with each field cut to its limit
// (call.MaxRecordMethodBytes, …), marked Truncated when one was.
func bounded(r call.Request) call.Request {
	var cut [3]bool
	r.Method, cut[0] = cutUTF8(r.Method, call.MaxRecordMethodBytes)
	r.Host, cut[1] = cutUTF8(r.Host, call.MaxRecordHostBytes)
	r.Path, cut[2] = cutUTF8(r.Path, call.MaxRecordPathBytes)
	r.Truncated = r.Truncated || cut[0] || cut[1] || cut[2]
	return r
}

// cutUTF8 returns s cut to at most max bytes at a UTF-8 boundary, and
// whether it was cut.
func cutUTF8(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}
