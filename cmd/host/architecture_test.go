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

// TestEngineLinksNoWazero: the engine, and internal/retry/classify, which turns
// the errors of its calls into retry causes, see an activity call through
// plugins/call alone; the node hands them the runtime behind the engine's
// Plugins interface. So neither links wazero (docs/architecture.md, "The
// plugin boundary"). A failure names the import that brings it in, by the
// shortest chain of imports from the package to a wazero package.
func TestEngineLinksNoWazero(t *testing.T) {
	t.Parallel()
	const module = "github.com/weftworks/weft/"
	const wazero = "github.com/tetratelabs/wazero"
	roots := []string{module + "internal/engine", module + "internal/retry/classify", module + "plugins/call"}
	imports := goListImports(t, append([]string{"-deps"}, roots...)...)
	short := func(pkg string) string { return strings.TrimPrefix(pkg, module) }
	for _, r := range roots {
		// Breadth first, so that the chain found is a shortest one.
		from := map[string]string{r: ""}
		for queue := []string{r}; len(queue) > 0; queue = queue[1:] {
			p := queue[0]
			if p == wazero || strings.HasPrefix(p, wazero+"/") {
				chain := []string{p}
				for q := from[p]; q != ""; q = from[q] {
					chain = append(chain, short(q))
				}
				slices.Reverse(chain)
				t.Errorf("%s links wazero through its import of %s: %s", short(r), chain[1], strings.Join(chain, " → "))
				break
			}
			for _, imp := range imports[p] {
				if _, seen := from[imp]; !seen {
					from[imp] = p
					queue = append(queue, imp)
				}
			}
		}
	}
}

// TestImportRules: the faces import what they may, named by the test when
// they do not. The commands reach the host through its faces (nothing
// under internal/: the compiler cannot say so, since cmd/host's tests, the
// chaos harness among them, read the stores directly); the API reaches the
// core through the node alone, naming things with the vocabulary (weft),
// the wire types and the faces whose documents and errors it maps (abi,
// plugins, plugins/grant, plugins/tape, lock); the client links only the wire types; the
// wire types import nothing of the module, the vocabulary only abi.
func TestImportRules(t *testing.T) {
	t.Parallel()
	const module = "github.com/weftworks/weft/"
	faces := []string{"abi", "host/api", "host/api/apiv1", "host/client", "host/config", "host/node", "host/weft",
		"plugins", "plugins/blobfile", "plugins/call", "plugins/grant", "plugins/tape"}
	rules := map[string][]string{
		"cmd/host":       faces,
		"host/client":    {"host/api/apiv1"},
		"host/api/apiv1": {},
		"host/weft":      {"abi"},
		"host/api":       {"abi", "host/api/apiv1", "host/console", "host/node", "host/weft", "lock", "plugins", "plugins/grant", "plugins/tape"},
	}
	var pkgs []string
	for p := range rules {
		pkgs = append(pkgs, module+p)
	}
	slices.Sort(pkgs)
	imports := goListImports(t, pkgs...)
	for _, pkg := range pkgs {
		name := strings.TrimPrefix(pkg, module)
		allowed := rules[name]
		for _, imp := range imports[pkg] {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue // the standard library and other modules
			}
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, which it may not (it may import %v)", name, dep, allowed)
			}
		}
	}
	if len(imports) != len(rules) {
		t.Fatalf("go list answered for %d packages, want %d", len(imports), len(rules))
	}
}

// goListImports runs go list at the module's root with args (flags, then
// packages) and returns each listed package's imports.
func goListImports(t *testing.T, args ...string) map[string][]string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-json=ImportPath,Imports"}, args...)...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	imports := map[string][]string{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		imports[p.ImportPath] = p.Imports
	}
	return imports
}
