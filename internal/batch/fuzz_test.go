package batch

import (
	"errors"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// FuzzParseDocument: no document crashes the parser; a refused one is an
// *weft.BatchError matching weft.ErrInvalid with at most maxProblems problems; an
// accepted one passes Validate, and its canonical form parses to the same
// canonical form. The committed corpus is under
// testdata/fuzz/FuzzParseDocument.
func FuzzParseDocument(f *testing.F) {
	for _, seed := range []string{
		`{"op": "cancel", "query": "customer = \"acme\" AND status = \"failed\"", "reason": "bad rollout"}`,
		`{"op": "pause", "ids": ["a", "b"], "rate": 0.5, "hold": true}`,
		`{"op": "signal", "query": "status = \"suspended\"", "args": {"event": "order.paid", "key": "k", "payload": {"z": [1.50, 2e3], "a": null}}}`,
		`{"op": "migrate", "ids": ["a"], "dry_run": true, "args": {"to_version": 2, "plugins": {"pay": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}, "retry": true}}`,
		`{"op": "reset", "ids": ["a", "a"], "args": {"step": "Charge", "event": "e"}, "x": 1}`,
		`{"op": null, "query": "(", "ids": [], "rate": -1e999}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDocument(data)
		if err != nil {
			var e *weft.BatchError
			if !errors.As(err, &e) || !errors.Is(err, weft.ErrInvalid) || len(e.Problems) == 0 || len(e.Problems) > maxProblems || d != nil {
				t.Fatalf("ParseDocument = %v, %v; want a *weft.BatchError with 1 to %d problems", d, err, maxProblems)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("Validate of an accepted document: %v", err)
		}
		canon := d.Canonical()
		again, err := ParseDocument(canon)
		if err != nil {
			t.Fatalf("the canonical form %s does not parse: %v", canon, err)
		}
		if c2 := again.Canonical(); string(c2) != string(canon) {
			t.Fatalf("canonical forms differ: %s and %s", canon, c2)
		}
	})
}
