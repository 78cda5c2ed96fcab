package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// Search (docs/operations.md, "Search"): weft instance ls --query lists
// the instances a query matches, weft instance show shows an instance's
// search attributes, and weft search-attributes lists the registry of
// their names and types.

// maxQueryPages bounds the pages weft instance ls --query reads to fill
// its --limit: a page reads at most 10,000 instances and may hold fewer
// than asked, even none, when few of them match. After that many, the
// command prints what it found with the cursor to go on from.
const maxQueryPages = 20

// searchInstances reads the pages of a query until f.Limit instances are
// found, there are no more, or maxQueryPages were read, and answers them
// as one page with the cursor to go on from.
func (cmd *clientCmd) searchInstances(ctx context.Context, f client.InstanceFilter) (*apiv1.Page[apiv1.Instance], error) {
	all := &apiv1.Page[apiv1.Instance]{Items: []apiv1.Instance{}}
	want := f.Limit
	for range maxQueryPages {
		if want > 0 {
			f.Limit = want - len(all.Items)
		}
		page, err := cmd.c.Instances(ctx, f)
		if err != nil {
			return nil, err
		}
		all.Items = append(all.Items, page.Items...)
		all.NextCursor = page.NextCursor
		if page.NextCursor == "" || want > 0 && len(all.Items) >= want {
			break
		}
		f.Cursor = page.NextCursor
	}
	return all, nil
}

// failQuery prints a query the host refused with a caret under the
// offending token and what is wrong, and returns the exit code; another
// error is cmd.fail's.
//
//	weft: instance ls: invalid query
//	  customer = "acme" AND amout > 1
//	                        ^ unknown field; did you mean "amount"?
func (cmd *clientCmd) failQuery(err error, query string) int {
	var e *client.Error
	if !errors.Is(err, client.ErrInvalidQuery) || !errors.As(err, &e) || e.Position == nil {
		return cmd.fail(err)
	}
	msg := e.Detail
	if len(e.Errors) == 1 {
		msg = e.Errors[0].Message
	}
	line, caret := pointAt(query, *e.Position, 80)
	fmt.Fprintf(cmd.stderr, "weft: %s: invalid query\n  %s\n  %s^ %s\n", cmd.name, line, strings.Repeat(" ", caret), printable(msg, false))
	return problemExit(e.Status)
}

// pointAt returns the query as one line a terminal shows (its controls
// escaped, and cut to a window of width runes around pos when longer,
// with … where it was cut), and the column of the byte offset pos in it,
// where the caret goes.
func pointAt(query string, pos, width int) (line string, col int) {
	pos = min(max(pos, 0), len(query))
	for pos > 0 && pos < len(query) && !utf8.RuneStart(query[pos]) {
		pos--
	}
	before, after := []rune(printable(query[:pos], false)), []rune(printable(query[pos:], false))
	col = len(before)
	if len(before)+len(after) <= width {
		return string(before) + string(after), col
	}
	// A window with the caret about a third of the way in.
	start := max(0, col-width/3)
	end := min(len(before)+len(after), start+width)
	start = max(0, min(start, end-width))
	all := append(before, after...)
	line = string(all[start:end])
	col -= start
	if start > 0 {
		line, col = "…"+line, col+1
	}
	if end < len(all) {
		line += "…"
	}
	return line, col
}

// printSearch writes an instance's search attributes for weft instance
// show: one a line, by name, each value as a query would write it.
func printSearch(w io.Writer, search map[string]any) {
	if len(search) == 0 {
		return
	}
	names := make([]string, 0, len(search))
	width := 0
	for name := range search {
		names = append(names, name)
		width = max(width, len(name))
	}
	slices.Sort(names)
	for i, name := range names {
		label := "search:   "
		if i > 0 {
			label = "          "
		}
		fmt.Fprintf(w, "%s %-*s  %s\n", label, width, name, searchValue(search[name]))
	}
}

// searchValue is an attribute's value as a query writes it: a string (a
// time too) quoted, a number as JSON writes it, a bool, keywords as a
// list of strings.
func searchValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		items := make([]string, len(x))
		for i, it := range x {
			items[i] = searchValue(it)
		}
		return "(" + strings.Join(items, ", ") + ")"
	case nil:
		return "null"
	}
	return fmt.Sprint(v)
}

// searchAttributes is weft search-attributes: the registered search
// attributes, by name, with their types and the workflow that declared
// each first.
func (a *app) searchAttributes(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("search-attributes")
	if _, ok := cmd.parse(args, 0, 0, ""); !ok {
		return cmd.usageExit()
	}
	attrs, err := cmd.c.SearchAttributes(ctx)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(apiv1.SearchAttributes{Items: attrs})
		return exitOK
	}
	return printPage(cmd, &apiv1.Page[apiv1.SearchAttribute]{Items: attrs}, "NAME\tTYPE\tWORKFLOW", func(a apiv1.SearchAttribute) string {
		return fmt.Sprintf("%s\t%s\t%s", a.Name, a.Type, a.Workflow)
	})
}
