package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// A step's concurrency limit under failure (docs/flow-control.md, "Step
// limits", "Failure behaviour"): a step's slot belongs to its attempt,
// under a lease. Three instances whose one step allows one attempt at once
// per key start; one attempt runs and two are deferred durably. The node
// running the attempt is killed with SIGKILL: its slot is kept until the
// instance is recovered after its lease's TTL, so no other attempt starts
// before then; the recovery abandons the attempt and gives its slot back,
// the deferred attempts run one at a time, the recovered instance's next
// attempt waits its turn behind them and resumes from the dead attempt's
// details; all three complete, and the store holds no step key at the end.
func TestClusterStepSlotsSurviveAKilledNode(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	hosts := startCluster(t, bin, srv, 3)
	st := openRedisStore(t, srv)
	const (
		key     = "k"
		slotKey = "step/" + key // the store's name of the step key
		// The settings startCluster gives the nodes.
		ttl   = 6 * time.Second
		cycle = 250 * time.Millisecond
		// The holder's instance lease was renewed at most a cycle before
		// the kill; the margin leaves room for a late renewal on a loaded
		// machine.
		margin = cycle + 750*time.Millisecond
	)
	// The work outlives the time it takes to see the attempt run and to
	// kill its node; the recovered attempt resumes from its details.
	deploy(t, hosts[0], "stepslot", `
name: stepslot
steps:
  - id: work
    activity: kit.work
    input: { ms: 4000, beat_ms: 20 }
    heartbeat_timeout: 30s
    concurrency: { key: k, limit: 1 }
    output: work
output: "${ vars.work }"
`)
	ctx := context.Background()
	// One start through each node: with eager starts (the default) each
	// instance runs first on the node that took its start, so the attempt
	// that wins the slot (usually node1's, started first) runs on one node
	// and the deferred ones were deferred on the others.
	var ids []string
	for _, h := range hosts {
		inst, _, err := h.c.Start(ctx, "stepslot", apiv1.StartRequest{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}

	// One attempt runs; two are deferred, their instances suspended.
	var holder string
	var waiters []string
	until(t, 60*time.Second, "one attempt running and two deferred", func() bool {
		holder, waiters = "", nil
		for _, id := range ids {
			inst, err := hosts[0].c.Instance(ctx, id)
			if err != nil {
				t.Fatalf("instance %s: %v", id, err)
			}
			evs := history(t, hosts[0], id)
			spans := attemptSpans(evs)
			switch {
			case len(spans) == 1 && spans[0].End.IsZero():
				if holder != "" {
					t.Fatalf("two attempts running at once: %s and %s\n%s%s", holder, id, entriesString(history(t, hosts[0], holder)), entriesString(evs))
				}
				holder = id
			case len(spans) == 0 && inst.Status == apiv1.StatusSuspended && deferredFor(evs, key) > 0:
				waiters = append(waiters, id)
			}
		}
		return holder != "" && len(waiters) == len(ids)-1
	})
	var x *clusterHost // the node that runs the holder's attempt
	until(t, 30*time.Second, "the holder's details stored", func() bool {
		spans := attemptSpans(history(t, hosts[0], holder))
		if len(spans) != 1 {
			t.Fatalf("holder %s: attempts %v; want one running", holder, spans)
		}
		for _, h := range hosts {
			if h.id == spans[0].Node {
				x = h
			}
		}
		return x != nil && heartbeatsStored(t, st, holder)
	})
	// The store agrees: the holder's attempt holds the key, the two wait.
	if k := stepKey(t, st, slotKey); k == nil || len(k.Holders) != 1 || !strings.HasSuffix(k.Holders[0].ID, "/"+holder) || k.Waiting != len(waiters) {
		t.Fatalf("the key before the kill: %+v; want held by an attempt of %s, %d waiting", k, holder, len(waiters))
	}

	// Kill the node running the attempt.
	if err := x.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killAt := time.Now()
	survivor := hosts[0]
	if survivor == x {
		survivor = hosts[1]
	}
	t.Logf("holder %s running on %s, waiters %v; killed %s at %s, reading through %s", holder, x.id, waiters, x.id, killAt.Format("15:04:05.000"), survivor.id)

	// Until the holder's lease can have expired, its attempt keeps the
	// slot: no other attempt starts, none is abandoned, the deferred ones
	// stay deferred, and the key shows the dead attempt and two waiting.
	lease := killAt.Add(ttl - margin)
	for time.Now().Before(lease) {
		for _, id := range ids {
			evs := history(t, survivor, id)
			spans := attemptSpans(evs)
			if id == holder {
				if len(spans) != 1 || !spans[0].End.IsZero() || hasEntry(evs, "attempt_abandoned") || hasEntry(evs, "activity_completed") {
					t.Fatalf("%s after the kill, before the TTL: the holder's attempts %v; want its one attempt still in flight (the kill must come while it works)\n%s",
						time.Since(killAt).Round(time.Millisecond), spans, entriesString(evs))
				}
				continue
			}
			if len(spans) != 0 {
				t.Fatalf("%s after the kill, before the TTL: waiter %s started an attempt %v while the dead attempt's lease held the slot\n%s",
					time.Since(killAt).Round(time.Millisecond), id, spans, entriesString(evs))
			}
		}
		if k := stepKey(t, st, slotKey); k == nil || len(k.Holders) != 1 || !strings.HasSuffix(k.Holders[0].ID, "/"+holder) || k.Waiting != len(waiters) {
			t.Fatalf("%s after the kill, before the TTL: the key is %+v; want held by the dead attempt of %s, %d waiting",
				time.Since(killAt).Round(time.Millisecond), k, holder, len(waiters))
		}
		time.Sleep(50 * time.Millisecond) // polling until the window's end
	}

	// All three complete, nothing lost.
	final := map[string]*apiv1.Instance{}
	until(t, 2*time.Minute, "every instance ended", func() bool {
		for _, id := range ids {
			inst, err := survivor.c.Instance(ctx, id)
			if err != nil {
				t.Fatalf("instance %s: %v", id, err)
			}
			if !inst.Terminal() {
				return false
			}
			final[id] = inst
		}
		return true
	})
	page, err := survivor.c.Instances(ctx, client.InstanceFilter{Workflow: "stepslot", ListOptions: client.ListOptions{Limit: 100}})
	if err != nil || len(page.Items) != len(ids) {
		t.Fatalf("the host lists %d instances of stepslot (%v); want %d", len(page.Items), err, len(ids))
	}

	var all []span // every attempt that ran, of every instance
	var timeline []string
	var lastWaiterEnd, holderNext time.Time
	for _, id := range ids {
		evs := history(t, survivor, id)
		var out workOut
		if inst := final[id]; inst.Status != apiv1.StatusCompleted || json.Unmarshal(inst.Output, &out) != nil {
			t.Errorf("instance %s: %s %s %+v; want completed\n%s", id, inst.Status, inst.Output, inst.Error, entriesString(evs))
			continue
		}
		spans := attemptSpans(evs)
		for _, s := range spans {
			s.ID = fmt.Sprintf("%s#%d", id, s.Attempt)
			all = append(all, s.span)
			timeline = append(timeline, fmt.Sprintf("%s attempt %d on %s from %s to %s (%s)", id, s.Attempt, s.Node, offset(s.Start, killAt), offset(s.End, killAt), s.How))
		}
		if id == holder {
			// Attempt 1 abandoned by a survivor after the TTL, its slot
			// given back; attempt 2 asked anew, waited its turn, and
			// completed, resuming from attempt 1's details.
			var abandoned *apiv1.HistoryEntry
			for i, e := range evs {
				if e.Type == "attempt_abandoned" {
					abandoned = &evs[i]
				}
			}
			switch {
			case abandoned == nil || abandoned.Node == x.id || abandoned.Attempt != 1 || abandoned.Time.Before(lease):
				t.Errorf("holder %s: abandoned %+v; want attempt 1 abandoned by a survivor after the TTL (the kill at %s, the TTL %s)\n%s",
					id, abandoned, killAt.Format("15:04:05.000"), ttl, entriesString(evs))
			case len(spans) != 2 || spans[0].Attempt != 1 || spans[0].How != "attempt_abandoned" || spans[1].Attempt != 2 || spans[1].How != "activity_completed":
				t.Errorf("holder %s: attempts %v; want attempt 1 abandoned, then attempt 2 completed\n%s", id, spans, entriesString(evs))
			case !deferredAfter(evs, key, abandoned.Time):
				t.Errorf("holder %s: attempt 2 was not deferred after the recovery; the waiters were first in the key's line\n%s", id, entriesString(evs))
			case out.Attempt != 2 || out.ResumedFrom == 0:
				t.Errorf("holder %s: result %+v; want attempt 2, resuming from attempt 1's details", id, out)
			default:
				holderNext = spans[1].Start
			}
			continue
		}
		// A waiter: deferred for the key, then one attempt that ran after
		// the dead attempt's lease and completed.
		switch {
		case deferredFor(evs, key) == 0:
			t.Errorf("waiter %s: no activity_deferred for concurrency on %q\n%s", id, key, entriesString(evs))
		case len(spans) != 1 || spans[0].Attempt != 1 || spans[0].How != "activity_completed" || out.Attempt != 1:
			t.Errorf("waiter %s: attempts %v, result %+v; want one attempt that completed\n%s", id, spans, out, entriesString(evs))
		case spans[0].Start.Before(lease):
			t.Errorf("waiter %s: its attempt started at %s, before the dead attempt's lease could expire (%s, the kill at %s)\n%s",
				id, spans[0].Start.Format("15:04:05.000"), lease.Format("15:04:05.000"), killAt.Format("15:04:05.000"), entriesString(evs))
		default:
			if spans[0].End.After(lastWaiterEnd) {
				lastWaiterEnd = spans[0].End
			}
		}
	}
	slices.Sort(timeline)
	t.Logf("since the kill (the TTL %s):\n  %s", ttl, strings.Join(timeline, "\n  "))
	if most, at := mostAtOnce(all); most != 1 {
		t.Errorf("%d attempts ran at once (at %s):%s; want one at a time", most, at.Format("15:04:05.000"), spansString(all))
	}
	// The recovered attempt joined the line behind the two deferred ones.
	if !holderNext.IsZero() && !lastWaiterEnd.IsZero() && holderNext.Before(lastWaiterEnd) {
		t.Errorf("the holder's attempt 2 started at %s, before the waiters had run (the last ended at %s); want it last, first come first served",
			holderNext.Format("15:04:05.000"), lastWaiterEnd.Format("15:04:05.000"))
	}

	// Nothing holds or waits for a step key any more.
	until(t, 30*time.Second, "no step key left in the store", func() bool {
		keys, _, err := st.SlotKeys(ctx, "step/", "", 10)
		if err != nil {
			t.Fatalf("SlotKeys: %v", err)
		}
		return len(keys) == 0
	})
}

// attemptRun is when one attempt of a step ran, by its instance's history,
// and how it ended: activity_completed, activity_failed or
// attempt_abandoned ("" and a zero End while it runs).
type attemptRun struct {
	span
	Attempt int
	Node    string // the node that scheduled it
	How     string
}

// attemptSpans reads the attempts that ran from an instance's history,
// in order. An attempt ran from its activity_scheduled that no
// activity_deferred follows (a deferred attempt is scheduled again when
// its turn comes) to its activity_completed or activity_failed; one whose
// node died ran until its instance was recovered, its attempt_abandoned.
func attemptSpans(evs []apiv1.HistoryEntry) []attemptRun {
	var runs []attemptRun
	open := map[string]int{} // step path → index in runs of its attempt that runs
	for i, e := range evs {
		switch e.Type {
		case "activity_scheduled":
			if next := nextOfAttempt(evs[i+1:], e.StepPath); next != nil && next.Type == "activity_deferred" {
				continue
			}
			open[e.StepPath] = len(runs)
			runs = append(runs, attemptRun{span: span{Start: e.Time}, Attempt: e.Attempt, Node: e.Node})
		case "activity_completed", "activity_failed", "attempt_abandoned":
			if j, ok := open[e.StepPath]; ok {
				runs[j].End, runs[j].How = e.Time, string(e.Type)
				delete(open, e.StepPath)
			}
		}
	}
	return runs
}

// nextOfAttempt returns the first entry of evs that schedules, defers or
// ends an attempt of the step at path; nil when there is none yet.
func nextOfAttempt(evs []apiv1.HistoryEntry, path string) *apiv1.HistoryEntry {
	for i, e := range evs {
		if e.StepPath != path {
			continue
		}
		switch e.Type {
		case "activity_scheduled", "activity_deferred", "activity_completed", "activity_failed", "attempt_abandoned":
			return &evs[i]
		}
	}
	return nil
}

// deferredFor counts an instance's activity_deferred entries that wait for
// a slot of the step concurrency key.
func deferredFor(evs []apiv1.HistoryEntry, key string) int {
	n := 0
	for _, e := range evs {
		if deferralFor(e, key) {
			n++
		}
	}
	return n
}

// deferredAfter reports whether an attempt of the instance was deferred
// for a slot of key at or after t.
func deferredAfter(evs []apiv1.HistoryEntry, key string, t time.Time) bool {
	return slices.ContainsFunc(evs, func(e apiv1.HistoryEntry) bool { return deferralFor(e, key) && !e.Time.Before(t) })
}

func deferralFor(e apiv1.HistoryEntry, key string) bool {
	if e.Type != "activity_deferred" {
		return false
	}
	var d struct {
		Reason string `json:"reason"`
		Key    string `json:"key"`
	}
	return json.Unmarshal(e.Data, &d) == nil && d.Reason == "concurrency" && d.Key == key
}

// stepKey reads a step concurrency key from the store: nil when nothing
// holds or waits for it.
func stepKey(t *testing.T, st *redisstore.Store, key string) *store.SlotKey {
	t.Helper()
	keys, _, err := st.SlotKeys(context.Background(), key, "", 1)
	if err != nil {
		t.Fatalf("the step key %s: %v", key, err)
	}
	if len(keys) == 0 || keys[0].Key != key {
		return nil
	}
	return &keys[0]
}

func TestAttemptSpans(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const w = "steps[0]"
	e := func(typ string, s, attempt int) apiv1.HistoryEntry {
		path := w
		if attempt == 0 {
			path = ""
		}
		return apiv1.HistoryEntry{Type: apiv1.HistoryType(typ), Time: t0.Add(time.Duration(s) * time.Second), StepPath: path, Attempt: attempt, Node: "n"}
	}
	type run struct {
		attempt, start, end int // seconds; end -1: still running
		how                 string
	}
	tests := []struct {
		name string
		evs  []apiv1.HistoryEntry
		want []run
	}{
		{"never scheduled", []apiv1.HistoryEntry{e("instance_created", 0, 0), e("instance_started", 0, 0)}, nil},
		{"running", []apiv1.HistoryEntry{e("instance_started", 0, 0), e("activity_scheduled", 1, 1)}, []run{{1, 1, -1, ""}}},
		{"deferred, still waiting", []apiv1.HistoryEntry{e("activity_scheduled", 1, 1), e("activity_deferred", 1, 1)}, nil},
		{"deferred, then ran", []apiv1.HistoryEntry{
			e("activity_scheduled", 1, 1), e("activity_deferred", 1, 1), e("activity_scheduled", 5, 1), e("activity_completed", 9, 1), e("instance_completed", 9, 0),
		}, []run{{1, 5, 9, "activity_completed"}}},
		{"abandoned, deferred, then ran", []apiv1.HistoryEntry{
			e("activity_scheduled", 1, 1), e("attempt_abandoned", 7, 1), e("activity_scheduled", 7, 2), e("activity_deferred", 7, 2),
			e("activity_scheduled", 15, 2), e("activity_completed", 18, 2),
		}, []run{{1, 1, 7, "attempt_abandoned"}, {2, 15, 18, "activity_completed"}}},
		{"failed, retried", []apiv1.HistoryEntry{
			e("activity_scheduled", 1, 1), e("activity_failed", 2, 1), e("retry_scheduled", 2, 1), e("activity_scheduled", 3, 2), e("activity_completed", 4, 2),
		}, []run{{1, 1, 2, "activity_failed"}, {2, 3, 4, "activity_completed"}}},
	}
	for _, tt := range tests {
		got := attemptSpans(tt.evs)
		var want []attemptRun
		for _, r := range tt.want {
			s := attemptRun{span: span{Start: t0.Add(time.Duration(r.start) * time.Second)}, Attempt: r.attempt, Node: "n", How: r.how}
			if r.end >= 0 {
				s.End = t0.Add(time.Duration(r.end) * time.Second)
			}
			want = append(want, s)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, want)
		}
	}
}
