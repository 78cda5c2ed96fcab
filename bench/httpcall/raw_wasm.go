//go:build wasip1

package main

import (
	"unsafe"

	"github.com/weftworks/weft/sdk"
)

//go:wasmimport weft http_request
func httpRequest(method unsafe.Pointer, methodLen uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32) int32

func init() {
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
