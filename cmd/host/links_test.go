package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/weftworks/weft/internal/testplugins"
)

// mdLink matches a Markdown link's target: "](target)" inline, or
// "[label]: target" as a reference definition.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)|^\s*\[[^\]]+\]:\s+(\S+)`)

// TestDocsLinksStayInTheRepository reads every Markdown file of the
// repository and checks that each relative link names a file or directory
// inside it, that a link to a heading (file.md#heading) names a heading the
// file has, and that nothing points outside the repository: the README,
// docs/ and abi/README.md are the reference a user reads, whole.
func TestDocsLinksStayInTheRepository(t *testing.T) {
	t.Parallel()
	root := testplugins.Root(t)
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "work", "target":
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files under %s; is the root right?", len(files), root)
	}
	anchors := map[string]map[string]bool{} // file → its headings' anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		a := headingAnchors(string(b))
		anchors[path] = a
		return a
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, file)
		text := string(b)
		for _, outside := range []string{"../shared", "SPEC §", "SPEC.md"} {
			if i := strings.Index(text, outside); i >= 0 {
				t.Errorf("%s:%d: %q points outside the repository", rel, lineOf(text, i), outside)
			}
		}
		for n, line := range proseLines(text) {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1] + m[2]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if r, err := filepath.Rel(root, dest); err != nil || strings.HasPrefix(r, "..") {
						t.Errorf("%s:%d: link %q leaves the repository", rel, n, target)
						continue
					}
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %q: no such file in the repository", rel, n, target)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchorsOf(dest)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", rel, n, target, filepath.Base(dest), anchor)
				}
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative links found: the pattern is broken")
	}
}

// proseLines returns the lines of a Markdown text outside fenced code
// blocks, by line number (from 1).
func proseLines(text string) map[int]string {
	lines := map[int]string{}
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines[i+1] = line
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives a text's headings:
// lower case, spaces to hyphens, punctuation other than hyphens and
// underscores dropped, and "-1", "-2", … after repeats.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		}
		seen[a]++
		anchors[a] = true
	}
	return anchors
}

// lineOf returns the line number (from 1) of byte offset i in text.
func lineOf(text string, i int) int { return strings.Count(text[:i], "\n") + 1 }

// TestHeadingAnchors pins the anchor rules the link check relies on.
func TestHeadingAnchors(t *testing.T) {
	t.Parallel()
	got := headingAnchors("# Weft\n## Outbound HTTP: grants & limits\n```\n# not a heading\n```\n## Weft\n### `weft_alloc` (§3)\n")
	for _, want := range []string{"weft", "outbound-http-grants--limits", "weft-1", "weft_alloc-3"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block became a heading")
	}
}
