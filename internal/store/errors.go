package store

import (
	"errors"
	"fmt"

	"github.com/weftworks/weft/host/weft"
)

// Sentinels that classify store errors; match them with errors.Is. Errors
// from a Store wrap at most one of them, or the caller's ctx.Err().
var (
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
	// ErrNotDurable: the write was applied but fewer replicas than the
	// store requires confirmed it in time, so a failover may lose it. The
	// error also matches weft.ErrUnavailable: treat the write as failed
	// and retry it (a store that returns it makes retries safe).
	ErrNotDurable = errors.New("write not confirmed by enough replicas")
)

// SearchTypeError is Store.RegisterSearchAttributes's refusal: a search
// attribute is registered with another type. It matches weft.ErrInvalid:
// the definition cannot be saved as it is.
type SearchTypeError struct {
	// Name is the attribute; Type the type asked for; Registered the
	// type it has, since Workflow declared it.
	Name       string
	Type       weft.SearchType
	Registered weft.SearchType
	Workflow   string
}

// Error implements error.
func (e *SearchTypeError) Error() string {
	return fmt.Sprintf("search attribute %q is a %s (declared so by workflow %s), not a %s", e.Name, e.Registered, e.Workflow, e.Type)
}

// Unwrap returns weft.ErrInvalid.
func (e *SearchTypeError) Unwrap() error { return weft.ErrInvalid }

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
	case errors.Is(e.Err, weft.ErrNotFound):
		return fmt.Sprintf("store: instance %q: %v", e.InstanceID, e.Err)
	default:
		return fmt.Sprintf("store: instance %q: %v (stored rev %d, fence %d)", e.InstanceID, e.Err, e.Rev, e.Fence)
	}
}

// Unwrap returns the reason.
func (e *CommitError) Unwrap() error { return e.Err }

// Invalid returns an error matching ErrInvalid with the formatted message.
// Implementations use it for argument errors.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("store: %w: %s", weft.ErrInvalid, fmt.Sprintf(format, args...))
}

// NotFound returns an error matching ErrNotFound that names what was
// missing, for example NotFound("definition %q version %d", name, v).
func NotFound(format string, args ...any) error {
	return fmt.Errorf("store: %s: %w", fmt.Sprintf(format, args...), weft.ErrNotFound)
}
