package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportsOnlyTheContract: the client links host/api/apiv1, the API's
// wire contract, and the standard library, nothing else of the module nor
// of any other module, so that a program that talks to a host links
// nothing of the host. A failure names each package that should not be
// there, by the shortest chain of imports from the client to it.
func TestImportsOnlyTheContract(t *testing.T) {
	t.Parallel()
	const (
		client = "github.com/weftworks/weft/host/client"
		apiv1  = "github.com/weftworks/weft/host/api/apiv1"
	)
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	type pkg struct {
		ImportPath string
		Standard   bool
		Imports    []string
	}
	pkgs := map[string]pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	if _, ok := pkgs[client]; !ok {
		t.Fatalf("go list -deps did not list %s", client)
	}
	// Breadth first, so that the chain found is a shortest one.
	from := map[string]string{client: ""}
	for queue := []string{client}; len(queue) > 0; queue = queue[1:] {
		p := pkgs[queue[0]]
		if p.ImportPath != client && p.ImportPath != apiv1 && !p.Standard {
			chain := []string{p.ImportPath}
			for q := from[p.ImportPath]; q != ""; q = from[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			t.Errorf("the client links %s, which is neither apiv1 nor the standard library: %s", p.ImportPath, strings.Join(chain, " → "))
			continue
		}
		for _, imp := range p.Imports {
			if imp == "C" {
				continue // cgo's pseudo-package, of the standard library's net and os/user
			}
			if _, seen := from[imp]; !seen {
				from[imp] = p.ImportPath
				queue = append(queue, imp)
			}
		}
	}
}
