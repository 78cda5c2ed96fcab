package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// tapeScoreScript runs the prelude's tapeScore on ARGV[2].
var tapeScoreScript = script(`return tapeScore(take())`)

// TestTapeScore: the scripts' score of a recording time, read from the
// JSON of a summary, is its Unix milliseconds rounded down, as FindTapes
// bounds a query's Since, for every form Go writes a UTC time in (no
// fraction, short fractions, nanoseconds), across leap days and before
// 1970; another form has none.
func TestTapeScore(t *testing.T) {
	t.Parallel()
	s := openKeyed(t, redistest.Start(t).Client(t), "score:", time.Now())
	for _, at := range []time.Time{
		time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2030, 1, 2, 3, 4, 5, 100_000_000, time.UTC),
		time.Date(2030, 1, 2, 3, 4, 5, 120_000_000, time.UTC),
		time.Date(2030, 1, 2, 3, 4, 5, 123_456_789, time.UTC),
		time.Date(2030, 1, 2, 3, 4, 5, 999_999_999, time.UTC),
		time.Date(2028, 2, 29, 23, 59, 59, 1_000_000, time.UTC),
		time.Date(2100, 3, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 12, 31, 12, 0, 0, 500, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC),
		time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
	} {
		text, err := at.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.run(t.Context(), tapeScoreScript, s.args(string(text))).Text()
		if want := fmt.Sprint(floorMilli(at)); err != nil || got != want {
			t.Errorf("tapeScore(%s) = %q, %v; want %s", text, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "30-01-02T03:04:05Z"} {
		if got, err := s.run(t.Context(), tapeScoreScript, s.args(bad)).Result(); err == nil {
			t.Errorf("tapeScore(%q) = %v, want none", bad, got)
		}
	}
}

// TestFindTapesPages: FindTapes reads a plugin's index in pages, more
// entries recorded in one millisecond than a page holds among them, and
// finds what the order of all the tapes says for every limit, workflow
// and time; deleting the instances leaves the plugins' indexes empty.
func TestFindTapesPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := newFakeClock()
	s := openWholeAt(t, redistest.Start(t).Client(t), "pages:", clock.Now)
	ids := []string{"p-b", "p-a", "p-c"}
	for _, id := range ids {
		in := &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: weft.StatusRunning}
		if _, err := s.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
	}
	var all []weft.TapeRecord
	steps := 0
	put := func(n int, plugin string, step time.Duration) {
		for i := range n {
			steps++
			rec := weft.TapeRecord{
				Key:     weft.TapeKey{InstanceID: ids[i%3], StepPath: fmt.Sprintf("steps[%d]", steps), Exec: "e1", Attempt: 1 + i%2},
				Outcome: weft.TapeCompleted, Plugin: plugin, Workflow: []string{"w", "v"}[i%2],
			}
			if err := s.PutTape(ctx, rec, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			rec.RecordedAt, rec.Size = clock.Now(), 1
			if plugin == "kit" {
				all = append(all, rec)
			}
			clock.Advance(step)
		}
	}
	// 250 at one time, then 200 ten to a millisecond, and others'.
	put(250, "kit", 0)
	put(7, "other", 0)
	clock.Advance(time.Millisecond)
	put(200, "kit", 100*time.Microsecond)
	slices.SortFunc(all, compareFound)

	keys := func(recs []weft.TapeRecord) []string {
		out := make([]string, len(recs))
		for i, r := range recs {
			out[i] = r.Key.String()
		}
		return out
	}
	check := func(q weft.TapeQuery) {
		t.Helper()
		var want []weft.TapeRecord
		for _, r := range all {
			if (q.Workflow == "" || r.Workflow == q.Workflow) && !r.RecordedAt.Before(q.Since) && len(want) < q.Limit {
				want = append(want, r)
			}
		}
		got, err := s.FindTapes(ctx, q)
		if err != nil {
			t.Fatalf("FindTapes(%+v): %v", q, err)
		}
		g, w := keys(got), keys(want)
		if len(g) != len(w) {
			t.Errorf("FindTapes(%+v): %d tapes, want %d", q, len(g), len(w))
		}
		for i := range min(len(g), len(w)) {
			if g[i] != w[i] {
				t.Errorf("FindTapes(%+v): tape %d is %s, want %s", q, i, g[i], w[i])
				break
			}
		}
	}
	for _, limit := range []int{1, 199, 200, 201, 205, 260, 449, 450, weft.MaxShadowAttempts} {
		check(weft.TapeQuery{Plugin: "kit", Limit: limit})
	}
	check(weft.TapeQuery{Plugin: "kit", Workflow: "v", Limit: 150})
	check(weft.TapeQuery{Plugin: "kit", Workflow: "w", Limit: weft.MaxShadowAttempts})
	check(weft.TapeQuery{Plugin: "kit", Since: all[95].RecordedAt, Limit: weft.MaxShadowAttempts})
	check(weft.TapeQuery{Plugin: "kit", Since: all[95].RecordedAt.Add(time.Nanosecond), Workflow: "w", Limit: 30})
	check(weft.TapeQuery{Plugin: "kit", Since: all[len(all)-1].RecordedAt, Limit: 220})

	for _, id := range ids {
		if err := s.DeleteInstance(ctx, id, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, plugin := range []string{"kit", "other"} {
		if n, err := s.c.ZCard(ctx, s.p+"rp:"+plugin).Result(); err != nil || n != 0 {
			t.Errorf("the index of %s holds %d entries after its instances were deleted (%v)", plugin, n, err)
		}
	}
}
