package schedule

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/internal/doctest"
)

// docsFile is the reference of schedules, from the repository's root.
const docsFile = "docs/schedules.md"

// TestDocsExamples keeps docs/schedules.md's YAML examples true: each
// starts with a marker line,
//   - "# schedule": a document ParseDocument accepts;
//   - "# schedules_file": a list of documents it accepts;
//   - "# refused": a document it refuses, followed by a ```text block
//     listing exactly its problems, one a line (path: message, and the
//     line when the problem has one).
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	blocks := doctest.Blocks(t, docsFile)
	var accepted, refused int
	for i, b := range blocks {
		if b.Lang != "yaml" {
			continue
		}
		first, _, _ := strings.Cut(b.Text, "\n")
		switch first {
		case "# schedule":
			accepted++
			if _, err := ParseDocument([]byte(b.Text)); err != nil {
				t.Errorf("%s:%d: the example is refused: %v", docsFile, b.Line, err)
			}
		case "# schedules_file":
			accepted++
			var items []yaml.Node
			if err := yaml.Unmarshal([]byte(b.Text), &items); err != nil {
				t.Errorf("%s:%d: the schedules file is not a YAML list: %v", docsFile, b.Line, err)
			}
			for i := range items {
				src, err := yaml.Marshal(&items[i])
				if err == nil {
					_, err = ParseDocument(src)
				}
				if err != nil {
					t.Errorf("%s:%d: schedules[%d] is refused: %v", docsFile, b.Line, i, err)
				}
			}
		case "# refused":
			refused++
			_, err := ParseDocument([]byte(b.Text))
			var e *weft.ScheduleError
			if !errors.As(err, &e) {
				t.Errorf("%s:%d: the example marked # refused is accepted", docsFile, b.Line)
				continue
			}
			if i+1 >= len(blocks) || blocks[i+1].Lang != "text" {
				t.Errorf("%s:%d: the refused example is not followed by a ```text block of its problems", docsFile, b.Line)
				continue
			}
			if got, want := problemLines(e), blocks[i+1].Text; got != want {
				t.Errorf("%s:%d: the problems shown are not the example's\ngot:\n%swant (the doc):\n%s", docsFile, blocks[i+1].Line, got, want)
			}
		default:
			t.Errorf("%s:%d: a yaml block must start with # schedule, # schedules_file or # refused; got %q", docsFile, b.Line, first)
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("%s: %d accepted and %d refused examples; has the marking changed?", docsFile, accepted, refused)
	}
}

// problemLines formats an Error's problems as the docs show them.
func problemLines(e *weft.ScheduleError) string {
	var b strings.Builder
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "%s: %s", p.Path, p.Message)
		if p.Line > 0 {
			fmt.Fprintf(&b, " (line %d)", p.Line)
		}
		b.WriteString("\n")
	}
	return b.String()
}
