// Command httpcall is the Weft plugin of the outbound HTTP benchmark in
// bench/: its post activity POSTs a small body to a URL n times through the
// SDK's HTTP client and returns how many answered 200; its raw activity
// does the same through the bare http_request import, as a plugin in C
// would, so that the benchmark tells the SDK's cost from the host's.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o httpcall.wasm .
package main

import (
	"github.com/weftworks/weft/sdk"
)

type input struct {
	URL  string `json:"url"`
	Body string `json:"body"`
	N    int    `json:"n"`
}

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
}

func main() {}
