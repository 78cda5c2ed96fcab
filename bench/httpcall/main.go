// Command httpcall is the Weft plugin of the outbound HTTP benchmark in
// bench/: its post activity POSTs a small body to a URL n times through the
// SDK's HTTP client and returns how many answered 200; its raw activity
// does the same through the bare http_request import, as a plugin in C
// would, so that the benchmark tells the SDK's cost from the host's.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o httpcall.wasm .
package main

import (
	"unsafe"

	"github.com/weftworks/weft/sdk"
)

type input struct {
	URL  string `json:"url"`
	Body string `json:"body"`
	N    int    `json:"n"`
}

//go:wasmimport weft http_request
func httpRequest(method unsafe.Pointer, methodLen uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32) int32

func init() {
	sdk.Register("post", sdk.Typed(func(ctx *sdk.Context, in input) (int, error) {
		ok := 0
		body := []byte(in.Body)
		for range in.N {
			resp, err := ctx.Post(in.URL, "application/json", body)
			if err != nil {
				return ok, err
			}
			if resp.StatusCode == 200 {
				ok++
			}
		}
		return ok, nil
	}))
	// The same requests with nothing around the import: the response is
	// not read (the host has read it whole already).
	sdk.Register("raw", sdk.Typed(func(ctx *sdk.Context, in input) (int, error) {
		ok := 0
		method, url := []byte("POST"), []byte(in.URL)
		header, body := []byte("Content-Type: application/json\n"), []byte(in.Body)
		for range in.N {
			status := httpRequest(unsafe.Pointer(&method[0]), uint32(len(method)), unsafe.Pointer(&url[0]), uint32(len(url)),
				unsafe.Pointer(&header[0]), uint32(len(header)), unsafe.Pointer(&body[0]), uint32(len(body)))
			if status == 200 {
				ok++
			}
		}
		return ok, nil
	}))
}

func main() {}
