//go:build wasm

package sdk

import (
	"unsafe"

	"github.com/weftworks/weft/abi"
)

// The imports and exports of the Weft ABI (abi/README.md). Pointers cross as
// unsafe.Pointer into guest memory, lengths as uint32.

//go:wasmimport weft result
func hostResult(ptr unsafe.Pointer, n uint32)

//go:wasmimport weft log
func hostLog(level int32, ptr unsafe.Pointer, n uint32)

//go:wasmimport weft heartbeat
func hostHeartbeat(ptr unsafe.Pointer, n uint32) uint32

//go:wasmimport weft cancelled
func hostCancelled() uint32

//go:wasmimport weft info
func hostInfo(buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft last_heartbeat
func hostLastHeartbeat(buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft config
func hostConfig(key unsafe.Pointer, keyLen uint32, buf unsafe.Pointer, n uint32) int32

// The optional host functions (abi/README.md §11): the linker imports each
// only into a plugin that calls it, so a plugin without HTTP or secrets
// still loads on a host that predates them.

//go:wasmimport weft secret
func hostSecret(name unsafe.Pointer, nameLen uint32, buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft http_request
func hostHTTPRequest(method unsafe.Pointer, methodLen uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32) int32

//go:wasmimport weft http_response_headers
func hostHTTPResponseHeaders(buf unsafe.Pointer, n uint32) int32

//go:wasmimport weft http_response_body
func hostHTTPResponseBody(buf unsafe.Pointer, n uint32) int32

// request is the buffer weft_alloc hands out; it is reused across calls so
// that a steady stream of calls allocates nothing on the way in.
var request []byte

//go:wasmexport weft_abi_version
func exportABIVersion() uint32 { return abi.Version }

//go:wasmexport weft_alloc
func exportAlloc(size uint32) uint32 {
	if size == 0 {
		size = 1
	}
	if uint32(cap(request)) < size {
		request = make([]byte, size)
	}
	request = request[:size]
	return uint32(uintptr(unsafe.Pointer(&request[0])))
}

//go:wasmexport weft_manifest
func exportManifest() uint32 {
	setResult(manifest())
	return abi.StatusOK
}

//go:wasmexport weft_invoke
func exportInvoke(ptr, activityLen, inputLen uint32) uint32 {
	n := uint64(activityLen) + uint64(inputLen)
	if len(request) == 0 || ptr != uint32(uintptr(unsafe.Pointer(&request[0]))) || n > uint64(len(request)) {
		setResult(encodeFailure(&Error{Code: "abi", Message: "weft_invoke called with a block weft_alloc did not return"}))
		return abi.StatusPanic
	}
	name := string(request[:activityLen])
	status, result := dispatch(wasmHost{}, name, request[activityLen:n])
	setResult(result)
	return status
}

func setResult(b []byte) {
	if len(b) == 0 {
		hostResult(nil, 0)
		return
	}
	hostResult(unsafe.Pointer(&b[0]), uint32(len(b)))
}

// ptrOf returns the address of b's first byte, or nil for an empty slice.
func ptrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// strPtr returns where s's bytes start, for a host function that only
// reads them.
func strPtr(s string) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(unsafe.StringData(s))
}

type wasmHost struct{}

func (wasmHost) heartbeat(details []byte) bool {
	return hostHeartbeat(ptrOf(details), uint32(len(details))) != 0
}

func (wasmHost) cancelled() bool { return hostCancelled() != 0 }

func (wasmHost) info() []byte {
	b, _ := sized(func(buf []byte) int32 { return hostInfo(ptrOf(buf), uint32(len(buf))) })
	return b
}

func (wasmHost) lastHeartbeat() ([]byte, bool) {
	return sized(func(buf []byte) int32 { return hostLastHeartbeat(ptrOf(buf), uint32(len(buf))) })
}

func (wasmHost) config(key string) (string, bool) {
	k := []byte(key)
	b, ok := sized(func(buf []byte) int32 {
		return hostConfig(ptrOf(k), uint32(len(k)), ptrOf(buf), uint32(len(buf)))
	})
	return string(b), ok
}

func (wasmHost) log(level int32, msg string) {
	b := []byte(msg)
	hostLog(level, ptrOf(b), uint32(len(b)))
}

func (wasmHost) secret(name string, buf []byte) int32 {
	k := []byte(name)
	return hostSecret(ptrOf(k), uint32(len(k)), ptrOf(buf), uint32(len(buf)))
}

func (wasmHost) httpRequest(method, url string, headers, body []byte) int32 {
	// The host only reads the strings, during the call: no copies.
	return hostHTTPRequest(strPtr(method), uint32(len(method)), strPtr(url), uint32(len(url)),
		ptrOf(headers), uint32(len(headers)), ptrOf(body), uint32(len(body)))
}

func (wasmHost) httpResponseHeaders(buf []byte) int32 {
	return hostHTTPResponseHeaders(ptrOf(buf), uint32(len(buf)))
}

func (wasmHost) httpResponseBody(buf []byte) int32 {
	return hostHTTPResponseBody(ptrOf(buf), uint32(len(buf)))
}
