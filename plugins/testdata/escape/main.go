// Command escape tries to use the filesystem. The host must refuse it at
// upload, naming each file-system import it needs.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o escape.wasm .
package main

import (
	"os"

	"github.com/weftworks/weft/sdk"
)

func init() {
	sdk.Register("read", func(*sdk.Context, []byte) ([]byte, error) {
		if _, err := os.ReadDir("/"); err != nil {
			return nil, err
		}
		return os.ReadFile("/etc/passwd")
	})
}

func main() {}
