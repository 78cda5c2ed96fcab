package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/doctest"
)

// TestReadmeConfigurationReference keeps the README's configuration table
// in step with Config: the same keys in the same order, each with its
// variable, and each default written as a value (in backticks) equal to
// the real default.
func TestReadmeConfigurationReference(t *testing.T) {
	t.Parallel()
	type row struct{ key, env, def string }
	var rows []row
	for _, line := range strings.Split(doctest.Section(t, "README.md", "## Configuration"), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 4 {
			t.Errorf("README row with %d cells, want 4: %s", len(cells), line)
			continue
		}
		rows = append(rows, row{key: strings.Trim(strings.TrimSpace(cells[0]), "`"), env: strings.Trim(strings.TrimSpace(cells[1]), "`"), def: strings.TrimSpace(cells[2])})
	}
	keys := configKeys()
	var readmeKeys, codeKeys []string
	for _, r := range rows {
		readmeKeys = append(readmeKeys, r.key)
	}
	for _, k := range keys {
		codeKeys = append(codeKeys, k.name)
	}
	if !reflect.DeepEqual(readmeKeys, codeKeys) {
		t.Fatalf("the README's configuration keys differ from Config's:\nREADME: %v\ncode:   %v", readmeKeys, codeKeys)
	}
	def := reflect.ValueOf(defaultConfig())
	for i, r := range rows {
		if want := envName(r.key); r.env != want {
			t.Errorf("%s: the README says variable %s, the code reads %s", r.key, r.env, want)
		}
		if !strings.HasPrefix(r.def, "`") {
			continue // described, not a value: "the host name", "2 × CPUs"
		}
		n := valueNode(def.FieldByIndex(keys[i].index))
		if got := strings.Trim(r.def, "`"); got != n.Value {
			t.Errorf("%s: the README says the default is %s, the code's is %q", r.key, got, n.Value)
		}
	}
}
