package classify_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

func TestWrappedSentinels(t *testing.T) {
	t.Parallel()
	wrap := func(err error) error { return &call.Error{Activity: "a", Err: fmt.Errorf("%w: detail", err)} }
	tests := []struct {
		err  error
		want retry.Cause
	}{
		{wrap(call.ErrTimeout), retry.Cause{Kind: retry.KindTimeout, Code: "timeout", Retryable: true}},
		{wrap(call.ErrTrap), retry.Cause{Kind: retry.KindTrap, Code: "trap", Retryable: true}},
		{wrap(call.ErrLimit), retry.Cause{Kind: retry.KindLimit, Code: "limit", Retryable: true}},
		{wrap(call.ErrProtocol), retry.Cause{Kind: retry.KindProtocol, Code: "protocol"}},
		{wrap(call.ErrUnknownActivity), retry.Cause{Kind: retry.KindUnknownActivity, Code: "unknown_activity"}},
		{wrap(call.ErrCancelled), retry.Cause{Kind: retry.KindCancelled, Code: "cancelled"}},
		{&call.Error{Err: &call.GrantError{Plugin: "p", What: "secret", Name: "token"}}, retry.Of(retry.KindNotGranted)},
		{wrap(plugins.ErrNotFound), retry.Cause{Kind: retry.KindHost, Code: "host", Retryable: true}},
		{&call.Error{Err: &call.GuestError{Code: "busy", Retryable: true}}, retry.Cause{Kind: retry.KindActivity, Code: "busy", Retryable: true}},
		{&call.Error{Err: &call.GuestError{Code: "cancelled"}}, retry.Cause{Kind: retry.KindCancelled, Code: "cancelled"}},
		{errors.New("something else"), retry.Cause{Kind: retry.KindHost, Code: "host", Retryable: true}},
	}
	for _, tt := range tests {
		if got := classify.Cause(tt.err); got != tt.want {
			t.Errorf("Failure(%v) = %+v, want %+v", tt.err, got, tt.want)
		}
	}
}

// The kinds come out right for real failures of a real plugin.
func TestRealFailures(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	kit := testplugins.Load(t, rt, "kit")
	// The spin call's timeout counts from when its guest starts running
	// (Call.Timeout), not from before the calls ahead of it, so that a slow
	// machine cannot spend it before the guest runs.
	invoke := func(activity, input string, timeout time.Duration) error {
		_, err := rt.Invoke(context.Background(), kit, call.Call{Activity: activity, Input: []byte(input), Timeout: timeout})
		return err
	}
	tests := []struct {
		name string
		err  error
		want retry.Kind
		code string
	}{
		{"guest failure", invoke("fail", `{"code":"card_declined"}`, 0), retry.KindActivity, "card_declined"},
		{"panic", invoke("trap", `null`, 0), retry.KindActivity, "panic"},
		{"timeout", invoke("spin", `null`, 100*time.Millisecond), retry.KindTimeout, "timeout"},
		{"unknown activity", invoke("nope", `null`, 0), retry.KindUnknownActivity, "unknown_activity"},
	}
	for _, tt := range tests {
		if f := classify.Cause(tt.err); f.Kind != tt.want || f.Code != tt.code {
			t.Errorf("%s: Failure(%v) = %+v, want kind %s code %s", tt.name, tt.err, f, tt.want, tt.code)
		}
	}
}
