package plugins_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// sharedCacheDir is a compilation cache shared by the runtimes of tests that
// do not set their own, so that the 3.5 MB kit is compiled once per test
// binary instead of once per test.
var sharedCacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "weft-plugins-test-cache-*")
	if err != nil {
		panic(err)
	}
	sharedCacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			println("goroutine leak:", err.Error())
			code = 1
		}
	}
	os.Exit(code)
}
