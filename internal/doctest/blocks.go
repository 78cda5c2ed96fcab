package doctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Block is one fenced code block of a Markdown document.
type Block struct {
	// Lang is what follows the opening fence (yaml, json, sh); may be
	// empty.
	Lang string
	// Line is the line of the opening fence, from 1.
	Line int
	// Text is the block's lines, each ending in a newline.
	Text string
}

// Blocks returns the fenced code blocks of file (a path from the
// repository's root), in order. The test fails when the file is missing
// or a block is never closed.
func Blocks(tb testing.TB, file string) []Block {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(root(tb), file))
	if err != nil {
		tb.Fatal(err)
	}
	var blocks []Block
	var cur *Block
	var body []string
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if !strings.HasPrefix(trimmed, "```") {
			if cur != nil {
				body = append(body, line)
			}
			continue
		}
		if cur == nil {
			cur = &Block{Lang: strings.TrimPrefix(trimmed, "```"), Line: i + 1}
			body = nil
			continue
		}
		cur.Text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, *cur)
		cur = nil
	}
	if cur != nil {
		tb.Fatalf("%s:%d: code block never closed", file, cur.Line)
	}
	return blocks
}
