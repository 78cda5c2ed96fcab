package store

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels that classify store errors; match them with errors.Is. Errors
// from a Store wrap at most one of them, or the caller's ctx.Err().
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
	// ErrNotQueued: a commit tried to consume a stimulus that is not
	// queued: unknown, already delivered, expired or dead-lettered.
	ErrNotQueued = errors.New("stimulus not queued")
	// ErrInboxNotEmpty: a commit that drains the inbox (Commit.Drains)
	// found messages in it that it does not consume: the writer has not
	// read them yet.
	ErrInboxNotEmpty = errors.New("inbox holds messages not consumed")
	// ErrCatalogChanged: a create read its definition and plugins from a
	// catalog that has changed since (Commit.Catalog): read them again.
	ErrCatalogChanged = errors.New("catalog changed since it was read")
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

// PluginError is Store.ResolveStart's error for a plugin it could not
// read; it wraps the reason (ErrNotFound when the plugin is not stored).
type PluginError struct {
	Plugin string
	Err    error
}

// Error implements error.
func (e *PluginError) Error() string { return "plugin " + e.Plugin + ": " + e.Err.Error() }

// Unwrap returns the reason.
func (e *PluginError) Unwrap() error { return e.Err }

// CommitError is returned by Store.Commit and Store.DeleteInstance when the
// write is refused. It wraps exactly one of ErrConflict, ErrFenced,
// ErrExists, ErrNotFound, ErrNotQueued, ErrInboxNotEmpty or
// ErrCatalogChanged and says what
// the store holds, so that the caller can tell how far behind it is. A
// refused write changes nothing.
type CommitError struct {
	// InstanceID is the instance written.
	InstanceID string
	// Err is the reason, one of the sentinels above.
	Err error
	// Rev and Fence are the stored instance's revision and fencing token
	// (zero when it does not exist).
	Rev, Fence uint64
	// Stimulus is the id of the stimulus that was not queued, for
	// ErrNotQueued.
	Stimulus string
}

// Error implements error.
func (e *CommitError) Error() string {
	switch {
	case errors.Is(e.Err, ErrNotQueued):
		return fmt.Sprintf("store: instance %q: %v: %q", e.InstanceID, e.Err, e.Stimulus)
	case errors.Is(e.Err, ErrNotFound):
		return fmt.Sprintf("store: instance %q: %v", e.InstanceID, e.Err)
	default:
		return fmt.Sprintf("store: instance %q: %v (stored rev %d, fence %d)", e.InstanceID, e.Err, e.Rev, e.Fence)
	}
}

// Unwrap returns the reason.
func (e *CommitError) Unwrap() error { return e.Err }

// InUseError is returned by Store.DeletePlugin while non-terminal instances
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

// Invalid returns an error matching ErrInvalid with the formatted message.
// Implementations use it for argument errors.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("store: %w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// NotFound returns an error matching ErrNotFound that names what was
// missing, for example NotFound("definition %q version %d", name, v).
func NotFound(format string, args ...any) error {
	return fmt.Errorf("store: %s: %w", fmt.Sprintf(format, args...), ErrNotFound)
}
