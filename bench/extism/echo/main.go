//go:build wasip1

// Command echo is the Extism plugin of the comparison in bench/: its echo
// export returns its input unchanged, like the kit plugin's echo activity.
// It is built with stock Go:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o echo.wasm .
package main

import "github.com/extism/go-pdk"

//go:wasmexport echo
func echo() int32 {
	pdk.Output(pdk.Input())
	return 0
}

func main() {}
