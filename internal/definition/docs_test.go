package definition

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// docsFile is the reference of the workflow format.
const docsFile = "../../docs/workflows.md"

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	lang string
	line int // of the opening fence, from 1
	text string
}

// docBlocks returns the fenced code blocks of a Markdown text, in order.
func docBlocks(t *testing.T, text string) []docBlock {
	t.Helper()
	var blocks []docBlock
	var cur *docBlock
	var body []string
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "```") {
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		if cur == nil {
			cur = &docBlock{lang: strings.TrimPrefix(trimmed, "```"), line: i + 1}
			body = nil
			continue
		}
		cur.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, *cur)
		cur = nil
	}
	if cur != nil {
		t.Fatalf("%s:%d: code block never closed", docsFile, cur.line)
	}
	return blocks
}

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
	src, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	blocks := docBlocks(t, string(src))

	// Parse the complete definitions first, so that the catalog holds them
	// all whatever their order.
	workflows := map[string]*Definition{}
	first := map[string]int{}
	complete, refused := 0, 0
	for _, b := range blocks {
		if b.lang != "yaml" || !strings.HasPrefix(b.text, "# complete\n") {
			continue
		}
		complete++
		def, err := Parse([]byte(b.text))
		if err != nil {
			t.Errorf("%s:%d: complete example does not parse: %v", docsFile, b.line, err)
			continue
		}
		if at, dup := first[def.Name]; dup {
			t.Errorf("%s:%d: complete example named %q, like the one at line %d; name each one differently", docsFile, b.line, def.Name, at)
			continue
		}
		first[def.Name] = b.line
		workflows[def.Name] = def
	}
	cat := docsCatalog(workflows)

	for i, b := range blocks {
		if b.lang != "yaml" {
			continue
		}
		firstLine, _, _ := strings.Cut(b.text, "\n")
		switch {
		case firstLine == "# complete":
			if _, err := Load([]byte(b.text), cat); err != nil {
				// Problems are located in the block; its first line is the
				// line after the fence.
				var ve *weft.DefinitionError
				if errors.As(err, &ve) {
					for _, p := range ve.Problems {
						t.Errorf("%s:%d: complete example (block at line %d) is refused: %s", docsFile, b.line+p.Line, b.line, p)
					}
				} else {
					t.Errorf("%s:%d: complete example is refused: %v", docsFile, b.line, err)
				}
			}
		case strings.HasPrefix(firstLine, "# fragment"):
		case firstLine == "# refused":
			refused++
			_, err := Load([]byte(b.text), cat)
			if err == nil {
				t.Errorf("%s:%d: example marked # refused loads", docsFile, b.line)
				continue
			}
			if i+1 >= len(blocks) || blocks[i+1].lang != "text" {
				t.Errorf("%s:%d: example marked # refused is not followed by a ```text block of its problems", docsFile, b.line)
				continue
			}
			if got, want := problemLines(err), blocks[i+1].text; got != want {
				t.Errorf("%s:%d: the problems shown are not those of the example above them\ngot:\n%swant (the doc):\n%s", docsFile, blocks[i+1].line, got, want)
			}
		default:
			t.Errorf("%s:%d: a yaml block must start with # complete, # fragment or # refused; got %q", docsFile, b.line, firstLine)
		}
	}
	if complete < 5 || refused < 1 {
		t.Fatalf("%s: found %d complete and %d refused examples; has the marking changed?", docsFile, complete, refused)
	}
}
