package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/redistest"
)

// A concurrency limit under failure (docs/flow-control.md, "Failure
// behaviour"): a slot belongs to its instance, not to its node. Six
// instances of one key with a limit of two start; two hold the slots and
// four wait. The node(s) running the two holders are killed with SIGKILL:
// their instances keep their slots until their leases expire and another
// node takes them over, so none of the four waiters starts before then;
// the holders complete, then the waiters run two at a time; all six
// complete, and the key is gone when nothing runs or waits under it.
func TestClusterConcurrencySlotsSurviveAKilledNode(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	// Eager starts (the default): the holders start on the node that took
	// their starts, so one kill takes both, usually.
	hosts := startCluster(t, bin, srv, 3)
	st := openRedisStore(t, srv)
	const (
		limit = 2
		key   = "acme"
		// The settings startCluster gives the nodes.
		ttl   = 6 * time.Second
		cycle = 250 * time.Millisecond
		// A holder's lease was renewed at most a cycle before the kill;
		// the margin leaves room for a late renewal on a loaded machine.
		margin = cycle + 750*time.Millisecond
	)
	// The work outlives the time it takes to see the holders run and to
	// kill their node; a taken-over attempt resumes from its details.
	deploy(t, hosts[0], "limited", fmt.Sprintf(`
name: limited
concurrency: { key: "${ input.k }", limit: %d }
steps:
  - { id: work, activity: kit.work, input: { ms: 4000, beat_ms: 20 }, heartbeat_timeout: 20s, output: work }
output: "${ vars.work }"
`, limit))
	ctx := context.Background()
	var ids []string
	for range 6 {
		inst, _, err := hosts[0].c.Start(ctx, "limited", apiv1.StartRequest{Input: json.RawMessage(`{"k":"` + key + `"}`)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}

	// Two hold the slots and run their work; four wait in the line.
	var holders, waiters []string
	ran := map[string]string{} // holder → the node that runs its attempt
	until(t, 60*time.Second, "two instances running and four waiting", func() bool {
		holders, waiters = nil, nil
		for _, id := range ids {
			inst, err := hosts[0].c.Instance(ctx, id)
			if err != nil {
				t.Fatalf("instance %s: %v", id, err)
			}
			evs := history(t, hosts[0], id)
			switch {
			case hasEntry(evs, "instance_started"):
				holders = append(holders, id)
				ran[id] = runsOn(evs)
			case inst.Status == apiv1.StatusPending && inst.Concurrency != nil && !inst.Concurrency.WaitingSince.IsZero():
				waiters = append(waiters, id)
			}
		}
		return len(holders) == limit && len(waiters) == len(ids)-limit
	})
	until(t, 30*time.Second, "the holders' details stored", func() bool {
		for _, id := range holders {
			evs := history(t, hosts[0], id)
			if ran[id] = runsOn(evs); ran[id] == "" || !heartbeatsStored(t, st, id) {
				return false
			}
		}
		return true
	})
	line, err := hosts[0].c.ConcurrencyKey(ctx, "limited", key, client.ListOptions{Limit: 100})
	if err != nil {
		t.Fatalf("the key before the kill: %v", err)
	}
	if got := slotHolders(line); line.Key.Running != limit || line.Key.Waiting != len(waiters) || !sameSet(got, holders) || !sameSet(slotWaiters(line), waiters) {
		t.Fatalf("the key before the kill: %+v, holders %v, line %v; want holders %v, line %v", line.Key, got, slotWaiters(line), holders, waiters)
	}

	// Kill the node(s) running the holders.
	killed := map[string]bool{}
	for _, h := range hosts {
		if slices.Contains(slices.Collect(maps.Values(ran)), h.id) {
			if err := h.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed[h.id] = true
		}
	}
	killAt := time.Now()
	var survivor *clusterHost
	for _, h := range hosts {
		if !killed[h.id] {
			survivor = h
			break
		}
	}
	t.Logf("holders %v on %v, waiters %v; killed %v at %s, reading through %s", holders, ran, waiters, killed, killAt.Format("15:04:05.000"), survivor.id)

	// Until the holders' leases can have expired, the dead holders keep
	// their slots: the key shows them, and every waiter still waits.
	for window := killAt.Add(ttl - margin); time.Now().Before(window); {
		line, err := survivor.c.ConcurrencyKey(ctx, "limited", key, client.ListOptions{Limit: 100})
		if err != nil {
			t.Fatalf("the key after the kill: %v", err)
		}
		if got := slotHolders(line); !sameSet(got, holders) || line.Key.Waiting != len(waiters) {
			t.Fatalf("%s after the kill, before the TTL: the key is held by %v with %d waiting; want the killed holders %v, %d waiting",
				time.Since(killAt).Round(time.Millisecond), got, line.Key.Waiting, holders, len(waiters))
		}
		for _, id := range waiters {
			inst, err := survivor.c.Instance(ctx, id)
			if err != nil {
				t.Fatalf("instance %s: %v", id, err)
			}
			if inst.Status != apiv1.StatusPending || inst.Concurrency == nil || inst.Concurrency.WaitingSince.IsZero() {
				t.Fatalf("%s after the kill, before the TTL: waiter %s is %s, concurrency %+v; want it still waiting",
					time.Since(killAt).Round(time.Millisecond), id, inst.Status, inst.Concurrency)
			}
		}
		time.Sleep(50 * time.Millisecond) // polling until the window's end
	}

	// All six complete, nothing lost.
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
	page, err := survivor.c.Instances(ctx, client.InstanceFilter{Workflow: "limited", ListOptions: client.ListOptions{Limit: 100}})
	if err != nil || len(page.Items) != len(ids) {
		t.Fatalf("the host lists %d instances of limited (%v); want %d", len(page.Items), err, len(ids))
	}

	lease := killAt.Add(ttl - margin) // no slot of a killed holder is free before
	var spans []span
	holderEnd := time.Time{} // when the first holder ended
	for _, id := range ids {
		evs := history(t, survivor, id)
		var out workOut
		if inst := final[id]; inst.Status != apiv1.StatusCompleted || json.Unmarshal(inst.Output, &out) != nil {
			t.Errorf("instance %s: %s %s %+v; want completed", id, inst.Status, inst.Output, inst.Error)
			continue
		}
		s, ok := runSpan(evs)
		s.ID = id
		if !ok || s.End.IsZero() {
			t.Errorf("instance %s ran from %s to %s; want a start and an end in its history", id, s.Start, s.End)
			continue
		}
		spans = append(spans, s)
		if slices.Contains(holders, id) {
			// Taken over by a survivor after the lease, resuming.
			var takenAt time.Time
			var takenBy string
			for _, e := range evs {
				if e.Type == "attempt_abandoned" {
					takenAt, takenBy = e.Time, e.Node
				}
			}
			if takenBy == "" || killed[takenBy] || takenAt.Before(lease) || out.Attempt != 2 || out.ResumedFrom == 0 {
				t.Errorf("holder %s: taken over by %q at %s (the kill at %s, the TTL %s), result %+v; want attempt 2 on a survivor after the TTL, resuming",
					id, takenBy, takenAt.Format("15:04:05.000"), killAt.Format("15:04:05.000"), ttl, out)
			}
			if holderEnd.IsZero() || s.End.Before(holderEnd) {
				holderEnd = s.End
			}
			continue
		}
		// A waiter: slot_waiting, slot_acquired, then instance_started,
		// after the holders' leases.
		if err := waitedInOrder(evs, key, limit); err != nil {
			t.Errorf("waiter %s: %v\n%s", id, err, entriesString(evs))
		}
		if s.Start.Before(lease) {
			t.Errorf("waiter %s started at %s, before the killed holders' leases could expire (%s, the kill at %s)",
				id, s.Start.Format("15:04:05.000"), lease.Format("15:04:05.000"), killAt.Format("15:04:05.000"))
		}
	}
	var timeline []string
	for _, s := range spans {
		role := "waiter"
		if slices.Contains(holders, s.ID) {
			role = "holder"
		}
		timeline = append(timeline, fmt.Sprintf("%s %s from %s to %s", role, s.ID, offset(s.Start, killAt), offset(s.End, killAt)))
		if role == "waiter" && s.Start.Before(holderEnd) {
			t.Errorf("waiter %s started at %s, before either holder ended (%s)", s.ID, s.Start.Format("15:04:05.000"), holderEnd.Format("15:04:05.000"))
		}
	}
	t.Logf("since the kill (the TTL %s):\n  %s", ttl, strings.Join(timeline, "\n  "))
	if most, at := mostAtOnce(spans); most != limit {
		t.Errorf("at most %d instances ran at once (%v at %s); want the limit, %d, and never more", most, spansString(spans), at.Format("15:04:05.000"), limit)
	}

	// Nothing runs or waits under the key: it is gone.
	until(t, 30*time.Second, "the key gone from /v1/concurrency", func() bool {
		page, err := survivor.c.ConcurrencyKeys(ctx, "limited", client.ListOptions{})
		if err != nil {
			t.Fatalf("ConcurrencyKeys: %v", err)
		}
		return len(page.Items) == 0
	})
	if _, err := survivor.c.ConcurrencyKey(ctx, "limited", key, client.ListOptions{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("the key at the end: %v; want not found", err)
	}
}

// span is when an instance ran, by its history: from its instance_started
// to the entry that ended it. A zero End is an instance still running.
type span struct {
	ID         string
	Start, End time.Time
}

// runSpan reads an instance's span from its history; false when it never
// started.
func runSpan(evs []apiv1.HistoryEntry) (span, bool) {
	var s span
	started := false
	for _, e := range evs {
		switch e.Type {
		case "instance_started":
			if !started {
				s.Start, started = e.Time, true
			}
		case "instance_completed", "instance_failed", "instance_cancelled":
			if started && s.End.IsZero() {
				s.End = e.Time
			}
		}
	}
	return s, started
}

// mostAtOnce returns the most spans open at one moment, and the first
// moment it is reached. A span ending at the instant another starts does
// not overlap it: a slot given back at t is taken at t or later. A span
// without an end is open until the end of time.
func mostAtOnce(spans []span) (int, time.Time) {
	type edge struct {
		at   time.Time
		open int // +1 a start, -1 an end
	}
	edges := make([]edge, 0, 2*len(spans))
	for _, s := range spans {
		edges = append(edges, edge{s.Start, 1})
		if !s.End.IsZero() {
			edges = append(edges, edge{s.End, -1})
		}
	}
	// By time, ends before starts at one instant.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.open - b.open
	})
	n, most := 0, 0
	var at time.Time
	for _, e := range edges {
		n += e.open
		if n > most {
			most, at = n, e.at
		}
	}
	return most, at
}

// waitedInOrder checks a waiter's history: slot_waiting, then
// slot_acquired with the key, the limit and how long it waited, then
// instance_started.
func waitedInOrder(evs []apiv1.HistoryEntry, key string, limit int) error {
	var order []string
	var waitingAt, acquiredAt time.Time
	for _, e := range evs {
		switch e.Type {
		case "slot_waiting", "slot_acquired", "instance_started":
			order = append(order, string(e.Type))
		default:
			continue
		}
		var d struct {
			Key      *string `json:"key"`
			Limit    int     `json:"limit"`
			WaitedMS *int64  `json:"waited_ms"`
		}
		if e.Type == "instance_started" {
			continue
		}
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Key == nil || *d.Key != key || d.Limit != limit {
			return fmt.Errorf("%s's data %s (%v); want key %q, limit %d", e.Type, e.Data, err, key, limit)
		}
		if e.Type == "slot_waiting" {
			waitingAt = e.Time
			continue
		}
		acquiredAt = e.Time
		if want := acquiredAt.Sub(waitingAt).Milliseconds(); d.WaitedMS == nil || *d.WaitedMS < want-10 || *d.WaitedMS > want+10 {
			return fmt.Errorf("slot_acquired's waited_ms %v; want about %d, its wait by the history", d.WaitedMS, want)
		}
	}
	if !slices.Equal(order, []string{"slot_waiting", "slot_acquired", "instance_started"}) {
		return fmt.Errorf("entries %v; want slot_waiting, slot_acquired, instance_started once each, in that order", order)
	}
	return nil
}

func TestMostAtOnce(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	sp := func(from, to float64) span {
		s := span{Start: at(from)}
		if to >= 0 {
			s.End = at(to)
		}
		return s
	}
	tests := []struct {
		name  string
		spans []span
		most  int
		at    float64
	}{
		{"none", nil, 0, -1},
		{"one", []span{sp(1, 2)}, 1, 1},
		{"apart", []span{sp(1, 2), sp(3, 4)}, 1, 1},
		{"an end at another's start does not overlap", []span{sp(1, 2), sp(2, 3), sp(3, 4)}, 1, 1},
		{"overlapping", []span{sp(1, 3), sp(2, 4)}, 2, 2},
		{"unsorted", []span{sp(5, 6), sp(2, 4), sp(1, 3), sp(3.5, 5.5)}, 2, 2},
		{"nested", []span{sp(1, 10), sp(2, 3), sp(2.5, 4), sp(3, 5)}, 3, 2.5},
		{"still running", []span{sp(1, -1), sp(5, 6), sp(7, 8)}, 2, 5},
		{"same start", []span{sp(1, 2), sp(1, 2), sp(1, 2)}, 3, 1},
	}
	for _, tt := range tests {
		most, when := mostAtOnce(tt.spans)
		want := time.Time{}
		if tt.at >= 0 {
			want = at(tt.at)
		}
		if most != tt.most || !when.Equal(want) {
			t.Errorf("%s: %d at %s, want %d at %s", tt.name, most, when, tt.most, want)
		}
	}
}

func TestRunSpan(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := func(typ string, s int) apiv1.HistoryEntry {
		return apiv1.HistoryEntry{Type: apiv1.HistoryType(typ), Time: t0.Add(time.Duration(s) * time.Second)}
	}
	tests := []struct {
		name       string
		evs        []apiv1.HistoryEntry
		ok         bool
		start, end int // seconds; -1: zero
	}{
		{"never started", []apiv1.HistoryEntry{e("instance_created", 0), e("slot_waiting", 1), e("instance_cancelled", 2)}, false, -1, -1},
		{"running", []apiv1.HistoryEntry{e("instance_created", 0), e("instance_started", 1), e("activity_scheduled", 2)}, true, 1, -1},
		{"completed after a wait", []apiv1.HistoryEntry{e("slot_waiting", 1), e("slot_acquired", 5), e("instance_started", 5), e("instance_completed", 9)}, true, 5, 9},
		{"failed", []apiv1.HistoryEntry{e("instance_started", 1), e("instance_failed", 3)}, true, 1, 3},
	}
	for _, tt := range tests {
		s, ok := runSpan(tt.evs)
		when := func(sec int) time.Time {
			if sec < 0 {
				return time.Time{}
			}
			return t0.Add(time.Duration(sec) * time.Second)
		}
		if ok != tt.ok || !s.Start.Equal(when(tt.start)) || !s.End.Equal(when(tt.end)) {
			t.Errorf("%s: %+v %v, want %v from %s to %s", tt.name, s, ok, tt.ok, when(tt.start), when(tt.end))
		}
	}
}

func hasEntry(evs []apiv1.HistoryEntry, typ string) bool {
	return slices.ContainsFunc(evs, func(e apiv1.HistoryEntry) bool { return string(e.Type) == typ })
}

func slotHolders(l *apiv1.ConcurrencyLine) []string {
	var ids []string
	for _, h := range l.Key.Holders {
		ids = append(ids, h.InstanceID)
	}
	return ids
}

func slotWaiters(l *apiv1.ConcurrencyLine) []string {
	var ids []string
	for _, w := range l.Waiting {
		ids = append(ids, w.InstanceID)
	}
	return ids
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func spansString(spans []span) string {
	s := ""
	for _, sp := range spans {
		s += fmt.Sprintf("\n  %s %s–%s", sp.ID, sp.Start.Format("15:04:05.000"), sp.End.Format("15:04:05.000"))
	}
	return s
}

// offset is t as time since the kill, for a log.
func offset(t, kill time.Time) string {
	return fmt.Sprintf("%+.3fs", t.Sub(kill).Seconds())
}

func entriesString(evs []apiv1.HistoryEntry) string {
	s := ""
	for _, e := range evs {
		s += fmt.Sprintf("  %3d %s %-20s %-9s %-6s %s\n", e.Seq, e.Time.Format("15:04:05.000"), e.Type, e.StepPath, e.Node, e.Data)
	}
	return s
}
