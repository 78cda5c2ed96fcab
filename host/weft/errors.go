package weft

import (
	"errors"
	"fmt"
	"strings"
)

// The answers every part of the host gives alike, which the API maps to
// statuses (docs/http-api.md, "Errors"): match them with errors.Is. The
// stores return the first ones (an error from a store wraps at most one of
// them, or the caller's ctx.Err()); the engine the rest.
var (
	// ErrNotFound: no record with that id or name (instance, definition,
	// definition version, plugin, plugin version).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a compare-and-set failed because the revision the
	// writer read is no longer the stored one. Re-read and decide again.
	ErrConflict = errors.New("stale revision")
	// ErrFenced: the writer's fencing token is lower than the one stored
	// with the instance: another holder of the instance's lock wrote since.
	// The writer has lost its lock and must stop writing.
	ErrFenced = errors.New("fenced: lower fencing token than the stored one")
	// ErrExists: a create found a record with that id already stored.
	ErrExists = errors.New("already exists")
	// ErrInUse: a plugin cannot be deleted because a non-terminal instance
	// pins one of its versions; see *InUseError.
	ErrInUse = errors.New("in use")
	// ErrInvalid: an argument was refused before anything was read or
	// written (empty id, unknown status, bad cursor, …). The message says
	// which field.
	ErrInvalid = errors.New("invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store closed")
	// ErrUnavailable: the store's server could not be reached, or said it
	// cannot serve now (Redis down, restarting, loading its data, out of
	// connections). The call may be retried later; a write whose answer was
	// lost may have taken effect, as the store's doc says.
	ErrUnavailable = errors.New("store unavailable")
)

// ErrFinished is what an operation that needs an unfinished instance (a
// cancel) answers for one that completed, failed or was cancelled: the API
// maps it to 409 Conflict.
var ErrFinished = errors.New("instance finished")

// FinishedError says which instance had finished already, and how. It
// matches ErrFinished.
type FinishedError struct {
	ID     string
	Status Status
}

// Error says "instance "ID" is STATUS already".
func (e *FinishedError) Error() string {
	return fmt.Sprintf("instance %q is %s already", e.ID, e.Status)
}

// Is reports whether target is ErrFinished.
func (e *FinishedError) Is(target error) bool { return target == ErrFinished }

// InUseError is returned by a plugin's deletion (node.DeletePlugin, Store.DeletePlugin) while non-terminal instances
// pin a version of the plugin. It matches ErrInUse.
type InUseError struct {
	// Plugin is the plugin's name.
	Plugin string
	// Instances lists some of the instances that pin it (at most
	// MaxInUseListed), so that the answer can name them.
	Instances []string
	// Workflows lists some of the saved workflows that call it (at most
	// MaxInUseListed), when those are why it is in use.
	Workflows []string
}

// MaxInUseListed bounds InUseError.Instances.
const MaxInUseListed = 10

// Error implements error.
func (e *InUseError) Error() string {
	if len(e.Workflows) > 0 {
		return fmt.Sprintf("store: plugin %q in use by workflow(s) %s; delete or change them first, or force the deletion", e.Plugin, strings.Join(e.Workflows, ", "))
	}
	return fmt.Sprintf("store: plugin %q in use by instance(s) %s", e.Plugin, strings.Join(e.Instances, ", "))
}

// Is makes an *InUseError match ErrInUse.
func (e *InUseError) Is(target error) bool { return target == ErrInUse }

// GrantsConflictError is PutGrants refusing a write made for another
// revision than the stored one. It matches ErrConflict.
type GrantsConflictError struct {
	Plugin string
	// Want is the revision the write was for, Stored the one stored (0:
	// nothing granted).
	Want, Stored uint64
}

func (e *GrantsConflictError) Error() string {
	return fmt.Sprintf("store: grants of plugin %s: revision %d is stored, not %d: %v", e.Plugin, e.Stored, e.Want, ErrConflict)
}

// Is reports whether target is ErrConflict.
func (e *GrantsConflictError) Is(target error) bool { return target == ErrConflict }

// ErrNoSuchWorkflow is returned by Start when no definition of the
// workflow is saved. The error also matches ErrNotFound, as does
// one for a plugin the workflow uses that is not uploaded.
var ErrNoSuchWorkflow = errors.New("no such workflow")

// ErrIDInUse is returned by Start when the id it was given names an
// instance of another workflow.
var ErrIDInUse = errors.New("id in use")

// ErrInstanceExists is returned by Import when an instance with the id
// exists and ImportOptions.Replace was not given.
var ErrInstanceExists = errors.New("instance exists")

// ErrSlotsTaken is returned by Import for an instance that has started
// (it ran where it was exported from) when every slot of its concurrency
// key is taken here: it cannot wait in the line, as only an instance
// that has not started does, and running it would exceed the limit.
var ErrSlotsTaken = errors.New("every slot of the concurrency key is taken")

// ErrChildInFlight is returned by Import for a copy (ImportOptions.ID)
// of an instance that waits for a child instance: the child reports its
// end to the instance it was started by, never to the copy, which would
// wait forever. It matches ErrInvalid.
var ErrChildInFlight = fmt.Errorf("%w: the state waits for a child instance", ErrInvalid)

// ErrNotFailed is returned by Retry for an instance that has not failed.
var ErrNotFailed = errors.New("not failed")

// ErrNotPaused is returned by a resume of an instance that is not paused
// (and has no pause on its way).
var ErrNotPaused = errors.New("not paused")

// ErrNotResettable is returned by a reset to a step the instance cannot be
// reset to: it never began the step, the variables the step began with
// were not recorded, the step is not in the definition's top-level list,
// or the instance has not started.
var ErrNotResettable = errors.New("not resettable")

// ErrNotMigratable is what a migration answers for an instance that
// cannot move to its target now; see *MigrationError.
var ErrNotMigratable = errors.New("cannot migrate")

// MigrationError is a migration refused before anything was sent: Plan
// says why. It matches ErrNotMigratable.
type MigrationError struct{ Plan *MigrationPlan }

// Error says which instance, and its first problem.
func (e *MigrationError) Error() string {
	msg := fmt.Sprintf("instance %q cannot move from version %d to %d", e.Plan.Instance, e.Plan.FromVersion, e.Plan.ToVersion)
	if len(e.Plan.Problems) > 0 {
		// A problem's message names its step.
		msg += ": " + e.Plan.Problems[0].Message
		if n := len(e.Plan.Problems) - 1; n > 0 {
			msg += fmt.Sprintf(" (and %d more)", n)
		}
	}
	return msg
}

// Is reports whether target is ErrNotMigratable.
func (e *MigrationError) Is(target error) bool { return target == ErrNotMigratable }

// ErrNotRetryable is returned by Retry for an instance that failed before
// its first step or after its last (its input did not decode, its output
// expression failed): run again, it would fail the same way.
var ErrNotRetryable = errors.New("not retryable")
