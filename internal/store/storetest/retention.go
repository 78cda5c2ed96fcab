package storetest

import (
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// finished returns an instance of workflow "w" ended with status st, to be
// deleted after deleteAfter (zero: kept).
func finished(id string, st weft.Status, deleteAfter time.Time) *weft.Instance {
	in := instance(id, "w")
	in.Status = st
	in.DeleteAfter = deleteAfter
	return in
}

// testExpiredInstances: ExpiredInstances lists terminal instances whose
// DeleteAfter came, by (DeleteAfter, ID), and follows every write that
// changes it: a later or cleared DeleteAfter, a commit back to a live
// status (an import), a delete, a restart.
func testExpiredInstances(t *testing.T, h *harness) {
	hour := Epoch.Add(time.Hour)
	// Another zone on the way in: times come back in UTC, ordered by
	// the instant.
	h.create(t, finished("b-done", weft.StatusCompleted, hour.In(time.FixedZone("UTC+5", 5*3600))))
	h.create(t, finished("a-cancelled", weft.StatusCancelled, hour))
	h.create(t, finished("c-failed", weft.StatusFailed, Epoch.Add(2*time.Hour)))
	h.create(t, finished("kept", weft.StatusCompleted, time.Time{}))
	h.create(t, leased("running", "n1", "b1", Epoch))
	h.create(t, instance("pending", "w"))

	expired := func(what string, now time.Time, limit int, want ...string) {
		t.Helper()
		ids, err := h.s.ExpiredInstances(ctx(t), now, limit)
		must(t, "ExpiredInstances", err)
		wantStrings(t, what, ids, want)
	}
	expired("before any is due", hour.Add(-time.Nanosecond), 10)
	expired("due at now, ties by id", hour, 10, "a-cancelled", "b-done")
	expired("earliest first", Epoch.Add(3*time.Hour), 10, "a-cancelled", "b-done", "c-failed")
	expired("limit", Epoch.Add(3*time.Hour), 2, "a-cancelled", "b-done")
	got := h.get(t, "b-done")
	wantTime(t, "DeleteAfter", got.DeleteAfter, hour)
	if got.DeleteAfter.Location() != time.UTC {
		t.Errorf("DeleteAfter comes back in %v, want UTC", got.DeleteAfter.Location())
	}
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Status: weft.StatusCompleted})
	must(t, "ListInstances", err)
	if len(items) != 2 || items[0].ID != "b-done" || !items[0].DeleteAfter.Equal(hour) {
		t.Errorf("listed %+v, want b-done with its DeleteAfter first", items)
	}

	// A later DeleteAfter moves the entry; a zero one removes it.
	b := h.get(t, "b-done")
	b.DeleteAfter = Epoch.Add(4 * time.Hour)
	h.commit(t, store.Commit{Instance: b})
	c := h.get(t, "c-failed")
	c.DeleteAfter = time.Time{}
	h.commit(t, store.Commit{Instance: c})
	expired("after moving b-done and clearing c-failed", Epoch.Add(3*time.Hour), 10, "a-cancelled")
	expired("b-done at its new time", Epoch.Add(4*time.Hour), 10, "a-cancelled", "b-done")

	// An instance committed back to a live status (an import over a
	// finished one) has no DeleteAfter, and leaves the list.
	a := h.get(t, "a-cancelled")
	a.Status, a.DeleteAfter = weft.StatusPending, time.Time{}
	h.commit(t, store.Commit{Instance: a})
	expired("after a-cancelled came back", Epoch.Add(4*time.Hour), 10, "b-done")

	// A delete removes the entry with the instance.
	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "b-done", 0))
	expired("after deleting b-done", Epoch.Add(4*time.Hour), 10)

	// The index survives a restart.
	h.create(t, finished("d-later", weft.StatusFailed, Epoch.Add(5*time.Hour)))
	h.s = h.reopen()
	expired("after reopen", Epoch.Add(5*time.Hour), 10, "d-later")
}
