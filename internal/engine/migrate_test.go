package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
)

// Migrate (docs/operations.md, "Migrate"): instances stuck on a bad
// version move to a fixed one; those that cannot are left untouched.

// rollV1 fails at b for an instance that does not wait, and waits at hold
// for one that does.
const rollV1 = `
name: roll
steps:
  - { id: a, activity: kit.echo, input: "${ input.n }", output: a }
  - id: route
    if: "${ input.wait }"
    then:
      - { id: hold, wait: { event: go, key: "${ input.k }" } }
  - { id: b, activity: kit.fail, input: { message: "the bad release" } }
output: "${ vars.b }"
`

// rollV2 fixes b (another activity: a step that began keeps the input
// it was given, its execution and so its idempotency key), and no longer
// has hold.
const rollV2 = `
name: roll
steps:
  - { id: a, activity: kit.echo, input: "${ input.n }", output: a }
  - id: route
    if: "${ input.wait }"
    then:
      - { id: other, activity: kit.echo, input: 0 }
  - { id: b, activity: kit.echo, input: { message: "the bad release" }, output: b }
output: "${ vars.b.message }"
`

// TestMigrateDryRunThenMove: the dry run says a failed instance can move
// and one waiting at a step the target does not have cannot, naming the
// step; moved, the first completes on the new version (with a retry), and
// the second is refused before anything is sent, its state unchanged.
func TestMigrateDryRunThenMove(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(rollV1)
	ctx := context.Background()
	failed := h.finish("roll", map[string]any{"n": 7, "wait": false})
	if failed.Status != weft.StatusFailed || failed.Error == nil || failed.Error.Step != "steps[2]" {
		t.Fatalf("first run: %s %+v, want failed at b", failed.Status, failed.Error)
	}
	waiting, _, err := h.e.Start(ctx, "roll", json.RawMessage(`{"n": 8, "wait": true, "k": "w"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(waiting.ID, weft.StatusSuspended)
	h.save(rollV2)

	plan, err := h.e.PlanMigration(ctx, failed.ID, weft.MigrationTarget{})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.CanMove || plan.FromVersion != 1 || plan.ToVersion != 2 || len(plan.At) != 1 || plan.At[0].Step != "b" || len(plan.Notes) == 0 {
		t.Fatalf("dry run of the failed instance: %+v, want it can move from 1 to 2, at b, with a note of b's new activity", plan)
	}
	plan, err = h.e.PlanMigration(ctx, waiting.ID, weft.MigrationTarget{})
	if err != nil {
		t.Fatal(err)
	}
	if plan.CanMove || len(plan.Problems) == 0 || plan.Problems[0].Step != "hold" {
		t.Fatalf("dry run of the waiting instance: %+v, want it cannot move, naming hold", plan)
	}

	// The one that cannot move is refused, and left as it was.
	before, err := h.store.GetInstance(ctx, waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.e.Migrate(ctx, waiting.ID, weft.MigrationTarget{}, "", weft.Operation{Actor: "alice"})
	var me *weft.MigrationError
	if !errors.As(err, &me) || !errors.Is(err, weft.ErrNotMigratable) || me.Plan.Problems[0].Step != "hold" {
		t.Fatalf("Migrate of the waiting instance: %v, want a MigrationError naming hold", err)
	}
	after, err := h.store.GetInstance(ctx, waiting.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != 1 || !bytes.Equal(after.State, before.State) || after.Rev != before.Rev {
		t.Errorf("the refused instance changed: version %d, rev %d→%d", after.Version, before.Rev, after.Rev)
	}

	// The failed one moves and is retried in one operation.
	op := weft.Operation{Actor: "alice", Reason: "roll forward"}
	if _, err := h.e.Migrate(ctx, failed.ID, weft.MigrationTarget{}, engine.MigrateThenRetry, op); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the moved instance completed", func() bool { return h.status(failed.ID) == weft.StatusCompleted })
	done, err := h.store.GetInstance(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.Version != 2 || string(done.Output) != `"the bad release"` {
		t.Errorf("moved instance: version %d, output %s; want 2 and b's echo", done.Version, done.Output)
	}
	e := onlyEntry(t, h, failed.ID, weft.HistoryInstanceMigrated)
	if d := entryData(t, e); e.Actor != "alice" || d["from_version"] != float64(1) || d["to_version"] != float64(2) || d["reason"] != "roll forward" {
		t.Errorf("instance_migrated: actor %q, data %s", e.Actor, e.Data)
	}
	onlyEntry(t, h, failed.ID, weft.HistoryInstanceRetried)
}

// TestMigrateFailedInstanceStaysFailed: a migration of a failed instance
// without a retry moves it and leaves it failed, kept for its retention;
// a retry later runs the new version.
func TestMigrateFailedInstanceStaysFailed(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(rollV1)
	ctx := context.Background()
	failed := h.finish("roll", map[string]any{"n": 3, "wait": false})
	h.save(rollV2)
	if _, err := h.e.Migrate(ctx, failed.ID, weft.MigrationTarget{Version: 2}, "", weft.Operation{Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the migration applied", func() bool { return count(h.history(failed.ID), weft.HistoryInstanceMigrated) == 1 })
	moved, err := h.store.GetInstance(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Status != weft.StatusFailed || moved.Version != 2 || !moved.DeleteAfter.Equal(failed.DeleteAfter) {
		t.Fatalf("moved: %s version %d delete after %s; want failed, version 2, delete after %s as before", moved.Status, moved.Version, moved.DeleteAfter, failed.DeleteAfter)
	}
	if err := h.e.Retry(ctx, failed.ID, weft.Operation{Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the retried instance completed", func() bool { return h.status(failed.ID) == weft.StatusCompleted })
}

// TestMigratePluginVersion: a migration pins a plugin to another of its
// versions when that version has every activity the rest of the run
// calls, and refuses one that lacks one, naming it.
func TestMigratePluginVersion(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(rollV1)
	ctx := context.Background()
	failed := h.finish("roll", map[string]any{"n": 5, "wait": false})
	old := failed.Plugins["kit"]
	lacking, full := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, r := range []weft.PluginRecord{{Name: "kit", Version: lacking, Size: 1, Activities: []string{"echo"}}, {Name: "kit", Version: full, Size: 1, Activities: []string{"echo", "fail"}}} {
		if _, err := h.store.PutPlugin(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := h.e.PlanMigration(ctx, failed.ID, weft.MigrationTarget{Version: 1, Plugins: map[string]string{"kit": lacking}})
	if err != nil {
		t.Fatal(err)
	}
	if plan.CanMove || len(plan.Problems) != 1 || !strings.Contains(plan.Problems[0].Message, "has no activity fail") {
		t.Fatalf("plan to a version without fail: %+v, want one problem naming fail", plan)
	}
	plan, err = h.e.Migrate(ctx, failed.ID, weft.MigrationTarget{Version: 1, Plugins: map[string]string{"kit": full}}, "", weft.Operation{Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.CanMove || plan.Plugins["kit"] != (weft.PinChange{From: old, To: full}) {
		t.Fatalf("plan: %+v, want kit moved from %s to %s", plan, old, full)
	}
	pollUntil(t, "the migration applied", func() bool { return count(h.history(failed.ID), weft.HistoryInstanceMigrated) == 1 })
	moved, err := h.store.GetInstance(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if moved.Plugins["kit"] != full || moved.Version != 1 || moved.Status != weft.StatusFailed {
		t.Errorf("moved: plugins %v version %d status %s; want kit %s, version 1, still failed", moved.Plugins, moved.Version, moved.Status, full)
	}
	e := onlyEntry(t, h, failed.ID, weft.HistoryInstanceMigrated)
	if d := entryData(t, e); d["plugins"] == nil {
		t.Errorf("instance_migrated data %s, want the pin change", e.Data)
	}
}
