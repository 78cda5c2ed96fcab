package sdk

import (
	"bufio"
	"go/constant"
	"go/importer"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
)

// TestImportsAndExportsAreABIs: the SDK's //go:wasmimport directives name
// host functions of the ABI in its host module, and its //go:wasmexport
// directives name the ABI's exports, all those a plugin must provide
// among them. The directives take literal names, not the abi package's
// constants, so only this test ties them together.
func TestImportsAndExportsAreABIs(t *testing.T) {
	// The ABI's host functions are the values of its Import constants,
	// read from its source so that a new one needs no change here.
	imp, ok := importer.ForCompiler(token.NewFileSet(), "source", nil).(types.ImporterFrom)
	if !ok {
		t.Fatal("the source importer is not a types.ImporterFrom")
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := imp.ImportFrom("github.com/weftworks/weft/abi", dir, 0)
	if err != nil {
		t.Fatalf("type-checking package abi: %v", err)
	}
	imports := map[string]bool{}
	for _, name := range pkg.Scope().Names() {
		if c, ok := pkg.Scope().Lookup(name).(*types.Const); ok && strings.HasPrefix(name, "Import") {
			imports[constant.StringVal(c.Val())] = true
		}
	}
	if !imports[abi.ImportResult] {
		t.Fatalf("no host functions found in package abi: %v", imports)
	}
	exports := map[string]bool{}
	required := []string{abi.ExportABIVersion, abi.ExportAlloc, abi.ExportManifest, abi.ExportInvoke}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for line := 1; s.Scan(); line++ {
			fields := strings.Fields(s.Text())
			switch {
			case len(fields) == 0:
			case fields[0] == "//go:wasmimport":
				if len(fields) != 3 || fields[1] != abi.HostModule || !imports[fields[2]] {
					t.Errorf("%s:%d: %s: not a host function of the ABI (module %q)", name, line, s.Text(), abi.HostModule)
				}
			case fields[0] == "//go:wasmexport":
				if len(fields) != 2 || !slices.Contains(required, fields[1]) {
					t.Errorf("%s:%d: %s: not an export of the ABI", name, line, s.Text())
				} else {
					exports[fields[1]] = true
				}
			}
		}
		f.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range required {
		if !exports[e] {
			t.Errorf("the SDK does not export %s", e)
		}
	}
}
