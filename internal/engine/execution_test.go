package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
)

// An output that is not JSON fails the attempt with the code protocol, not
// retried, and its message names the plugin version and the activity as
// every other call error does (abi/README.md §7).
func TestOutputThatIsNotJSONIsAProtocolFailureNamingTheCall(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	rt := testplugins.Runtime(t, plugins.Config{})
	ctx := context.Background()
	m, err := rt.Load(ctx, testplugins.WAT(t, `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"run\"}]}not json")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 0) (i32.const 31)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32) (call $result (i32.const 31) (i32.const 8)) (i32.const 0)))`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutPlugin(ctx, weft.PluginRecord{Name: "garbage", Version: m.Version, Size: int64(m.Size), Activities: []string{"run"}}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond}, st, local.New(local.Config{}), memqueue.New(10), rt)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	if _, _, err := e.SaveDefinition(ctx, []byte(`
name: garbage
steps:
  - { id: run, activity: garbage.run, retry: { max_attempts: 3, initial_interval: 10ms } }
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := e.Start(ctx, "garbage", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	got, err := e.WaitFinished(wctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := `plugin ` + m.Version[:12] + ` activity "run": ABI violation: output is not a JSON document: "not json"`
	if got.Status != weft.StatusFailed || got.Error == nil || got.Error.Code != "protocol" || got.Error.Message != want {
		t.Fatalf("instance %s, error %+v; want failed with code protocol and message %q", got.Status, got.Error, want)
	}
	evs, err := st.History(ctx, inst.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	attempts := 0
	for _, ev := range evs {
		if ev.Type != "activity_failed" {
			continue
		}
		attempts++
		var d struct{ Code, Kind, Message string }
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Code != "protocol" || d.Message != want {
			t.Errorf("activity_failed %s; want code protocol and message %q", ev.Data, want)
		}
	}
	if attempts != 1 {
		t.Errorf("%d attempts failed, want 1: protocol is not retried", attempts)
	}
}
