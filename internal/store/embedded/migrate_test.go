package embedded_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/storetest"
)

// must fails t with what when err is not nil.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// fill writes a little of everything a store holds, through its API:
// instances with state, history, bookmarks, timers, leases, heartbeats,
// search attributes, inboxes; stimuli queued, delivered and dead;
// definitions, plugins, grants; schedules with events; tapes; batches with
// items; slots with holders and a line; a workflow pause.
func fill(t *testing.T, s store.Store, clock *storetest.Clock) {
	t.Helper()
	ctx := t.Context()
	t0 := clock.Now()
	must(t, "RegisterSearchAttributes", s.RegisterSearchAttributes(ctx, "order", map[string]weft.SearchType{
		"customer": weft.SearchString, "total": weft.SearchNumber, "tags": weft.SearchKeywords}))
	_, err := s.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v1", Size: 10, Activities: []string{"charge"}})
	must(t, "PutPlugin", err)
	_, err = s.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v2", Size: 12, Activities: []string{"charge", "refund"}})
	must(t, "PutPlugin", err)
	_, err = s.PutGrants(ctx, "pay", []byte(`{"net":["api.example.com"]}`), weft.AnyRevision)
	must(t, "PutGrants", err)
	for i := range 3 {
		_, _, err := s.PutDefinition(ctx, "order", fmt.Sprint("h", i), []byte(fmt.Sprintf("name: order\nv: %d", i)))
		must(t, "PutDefinition", err)
	}
	_, _, err = s.PutDefinition(ctx, "mail", "m", []byte("name: mail"))
	must(t, "PutDefinition", err)
	for i := range 12 {
		id := fmt.Sprintf("i%02d", i)
		clock.Advance(time.Second)
		in := &weft.Instance{ID: id, Workflow: []string{"order", "mail"}[i%2], Version: 1, Status: weft.StatusRunning,
			Input: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Vars: json.RawMessage(`{"pad":"` + strings.Repeat("v", 200) + `"}`),
			State: []byte(fmt.Sprint("state of ", id)), Plugins: map[string]string{"pay": "v2"}}
		if i%2 == 0 {
			in.Search = weft.SearchAttributes{
				"customer": {Type: weft.SearchString, String: []string{"acme", "globex"}[i%4/2]},
				"total":    {Type: weft.SearchNumber, Number: float64(i) * 1.5},
				"tags":     {Type: weft.SearchKeywords, Keywords: []string{"a", fmt.Sprint("t", i)}},
			}
		}
		if i%3 == 0 {
			in.Lease = weft.Lease{Node: "n1", Boot: "b1", Expiry: clock.Now().Add(time.Minute)}
		}
		c := store.Commit{Instance: in,
			History:   []weft.HistoryEntry{{Type: "created"}, {Type: "step_started", StepPath: "steps[0]"}},
			Bookmarks: []weft.Bookmark{{StepPath: "wait", Event: "paid", Key: id}},
			Timers:    []weft.Timer{{ID: "t1", Due: t0.Add(time.Duration(i) * time.Hour), Kind: "sleep"}},
			Send:      []weft.Message{{InstanceID: id, ID: "hello", Kind: "stimulus", Payload: json.RawMessage(`{"hi":1}`)}},
		}
		_, err := s.Commit(ctx, c)
		must(t, "Commit "+id, err)
		if i%4 == 1 { // finished, deleted later
			in.Rev, in.Status, in.Lease = 1, weft.StatusCompleted, weft.Lease{}
			in.DeleteAfter = t0.Add(48 * time.Hour)
			_, err := s.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "completed"}}, Consumed: []string{"hello"}})
			must(t, "Commit "+id+" completed", err)
		}
		rec := weft.TapeRecord{Key: weft.TapeKey{InstanceID: id, StepPath: "steps[0]", Exec: "e1", Attempt: 1},
			Outcome: weft.TapeCompleted, Plugin: "pay", PluginVersion: "v2", Activity: "charge", Workflow: in.Workflow}
		must(t, "PutTape", s.PutTape(ctx, rec, bytes.Repeat([]byte{byte(i)}, 100+i)))
	}
	_, err = s.RenewLeases(ctx, store.LeaseRenewal{Node: "n1", Boot: "b1", IDs: []string{"i00", "i03"}, Expiry: clock.Now().Add(time.Hour)})
	must(t, "RenewLeases", err)
	for i := range 5 {
		st := weft.Stimulus{ID: fmt.Sprint("st", i), Name: "paid", Key: "k", Payload: json.RawMessage(`{}`),
			ExpiresAt: clock.Now().Add(time.Duration(i+1) * time.Minute)}
		_, err := s.EnqueueStimulus(ctx, st)
		must(t, "EnqueueStimulus", err)
	}
	_, err = s.Deliver(ctx, &weft.Stimulus{ID: "direct", Name: "paid", ExpiresAt: clock.Now().Add(time.Hour)},
		[]weft.Message{{InstanceID: "i02", ID: "direct", Kind: "stimulus"}})
	must(t, "Deliver", err)
	clock.Advance(90 * time.Second)
	_, err = s.ExpireStimuli(ctx, clock.Now(), 10) // st0 dies
	must(t, "ExpireStimuli", err)
	sc, err := s.CreateSchedule(ctx, &weft.Schedule{ID: "nightly", Document: json.RawMessage(`{"workflow":"order"}`),
		State: json.RawMessage(`{"n":0}`), Wake: clock.Now().Add(time.Hour)},
		[]weft.ScheduleEvent{{Type: weft.ScheduleCreated, Actor: "alice"}})
	must(t, "CreateSchedule", err)
	sc.State = json.RawMessage(`{"n":1}`)
	_, err = s.UpdateSchedule(ctx, sc, []weft.ScheduleEvent{{Type: weft.ScheduleSkipped, Actor: "scheduler"}})
	must(t, "UpdateSchedule", err)
	b, err := s.CreateBatch(ctx, &weft.Batch{ID: "b1", Document: json.RawMessage(`{"op":"cancel"}`),
		State: json.RawMessage(`{}`), Actor: "alice", Wake: clock.Now()}, []string{"i00", "i02", "i04"})
	must(t, "CreateBatch", err)
	_, err = s.ApplyBatchItems(ctx, b, []weft.BatchChange{{InstanceID: "i02", Outcome: weft.BatchDone, Reason: "ok"}})
	must(t, "ApplyBatchItems", err)
	p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
	for _, id := range []string{"i00", "i02", "i04"} {
		_, err := s.UpdateSlots(ctx, "tenant:acme", id, p, clock.Now(), slots.Acquire)
		must(t, "UpdateSlots", err)
	}
	_, err = s.PauseWorkflow(ctx, weft.WorkflowPause{Workflow: "mail", Op: weft.Operation{Actor: "bob", Reason: "outage"}})
	must(t, "PauseWorkflow", err)
	must(t, "DeleteInstance", s.DeleteInstance(ctx, "i05", 0))
}

// dump reads everything fill wrote back through the store's API, as JSON.
func dump(t *testing.T, s store.Store) string {
	t.Helper()
	ctx := t.Context()
	far := storetest.Epoch.Add(1000 * time.Hour)
	out := map[string]any{}
	get := func(what string, v any, err error) {
		t.Helper()
		must(t, what, err)
		out[what] = v
	}
	items, _, err := s.ListInstances(ctx, weft.InstanceFilter{Limit: weft.MaxListLimit})
	get("ListInstances", items, err)
	for _, in := range items {
		full, err := s.GetInstance(ctx, in.ID)
		get("GetInstance "+in.ID, full, err)
		out["State "+in.ID] = string(full.State)
		h, err := s.History(ctx, in.ID, 0, weft.MaxListLimit)
		get("History "+in.ID, h, err)
		bms, err := s.Bookmarks(ctx, in.ID)
		get("Bookmarks "+in.ID, bms, err)
		ts, err := s.Timers(ctx, in.ID)
		get("Timers "+in.ID, ts, err)
		msgs, err := s.Inbox(ctx, in.ID)
		get("Inbox "+in.ID, msgs, err)
		beats, err := s.Heartbeats(ctx, in.ID)
		get("Heartbeats "+in.ID, beats, err)
		tapes, err := s.ListTapes(ctx, in.ID)
		get("ListTapes "+in.ID, tapes, err)
		for _, rec := range tapes {
			r, data, err := s.GetTape(ctx, rec.Key)
			get("GetTape "+rec.Key.String(), []any{r, data}, err)
		}
	}
	search, _, err := s.ListInstances(ctx, weft.InstanceFilter{Limit: 100, Search: &weft.SearchRange{
		Name: "customer", Type: weft.SearchString, In: []weft.SearchValue{{Type: weft.SearchString, String: "acme"}}}})
	get("ListInstances search", search, err)
	counts, err := s.CountInstances(ctx, "")
	get("CountInstances", counts, err)
	fb, err := s.FindBookmarks(ctx, "paid", "i02")
	get("FindBookmarks", fb, err)
	due, err := s.DueTimers(ctx, far, 100)
	get("DueTimers", due, err)
	el, err := s.ExpiredLeases(ctx, far, 100)
	get("ExpiredLeases", el, err)
	ei, err := s.ExpiredInstances(ctx, far, 100)
	get("ExpiredInstances", ei, err)
	wi, err := s.WaitingInboxes(ctx, far, 100)
	get("WaitingInboxes", wi, err)
	for _, id := range []string{"st0", "st1", "st4", "direct"} {
		st, err := s.GetStimulus(ctx, id)
		get("GetStimulus "+id, st, err)
	}
	ps, err := s.PendingStimuli(ctx, "paid", "k")
	get("PendingStimuli", ps, err)
	qs, _, err := s.QueuedStimuli(ctx, "", 100)
	get("QueuedStimuli", qs, err)
	dl, _, err := s.DeadLetters(ctx, "", 100)
	get("DeadLetters", dl, err)
	defs, _, err := s.ListDefinitions(ctx, "", 100)
	get("ListDefinitions", defs, err)
	dv, err := s.ListDefinitionVersions(ctx, "order")
	get("ListDefinitionVersions", dv, err)
	plugins, _, err := s.ListPlugins(ctx, "", 100)
	get("ListPlugins", plugins, err)
	grants, _, err := s.ListGrants(ctx, "", 100)
	get("ListGrants", grants, err)
	attrs, err := s.SearchAttributes(ctx)
	get("SearchAttributes", attrs, err)
	scheds, _, err := s.ListSchedules(ctx, "", 100)
	get("ListSchedules", scheds, err)
	evs, err := s.ScheduleEvents(ctx, "nightly", 0, 100)
	get("ScheduleEvents", evs, err)
	ds, err := s.DueSchedules(ctx, far, 100)
	get("DueSchedules", ds, err)
	batches, _, err := s.ListBatches(ctx, "", 100)
	get("ListBatches", batches, err)
	bi, err := s.BatchItems(ctx, "b1", weft.BatchItemFilter{Limit: 100})
	get("BatchItems", bi, err)
	db, err := s.DueBatches(ctx, far, 100)
	get("DueBatches", db, err)
	pauses, err := s.WorkflowPauses(ctx)
	get("WorkflowPauses", pauses, err)
	keys, _, err := s.SlotKeys(ctx, "", "", 100)
	get("SlotKeys", keys, err)
	line, _, err := s.SlotLine(ctx, "tenant:acme", "", 100)
	get("SlotLine", line, err)
	found, err := s.FindTapes(ctx, weft.TapeQuery{Plugin: "pay", Limit: 100})
	get("FindTapes", found, err)
	raw, err := json.MarshalIndent(out, "", " ")
	must(t, "marshal the dump", err)
	return string(raw)
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, "read "+path, err)
	return sha256.Sum256(data)
}

// TestMigrate: a bbolt store migrated to Pebble reads the same through
// every read of the API, numbers on past what it numbered (inbox message
// seqs, the stimulus queue, a slot's line), and the source is unchanged.
func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from, to := filepath.Join(dir, "weft.db"), filepath.Join(dir, "pebble", "weft")
	clock := storetest.NewClock(storetest.Epoch)
	s, err := embedded.Open(from, embedded.Config{Engine: embedded.EngineBolt, Now: clock.Now})
	must(t, "Open", err)
	fill(t, s, clock)
	want := dump(t, s)
	must(t, "Close", s.Close())
	sum := fileSum(t, from)

	must(t, "Migrate", embedded.Migrate(from, to, embedded.Config{}))
	if fileSum(t, from) != sum {
		t.Error("Migrate changed its source")
	}
	if _, err := os.Stat(to + ".migrating"); !os.IsNotExist(err) {
		t.Errorf("Migrate left its work directory: %v", err)
	}
	p, err := embedded.Open(to, embedded.Config{Now: clock.Now, Engine: embedded.EnginePebble})
	must(t, "Open the migrated store", err)
	defer p.Close()
	if got := dump(t, p); got != want {
		t.Errorf("the migrated store reads otherwise:\n%s", diffLines(want, got))
	}

	ctx := t.Context()
	before, err := p.Inbox(ctx, "i02")
	must(t, "Inbox", err)
	_, err = p.Deliver(ctx, nil, []weft.Message{{InstanceID: "i00", ID: "after", Kind: "stimulus"}})
	must(t, "Deliver", err)
	after, err := p.Inbox(ctx, "i00")
	must(t, "Inbox", err)
	top := uint64(0)
	for _, m := range before {
		top = max(top, m.Seq)
	}
	if last := after[len(after)-1]; last.ID != "after" || last.Seq <= top {
		t.Errorf("a message after the migration: %+v, want a seq above %d", last, top)
	}
	_, err = p.EnqueueStimulus(ctx, weft.Stimulus{ID: "st-after", Name: "paid", Key: "k", ExpiresAt: clock.Now().Add(time.Hour)})
	must(t, "EnqueueStimulus", err)
	ps, err := p.PendingStimuli(ctx, "paid", "k")
	must(t, "PendingStimuli", err)
	if len(ps) == 0 || ps[len(ps)-1].ID != "st-after" {
		t.Errorf("the stimulus enqueued after the migration is not last in line: %v", ps)
	}
	_, err = p.UpdateSlots(ctx, "tenant:acme", "i06", slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}, clock.Now(), slots.Acquire)
	must(t, "UpdateSlots", err)
	line, _, err := p.SlotLine(ctx, "tenant:acme", "", 100)
	must(t, "SlotLine", err)
	if len(line) != 3 || line[2].ID != "i06" {
		t.Errorf("the slot's line after the migration: %v, want i06 last of 3", line)
	}
}

// diffLines shows the lines of got that differ from want's, a few.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 20; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n  want %s\n  got  %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}

// TestMigrateRefuses: Migrate refuses a destination that exists, and a
// source that is not a store (naming it, leaving no destination);
// it replaces the work directory a crash left.
func TestMigrateRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	from := filepath.Join(dir, "weft.db")
	s := openBoltFile(t, from, nil)
	_, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "i", Workflow: "w", Status: weft.StatusPending}})
	must(t, "Commit", err)
	must(t, "Close", s.Close())

	t.Run("destination exists", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "weft")
		must(t, "mkdir", os.Mkdir(to, 0o700))
		err := embedded.Migrate(from, to, embedded.Config{})
		if err == nil || !strings.Contains(err.Error(), to) || !strings.Contains(err.Error(), "exists") {
			t.Errorf("Migrate to an existing directory: %v", err)
		}
		if entries, _ := os.ReadDir(to); len(entries) != 0 {
			t.Errorf("Migrate wrote into the existing %s: %v", to, entries)
		}
	})

	t.Run("a crash's work directory", func(t *testing.T) {
		to := filepath.Join(t.TempDir(), "weft")
		must(t, "mkdir", os.MkdirAll(to+".migrating", 0o700))
		must(t, "write", os.WriteFile(filepath.Join(to+".migrating", "000001.log"), []byte("half"), 0o600))
		must(t, "Migrate", embedded.Migrate(from, to, embedded.Config{}))
		if _, err := os.Stat(to + ".migrating"); !os.IsNotExist(err) {
			t.Errorf("the crash's work directory is still there: %v", err)
		}
		p := openE(t, embedded.EnginePebble, to, nil)
		if in, err := p.GetInstance(t.Context(), "i"); err != nil || in.ID != "i" {
			t.Errorf("the migrated store: %+v, %v", in, err)
		}
	})

	other := filepath.Join(dir, "other.db")
	db, err := bolt.Open(other, 0o600, nil)
	must(t, "bolt.Open", err)
	must(t, "CreateBucket", db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err }))
	must(t, "bolt Close", db.Close())
	empty := filepath.Join(dir, "empty.db")
	db, err = bolt.Open(empty, 0o600, nil)
	must(t, "bolt.Open", err)
	must(t, "bolt Close", db.Close())
	newer := filepath.Join(dir, "newer.db")
	db, err = bolt.Open(newer, 0o600, nil)
	must(t, "bolt.Open", err)
	must(t, "meta", db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("schema"), []byte("4"))
	}))
	must(t, "bolt Close", db.Close())
	text := filepath.Join(dir, "text.db")
	must(t, "write", os.WriteFile(text, bytes.Repeat([]byte("not a database\n"), 1000), 0o600))
	whole, err := os.ReadFile(from)
	must(t, "read", err)
	corrupt := filepath.Join(dir, "corrupt.db")
	data := bytes.Clone(whole)
	// Garbage in the leaves (their headers kept: id, flags, count,
	// overflow; flag 0x02 marks a leaf), as in TestCorruptDataPages.
	for page, p := os.Getpagesize(), 2*os.Getpagesize(); p+page <= len(data); p += page {
		if binary.LittleEndian.Uint16(data[p+8:]) == 0x02 {
			for i := p + 16; i < p+page; i++ {
				data[i] = byte(i*7 + 3)
			}
		}
	}
	must(t, "write", os.WriteFile(corrupt, data, 0o600))

	for _, tt := range []struct {
		name, from, want string
	}{
		{"missing", filepath.Join(dir, "missing.db"), "no such file"},
		{"text", text, "invalid"},
		{"another program's", other, "not a weft store"},
		{"an empty bbolt file", empty, "not a weft store"},
		{"newer schema", newer, `schema version "4"`},
		{"corrupt data pages", corrupt, ""},
		{"a directory", dir, "a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			to := filepath.Join(t.TempDir(), "weft")
			err := embedded.Migrate(tt.from, to, embedded.Config{Logger: discardLogger()})
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tt.from) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Migrate(%s): %v, want an error naming it and saying %q", tt.from, err, tt.want)
			}
			for _, p := range []string{to, to + ".migrating"} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("a failed Migrate left %s: %v", p, err)
				}
			}
		})
	}
}

// TestMigrateLockedSource: a store file open in another process (here,
// another Store) is not migrated: Migrate waits OpenTimeout for its lock.
func TestMigrateLockedSource(t *testing.T) {
	t.Parallel()
	from := filepath.Join(t.TempDir(), "weft.db")
	openBoltFile(t, from, nil)
	to := filepath.Join(t.TempDir(), "weft")
	err := embedded.Migrate(from, to, embedded.Config{OpenTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("Migrate of a file in use: %v", err)
	}
}

// TestBackupOfPebbleMigrates: a backup of a Pebble store is a bbolt file
// that CheckFile passes and that Migrate makes the same store of.
func TestBackupOfPebbleMigrates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clock := storetest.NewClock(storetest.Epoch)
	path := filepath.Join(dir, "weft")
	s, err := embedded.Open(path, embedded.Config{Now: clock.Now, Engine: embedded.EnginePebble})
	must(t, "Open", err)
	defer s.Close()
	fill(t, s, clock)
	want := dump(t, s)
	b, err := s.Backup(context.Background())
	must(t, "Backup", err)
	// A write after the backup began is not in it.
	_, err = s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "later", Workflow: "w", Status: weft.StatusPending}})
	must(t, "Commit", err)
	must(t, "Spool", b.Spool())
	copyPath := filepath.Join(dir, "backup.db")
	f, err := os.Create(copyPath)
	must(t, "Create", err)
	n, err := b.WriteTo(f)
	must(t, "WriteTo", err)
	must(t, "Close the copy", f.Close())
	if n != b.Size() {
		t.Errorf("WriteTo wrote %d bytes, Size said %d", n, b.Size())
	}
	must(t, "Close the backup", b.Close())
	if left, _ := filepath.Glob(path + ".backup-*"); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
	must(t, "CheckFile", embedded.CheckFile(copyPath))
	restored := filepath.Join(dir, "restored")
	must(t, "Migrate", embedded.Migrate(copyPath, restored, embedded.Config{}))
	r, err := embedded.Open(restored, embedded.Config{Now: clock.Now, Engine: embedded.EnginePebble})
	must(t, "Open the restored store", err)
	defer r.Close()
	if got := dump(t, r); got != want {
		t.Errorf("the restored store reads otherwise:\n%s", diffLines(want, got))
	}
}
