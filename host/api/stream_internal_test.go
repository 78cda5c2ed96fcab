package api

import (
	"fmt"
	"slices"
	"testing"
)

// TestChangeSetGathersThenGivesUp: a change set hands over each id once,
// sorted, and once more than streamBatch changed before a take, none of
// them but "over": the stream then tells a resync instead of reading them
// all. It is ready after any add, and empty after a take.
func TestChangeSetGathersThenGivesUp(t *testing.T) {
	cs := newChangeSet()
	for _, id := range []string{"b", "a", "b", "c"} {
		cs.add(id)
	}
	select {
	case <-cs.ready:
	default:
		t.Fatal("not ready after adds")
	}
	ids, over := cs.take()
	if over || !slices.Equal(ids, []string{"a", "b", "c"}) {
		t.Fatalf("take = %v, %v; want [a b c], false", ids, over)
	}
	if ids, over := cs.take(); len(ids) != 0 || over {
		t.Fatalf("second take = %v, %v; want nothing", ids, over)
	}
	for i := range streamBatch {
		cs.add(fmt.Sprint(i))
	}
	cs.add("0") // known: no news
	if ids, over := cs.take(); len(ids) != streamBatch || over {
		t.Fatalf("take after %d ids and a repeat = %d ids, over %v; want %d, not over", streamBatch, len(ids), over, streamBatch)
	}
	for i := range streamBatch + 1 {
		cs.add(fmt.Sprint(i))
	}
	if ids, over := cs.take(); len(ids) != 0 || !over {
		t.Fatalf("take after %d changes = %d ids, over %v; want none, over", streamBatch+1, len(ids), over)
	}
	cs.add("x")
	if ids, over := cs.take(); over || !slices.Equal(ids, []string{"x"}) {
		t.Fatalf("take after the resync = %v, %v; want [x], false", ids, over)
	}
}
