// Package storetest is the conformance suite every [store.Store] runs:
// Exercise states the Store contract as tests. The embedded store
// (internal/store/embedded) and the Redis store run it unchanged.
//
// The suite drives the store's clock: every store it opens is given a
// [Clock] that only moves when a test advances it, so no test sleeps. Times
// the suite stores are whole milliseconds, so that a backend that keeps
// milliseconds passes.
//
// An implementation must be configured so that a delivered or dead
// stimulus is forgotten within 30 days (the suite moves the clock 30 days
// forward to see it forgotten).
//
// Where the Store interface leaves a choice, the suite holds every
// implementation to one answer: Deliver records its stimulus with
// DeliveredTo set to the instance of the first message it wrote (empty
// when it wrote none), and an inbox's "already holds" means holds now: a
// message id consumed by a Commit, or removed with its instance, may be
// written again. GetGrants and DeleteGrants refuse a plugin name that
// abi.ValidName refuses with ErrInvalid, as PutGrants does.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// NewStore opens an empty store for one subtest, with now as its clock
// (Config.Now or its equivalent), and arranges for it to be closed when t
// ends. reopen closes s and opens the same data again with the same clock,
// as a restart of the process would; the suite uses the returned store and
// never s afterwards. Stores returned for different subtests must not see
// each other's data (a new file, or a new key prefix).
type NewStore func(t *testing.T, now func() time.Time) (s store.Store, reopen func() store.Store)

// Exercise runs the conformance suite against the stores newStore opens.
// Every subtest runs in parallel with a store of its own.
func Exercise(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, h *harness)
	}{
		{"CreateAndGet", testCreateAndGet},
		{"CreateTwice", testCreateTwice},
		{"InstanceStatuses", testInstanceStatuses},
		{"CreateRace", testCreateRace},
		{"CompareAndSet", testCompareAndSet},
		{"CommitAt", testCommitAt},
		{"Fencing", testFencing},
		{"RefusedCommitChangesNothing", testRefusedCommitChangesNothing},
		{"InvalidCommits", testInvalidCommits},
		{"History", testHistory},
		{"LongHistory", testLongHistory},
		{"Bookmarks", testBookmarks},
		{"BookmarkKeysDoNotCollide", testBookmarkKeysDoNotCollide},
		{"Timers", testTimers},
		{"FarFuture", testFarFuture},
		{"RenewLeases", testRenewLeases},
		{"Heartbeats", testHeartbeats},
		{"ExpiredLeases", testExpiredLeases},
		{"ExpiredInstances", testExpiredInstances},
		{"LeaseRenewalSurvivesOwnerCommit", testLeaseRenewalSurvivesOwnerCommit},
		{"StimulusIdempotency", testStimulusIdempotency},
		{"PendingStimuli", testPendingStimuli},
		{"DeliverStimulus", testDeliverStimulus},
		{"ExpireStimuli", testExpireStimuli},
		{"QueuedStimuli", testQueuedStimuli},
		{"ForgetSettledStimuli", testForgetSettledStimuli},
		{"Deliver", testDeliver},
		{"DeliverWithoutStimulus", testDeliverWithoutStimulus},
		{"Inbox", testInbox},
		{"WaitingInboxes", testWaitingInboxes},
		{"CommitConsumed", testCommitConsumed},
		{"CommitDrains", testCommitDrains},
		{"InboxWaiting", testInboxWaiting},
		{"CommitSend", testCommitSend},
		{"DeleteInstanceClearsInbox", testDeleteInstanceClearsInbox},
		{"BookmarkToken", testBookmarkToken},
		{"Definitions", testDefinitions},
		{"ListDefinitions", testListDefinitions},
		{"ListDefinitionVersions", testListDefinitionVersions},
		{"Plugins", testPlugins},
		{"PinnedPluginCannotBeDeleted", testPinnedPluginCannotBeDeleted},
		{"ResolveStart", testResolveStart},
		{"ListInstances", testListInstances},
		{"ListInstancesStableCursor", testListInstancesStableCursor},
		{"ListInstancesSameTime", testListInstancesSameTime},
		{"DeleteInstance", testDeleteInstance},
		{"CommitHammer", testCommitHammer},
		{"Durability", testDurability},
		{"CancelledContext", testCancelledContext},
		{"Closed", testClosed},
	}
	tests = append(tests, grantsTests...)
	tests = append(tests, schedulesTests...)
	tests = append(tests, slotsTests...)
	tests = append(tests, searchTests...)
	tests = append(tests, batchesTests...)
	tests = append(tests, workflowPauseTests...)
	tests = append(tests, tapesTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := NewClock(Epoch)
			s, reopen := newStore(t, clock.Now)
			tt.run(t, &harness{s: s, clock: clock, reopen: reopen})
		})
	}
}

// Epoch is where the suite's clocks start.
var Epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Clock is a fake clock, safe for concurrent use; it moves only when
// advanced.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock showing t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// harness is one subtest's store and clock.
type harness struct {
	s      store.Store
	clock  *Clock
	reopen func() store.Store
}

func ctx(t *testing.T) context.Context { return t.Context() }

// instance returns a pending instance of workflow wf.
func instance(id, wf string) *weft.Instance {
	input, _ := json.Marshal(map[string]string{"id": id})
	return &weft.Instance{ID: id, Workflow: wf, Version: 1, Status: weft.StatusPending, Input: input}
}

// create commits in as a new instance and returns what the store holds.
func (h *harness) create(t *testing.T, in *weft.Instance) *weft.Instance {
	t.Helper()
	in.Rev = 0
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: in}); err != nil {
		t.Fatalf("create %q: %v", in.ID, err)
	}
	return h.get(t, in.ID)
}

func (h *harness) get(t *testing.T, id string) *weft.Instance {
	t.Helper()
	in, err := h.s.GetInstance(ctx(t), id)
	if err != nil {
		t.Fatalf("GetInstance(%q): %v", id, err)
	}
	return in
}

// commit commits c and fails the test on error.
func (h *harness) commit(t *testing.T, c store.Commit) uint64 {
	t.Helper()
	rev, err := h.s.Commit(ctx(t), c)
	if err != nil {
		t.Fatalf("commit %q rev %d: %v", c.Instance.ID, c.Instance.Rev, err)
	}
	return rev
}

// wantErr fails unless err matches target.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// jsonEq reports whether a and b are the same JSON value (both absent
// counts as equal).
func jsonEq(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func wantJSON(t *testing.T, what string, got, want json.RawMessage) {
	t.Helper()
	if !jsonEq(got, want) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// wantStrings fails unless got equals want (nil and empty are equal).
func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}
