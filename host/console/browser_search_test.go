package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// ordersFlow declares search attributes from the input (customer,
// amount) and from a variable its first step sets (tags); its instances
// then wait for order.go with their n as the key.
const ordersFlow = `
name: orders
search:
  customer: { type: string,   value: "${ input.customer }" }
  amount:   { type: number,   value: "${ input.amount }" }
  tags:     { type: keywords, value: "${ vars.tags }" }
steps:
  - id: tag
    set: { tags: "${ input.tags }" }
  - id: hold
    wait: { event: order.go, key: "${ input.n }", timeout: 1h }
`

// query types q into the instance list's query box, replacing what it
// holds, and presses Enter.
func query(tb *tab, q string) {
	tb.t.Helper()
	// Emptied in one evaluation: the page may redraw between a node's
	// lookup and its use.
	tb.do(chromedp.Evaluate[chromedp.Void](`document.querySelector('[data-test=filter-query]').value = ''`))
	tb.do(chromedp.SendKeys(chromedp.CSS("[data-test=filter-query]"), q+kb.Enter))
}

// TestBrowserInstanceListQuery: the instance list's query box, applied
// on Enter, shows only the instances the query matches, with the other
// filters, and keeps the query in the route, so that a link reproduces
// the list; a query with a mistake shows, under the box, the query with
// the offending token marked (counted in characters, not the host's
// bytes) and what is wrong, and no rows; markup in a query stays text.
// An instance's page shows its search attributes, each value linked to
// the instances that have it.
func TestBrowserInstanceListQuery(t *testing.T) {
	h := newHost(t)
	h.PutWorkflow(t, "orders", ordersFlow)
	for _, o := range []struct {
		id       string
		customer string
		amount   float64
		tags     []string
	}{
		{"o-1", "acme", 100, []string{"eu", "vip"}},
		{"o-2", "acme", 2500, []string{"us"}},
		{"o-3", "globex", 50, []string{"eu"}},
	} {
		h.start("orders", o.id, map[string]any{"n": o.id, "customer": o.customer, "amount": o.amount, "tags": o.tags}, "suspended")
	}
	h.Do(t, "POST", "/v1/events", map[string]any{"name": "order.go", "key": "o-2"}).Want(t, 202)
	h.awaitStatus("o-2", "completed")

	tb := openTab(t, h.url)
	tb.open("/instances", readerSecret, "reader")
	waitRows(tb, "the whole list", "o-1=suspended o-2=completed o-3=suspended")

	query(tb, `customer = "acme"`)
	waitRows(tb, "customer = acme", "o-1=suspended o-2=completed")
	if hash := eval[string](tb, "location.hash"); !strings.Contains(hash, "q=customer") {
		t.Errorf("after a query, the route is %q; want it to carry q", hash)
	}
	// With the status filter.
	tb.do(chromedp.Evaluate[chromedp.Void](q("[data-test=filter-status]") + ".value = 'suspended'"))
	tb.click("[data-test=filter-apply]")
	waitRows(tb, "customer = acme, suspended", "o-1=suspended")
	query(tb, `tags = "eu" AND amount < 100`)
	waitRows(tb, "tags and amount, suspended", "o-3=suspended")

	// A link reproduces the list: the route alone, from another page.
	link := eval[string](tb, "location.hash")
	tb.goTo("/workflows")
	waitTrue(tb, "the workflows page", "document.querySelector('main h1')?.textContent === 'Workflows'")
	tb.do(chromedp.Evaluate[chromedp.Void]("location.hash = " + js(link)))
	waitRows(tb, "the list from its link", "o-3=suspended")
	if got := eval[string](tb, q("[data-test=filter-query]")+".value"); got != `tags = "eu" AND amount < 100` {
		t.Errorf("the list from its link shows the query %q", got)
	}

	// A mistake, after a word with a two-byte character: marked where it
	// is, with what is wrong, and no rows.
	tb.goTo("/instances")
	waitRows(tb, "the whole list again", "o-1=suspended o-2=completed o-3=suspended")
	query(tb, `customer = "café" AND amout > 1`)
	waitFor(tb, "the query's error", q("[data-test=query-token]")+"?.textContent ?? ''", func(s string) bool { return s == "amout" })
	errText := eval[string](tb, q("[data-test=query-error]")+".textContent")
	if !strings.Contains(errText, `customer = "café" AND amout > 1`) || !strings.Contains(errText, `unknown field; did you mean "amount"?`) {
		t.Errorf("the query's error reads %q", errText)
	}
	if pos := eval[string](tb, q("[data-test=query-error]")+".dataset.position"); pos != "23" {
		t.Errorf("the error's position is %s, want the host's byte offset 23", pos)
	}
	waitTrue(tb, "no rows for a bad query", "document.querySelectorAll('[data-test=instance-row]').length === 0")
	if v := eval[string](tb, q("[data-test=filter-query]")+".getAttribute('aria-invalid') ?? ''"); v != "true" {
		t.Errorf("the query box's aria-invalid is %q, want true", v)
	}
	// Markup, in a query the host refuses and in one it answers, is
	// shown as text.
	query(tb, `customer = "a" AND <img src=x onerror="window.weftPwned=1">`)
	waitFor(tb, "the markup query's error", q("[data-test=query-token]")+"?.textContent ?? ''", func(s string) bool { return strings.HasPrefix(s, "<") })
	query(tb, `customer = "<img src=x onerror=window.weftPwned=1>"`)
	waitTrue(tb, "the error to go", q("[data-test=query-error]")+" === null && "+q("[data-test=instance-rows]")+"?.textContent.includes('No instances match')")
	if eval[bool](tb, "document.querySelector('main img') !== null || window.weftPwned === 1") {
		t.Error("markup in a query was put in the page as markup")
	}

	// An instance's search attributes, and a keyword's link.
	tb.goTo("/instances/o-1")
	attrs := `[...document.querySelectorAll('[data-test=search-attribute]')].map((r) => r.dataset.name + '=' + r.cells[1].textContent).join(' ')`
	waitFor(tb, "o-1's search attributes", attrs, func(s string) bool { return s == "amount=100 customer=acme tags=eu, vip" })
	tb.click(`[data-test=search-attribute][data-name=tags] [data-test=search-value]:nth-of-type(2)`)
	waitRows(tb, "the instances tagged vip", "o-1=suspended")
	if got := eval[string](tb, q("[data-test=filter-query]")+".value"); got != `tags = "vip"` {
		t.Errorf("the keyword's link queries %q", got)
	}
}
