package abi_test

import (
	"encoding/json"
	"fmt"

	"github.com/weftworks/weft/abi"
)

// The manifest a plugin passes to result from weft_manifest (README.md §3):
// its activities and what it asks an operator to grant.
func ExampleManifest() {
	m := abi.Manifest{
		Activities: []abi.Activity{
			{Name: "greet", Description: "says hello"},
			{Name: "notify"},
		},
		Needs: &abi.Needs{Hosts: []string{"hooks.example.com"}, Secrets: []string{"token"}},
	}
	b, err := json.Marshal(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	// Output:
	// {"activities":[{"name":"greet","description":"says hello"},{"name":"notify"}],"needs":{"hosts":["hooks.example.com"],"secrets":["token"]}}
}

// The failure document a plugin passes to result with StatusError. Its
// "details", any JSON value, is not decoded into Failure.Details, whose
// field encoding/json skips: a reader takes it from the document itself.
func ExampleFailure() {
	var f abi.Failure
	if err := json.Unmarshal([]byte(`{"code":"busy","message":"try later","retryable":true}`), &f); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %q retryable=%t\n", f.Code, f.Message, f.Retryable)
	// Output:
	// busy "try later" retryable=true
}

// Plugin and activity names never contain '.', which separates them in a
// workflow definition's "plugin.activity".
func ExampleValidName() {
	for _, name := range []string{"greet", "send-email_v2", "Greet", "text.upper", "2fa", ""} {
		fmt.Printf("%q %t\n", name, abi.ValidName(name))
	}
	// Output:
	// "greet" true
	// "send-email_v2" true
	// "Greet" false
	// "text.upper" false
	// "2fa" false
	// "" false
}

// A WASI function is allowed (the host provides it), inert (the host links
// a stub that fails with EBADF) or refused at upload.
func ExampleAllowedWASI() {
	for _, name := range []string{"fd_write", "path_open", "sock_open"} {
		why, ok := abi.AllowedWASI(name)
		switch {
		case ok:
			fmt.Printf("%s: allowed: %s\n", name, why)
		case abi.InertWASI(name):
			fmt.Printf("%s: inert\n", name)
		default:
			fmt.Printf("%s: refused\n", name)
		}
	}
	// Output:
	// fd_write: allowed: stdout and stderr, captured into the activity's log
	// path_open: inert
	// sock_open: refused
}
