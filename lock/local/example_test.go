package local_test

import (
	"context"
	"fmt"
	"time"

	"github.com/weftworks/weft/lock/local"
)

// The engine's two uses: a write of an instance waits for the lock up to a
// deadline; a singleton worker skips its turn when another holds the lock.
func Example() {
	l := local.New(local.Config{})
	ctx := context.Background()

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ls, err := l.Acquire(wctx, "workflow-instance:wf-42", 30*time.Second)
	if err != nil {
		fmt.Println("not run:", err)
		return
	}
	fmt.Println("holding", ls.Key())
	// ... write the instance with a compare-and-set on ls.Token() ...
	ls.Release(ctx)

	refresh := "workflow-definitions-refresh:billing,onboarding"
	first, _, _ := l.TryAcquire(ctx, refresh, time.Minute)
	if _, ok, _ := l.TryAcquire(ctx, refresh, time.Minute); !ok {
		fmt.Println("already_in_progress:", refresh)
	}
	first.Release(ctx)
	// Output:
	// holding workflow-instance:wf-42
	// already_in_progress: workflow-definitions-refresh:billing,onboarding
}
