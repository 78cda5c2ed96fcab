//go:build ignore

// Command exported counts the exported names of the weft module outside
// internal/ directories (issue 33 asks to halve them): top-level types,
// functions, variables and constants, and the exported methods of
// exported types, in every non-test file; with -fields, the exported
// fields of exported structs and the methods of exported interfaces too.
// With -v it lists them by package.
//
//	go run scripts/exported.go [-v] [-fields]
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list the names by package")
	fields := flag.Bool("fields", false, "count the exported fields of exported structs and the methods of exported interfaces too")
	flag.Parse()
	byPkg := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Other modules (sdk, bench, examples, but abi: below), internal packages,
			// test data and hidden directories are not the module's face.
			switch name := d.Name(); {
			case path == ".":
				return nil
			case name == "internal" || name == "testdata" || strings.HasPrefix(name, ".") || name == "bin":
				return filepath.SkipDir
			}
			// abi is a module of its own (so that the SDK imports it alone)
			// but still the host's face, and was counted before it split.
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "abi" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		pkg := filepath.Dir(path)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv != nil {
					recv := receiver(d.Recv.List[0].Type)
					if !ast.IsExported(recv) {
						continue
					}
					byPkg[pkg] = append(byPkg[pkg], recv+"."+d.Name.Name)
					continue
				}
				byPkg[pkg] = append(byPkg[pkg], d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						byPkg[pkg] = append(byPkg[pkg], s.Name.Name)
						if *fields {
							byPkg[pkg] = append(byPkg[pkg], members(s)...)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								byPkg[pkg] = append(byPkg[pkg], n.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "exported:", err)
		os.Exit(1)
	}
	pkgs := make([]string, 0, len(byPkg))
	total := 0
	for p, names := range byPkg {
		pkgs = append(pkgs, p)
		total += len(names)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("%5d %s\n", len(byPkg[p]), p)
		if *verbose {
			sort.Strings(byPkg[p])
			for _, n := range byPkg[p] {
				fmt.Printf("        %s\n", n)
			}
		}
	}
	fmt.Printf("%5d exported names outside internal/\n", total)
}

// receiver is the name of a method's receiver type.
func receiver(t ast.Expr) string {
	switch x := t.(type) {
	case *ast.StarExpr:
		return receiver(x.X)
	case *ast.IndexExpr:
		return receiver(x.X)
	case *ast.IndexListExpr:
		return receiver(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// members is the exported fields of a struct type and the exported
// methods of an interface type, as Type.Name.
func members(s *ast.TypeSpec) []string {
	var list *ast.FieldList
	switch t := s.Type.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, s.Name.Name+"."+n.Name)
			}
		}
	}
	return out
}
