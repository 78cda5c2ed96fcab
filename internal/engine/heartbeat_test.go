package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
)

// A guest that stops heartbeating is timed out and stopped; the next attempt
// gets its last details and resumes from them (issue 4's story).
func TestHeartbeatTimeoutResumesFromLastDetails(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	// A short grace: the stalled guest never looks at cancellation.
	rt := testplugins.Runtime(t, plugins.Config{CancelGrace: 100 * time.Millisecond})
	ctx := context.Background()
	m, err := rt.Load(ctx, testplugins.Bytes(t, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: m.Version, Size: int64(m.Size), Activities: []string{"work"}}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		NodeID: "n1", Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 50 * time.Millisecond},
	}, st, local.New(local.Config{}), memqueue.New(10), rt)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)

	if _, _, err := e.SaveDefinition(ctx, []byte(`
name: stalling
steps:
  - id: work
    activity: kit.work
    input: { ms: 5000, beat_ms: 20, stall_at_ms: 200 }
    timeout: 10s
    heartbeat_timeout: 2s
    retry: { max_attempts: 3, initial_interval: 10ms }
    output: work
output: "${ vars.work }"
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := e.Start(ctx, "stalling", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	fin, err := e.WaitFinished(wctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		DoneMS      int64 `json:"done_ms"`
		ResumedFrom int64 `json:"resumed_from"`
		Attempt     int   `json:"attempt"`
	}
	if fin.Status != weft.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil {
		t.Fatalf("instance %s output %s error %+v", fin.Status, fin.Output, fin.Error)
	}
	// Attempt 1 beat every 20ms until done_ms reached 200, then stalled:
	// its last details say somewhere in (100, 200].
	if out.Attempt != 2 || out.ResumedFrom <= 100 || out.ResumedFrom > 200 || out.DoneMS != 5000 {
		t.Fatalf("output %+v: want attempt 2 resuming from the stalled attempt's last reported done_ms (100, 200]", out)
	}
	evs, err := st.History(ctx, inst.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == "activity_failed" {
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			if d["kind"] != "heartbeat_timeout" || d["last_heartbeat"] == nil {
				t.Fatalf("activity_failed %s: want a heartbeat_timeout with the last details", ev.Data)
			}
			return
		}
	}
	t.Fatalf("no activity_failed in %v", types(evs))
}
