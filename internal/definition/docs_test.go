package definition

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/doctest"
)

// docsFile is the reference of the workflow format, from the repository's
// root.
const docsFile = "docs/workflows.md"

// docsCatalog knows the example plugins' activities (examples/plugins;
// examples/workflows' test checks them against the real manifests) and the
// workflows given.
func docsCatalog(workflows map[string]*Definition) fakeCatalog {
	return fakeCatalog{
		activities: map[string][]string{
			"kit":       {"echo", "upper", "fail", "work", "sleep", "spin", "alloc", "trap", "info", "log"},
			"text":      {"slugify", "wordcount", "template"},
			"thumbnail": {"info", "resize"},
			"webhook":   {"deliver"},
		},
		workflows: workflows,
	}
}

// problemLines formats a *weft.DefinitionError's problems one a line, as the
// docs show them.
func problemLines(err error) string {
	var ve *weft.DefinitionError
	if !errors.As(err, &ve) {
		return "not a *weft.DefinitionError: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, p := range ve.Problems {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// TestDocsExamples keeps docs/workflows.md true. Every ```yaml block starts
// with one of three comments:
//
//   - "# complete": a whole definition, which must load (Load) against a
//     catalog of the example plugins and of the doc's other complete
//     definitions (so that a child workflow may name one);
//   - "# fragment…": part of a definition, not checked;
//   - "# refused": a definition that must be refused, followed by a ```text
//     block listing exactly its problems, one a line.
func TestDocsExamples(t *testing.T) {
	t.Parallel()
	blocks := doctest.Blocks(t, docsFile)

	// Parse the complete definitions first, so that the catalog holds them
	// all whatever their order.
	workflows := map[string]*Definition{}
	first := map[string]int{}
	complete, refused := 0, 0
	for _, b := range blocks {
		if b.Lang != "yaml" || !strings.HasPrefix(b.Text, "# complete\n") {
			continue
		}
		complete++
		def, err := Parse([]byte(b.Text))
		if err != nil {
			t.Errorf("%s:%d: complete example does not parse: %v", docsFile, b.Line, err)
			continue
		}
		if at, dup := first[def.Name]; dup {
			t.Errorf("%s:%d: complete example named %q, like the one at line %d; name each one differently", docsFile, b.Line, def.Name, at)
			continue
		}
		first[def.Name] = b.Line
		workflows[def.Name] = def
	}
	cat := docsCatalog(workflows)

	for i, b := range blocks {
		if b.Lang != "yaml" {
			continue
		}
		firstLine, _, _ := strings.Cut(b.Text, "\n")
		switch {
		case firstLine == "# complete":
			if _, err := Load([]byte(b.Text), cat); err != nil {
				// Problems are located in the block; its first line is the
				// line after the fence.
				var ve *weft.DefinitionError
				if errors.As(err, &ve) {
					for _, p := range ve.Problems {
						t.Errorf("%s:%d: complete example (block at line %d) is refused: %s", docsFile, b.Line+p.Line, b.Line, p)
					}
				} else {
					t.Errorf("%s:%d: complete example is refused: %v", docsFile, b.Line, err)
				}
			}
		case strings.HasPrefix(firstLine, "# fragment"):
		case firstLine == "# refused":
			refused++
			_, err := Load([]byte(b.Text), cat)
			if err == nil {
				t.Errorf("%s:%d: example marked # refused loads", docsFile, b.Line)
				continue
			}
			if i+1 >= len(blocks) || blocks[i+1].Lang != "text" {
				t.Errorf("%s:%d: example marked # refused is not followed by a ```text block of its problems", docsFile, b.Line)
				continue
			}
			if got, want := problemLines(err), blocks[i+1].Text; got != want {
				t.Errorf("%s:%d: the problems shown are not those of the example above them\ngot:\n%swant (the doc):\n%s", docsFile, blocks[i+1].Line, got, want)
			}
		default:
			t.Errorf("%s:%d: a yaml block must start with # complete, # fragment or # refused; got %q", docsFile, b.Line, firstLine)
		}
	}
	if complete < 5 || refused < 1 {
		t.Fatalf("%s: found %d complete and %d refused examples; has the marking changed?", docsFile, complete, refused)
	}
}
