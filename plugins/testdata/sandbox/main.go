// Command sandbox probes, from inside a guest, what the host lets a plugin
// see (files are refused at upload: see escape), and makes noise on every channel a plugin can log through. The
// plugins tests load it.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sandbox.wasm .
package main

import (
	"crypto/rand"
	"fmt"

	"os"
	"strings"
	"time"

	"github.com/weftworks/weft/sdk"
)

type probe struct {
	Stdin   string   `json:"stdin"`
	Env     []string `json:"env"`
	Home    string   `json:"home"`
	Args    []string `json:"args"`
	NowUnix int64    `json:"now_unix"`
	SleptMS int64    `json:"slept_ms"`
	Random  bool     `json:"random"`
	Config  string   `json:"config"`
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func init() {
	sdk.Register("probe", sdk.Typed(func(ctx *sdk.Context, _ struct{}) (probe, error) {
		var p probe
		n, err := os.Stdin.Read(make([]byte, 16))
		p.Stdin = fmt.Sprintf("%d %v", n, err)
		p.Env = os.Environ()
		p.Home = os.Getenv("HOME")
		p.Args = os.Args
		p.NowUnix = time.Now().Unix()
		start := time.Now()
		time.Sleep(20 * time.Millisecond)
		p.SleptMS = time.Since(start).Milliseconds()
		b := make([]byte, 16)
		_, err = rand.Read(b)
		p.Random = err == nil && strings.Trim(string(b), "\x00") != ""
		p.Config, _ = ctx.Config("greeting")
		return p, nil
	}))
	sdk.Register("noise", sdk.Typed(func(ctx *sdk.Context, in struct {
		Lines int `json:"lines"`
		Size  int `json:"size"`
	}) (struct{}, error) {
		line := strings.Repeat("x", in.Size)
		for i := 0; i < in.Lines; i++ {
			ctx.Logf(sdk.LevelInfo, "log %d %s", i, line)
			fmt.Printf("stdout %d %s\n", i, line)
			fmt.Fprintf(os.Stderr, "stderr %d %s\n", i, line)
		}
		fmt.Print("unterminated")
		return struct{}{}, nil
	}))
	sdk.Register("exit", func(*sdk.Context, []byte) ([]byte, error) {
		fmt.Fprintln(os.Stderr, "exiting with 3")
		os.Exit(3)
		return nil, nil
	})
}

func main() {}
