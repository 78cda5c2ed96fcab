//go:build wasip1

// Command httpcall is the Extism plugin of the outbound HTTP benchmark in
// bench/: its post export POSTs the input to the URL in the plugin's config
// n times (config "n") with Extism's http_request, as the Weft plugin
// bench/httpcall does through Weft's.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o httpcall.wasm .
package main

import (
	"strconv"

	"github.com/extism/go-pdk"
)

//go:wasmexport post
func post() int32 {
	url, _ := pdk.GetConfig("url")
	ns, _ := pdk.GetConfig("n")
	n, _ := strconv.Atoi(ns)
	body := pdk.Input()
	ok := 0
	for range n {
		req := pdk.NewHTTPRequest(pdk.MethodPost, url)
		req.SetHeader("Content-Type", "application/json")
		req.SetBody(body)
		if req.Send().Status() == 200 {
			ok++
		}
	}
	pdk.OutputString(strconv.Itoa(ok))
	return 0
}

func main() {}
