package apiv1_test

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// TestVocabularyMatchesTheHost: the wire's statuses, kinds of fire, search
// attribute types, batch operations and batch item outcomes are the
// host's (host/weft), and its batch phases the batch core's
// (internal/batch), value for value. apiv1 imports nothing of the module,
// so that the client links only it; the two declarations are kept equal
// here, and openapi.json's enums by TestOpenAPI.
func TestVocabularyMatchesTheHost(t *testing.T) {
	t.Parallel()
	wire, host, core := constants(t), constantsIn(t, "../../weft"), constantsIn(t, "../../../internal/batch")
	for _, c := range []struct {
		wire, host string
		consts     map[string][]string
	}{
		{"Status", "Status", host},
		{"FireKind", "FireKind", host},
		{"SearchType", "SearchType", host},
		{"BatchOp", "BatchOp", host},
		{"BatchOutcome", "BatchOutcome", host},
		{"BatchPhase", "Phase", core},
	} {
		w, h := slices.Sorted(slices.Values(wire[c.wire])), slices.Sorted(slices.Values(c.consts[c.host]))
		if len(h) == 0 {
			t.Errorf("the host declares no %s constants", c.host)
			continue
		}
		if !slices.Equal(w, h) {
			t.Errorf("%s: apiv1 has %v, the host has %v", c.wire, w, h)
		}
	}
}

// TestShapesMatchTheHost: the documents the API answers as the host's own
// JSON (a migration's plan, a reset point) have the host's fields, with
// the same names, each omitted when empty on both sides or on neither.
// The API builds them field by field, so a field the host adds must be
// added here too.
func TestShapesMatchTheHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ wire, host reflect.Type }{
		{reflect.TypeFor[apiv1.MigrationPlan](), reflect.TypeFor[weft.MigrationPlan]()},
		{reflect.TypeFor[apiv1.MigrationPoint](), reflect.TypeFor[weft.MigrationPoint]()},
		{reflect.TypeFor[apiv1.MigrationProblem](), reflect.TypeFor[weft.MigrationProblem]()},
		{reflect.TypeFor[apiv1.PinChange](), reflect.TypeFor[weft.PinChange]()},
		{reflect.TypeFor[apiv1.ResetPoint](), reflect.TypeFor[weft.ResetPoint]()},
	} {
		w, h := jsonFields(c.wire), jsonFields(c.host)
		if wn, hn := slices.Sorted(maps.Keys(w)), slices.Sorted(maps.Keys(h)); !slices.Equal(wn, hn) {
			t.Errorf("%s has the fields %v, %s %v", c.wire, wn, c.host, hn)
			continue
		}
		for name, f := range w {
			if f.omitted != h[name].omitted {
				t.Errorf("%s.%s: omitted when empty is %v on the wire, %v in the host", c.wire, name, f.omitted, h[name].omitted)
			}
			if jsonType(f.typ) != jsonType(h[name].typ) {
				t.Errorf("%s.%s: JSON %s on the wire, %s in the host", c.wire, name, jsonType(f.typ), jsonType(h[name].typ))
			}
		}
	}
}
