package call_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/plugins/call"
)

func TestErrorNamesTheCallAndWrapsItsReason(t *testing.T) {
	t.Parallel()
	reason := fmt.Errorf("%w: the guest was stopped at its deadline", call.ErrTimeout)
	err := error(&call.Error{Version: "0123456789abcdef0123", Activity: "resize", Err: reason, Stderr: "panic: boom"})
	want := "plugin 0123456789ab activity \"resize\": deadline exceeded: the guest was stopped at its deadline\nguest stderr:\npanic: boom"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if !errors.Is(err, call.ErrTimeout) || errors.Is(err, call.ErrTrap) {
		t.Errorf("errors.Is: want ErrTimeout alone to match %v", err)
	}
	short := &call.Error{Version: "abc", Activity: "a", Err: context.Canceled}
	if got := short.Error(); got != `plugin abc activity "a": context canceled` {
		t.Errorf("a short version, no stderr: %q", got)
	}
	if !errors.Is(short, context.Canceled) {
		t.Errorf("%v does not match the caller's context error", short)
	}
}

func TestGuestError(t *testing.T) {
	t.Parallel()
	var err error = &call.Error{Version: "v", Activity: "pay", Err: &call.GuestError{Code: "card_declined", Message: "insufficient funds", Retryable: true}}
	var ge *call.GuestError
	if !errors.As(err, &ge) || ge.Code != "card_declined" || !ge.Retryable {
		t.Fatalf("errors.As found %+v in %v", ge, err)
	}
	if got, want := ge.Error(), "activity failed: card_declined: insufficient funds"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&call.GuestError{Code: "bad_input"}).Error(), "activity failed: bad_input"; got != want {
		t.Errorf("without a message: %q, want %q", got, want)
	}
	// Only the cancelled code is a cancellation.
	if errors.Is(err, call.ErrCancelled) {
		t.Errorf("%v matches ErrCancelled", err)
	}
	if cancelled := (&call.GuestError{Code: "cancelled"}); !errors.Is(cancelled, call.ErrCancelled) {
		t.Errorf("%v does not match ErrCancelled", cancelled)
	}
}

func TestGrantErrorSaysHowToGrant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  call.GrantError
		want string
	}{
		{call.GrantError{Plugin: "hook", What: "secret", Name: "token", Grant: "weft plugin grant hook --secret token=env:VARIABLE"},
			"not_granted: secret token is not granted to plugin hook; to grant it: weft plugin grant hook --secret token=env:VARIABLE"},
		{call.GrantError{Plugin: "hook", What: "host", Name: "http://10.0.0.1:80", Reason: "it is a private address"},
			"not_granted: host http://10.0.0.1:80 is not granted to plugin hook: it is a private address"},
	}
	for _, tt := range tests {
		err := &tt.err
		if err.Error() != tt.want {
			t.Errorf("Error() = %q, want %q", err.Error(), tt.want)
		}
		if !errors.Is(fmt.Errorf("wrapped: %w", err), call.ErrNotGranted) {
			t.Errorf("%v does not match ErrNotGranted", err)
		}
	}
}

func TestCheckOutput(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{`null`, `{"a":[1,2]}`, ` "text" `} {
		if err := call.CheckOutput([]byte(ok)); err != nil {
			t.Errorf("CheckOutput(%s) = %v, want nil", ok, err)
		}
	}
	tests := []struct{ out, quoted string }{
		{``, `""`},
		{`{"a":`, `"{\"a\":"`},
		{strings.Repeat("x", 100), `"` + strings.Repeat("x", 64) + `"… (100 bytes)`},
	}
	for _, tt := range tests {
		err := call.CheckOutput([]byte(tt.out))
		if !errors.Is(err, call.ErrProtocol) || !strings.HasSuffix(err.Error(), "output is not a JSON document: "+tt.quoted) {
			t.Errorf("CheckOutput(%.20q) = %v, want an ABI violation quoting %s", tt.out, err, tt.quoted)
		}
	}
}
