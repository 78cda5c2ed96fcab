package runner_test

import (
	"encoding/json"
	"testing"

	"github.com/weftworks/weft/internal/runner"
)

// benchState is a finished three-step instance whose input and steps are
// each an order-sized document, read from JSON as an execution reads it.
func benchState(b *testing.B) *runner.State {
	const doc = `{"id":"o-42","customer":{"name":"Ada","email":"ada@example.com"},"lines":[{"sku":"a-1","qty":2,"price":9.5},{"sku":"b-7","qty":1,"price":120}],"total":139,"paid":true}`
	var st runner.State
	err := json.Unmarshal([]byte(`{"status":"completed","input":`+doc+`,"vars":{"a":`+doc+`,"b":`+doc+`,"c":`+doc+`},`+
		`"root":{"list":"steps","path":"steps","index":3,"done":true},"seq":7,"output":`+doc+`}`), &st)
	if err != nil {
		b.Fatal(err)
	}
	return &st
}

// BenchmarkEncode encodes a finished instance's state as a commit does:
// the document, its vars and its output.
func BenchmarkEncode(b *testing.B) {
	st := benchState(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := st.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}
