package abi_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/printer"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/sdk"
)

// The SDK is a module of its own that depends on nothing, so that a plugin
// does not require the host's module; it holds copies of the ABI's names
// and values in sdk/abi.go. The tests below keep them equal to this
// package's.

// abi.Needs can be passed to sdk.Needs: sdk.Requirements is an alias of a
// struct type with abi.Needs's fields and tags.
var _ sdk.Requirements = abi.Needs{}

// checked type-checks the Go files (tests excluded) of the package in dir,
// or the one file when dir is a file.
func checked(t *testing.T, fset *token.FileSet, dir string) (*types.Package, []*ast.File) {
	t.Helper()
	names := []string{dir}
	if !strings.HasSuffix(dir, ".go") {
		all, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		names = slices.DeleteFunc(all, func(n string) bool { return strings.HasSuffix(n, "_test.go") })
	}
	var files []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, nil)
	if err != nil {
		t.Fatalf("type-checking %s: %v", dir, err)
	}
	return pkg, files
}

// TestSDKCopiesEqualABI: every declaration of sdk/abi.go is named "abi"
// and the name of one of this package's, and equals it: a constant in type
// and value, a type in structure (field names, types and tags), a function
// in signature and body. sdk/abi.go is type-checked alone, so it refers to
// nothing else of the SDK.
func TestSDKCopiesEqualABI(t *testing.T) {
	fset := token.NewFileSet()
	orig, origFiles := checked(t, fset, ".")
	copyPkg, copyFiles := checked(t, fset, filepath.Join("..", "sdk", "abi.go"))

	funcs := func(files []*ast.File) map[string]*ast.FuncDecl {
		m := map[string]*ast.FuncDecl{}
		for _, f := range files {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
					m[fd.Name.Name] = fd
				}
			}
		}
		return m
	}
	origFuncs, copyFuncs := funcs(origFiles), funcs(copyFiles)

	scope := copyPkg.Scope()
	if len(scope.Names()) == 0 {
		t.Fatal("sdk/abi.go declares nothing")
	}
	for _, name := range scope.Names() {
		c := scope.Lookup(name)
		origName, ok := strings.CutPrefix(name, "abi")
		if !ok || !token.IsExported(origName) {
			t.Errorf("sdk/abi.go: %s is not named abi<Name> after a name of package abi", name)
			continue
		}
		o := orig.Scope().Lookup(origName)
		if o == nil {
			t.Errorf("sdk/abi.go: %s copies abi.%s, which does not exist", name, origName)
			continue
		}
		switch c := c.(type) {
		case *types.Const:
			oc, ok := o.(*types.Const)
			if !ok {
				t.Errorf("sdk: %s is a constant, abi.%s is not", name, origName)
				continue
			}
			if !types.Identical(c.Type().Underlying(), oc.Type().Underlying()) || constant.Compare(c.Val(), token.NEQ, oc.Val()) {
				t.Errorf("sdk: %s is %s %s, abi.%s is %s %s", name, c.Type().Underlying(), c.Val(), origName, oc.Type().Underlying(), oc.Val())
			}
		case *types.TypeName:
			if _, ok := o.(*types.TypeName); !ok {
				t.Errorf("sdk: %s is a type, abi.%s is not", name, origName)
				continue
			}
			if !types.Identical(c.Type().Underlying(), o.Type().Underlying()) {
				t.Errorf("sdk: %s is\n\t%s\nabi.%s is\n\t%s", name, c.Type().Underlying(), origName, o.Type().Underlying())
			}
		case *types.Func:
			if _, ok := o.(*types.Func); !ok {
				t.Errorf("sdk: %s is a function, abi.%s is not", name, origName)
				continue
			}
			if !types.Identical(c.Type(), o.Type()) {
				t.Errorf("sdk: %s is %s, abi.%s is %s", name, c.Type(), origName, o.Type())
			}
			// The bodies, with the copy's references to other copies
			// renamed to the originals, and white space collapsed.
			cb, ob := copyFuncs[name].Body, origFuncs[origName].Body
			ast.Inspect(cb, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok && scope.Lookup(id.Name) != nil {
					id.Name = strings.TrimPrefix(id.Name, "abi")
				}
				return true
			})
			if cs, osrc := source(t, fset, cb), source(t, fset, ob); cs != osrc {
				t.Errorf("sdk: %s's body differs from abi.%s's:\n\t%s\n\t%s", name, origName, cs, osrc)
			}
		default:
			t.Errorf("sdk/abi.go: %s: only constants, types and functions are checked", name)
		}
	}
}

func source(t *testing.T, fset *token.FileSet, n ast.Node) string {
	t.Helper()
	var b bytes.Buffer
	if err := printer.Fprint(&b, fset, n); err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// TestSDKImportsAndExportsAreABIs: the SDK's //go:wasmimport directives name
// host functions of the ABI in its host module, and its //go:wasmexport
// directives name the ABI's exports, all those a plugin must provide
// among them.
func TestSDKImportsAndExportsAreABIs(t *testing.T) {
	// The ABI's host functions are the values of its Import constants.
	orig, _ := checked(t, token.NewFileSet(), ".")
	imports := map[string]bool{}
	for _, name := range orig.Scope().Names() {
		if c, ok := orig.Scope().Lookup(name).(*types.Const); ok && strings.HasPrefix(name, "Import") {
			imports[constant.StringVal(c.Val())] = true
		}
	}
	if !imports[abi.ImportResult] {
		t.Fatalf("no host functions found in package abi: %v", imports)
	}
	exports := map[string]bool{}
	required := []string{abi.ExportABIVersion, abi.ExportAlloc, abi.ExportManifest, abi.ExportInvoke}

	files, err := filepath.Glob(filepath.Join("..", "sdk", "*.go"))
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
