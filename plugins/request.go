package plugins

import (
	"unicode/utf8"

	"github.com/weftworks/weft/plugins/call"
)

// The most bytes of a call.Request's fields, as recorded: a longer value
// is cut at a UTF-8 boundary and the record marked Truncated. With
// maxRecords, they bound what a call's requests add to its attempt's
// history entry (about 1.4 MiB at most).
const (
	maxRecordMethodBytes = 64
	maxRecordHostBytes   = 300
	maxRecordPathBytes   = 1024
)

// maxRecords is how many of a call's requests are recorded: the first
// maxRecords, then one record whose Error is "dropped" and whose other
// fields are empty, which says that the call made more requests (and the
// metrics did not count them). A call makes at most plugins.http.max_requests
// requests, 100 unless configured higher.
const maxRecords = 1000

// bounded returns r with each field cut to its limit
// (maxRecordMethodBytes, …), marked Truncated when one was.
func bounded(r call.Request) call.Request {
	var cut [3]bool
	r.Method, cut[0] = cutUTF8(r.Method, maxRecordMethodBytes)
	r.Host, cut[1] = cutUTF8(r.Host, maxRecordHostBytes)
	r.Path, cut[2] = cutUTF8(r.Path, maxRecordPathBytes)
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
