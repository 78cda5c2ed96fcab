package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
)

// fuzzFunc matches a fuzz target's declaration.
var fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)

// TestFuzzTargetsListed: `make fuzz` runs every fuzz target of the
// repository: the Makefile's FUZZ_TARGETS names each one, and nothing
// else.
func TestFuzzTargetsListed(t *testing.T) {
	t.Parallel()
	root := testplugins.Root(t)
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "work", "target", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllSubmatch(src, -1) {
			found = append(found, "./"+filepath.ToSlash(rel)+":"+string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)FUZZ_TARGETS := \\\n(.*?)\n[^\t]`).FindSubmatch(mk)
	if block == nil {
		t.Fatal("the Makefile has no FUZZ_TARGETS")
	}
	var listed []string
	for _, line := range strings.Split(string(block[1]), "\n") {
		f := strings.TrimSuffix(strings.TrimSpace(line), "\\")
		f = strings.TrimSpace(f)
		if parts := strings.Split(f, ":"); len(parts) >= 2 {
			listed = append(listed, parts[0]+":"+parts[1])
		}
	}
	slices.Sort(found)
	slices.Sort(listed)
	for _, f := range missing(found, listed) {
		t.Errorf("fuzz target %s is not in the Makefile's FUZZ_TARGETS", f)
	}
	for _, l := range missing(listed, found) {
		t.Errorf("the Makefile's FUZZ_TARGETS names %s, which does not exist", l)
	}
}
