package node

import (
	"slices"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestNonTerminalIsEveryStatusThatGoesOn: the statuses whose instances pin
// plugin versions are all those that are not terminal, a paused one
// included, so that a status added later is not forgotten by the preload.
func TestNonTerminalIsEveryStatusThatGoesOn(t *testing.T) {
	t.Parallel()
	for _, st := range weft.Statuses() {
		if got := slices.Contains(nonTerminal[:], st); got == st.Terminal() {
			t.Errorf("status %s: in nonTerminal is %v, terminal is %v", st, got, st.Terminal())
		}
	}
}
