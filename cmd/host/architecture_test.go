package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateArchitecture = flag.Bool("update-architecture", false, "rewrite the package table of docs/architecture.md from go list")

// The package table of docs/architecture.md lies between these lines.
const (
	packagesBegin = "<!-- BEGIN packages: generated from go list by TestArchitectureDoc; `go test ./cmd/host -run TestArchitectureDoc -update-architecture` rewrites it -->"
	packagesEnd   = "<!-- END packages -->"
)

// TestArchitectureDoc: docs/architecture.md's table of the packages, their
// arrows (the module's packages each imports) and why each exists (its
// package doc's first sentence) is what go list says of the code, so that
// the document cannot drift from it.
func TestArchitectureDoc(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	table, err := packageTable(out)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "docs", "architecture.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(doc, []byte(packagesBegin)), bytes.Index(doc, []byte(packagesEnd))
	if begin < 0 || end < begin {
		t.Fatalf("%s has no %q … %q section", path, packagesBegin, packagesEnd)
	}
	current := string(doc[begin+len(packagesBegin) : end])
	if current == table {
		return
	}
	if *updateArchitecture {
		updated := slices.Concat(doc[:begin+len(packagesBegin)], []byte(table), doc[end:])
		if err := os.WriteFile(path, updated, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/architecture.md's package table is not what go list says; run\n\tgo test ./cmd/host -run TestArchitectureDoc -update-architecture\nwant:%s", table)
}

// packageTable renders the module's packages (not the example plugins) from
// go list -json output, in layers: a package comes after every package of
// the module it imports.
func packageTable(goList []byte) (string, error) {
	const module = "github.com/weftworks/weft/"
	type pkg struct {
		ImportPath string
		Doc        string
		Imports    []string
	}
	pkgs := map[string]*pkg{}
	dec := json.NewDecoder(bytes.NewReader(goList))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("decoding go list: %w", err)
		}
		name := strings.TrimPrefix(p.ImportPath, module)
		if strings.HasPrefix(name, "examples/") || name == p.ImportPath {
			continue
		}
		var imports []string
		for _, imp := range p.Imports {
			if rest, ok := strings.CutPrefix(imp, module); ok && !strings.HasPrefix(rest, "sdk") {
				imports = append(imports, rest)
			}
		}
		p.ImportPath, p.Imports = name, imports
		pkgs[name] = &p
	}
	layer := map[string]int{}
	var depth func(string) int
	depth = func(name string) int {
		if d, ok := layer[name]; ok {
			return d
		}
		d := 0
		if p := pkgs[name]; p != nil {
			for _, imp := range p.Imports {
				d = max(d, depth(imp)+1)
			}
		}
		layer[name] = d
		return d
	}
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		depth(name)
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if layer[a] != layer[b] {
			return layer[a] - layer[b]
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("\n\n| layer | package | imports of this module | why it exists (its package doc) |\n|---|---|---|---|\n")
	for _, name := range names {
		p := pkgs[name]
		imports := make([]string, len(p.Imports))
		for i, imp := range p.Imports {
			imports[i] = "`" + imp + "`"
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", layer[name], name, strings.Join(imports, ", "), strings.ReplaceAll(p.Doc, "|", `\|`))
	}
	b.WriteString("\n")
	return b.String(), nil
}
