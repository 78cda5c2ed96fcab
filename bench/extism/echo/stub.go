//go:build !wasip1

// Command echo is an Extism plugin and only means something as WebAssembly;
// see main.go for how to build it. This stub keeps `go vet ./...` and
// `go build ./...` of the bench module working on the host.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "echo is an Extism plugin: build it with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared")
	os.Exit(2)
}
