package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/weft"
)

// The weft schedule commands: schedules (docs/schedules.md) over the API,
// from a document saved as it is in its file to a schedule's record.

// The policy a document leaves out, as the host reads it
// (internal/schedule's defaults, which TestScheduleDefaults keeps in step):
// show prints what a schedule does, not only what its document says.
const (
	defaultOverlap       = "skip"
	defaultCatchUpWindow = "1m0s"
)

// scheduleDocument is what show reads of a schedule's canonical document
// (apiv1.Schedule.Document), without the host's parser: a field this
// version does not know is left out, not refused.
type scheduleDocument struct {
	Input json.RawMessage `json:"input"`
	Spec  struct {
		Cron  []string `json:"cron"`
		Every []struct {
			Every  string `json:"every"`
			Offset string `json:"offset"`
		} `json:"every"`
		TimeZone string `json:"time_zone"`
		Start    string `json:"start"`
		End      string `json:"end"`
		Jitter   string `json:"jitter"`
	} `json:"spec"`
	Policy struct {
		Overlap        string `json:"overlap"`
		CatchUpWindow  string `json:"catch_up_window"`
		PauseOnFailure bool   `json:"pause_on_failure"`
		MaxRuns        int    `json:"max_runs"`
	} `json:"policy"`
}

// scheduleID reads the id of a schedule document (YAML or JSON), so that
// it can be sent to its URL; the server checks the rest, and refuses a
// document whose id is not the URL's. A document without one is sent as
// the file's name without its extension (stdin's as "stdin"), for the
// server to list every problem of it, the missing id among them.
func scheduleID(src []byte, file string) string {
	var doc struct {
		ID any `yaml:"id"`
	}
	if err := yaml.Unmarshal(src, &doc); err == nil {
		if id, ok := doc.ID.(string); ok && id != "" {
			return id
		}
	}
	if file == "-" {
		return "stdin"
	}
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

// scheduleCreate is weft schedule create: it saves a new schedule, and
// refuses one whose id exists.
func (a *app) scheduleCreate(ctx context.Context, args []string) int {
	return a.schedulePut(ctx, args, true)
}

// scheduleUpdate is weft schedule update: it replaces the document of a
// schedule that exists (its state is kept), and refuses a new one.
func (a *app) scheduleUpdate(ctx context.Context, args []string) int {
	return a.schedulePut(ctx, args, false)
}

// schedulePut reads the schedule first, to refuse what the command does
// not do (create over an existing schedule, update of a missing one),
// then PUTs the document as the file has it: the host reads YAML and
// JSON, and its line numbers are the file's.
func (a *app) schedulePut(ctx context.Context, args []string, create bool) int {
	name := "schedule update"
	if create {
		name = "schedule create"
	}
	cmd := a.newClientCmd(name)
	pos, ok := cmd.parse(args, 1, 1, "FILE|-")
	if !ok {
		return cmd.usageExit()
	}
	var (
		src []byte
		err error
	)
	if pos[0] == "-" {
		src, err = io.ReadAll(cmd.stdin)
	} else {
		src, err = os.ReadFile(pos[0])
	}
	if err != nil {
		cmd.errorf("%s: %v", name, err)
		return exitUsage
	}
	id := scheduleID(src, pos[0])
	cur, err := cmd.c.Schedule(ctx, id)
	switch {
	case err == nil && create:
		cmd.errorf("%s: schedule %s exists (revision %d); weft schedule update %s replaces its document", name, printable(id, false), cur.Revision, printable(pos[0], false))
		return exitFailed
	case errors.Is(err, client.ErrNotFound) && !create:
		cmd.errorf("%s: no schedule %s; weft schedule create %s creates it", name, printable(id, false), printable(pos[0], false))
		return exitNotFound
	case err != nil && !errors.Is(err, client.ErrNotFound):
		return cmd.fail(err)
	}
	s, created, err := cmd.c.PutSchedule(ctx, id, src)
	if err != nil {
		if pos[0] != "-" {
			fmt.Fprintf(cmd.stderr, "%s:\n", pos[0])
		}
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(s)
		return exitOK
	}
	var what string
	switch {
	case created:
		what = "created"
	case cur == nil:
		// Not there when read, there when saved: someone else created it
		// meanwhile, and this document replaced theirs.
		what = "updated (it was created meanwhile, and this document replaced that one)"
	case sameJSON(s.Document, cur.Document):
		// The revision is no witness: the schedules sweep changes it too.
		what = "unchanged"
	default:
		what = "updated"
	}
	next := "none"
	if len(s.NextFires) > 0 {
		next = formatTime(s.NextFires[0])
	}
	fmt.Fprintf(cmd.stdout, "schedule %s: %s (revision %d), workflow %s, next fire %s\n", s.ID, what, s.Revision, s.Workflow, next)
	return exitOK
}

// sameJSON reports whether two canonical documents are the same.
func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	return json.Compact(&ca, a) == nil && json.Compact(&cb, b) == nil && bytes.Equal(ca.Bytes(), cb.Bytes())
}

func (a *app) scheduleList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("schedule ls")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.Schedules(ctx, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "ID\tWORKFLOW\tPAUSED\tNEXT FIRE\tLAST RUN\tSTATUS", func(s apiv1.Schedule) string {
		next := "-"
		if len(s.NextFires) > 0 {
			next = formatTime(s.NextFires[0])
		}
		last, status := "-", "-"
		if r, ok := lastRun(s); ok {
			last, status = formatTime(r.Nominal), runStatus(r)
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", s.ID, s.Workflow, yesNo(s.Paused), next, last, status)
	})
}

// lastRun is the run of s started last, running or ended.
func lastRun(s apiv1.Schedule) (apiv1.ScheduleRun, bool) {
	var last apiv1.ScheduleRun
	found := false
	for _, runs := range [][]apiv1.ScheduleRun{s.Running, s.Recent} {
		for _, r := range runs {
			if !found || r.StartedAt.After(last.StartedAt) {
				last, found = r, true
			}
		}
	}
	return last, found
}

// runStatus is a run's status, "gone" for one deleted before the
// schedules sweep saw it end.
func runStatus(r apiv1.ScheduleRun) string {
	if r.Gone {
		return "gone"
	}
	return string(r.Status)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// scheduleShown is what weft schedule show -o json prints: the API's
// schedule, with the last events of its record beside its fields.
type scheduleShown struct {
	*apiv1.Schedule
	Events []apiv1.ScheduleEvent `json:"events"`
}

func (a *app) scheduleShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("schedule show")
	n := cmd.fs.Int("events", 10, "show the last `N` events of its record (0: none)")
	pos, ok := cmd.parse(args, 1, 1, "ID [--events N]")
	if !ok {
		return cmd.usageExit()
	}
	if *n < 0 {
		cmd.errorf("--events must be 0 or more, got %d", *n)
		return exitUsage
	}
	s, err := cmd.c.Schedule(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	var events []apiv1.ScheduleEvent
	if *n > 0 {
		if events, err = cmd.scheduleTail(ctx, s.ID, *n); err != nil {
			return cmd.fail(err)
		}
	}
	if cmd.output == "json" {
		if events == nil {
			events = []apiv1.ScheduleEvent{}
		}
		cmd.json(scheduleShown{Schedule: s, Events: events})
		return exitOK
	}
	var w strings.Builder
	writeSchedule(&w, s, events)
	// The input, a note and the events' data are an operator's text:
	// escaped where a terminal would act on it.
	io.WriteString(cmd.stdout, printable(w.String(), true))
	return exitOK
}

// scheduleTail returns the last n events of a schedule's record. The API
// pages it oldest first, from a sequence number; the record keeps at most
// a thousand events, so that reading it through is a page or two.
func (cmd *clientCmd) scheduleTail(ctx context.Context, id string, n int) ([]apiv1.ScheduleEvent, error) {
	var tail []apiv1.ScheduleEvent
	var after uint64
	for {
		page, err := cmd.c.ScheduleEvents(ctx, id, after, weft.MaxListLimit)
		if err != nil {
			return nil, err
		}
		tail = append(tail, page.Items...)
		if len(tail) > n {
			tail = append([]apiv1.ScheduleEvent(nil), tail[len(tail)-n:]...)
		}
		if page.NextCursor == "" {
			return tail, nil
		}
		if after, err = strconv.ParseUint(page.NextCursor, 10, 64); err != nil {
			return nil, fmt.Errorf("the events of schedule %s: the next page's cursor %q is not a sequence number", id, page.NextCursor)
		}
	}
}

// fireLayout is how show prints a fire time: with its weekday, which a
// calendar of weekdays is read by, and its zone's abbreviation.
const fireLayout = "Mon 2006-01-02 15:04:05 MST"

// writeSchedule writes a schedule for people: its document summarized,
// its state, its next fires in UTC and in its zone, its runs and events.
func writeSchedule(w io.Writer, s *apiv1.Schedule, events []apiv1.ScheduleEvent) {
	var doc scheduleDocument
	// The canonical document is the host's; one this version cannot read
	// leaves its summary empty, and the rest is shown.
	_ = json.Unmarshal(s.Document, &doc)
	fmt.Fprintf(w, "id:        %s (revision %d)\n", s.ID, s.Revision)
	fmt.Fprintf(w, "workflow:  %s\n", s.Workflow)
	fmt.Fprintf(w, "input:     %s\n", indentJSON(orNull(doc.Input), "           "))
	var spec []string
	for _, c := range doc.Spec.Cron {
		spec = append(spec, "cron "+strconv.Quote(c))
	}
	for _, iv := range doc.Spec.Every {
		line := "every " + iv.Every
		if iv.Offset != "" {
			line += " offset " + iv.Offset
		}
		spec = append(spec, line)
	}
	zone := doc.Spec.TimeZone
	if zone == "" {
		zone = "UTC"
	}
	spec = append(spec, "time zone "+zone)
	if doc.Spec.Start != "" {
		spec = append(spec, "from "+doc.Spec.Start)
	}
	if doc.Spec.End != "" {
		spec = append(spec, "until "+doc.Spec.End)
	}
	if doc.Spec.Jitter != "" {
		spec = append(spec, "jitter up to "+doc.Spec.Jitter)
	}
	fmt.Fprintf(w, "spec:      %s\n", strings.Join(spec, "\n           "))
	p := doc.Policy
	if p.Overlap == "" {
		p.Overlap = defaultOverlap
	}
	if p.CatchUpWindow == "" {
		p.CatchUpWindow = defaultCatchUpWindow
	}
	maxRuns := "none"
	if p.MaxRuns > 0 {
		maxRuns = strconv.Itoa(p.MaxRuns)
	}
	fmt.Fprintf(w, "policy:    overlap %s, catch-up window %s, pause on failure %s, max runs %s\n", p.Overlap, p.CatchUpWindow, yesNo(p.PauseOnFailure), maxRuns)
	paused := yesNo(s.Paused)
	if s.Note != "" {
		paused += ", note: " + strings.ReplaceAll(s.Note, "\n", "\n           ")
	}
	fmt.Fprintf(w, "paused:    %s\n", paused)
	fmt.Fprintf(w, "runs:      %d scheduled run(s) started; waiting: %d buffered fire(s), %d trigger(s), %d backfill(s)\n", s.Runs, s.Waiting, s.Triggers, s.Backfills)
	fmt.Fprintf(w, "created:   %s\nupdated:   %s\n", formatTime(s.CreatedAt), formatTime(s.UpdatedAt))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(s.NextFires) == 0 {
		fmt.Fprintln(tw, "next fires: none")
	} else {
		loc, err := time.LoadLocation(doc.Spec.TimeZone)
		if doc.Spec.TimeZone == "" || doc.Spec.TimeZone == "UTC" || err != nil {
			loc = nil
		}
		fmt.Fprintln(tw, "next fires:")
		if loc != nil {
			fmt.Fprintf(tw, "  UTC\t%s\n", loc)
		}
		for _, t := range s.NextFires {
			if loc != nil {
				fmt.Fprintf(tw, "  %s\t%s\n", t.UTC().Format(fireLayout), t.In(loc).Format(fireLayout))
			} else {
				fmt.Fprintf(tw, "  %s\n", t.UTC().Format(fireLayout))
			}
		}
	}
	if len(s.Running) == 0 {
		fmt.Fprintln(tw, "running:   none")
	} else {
		fmt.Fprintln(tw, "running:")
		fmt.Fprintln(tw, "  INSTANCE\tKIND\tSTATUS\tSTARTED")
		for _, r := range s.Running {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r.InstanceID, r.Kind, runStatus(r), formatTime(r.StartedAt))
		}
	}
	if len(s.Recent) == 0 {
		fmt.Fprintln(tw, "recent:    none")
	} else {
		fmt.Fprintln(tw, "recent:")
		fmt.Fprintln(tw, "  INSTANCE\tKIND\tSTATUS\tSTARTED\tENDED")
		for _, r := range s.Recent {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.InstanceID, r.Kind, runStatus(r), formatTime(r.StartedAt), formatTime(r.EndedAt))
		}
	}
	if len(events) > 0 {
		fmt.Fprintf(tw, "events:    the last %d\n", len(events))
		fmt.Fprintln(tw, "  SEQ\tTIME\tTYPE\tACTOR\tDATA")
		for _, e := range events {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", e.Seq, formatTime(e.Time), printable(string(e.Type), false), printable(e.Actor, false), printable(compactJSON(e.Data, 100), false))
		}
	}
	tw.Flush()
}

// orNull is raw, or null when it is empty: a document without an input
// starts its runs with null.
func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func (a *app) schedulePause(ctx context.Context, args []string) int {
	return a.scheduleSetPause(ctx, args, true)
}

func (a *app) scheduleUnpause(ctx context.Context, args []string) int {
	return a.scheduleSetPause(ctx, args, false)
}

// scheduleSetPause pauses or unpauses a schedule, with a note for its
// record; doing it twice changes nothing.
func (a *app) scheduleSetPause(ctx context.Context, args []string, pause bool) int {
	verb, change := "unpause", (*client.Client).UnpauseSchedule
	if pause {
		verb, change = "pause", (*client.Client).PauseSchedule
	}
	cmd := a.newClientCmd("schedule " + verb)
	note := cmd.fs.String("note", "", "why, kept as the schedule's note and in its record")
	pos, ok := cmd.parse(args, 1, 1, "ID [--note TEXT]")
	if !ok {
		return cmd.usageExit()
	}
	s, err := change(cmd.c, ctx, pos[0], *note)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(s)
		return exitOK
	}
	line := fmt.Sprintf("schedule %s: %sd", s.ID, verb)
	if pause {
		line += "; triggers and backfills still run"
	} else if len(s.NextFires) > 0 {
		line += ", next fire " + formatTime(s.NextFires[0])
	}
	if s.Note != "" {
		line += " (note: " + s.Note + ")"
	}
	io.WriteString(cmd.stdout, printable(line, false)+"\n")
	return exitOK
}

// overlapUsage is the help of --overlap.
const overlapUsage = "the overlap `POLICY` of the runs: skip, buffer_one, buffer_all, cancel_other or allow_all (default: the schedule's)"

func (a *app) scheduleTrigger(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("schedule trigger")
	overlap := cmd.fs.String("overlap", "", overlapUsage)
	pos, ok := cmd.parse(args, 1, 1, "ID [--overlap POLICY]")
	if !ok {
		return cmd.usageExit()
	}
	s, err := cmd.c.TriggerSchedule(ctx, pos[0], *overlap)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(s)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "schedule %s: triggered; its run starts at the schedules sweep's next turn (%d trigger(s) waiting)\n", s.ID, s.Triggers)
	return exitOK
}

func (a *app) scheduleBackfill(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("schedule backfill")
	fromArg := cmd.fs.String("from", "", "the first `TIME` of the range: RFC 3339 (2026-03-31T00:00:00Z) or a duration ago (2h)")
	toArg := cmd.fs.String("to", "", "the last `TIME` of the range (included): RFC 3339 or a duration ago")
	overlap := cmd.fs.String("overlap", "", overlapUsage)
	const what = "ID --from TIME --to TIME [--overlap POLICY]"
	pos, ok := cmd.parse(args, 1, 1, what)
	if !ok {
		return cmd.usageExit()
	}
	if *fromArg == "" || *toArg == "" {
		cmd.errorf("schedule backfill: --from and --to are both needed\nusage: weft schedule backfill %s", what)
		return exitUsage
	}
	now := a.now()
	from, err := parseWhen(*fromArg, now)
	if err != nil {
		cmd.errorf("--from: %v", err)
		return exitUsage
	}
	to, err := parseWhen(*toArg, now)
	if err != nil {
		cmd.errorf("--to: %v", err)
		return exitUsage
	}
	res, err := cmd.c.BackfillSchedule(ctx, pos[0], from, to, *overlap)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(res)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "schedule %s: backfill of %d fire(s) from %s to %s; the schedules sweep starts their runs\n",
		res.Schedule.ID, res.Fires, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	return exitOK
}

func (a *app) scheduleRemove(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("schedule rm")
	pos, ok := cmd.parse(args, 1, 1, "ID")
	if !ok {
		return cmd.usageExit()
	}
	if err := cmd.c.DeleteSchedule(ctx, pos[0]); err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(map[string]any{"deleted": pos[0]})
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "schedule %s deleted; the runs it started go on\n", pos[0])
	return exitOK
}
