package weft

import "fmt"

// Limits every part of the host applies alike.
const (
	// MaxIDLen bounds instance, stimulus and timer ids, and definition and
	// plugin names, in bytes.
	MaxIDLen = 256
	// DefaultListLimit is the page size of a list whose limit is not
	// positive.
	DefaultListLimit = 100
	// MaxListLimit bounds every page.
	MaxListLimit = 1000
	// MaxExamine bounds the instances a list reads for one page when a
	// query filters them (InstanceFilter.Examine), so that a query that
	// matches little answers in bounded time, with a cursor to read on.
	MaxExamine = 10000
)

// ClampLimit returns the page size for a requested limit: DefaultListLimit
// when n is not positive, at most MaxListLimit.
func ClampLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultListLimit
	case n > MaxListLimit:
		return MaxListLimit
	}
	return n
}

// CheckID reports an empty id or name, or one longer than MaxIDLen; what
// names the field in the message. The error matches ErrInvalid.
func CheckID(what, id string) error {
	if id == "" {
		return fmt.Errorf("%w: %s must not be empty", ErrInvalid, what)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, what, len(id), MaxIDLen)
	}
	return nil
}
