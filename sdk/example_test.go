package sdk_test

import (
	"errors"
	"fmt"

	"github.com/weftworks/weft/sdk"
)

type greetIn struct {
	Name string `json:"name"`
}

type greetOut struct {
	Greeting string `json:"greeting"`
}

// greet is an activity: it greets by name, and fails without retries when
// there is none.
func greet(_ *sdk.Context, in greetIn) (greetOut, error) {
	if in.Name == "" {
		return greetOut{}, sdk.NonRetryable("no_name", "name is required")
	}
	return greetOut{Greeting: "hello, " + in.Name}, nil
}

// A plugin registers its activities in an init function,
//
//	func init() { sdk.Register("greet", sdk.Typed(greet)) }
//
// and the host calls them through the ABI's exports, which exist in a wasm
// build only. The handler itself is a plain function: one that does not
// reach the host runs anywhere, with a nil *sdk.Context, as here or in a
// unit test. Package plugintest runs the built plugin in the host's
// sandbox, Context and all.
func Example() {
	h := sdk.Typed(greet)
	for _, input := range []string{`{"name":"Ada"}`, `{}`, `{"name":`} {
		out, err := h(nil, []byte(input))
		var e *sdk.Error
		if errors.As(err, &e) {
			fmt.Printf("%s -> failure %q, retryable %t\n", input, e.Code, e.Retryable)
			continue
		}
		fmt.Printf("%s -> %s\n", input, out)
	}
	// Output:
	// {"name":"Ada"} -> {"greeting":"hello, Ada"}
	// {} -> failure "no_name", retryable false
	// {"name": -> failure "bad_input", retryable false
}

// A failure that wraps an *sdk.Error keeps its code, retryability and
// details; any other error is retryable with the code "error".
func ExampleError() {
	charge := func(*sdk.Context, []byte) ([]byte, error) {
		declined := sdk.NonRetryable("card_declined", "insufficient funds").(*sdk.Error)
		return nil, fmt.Errorf("charging order 42: %w", declined.WithDetails(map[string]int{"order": 42}))
	}
	_, err := charge(nil, nil)
	var e *sdk.Error
	if errors.As(err, &e) {
		fmt.Printf("%s, retryable %t, details %s\n", e, e.Retryable, e.Details)
	}
	// Output:
	// card_declined: insufficient funds, retryable false, details {"order":42}
}

// Do returns an *sdk.HTTPError when no response arrived; errors.Is tells
// the reasons apart, so that a plugin retries what may pass.
func ExampleHTTPError() {
	for _, err := range []error{sdk.ErrHTTPTimeout, sdk.ErrHTTPTLS} {
		wrapped := fmt.Errorf("posting the webhook: %w", err)
		var herr *sdk.HTTPError
		if errors.As(wrapped, &herr) {
			fmt.Printf("%s: timeout %t, unreachable %t, failure code %q\n",
				herr.Reason, herr.Timeout(), errors.Is(wrapped, sdk.ErrHTTPUnreachable), "http_"+herr.Reason)
		}
	}
	// Output:
	// timeout: timeout true, unreachable false, failure code "http_timeout"
	// tls: timeout false, unreachable false, failure code "http_tls"
}
