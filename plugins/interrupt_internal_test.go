package plugins

import (
	"testing"
	"time"
)

// A guest keeps its thread for a turn of turnLength from the start of its
// call or its last yield, and yields at the first visit after that.
func TestTurnOver(t *testing.T) {
	begun := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		after time.Duration
		over  bool
	}{
		{0, false},
		{200 * time.Microsecond, false}, // an ordinary guest's visits come about this often
		{turnLength - time.Nanosecond, false},
		{turnLength, true},
		{10 * turnLength, true},
		{-time.Millisecond, false}, // a visit can never come before its turn; if it seems to, the turn goes on
	} {
		cs := &callState{turn: begun}
		if got := cs.turnOver(begun.Add(c.after)); got != c.over {
			t.Errorf("%s into a turn: over = %t, want %t", c.after, got, c.over)
		}
	}
}
