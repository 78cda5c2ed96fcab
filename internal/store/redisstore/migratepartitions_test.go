package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// The move of a whole store into partitions (migratepartitions.go): a
// whole store filled through its API reads the same through the
// partitioned store after the move, keeps no instance key under its tag,
// and moves once however the move is interrupted or repeated.

// moveParts is P of the tests' partitioned stores.
const moveParts = 4

// openWholeAt opens a whole store under prefix on c with clock now.
func openWholeAt(t *testing.T, c redis.UniversalClient, prefix string, now func() time.Time) *Store {
	t.Helper()
	s, err := Open(t.Context(), Config{Client: c, Prefix: prefix, Now: now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open whole store %q: %v", prefix, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// movedConfig is the configuration of the partitioned store the tests
// move a whole store under prefix into.
func movedConfig(c redis.UniversalClient, prefix string, now func() time.Time) PartitionedConfig {
	return PartitionedConfig{
		Config:     Config{Client: c, Prefix: prefix, Now: now, Logger: slog.New(slog.DiscardHandler)},
		Partitions: moveParts, RelayInterval: time.Hour,
	}
}

// openMoved opens the partitioned store of a whole store under prefix,
// which moves it.
func openMoved(t *testing.T, c redis.UniversalClient, prefix string, now func() time.Time) *Partitioned {
	t.Helper()
	r, err := OpenPartitioned(t.Context(), movedConfig(c, prefix, now))
	if err != nil {
		t.Fatalf("open %q partitioned: %v", prefix, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// openUnmoved opens the stores of the partitioned store under prefix as
// OpenPartitioned does, up to the move, which it leaves undone: the
// catalog's Open marks a whole store as moving. The router has no loop
// (it must not be closed).
func openUnmoved(t *testing.T, c redis.UniversalClient, prefix string, now func() time.Time) *Partitioned {
	t.Helper()
	ctx := t.Context()
	cfg := movedConfig(c, prefix, now)
	cfg.Config = cfg.Config.WithDefaults()
	catCfg := cfg.Config
	catCfg.role = roleCatalog
	cat, err := Open(ctx, catCfg)
	if err != nil {
		t.Fatalf("open the catalog of %q: %v", prefix, err)
	}
	if err := checkPartitions(ctx, cat, moveParts); err != nil {
		t.Fatal(err)
	}
	tags, err := partition.Tags(prefix, moveParts)
	if err != nil {
		t.Fatal(err)
	}
	r := &Partitioned{cat: cat, parts: make([]*Store, moveParts), log: cfg.Logger, now: cfg.Now, cfg: cfg}
	for i, tag := range tags {
		pc := cfg.Config
		pc.tag, pc.role = tag, rolePartition
		if r.parts[i], err = Open(ctx, pc); err != nil {
			t.Fatalf("open partition %d of %q: %v", i, prefix, err)
		}
	}
	return r
}

// moveFixture is what fillWhole wrote: the instances' ids, and the
// clock's time when it was done.
type moveFixture struct {
	ids []string
	now time.Time
	// tapesMid is a time between the first and the last tape recorded.
	tapesMid time.Time
}

// fillWhole fills a whole store through its API: instances of every
// status and two workflows, with state, history, bookmarks, timers (due
// and not), leases (live, expired, on finished instances), heartbeats,
// search attributes, plugin pins, delete-after times (past and future),
// recorded attempts,
// inbox messages (delivered, sent by a commit, partly consumed), queued
// and delivered stimuli, a definition, a plugin and grants.
func fillWhole(t *testing.T, s *Store, clock *fakeClock, n int) moveFixture {
	t.Helper()
	ctx := t.Context()
	start := clock.Now()
	if _, _, err := s.PutDefinition(ctx, "w", "h1", []byte(`{"steps":[]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutGrants(ctx, "pay", []byte(`{"net":["example.com"]}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterSearchAttributes(ctx, "w", map[string]weft.SearchType{
		"region": weft.SearchString, "amount": weft.SearchNumber, "tags": weft.SearchKeywords,
	}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sq1", "sq2", "sq3"} {
		if _, err := s.EnqueueStimulus(ctx, weft.Stimulus{ID: id, Name: "sig", Key: "k2", Payload: json.RawMessage(`{"q":1}`), ExpiresAt: start.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	statuses := weft.Statuses()
	var fx moveFixture
	var leased []string
	for i := range n {
		st := statuses[i%len(statuses)]
		id := fmt.Sprintf("%s-%03d", st, i)
		fx.ids = append(fx.ids, id)
		in := &weft.Instance{
			ID: id, Workflow: []string{"w", "v"}[i%2], Version: 1, Status: st,
			Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), State: []byte("state of " + id),
			Search: weft.SearchAttributes{
				"region": {Type: weft.SearchString, String: []string{"eu", "us", "ap"}[i%3]},
				"amount": {Type: weft.SearchNumber, Number: float64(i%11) - 3.5},
			},
		}
		if i%4 == 0 {
			in.Search["tags"] = weft.SearchValue{Type: weft.SearchKeywords, Keywords: []string{"red", fmt.Sprintf("t%d", i%3)}}
		}
		c := store.Commit{Instance: in, History: []weft.HistoryEntry{
			{Type: weft.HistoryInstanceCreated, Time: clock.Now()},
			{Type: weft.HistoryInstanceStarted, Time: clock.Now(), Data: json.RawMessage(`{"a":1}`)},
		}}
		if !st.Terminal() {
			in.Plugins = map[string]string{"pay": "v1"}
			c.Bookmarks = []weft.Bookmark{{Event: "sig", Key: fmt.Sprintf("k%d", i%3), StepPath: "s1", Token: "tok" + id}}
			c.Timers = []weft.Timer{{ID: "t1", Due: start.Add(time.Duration(i%9-4) * time.Minute), Kind: "sleep", Data: json.RawMessage(`{"t":1}`)}}
		} else if i%3 != 0 {
			in.DeleteAfter = start.Add(time.Duration(i%5-2) * time.Hour)
		}
		if st == weft.StatusRunning || i%5 == 0 {
			expiry := start.Add(time.Hour)
			if i%2 == 0 {
				expiry = start.Add(-time.Minute) // expired
			}
			in.Lease = weft.Lease{Node: "n1", Boot: "b1", Expiry: expiry}
			if !st.Terminal() && i%2 == 1 {
				leased = append(leased, id)
			}
		}
		if _, err := s.Commit(ctx, c); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		clock.Advance(time.Second)
	}
	// Recorded attempts of every third instance, two each, a millisecond
	// apart.
	fx.tapesMid = clock.Now().Add(time.Duration(len(fx.ids)) * time.Millisecond / 3)
	for i, id := range fx.ids {
		if i%3 != 1 {
			continue
		}
		for a := 1; a <= 2; a++ {
			rec := weft.TapeRecord{Key: weft.TapeKey{InstanceID: id, StepPath: "steps[0]", Exec: "e1", Attempt: a}, Outcome: weft.TapeFailed, Plugin: "pay",
				Workflow: []string{"w", "v"}[i%2]}
			if err := s.PutTape(ctx, rec, []byte(fmt.Sprintf("tape\x00%s/%d", id, a))); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Millisecond)
		}
	}
	// Heartbeats of the live leases.
	var beats []store.Heartbeat
	for _, id := range leased {
		beats = append(beats, store.Heartbeat{InstanceID: id, Token: "a1", Attempt: 1, Details: json.RawMessage(`{"p":50}`), Time: clock.Now()})
	}
	if len(leased) > 0 {
		if _, err := s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: leased, Expiry: start.Add(2 * time.Hour), Heartbeats: beats}); err != nil {
			t.Fatal(err)
		}
	}
	// Inbox messages: a delivered stimulus's, plain ones, a commit's send;
	// then one inbox partly consumed, so that its wait restarts.
	targets := fx.ids[:min(len(fx.ids), 12)]
	var msgs []weft.Message
	for j, id := range targets {
		msgs = append(msgs, weft.Message{InstanceID: id, ID: fmt.Sprintf("m%d", j), Kind: weft.MessageStimulus, Payload: json.RawMessage(`{"x":1}`)})
	}
	if _, err := s.Deliver(ctx, &weft.Stimulus{ID: "sd1", Name: "sig", Key: "k1", ExpiresAt: start.Add(time.Hour), Outcome: json.RawMessage(`{"ok":true}`)}, msgs[:3]); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if _, err := s.Deliver(ctx, nil, msgs[3:]); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	sender, err := s.GetInstance(ctx, targets[0])
	if err != nil {
		t.Fatal(err)
	}
	sender.Vars = json.RawMessage(`{"sent":true}`)
	if _, err := s.Commit(ctx, store.Commit{
		Instance: sender, Fence: 3, Consumed: []string{"m0"},
		History: []weft.HistoryEntry{{Type: weft.HistoryEventHeld, Time: clock.Now()}},
		Send:    []weft.Message{{InstanceID: targets[1], ID: "child-end", Kind: weft.MessageChild, Payload: json.RawMessage(`{"y":2}`)}},
	}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	// A queued stimulus delivered by a commit.
	taker, err := s.GetInstance(ctx, targets[2])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, store.Commit{Instance: taker, DeliveredStimulus: "sq3", DeliveredOutcome: json.RawMessage(`{"took":1}`)}); err != nil {
		t.Fatal(err)
	}
	fx.now = clock.Now()
	return fx
}

// moveSnapshot reads everything fillWhole wrote through s's API, as JSON
// by call, for comparing a whole store with the partitioned store it
// moved into. Listings are read page by page (cursors differ between the
// two: only the items are kept).
func moveSnapshot(t *testing.T, s store.Store, fx moveFixture) map[string]string {
	t.Helper()
	ctx := t.Context()
	out := map[string]string{}
	put := func(what string, v any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out[what] = string(raw)
	}
	for _, id := range fx.ids {
		in, err := s.GetInstance(ctx, id)
		if err == nil {
			out["state "+id] = string(in.State)
		}
		put("instance "+id, in, err)
		h, err := s.History(ctx, id, 0, 100)
		put("history "+id, h, err)
		b, err := s.Bookmarks(ctx, id)
		put("bookmarks "+id, b, err)
		tm, err := s.Timers(ctx, id)
		put("timers "+id, tm, err)
		m, err := s.Inbox(ctx, id)
		put("inbox "+id, m, err)
		hb, err := s.Heartbeats(ctx, id)
		put("heartbeats "+id, hb, err)
		tapes, err := s.ListTapes(ctx, id)
		put("tapes "+id, tapes, err)
		for _, rec := range tapes {
			_, data, err := s.GetTape(ctx, rec.Key)
			put("tape "+rec.Key.String(), string(data), err)
		}
	}
	for name, q := range map[string]weft.TapeQuery{
		"all":         {Plugin: "pay", Limit: weft.MaxShadowAttempts},
		"newest 5":    {Plugin: "pay", Limit: 5},
		"workflow v":  {Plugin: "pay", Workflow: "v", Limit: weft.MaxShadowAttempts},
		"recent of w": {Plugin: "pay", Workflow: "w", Since: fx.tapesMid, Limit: 7},
	} {
		found, err := s.FindTapes(ctx, q)
		put("find tapes "+name, found, err)
	}
	sts, err := s.InstanceStatuses(ctx, append(slices.Clone(fx.ids), "nope"))
	put("statuses", sts, err)
	keywordRed := weft.SearchValue{Type: weft.SearchString, String: "red"}
	lo, hi := weft.SearchValue{Type: weft.SearchNumber, Number: -2}, weft.SearchValue{Type: weft.SearchNumber, Number: 4}
	filters := map[string]weft.InstanceFilter{
		"all":          {},
		"newest":       {NewestFirst: true},
		"running":      {Status: weft.StatusRunning},
		"workflow v":   {Workflow: "v"},
		"v completed":  {Workflow: "v", Status: weft.StatusCompleted},
		"created":      {CreatedFrom: fx.now.Add(-time.Duration(len(fx.ids)) * time.Second / 2)},
		"match":        {Match: func(in *weft.Instance) bool { return strings.HasSuffix(in.ID, "3") }},
		"region eu":    {Search: &weft.SearchRange{Name: "region", Type: weft.SearchString, In: []weft.SearchValue{{Type: weft.SearchString, String: "eu"}}}},
		"amount range": {Search: &weft.SearchRange{Name: "amount", Type: weft.SearchNumber, Lo: &lo, Hi: &hi, LoInc: true}, Workflow: "w"},
		"tag red":      {Search: &weft.SearchRange{Name: "tags", Type: weft.SearchKeywords, In: []weft.SearchValue{keywordRed}}, NewestFirst: true},
	}
	for name, f := range filters {
		f.Limit = 7
		var all []weft.Instance
		for page := 0; ; page++ {
			items, next, err := s.ListInstances(ctx, f)
			if err != nil {
				t.Fatalf("list %s, page %d: %v", name, page, err)
			}
			all = append(all, items...)
			if next == "" {
				break
			}
			if page > len(fx.ids) {
				t.Fatalf("list %s: more pages than instances", name)
			}
			f.Cursor = next
		}
		put("list "+name, all, nil)
	}
	counts, err := s.CountInstances(ctx, "")
	put("count", counts, err)
	counts, err = s.CountInstances(ctx, "v")
	put("count v", counts, err)
	for _, k := range []string{"k0", "k1", "k2"} {
		b, err := s.FindBookmarks(ctx, "sig", k)
		put("find sig "+k, b, err)
	}
	due, err := s.DueTimers(ctx, fx.now, 1000)
	put("due", due, err)
	due, err = s.DueTimers(ctx, fx.now, 3)
	put("due 3", due, err)
	ids, err := s.ExpiredLeases(ctx, fx.now, 1000)
	put("expired leases", ids, err)
	ids, err = s.ExpiredLeases(ctx, fx.now.Add(3*time.Hour), 1000)
	put("expired leases later", ids, err)
	ids, err = s.WaitingInboxes(ctx, fx.now.Add(time.Hour), 1000)
	put("waiting inboxes", ids, err)
	ids, err = s.ExpiredInstances(ctx, fx.now.Add(3*time.Hour), 1000)
	put("expired instances", ids, err)
	ids, err = s.ExpiredInstances(ctx, fx.now, 1000)
	put("expired instances now", ids, err)
	pend, err := s.PendingStimuli(ctx, "sig", "k2")
	put("pending sig k2", pend, err)
	for _, id := range []string{"sq1", "sq3", "sd1"} {
		st, err := s.GetStimulus(ctx, id)
		put("stimulus "+id, st, err)
	}
	defs, _, err := s.ListDefinitions(ctx, "", 100)
	put("definitions", defs, err)
	def, err := s.GetDefinition(ctx, "w", 0)
	put("definition w", def, err)
	plugins, _, err := s.ListPlugins(ctx, "", 100)
	put("plugins", plugins, err)
	plugin, err := s.GetPlugin(ctx, "pay")
	put("plugin pay", plugin, err)
	grants, err := s.GetGrants(ctx, "pay")
	put("grants pay", grants, err)
	attrs, err := s.SearchAttributes(ctx)
	put("search attributes", attrs, err)
	return out
}

// wantFilled fails when an answer of a snapshot that the comparison
// relies on is empty: the fixture must give every listing and sweep
// something to move.
func wantFilled(t *testing.T, snap map[string]string) {
	t.Helper()
	need := []string{"expired leases", "expired leases later", "waiting inboxes", "due", "expired instances",
		"expired instances now", "pending sig k2", "find sig k1", "list region eu", "list amount range",
		"list tag red", "list match", "list created", "find tapes all", "find tapes newest 5", "find tapes workflow v",
		"find tapes recent of w"}
	for _, k := range need {
		if v := snap[k]; v == "" || v == "null" || v == "[]" {
			t.Errorf("the fixture answers %s with nothing", k)
		}
	}
	for _, kind := range []string{"inbox ", "heartbeats ", "timers ", "bookmarks "} {
		found := false
		for k, v := range snap {
			found = found || (strings.HasPrefix(k, kind) && v != "null" && v != "[]")
		}
		if !found {
			t.Errorf("the fixture has no instance with %s", kind)
		}
	}
}

// wantSameSnapshot fails for every call whose answer differs.
func wantSameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(before)) {
		if before[k] != after[k] {
			t.Errorf("%s: %s differs:\nbefore %s\nafter  %s", what, k, before[k], after[k])
		}
	}
	if len(after) != len(before) {
		t.Errorf("%s: %d answers, want %d", what, len(after), len(before))
	}
}

// scanTag returns the keys under tag on c (every master of a cluster),
// without the tag.
func scanTag(t *testing.T, c redis.UniversalClient, tag string) []string {
	t.Helper()
	ctx := t.Context()
	var mu sync.Mutex
	var keys []string
	scan := func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, tag+"*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, strings.TrimPrefix(iter.Val(), tag))
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		t.Fatalf("cannot scan a %T", c)
	}
	if err != nil {
		t.Fatalf("SCAN %s*: %v", tag, err)
	}
	slices.Sort(keys)
	return keys
}

// instanceKey reports whether a key name (without its tag) is an
// instance's or one of the indexes a commit maintains, which a catalog
// holds none of.
func instanceKey(k string) bool {
	for _, p := range []string{"i:", "h:", "b:", "t:", "m:", "e:", "r:", "a:", "rp:", "ix:", "u:", "mv:"} {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return slices.Contains([]string{"l", "lz", "mw", "bk", "due", "rx", "moving"}, k)
}

// checkMoved checks what a finished move leaves: the catalog's schema,
// no instance key under the catalog's tag, no staging key nor marker in
// the partitions.
func checkMoved(t *testing.T, c redis.UniversalClient, prefix string) {
	t.Helper()
	tag := "{" + prefix + "}"
	if v, err := c.Get(t.Context(), tag+"schema").Result(); err != nil || v != partitionedSchema {
		t.Errorf("schema %q, %v after the move; want %q", v, err, partitionedSchema)
	}
	for _, k := range scanTag(t, c, tag) {
		if instanceKey(k) {
			t.Errorf("key %s%s left under the catalog's tag", tag, k)
		}
	}
	tags, err := partition.Tags(prefix, moveParts)
	if err != nil {
		t.Fatal(err)
	}
	for _, pt := range tags {
		for _, k := range scanTag(t, c, pt) {
			if strings.HasPrefix(k, "mv:") || k == "moving" {
				t.Errorf("key %s%s left in a partition after the move", pt, k)
			}
		}
	}
}

// checkMovedStoreWorks writes through the moved store: an update of a
// moved instance, and a message to an inbox that holds moved ones, whose
// Seq must come after theirs.
func checkMovedStoreWorks(t *testing.T, r *Partitioned, fx moveFixture) {
	t.Helper()
	ctx := t.Context()
	id := fx.ids[1]
	in, err := r.GetInstance(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	old, err := r.Inbox(ctx, id)
	if err != nil || len(old) == 0 {
		t.Fatalf("inbox of %s = %v, %v; want moved messages", id, old, err)
	}
	in.Vars = json.RawMessage(`{"after":"move"}`)
	if _, err := r.Commit(ctx, store.Commit{Instance: in, Fence: in.Fence, History: []weft.HistoryEntry{{Type: weft.HistoryEventHeld}}}); err != nil {
		t.Fatalf("commit %s after the move: %v", id, err)
	}
	if _, err := r.Deliver(ctx, nil, []weft.Message{{InstanceID: id, ID: "after-move", Kind: weft.MessageStimulus}}); err != nil {
		t.Fatal(err)
	}
	msgs, err := r.Inbox(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var newest weft.Message
	for _, m := range msgs {
		if m.ID == "after-move" {
			newest = m
		}
	}
	for _, m := range old {
		if m.Seq >= newest.Seq {
			t.Errorf("message %s moved with Seq %d, not before the new message's %d", m.ID, m.Seq, newest.Seq)
		}
	}
	h, err := r.History(ctx, id, 0, 100)
	if err != nil || len(h) == 0 || h[len(h)-1].Seq != uint64(len(h)) {
		t.Errorf("history of %s after a commit on the moved store: %v, %v", id, h, err)
	}
	if err := r.DeletePlugin(ctx, "pay"); !errors.Is(err, weft.ErrInUse) {
		t.Errorf("DeletePlugin of a plugin moved instances pin: %v, want ErrInUse", err)
	}
}

// moveAndCheck fills a whole store under prefix on c, moves it into
// partitions with OpenPartitioned, and checks every answer, the keys left,
// a second OpenPartitioned, and writes on the moved store.
func moveAndCheck(t *testing.T, c redis.UniversalClient, prefix string, n int) {
	clock := newFakeClock()
	whole := openWholeAt(t, c, prefix, clock.Now)
	fx := fillWhole(t, whole, clock, n)
	before := moveSnapshot(t, whole, fx)
	wantFilled(t, before)
	whole.Close() //nolint:errcheck // Store.Close never fails

	r := openMoved(t, c, prefix, clock.Now)
	wantSameSnapshot(t, "after the move", before, moveSnapshot(t, r, fx))
	checkMoved(t, c, prefix)
	// Every partition holds some of the instances.
	held := make([]int, moveParts)
	for _, id := range fx.ids {
		held[partition.Of(id, moveParts)]++
	}
	for i, p := range r.parts {
		if got := p.c.ZCard(t.Context(), p.p+"ix:s:"+string(weft.StatusRunning)).Val() + p.c.ZCard(t.Context(), p.p+"ix:s:"+string(weft.StatusCompleted)).Val(); held[i] > 0 && got == 0 {
			t.Errorf("partition %d indexes no running or completed instance", i)
		}
	}

	// A second OpenPartitioned finds nothing to move.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = openMoved(t, c, prefix, clock.Now)
	wantSameSnapshot(t, "after a second open", before, moveSnapshot(t, r, fx))
	checkMoved(t, c, prefix)

	// A whole Open refuses the moved store.
	if _, err := Open(t.Context(), Config{Client: c, Prefix: prefix}); err == nil || !strings.Contains(err.Error(), "divided into partitions") {
		t.Errorf("whole Open of the moved store: %v, want a refusal", err)
	}
	checkMovedStoreWorks(t, r, fx)
}

// TestMigrateWholeIntoPartitions: everything a whole store answers, it
// answers the same once moved into four partitions of one redis-server.
func TestMigrateWholeIntoPartitions(t *testing.T) {
	t.Parallel()
	moveAndCheck(t, redistest.Start(t).Client(t), "move:", 120)
}

// TestMigrateWholeIntoPartitionsOnCluster: the move on a Redis Cluster of
// three masters, which refuses any command over two slots: the whole
// store's keys are all on one master, the partitions' on every master.
func TestMigrateWholeIntoPartitionsOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 0)
	moveAndCheck(t, cluster.Client(t), "movec:", 120)
}

// TestMigrateInterrupted: a move interrupted after one page, and one
// interrupted between the adopt step and the drop (the partitions hold
// instances the whole store still holds), are finished by the next
// OpenPartitioned; meanwhile a whole Open refuses the store.
func TestMigrateInterrupted(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := t.Context()
	const prefix = "int:"
	clock := newFakeClock()
	whole := openWholeAt(t, c, prefix, clock.Now)
	fx := fillWhole(t, whole, clock, 60)
	before := moveSnapshot(t, whole, fx)
	whole.Close() //nolint:errcheck // Store.Close never fails

	r := openUnmoved(t, c, prefix, clock.Now)
	if v := c.Get(ctx, "{"+prefix+"}schema").Val(); v != movingSchema {
		t.Fatalf("schema %q once opened as a catalog, want %q", v, movingSchema)
	}
	if err := r.beginMove(ctx); err != nil {
		t.Fatal(err)
	}
	// One page of the running instances, moved whole.
	last, moved, ended, err := r.movePage(ctx, weft.StatusRunning, "-", 3)
	if err != nil || moved != 3 || ended || last == "" {
		t.Fatalf("movePage = %q, %d, %v, %v; want a page of 3 moved", last, moved, ended, err)
	}
	// A page of the completed instances, read, staged and adopted but not
	// dropped from the whole store: a node died before the last step.
	items, err := r.readMovePage(ctx, weft.StatusCompleted, "-", 4)
	if err != nil || len(items) != 4 {
		t.Fatalf("readMovePage = %d items, %v", len(items), err)
	}
	groups := map[int][]moveItem{}
	for _, it := range items {
		i := partition.Of(it.id, moveParts)
		groups[i] = append(groups[i], it)
	}
	if err := r.stageMoves(ctx, groups); err != nil {
		t.Fatal(err)
	}
	for i, g := range groups {
		a := r.parts[i].args(len(g))
		for _, it := range g {
			a = a.add(it.id, it.lease, it.kinds)
		}
		if res, err := r.parts[i].write(ctx, moveAdoptScript, a).StringSlice(); err != nil || slices.ContainsFunc(res, func(s string) bool { return s != "moved" }) {
			t.Fatalf("adopt in partition %d = %v, %v", i, res, err)
		}
	}
	// And the keys of a page of pending instances staged, not adopted.
	items, err = r.readMovePage(ctx, weft.StatusPending, "-", 2)
	if err != nil {
		t.Fatal(err)
	}
	groups = map[int][]moveItem{}
	for _, it := range items {
		groups[partition.Of(it.id, moveParts)] = append(groups[partition.Of(it.id, moveParts)], it)
	}
	if err := r.stageMoves(ctx, groups); err != nil {
		t.Fatal(err)
	}

	if _, err := Open(ctx, Config{Client: c, Prefix: prefix}); err == nil || !strings.Contains(err.Error(), "being moved into partitions") {
		t.Errorf("whole Open during the move: %v, want a refusal", err)
	}

	moved2 := openMoved(t, c, prefix, clock.Now)
	wantSameSnapshot(t, "after an interrupted move", before, moveSnapshot(t, moved2, fx))
	checkMoved(t, c, prefix)

	// An adopt step that comes after the move ended (a node stalled in
	// the middle of one) takes nothing, and deletes what it staged.
	p := moved2.part(fx.ids[0])
	stale := p.p + "mv:h:" + fx.ids[0]
	if err := c.RPush(ctx, stale, "stale").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := p.write(ctx, moveAdoptScript, p.args(1, fx.ids[0], "", "h")).StringSlice()
	if err != nil || fmt.Sprint(res) != "[closed]" {
		t.Errorf("adopt after the move = %v, %v; want [closed]", res, err)
	}
	if n := c.Exists(ctx, stale).Val(); n != 0 {
		t.Errorf("a staged key outlived an adopt step after the move")
	}
}

// TestMigrateConcurrentOpens: nodes that open the whole store partitioned
// at once move each instance once, and every one of them opens the
// partitioned store.
func TestMigrateConcurrentOpens(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	const prefix = "conc:"
	clock := newFakeClock()
	whole := openWholeAt(t, c, prefix, clock.Now)
	fx := fillWhole(t, whole, clock, 3*movePage+10) // several pages
	before := moveSnapshot(t, whole, fx)
	whole.Close() //nolint:errcheck // Store.Close never fails

	const nodes = 3
	opened := make([]*Partitioned, nodes)
	errs := make([]error, nodes)
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() { opened[i], errs[i] = OpenPartitioned(t.Context(), movedConfig(c, prefix, clock.Now)) })
	}
	wg.Wait()
	for i, r := range opened {
		if errs[i] != nil {
			t.Errorf("node %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { _ = r.Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	wantSameSnapshot(t, "after concurrent opens", before, moveSnapshot(t, opened[0], fx))
	checkMoved(t, c, prefix)
}

// TestMigrateSchema2IntoPartitions: a whole store of schema 2 is migrated
// to 3 and then moved.
func TestMigrateSchema2IntoPartitions(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	const prefix = "old2:"
	clock := newFakeClock()
	whole := openWholeAt(t, c, prefix, clock.Now)
	fx := fillWhole(t, whole, clock, 30)
	before := moveSnapshot(t, whole, fx)
	whole.Close() //nolint:errcheck // Store.Close never fails
	// Schema 2's indexes of all instances and of each workflow's.
	p := "{" + prefix + "}"
	ctx := t.Context()
	for _, st := range weft.Statuses() {
		for _, m := range c.ZRange(ctx, p+"ix:s:"+string(st), 0, -1).Val() {
			wf := c.HGet(ctx, p+"i:"+m[16:], "wf").Val()
			c.ZAdd(ctx, p+"ix:all", redis.Z{Member: m})
			c.ZAdd(ctx, p+"ix:w:"+wf, redis.Z{Member: m})
		}
	}
	if err := c.Set(ctx, p+"schema", "2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := openMoved(t, c, prefix, clock.Now)
	wantSameSnapshot(t, "after moving a schema-2 store", before, moveSnapshot(t, r, fx))
	checkMoved(t, c, prefix)
}

// TestMigrateTiming logs how long moving 10,000 small instances (a
// little history, no timers) into four partitions of one redis-server
// takes.
func TestMigrateTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 10,000 instances")
	}
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := t.Context()
	const prefix = "time:"
	clock := newFakeClock()
	whole := openWholeAt(t, c, prefix, clock.Now)
	const n = 10000
	for i := range n {
		in := &weft.Instance{ID: fmt.Sprintf("i%05d", i), Workflow: "w", Version: 1, Status: weft.Statuses()[i%7], Input: json.RawMessage(`{"n":1}`)}
		if _, err := whole.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: weft.HistoryInstanceCreated}}}); err != nil {
			t.Fatal(err)
		}
	}
	whole.Close() //nolint:errcheck // Store.Close never fails
	start := time.Now()
	r := openMoved(t, c, prefix, clock.Now)
	took := time.Since(start)
	t.Logf("moved %d instances into %d partitions in %s", n, moveParts, took)
	counts, err := r.CountInstances(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, k := range counts {
		total += k
	}
	if total != n {
		t.Errorf("%d instances after the move, want %d", total, n)
	}
	checkMoved(t, c, prefix)
}
