// Command leak is the careless plugin of the secret-masking tests: it
// reads a granted secret, keeps its value in a global from one call to the
// next, and puts it wherever its input says — its log, stdout, a
// heartbeat, a URL's path, a malformed header line, its output, its
// failure's code, message and details, a panic — everything the host must
// mask (docs/outbound-http.md, "Secrets"). The plugins and host/api tests
// load it.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o leak.wasm .
package main

import (
	"fmt"
	"unsafe"

	"github.com/weftworks/weft/sdk"
)

//go:wasmimport weft http_request
func httpRequest(method unsafe.Pointer, methodLen uint32, url unsafe.Pointer, urlLen uint32, headers unsafe.Pointer, headersLen uint32, body unsafe.Pointer, bodyLen uint32) int32

// kept is the value read by an earlier call on this instance.
var kept string

type input struct {
	// Read names the secret to read now; the value is kept. Without it
	// the call uses the value an earlier call kept.
	Read string `json:"read"`
	// URL is where "path" and "header" send their request: "path" GETs
	// URL with the value appended, "header" sends a header line without a
	// colon ("Authorization Bearer VALUE"), which the host refuses.
	URL string `json:"url"`
	// Into lists where the value goes: log, stdout, heartbeat, path,
	// header, panic, output, code, message, details.
	Into []string `json:"into"`
}

type output struct {
	// Kept is whether a value was kept from an earlier call.
	Kept  bool   `json:"kept"`
	Value string `json:"value,omitempty"`
}

func leak(ctx *sdk.Context, in input) (output, error) {
	out := output{Kept: kept != ""}
	if in.Read != "" {
		kept = ctx.Secret(in.Read)
	}
	v := kept
	var fail *sdk.Error
	failure := func() *sdk.Error {
		if fail == nil {
			fail = &sdk.Error{Code: "leak", Message: "leaked"}
		}
		return fail
	}
	for _, into := range in.Into {
		switch into {
		case "log":
			ctx.Logf(sdk.LevelWarn, "the secret is %s", v)
		case "stdout":
			fmt.Println("the secret is", v)
		case "heartbeat":
			ctx.Heartbeat(map[string]string{"secret": v})
		case "path":
			if _, err := ctx.Get(in.URL + v); err != nil {
				return output{}, err
			}
		case "header":
			method, url, header := "GET", in.URL, "Authorization Bearer "+v
			httpRequest(unsafe.Pointer(unsafe.StringData(method)), uint32(len(method)), unsafe.Pointer(unsafe.StringData(url)), uint32(len(url)),
				unsafe.Pointer(unsafe.StringData(header)), uint32(len(header)), nil, 0)
		case "panic":
			panic("the secret is " + v)
		case "output":
			out.Value = v
		case "code":
			failure().Code = v
		case "message":
			failure().Message = "the secret is " + v
		case "details":
			fail = failure().WithDetails(map[string]string{"secret": v})
		default:
			return output{}, sdk.NonRetryable("bad_input", "unknown into "+into)
		}
	}
	if fail != nil {
		return output{}, fail
	}
	return out, nil
}

func init() {
	sdk.Register("leak", sdk.Typed(leak))
}

func main() {}
