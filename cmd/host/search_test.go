package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// invoiceYAML declares a search attribute of each type but time, from
// the input, and tags from a variable its step sets.
const invoiceYAML = `
name: invoice
search:
  customer: { type: string,   value: "${ input.customer }" }
  amount:   { type: number,   value: "${ input.amount }" }
  vip:      { type: bool,     value: "${ input.vip }" }
  tags:     { type: keywords, value: "${ vars.tags }" }
steps:
  - id: tag
    set: { tags: "${ input.tags }" }
`

// TestCLISearch: weft instance ls --query lists the instances a query
// matches, with the other flags, in the usual table; -o json shows their
// search attributes; a query with a mistake prints the query with a caret
// under the offending token and what is wrong, and exits 1; --query with
// --id is a usage error; weft instance show shows the attributes; weft
// search-attributes lists the registry.
func TestCLISearch(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "invoice.yaml", invoiceYAML))
	for _, run := range []struct{ id, input string }{
		{"inv-1", `{"customer": "acme", "amount": 120, "vip": true, "tags": ["eu"]}`},
		{"inv-2", `{"customer": "acme", "amount": 4800, "tags": ["eu", "late"]}`},
		{"inv-3", `{"customer": "globex", "amount": 9000, "vip": false}`},
	} {
		ts.ok(t, "run", "invoice", "--id", run.id, "--input", run.input, "--wait")
	}

	t.Run("ls", func(t *testing.T) {
		out := ts.ok(t, "instance", "ls", "--query", `customer = "acme"`)
		if !regexp.MustCompile(`^ID +WORKFLOW +VERSION +STATUS +PRIORITY +FAIRNESS KEY +CREATED +UPDATED +WAITING ON\ninv-2 +invoice +1 +completed .*\ninv-1 +invoice .*\n$`).MatchString(out) {
			t.Errorf("instance ls --query:\n%s", out)
		}
		for _, tt := range []struct {
			args []string
			want string
		}{
			{[]string{"--query", `amount > 100`}, "inv-3 inv-2 inv-1"},
			{[]string{"--query", `amount > 100`, "--oldest"}, "inv-1 inv-2 inv-3"},
			{[]string{"--query", `tags = "eu" AND vip != true`}, "inv-2"},
			{[]string{"--query", `tags = "eu"`, "--status", "failed"}, ""},
			{[]string{"--query", `customer STARTS_WITH "glo"`, "--workflow", "invoice", "--after", "1h"}, "inv-3"},
		} {
			var page apiv1.Page[apiv1.Instance]
			ts.okJSON(t, &page, append([]string{"instance", "ls"}, tt.args...)...)
			var ids []string
			for _, in := range page.Items {
				ids = append(ids, in.ID)
			}
			if got := strings.Join(ids, " "); got != tt.want {
				t.Errorf("instance ls %q: %s, want %s", tt.args, got, tt.want)
			}
		}
		var page apiv1.Page[apiv1.Instance]
		ts.okJSON(t, &page, "instance", "ls", "--query", `id = "inv-2"`)
		if len(page.Items) != 1 || page.Items[0].Search["customer"] != "acme" || page.Items[0].Search["amount"] != 4800.0 {
			t.Errorf("instance ls -o json: %+v, want inv-2 with its search attributes", page.Items)
		}
		r := ts.weft(t, nil, "instance", "ls", "--query", `amount > 1`, "--limit", "2")
		if r.code != exitOK || strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stderr, "(more: add --cursor ") {
			t.Errorf("instance ls --query --limit 2: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("mistakes", func(t *testing.T) {
		r := ts.weft(t, nil, "instance", "ls", "--query", `customer = "acme" AND amout > 1`)
		want := "weft: instance ls: invalid query\n" +
			"  customer = \"acme\" AND amout > 1\n" +
			"                        ^ unknown field; did you mean \"amount\"?\n"
		if r.code != exitFailed || r.stderr != want || r.stdout != "" {
			t.Errorf("a query with a mistake: exit %d\nstdout: %s\nstderr:\n%s\nwant:\n%s", r.code, r.stdout, r.stderr, want)
		}
		// What a terminal acts on is escaped, and the caret counts it so.
		r = ts.weft(t, nil, "instance", "ls", "--query", "tags = \"a\u001b[2J\"")
		if r.code != exitFailed || !strings.HasSuffix(r.stderr, "  tags = \"a\\x1b[2J\"\n           ^ a control character (U+001B) in a string: write it escaped\n") {
			t.Errorf("a query with a control character: exit %d\nstderr:\n%q", r.code, r.stderr)
		}
		r = ts.weft(t, nil, "instance", "ls", "--query", "customer = \"a\" AND\tamout > 1")
		if r.code != exitFailed || !strings.HasSuffix(r.stderr, "  customer = \"a\" AND\\tamout > 1\n                      ^ unknown field; did you mean \"amount\"?\n") {
			t.Errorf("a query with a tab: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		r = ts.weft(t, nil, "instance", "ls", "--query", `amount > 1`, "--id", "inv-1")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--query takes no --id") {
			t.Errorf("--query with --id: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("show", func(t *testing.T) {
		out := ts.ok(t, "instance", "show", "inv-2")
		want := "search:    amount    4800\n" +
			"           customer  \"acme\"\n" +
			"           tags      (\"eu\", \"late\")\n" +
			"input:     "
		if !strings.Contains(out, want) {
			t.Errorf("instance show inv-2 does not show its search attributes as\n%s\n%s", want, out)
		}
		if out := ts.ok(t, "instance", "show", "inv-3"); !strings.Contains(out, "search:    amount    9000\n           customer  \"globex\"\n           vip       false\ninput:") {
			t.Errorf("instance show inv-3:\n%s", out)
		}
	})

	t.Run("search-attributes", func(t *testing.T) {
		out := ts.ok(t, "search-attributes")
		want := "NAME      TYPE      WORKFLOW\n" +
			"amount    number    invoice\n" +
			"customer  string    invoice\n" +
			"tags      keywords  invoice\n" +
			"vip       bool      invoice\n"
		if out != want {
			t.Errorf("search-attributes:\n%s\nwant:\n%s", out, want)
		}
		var doc apiv1.SearchAttributes
		ts.okJSON(t, &doc, "search-attributes")
		if len(doc.Items) != 4 || doc.Items[0] != (apiv1.SearchAttribute{Name: "amount", Type: apiv1.SearchNumber, Workflow: "invoice"}) {
			t.Errorf("search-attributes -o json: %+v", doc)
		}
	})
}

// TestPointAt: the caret goes under the offending token's first rune,
// counted in what the terminal shows (controls escaped, runes not bytes),
// and a long query is cut to a window around it.
func TestPointAt(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a = 1 AND ", 20) + "zz = 2"
	for _, tt := range []struct {
		query string
		pos   int
		line  string
		col   int
	}{
		{`amout > 1`, 0, `amout > 1`, 0},
		{`customer = "acme" AND amout > 1`, 22, `customer = "acme" AND amout > 1`, 22},
		{`customer = "acme" AND`, 21, `customer = "acme" AND`, 21},
		{`name = "café" AND x`, 18, `name = "café" AND x`, 17},
		{"a = \"\t\" AND x", 11, `a = "\t" AND x`, 12},
		{`a`, 5, `a`, 1},
		{long, 200, "…" + long[126:], 200 - 126 + 1}, // the window ends with the query
		{long, 100, "…" + long[100-80/3:100-80/3+80] + "…", 80/3 + 1},
		{long, 0, long[:80] + "…", 0},
	} {
		line, col := pointAt(tt.query, tt.pos, 80)
		if line != tt.line || col != tt.col {
			t.Errorf("pointAt(%q, %d) = %q, %d; want %q, %d", tt.query, tt.pos, line, col, tt.line, tt.col)
		}
	}
}

// TestSearchValue: each value as a query writes it.
func TestSearchValue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    any
		want string
	}{
		{"acme", `"acme"`},
		{"a\"b\x1b", `"a\"b\x1b"`},
		{4800.0, "4800"},
		{0.5, "0.5"},
		{1e21, "1e+21"},
		{true, "true"},
		{"2026-12-01T00:00:00Z", `"2026-12-01T00:00:00Z"`},
		{[]any{"eu", "late"}, `("eu", "late")`},
	} {
		if got := searchValue(tt.v); got != tt.want {
			t.Errorf("searchValue(%#v) = %s, want %s", tt.v, got, tt.want)
		}
	}
}
