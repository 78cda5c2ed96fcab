package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

func testCreateAndGet(t *testing.T, h *harness) {
	if _, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "payments", Version: "h1", Size: 10}); err != nil {
		t.Fatal(err)
	}
	imported := Epoch.Add(-time.Hour)
	tests := []struct {
		name        string
		in          weft.Instance
		fence       uint64
		wantCreated time.Time
	}{
		{
			name: "full",
			in: weft.Instance{
				ID: "full", Workflow: "order", Version: 3, Status: weft.StatusRunning,
				Input: json.RawMessage(`{"total": 12.5, "items": [1, 2]}`), Output: json.RawMessage(`"ok"`),
				Vars:        json.RawMessage(`{"charge": {"id": "c1"}}`),
				Error:       &weft.Failure{Code: "card_declined", Message: "no", Details: json.RawMessage(`{"try": 2}`)},
				State:       []byte{0, 1, 2, 0xFF},
				Plugins:     map[string]string{"payments": "h1"},
				Parent:      &weft.ParentRef{InstanceID: "p", StepID: "audit", Token: "c2"},
				Persistence: "activity",
				Hold:        &weft.Hold{Since: Epoch.Add(-time.Minute)},
				Lease:       weft.Lease{Node: "n1", Boot: "b1", Expiry: Epoch.Add(time.Minute)},
			},
			fence:       7,
			wantCreated: Epoch,
		},
		{
			name:        "minimal",
			in:          weft.Instance{ID: "minimal", Workflow: "w", Status: weft.StatusPending},
			wantCreated: Epoch,
		},
		{
			name:        "imported keeps CreatedAt",
			in:          weft.Instance{ID: "imported", Workflow: "w", Status: weft.StatusSuspended, CreatedAt: imported},
			wantCreated: imported,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			rev := h.commit(t, store.Commit{Instance: &in, Fence: tt.fence})
			if rev != 1 {
				t.Errorf("rev = %d, want 1", rev)
			}
			if in.Rev != 0 {
				t.Errorf("Commit changed the caller's Rev to %d", in.Rev)
			}
			got := h.get(t, in.ID)
			if got.ID != in.ID || got.Workflow != in.Workflow || got.Version != in.Version || got.Status != in.Status || got.Persistence != in.Persistence {
				t.Errorf("got %+v, want %+v", got, in)
			}
			wantJSON(t, "Input", got.Input, in.Input)
			wantJSON(t, "Output", got.Output, in.Output)
			wantJSON(t, "Vars", got.Vars, in.Vars)
			if (got.Error == nil) != (in.Error == nil) {
				t.Errorf("Error = %v, want %v", got.Error, in.Error)
			} else if in.Error != nil {
				if got.Error.Code != in.Error.Code || got.Error.Message != in.Error.Message {
					t.Errorf("Error = %+v, want %+v", got.Error, in.Error)
				}
				wantJSON(t, "Error.Details", got.Error.Details, in.Error.Details)
			}
			if !slices.Equal(got.State, in.State) {
				t.Errorf("State = %x, want %x", got.State, in.State)
			}
			if fmt.Sprint(got.Plugins) != fmt.Sprint(in.Plugins) || len(got.Plugins) != len(in.Plugins) {
				t.Errorf("Plugins = %v, want %v", got.Plugins, in.Plugins)
			}
			if (got.Parent == nil) != (in.Parent == nil) || (in.Parent != nil && *got.Parent != *in.Parent) {
				t.Errorf("Parent = %v, want %v", got.Parent, in.Parent)
			}
			if (got.Hold == nil) != (in.Hold == nil) || (in.Hold != nil && !got.Hold.Since.Equal(in.Hold.Since)) {
				t.Errorf("Hold = %+v, want %+v", got.Hold, in.Hold)
			}
			if got.Lease.Node != in.Lease.Node || got.Lease.Boot != in.Lease.Boot || !got.Lease.Expiry.Equal(in.Lease.Expiry) {
				t.Errorf("Lease = %+v, want %+v", got.Lease, in.Lease)
			}
			if got.Rev != 1 || got.Fence != tt.fence {
				t.Errorf("Rev, Fence = %d, %d, want 1, %d", got.Rev, got.Fence, tt.fence)
			}
			wantTime(t, "CreatedAt", got.CreatedAt, tt.wantCreated)
			wantTime(t, "UpdatedAt", got.UpdatedAt, Epoch)
		})
	}

	t.Run("update sets UpdatedAt, keeps CreatedAt", func(t *testing.T) {
		in := h.create(t, instance("upd", "w"))
		later := h.clock.Advance(time.Second)
		in.Status = weft.StatusRunning
		in.CreatedAt = later.Add(time.Hour) // ignored on update
		in.State = nil                      // clears the state
		if rev := h.commit(t, store.Commit{Instance: in}); rev != 2 {
			t.Errorf("rev = %d, want 2", rev)
		}
		got := h.get(t, "upd")
		wantTime(t, "CreatedAt", got.CreatedAt, Epoch)
		wantTime(t, "UpdatedAt", got.UpdatedAt, later)
		if got.Status != weft.StatusRunning || got.Rev != 2 || len(got.State) != 0 {
			t.Errorf("got status %s rev %d state %x", got.Status, got.Rev, got.State)
		}
	})

	t.Run("missing", func(t *testing.T) {
		_, err := h.s.GetInstance(ctx(t), "nope")
		wantErr(t, "GetInstance", err, weft.ErrNotFound)
	})
}

func testInstanceStatuses(t *testing.T, h *harness) {
	h.create(t, instance("a", "w"))
	b := h.create(t, instance("b", "w"))
	b.Status = weft.StatusCompleted
	h.commit(t, store.Commit{Instance: b})
	got, err := h.s.InstanceStatuses(ctx(t), []string{"b", "nope", "a", "b"})
	must(t, "InstanceStatuses", err)
	want := map[string]weft.Status{"a": weft.StatusPending, "b": weft.StatusCompleted}
	if !maps.Equal(got, want) {
		t.Errorf("InstanceStatuses = %v, want %v", got, want)
	}
	got, err = h.s.InstanceStatuses(ctx(t), nil)
	must(t, "InstanceStatuses of none", err)
	if len(got) != 0 {
		t.Errorf("InstanceStatuses of none = %v, want none", got)
	}
}

func testCreateTwice(t *testing.T, h *harness) {
	first := h.create(t, instance("x", "w"))
	second := instance("x", "other")
	second.Input = json.RawMessage(`{"second": true}`)
	_, err := h.s.Commit(ctx(t), store.Commit{Instance: second, History: []weft.HistoryEntry{{Type: "created"}}})
	wantErr(t, "second create", err, weft.ErrExists)
	var ce *store.CommitError
	if !errors.As(err, &ce) || ce.InstanceID != "x" || ce.Rev != 1 {
		t.Errorf("error %#v: want a *CommitError for x with Rev 1", err)
	}
	got := h.get(t, "x")
	if got.Workflow != first.Workflow || !jsonEq(got.Input, first.Input) || got.Rev != 1 {
		t.Errorf("second create changed the instance: %+v", got)
	}
	evs, err := h.s.History(ctx(t), "x", 0, 0)
	must(t, "History", err)
	if len(evs) != 0 {
		t.Errorf("refused create appended history %+v", evs)
	}
}

// testCreateRace: many creators of one id, one wins; creators of distinct
// ids all win (group commit keeps them apart).
func testCreateRace(t *testing.T, h *harness) {
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = h.s.Commit(ctx(t), store.Commit{Instance: instance("same", "w")})
		})
	}
	for i := range n {
		wg.Go(func() {
			_, err := h.s.Commit(ctx(t), store.Commit{Instance: instance(fmt.Sprintf("own-%d", i), "w")})
			if err != nil {
				t.Errorf("create own-%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, weft.ErrExists):
			t.Errorf("create: %v, want nil or ErrExists", err)
		}
	}
	if won != 1 {
		t.Errorf("%d creates of one id succeeded, want 1", won)
	}
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Limit: 100})
	must(t, "ListInstances", err)
	if len(items) != n+1 {
		t.Errorf("%d instances listed, want %d", len(items), n+1)
	}
}

func testCompareAndSet(t *testing.T, h *harness) {
	h.create(t, instance("i", "w"))
	tests := []struct {
		name    string
		id      string
		rev     uint64
		wantErr error
		wantRev uint64
	}{
		{"stale", "i", 5, weft.ErrConflict, 0},
		{"current", "i", 1, nil, 2},
		{"previous", "i", 1, weft.ErrConflict, 0},
		{"next current", "i", 2, nil, 3},
		{"missing", "nope", 1, weft.ErrNotFound, 0},
	}
	for _, tt := range tests { // in order: each step depends on the last
		in := instance(tt.id, "w")
		in.Rev = tt.rev
		in.Status = weft.StatusRunning
		rev, err := h.s.Commit(ctx(t), store.Commit{Instance: in})
		if tt.wantErr != nil {
			wantErr(t, tt.name, err, tt.wantErr)
			var ce *store.CommitError
			if !errors.As(err, &ce) {
				t.Errorf("%s: %T is not a *CommitError", tt.name, err)
			}
			continue
		}
		if err != nil || rev != tt.wantRev {
			t.Errorf("%s: rev, err = %d, %v, want %d", tt.name, rev, err, tt.wantRev)
		}
	}
	if got := h.get(t, "i"); got.Rev != 3 {
		t.Errorf("final Rev = %d, want 3", got.Rev)
	}
	if _, err := h.s.GetInstance(ctx(t), "nope"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("an update of a missing instance created it: %v", err)
	}
}

func testFencing(t *testing.T, h *harness) {
	in := instance("f", "w")
	h.commit(t, store.Commit{Instance: in, Fence: 10})
	tests := []struct {
		name      string
		rev       uint64
		fence     uint64
		wantErr   error
		wantFence uint64
	}{
		{"lower", 1, 9, weft.ErrFenced, 10},
		{"lower and stale: fenced wins", 7, 3, weft.ErrFenced, 10},
		{"equal", 1, 10, nil, 10},
		{"higher", 2, 20, nil, 20},
		{"previous holder", 3, 10, weft.ErrFenced, 20},
		{"zero after a token", 3, 0, weft.ErrFenced, 20},
	}
	for _, tt := range tests {
		in := instance("f", "w")
		in.Rev = tt.rev
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in, Fence: tt.fence})
		if tt.wantErr != nil {
			wantErr(t, tt.name, err, tt.wantErr)
			var ce *store.CommitError
			if errors.As(err, &ce) && ce.Fence != tt.wantFence {
				t.Errorf("%s: CommitError.Fence = %d, want %d", tt.name, ce.Fence, tt.wantFence)
			}
		} else if err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if got := h.get(t, "f"); got.Fence != tt.wantFence {
			t.Errorf("%s: stored Fence = %d, want %d", tt.name, got.Fence, tt.wantFence)
		}
	}
	err := h.s.DeleteInstance(ctx(t), "f", 19)
	wantErr(t, "DeleteInstance with a lower fence", err, weft.ErrFenced)
	h.get(t, "f")
	must(t, "DeleteInstance with the stored fence", h.s.DeleteInstance(ctx(t), "f", 20))
}

// testRefusedCommitChangesNothing: every kind of refusal leaves the
// instance, its history, bookmarks and timers and the stimulus queue as
// they were.
func testRefusedCommitChangesNothing(t *testing.T, h *harness) {
	in := instance("r", "w")
	h.commit(t, store.Commit{
		Instance: in, Fence: 5,
		History:   []weft.HistoryEntry{{Type: "created"}},
		Bookmarks: []weft.Bookmark{{StepPath: "wait", Event: "e", Key: "k"}},
		Timers:    []weft.Timer{{ID: "t", Due: Epoch.Add(time.Minute)}},
	})
	_, err := h.s.EnqueueStimulus(ctx(t), weft.Stimulus{ID: "s1", Name: "e", Key: "k", ExpiresAt: Epoch.Add(time.Hour)})
	must(t, "EnqueueStimulus", err)
	_, err = h.s.EnqueueStimulus(ctx(t), weft.Stimulus{ID: "s2", Name: "e", Key: "k", ExpiresAt: Epoch.Add(time.Hour)})
	must(t, "EnqueueStimulus", err)
	// s2 is consumed by another instance first.
	h.commit(t, store.Commit{Instance: instance("other", "w"), DeliveredStimulus: "s2"})

	change := func(rev, fence uint64, stim string) store.Commit {
		n := instance("r", "changed")
		n.Rev, n.Status, n.State = rev, weft.StatusCompleted, []byte("changed")
		return store.Commit{
			Instance: n, Fence: fence,
			History:           []weft.HistoryEntry{{Type: "x"}},
			Bookmarks:         []weft.Bookmark{},
			Timers:            []weft.Timer{},
			DeliveredStimulus: stim,
		}
	}
	tests := []struct {
		name    string
		c       store.Commit
		wantErr error
	}{
		{"stale rev", change(2, 5, "s1"), weft.ErrConflict},
		{"lower fence", change(1, 4, "s1"), weft.ErrFenced},
		{"create existing", change(0, 5, "s1"), weft.ErrExists},
		{"stimulus already delivered", change(1, 5, "s2"), store.ErrNotQueued},
		{"unknown stimulus", change(1, 5, "nope"), store.ErrNotQueued},
	}
	for _, tt := range tests {
		_, err := h.s.Commit(ctx(t), tt.c)
		wantErr(t, tt.name, err, tt.wantErr)
		got := h.get(t, "r")
		if got.Rev != 1 || got.Fence != 5 || got.Workflow != "w" || got.Status != weft.StatusPending || len(got.State) != 0 {
			t.Errorf("%s: instance changed: %+v", tt.name, got)
		}
		evs, err := h.s.History(ctx(t), "r", 0, 0)
		must(t, "History", err)
		if len(evs) != 1 {
			t.Errorf("%s: history has %d events, want 1", tt.name, len(evs))
		}
		bms, err := h.s.FindBookmarks(ctx(t), "e", "k")
		must(t, "FindBookmarks", err)
		if len(bms) != 1 {
			t.Errorf("%s: %d bookmarks, want 1", tt.name, len(bms))
		}
		tms, err := h.s.DueTimers(ctx(t), Epoch.Add(time.Hour), 10)
		must(t, "DueTimers", err)
		if len(tms) != 1 {
			t.Errorf("%s: %d timers, want 1", tt.name, len(tms))
		}
		pending, err := h.s.PendingStimuli(ctx(t), "e", "k")
		must(t, "PendingStimuli", err)
		if len(pending) != 1 || pending[0].ID != "s1" {
			t.Errorf("%s: pending = %+v, want s1 only", tt.name, pending)
		}
	}
}

func testInvalidCommits(t *testing.T, h *harness) {
	valid := func() *weft.Instance { return instance("v", "w") }
	tests := []struct {
		name string
		c    func() store.Commit
	}{
		{"no instance", func() store.Commit { return store.Commit{} }},
		{"empty id", func() store.Commit { in := valid(); in.ID = ""; return store.Commit{Instance: in} }},
		{"long id", func() store.Commit {
			in := valid()
			in.ID = string(make([]byte, weft.MaxIDLen+1))
			return store.Commit{Instance: in}
		}},
		{"no workflow", func() store.Commit { in := valid(); in.Workflow = ""; return store.Commit{Instance: in} }},
		{"bad status", func() store.Commit { in := valid(); in.Status = "sleeping"; return store.Commit{Instance: in} }},
		{"bad input", func() store.Commit { in := valid(); in.Input = json.RawMessage(`{`); return store.Commit{Instance: in} }},
		{"lease without expiry", func() store.Commit {
			in := valid()
			in.Lease = weft.Lease{Node: "n"}
			return store.Commit{Instance: in}
		}},
		{"lease without node", func() store.Commit {
			in := valid()
			in.Lease = weft.Lease{Boot: "b", Expiry: Epoch}
			return store.Commit{Instance: in}
		}},
		{"delete_after on a live instance", func() store.Commit {
			in := valid()
			in.DeleteAfter = Epoch
			return store.Commit{Instance: in}
		}},
		{"delete_after beyond what an index orders", func() store.Commit {
			in := finished("v", weft.StatusCompleted, time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))
			return store.Commit{Instance: in}
		}},
		{"event without type", func() store.Commit { return store.Commit{Instance: valid(), History: []weft.HistoryEntry{{}}} }},
		{"bookmark of another instance", func() store.Commit {
			return store.Commit{Instance: valid(), Bookmarks: []weft.Bookmark{{InstanceID: "x", Event: "e"}}}
		}},
		{"bookmark without event", func() store.Commit {
			return store.Commit{Instance: valid(), Bookmarks: []weft.Bookmark{{StepPath: "s"}}}
		}},
		{"timer without id", func() store.Commit {
			return store.Commit{Instance: valid(), Timers: []weft.Timer{{Due: Epoch}}}
		}},
		{"timer without due", func() store.Commit {
			return store.Commit{Instance: valid(), Timers: []weft.Timer{{ID: "t"}}}
		}},
		{"duplicate timer", func() store.Commit {
			return store.Commit{Instance: valid(), Timers: []weft.Timer{{ID: "t", Due: Epoch}, {ID: "t", Due: Epoch}}}
		}},
		{"outcome without stimulus", func() store.Commit {
			return store.Commit{Instance: valid(), DeliveredOutcome: json.RawMessage(`{}`)}
		}},
		{"empty consumed id", func() store.Commit {
			return store.Commit{Instance: valid(), Consumed: []string{"m", ""}}
		}},
		{"message without instance", func() store.Commit {
			return store.Commit{Instance: valid(), Send: []weft.Message{{ID: "m", Kind: "child"}}}
		}},
		{"message without id", func() store.Commit {
			return store.Commit{Instance: valid(), Send: []weft.Message{{InstanceID: "p", Kind: "child"}}}
		}},
		{"message without kind", func() store.Commit {
			return store.Commit{Instance: valid(), Send: []weft.Message{{InstanceID: "p", ID: "m"}}}
		}},
		{"message with a bad payload", func() store.Commit {
			return store.Commit{Instance: valid(), Send: []weft.Message{{InstanceID: "p", ID: "m", Kind: "child", Payload: json.RawMessage(`{`)}}}
		}},
	}
	for _, tt := range tests {
		_, err := h.s.Commit(ctx(t), tt.c())
		wantErr(t, tt.name, err, weft.ErrInvalid)
	}
	if _, err := h.s.GetInstance(ctx(t), "v"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("an invalid commit created the instance: %v", err)
	}
	t.Run("pinning an unknown plugin", func(t *testing.T) {
		in := valid()
		in.Plugins = map[string]string{"nope": "h"}
		_, err := h.s.Commit(ctx(t), store.Commit{Instance: in})
		wantErr(t, "commit", err, weft.ErrNotFound)
	})
}

func testHistory(t *testing.T, h *harness) {
	in := instance("h", "w")
	given := Epoch.Add(-time.Minute)
	h.commit(t, store.Commit{Instance: in, History: []weft.HistoryEntry{
		{Type: "created", Data: json.RawMessage(`{"a": 1}`)},
		{Type: "step_started", StepPath: "charge", Attempt: 1, Node: "n1", Time: given},
	}})
	h.clock.Advance(time.Second)
	in.Rev = 1
	h.commit(t, store.Commit{Instance: in}) // no history
	in.Rev = 2
	h.commit(t, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "a"}, {Type: "b"}, {Type: "c"}}})

	all, err := h.s.History(ctx(t), "h", 0, 0)
	must(t, "History", err)
	var types []string
	for i, e := range all {
		if e.Seq != uint64(i+1) {
			t.Errorf("event %d has Seq %d", i, e.Seq)
		}
		types = append(types, string(e.Type))
	}
	wantStrings(t, "types", types, []string{"created", "step_started", "a", "b", "c"})
	if len(all) == 5 {
		wantJSON(t, "Data", all[0].Data, json.RawMessage(`{"a":1}`))
		wantTime(t, "Time (default)", all[0].Time, Epoch)
		wantTime(t, "Time (given)", all[1].Time, given)
		wantTime(t, "Time (later commit)", all[2].Time, Epoch.Add(time.Second))
		if e := all[1]; e.StepPath != "charge" || e.Attempt != 1 || e.Node != "n1" {
			t.Errorf("event = %+v", e)
		}
	}
	tests := []struct {
		after uint64
		limit int
		want  []string
	}{
		{0, 2, []string{"created", "step_started"}},
		{2, 2, []string{"a", "b"}},
		{4, 10, []string{"c"}},
		{5, 10, nil},
		{99, 10, nil},
	}
	for _, tt := range tests {
		evs, err := h.s.History(ctx(t), "h", tt.after, tt.limit)
		must(t, "History", err)
		var got []string
		for _, e := range evs {
			got = append(got, string(e.Type))
		}
		wantStrings(t, fmt.Sprintf("History(after %d, limit %d)", tt.after, tt.limit), got, tt.want)
	}
	_, err = h.s.History(ctx(t), "nope", 0, 0)
	wantErr(t, "History of a missing instance", err, weft.ErrNotFound)
}

func bookmarkPaths(bms []weft.Bookmark) []string {
	var out []string
	for _, b := range bms {
		out = append(out, b.InstanceID+"/"+b.StepPath)
	}
	return out
}

func testBookmarks(t *testing.T, h *harness) {
	a, b := instance("a", "w"), instance("b", "w")
	h.commit(t, store.Commit{Instance: a, Bookmarks: []weft.Bookmark{
		{StepPath: "s2", Event: "approved", Key: "o1"},
		{StepPath: "s1", Event: "approved", Key: "o1"},
		{StepPath: "s3", Event: "paid", Key: "o1"},
	}})
	h.commit(t, store.Commit{Instance: b, Bookmarks: []weft.Bookmark{{InstanceID: "b", StepPath: "s1", Event: "approved", Key: "o1"}}})

	find := func(event, key string) []string {
		t.Helper()
		bms, err := h.s.FindBookmarks(ctx(t), event, key)
		must(t, "FindBookmarks", err)
		for _, bm := range bms {
			if bm.Event != event || bm.Key != key {
				t.Errorf("FindBookmarks(%q, %q) returned %+v", event, key, bm)
			}
		}
		return bookmarkPaths(bms)
	}
	own := func(id string) []string {
		t.Helper()
		bms, err := h.s.Bookmarks(ctx(t), id)
		must(t, "Bookmarks", err)
		return bookmarkPaths(bms)
	}
	wantStrings(t, "approved/o1", find("approved", "o1"), []string{"a/s1", "a/s2", "b/s1"})
	wantStrings(t, "paid/o1", find("paid", "o1"), []string{"a/s3"})
	wantStrings(t, "approved/o2", find("approved", "o2"), nil)
	wantStrings(t, "a's", own("a"), []string{"a/s1", "a/s2", "a/s3"})

	steps := []struct {
		name  string
		set   []weft.Bookmark
		wantA []string
		wantF []string // approved/o1
	}{
		{"nil leaves the set", nil, []string{"a/s1", "a/s2", "a/s3"}, []string{"a/s1", "a/s2", "b/s1"}},
		{"replace", []weft.Bookmark{{StepPath: "s9", Event: "approved", Key: "o1"}}, []string{"a/s9"}, []string{"a/s9", "b/s1"}},
		{"empty clears", []weft.Bookmark{}, nil, []string{"b/s1"}},
	}
	for _, st := range steps {
		a.Rev = h.get(t, "a").Rev
		h.commit(t, store.Commit{Instance: a, Bookmarks: st.set})
		wantStrings(t, st.name+": a's", own("a"), st.wantA)
		wantStrings(t, st.name+": approved/o1", find("approved", "o1"), st.wantF)
	}
	wantStrings(t, "paid/o1 after clearing", find("paid", "o1"), nil)
	_, err := h.s.Bookmarks(ctx(t), "nope")
	wantErr(t, "Bookmarks of a missing instance", err, weft.ErrNotFound)
}

// testBookmarkKeysDoNotCollide: event names and keys are arbitrary strings
// and are never confused with one another.
func testBookmarkKeysDoNotCollide(t *testing.T, h *harness) {
	pairs := [][2]string{
		{"a", "bc"}, {"ab", "c"}, {"a\x00b", "c"}, {"a", "\x00bc"}, {"a\x00", "bc"}, {"a:b", "c"},
		{"a", "b:c"}, {"a", ""}, {"é", "ü"}, {"a", "b\xff"}, {"a\x00\x01", ""},
	}
	var bms []weft.Bookmark
	for i, p := range pairs {
		bms = append(bms, weft.Bookmark{StepPath: fmt.Sprint(i), Event: p[0], Key: p[1]})
	}
	h.commit(t, store.Commit{Instance: instance("k\x00", "w"), Bookmarks: bms})
	for _, b := range bms {
		got, err := h.s.FindBookmarks(ctx(t), b.Event, b.Key)
		must(t, "FindBookmarks", err)
		if len(got) != 1 || got[0].StepPath != b.StepPath || got[0].InstanceID != "k\x00" {
			t.Errorf("FindBookmarks(%q, %q) = %+v, want step %s only", b.Event, b.Key, got, b.StepPath)
		}
	}
}

func timerIDs(ts []weft.Timer) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.InstanceID+"/"+t.ID)
	}
	return out
}

// testFarFuture: a timer due beyond what int64 nanoseconds hold (after
// 2262) is far in the future, not in the past; it is due only then.
func testFarFuture(t *testing.T, h *harness) {
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	h.commit(t, store.Commit{Instance: instance("a", "w"), Timers: []weft.Timer{{ID: "far", Due: far}, {ID: "soon", Due: Epoch.Add(time.Second)}}})
	ts, err := h.s.DueTimers(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueTimers", err)
	wantStrings(t, "due within the hour", timerIDs(ts), []string{"a/soon"})
	ts, err = h.s.DueTimers(ctx(t), far, 10)
	must(t, "DueTimers in the year 3000", err)
	wantStrings(t, "due in the year 3000", timerIDs(ts), []string{"a/soon", "a/far"})
}

func testTimers(t *testing.T, h *harness) {
	a, b := instance("a", "w"), instance("b", "w")
	h.commit(t, store.Commit{Instance: a, Timers: []weft.Timer{
		{ID: "late", Due: Epoch.Add(3 * time.Second), Kind: "delay", Data: json.RawMessage(`{"step": "cool-off"}`)},
		{ID: "early", Due: Epoch.Add(time.Second), Kind: "retry"},
	}})
	h.commit(t, store.Commit{Instance: b, Timers: []weft.Timer{
		{ID: "x", Due: Epoch.Add(2 * time.Second)},
		{ID: "same", Due: Epoch.Add(time.Second)},
	}})
	due := func(now time.Time, limit int) []string {
		t.Helper()
		ts, err := h.s.DueTimers(ctx(t), now, limit)
		must(t, "DueTimers", err)
		return timerIDs(ts)
	}
	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"none due", Epoch, 10, nil},
		{"due equals now", Epoch.Add(time.Second), 10, []string{"a/early", "b/same"}},
		{"ordered by due", Epoch.Add(time.Hour), 10, []string{"a/early", "b/same", "b/x", "a/late"}},
		{"limit", Epoch.Add(time.Hour), 3, []string{"a/early", "b/same", "b/x"}},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, due(tt.now, tt.limit), tt.want)
	}
	ts, err := h.s.DueTimers(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueTimers", err)
	if last := ts[len(ts)-1]; last.Kind != "delay" || !jsonEq(last.Data, json.RawMessage(`{"step":"cool-off"}`)) || !last.Due.Equal(Epoch.Add(3*time.Second)) {
		t.Errorf("timer = %+v", last)
	}
	// DueTimers removes nothing.
	wantStrings(t, "again", due(Epoch.Add(time.Hour), 10), []string{"a/early", "b/same", "b/x", "a/late"})

	steps := []struct {
		name  string
		set   []weft.Timer
		wantA []string
	}{
		{"nil leaves the set", nil, []string{"a/early", "a/late"}},
		{"replace", []weft.Timer{{ID: "late", Due: Epoch.Add(5 * time.Second)}, {ID: "new", Due: Epoch.Add(4 * time.Second)}}, []string{"a/new", "a/late"}},
		{"empty clears", []weft.Timer{}, nil},
	}
	for _, st := range steps {
		a.Rev = h.get(t, "a").Rev
		h.commit(t, store.Commit{Instance: a, Timers: st.set})
		own, err := h.s.Timers(ctx(t), "a")
		must(t, "Timers", err)
		wantStrings(t, st.name+": a's", timerIDs(own), st.wantA)
		var all []string
		for _, id := range due(Epoch.Add(time.Hour), 100) {
			if id[0] == 'a' {
				all = append(all, id)
			}
		}
		wantStrings(t, st.name+": due of a", all, st.wantA)
	}
	wantStrings(t, "b untouched", due(Epoch.Add(time.Hour), 100), []string{"b/same", "b/x"})
	_, err = h.s.Timers(ctx(t), "nope")
	wantErr(t, "Timers of a missing instance", err, weft.ErrNotFound)
}

func leased(id, node, boot string, expiry time.Time) *weft.Instance {
	in := instance(id, "w")
	in.Status = weft.StatusRunning
	in.Lease = weft.Lease{Node: node, Boot: boot, Expiry: expiry}
	return in
}

func testRenewLeases(t *testing.T, h *harness) {
	soon := Epoch.Add(10 * time.Second)
	h.create(t, leased("mine1", "n1", "b1", soon))
	h.create(t, leased("mine2", "n1", "b1", soon))
	h.create(t, leased("other-node", "n2", "b1", soon))
	h.create(t, leased("old-boot", "n1", "b0", soon))
	h.create(t, leased("expired", "n1", "b1", Epoch))
	done := leased("done", "n1", "b1", soon)
	done.Status = weft.StatusCompleted
	h.create(t, done)
	h.create(t, instance("unleased", "w"))

	later := Epoch.Add(time.Minute)
	ids := []string{"mine2", "other-node", "missing", "old-boot", "expired", "done", "unleased", "mine1"}
	renewed, err := h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: ids, Expiry: later})
	must(t, "RenewLeases", err)
	wantStrings(t, "renewed", renewed, []string{"mine2", "mine1"})
	for _, tt := range []struct {
		id   string
		want time.Time
	}{
		{"mine1", later}, {"mine2", later}, {"other-node", soon}, {"old-boot", soon}, {"expired", Epoch}, {"done", soon},
	} {
		got := h.get(t, tt.id)
		wantTime(t, tt.id+" expiry", got.Lease.Expiry, tt.want)
		if got.Rev != 1 {
			t.Errorf("%s: Rev = %d after renewal, want 1 (renewal is not a revision)", tt.id, got.Rev)
		}
		wantTime(t, tt.id+" UpdatedAt", got.UpdatedAt, Epoch)
	}
	renewed, err = h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", Expiry: later})
	must(t, "RenewLeases of none", err)
	wantStrings(t, "renewed none", renewed, nil)
}

func testExpiredLeases(t *testing.T, h *harness) {
	h.create(t, leased("e2", "n1", "b", Epoch.Add(2*time.Second)))
	h.create(t, leased("e1", "n1", "b", Epoch.Add(time.Second)))
	h.create(t, leased("e3", "n2", "b", Epoch.Add(3*time.Second)))
	h.create(t, leased("live", "n2", "b", Epoch.Add(time.Hour)))
	pending := leased("pending", "n3", "b", Epoch.Add(4*time.Second))
	pending.Status = weft.StatusPending
	h.create(t, pending)
	failed := leased("failed", "n1", "b", Epoch)
	failed.Status = weft.StatusFailed
	h.create(t, failed)
	h.create(t, instance("unleased", "w"))

	expired := func(now time.Time, limit int) []string {
		t.Helper()
		ids, err := h.s.ExpiredLeases(ctx(t), now, limit)
		must(t, "ExpiredLeases", err)
		return ids
	}
	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []string
	}{
		{"none yet", Epoch, 10, nil},
		{"expiry equals now", Epoch.Add(time.Second), 10, []string{"e1"}},
		{"earliest first", Epoch.Add(time.Minute), 10, []string{"e1", "e2", "e3", "pending"}},
		{"limit", Epoch.Add(time.Minute), 2, []string{"e1", "e2"}},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, expired(tt.now, tt.limit), tt.want)
	}

	// Recovery takes e1 over with a Commit; releasing e2 (zero lease) and
	// completing e3 take them off the list too.
	e1 := h.get(t, "e1")
	e1.Lease = weft.Lease{Node: "n9", Boot: "b9", Expiry: Epoch.Add(time.Hour)}
	h.commit(t, store.Commit{Instance: e1, Fence: 100})
	e2 := h.get(t, "e2")
	e2.Lease = weft.Lease{}
	e2.Status = weft.StatusSuspended
	h.commit(t, store.Commit{Instance: e2})
	e3 := h.get(t, "e3")
	e3.Status = weft.StatusCompleted
	h.commit(t, store.Commit{Instance: e3})
	wantStrings(t, "after takeover", expired(Epoch.Add(time.Minute), 10), []string{"pending"})
	wantStrings(t, "taken-over lease expires", expired(Epoch.Add(2*time.Hour), 10), []string{"pending", "e1", "live"})
}

// testLeaseRenewalSurvivesOwnerCommit: the owner's commit of an instance it
// read before a renewal keeps the renewed (later) expiry; a takeover by
// another node replaces the lease.
func testLeaseRenewalSurvivesOwnerCommit(t *testing.T, h *harness) {
	in := h.create(t, leased("i", "n1", "b1", Epoch.Add(10*time.Second)))
	renewed, err := h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"i"}, Expiry: Epoch.Add(time.Minute)})
	must(t, "RenewLeases", err)
	wantStrings(t, "renewed", renewed, []string{"i"})
	in.Vars = json.RawMessage(`{"step": 2}`)
	h.commit(t, store.Commit{Instance: in}) // Rev 1: renewal did not bump it
	wantTime(t, "expiry after owner commit", h.get(t, "i").Lease.Expiry, Epoch.Add(time.Minute))

	in = h.get(t, "i")
	in.Lease.Expiry = Epoch.Add(2 * time.Minute)
	h.commit(t, store.Commit{Instance: in})
	wantTime(t, "owner extends by commit", h.get(t, "i").Lease.Expiry, Epoch.Add(2*time.Minute))

	in = h.get(t, "i")
	in.Lease = weft.Lease{Node: "n2", Boot: "b2", Expiry: Epoch.Add(30 * time.Second)}
	h.commit(t, store.Commit{Instance: in})
	got := h.get(t, "i").Lease
	if got.Node != "n2" || got.Boot != "b2" || !got.Expiry.Equal(Epoch.Add(30*time.Second)) {
		t.Errorf("lease after takeover = %+v", got)
	}
}

func testListInstances(t *testing.T, h *harness) {
	// Created one second apart, in this order.
	specs := []struct {
		id, wf string
		status weft.Status
	}{
		{"z1", "orders", weft.StatusRunning},
		{"a2", "billing", weft.StatusCompleted},
		{"m3", "orders", weft.StatusCompleted},
		{"b4", "orders", weft.StatusRunning},
		{"y5", "billing", weft.StatusRunning},
		{"c6", "orders", weft.StatusFailed},
	}
	for _, sp := range specs {
		in := instance(sp.id, sp.wf)
		in.Status = sp.status
		in.State = []byte("state of " + sp.id)
		h.create(t, in)
		h.clock.Advance(time.Second)
	}
	list := func(f weft.InstanceFilter) []string {
		t.Helper()
		var ids []string
		for page := 0; ; page++ {
			items, next, err := h.s.ListInstances(ctx(t), f)
			must(t, "ListInstances", err)
			if page > 10 {
				t.Fatal("pagination does not end")
			}
			if f.Limit > 0 && len(items) > f.Limit {
				t.Errorf("page of %d items, limit %d", len(items), f.Limit)
			}
			for _, in := range items {
				ids = append(ids, in.ID)
				if len(in.State) != 0 {
					t.Errorf("ListInstances returned the State of %s", in.ID)
				}
				if (f.Workflow != "" && in.Workflow != f.Workflow) || (f.Status != "" && in.Status != f.Status) {
					t.Errorf("filter %+v listed %+v", f, in)
				}
			}
			if next == "" {
				return ids
			}
			if len(items) == 0 {
				t.Fatal("empty page with a next cursor")
			}
			f.Cursor = next
		}
	}
	tests := []struct {
		name string
		f    weft.InstanceFilter
		want []string
	}{
		{"all", weft.InstanceFilter{}, []string{"z1", "a2", "m3", "b4", "y5", "c6"}},
		{"all, pages of 2", weft.InstanceFilter{Limit: 2}, []string{"z1", "a2", "m3", "b4", "y5", "c6"}},
		{"all, pages of 1", weft.InstanceFilter{Limit: 1}, []string{"z1", "a2", "m3", "b4", "y5", "c6"}},
		{"workflow", weft.InstanceFilter{Workflow: "orders", Limit: 3}, []string{"z1", "m3", "b4", "c6"}},
		{"status", weft.InstanceFilter{Status: weft.StatusRunning, Limit: 2}, []string{"z1", "b4", "y5"}},
		{"both", weft.InstanceFilter{Workflow: "orders", Status: weft.StatusCompleted, Limit: 1}, []string{"m3"}},
		{"no match", weft.InstanceFilter{Workflow: "nope"}, nil},
		{"workflow is not a prefix", weft.InstanceFilter{Workflow: "order"}, nil},
		{"newest first", weft.InstanceFilter{NewestFirst: true}, []string{"c6", "y5", "b4", "m3", "a2", "z1"}},
		{"newest first, pages of 1", weft.InstanceFilter{NewestFirst: true, Limit: 1}, []string{"c6", "y5", "b4", "m3", "a2", "z1"}},
		{"newest first, workflow", weft.InstanceFilter{NewestFirst: true, Workflow: "orders", Limit: 3}, []string{"c6", "b4", "m3", "z1"}},
		{"newest first, both", weft.InstanceFilter{NewestFirst: true, Workflow: "orders", Status: weft.StatusRunning, Limit: 1}, []string{"b4", "z1"}},
		// a2 was created at Epoch+1s, y5 at Epoch+4s: From is inclusive,
		// Before exclusive.
		{"from", weft.InstanceFilter{CreatedFrom: Epoch.Add(time.Second), Limit: 2}, []string{"a2", "m3", "b4", "y5", "c6"}},
		{"before", weft.InstanceFilter{CreatedBefore: Epoch.Add(4 * time.Second), Limit: 2}, []string{"z1", "a2", "m3", "b4"}},
		{"range", weft.InstanceFilter{CreatedFrom: Epoch.Add(time.Second), CreatedBefore: Epoch.Add(4 * time.Second), Limit: 2}, []string{"a2", "m3", "b4"}},
		{"range, newest first", weft.InstanceFilter{CreatedFrom: Epoch.Add(time.Second), CreatedBefore: Epoch.Add(4 * time.Second), NewestFirst: true, Limit: 2}, []string{"b4", "m3", "a2"}},
		{"range, status", weft.InstanceFilter{Status: weft.StatusCompleted, CreatedFrom: Epoch.Add(2 * time.Second), NewestFirst: true}, []string{"m3"}},
		{"a nanosecond's range", weft.InstanceFilter{CreatedFrom: Epoch.Add(2 * time.Second), CreatedBefore: Epoch.Add(2*time.Second + 1)}, []string{"m3"}},
		{"empty range", weft.InstanceFilter{CreatedFrom: Epoch.Add(2*time.Second + 1), CreatedBefore: Epoch.Add(3 * time.Second)}, nil},
		{"range after all", weft.InstanceFilter{CreatedFrom: Epoch.Add(time.Hour), NewestFirst: true}, nil},
	}
	for _, tt := range tests {
		wantStrings(t, tt.name, list(tt.f), tt.want)
	}

	counts := func(wf string) map[weft.Status]int {
		t.Helper()
		c, err := h.s.CountInstances(ctx(t), wf)
		must(t, "CountInstances", err)
		return c
	}
	if got, want := counts(""), map[weft.Status]int{weft.StatusRunning: 3, weft.StatusCompleted: 2, weft.StatusFailed: 1}; !maps.Equal(got, want) {
		t.Errorf("CountInstances() = %v, want %v", got, want)
	}
	if got, want := counts("billing"), map[weft.Status]int{weft.StatusRunning: 1, weft.StatusCompleted: 1}; !maps.Equal(got, want) {
		t.Errorf("CountInstances(billing) = %v, want %v", got, want)
	}
	if got := counts("order"); len(got) != 0 {
		t.Errorf("CountInstances(order) = %v, want none (a workflow name is not a prefix)", got)
	}

	// A status change moves the instance between status lists.
	b4 := h.get(t, "b4")
	b4.Status = weft.StatusCompleted
	h.commit(t, store.Commit{Instance: b4})
	wantStrings(t, "running after change", list(weft.InstanceFilter{Status: weft.StatusRunning}), []string{"z1", "y5"})
	wantStrings(t, "completed orders after change", list(weft.InstanceFilter{Workflow: "orders", Status: weft.StatusCompleted}), []string{"m3", "b4"})
	wantStrings(t, "all after change", list(weft.InstanceFilter{}), []string{"z1", "a2", "m3", "b4", "y5", "c6"})
	if got, want := counts("orders"), map[weft.Status]int{weft.StatusRunning: 1, weft.StatusCompleted: 2, weft.StatusFailed: 1}; !maps.Equal(got, want) {
		t.Errorf("CountInstances(orders) after change = %v, want %v", got, want)
	}

	for _, f := range []weft.InstanceFilter{{Cursor: "!!not a cursor!!"}, {Status: "sleeping"}} {
		_, _, err := h.s.ListInstances(ctx(t), f)
		wantErr(t, fmt.Sprintf("ListInstances(%+v)", f), err, weft.ErrInvalid)
	}
}

// testListInstancesSameTime: instances created at the same time, in
// different statuses, list in the byte order of their ids, which differs
// from a dictionary's (upper case before "_" before lower case), pages of
// one included.
func testListInstancesSameTime(t *testing.T, h *harness) {
	sts := []weft.Status{weft.StatusCompleted, weft.StatusRunning, weft.StatusPending, weft.StatusFailed}
	for i, id := range []string{"a0", "_c", "Z9", "B1"} {
		in := instance(id, "w")
		in.Status = sts[i]
		h.create(t, in)
	}
	want := []string{"B1", "Z9", "_c", "a0"}
	for _, f := range []weft.InstanceFilter{{}, {Limit: 1}, {Workflow: "w", Limit: 1}, {NewestFirst: true}, {NewestFirst: true, Limit: 1}} {
		var ids []string
		for {
			items, next, err := h.s.ListInstances(ctx(t), f)
			must(t, "ListInstances", err)
			for _, in := range items {
				ids = append(ids, in.ID)
			}
			if next == "" || len(ids) > len(want) {
				break
			}
			f.Cursor = next
		}
		w := slices.Clone(want)
		if f.NewestFirst {
			slices.Reverse(w)
		}
		wantStrings(t, fmt.Sprintf("ListInstances(%+v)", f), ids, w)
	}
}

// testListInstancesStableCursor: instances created while a listing is
// paged through come after it; none is listed twice or skipped.
func testListInstancesStableCursor(t *testing.T, h *harness) {
	for i := range 4 {
		h.create(t, instance(fmt.Sprintf("i%d", i), "w"))
		h.clock.Advance(time.Millisecond)
	}
	items, next, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{Limit: 2})
	must(t, "ListInstances", err)
	if len(items) != 2 || next == "" {
		t.Fatalf("first page: %d items, next %q", len(items), next)
	}
	h.create(t, instance("i4", "w"))
	var ids []string
	for _, in := range items {
		ids = append(ids, in.ID)
	}
	for next != "" {
		items, next, err = h.s.ListInstances(ctx(t), weft.InstanceFilter{Limit: 2, Cursor: next})
		must(t, "ListInstances", err)
		for _, in := range items {
			ids = append(ids, in.ID)
		}
	}
	wantStrings(t, "ids", ids, []string{"i0", "i1", "i2", "i3", "i4"})
}

func testDeleteInstance(t *testing.T, h *harness) {
	_, err := h.s.PutPlugin(ctx(t), weft.PluginRecord{Name: "p", Version: "h"})
	must(t, "PutPlugin", err)
	in := leased("d", "n1", "b1", Epoch)
	in.Plugins = map[string]string{"p": "h"}
	in.State = []byte("s")
	h.commit(t, store.Commit{
		Instance: in, Fence: 3,
		History:   []weft.HistoryEntry{{Type: "created"}},
		Bookmarks: []weft.Bookmark{{StepPath: "w", Event: "e", Key: "k"}},
		Timers:    []weft.Timer{{ID: "t", Due: Epoch}},
	})
	h.create(t, instance("keep", "w"))

	err = h.s.DeleteInstance(ctx(t), "d", 3)
	must(t, "DeleteInstance", err)
	_, err = h.s.GetInstance(ctx(t), "d")
	wantErr(t, "GetInstance after delete", err, weft.ErrNotFound)
	_, err = h.s.History(ctx(t), "d", 0, 0)
	wantErr(t, "History after delete", err, weft.ErrNotFound)
	bms, err := h.s.FindBookmarks(ctx(t), "e", "k")
	must(t, "FindBookmarks", err)
	if len(bms) != 0 {
		t.Errorf("bookmarks left: %+v", bms)
	}
	ts, err := h.s.DueTimers(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "DueTimers", err)
	if len(ts) != 0 {
		t.Errorf("timers left: %+v", ts)
	}
	ids, err := h.s.ExpiredLeases(ctx(t), Epoch.Add(time.Hour), 10)
	must(t, "ExpiredLeases", err)
	wantStrings(t, "expired leases", ids, nil)
	items, _, err := h.s.ListInstances(ctx(t), weft.InstanceFilter{})
	must(t, "ListInstances", err)
	if len(items) != 1 || items[0].ID != "keep" {
		t.Errorf("listed %+v, want keep only", items)
	}
	must(t, "DeletePlugin (no longer pinned)", h.s.DeletePlugin(ctx(t), "p"))
	wantErr(t, "DeleteInstance again", h.s.DeleteInstance(ctx(t), "d", 3), weft.ErrNotFound)

	// The id can be used again, from scratch.
	rev := h.commit(t, store.Commit{Instance: instance("d", "w"), History: []weft.HistoryEntry{{Type: "again"}}})
	if rev != 1 {
		t.Errorf("rev of the re-created instance = %d, want 1", rev)
	}
	evs, err := h.s.History(ctx(t), "d", 0, 0)
	must(t, "History", err)
	if len(evs) != 1 || evs[0].Seq != 1 || evs[0].Type != "again" {
		t.Errorf("history of the re-created instance = %+v", evs)
	}
}

// testCommitHammer: P goroutines × N increments of one counter, each a
// read and a compare-and-set retried on ErrConflict. Exactly one commit
// wins each revision, and no increment is lost.
func testCommitHammer(t *testing.T, h *harness) {
	const P, N = 8, 25
	h.create(t, instance("c", "w"))
	var mu sync.Mutex
	won := map[uint64]int{}
	var wg sync.WaitGroup
	for g := range P {
		wg.Go(func() {
			for range N {
				for {
					in, err := h.s.GetInstance(ctx(t), "c")
					if err != nil {
						t.Errorf("GetInstance: %v", err)
						return
					}
					var n int
					if len(in.Vars) > 0 {
						_ = json.Unmarshal(in.Vars, &n)
					}
					in.Vars = json.RawMessage(fmt.Sprint(n + 1))
					rev, err := h.s.Commit(ctx(t), store.Commit{
						Instance: in,
						History:  []weft.HistoryEntry{{Type: "inc", Node: fmt.Sprint(g), Data: in.Vars}},
					})
					if errors.Is(err, weft.ErrConflict) {
						continue
					}
					if err != nil {
						t.Errorf("Commit: %v", err)
						return
					}
					mu.Lock()
					won[rev]++
					mu.Unlock()
					break
				}
			}
		})
	}
	wg.Wait()
	in := h.get(t, "c")
	if !jsonEq(in.Vars, json.RawMessage(fmt.Sprint(P*N))) || in.Rev != P*N+1 {
		t.Errorf("counter = %s at rev %d, want %d at rev %d", in.Vars, in.Rev, P*N, P*N+1)
	}
	for rev := uint64(2); rev <= P*N+1; rev++ {
		if won[rev] != 1 {
			t.Errorf("revision %d won %d times, want once", rev, won[rev])
		}
	}
	evs, err := h.s.History(ctx(t), "c", 0, weft.MaxListLimit)
	must(t, "History", err)
	if len(evs) != P*N {
		t.Fatalf("%d events, want %d", len(evs), P*N)
	}
	for i, e := range evs {
		if !jsonEq(e.Data, json.RawMessage(fmt.Sprint(i+1))) {
			t.Fatalf("event %d carries %s, want %d: history out of order", i+1, e.Data, i+1)
		}
	}
}

// testHeartbeats: RenewLeases stores the latest heartbeat per attempt for
// the instances the node still holds, in the same transaction; a terminal
// commit and DeleteInstance remove them.
func testHeartbeats(t *testing.T, h *harness) {
	soon := Epoch.Add(10 * time.Second)
	h.create(t, leased("mine", "n1", "b1", soon))
	h.create(t, leased("theirs", "n2", "b1", soon))
	h.create(t, leased("lapsed", "n1", "b1", Epoch))
	beat := func(id, token string, attempt int, details string) store.Heartbeat {
		return store.Heartbeat{InstanceID: id, Token: token, Attempt: attempt, Details: json.RawMessage(details), Time: Epoch}
	}
	beats := func(id string) []store.Heartbeat {
		t.Helper()
		got, err := h.s.Heartbeats(ctx(t), id)
		must(t, "Heartbeats "+id, err)
		return got
	}
	wantBeats := func(id string, want ...store.Heartbeat) {
		t.Helper()
		got := beats(id)
		if len(got) != len(want) {
			t.Fatalf("Heartbeats(%s) = %d records, want %d: %+v", id, len(got), len(want), got)
		}
		for i := range want {
			if got[i].InstanceID != want[i].InstanceID || got[i].Token != want[i].Token || got[i].Attempt != want[i].Attempt {
				t.Errorf("Heartbeats(%s)[%d] = %s/%s #%d, want %s/%s #%d", id, i, got[i].InstanceID, got[i].Token, got[i].Attempt, want[i].InstanceID, want[i].Token, want[i].Attempt)
			}
			wantJSON(t, "Heartbeats("+id+") details", got[i].Details, want[i].Details)
			wantTime(t, "Heartbeats("+id+") time", got[i].Time, want[i].Time)
		}
	}
	wantBeats("mine")

	// Heartbeats alone (no ids) are stored; only for leases still held.
	renewed, err := h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", Heartbeats: []store.Heartbeat{
		beat("mine", "a2", 1, `{"done": 3}`),
		beat("mine", "a1", 1, `{"done": 1}`),
		beat("theirs", "a1", 1, `{"done": 9}`),
		beat("lapsed", "a1", 1, `{"done": 9}`),
		beat("missing", "a1", 1, `{"done": 9}`),
	}})
	must(t, "RenewLeases with heartbeats", err)
	wantStrings(t, "renewed", renewed, nil)
	wantBeats("mine", beat("mine", "a1", 1, `{"done": 1}`), beat("mine", "a2", 1, `{"done": 3}`))
	wantBeats("theirs")
	wantBeats("lapsed")
	if _, err := h.s.Heartbeats(ctx(t), "missing"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("Heartbeats(missing) = %v, want ErrNotFound", err)
	}

	// A later heartbeat of the same attempt replaces the earlier one, in
	// the transaction that renews the lease; renewal is still no revision.
	renewed, err = h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"mine"}, Expiry: Epoch.Add(time.Minute),
		Heartbeats: []store.Heartbeat{beat("mine", "a1", 1, `{"done": 2}`)}})
	must(t, "RenewLeases", err)
	wantStrings(t, "renewed", renewed, []string{"mine"})
	wantBeats("mine", beat("mine", "a1", 1, `{"done": 2}`), beat("mine", "a2", 1, `{"done": 3}`))
	if got := h.get(t, "mine"); got.Rev != 1 {
		t.Errorf("Rev = %d after a renewal with heartbeats, want 1", got.Rev)
	}

	// Malformed heartbeats are refused, naming the field; nothing is written.
	for _, bad := range []store.Heartbeat{
		beat("", "a1", 1, `{}`),
		beat("mine", "", 1, `{}`),
		beat("mine", "a3", 1, `{nope`),
	} {
		_, err := h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", Heartbeats: []store.Heartbeat{beat("mine", "a9", 1, `{}`), bad}})
		if !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("RenewLeases with heartbeat %+v = %v, want ErrInvalid", bad, err)
		}
	}
	wantBeats("mine", beat("mine", "a1", 1, `{"done": 2}`), beat("mine", "a2", 1, `{"done": 3}`))

	// A non-terminal commit keeps them; a terminal one removes them.
	in := h.get(t, "mine")
	in.Vars = json.RawMessage(`{"x": 1}`)
	in.Rev = h.commit(t, store.Commit{Instance: in})
	wantBeats("mine", beat("mine", "a1", 1, `{"done": 2}`), beat("mine", "a2", 1, `{"done": 3}`))
	in.Status, in.Lease = weft.StatusCompleted, weft.Lease{}
	h.commit(t, store.Commit{Instance: in})
	wantBeats("mine")

	// DeleteInstance removes them with the instance.
	h.create(t, leased("gone", "n1", "b1", soon))
	_, err = h.s.RenewLeases(ctx(t), store.LeaseRenewal{Node: "n1", Boot: "b1", Heartbeats: []store.Heartbeat{beat("gone", "a1", 1, `{}`)}})
	must(t, "RenewLeases", err)
	wantBeats("gone", beat("gone", "a1", 1, `{}`))
	must(t, "DeleteInstance", h.s.DeleteInstance(ctx(t), "gone", 0))
	h.create(t, leased("gone", "n1", "b1", soon))
	wantBeats("gone")
}

// testLongHistory: a commit with more events than an implementation may
// write in one command keeps them all, in order, numbered on.
func testLongHistory(t *testing.T, h *harness) {
	in := instance("long", "w")
	evs := make([]weft.HistoryEntry, 1234)
	for i := range evs {
		evs[i] = weft.HistoryEntry{Type: weft.HistoryType(fmt.Sprintf("e%d", i))}
	}
	h.commit(t, store.Commit{Instance: in, History: evs})
	in.Rev = 1
	h.commit(t, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "last"}}})
	var got []weft.HistoryEntry
	for after := uint64(0); ; {
		page, err := h.s.History(ctx(t), "long", after, 1000)
		must(t, "History", err)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1].Seq
	}
	if len(got) != len(evs)+1 {
		t.Fatalf("%d events, want %d", len(got), len(evs)+1)
	}
	for i, e := range got {
		want := weft.HistoryType("last")
		if i < len(evs) {
			want = evs[i].Type
		}
		if e.Seq != uint64(i+1) || e.Type != want {
			t.Fatalf("event %d = seq %d %q, want seq %d %q", i, e.Seq, e.Type, i+1, want)
		}
	}
}

// testCommitAt: a commit's At is stored as UpdatedAt, and as CreatedAt by a
// create that gives none, whatever the store's clock says; a commit
// without one uses the store's clock.
func testCommitAt(t *testing.T, h *harness) {
	at := Epoch.Add(-3 * time.Hour) // not the store's clock
	in := instance("a", "w")
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: in, At: at}); err != nil {
		t.Fatal(err)
	}
	got := h.get(t, "a")
	if !got.CreatedAt.Equal(at) || !got.UpdatedAt.Equal(at) {
		t.Errorf("create with At %s: CreatedAt %s, UpdatedAt %s, want both At", at, got.CreatedAt, got.UpdatedAt)
	}
	later := at.Add(time.Minute)
	got.Status = weft.StatusRunning
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: got, At: later}); err != nil {
		t.Fatal(err)
	}
	got = h.get(t, "a")
	if !got.CreatedAt.Equal(at) || !got.UpdatedAt.Equal(later) {
		t.Errorf("update with At %s: CreatedAt %s, UpdatedAt %s, want %s and At", later, got.CreatedAt, got.UpdatedAt, at)
	}
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: got}); err != nil {
		t.Fatal(err)
	}
	if got = h.get(t, "a"); !got.UpdatedAt.Equal(h.clock.Now()) {
		t.Errorf("update without At: UpdatedAt %s, want the store's clock %s", got.UpdatedAt, h.clock.Now())
	}
	imported := at.Add(-time.Hour)
	in = instance("b", "w")
	in.CreatedAt = imported
	if _, err := h.s.Commit(ctx(t), store.Commit{Instance: in, At: at}); err != nil {
		t.Fatal(err)
	}
	if got = h.get(t, "b"); !got.CreatedAt.Equal(imported) || !got.UpdatedAt.Equal(at) {
		t.Errorf("create giving CreatedAt %s with At %s: CreatedAt %s, UpdatedAt %s", imported, at, got.CreatedAt, got.UpdatedAt)
	}
}
