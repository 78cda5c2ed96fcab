package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/query"
)

// searchFlow declares attributes over its input and over vars that its
// steps set: stage follows the instance's progress.
const searchFlow = `
name: orders
search:
  customer: { type: string, value: "${ input.customer }" }
  amount: { type: number, value: "${ input.amount }" }
  stage: { type: keywords, value: "${ vars.stage }" }
steps:
  - { id: placed, set: { stage: [placed] } }
  - { id: wait, wait: { event: go, key: "${ input.id }" } }
  - { id: shipped, set: { stage: [placed, shipped] } }
`

// search returns the ids q finds, page after page of limit, sorted.
func (h *host) search(q string, limit int) []string {
	h.t.Helper()
	var ids []string
	cursor := ""
	for {
		items, next, err := h.e.SearchInstances(context.Background(), q, weft.InstanceFilter{Limit: limit, Cursor: cursor})
		if err != nil {
			h.t.Fatalf("SearchInstances(%s): %v", q, err)
		}
		for _, it := range items {
			ids = append(ids, it.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	slices.Sort(ids)
	return ids
}

func TestSearchAttributes(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		var opts []hostOption
		if redis {
			opts = append(opts, withRedisStore())
		}
		h := newHost(t, opts...)
		h.save(searchFlow)
		ctx := context.Background()
		start := func(id, customer string, amount any) {
			in, err := json.Marshal(map[string]any{"id": id, "customer": customer, "amount": amount})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := h.e.Start(ctx, "orders", in, id); err != nil {
				t.Fatalf("Start %s: %v", id, err)
			}
			h.waitStatus(id, weft.StatusSuspended)
		}
		start("a1", "acme", 100)
		start("a2", "acme", 250)
		start("g1", "globex", 50)
		// An amount that is not a number is left out; the instance runs.
		start("x1", "initech", "a lot")

		check := func(q string, want ...string) {
			t.Helper()
			for _, limit := range []int{1, 100} {
				if got := h.search(q, limit); !slices.Equal(got, want) {
					t.Errorf("%s (pages of %d): got %v, want %v", q, limit, got, want)
				}
			}
		}
		check(`customer = "acme"`, "a1", "a2")
		check(`amount > 99.5`, "a1", "a2")
		check(`amount <= 100 AND customer != "acme"`, "g1")
		check(`customer IN ("globex", "initech") OR amount >= 250`, "a2", "g1", "x1")
		check(`stage = "placed"`, "a1", "a2", "g1", "x1")
		check(`stage = "shipped"`)
		check(`workflow = "orders" AND status = "suspended" AND customer STARTS_WITH "ac"`, "a1", "a2")
		check(`NOT amount > 0`, "x1") // no amount: the NOT of a comparison it misses

		// stage follows vars: the released instance has shipped.
		h.release("a2")
		h.waitStatus("a2", weft.StatusCompleted)
		check(`stage = "shipped"`, "a2")
		check(`stage = "shipped" AND status = "completed"`, "a2")
		check(`stage IN ("placed", "shipped")`, "a1", "a2", "g1", "x1")
		check(`status = "suspended" AND stage = "shipped"`)

		// A query that does not parse or type says where.
		for q, pos := range map[string]int{`customer = "acme" AND amout > 1`: 22, `customer =`: 10, `amount = "x"`: 9} {
			_, _, err := h.e.SearchInstances(ctx, q, weft.InstanceFilter{})
			var qe *query.Error
			if !errors.Is(err, weft.ErrInvalid) || !errors.As(err, &qe) || qe.Pos != pos {
				t.Errorf("%s: got %v, want ErrInvalid with a *query.Error at %d", q, err, pos)
			}
		}

		// A name's type is for good: another workflow cannot make
		// customer a number, whether checked or saved.
		other := "name: other\nsearch:\n  customer: { type: number, value: \"${ input.n }\" }\nsteps:\n  - { id: s, set: { x: 1 } }\n"
		for what, call := range map[string]func() error{
			"check": func() error { _, err := h.e.CheckDefinition(ctx, []byte(other)); return err },
			"save":  func() error { _, _, err := h.e.SaveDefinition(ctx, []byte(other)); return err },
		} {
			err := call()
			var de *weft.DefinitionError
			if !errors.As(err, &de) || len(de.Problems) != 1 || de.Problems[0].Path != "search.customer.type" {
				t.Errorf("%s: got %v, want a problem at search.customer.type", what, err)
			}
		}
		attrs, err := h.store.SearchAttributes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []weft.SearchAttribute{{Name: "amount", Type: weft.SearchNumber, Workflow: "orders"}, {Name: "customer", Type: weft.SearchString, Workflow: "orders"}, {Name: "stage", Type: weft.SearchKeywords, Workflow: "orders"}}
		if !slices.Equal(attrs, want) {
			t.Errorf("registry: got %+v, want %+v", attrs, want)
		}
	})
}
