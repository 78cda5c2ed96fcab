package apiv1_test

import (
	"slices"
	"testing"
)

// TestVocabularyMatchesTheHost: the wire's statuses, kinds of fire and search attribute types are
// the host's (host/weft), value for value. apiv1 imports nothing of the module, so
// that the client links only it; the two declarations are kept equal here,
// and openapi.json's enums by TestOpenAPI.
func TestVocabularyMatchesTheHost(t *testing.T) {
	t.Parallel()
	wire, host := constants(t), constantsIn(t, "../../weft")
	for _, typ := range []string{"Status", "FireKind", "SearchType"} {
		w, h := slices.Sorted(slices.Values(wire[typ])), slices.Sorted(slices.Values(host[typ]))
		if len(h) == 0 {
			t.Errorf("host/weft declares no %s constants", typ)
			continue
		}
		if !slices.Equal(w, h) {
			t.Errorf("%s: apiv1 has %v, host/weft has %v", typ, w, h)
		}
	}
}
