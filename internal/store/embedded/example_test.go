package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
)

// The engine's three uses of Commit: create, a transition under the
// instance lock, and a lease takeover by recovery.
func Example() {
	dir, _ := os.MkdirTemp("", "weft")
	defer os.RemoveAll(dir)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := embedded.Open(filepath.Join(dir, "store"), embedded.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx := context.Background()

	// Create: Rev 0, no lock, so Fence 0. A second create of the id is
	// refused with ErrExists: answer with the stored instance.
	in := &weft.Instance{ID: "order-1", Workflow: "order", Version: 1, Status: weft.StatusPending}
	rev, _ := st.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}})
	_, err = st.Commit(ctx, store.Commit{Instance: in})
	fmt.Println("created at rev", rev, "then:", errors.Is(err, weft.ErrExists))

	// Transition: under the lock (token 100), with the lease of this node.
	in.Rev = rev
	in.Status = weft.StatusRunning
	in.Lease = weft.Lease{Node: "node-a", Boot: "boot-1", Expiry: now.Add(30 * time.Second)}
	rev, _ = st.Commit(ctx, store.Commit{Instance: in, Fence: 100, History: []weft.HistoryEntry{{Type: "step_started", StepPath: "charge"}}})
	fmt.Println("running at rev", rev)

	// node-a dies. After the expiry recovery finds the instance, takes the
	// lock (token 200) and the lease.
	now = now.Add(time.Minute)
	ids, _ := st.ExpiredLeases(ctx, now, 10)
	got, _ := st.GetInstance(ctx, ids[0])
	got.Lease = weft.Lease{Node: "node-b", Boot: "boot-7", Expiry: now.Add(30 * time.Second)}
	rev, _ = st.Commit(ctx, store.Commit{Instance: got, Fence: 200})
	fmt.Println("taken over by", got.Lease.Node, "at rev", rev)

	// node-a wakes up and writes with its old token: fenced.
	in.Status = weft.StatusCompleted
	_, err = st.Commit(ctx, store.Commit{Instance: in, Fence: 100})
	fmt.Println("late write fenced:", errors.Is(err, weft.ErrFenced))
	// Output:
	// created at rev 1 then: true
	// running at rev 2
	// taken over by node-b at rev 3
	// late write fenced: true
}
