// Package doctest reads the repository's Markdown documents for the tests
// that keep them true: a document's section, from its heading to the next
// heading of the same level.
package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Section returns the text of file (a path from the repository's root,
// such as "README.md") from the line heading ("## Configuration") to the
// next heading of the same level, without the heading. The test fails when
// the file or the heading is missing.
func Section(tb testing.TB, file, heading string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root(tb), file))
	if err != nil {
		tb.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		tb.Fatalf("%s has no %q section", file, heading)
	}
	s = s[i+len(heading)+2:]
	level := heading[:strings.IndexByte(heading+" ", ' ')+1] // "## "
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}

// root is the repository's root: the nearest directory above the test's
// that holds the module's go.mod.
func root(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module github.com/weftworks/weft\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("doctest: no github.com/weftworks/weft go.mod above the test's directory")
		}
		dir = parent
	}
}
