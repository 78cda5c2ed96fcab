package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/doctest"
	"github.com/weftworks/weft/internal/schedule"
)

// scheduleJSON is what the tests read of a schedule answered with -o json.
type scheduleJSON struct {
	ID        string      `json:"id"`
	Workflow  string      `json:"workflow"`
	Paused    bool        `json:"paused"`
	Note      string      `json:"note"`
	NextFires []time.Time `json:"next_fires"`
	Running   []runJSON   `json:"running"`
	Recent    []runJSON   `json:"recent"`
	Triggers  int         `json:"triggers"`
	Revision  uint64      `json:"revision"`
	Events    []struct {
		Seq  uint64          `json:"seq"`
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	} `json:"events"`
}

type runJSON struct {
	InstanceID string `json:"instance_id"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
}

// runs returns the schedule's runs of a kind, running or ended.
func (s scheduleJSON) runs(kind string) []runJSON {
	var out []runJSON
	for _, r := range append(append([]runJSON(nil), s.Running...), s.Recent...) {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// pollSchedule runs weft schedule show -o json until done says the
// schedule is as wanted, and fails the test after 30 seconds.
func (ts *testServer) pollSchedule(t *testing.T, id, what string, done func(scheduleJSON) bool) scheduleJSON {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var s scheduleJSON
		ts.okJSON(t, &s, "schedule", "show", id)
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s: no %s after 30s: %+v", id, what, s)
		}
		time.Sleep(50 * time.Millisecond) // polling, with a deadline
	}
}

// TestScheduleCommands runs every weft schedule command against one host:
// create, a second create refused, update, ls, show with the next fires
// in the schedule's zone, pause and unpause with notes, trigger, backfill,
// rm, and the errors of an unknown id and of a refused document.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	flow := writeFile(t, t.TempDir(), "tick.yaml", "name: tick\nsteps: [{id: s, set: {at: '${ input.at }'}}]\noutput: '${ vars.at }'\n")
	ts.ok(t, "workflow", "put", flow)

	t.Run("create, update, ls, show, rm", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := writeFile(t, dir, "standup-ny.yaml", `# standup-ny
id: standup-ny
workflow: tick
input: { at: "${ schedule.time }" }
spec:
  cron: "0 9 * * MON-FRI"
  time_zone: America/New_York
`)
		if out := ts.ok(t, "schedule", "create", file); !strings.HasPrefix(out, "schedule standup-ny: created (revision 1), workflow tick, next fire ") {
			t.Errorf("create: %q", out)
		}

		// A second create is refused before anything is sent, as a conflict.
		r := ts.weft(t, nil, "schedule", "create", file)
		if r.code != exitFailed || !strings.Contains(r.stderr, "schedule create: schedule standup-ny exists (revision ") || r.stdout != "" {
			t.Errorf("create again: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}

		// update: the same document changes nothing; another replaces it.
		if out := ts.ok(t, "schedule", "update", file); !strings.HasPrefix(out, "schedule standup-ny: unchanged (revision ") {
			t.Errorf("update with the same document: %q", out)
		}
		writeFile(t, dir, "standup-ny.yaml", `{"id": "standup-ny", "workflow": "tick", "spec": {"cron": "30 9 * * MON-FRI", "time_zone": "America/New_York"}, "policy": {"overlap": "allow_all"}}`)
		var updated scheduleJSON
		ts.okJSON(t, &updated, "schedule", "update", file)
		if updated.ID != "standup-ny" || updated.Revision < 2 || len(updated.NextFires) != 10 {
			t.Errorf("update -o json: %+v", updated)
		}
		// From stdin.
		r = ts.weftIn(t, nil, "id: standup-ny\nworkflow: tick\nspec: {cron: '0 9 * * MON-FRI', time_zone: America/New_York}\n", "schedule", "update", "-")
		if r.code != exitOK || !regexp.MustCompile(`^schedule standup-ny: updated \(revision \d+\), workflow tick, next fire `).MatchString(r.stdout) {
			t.Errorf("update -: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}

		out := ts.ok(t, "schedule", "ls")
		if !regexp.MustCompile(`(?m)^ID +WORKFLOW +PAUSED +NEXT FIRE +LAST RUN +STATUS\n(.*\n)*standup-ny +tick +no +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +- +-$`).MatchString(out) {
			t.Errorf("ls:\n%s", out)
		}
		var page struct {
			Items      []scheduleJSON `json:"items"`
			NextCursor *string        `json:"next_cursor"`
		}
		ts.okJSON(t, &page, "schedule", "ls")
		found := false
		for _, s := range page.Items {
			found = found || s.ID == "standup-ny" && s.Workflow == "tick"
		}
		if !found || page.NextCursor == nil {
			t.Errorf("ls -o json: %+v", page)
		}

		// show: ten fires at 09:00 New York time on weekdays, 13:00 or
		// 14:00 UTC, each in both zones.
		out = ts.ok(t, "schedule", "show", "standup-ny")
		for _, want := range []string{
			"id:        standup-ny (revision ", "workflow:  tick\n", "input:     null\n",
			"spec:      cron \"0 9 * * MON-FRI\"\n           time zone America/New_York\n",
			"policy:    overlap skip, catch-up window 1m0s, pause on failure no, max runs none\n",
			"paused:    no\n", "running:   none\n", "recent:    none\n",
			"next fires:\n  UTC                          America/New_York\n",
			"events:    the last 3\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		fire := regexp.MustCompile(`(?m)^  (Mon|Tue|Wed|Thu|Fri) (\d{4}-\d\d-\d\d) (13|14):00:00 UTC  (Mon|Tue|Wed|Thu|Fri) (\d{4}-\d\d-\d\d) 09:00:00 E[SD]T$`)
		if n := len(fire.FindAllString(out, -1)); n != 10 {
			t.Errorf("show has %d fires at 09:00 New York time, want 10:\n%s", n, out)
		}
		for _, m := range fire.FindAllStringSubmatch(out, -1) {
			if m[1] != m[4] || m[2] != m[5] {
				t.Errorf("a fire is on another day in UTC than in New York: %s", m[0])
			}
		}
		if !regexp.MustCompile(`(?m)^  1 +.* +created +anonymous +-$`).MatchString(out) {
			t.Errorf("show's events lack the creation:\n%s", out)
		}
		var shown scheduleJSON
		ts.okJSON(t, &shown, "schedule", "show", "standup-ny", "--events", "2")
		if len(shown.Events) != 2 || shown.Events[0].Seq != 2 || shown.Events[1].Type != "updated" {
			t.Errorf("show --events 2 -o json: the events are %+v, want the last two", shown.Events)
		}

		var deleted map[string]string
		ts.okJSON(t, &deleted, "schedule", "rm", "standup-ny")
		if deleted["deleted"] != "standup-ny" {
			t.Errorf("rm -o json: %v", deleted)
		}
		if r := ts.weft(t, nil, "schedule", "show", "standup-ny"); r.code != exitNotFound {
			t.Errorf("show after rm: exit %d, %s", r.code, r.stderr)
		}
	})

	t.Run("the README's example", func(t *testing.T) {
		t.Parallel()
		testReadmeScheduleExample(t, ts)
	})

	t.Run("pause and unpause with notes", func(t *testing.T) {
		t.Parallel()
		file := writeFile(t, t.TempDir(), "nightly.yaml", "id: nightly\nworkflow: tick\nspec: {cron: '@daily'}\n")
		ts.ok(t, "schedule", "create", file)
		if out := ts.ok(t, "schedule", "pause", "nightly", "--note", "maintenance until Monday"); out != "schedule nightly: paused; triggers and backfills still run (note: maintenance until Monday)\n" {
			t.Errorf("pause: %q", out)
		}
		out := ts.ok(t, "schedule", "show", "nightly")
		for _, want := range []string{"paused:    yes, note: maintenance until Monday\n", "next fires: none\n", `{"note":"maintenance until Monday"}`} {
			if !strings.Contains(out, want) {
				t.Errorf("show of a paused schedule lacks %q:\n%s", want, out)
			}
		}
		if out := ts.ok(t, "schedule", "ls"); !regexp.MustCompile(`(?m)^nightly +tick +yes +- +- +-$`).MatchString(out) {
			t.Errorf("ls of a paused schedule:\n%s", out)
		}
		var s scheduleJSON
		ts.okJSON(t, &s, "schedule", "unpause", "nightly", "--note", "back")
		if s.Paused || s.Note != "back" || len(s.NextFires) != 10 {
			t.Errorf("unpause -o json: %+v", s)
		}
		if out := ts.ok(t, "schedule", "show", "nightly"); !strings.Contains(out, "paused:    no, note: back\n") || !regexp.MustCompile(`unpaused +anonymous +\{"note":"back"\}`).MatchString(out) {
			t.Errorf("show after unpause:\n%s", out)
		}
	})

	t.Run("trigger", func(t *testing.T) {
		t.Parallel()
		file := writeFile(t, t.TempDir(), "yearly.yaml", "id: yearly\nworkflow: tick\ninput: {at: '${ schedule.time }'}\nspec: {cron: '@yearly'}\n")
		ts.ok(t, "schedule", "create", file)
		if out := ts.ok(t, "schedule", "trigger", "yearly", "--overlap", "allow_all"); !strings.HasPrefix(out, "schedule yearly: triggered; ") {
			t.Errorf("trigger: %q", out)
		}
		// The run appears once the schedules sweep took the trigger; its
		// status there is the one the sweep last saw (up to a minute old).
		s := ts.pollSchedule(t, "yearly", "trigger run", func(s scheduleJSON) bool { return len(s.runs("trigger")) == 1 })
		run := s.runs("trigger")[0]
		if !regexp.MustCompile(`^yearly@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(run.InstanceID) {
			t.Errorf("the trigger's run is %q, want yearly@<UTC second>", run.InstanceID)
		}
		if in := ts.waitStatus(t, run.InstanceID, "completed"); !strings.Contains(string(in.Output), strings.TrimPrefix(run.InstanceID, "yearly@")) {
			t.Errorf("the trigger's run has the output %s, want its nominal time", in.Output)
		}
		out := ts.ok(t, "schedule", "show", "yearly")
		if !regexp.MustCompile(`(?m)^(running|recent):\n  INSTANCE +KIND +STATUS +STARTED.*\n  ` + regexp.QuoteMeta(run.InstanceID) + ` +trigger +\w+ `).MatchString(out) {
			t.Errorf("show lacks the trigger's run:\n%s", out)
		}
		if out := ts.ok(t, "schedule", "ls"); !regexp.MustCompile(`(?m)^yearly +tick +no +\S+ \S+ +\S+ \S+ +\w+$`).MatchString(out) {
			t.Errorf("ls lacks the last run:\n%s", out)
		}
		if r := ts.weft(t, nil, "schedule", "trigger", "yearly", "--overlap", "sometimes"); r.code != exitFailed || !strings.Contains(r.stderr, "overlap") {
			t.Errorf("trigger --overlap sometimes: exit %d\n%s", r.code, r.stderr)
		}
	})

	t.Run("backfill", func(t *testing.T) {
		t.Parallel()
		file := writeFile(t, t.TempDir(), "minutely.yaml", "id: minutely\nworkflow: tick\ninput: {at: '${ schedule.time }'}\nspec: {every: 1m}\n")
		ts.ok(t, "schedule", "create", file)
		// Six minutes, both ends included, well before the schedule's
		// first fire.
		from := time.Now().UTC().Truncate(time.Minute).Add(-10 * time.Minute)
		to := from.Add(5 * time.Minute)
		args := []string{"schedule", "backfill", "minutely", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "--overlap", "allow_all"}
		want := fmt.Sprintf("schedule minutely: backfill of 6 fire(s) from %s to %s; the schedules sweep starts their runs\n", from.Format(time.RFC3339), to.Format(time.RFC3339))
		if out := ts.ok(t, args...); out != want {
			t.Errorf("backfill: %q, want %q", out, want)
		}
		s := ts.pollSchedule(t, "minutely", "six backfill runs", func(s scheduleJSON) bool { return len(s.runs("backfill")) == 6 })
		for _, r := range s.runs("backfill") {
			nominal, err := time.Parse(time.RFC3339, strings.TrimPrefix(r.InstanceID, "minutely@"))
			if err != nil || nominal.Before(from) || nominal.After(to) || nominal.Second() != 0 {
				t.Errorf("backfill run %s is not a minute of the range", r.InstanceID)
			}
		}
		// -o json: the API's answer, the count and the schedule.
		var res struct {
			Fires    int          `json:"fires"`
			Schedule scheduleJSON `json:"schedule"`
		}
		ts.okJSON(t, &res, "schedule", "backfill", "minutely", "--from", from.Format(time.RFC3339), "--to", from.Format(time.RFC3339))
		if res.Fires != 1 || res.Schedule.ID != "minutely" {
			t.Errorf("backfill -o json: %+v", res)
		}
		for _, tt := range []struct {
			args []string
			code int
			want string
		}{
			{[]string{"--from", from.Format(time.RFC3339)}, exitUsage, "--from and --to are both needed"},
			{[]string{"--from", "yesterday", "--to", "1m"}, exitUsage, `--from: "yesterday" is neither an RFC 3339 time`},
			{[]string{"--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339)}, exitFailed, "Unprocessable Entity"},
		} {
			r := ts.weft(t, nil, append([]string{"schedule", "backfill", "minutely"}, tt.args...)...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("backfill %s: exit %d, want %d with %q\n%s", strings.Join(tt.args, " "), r.code, tt.code, tt.want, r.stderr)
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		t.Parallel()
		for _, args := range [][]string{
			{"show", "nope"}, {"pause", "nope"}, {"unpause", "nope"}, {"trigger", "nope"}, {"rm", "nope"},
			{"backfill", "nope", "--from", "2h", "--to", "1h"},
		} {
			r := ts.weft(t, nil, append([]string{"schedule"}, args...)...)
			if r.code != exitNotFound || r.stderr != "weft: Not Found: no schedule \"nope\"\n" {
				t.Errorf("schedule %s: exit %d, stderr %q", strings.Join(args, " "), r.code, r.stderr)
			}
		}
		dir := t.TempDir()
		missing := writeFile(t, dir, "missing.yaml", "id: missing\nworkflow: tick\nspec: {every: 1h}\n")
		if r := ts.weft(t, nil, "schedule", "update", missing); r.code != exitNotFound || !strings.Contains(r.stderr, "schedule update: no schedule missing; weft schedule create "+missing+" creates it") {
			t.Errorf("update of a missing schedule: exit %d, stderr %s", r.code, r.stderr)
		}

		// A refused document: every problem, with its path and line.
		refused := writeFile(t, dir, "refused.yaml", `id: Nightly
workflow: tick
spec:
  cron: ["0 2 * * *", "0 25 * * *"]
  time_zone: Berlin
policy:
  overlap: sometimes
`)
		r := ts.weft(t, nil, "schedule", "create", refused)
		if r.code != exitFailed {
			t.Errorf("create of a refused document: exit %d", r.code)
		}
		for _, want := range []string{
			refused + ":\nweft: Unprocessable Entity: the schedule document has 4 problem(s)\n",
			"  id: \"Nightly\": 1 to 64 characters from a-z, 0-9, '_' and '-', starting with a letter (line 1",
			"  spec.cron[1]: \"0 25 * * *\": end of range (25) above maximum (23): 25 (line 4",
			"  spec.time_zone: \"Berlin\" is not an IANA time zone name (such as Europe/Berlin or America/New_York) (line 5",
			"  policy.overlap: must be one of [skip buffer_one buffer_all cancel_other allow_all], got \"sometimes\" (line 7",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("create of a refused document lacks %q:\n%s", want, r.stderr)
			}
		}
		if r := ts.weft(t, nil, "schedule", "show", "Nightly"); r.code != exitNotFound {
			t.Errorf("a refused document was saved: exit %d", r.code)
		}

		// Usage.
		for _, args := range [][]string{{"create"}, {"show"}, {"show", "a", "b"}, {"show", "a", "--events", "-1"}, {"ls", "-o", "yaml"}} {
			if r := ts.weft(t, nil, append([]string{"schedule"}, args...)...); r.code != exitUsage {
				t.Errorf("schedule %s: exit %d, want %d\n%s", strings.Join(args, " "), r.code, exitUsage, r.stderr)
			}
		}
		if r := ts.weft(t, nil, "schedule", "create", dir+"/absent.yaml"); r.code != exitUsage || !strings.Contains(r.stderr, "absent.yaml") {
			t.Errorf("create of an absent file: exit %d, %s", r.code, r.stderr)
		}
	})
}

// testReadmeScheduleExample creates and triggers the README's example
// schedule, and finds in the README what the commands printed.
func testReadmeScheduleExample(t *testing.T, ts *testServer) {
	section := doctest.Section(t, "README.md", "## The command line")
	start := strings.Index(section, "```yaml\n# standup.yaml\n")
	if start < 0 {
		t.Fatal("the README's command line section has no standup.yaml example")
	}
	example := section[start+len("```yaml\n"):]
	example = example[:strings.Index(example, "```")]
	file := writeFile(t, t.TempDir(), "standup.yaml", example)
	out := ts.ok(t, "schedule", "create", file)
	if !strings.HasPrefix(out, "schedule standup: created (revision 1), workflow hello, next fire ") {
		t.Errorf("create of the README's example: %q", out)
	}
	for _, args := range [][]string{{"trigger", "standup"}} {
		out := ts.ok(t, append([]string{"schedule"}, args...)...)
		if !strings.Contains(section, "\n"+out) {
			t.Errorf("the README does not show what weft schedule %s prints:\n%s", strings.Join(args, " "), out)
		}
	}
	s := ts.pollSchedule(t, "standup", "trigger run", func(s scheduleJSON) bool { return len(s.runs("trigger")) == 1 })
	ts.waitStatus(t, s.runs("trigger")[0].InstanceID, "completed")
}

// TestScheduleDocumentID: the id a document is sent as is its own, or
// the file's name when it has none that is a string (the host then names
// what is wrong).
func TestScheduleDocumentID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ src, file, want string }{
		{"id: nightly\nworkflow: report\n", "x.yaml", "nightly"},
		{`{"workflow": "report", "id": "sync"}`, "x.json", "sync"},
		{"workflow: report\n", "dir/report-schedule.yaml", "report-schedule"},
		{"id: [a, b]\n", "list.yml", "list"},
		{"id: 12\n", "number.yaml", "number"},
		{"id: ''\n", "-", "stdin"},
		{"{not yaml", "broken.yaml", "broken"},
	} {
		if got := scheduleID([]byte(tt.src), tt.file); got != tt.want {
			t.Errorf("scheduleID(%q, %q) = %q, want %q", tt.src, tt.file, got, tt.want)
		}
	}
}

// TestScheduleDefaults: the policy show prints for a document that leaves
// it out is the host's.
func TestScheduleDefaults(t *testing.T) {
	t.Parallel()
	p := schedule.Policy{}.WithDefaults()
	if string(p.Overlap) != defaultOverlap || p.CatchUpWindow.String() != defaultCatchUpWindow {
		t.Errorf("show's defaults are overlap %s and catch-up window %s; the host's %s and %s", defaultOverlap, defaultCatchUpWindow, p.Overlap, p.CatchUpWindow)
	}
}
