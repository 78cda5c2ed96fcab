package batch_test

import (
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
)

// A batch document as an operator writes it, the form the store keeps,
// the state a new batch starts in, and the first chunk's budget.
func Example() {
	d, err := batch.ParseDocument([]byte(`{
		"op": "signal",
		"query": "customer = 'acme' and status = \"suspended\"",
		"reason": "payment arrived",
		"rate": 20,
		"args": {"event": "paid"}
	}`))
	fmt.Println(err)
	d, err = batch.ParseDocument([]byte(`{
		"op": "signal",
		"query": "customer = \"acme\" and status = \"suspended\"",
		"reason": "payment arrived",
		"rate": 20,
		"args": {"event": "paid"}
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s\n", d.Canonical())

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := batch.Initial(d, now)
	fmt.Println(st.Phase)

	n, wake := batch.Budget(d.Limit(), st.LastApply, now, weft.MaxBatchChanges)
	fmt.Println(n, wake.Sub(now))

	ok, why := batch.Precheck(d.Op, batch.StatusView{Status: weft.StatusCompleted})
	fmt.Println(ok, why)
	// Output:
	// invalid batch: query: at 11 ("'"): strings are double-quoted
	// {"op":"signal","query":"customer = \"acme\" AND status = \"suspended\"","reason":"payment arrived","rate":20,"args":{"event":"paid"}}
	// selecting
	// 20 1s
	// false finished (completed)
}
