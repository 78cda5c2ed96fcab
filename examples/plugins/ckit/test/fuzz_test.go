package ckit_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
)

// FuzzSameAsKit feeds the Go kit and ckit the same input for upper and
// fail and wants the same result, as TestSameAsKit does for chosen inputs.
// Run it with go test -fuzz FuzzSameAsKit ./examples/plugins/ckit/test/.
func FuzzSameAsKit(f *testing.F) {
	for _, seed := range []string{
		`{"text":"hello"}`, `{"TEXT":"a","text":null}`, `{"text":"\ud800\u00e9"}`, `[1]`, `null`, `{"a":[{}]}`,
		`{"code":"c","message":"m","retryable":true,"fail_attempts":1}`, `{"fail_attempts":-0}`, `{"fail_attempts":1e1}`,
	} {
		f.Add("upper", seed)
		f.Add("fail", seed)
	}
	rt := testplugins.Runtime(f, plugins.Config{})
	kit, ckit := testplugins.Load(f, rt, "kit"), testplugins.Load(f, rt, "ckit")
	f.Fuzz(func(t *testing.T, activity, input string) {
		if activity != "upper" && activity != "fail" {
			t.Skip()
		}
		c := call.Call{Activity: activity, Input: []byte(input), Info: abi.Info{Attempt: 2}}
		want, wantErr := rt.Invoke(context.Background(), kit, c)
		got, gotErr := rt.Invoke(context.Background(), ckit, c)
		if wantErr == nil {
			if gotErr != nil || string(got) != string(want) {
				t.Fatalf("input %q\nckit: %.200s, %v\nkit:  %.200s", input, got, gotErr, want)
			}
			return
		}
		var wantGE, gotGE *call.GuestError
		if !errors.As(wantErr, &wantGE) || !errors.As(gotErr, &gotGE) {
			t.Fatalf("input %q\nckit: %.200s, %v\nkit:  %v", input, got, gotErr, wantErr)
		}
		if gotGE.Code != wantGE.Code || gotGE.Retryable != wantGE.Retryable ||
			(wantGE.Code != abi.CodeBadInput && gotGE.Message != wantGE.Message) {
			t.Fatalf("input %q\nckit: %+v\nkit:  %+v", input, gotGE, wantGE)
		}
	})
}
