package node_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

// A start on one node uses the definition saved and the plugin uploaded
// through another node just before, although the starting node answers
// starts from its catalog cache: the create is checked against the
// catalog's generation, and read again when it changed.
func TestStartSeesTheOtherNodesCatalogChanges(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := clusterNode(t, "a", srv.Addr())
	b := clusterNode(t, "b", srv.Addr())
	ctx := context.Background()
	for _, n := range []interface{ Ready(context.Context) error }{a, b} {
		if err := n.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	kit := testplugins.Bytes(t, "kit")
	v1, _, err := a.PutPlugin(ctx, "kit", kit)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(greet)); err != nil {
		t.Fatal(err)
	}
	start := func(what string, wantVersion int, wantPin, wantOutput string) {
		t.Helper()
		e := b.Engine()
		for range 2 { // the second from b's cache
			inst, _, err := e.Start(ctx, "greet", json.RawMessage(`"hi"`), "")
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if inst.Version != wantVersion || inst.Plugins["kit"] != wantPin {
				t.Fatalf("%s: started version %d pinning kit %s, want version %d pinning %s", what, inst.Version, inst.Plugins["kit"], wantVersion, wantPin)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			done, err := e.WaitFinished(wctx, inst.ID)
			cancel()
			if err != nil || done.Status != weft.StatusCompleted || string(done.Output) != wantOutput {
				t.Fatalf("%s: instance %s: %+v, %v", what, inst.ID, done, err)
			}
		}
	}
	start("first", 1, v1.Version, `"HI"`)

	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: greet
steps:
  - { id: upper, activity: kit.upper, input: { text: "${ input }" }, output: upper }
output: "${ vars.upper.text }"
`)); err != nil {
		t.Fatal(err)
	}
	start("after a new version saved on a", 2, v1.Version, `"HI"`)

	// The same module with a custom section at its end: another version.
	v2, _, err := a.PutPlugin(ctx, "kit", append(append([]byte(nil), kit...), 0x00, 0x06, 0x04, 'n', 'e', 'x', 't', 0x01))
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version == v1.Version {
		t.Fatal("the second upload is the same version")
	}
	start("after a new plugin version uploaded on a", 2, v2.Version, `"HI"`)
}
