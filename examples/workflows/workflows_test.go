// Package workflows_test keeps the example workflows from rotting: each
// must load (definition.Load) against a catalog made of the real example
// plugins' manifests and of the other examples, and must come with a
// sample input. cmd/host's end-to-end test runs them on a real host.
package workflows_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// catalog is the example plugins' activities and the example workflows.
type catalog struct {
	activities map[string]map[string]bool
	workflows  map[string]*definition.Definition
}

func (c *catalog) HasPlugin(p string) bool      { return c.activities[p] != nil }
func (c *catalog) HasActivity(p, a string) bool { return c.activities[p][a] }
func (c *catalog) Workflow(name string) (*definition.Definition, bool) {
	d, ok := c.workflows[name]
	return d, ok
}

func examples(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d example workflows, want at least 4", len(files))
	}
	return files
}

func TestExamplesLoad(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1})
	cat := &catalog{activities: map[string]map[string]bool{}, workflows: map[string]*definition.Definition{}}
	for _, name := range []string{"kit", "text", "thumbnail", "webhook"} {
		m, err := rt.Load(context.Background(), testplugins.Bytes(t, name))
		if err != nil {
			t.Fatalf("loading plugin %s: %v", name, err)
		}
		cat.activities[name] = map[string]bool{}
		for _, a := range m.Activities {
			cat.activities[name][a.Name] = true
		}
	}
	files := examples(t)
	// Parse everything first, so that child workflows are in the catalog
	// whatever the file order.
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		def, err := definition.Parse(src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if want := strings.TrimSuffix(f, ".yaml"); def.Name != want {
			t.Errorf("%s: the workflow is named %q; name the file after it (%s.yaml)", f, def.Name, def.Name)
		}
		cat.workflows[def.Name] = def
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := definition.Load(src, cat); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			in, err := os.ReadFile(filepath.Join("inputs", strings.TrimSuffix(f, ".yaml")+".json"))
			if err != nil {
				t.Fatalf("every example needs a sample input: %v", err)
			}
			if !json.Valid(in) {
				t.Errorf("inputs for %s: not valid JSON", f)
			}
		})
	}
}

// TestExamplesDocumented checks that the README lists every example.
func TestExamplesDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range examples(t) {
		if !strings.Contains(string(readme), "("+f+")") {
			t.Errorf("README.md does not link %s", f)
		}
	}
}
