package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// The chaos run's schedule: every second, a run of a one-step workflow,
// through every fault the run injects. Its window is wide enough that a
// Redis kill's outage is caught up, not missed.
const (
	chaosTickFlow = "name: chaos-tick\nsteps: [{id: s, set: {at: '${ input.at }'}}]\noutput: '${ vars.at }'\n"
	chaosSchedule = `
id: chaos-tick
workflow: chaos-tick
input: { at: "${ schedule.time }" }
spec: { every: 1s }
policy: { overlap: allow_all, catch_up_window: 10m }
`
)

// deploySchedule saves the schedule and its workflow through the rig's
// first node.
func deploySchedule(t *testing.T, r *rig) {
	t.Helper()
	c, ok := r.nodes[0].client()
	if !ok {
		t.Fatal("node1 is not up")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, _, err := c.PutWorkflow(ctx, "chaos-tick", []byte(chaosTickFlow)); err != nil {
		t.Fatalf("saving the schedule's workflow: %v", err)
	}
	if _, _, err := c.PutSchedule(ctx, "chaos-tick", []byte(chaosSchedule)); err != nil {
		t.Fatalf("saving the schedule: %v", err)
	}
}

// checkSchedule pauses the schedule, waits for its last runs, and checks
// that every second from its first run to its last fired one run, created
// once and recorded once, and that no fire was missed or failed to start.
func checkSchedule(t *testing.T, r *rig, stats *callStats, res *chaosResult) {
	t.Helper()
	v := &verdict{name: "every second of the schedule starts one run"}
	res.verdicts = append(res.verdicts, v)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(3, 3))
	call := func(what string, f func(context.Context, *client.Client) error) bool {
		if _, err := r.call(ctx, rng, stats, 30*time.Second, f); err != nil {
			res.harness = append(res.harness, fmt.Sprintf("schedule: %s: %v", what, err))
			v.check(false, "the harness could not %s: %v", what, err)
			return false
		}
		return true
	}
	if !call("pause the schedule", func(ctx context.Context, c *client.Client) error {
		_, err := c.PauseSchedule(ctx, "chaos-tick", "the chaos run checks its runs")
		return err
	}) {
		return
	}
	// The runs: every one finished, by nominal time.
	var runs map[string]apiv1.Instance
	for deadline := time.Now().Add(2 * time.Minute); ; {
		open := 0
		if !call("list the schedule's runs", func(ctx context.Context, c *client.Client) error {
			runs = map[string]apiv1.Instance{}
			for cursor := ""; ; {
				page, err := c.Instances(ctx, client.InstanceFilter{Workflow: "chaos-tick", ListOptions: client.ListOptions{Limit: 1000, Cursor: cursor}})
				if err != nil {
					return err
				}
				for _, in := range page.Items {
					runs[in.ID] = in
				}
				if page.NextCursor == "" {
					return nil
				}
				cursor = page.NextCursor
			}
		}) {
			return
		}
		for _, in := range runs {
			if !in.Status.Terminal() {
				open++
			}
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // polling, with a deadline
	}
	var nominals []time.Time
	for id, in := range runs {
		n, err := time.Parse(time.RFC3339, id[len("chaos-tick@"):])
		v.check(err == nil, "run %s is not named after a fire: %v", id, err)
		v.check(in.Status == apiv1.StatusCompleted, "run %s is %s", id, in.Status)
		if err == nil {
			nominals = append(nominals, n)
		}
	}
	slices.SortFunc(nominals, func(a, b time.Time) int { return a.Compare(b) })
	res.counts["schedule runs"] = len(nominals)
	if len(nominals) < 2 {
		v.check(false, "%d runs of the schedule", len(nominals))
		return
	}
	for s := nominals[0]; !s.After(nominals[len(nominals)-1]); s = s.Add(time.Second) {
		_, ok := runs["chaos-tick@"+s.UTC().Format(time.RFC3339)]
		v.check(ok, "no run for the fire of %s", s.Format(time.TimeOnly))
	}
	// The record: one run_started per fire, nothing missed or failed.
	started := map[string]int{}
	if !call("read the schedule's record", func(ctx context.Context, c *client.Client) error {
		clear(started)
		for after := uint64(0); ; {
			page, err := c.ScheduleEvents(ctx, "chaos-tick", after, 1000)
			if err != nil {
				return err
			}
			for _, e := range page.Items {
				after = e.Seq
				switch e.Type {
				case "run_started":
					var d struct {
						InstanceID string `json:"instance_id"`
					}
					if err := json.Unmarshal(e.Data, &d); err != nil {
						return err
					}
					started[d.InstanceID]++
				case "start_failed":
					v.check(false, "event %d: a fire failed to start: %s", e.Seq, e.Data)
				case "skipped":
					v.check(false, "event %d: fires skipped: %s", e.Seq, e.Data)
				}
			}
			if len(page.Items) == 0 {
				return nil
			}
		}
	}) {
		return
	}
	// The record keeps its last weft.MaxScheduleEvents events: the runs
	// from the first one it still names on must each be there once.
	var kept time.Time
	for id := range started {
		if n, err := time.Parse(time.RFC3339, id[len("chaos-tick@"):]); err == nil && (kept.IsZero() || n.Before(kept)) {
			kept = n
		}
	}
	for id := range runs {
		n, err := time.Parse(time.RFC3339, id[len("chaos-tick@"):])
		if err != nil || n.Before(kept) {
			continue
		}
		v.check(started[id] == 1, "run %s recorded as started %d times", id, started[id])
	}
	for id, k := range started {
		_, ok := runs[id]
		v.check(ok && k == 1, "the record started %s %d times; the host has it: %v", id, k, ok)
	}
}
