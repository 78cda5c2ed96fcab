package definition

import (
	"errors"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// FuzzParse checks that no input makes Parse, Load or Validate panic, that
// every problem has a path, and that an accepted definition's canonical
// encoding parses back to the same hash.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"name: wf\nsteps: [{id: a, delay: 1s}]",
		"name: wf\nsteps: [{id: a, activity: p.q, input: {x: '${ input.x }'}, retry: {max_attempts: 2}}]",
		"name: wf\nsteps: [{id: a, if: '${ true }', then: [{id: b, wait: {event: e, key: k}}]}]",
		"name: wf\nsteps: [{id: a, foreach: '${ input.items }', as: it, do: [{id: b, set: {x: 'n ${ it }'}}]}]",
		"name: wf\nsteps: [{id: a, parallel: [{steps: [{id: b, fail: {code: c}}]}]}]",
		"a: &x [*x]",
		"{\"name\": \"wf\", \"steps\": [{\"id\": \"a\", \"workflow\": \"wf\"}]}",
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
	})
}
