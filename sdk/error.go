package sdk

import (
	"encoding/json"
	"errors"

	"github.com/weftworks/weft/abi"
)

// Error is an activity failure that steers the engine's retry policy. Return
// one (or an error wrapping one) from a handler.
type Error struct {
	// Code names the failure; workflow definitions list codes as
	// non_retryable.
	Code string
	// Message is for people.
	Message string
	// Retryable tells the engine whether another attempt may succeed.
	Retryable bool
	// Details is any JSON document, or nil.
	Details json.RawMessage
}

// Error implements error.
func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// WithDetails returns a copy of e carrying v, encoded as JSON, as details.
// A value that cannot be encoded leaves the details empty.
func (e *Error) WithDetails(v any) *Error {
	c := *e
	if b, err := json.Marshal(v); err == nil {
		c.Details = b
	}
	return &c
}

// NonRetryable returns a failure that no further attempt will retry.
func NonRetryable(code, message string) error {
	return &Error{Code: code, Message: message}
}

// Retryable returns a failure after which the engine tries again, as its
// retry policy allows.
func Retryable(code, message string) error {
	return &Error{Code: code, Message: message, Retryable: true}
}

// ErrCancelled reports that the activity stopped because cancellation was
// requested. Return it when Heartbeat or Cancelled reports true.
var ErrCancelled error = &Error{Code: abi.CodeCancelled, Message: "activity cancelled"}

// asError turns any handler error into an *Error. An error that is not one
// (and wraps none) is retryable with code "error": an unexpected error is
// more often transient than not, and the definition's non_retryable list can
// say otherwise.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Code == "" {
			c := *e
			c.Code = "error"
			return &c
		}
		return e
	}
	return &Error{Code: "error", Message: err.Error(), Retryable: true}
}

// encodeFailure encodes e as the ABI's failure document.
func encodeFailure(e *Error) []byte {
	b := make([]byte, 0, 64+len(e.Message)+len(e.Details))
	b = append(b, `{"code":`...)
	b = appendJSONString(b, e.Code)
	if e.Message != "" {
		b = append(b, `,"message":`...)
		b = appendJSONString(b, e.Message)
	}
	if e.Retryable {
		b = append(b, `,"retryable":true`...)
	} else {
		b = append(b, `,"retryable":false`...)
	}
	if len(e.Details) > 0 && json.Valid(e.Details) {
		b = append(b, `,"details":`...)
		b = append(b, e.Details...)
	}
	return append(b, '}')
}
