package definition

import (
	"errors"
	"fmt"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// FuzzParse checks that no input makes Parse, Load, Validate, Order or
// ConcurrencyKey panic, that every problem has a path, and that an
// accepted definition's canonical encoding parses back to the same hash,
// the same order and the same concurrency key.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: wf\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nsteps: [{id: a, activity: p.q, input: {x: '${ input.x }'}, retry: {max_attempts: 2}}]",
		"name: wf\nsteps: [{id: a, if: '${ true }', then: [{id: b, wait: {event: e, key: k}}]}]",
		"name: wf\nsteps: [{id: a, foreach: '${ input.items }', as: it, do: [{id: b, set: {x: 'n ${ it }'}}]}]",
		"name: wf\nsteps: [{id: a, parallel: [{steps: [{id: b, fail: {code: c}}]}]}]",
		"a: &x [*x]",
		"{\"name\": \"wf\", \"steps\": [{\"id\": \"a\", \"workflow\": \"wf\"}]}",
		"name: wf\npriority: 2\nfairness: {key: '${ input.tenant }', weight: '${ input.w }'}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\npriority: 3\nfairness: {key: ''}\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nconcurrency: {key: '${ input.customer }', limit: 2, policy: cancel_oldest}\nsteps: [{id: a, delay: 1s}]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := Load(data, fakeCatalog{})
		if err != nil {
			var ve *weft.DefinitionError
			if !errors.As(err, &ve) || len(ve.Problems) == 0 {
				t.Fatalf("Load error %v is not a *weft.DefinitionError with problems", err)
			}
			for _, p := range ve.Problems {
				if p.Path == "" || p.Message == "" {
					t.Fatalf("problem without a path or message: %+v", p)
				}
			}
			return
		}
		again, err := Parse(def.Canonical())
		if err != nil {
			t.Fatalf("canonical encoding does not parse: %v\n%s", err, def.Canonical())
		}
		if again.Hash() != def.Hash() {
			t.Fatalf("canonical round trip changed the hash:\n%s\n%s", def.Canonical(), again.Canonical())
		}
		_ = validateDefinition(def, nil)
		for _, in := range []any{nil, map[string]any{"tenant": "acme", "w": 2.0, "plan": "pro", "seats": 500.0, "customer": "c-42"}} {
			o1, err1 := def.Order(in, 0)
			o2, err2 := again.Order(in, 0)
			if o1 != o2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Fatalf("Order(%v) is %+v %v, and %+v %v after the canonical round trip", in, o1, err1, o2, err2)
			}
			if def.Concurrency == nil {
				continue
			}
			k1, err1 := def.ConcurrencyKey(in)
			k2, err2 := again.ConcurrencyKey(in)
			if k1 != k2 || fmt.Sprint(err1) != fmt.Sprint(err2) {
				t.Fatalf("ConcurrencyKey(%v) is %q %v, and %q %v after the canonical round trip", in, k1, err1, k2, err2)
			}
		}
	})
}
