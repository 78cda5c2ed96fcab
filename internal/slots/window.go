package slots

// A store keeps a key's line as an index (a line of 20,000 instances is
// not rewritten whole on every call) and hands an operation only its
// window: the holders, the front of the line, and the caller's own place
// in it. The operations read no more than that, so their State and
// Decision are exactly those of the whole State:
//   - the sweep's promotion takes at most Limit waiters from the front,
//     after a Release has taken the caller out of it: the front holds
//     Limit+1 waiters, so that Limit remain when the caller was one of
//     them (a holder that expires and a first waiter that releases leave
//     one slot free and one waiter fewer to promote);
//   - Acquire and Release look the caller up among the holders and the
//     waiters (its own place, wherever it is), and Acquire appends a
//     newcomer at the end of the line;
//   - CancelOldest counts every member, so under it the window is the
//     whole line (short by construction: it keeps at most Limit members
//     not being cancelled).
//
// The store then writes back the holders whole, removes from its line the
// waiters that left the window, and appends the ones that joined it.

// WindowFront is how many waiters, from the front of the line, an
// operation with p may read: p.Limit+1, or every waiter (-1) under
// CancelOldest.
func WindowFront(p Params) int {
	if p.Policy == CancelOldest {
		return -1
	}
	return p.Limit + 1
}

// LineChanges compares a window of the line before an operation with the
// line after it: the ids that left it (promoted, cancelled, released) and
// the waiters that joined it, in line order, to be appended at the end of
// the whole line.
func LineChanges(before, after []Waiter) (left []string, joined []Waiter) {
	in := make(map[string]bool, len(after))
	for _, w := range after {
		in[w.ID] = true
	}
	was := make(map[string]bool, len(before))
	for _, w := range before {
		was[w.ID] = true
		if !in[w.ID] {
			left = append(left, w.ID)
		}
	}
	for _, w := range after {
		if !was[w.ID] {
			joined = append(joined, w)
		}
	}
	return left, joined
}
