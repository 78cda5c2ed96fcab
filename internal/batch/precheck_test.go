package batch

import (
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestPrecheck: every operation against every status. A row lists the
// reason for each status, in weft.Statuses' order; "" is ok. Retry's row
// is an instance that failed at a step.
func TestPrecheck(t *testing.T) {
	t.Parallel()
	statuses := weft.Statuses()
	want := map[weft.BatchOp][]string{
		// pending, running, suspended, paused, completed, failed, cancelled
		weft.BatchCancel:  {"", "", "", "", "finished (completed)", "finished (failed)", "finished (cancelled)"},
		weft.BatchSignal:  {"", "", "", "", "finished (completed)", "finished (failed)", "finished (cancelled)"},
		weft.BatchRetry:   {"not failed (pending)", "not failed (running)", "not failed (suspended)", "not failed (paused)", "not failed (completed)", "", "not failed (cancelled)"},
		weft.BatchPause:   {"not started (pending)", "", "", "already paused", "finished (completed)", "finished (failed)", "finished (cancelled)"},
		weft.BatchResume:  {"not paused (pending)", "not paused (running)", "not paused (suspended)", "", "not paused (completed)", "not paused (failed)", "not paused (cancelled)"},
		weft.BatchDelete:  {"not finished (pending)", "not finished (running)", "not finished (suspended)", "not finished (paused)", "", "", ""},
		weft.BatchMigrate: {"not started (pending)", "running: pause it first", "", "", "finished (completed)", "", "finished (cancelled)"},
		weft.BatchReset:   {"not started (pending)", "", "", "", "", "", ""},
		weft.BatchRelease: {"", "not pending (running)", "not pending (suspended)", "not pending (paused)", "not pending (completed)", "not pending (failed)", "not pending (cancelled)"},
	}
	if len(want) != len(weft.BatchOps()) {
		t.Fatalf("the table has %d operations, weft.BatchOps %d", len(want), len(weft.BatchOps()))
	}
	for _, op := range weft.BatchOps() {
		row, listed := want[op]
		if !listed || len(row) != len(statuses) {
			t.Fatalf("%s: the table has no row of %d statuses", op, len(statuses))
		}
		for i, s := range statuses {
			ok, reason := Precheck(op, StatusView{Status: s, FailedAtStep: s == weft.StatusFailed})
			if ok != (row[i] == "") || reason != row[i] {
				t.Errorf("Precheck(%s, %s) = %v, %q; want %q", op, s, ok, reason, row[i])
			}
		}
	}
}

// TestPrecheckEdges: a failure without a step, an unknown status, an
// unknown operation.
func TestPrecheckEdges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		op     weft.BatchOp
		inst   StatusView
		reason string
	}{
		{weft.BatchRetry, StatusView{Status: weft.StatusFailed}, "failed before its first step or after its last: nothing to retry from"},
		{weft.BatchMigrate, StatusView{Status: weft.StatusFailed}, ""},
		{weft.BatchCancel, StatusView{Status: "sleeping"}, `unknown status "sleeping"`},
		{weft.BatchCancel, StatusView{}, `unknown status ""`},
		{"kill", StatusView{Status: weft.StatusRunning}, `unknown operation "kill"`},
	}
	for _, tt := range tests {
		if ok, reason := Precheck(tt.op, tt.inst); ok != (tt.reason == "") || reason != tt.reason {
			t.Errorf("Precheck(%s, %+v) = %v, %q; want %q", tt.op, tt.inst, ok, reason, tt.reason)
		}
	}
}
