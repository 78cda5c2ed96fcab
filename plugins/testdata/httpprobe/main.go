// Command httpprobe makes the outbound HTTP requests and secret reads its
// input asks for, through the raw host functions, so that the plugins tests
// see exactly what crosses the boundary. The plugins tests load it.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o httpprobe.wasm .
package main

import (
	"encoding/json"
	"unsafe"

	"github.com/weftworks/weft/sdk"
)

//go:wasmimport weft http_request
func httpRequest(method unsafe.Pointer, methodLen uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32) int32

//go:wasmimport weft http_response_headers
func httpResponseHeaders(buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft http_response_body
func httpResponseBody(buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft secret
func secret(name unsafe.Pointer, nameLen uint32, buf unsafe.Pointer, n uint32) int32

type request struct {
	Method  string `json:"method"`
	URL     string `json:"url"`
	Headers string `json:"headers"`
	Body    string `json:"body"`
	// Repeat sends the request this many times (at least once).
	Repeat int `json:"repeat"`
}

type response struct {
	Status  int32  `json:"status"`
	Headers string `json:"headers"`
	Body    string `json:"body"`
	// Missing is true when the readers returned -1.
	Missing bool `json:"missing"`
}

func ptr(s string) unsafe.Pointer {
	if s == "" {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

func sized(call func(buf unsafe.Pointer, n uint32) int32) (string, bool) {
	n := call(nil, 0)
	if n < 0 {
		return "", false
	}
	if n == 0 {
		return "", true
	}
	b := make([]byte, n)
	if m := call(unsafe.Pointer(&b[0]), uint32(n)); m != n {
		panic("the length changed between two reads")
	}
	return string(b), true
}

func init() {
	sdk.Register("do", sdk.Typed(func(ctx *sdk.Context, in request) ([]response, error) {
		var out []response
		for i := 0; i < max(in.Repeat, 1); i++ {
			st := httpRequest(ptr(in.Method), uint32(len(in.Method)), ptr(in.URL), uint32(len(in.URL)),
				ptr(in.Headers), uint32(len(in.Headers)), ptr(in.Body), uint32(len(in.Body)))
			r := response{Status: st}
			var ok1, ok2 bool
			r.Headers, ok1 = sized(httpResponseHeaders)
			r.Body, ok2 = sized(httpResponseBody)
			r.Missing = !ok1 || !ok2
			out = append(out, r)
		}
		return out, nil
	}))
	sdk.Register("secret", sdk.Typed(func(ctx *sdk.Context, name string) (int, error) {
		v, _ := sized(func(buf unsafe.Pointer, n uint32) int32 { return secret(ptr(name), uint32(len(name)), buf, n) })
		// A careless plugin: the host must keep the value out of the log.
		ctx.Log(sdk.LevelInfo, "the secret is "+v)
		return len(v), nil
	}))
	// reveal returns a secret's value in its output, as a string, or
	// written as it is (a number, when it is digits): what the host must
	// keep out of the attempt's record.
	sdk.Register("reveal", sdk.Typed(func(ctx *sdk.Context, in struct {
		Name string `json:"name"`
		Raw  bool   `json:"raw"`
	}) (json.RawMessage, error) {
		v, _ := sized(func(buf unsafe.Pointer, n uint32) int32 { return secret(ptr(in.Name), uint32(len(in.Name)), buf, n) })
		if in.Raw {
			return json.RawMessage(`{"value":` + v + `}`), nil
		}
		return json.Marshal(map[string]string{"value": v})
	}))
}

func main() {}
