// Package sdk is what a Weft activity plugin imports.
//
// A plugin registers its activities in an init function and has an empty
// main; the SDK provides the exports of the Weft ABI (see abi/README.md):
//
//	package main
//
//	import "github.com/weftworks/weft/sdk"
//
//	type in struct{ Name string `json:"name"` }
//	type out struct{ Greeting string `json:"greeting"` }
//
//	func init() {
//		sdk.Register("greet", sdk.Typed(func(ctx *sdk.Context, in in) (out, error) {
//			return out{Greeting: "hello, " + in.Name}, nil
//		}))
//	}
//
//	func main() {}
//
// Build it with stock Go 1.24 or later:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o greet.wasm .
//
// A handler reaches the host through its *Context: heartbeats, call info,
// logs, and what an operator granted the plugin — configuration values
// (Context.Config), secrets (Context.Secret) and outbound HTTP to granted
// hosts (Context.Do). Needs declares those in the manifest.
//
// The module github.com/weftworks/weft/sdk depends only on
// github.com/weftworks/weft/abi, the ABI's names and documents, a module
// that depends on the standard library only: a plugin that requires the
// SDK does not require the host's module.
//
// The package avoids reflection outside the typed handlers' encoding/json so
// that it should build with TinyGo too; TinyGo builds are not verified.
package sdk

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/weftworks/weft/abi"
)

// Handler is an activity working on raw JSON. The input slice is valid only
// until the handler returns; the returned output must be a JSON document
// (nil is read as null).
type Handler func(ctx *Context, input []byte) (output []byte, err error)

type activity struct {
	name        string
	description string
	handler     Handler
}

// registry holds the plugin's activities. It is package state on purpose:
// registration happens in init functions, before the host can call any
// export, and the exports are package-level functions by the nature of
// WebAssembly. It is written only during init and read afterwards.
var registry = map[string]activity{}

// Register adds an activity named name. Call it from an init function. It
// panics when name is not a valid activity name (1 to 64 of [a-z0-9_-],
// starting with a letter) or is registered twice, which the host would
// otherwise report at upload.
func Register(name string, h Handler) {
	RegisterWithDescription(name, "", h)
}

// RegisterWithDescription is Register with a description that the host shows
// in the plugin's manifest.
func RegisterWithDescription(name, description string, h Handler) {
	if !abi.ValidName(name) {
		panic(fmt.Sprintf("sdk: invalid activity name %q: want 1-64 of [a-z0-9_-] starting with a letter", name))
	}
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("sdk: activity %q registered twice", name))
	}
	if h == nil {
		panic(fmt.Sprintf("sdk: activity %q has a nil handler", name))
	}
	registry[name] = activity{name: name, description: description, handler: h}
}

// Typed adapts a function of typed input and output to a Handler. The input
// is decoded from JSON (a decoding error fails the call as non-retryable
// bad_input) and the output is encoded to JSON.
func Typed[I, O any](fn func(ctx *Context, in I) (O, error)) Handler {
	return func(ctx *Context, input []byte) ([]byte, error) {
		var in I
		if len(input) > 0 {
			if err := json.Unmarshal(input, &in); err != nil {
				return nil, NonRetryable(abi.CodeBadInput, "decoding input: "+err.Error())
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(out)
		if err != nil {
			return nil, NonRetryable("bad_output", "encoding output: "+err.Error())
		}
		return b, nil
	}
}

// Requirements is what a plugin declares with Needs: the hosts its HTTP
// requests reach, the configuration keys and the secrets it reads. It is
// the manifest's document, abi.Needs, under the SDK's name, so that a
// plugin writes sdk.Requirements{…} without importing the abi package.
type Requirements = abi.Needs

// needs is what the plugin declared with Needs. Like the registry, it is
// written only during init.
var needs Requirements

// Needs declares what the plugin asks an operator to grant it: the hosts
// its HTTP requests reach (patterns such as "api.example.com",
// "*.example.com" or "http://10.0.0.7:8080"), the configuration keys it
// reads with Context.Config and the secrets it reads with Context.Secret.
// The host shows them in the manifest, next to what is granted; declaring
// grants nothing. Call it from an init function; calls add up, and a name
// declared twice is listed once. It panics when a config key or secret
// name could never be granted (1 to 256 bytes of printable ASCII without
// spaces or '=') or a host pattern is empty or has spaces, which the host
// would otherwise report at upload.
func Needs(n Requirements) {
	for _, p := range n.Hosts {
		if !validKey(p, true) {
			panic(fmt.Sprintf("sdk: invalid host pattern %q: want 1-256 bytes of printable ASCII without spaces", p))
		}
	}
	for _, k := range n.Config {
		if !validKey(k, false) {
			panic(fmt.Sprintf("sdk: invalid config key %q: want 1-256 bytes of printable ASCII without spaces or '='", k))
		}
	}
	for _, k := range n.Secrets {
		if !validKey(k, false) {
			panic(fmt.Sprintf("sdk: invalid secret name %q: want 1-256 bytes of printable ASCII without spaces or '='", k))
		}
	}
	needs.Hosts = appendNew(needs.Hosts, n.Hosts)
	needs.Config = appendNew(needs.Config, n.Config)
	needs.Secrets = appendNew(needs.Secrets, n.Secrets)
}

// validKey reports whether k is 1 to 256 bytes of printable ASCII without
// spaces, and without '=' unless equalsOK.
func validKey(k string, equalsOK bool) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || c == '=' && !equalsOK {
			return false
		}
	}
	return true
}

// appendNew appends to list each name of add it does not hold yet.
func appendNew(list, add []string) []string {
	for _, a := range add {
		seen := false
		for _, l := range list {
			if l == a {
				seen = true
				break
			}
		}
		if !seen {
			list = append(list, a)
		}
	}
	return list
}

// manifest encodes the registered activities, sorted by name, and the
// declared needs.
func manifest() []byte {
	names := make([]string, 0, len(registry))
	for name := range registry {
		names = append(names, name)
	}
	sort.Strings(names)
	b := append(make([]byte, 0, 32+32*len(names)), `{"activities":[`...)
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, name)
		if d := registry[name].description; d != "" {
			b = append(b, `,"description":`...)
			b = appendJSONString(b, d)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	b = appendNeeds(b, &needs)
	return append(b, '}')
}

// appendNeeds appends `,"needs":{…}` with the lists n holds, or nothing
// when it holds none.
func appendNeeds(b []byte, n *Requirements) []byte {
	if len(n.Hosts)+len(n.Config)+len(n.Secrets) == 0 {
		return b
	}
	b = append(b, `,"needs":{`...)
	first := true
	for _, f := range []struct {
		name string
		keys []string
	}{{"hosts", n.Hosts}, {"config", n.Config}, {"secrets", n.Secrets}} {
		if len(f.keys) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, f.name)
		b = append(b, ":["...)
		for i, k := range f.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// dispatch runs one activity call and returns the status and result for the
// host. A panic in the handler becomes StatusPanic, so that the host discards
// this instance: a Go program that panicked may hold broken state even after
// recover.
func dispatch(h host, name string, input []byte) (status abi.Status, result []byte) {
	a, ok := registry[name]
	if !ok {
		return abi.StatusError, encodeFailure(NonRetryable(abi.CodeUnknownActivity, "no activity named "+quote(name)).(*Error))
	}
	ctx := &Context{host: h, activity: name}
	defer func() {
		if r := recover(); r != nil {
			status = abi.StatusPanic
			result = encodeFailure(&Error{Code: abi.CodePanic, Message: fmt.Sprint(r), Retryable: true})
		}
	}()
	out, err := a.handler(ctx, input)
	if err != nil {
		return abi.StatusError, encodeFailure(asError(err))
	}
	return abi.StatusOK, out
}

func quote(s string) string { return string(appendJSONString(nil, s)) }

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
