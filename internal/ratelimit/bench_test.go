package ratelimit_test

import (
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// BenchmarkReserve is the core's cost per decision, on a busy key whose
// calls alternate between granted and refused.
func BenchmarkReserve(b *testing.B) {
	l := ratelimit.Limit{Count: 100, Per: time.Second, Burst: 10}
	now, tat := epoch, time.Time{}
	b.ReportAllocs()
	for b.Loop() {
		d, err := l.Reserve(tat, now, 5*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		if d.OK {
			tat = d.TAT
		}
		now = now.Add(3 * time.Millisecond)
	}
}
