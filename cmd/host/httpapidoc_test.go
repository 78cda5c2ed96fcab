package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
)

// TestHTTPAPIDocTables keeps docs/http-api.md's endpoint table in step with
// the routes (as host/api/openapi.json, which host/api's tests keep in
// step with them, lists them), and its table of problem types with the
// types host/api answers.
func TestHTTPAPIDocTables(t *testing.T) {
	t.Parallel()
	root := testplugins.Root(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	var openapi struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	b, err := os.ReadFile(filepath.Join(root, "host", "api", "openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &openapi); err != nil {
		t.Fatal(err)
	}
	var routes []string
	for path, ops := range openapi.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch":
				routes = append(routes, strings.ToUpper(method)+" "+path)
			}
		}
	}
	section := string(doc)
	if i := strings.Index(section, "\n## Endpoints\n"); i >= 0 {
		section = section[i:]
	} else {
		t.Fatal("docs/http-api.md has no Endpoints section")
	}
	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:GET|PUT|POST|DELETE|PATCH) /[^`]*)` \\|").FindAllStringSubmatch(section, -1) {
		table = append(table, m[1])
	}
	slices.Sort(routes)
	slices.Sort(table)
	for _, r := range missing(routes, table) {
		t.Errorf("docs/http-api.md's endpoint table lacks %s", r)
	}
	for _, r := range missing(table, routes) {
		t.Errorf("docs/http-api.md's endpoint table has %s, which openapi.json does not", r)
	}

	// The problem types: every slug host/api's code gives problemf.
	sources, err := filepath.Glob(filepath.Join(root, "host", "api", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	slugRE := regexp.MustCompile(`problemf\([^,]+, "([a-z-]+)"`)
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range slugRE.FindAllStringSubmatch(string(src), -1) {
			if !regexp.MustCompile("(?m)^\\| (`[a-z-]+`, )*`" + m[1] + "`").Match(doc) {
				t.Errorf("docs/http-api.md's problem types lack %q (%s)", m[1], filepath.Base(f))
			}
		}
	}
}
