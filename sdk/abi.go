package sdk

// The names and values of the Weft ABI that the SDK uses, copied from the
// package github.com/weftworks/weft/abi (abi/README.md is the normative
// specification) so that the SDK's module depends on the standard library
// only: a plugin that requires the SDK does not require the host's module
// and its dependencies.
//
// Each copy is named "abi" followed by the name of its original (abiStatusOK
// is abi.StatusOK). A test in the host's module, abi/sdk_test.go, checks
// that every declaration of this file equals its original (constants by
// type and value, types by structure and tags, functions by body) and that
// the //go:wasmimport and //go:wasmexport names of host_wasm.go are the
// ABI's. Change the original first; that test then says what to copy.

// abiVersion is the ABI version the SDK implements; weft_abi_version
// returns it.
//
//lint:ignore U1000 used by host_wasm.go, which builds for wasm only
const abiVersion = 1

// abiStatus is what weft_invoke and weft_manifest return.
type abiStatus = uint32

// Statuses returned by the guest's exports.
const (
	abiStatusOK    abiStatus = 0
	abiStatusError abiStatus = 1
	abiStatusPanic abiStatus = 2
)

// abiHTTPError is what http_request returns when no response arrived.
type abiHTTPError = int32

// Reasons an HTTP request got no response.
const (
	abiHTTPTimeout     abiHTTPError = -1
	abiHTTPUnreachable abiHTTPError = -2
	abiHTTPTLS         abiHTTPError = -3
	abiHTTPBadResponse abiHTTPError = -4
)

// abiNotFound is what the sized host functions return when there is
// nothing to return.
const abiNotFound int32 = -1

// Log levels passed to the log host function.
const (
	abiLevelDebug = 0
	abiLevelInfo  = 1
	abiLevelWarn  = 2
	abiLevelError = 3
)

// Failure codes with a meaning to the host.
const (
	abiCodeCancelled       = "cancelled"
	abiCodeUnknownActivity = "unknown_activity"
	abiCodeBadInput        = "bad_input"
	abiCodePanic           = "panic"
)

// abiMaxNameLen is the longest plugin or activity name.
const abiMaxNameLen = 64

// abiValidName reports whether s is a valid plugin or activity name: 1 to
// abiMaxNameLen characters from [a-z0-9_-], starting with a letter.
func abiValidName(s string) bool {
	if len(s) == 0 || len(s) > abiMaxNameLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// abiInfo is the document the info host function writes.
type abiInfo struct {
	InstanceID        string `json:"instance_id"`
	Workflow          string `json:"workflow"`
	StepID            string `json:"step_id"`
	Plugin            string `json:"plugin"`
	Activity          string `json:"activity"`
	Attempt           int    `json:"attempt"`
	IdempotencyKey    string `json:"idempotency_key"`
	DeadlineUnixMilli int64  `json:"deadline_unix_ms"`
}
