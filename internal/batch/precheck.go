package batch

import (
	"fmt"

	"github.com/weftworks/weft/host/weft"
)

// StatusView is what Precheck reads of an instance: its status, and for a
// retry whether its failure names a step to continue from.
type StatusView struct {
	Status weft.Status
	// FailedAtStep is set when the instance failed at a step (its state's
	// failure names one); an instance that failed before its first step
	// or after its last has nothing to retry from.
	FailedAtStep bool
}

// Precheck reports whether an instance in the state inst can take the
// operation op, and if not why, as a short phrase an operator reads in a
// list of skipped items: "finished (completed)", "not failed (running)",
// "not paused (suspended)". The rules by status:
//
//   - cancel, signal: not finished;
//   - retry: failed at a step;
//   - pause: not finished, not paused, and started (not pending);
//   - resume: paused;
//   - delete: finished;
//   - migrate: suspended, paused or failed (a running instance is to be
//     paused first);
//   - reset: started (not pending);
//   - release: pending.
//
// The stepper skips an item that fails them and delivers the operation to
// the others; the execution that applies it checks again, under the
// instance's lock, since the status may change in between.
func Precheck(op weft.BatchOp, inst StatusView) (ok bool, reason string) {
	s := inst.Status
	if !s.Valid() {
		return false, fmt.Sprintf("unknown status %q", s)
	}
	finished := "finished (" + string(s) + ")"
	switch op {
	case weft.BatchCancel, weft.BatchSignal:
		if s.Terminal() {
			return false, finished
		}
	case weft.BatchRetry:
		if s != weft.StatusFailed {
			return false, "not failed (" + string(s) + ")"
		}
		if !inst.FailedAtStep {
			return false, "failed before its first step or after its last: nothing to retry from"
		}
	case weft.BatchPause:
		switch {
		case s.Terminal():
			return false, finished
		case s == weft.StatusPaused:
			return false, "already paused"
		case s == weft.StatusPending:
			return false, "not started (pending)"
		}
	case weft.BatchResume:
		if s != weft.StatusPaused {
			return false, "not paused (" + string(s) + ")"
		}
	case weft.BatchDelete:
		if !s.Terminal() {
			return false, "not finished (" + string(s) + ")"
		}
	case weft.BatchMigrate:
		switch s {
		case weft.StatusSuspended, weft.StatusPaused, weft.StatusFailed:
		case weft.StatusRunning:
			return false, "running: pause it first"
		case weft.StatusPending:
			return false, "not started (pending)"
		default:
			return false, finished
		}
	case weft.BatchReset:
		if s == weft.StatusPending {
			return false, "not started (pending)"
		}
	case weft.BatchRelease:
		if s != weft.StatusPending {
			return false, "not pending (" + string(s) + ")"
		}
	default:
		return false, fmt.Sprintf("unknown operation %q", op)
	}
	return true, ""
}
