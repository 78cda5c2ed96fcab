package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/schedule"
)

// TestClusterScheduleSurvivesKilledNode: three nodes on one Redis share a
// schedule that fires every second. The node that started the latest run
// is killed with SIGKILL; the others go on firing. Every second of the
// test's window has exactly one run, created once, started once in the
// schedule's record, and no fire is recorded as missed: the sweep's
// takeover is well inside the catch-up window.
func TestClusterScheduleSurvivesKilledNode(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	seed, dir := t.TempDir(), t.TempDir()
	writeFile(t, seed, "tick.yaml", "name: tick\nsteps: [{id: s, set: {at: '${ input.at }'}}]\noutput: '${ vars.at }'\n")
	file := writeFile(t, dir, "schedules.yaml", `
- id: ticker
  workflow: tick
  input: { at: "${ schedule.time }" }
  spec: { every: 1s }
  policy: { overlap: allow_all }
`)
	// The first node seeds the empty store with the workflow, then saves the
	// schedule; the others find both.
	hosts := startCluster(t, bin, srv, 3, "--set", "seed_dirs="+seed, "--set", "schedules_file="+file)
	st := openRedisStore(t, srv)
	ctx := context.Background()

	runs := func() map[string]weft.Instance {
		t.Helper()
		out := map[string]weft.Instance{}
		for cursor := ""; ; {
			page, next, err := st.ListInstances(ctx, weft.InstanceFilter{Workflow: "tick", Cursor: cursor, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range page {
				out[in.ID] = in
			}
			if next == "" {
				return out
			}
			cursor = next
		}
	}
	// creator is the node that created a run.
	creator := func(id string) string {
		evs, err := st.History(ctx, id, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == weft.HistoryInstanceCreated {
				return e.Node
			}
		}
		return ""
	}
	var first time.Time
	until(t, 60*time.Second, "three runs", func() bool {
		rs := runs()
		for id := range rs {
			if n, ok := schedule.Nominal("ticker", id); ok && (first.IsZero() || n.Before(first)) {
				first = n
			}
		}
		return len(rs) >= 3
	})
	latest := ""
	for id := range runs() {
		if latest == "" || id > latest {
			latest = id
		}
	}
	victimID := creator(latest)
	var victim *clusterHost
	for _, h := range hosts {
		if h.id == victimID {
			victim = h
		}
	}
	if victim == nil {
		t.Fatalf("the latest run %s was created by %q, not a node of the test", latest, victimID)
	}
	killedAt := time.Now()
	if err := victim.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, which created %s", victim.id, latest)
	// Fires go on after the kill, on the other nodes.
	var last time.Time
	until(t, 60*time.Second, "eight seconds of runs after the kill", func() bool {
		for id := range runs() {
			if n, ok := schedule.Nominal("ticker", id); ok && n.After(last) {
				last = n
			}
		}
		return last.After(killedAt.Add(8 * time.Second))
	})

	rs := runs()
	for s := first; !s.After(last); s = s.Add(time.Second) {
		id := schedule.InstanceID("ticker", s)
		if _, ok := rs[id]; !ok {
			t.Errorf("no run for the fire of %s", s.Format(time.TimeOnly))
			continue
		}
		evs, err := st.History(ctx, id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for _, e := range evs {
			if e.Type == weft.HistoryInstanceCreated {
				created++
			}
		}
		if created != 1 {
			t.Errorf("run %s created %d times", id, created)
		}
	}
	evs, err := st.ScheduleEvents(ctx, "ticker", 0, weft.MaxListLimit)
	if err != nil {
		t.Fatal(err)
	}
	started := map[string]int{}
	for _, e := range evs {
		switch e.Type {
		case weft.ScheduleRunStarted:
			started[string(e.Data)]++
		case weft.ScheduleSkipped, weft.ScheduleStartFailed:
			t.Errorf("event %d: %s %s", e.Seq, e.Type, e.Data)
		}
	}
	for data, n := range started {
		if n != 1 {
			t.Errorf("run_started %d times: %s", n, data)
		}
	}
	if len(started) < int(last.Sub(first)/time.Second)+1 {
		t.Errorf("%d run_started events for %d seconds of fires", len(started), int(last.Sub(first)/time.Second)+1)
	}
}
