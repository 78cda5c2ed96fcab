package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/weft"
)

// listFlags adds --limit and --cursor.
func (cmd *clientCmd) listFlags() *client.ListOptions {
	var o client.ListOptions
	cmd.fs.IntVar(&o.Limit, "limit", 50, "the most items to list")
	cmd.fs.StringVar(&o.Cursor, "cursor", "", "the cursor of the page to list, from a previous listing")
	return &o
}

func (a *app) pluginPush(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin push")
	name := cmd.fs.String("name", "", "the plugin's `NAME` (default: the file name without .wasm)")
	pos, ok := cmd.parse(args, 1, 1, "FILE.wasm [--name NAME]")
	if !ok {
		return cmd.usageExit()
	}
	wasm, err := os.ReadFile(pos[0])
	if err != nil {
		cmd.errorf("%v", err)
		return exitUsage
	}
	if *name == "" {
		*name = strings.TrimSuffix(filepath.Base(pos[0]), filepath.Ext(pos[0]))
	}
	p, created, err := cmd.c.PutPlugin(ctx, *name, wasm)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(p)
		return exitOK
	}
	what := "unchanged"
	if created {
		what = "new version"
	}
	fmt.Fprintf(cmd.stdout, "plugin %s: %s %s, %d bytes, activities: %s\n", p.Name, what, shortHash(p.Version), p.Size, strings.Join(p.Activities, ", "))
	return exitOK
}

func (a *app) pluginList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin ls")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.Plugins(ctx, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "NAME\tVERSION\tSIZE\tACTIVITIES\tCREATED", func(p apiv1.Plugin) string {
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%s", p.Name, shortHash(p.Version), p.Size, strings.Join(p.Activities, ","), formatTime(p.CreatedAt))
	})
}

func (a *app) pluginShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin show")
	pos, ok := cmd.parse(args, 1, 1, "NAME")
	if !ok {
		return cmd.usageExit()
	}
	p, err := cmd.c.Plugin(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(p)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "name:        %s\nversion:     %s\nsize:        %d bytes\nactivities:  %s\ncreated:     %s\n",
		p.Name, p.Version, p.Size, strings.Join(p.Activities, ", "), formatTime(p.CreatedAt))
	if len(p.Versions) > 0 {
		fmt.Fprintln(cmd.stdout, "versions:")
		tw := cmd.table()
		for _, v := range p.Versions {
			fmt.Fprintf(tw, "  %s\t%d bytes\t%s\n", v.Version, v.Size, formatTime(v.CreatedAt))
		}
		tw.Flush()
	}
	writeNeeds(cmd, p)
	return exitOK
}

func (a *app) pluginRemove(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin rm")
	force := cmd.fs.Bool("force", false, "delete it even though saved workflows call it (they fail at their next run until it is pushed again)")
	pos, ok := cmd.parse(args, 1, 1, "NAME [--force]")
	if !ok {
		return cmd.usageExit()
	}
	if err := cmd.c.DeletePlugin(ctx, pos[0], *force); err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(map[string]any{"deleted": pos[0]})
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "plugin %s deleted\n", pos[0])
	return exitOK
}

// definitionName reads the name field of a definition's source, so that
// the definition can be sent to its URL; the server validates the rest.
func definitionName(src []byte, file string) string {
	var doc struct {
		Name string `yaml:"name"`
	}
	if err := yaml.Unmarshal(src, &doc); err == nil && doc.Name != "" {
		return doc.Name
	}
	return strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
}

func (a *app) workflowPut(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow put")
	pos, ok := cmd.parse(args, 1, -1, "FILE.yaml...")
	if !ok {
		return cmd.usageExit()
	}
	var saved []*apiv1.Workflow
	code := exitOK
	for _, file := range pos {
		src, err := os.ReadFile(file)
		if err != nil {
			cmd.errorf("%v", err)
			return exitUsage
		}
		w, created, err := cmd.c.PutWorkflow(ctx, definitionName(src, file), src)
		if err != nil {
			fmt.Fprintf(cmd.stderr, "%s:\n", file)
			code = max(code, cmd.fail(err))
			continue
		}
		saved = append(saved, w)
		if cmd.output == "table" {
			what := "unchanged, version"
			if created {
				what = "saved as version"
			}
			fmt.Fprintf(cmd.stdout, "workflow %s: %s %d\n", w.Name, what, w.Version)
		}
	}
	if cmd.output == "json" {
		cmd.json(saved)
	}
	return code
}

func (a *app) workflowList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow ls")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.Workflows(ctx, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "NAME\tVERSION\tHASH\tCREATED\tPAUSED", func(w apiv1.Workflow) string {
		return fmt.Sprintf("%s\t%d\t%s\t%s\t%s", w.Name, w.Version, shortHash(w.Hash), formatTime(w.CreatedAt), pausedCell(w.Paused))
	})
}

func (a *app) workflowShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow show")
	version := cmd.fs.Int("version", 0, "the version to show (default: the latest)")
	pos, ok := cmd.parse(args, 1, 1, "NAME [--version N]")
	if !ok {
		return cmd.usageExit()
	}
	w, err := cmd.c.Workflow(ctx, pos[0], *version)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(w)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "# workflow %s, version %d, created %s\n", w.Name, w.Version, formatTime(w.CreatedAt))
	if w.Paused != nil {
		// A comment, as the header: the output stays the definition.
		fmt.Fprintln(cmd.stdout, printable(fmt.Sprintf("# paused %s; its new starts are held until weft workflow resume %s", workflowPausedLine(w.Paused), w.Name), false))
	}
	src := ""
	if w.Source != nil {
		src = *w.Source
	}
	fmt.Fprint(cmd.stdout, src)
	if !strings.HasSuffix(src, "\n") {
		fmt.Fprintln(cmd.stdout)
	}
	return exitOK
}

func (a *app) workflowRemove(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow rm")
	pos, ok := cmd.parse(args, 1, 1, "NAME")
	if !ok {
		return cmd.usageExit()
	}
	if err := cmd.c.DeleteWorkflow(ctx, pos[0]); err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(map[string]any{"deleted": pos[0]})
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "workflow %s deleted\n", pos[0])
	return exitOK
}

// waitFlag is --wait or --wait=DURATION: a bare --wait waits until the
// instance ends.
type waitFlag struct {
	set bool
	d   time.Duration
}

func (w *waitFlag) String() string   { return "" }
func (w *waitFlag) IsBoolFlag() bool { return true }

func (w *waitFlag) Set(s string) error {
	w.set = true
	switch s {
	case "true", "":
		w.d = 0
		return nil
	case "false":
		w.set = false
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive duration such as 30s, got %q", s)
	}
	w.d = d
	return nil
}

// untilFlag is --until: what a wait waits for.
type untilFlag struct {
	set   bool
	until apiv1.Until
}

func (u *untilFlag) String() string { return "" }

func (u *untilFlag) Set(s string) error {
	switch s {
	case "finished", "ended":
		u.until = apiv1.UntilEnded
	case "suspended":
		u.until = apiv1.UntilSuspended
	default:
		return fmt.Errorf("want finished or suspended, got %q", s)
	}
	u.set = true
	return nil
}

// waitFlags adds --wait and --until.
func (cmd *clientCmd) waitFlags(what string) (*waitFlag, *untilFlag) {
	var wait waitFlag
	var until untilFlag
	cmd.fs.Var(&wait, "wait", "wait until the "+what+" ends (or suspends, with --until suspended); --wait=DURATION waits at most that long")
	cmd.fs.Var(&until, "until", "what --wait waits for: `finished` (completed, failed or cancelled; the default) or suspended (waiting for an event, a delay or a retry's backoff, paused, or finished); implies --wait")
	return &wait, &until
}

// waitArg takes the duration of "--wait 30s" from the positional
// arguments, where the flag package leaves it, and --until's implied
// --wait: it returns the positional arguments without it, or ok=false
// after saying what is wrong.
func (cmd *clientCmd) waitArg(pos []string, n int, wait *waitFlag, until *untilFlag) ([]string, bool) {
	if len(pos) > n {
		d, err := time.ParseDuration(pos[n])
		if !wait.set || err != nil || d <= 0 {
			cmd.errorf("%s: unexpected argument %q", cmd.name, pos[n])
			return nil, false
		}
		wait.d = d
	}
	if until.set {
		wait.set = true
	}
	return pos[:min(len(pos), n)], true
}

// priorityFlag is --priority: a priority in the ready queue, from
// weft.HighestPriority (served first) to weft.LowestPriority; unset (0),
// the workflow's own.
type priorityFlag int

func (p *priorityFlag) String() string { return "" }

func (p *priorityFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < weft.HighestPriority || n > weft.LowestPriority {
		return fmt.Errorf("want %d (served first) to %d (served last), got %q", weft.HighestPriority, weft.LowestPriority, s)
	}
	*p = priorityFlag(n)
	return nil
}

func (a *app) runCmd(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("run")
	input := cmd.fs.String("input", "", "the input: JSON, @FILE or @- for stdin")
	id := cmd.fs.String("id", "", "a client-chosen instance `ID`, which makes the start idempotent")
	var priority priorityFlag
	cmd.fs.Var(&priority, "priority", "the instance's priority in the ready queue, `N` from 1 (served first) to 5 (served last); without it, the one its workflow's definition gives (3 unless it says)")
	wait, until := cmd.waitFlags("instance")
	pos, ok := cmd.parse(args, 1, 2, "WORKFLOW [--input JSON|@FILE] [--id ID] [--priority N] [--wait[=DURATION]] [--until finished|suspended]")
	if !ok {
		return cmd.usageExit()
	}
	// Accept "--wait 30s" as well as "--wait=30s".
	if pos, ok = cmd.waitArg(pos, 1, wait, until); !ok {
		return exitUsage
	}
	in, err := a.readJSONArg("--input", *input)
	if err != nil {
		cmd.errorf("%v", err)
		return exitUsage
	}
	start := a.now()
	stop := a.spinner(wait.set, pos[0], start)
	var inst *apiv1.Instance
	req := apiv1.StartRequest{Input: in, ID: *id, Priority: int(priority)}
	if wait.set {
		inst, err = cmd.await(ctx, start, wait.d, until.until, func(d time.Duration) (*apiv1.Instance, error) {
			inst, _, err := cmd.c.StartUntil(ctx, pos[0], req, d, until.until)
			return inst, err
		})
	} else {
		inst, _, err = cmd.c.Start(ctx, pos[0], req, 0)
	}
	stop()
	if err != nil {
		return cmd.fail(err)
	}
	cmd.printInstance(ctx, inst)
	if !wait.set {
		return exitOK
	}
	return cmd.waitExit(inst, until.until)
}

// waitExit is the exit code after a wait: 0 when the instance completed,
// or suspended when that was waited for; 1 when it failed or was
// cancelled; 6 when the wait ran out first.
func (cmd *clientCmd) waitExit(inst *apiv1.Instance, until apiv1.Until) int {
	switch {
	case inst.Status == apiv1.StatusCompleted:
		return exitOK
	case inst.Status == apiv1.StatusFailed || inst.Status == apiv1.StatusCancelled:
		return exitFailed
	case (inst.Status == apiv1.StatusSuspended || inst.Status == apiv1.StatusPaused) && until == apiv1.UntilSuspended:
		// Paused, it goes no further until an operator resumes it: the
		// server's wait ends there too.
		return exitOK
	}
	if cmd.output == "table" {
		held := ""
		if inst.Hold != nil {
			held = fmt.Sprintf(", held: its workflow is paused (weft workflow resume %s)", inst.Workflow)
		}
		fmt.Fprintf(cmd.stderr, "weft: the wait ended with the instance %s%s\n", inst.Status, held)
	}
	return exitPending
}

// earlyPause is how long the wait pauses before asking again after the
// server answered before the instance ended and before the request's
// wait ran out: the server is shutting down, or is an older one whose
// wait answers at a suspension. Asking again at once would spin.
const earlyPause = time.Second

// await waits until an instance ends (or, with until UntilSuspended,
// suspends or ends) or limit (0: none) has passed since start, on the
// server: first (the start, or a first read) and then each
// GET /v1/instances/{id}?wait= is one long request of at most
// apiv1.MaxWait, repeated while the instance is under way. A delay or a
// retry's backoff suspends an instance without ending it, and the
// server's wait for its end goes on through them.
func (cmd *clientCmd) await(ctx context.Context, start time.Time, limit time.Duration, until apiv1.Until, first func(wait time.Duration) (*apiv1.Instance, error)) (*apiv1.Instance, error) {
	done := func(in *apiv1.Instance) bool {
		return in.Terminal() || until == apiv1.UntilSuspended && (in.Status == apiv1.StatusSuspended || in.Status == apiv1.StatusPaused)
	}
	// next is the wait of the next request: what is left of limit, at
	// most the server's maximum.
	next := func() time.Duration {
		if limit == 0 {
			return apiv1.MaxWait
		}
		return min(limit-cmd.now().Sub(start), apiv1.MaxWait)
	}
	asked, sent := next(), cmd.now()
	inst, err := first(asked)
	for err == nil && !done(inst) {
		d := next()
		if d <= 0 {
			return inst, nil
		}
		if early := asked - cmd.now().Sub(sent); early > 0 {
			t := time.NewTimer(min(early, earlyPause, d))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			if d = next(); d <= 0 {
				return inst, nil
			}
		}
		asked, sent = d, cmd.now()
		inst, err = cmd.c.Await(ctx, inst.ID, d, until)
	}
	if err != nil {
		return nil, err
	}
	return inst, nil
}

// spinner draws "⠋ hello 1.2s" on stderr until stop is called, when on
// and stderr is a terminal.
func (a *app) spinner(on bool, what string, start time.Time) (stop func()) {
	if !on || !a.terminal {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			fmt.Fprintf(a.stderr, "\r%c %s %.1fs ", frames[i%len(frames)], what, a.now().Sub(start).Seconds())
			select {
			case <-done:
				fmt.Fprint(a.stderr, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// printInstance writes an instance for people (or as JSON), with the
// step a failed instance failed at, read from its history. What the
// instance holds (a plugin's failure message, an event's key) is escaped
// where a terminal would act on it.
func (cmd *clientCmd) printInstance(ctx context.Context, in *apiv1.Instance) {
	if cmd.output == "json" {
		cmd.json(in)
		return
	}
	var w strings.Builder
	defer func() { io.WriteString(cmd.stdout, printable(w.String(), true)) }()
	fmt.Fprintf(&w, "id:        %s\n", printable(in.ID, false))
	fmt.Fprintf(&w, "workflow:  %s (version %d)\n", in.Workflow, in.Version)
	fmt.Fprintf(&w, "status:    %s\n", in.Status)
	if in.Priority != 0 { // 0: a host from before priorities
		fmt.Fprintf(&w, "priority:  %d\n", in.Priority)
	}
	if in.FairnessKey != "" {
		fmt.Fprintf(&w, "fairness:  key %s, weight %d\n", strconv.Quote(in.FairnessKey), in.FairnessWeight)
	}
	if c := in.Concurrency; c != nil {
		// Its place under its workflow's concurrency limit (weft flow show).
		flow := "concurrency key " + strconv.Quote(c.Key)
		if !c.WaitingSince.IsZero() {
			flow += "; waiting for a slot since " + formatTime(c.WaitingSince)
		}
		fmt.Fprintf(&w, "flow:      %s\n", flow)
	}
	if in.Parent != nil {
		fmt.Fprintf(&w, "parent:    %s (step %s)\n", in.Parent.InstanceID, in.Parent.StepID)
	}
	fmt.Fprintf(&w, "created:   %s\n", formatTime(in.CreatedAt))
	fmt.Fprintf(&w, "updated:   %s\n", formatTime(in.UpdatedAt))
	if !in.DeleteAfter.IsZero() {
		// A finished instance is kept until then, and deleted after.
		fmt.Fprintf(&w, "retention: until %s\n", formatTime(in.DeleteAfter))
	}
	if in.TraceID != "" {
		// Its trace, to look up in the collector's trace viewer: only a
		// sampled one, which has spans.
		fmt.Fprintf(&w, "trace:     %s\n", printable(in.TraceID, false))
	}
	if p := in.Paused; p != nil {
		fmt.Fprintf(&w, "paused:    %s\n", pausedLine(p))
	}
	if h := in.Hold; h != nil {
		fmt.Fprintf(&w, "held:      since %s: its workflow is paused; it starts when the workflow is resumed\n", formatTime(h.Since))
	}
	printSearch(&w, in.Search)
	fmt.Fprintf(&w, "input:     %s\n", indentJSON(in.Input, "           "))
	if len(in.Output) > 0 && string(in.Output) != "null" {
		fmt.Fprintf(&w, "output:    %s\n", indentJSON(in.Output, "           "))
	}
	if in.Error != nil {
		msg := strings.ReplaceAll(printable(in.Error.Message, true), "\n", "\n           ")
		fmt.Fprintf(&w, "error:     %s: %s\n", printable(in.Error.Code, false), msg)
		if len(in.Error.Details) > 0 {
			fmt.Fprintf(&w, "details:   %s\n", indentJSON(in.Error.Details, "           "))
		}
		if in.Error.Step != "" && in.Status == apiv1.StatusFailed {
			fmt.Fprintf(&w, "failed at: %s\n", cmd.failedAt(ctx, in))
		}
	}
	if wo := in.WaitingOn; wo != nil && (len(wo.Bookmarks) > 0 || len(wo.Timers) > 0) {
		fmt.Fprintln(&w, "waiting on:")
		for _, b := range wo.Bookmarks {
			fmt.Fprintf(&w, "  event %s with key %s (%s)\n", b.Event, strconv.Quote(b.Key), b.StepPath)
		}
		for _, t := range wo.Timers {
			kind := t.Kind
			if kind == "" {
				kind = "timer"
			}
			fmt.Fprintf(&w, "  %s timer %s due %s\n", kind, t.ID, formatTime(t.Due))
		}
	}
}

// failedAt says where a failed instance failed: the step's path, id and
// activity, and the attempt that failed last, read from its history (the
// path alone when the history cannot be read).
func (cmd *clientCmd) failedAt(ctx context.Context, in *apiv1.Instance) string {
	path := in.Error.Step
	var id, activity string
	attempt := 0
	for opts := (client.ListOptions{Limit: 500}); ; {
		page, err := cmd.c.History(ctx, in.ID, opts)
		if err != nil {
			return path
		}
		for _, e := range page.Items {
			if e.StepPath != path {
				continue
			}
			var data struct {
				Step     string `json:"step"`
				Plugin   string `json:"plugin"`
				Activity string `json:"activity"`
			}
			if json.Unmarshal(e.Data, &data) != nil {
				continue
			}
			switch e.Type {
			case "step_started":
				id = data.Step
			case "activity_scheduled":
				activity = data.Plugin + "." + data.Activity
			case "activity_failed":
				attempt = e.Attempt
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	var parts []string
	if id != "" {
		parts = append(parts, "step "+id)
	}
	if activity != "" {
		parts = append(parts, "activity "+activity)
	}
	if attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", attempt))
	}
	if len(parts) == 0 {
		return path
	}
	return path + " (" + strings.Join(parts, ", ") + ")"
}

func (a *app) instanceList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance ls")
	var f client.InstanceFilter
	var status string
	cmd.fs.StringVar(&f.Workflow, "workflow", "", "only instances of this workflow")
	cmd.fs.StringVar(&status, "status", "", "only instances with this status ("+statusNames()+")")
	cmd.fs.IntVar(&f.Limit, "limit", 50, "the most instances to list")
	cmd.fs.StringVar(&f.Cursor, "cursor", "", "the cursor of the page to list, from a previous listing")
	cmd.fs.BoolVar(&f.Oldest, "oldest", false, "list the oldest first (the newest come first)")
	after := cmd.fs.String("after", "", "only instances created at or after this time: RFC 3339 (2026-11-25T10:00:00Z) or a duration ago (90m)")
	before := cmd.fs.String("before", "", "only instances created before this time: RFC 3339 or a duration ago")
	cmd.fs.StringVar(&f.ID, "id", "", "only the instance with this id")
	cmd.fs.StringVar(&f.Event, "event", "", "only instances waiting for this event (with --key)")
	cmd.fs.StringVar(&f.Key, "key", "", "the correlation key they wait with (alone: under any event the saved workflows wait for)")
	cmd.fs.StringVar(&f.Plugin, "plugin", "", "only instances that pin this plugin")
	cmd.fs.StringVar(&f.PluginVersion, "plugin-version", "", "with --plugin: only those that pin this version (its hash)")
	cmd.fs.StringVar(&f.Query, "query", "", "only the instances the query `Q` matches (docs/operations.md#search), such as 'customer = \"acme\" AND amount > 1000'")
	if _, ok := cmd.parse(args, 0, 0, "[--workflow W] [--status S] [--after T] [--before T] [--oldest] [--id ID | --event E --key K | --key K | --query Q] [--plugin P [--plugin-version V]] [--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	if f.Query != "" && (f.ID != "" || f.Event != "" || f.Key != "" || f.Plugin != "" || f.PluginVersion != "") {
		cmd.errorf("instance ls: --query takes no --id, --event, --key or --plugin: write id = \"…\" in the query for one instance")
		return exitUsage
	}
	f.Status = apiv1.Status(status)
	var err error
	if f.CreatedAfter, err = parseWhen(*after, time.Now()); err != nil {
		cmd.errorf("instance ls: --after: %v", err)
		return exitUsage
	}
	if f.CreatedBefore, err = parseWhen(*before, time.Now()); err != nil {
		cmd.errorf("instance ls: --before: %v", err)
		return exitUsage
	}
	if f.Query != "" {
		page, err := cmd.searchInstances(ctx, f)
		if err != nil {
			return cmd.failQuery(err, f.Query)
		}
		return printInstances(cmd, page)
	}
	page, err := cmd.c.Instances(ctx, f)
	if err != nil {
		return cmd.fail(err)
	}
	return printInstances(cmd, page)
}

// statusNames lists the statuses an instance may have, for a flag's help.
func statusNames() string {
	names := make([]string, 0, len(weft.Statuses()))
	for _, st := range weft.Statuses() {
		names = append(names, string(st))
	}
	return strings.Join(names, ", ")
}

// printInstances prints a page of instances, as a table or (-o json) as
// the API answers them, search attributes included.
func printInstances(cmd *clientCmd, page *apiv1.Page[apiv1.Instance]) int {
	return printPage(cmd, page, "ID\tWORKFLOW\tVERSION\tSTATUS\tPRIORITY\tFAIRNESS KEY\tCREATED\tUPDATED\tWAITING ON", func(in apiv1.Instance) string {
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s", in.ID, in.Workflow, in.Version, in.Status, in.Priority, fairnessCell(in.FairnessKey),
			formatTime(in.CreatedAt), formatTime(in.UpdatedAt), waitingCell(&in))
	})
}

// waitingCell says in one cell what an instance waits on: its workflow's
// resume for a held start, else waitingSummary.
func waitingCell(in *apiv1.Instance) string {
	if in.Hold != nil {
		return "held: workflow paused"
	}
	return waitingSummary(in.WaitingOn)
}

// fairnessCell is an instance's fairness key in one cell of a table: "-"
// for the shared lane, a key escaped (a tab in it would split the row)
// and cut to 32 runes.
func fairnessCell(key string) string {
	if key == "" {
		return "-"
	}
	key = printable(key, false)
	if r := []rune(key); len(r) > 32 {
		key = string(r[:31]) + "…"
	}
	return key
}

// waitingSummary says in one cell what a suspended instance waits on:
// "event document.approved/doc-42", "retry 10:32:05", several joined by
// commas; "-" for nothing.
func waitingSummary(wo *apiv1.WaitingOn) string {
	if wo == nil {
		return "-"
	}
	var parts []string
	for _, b := range wo.Bookmarks {
		p := "event " + b.Event
		if b.Key != "" {
			p += "/" + b.Key
		}
		parts = append(parts, p)
	}
	for _, t := range wo.Timers {
		kind := string(t.Kind)
		if kind == "" {
			kind = "timer"
		}
		parts = append(parts, kind+" "+formatTime(t.Due))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func (a *app) instanceShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance show")
	wait, until := cmd.waitFlags("instance")
	pos, ok := cmd.parse(args, 1, 2, "ID [--wait[=DURATION]] [--until finished|suspended]")
	if !ok {
		return cmd.usageExit()
	}
	if pos, ok = cmd.waitArg(pos, 1, wait, until); !ok {
		return exitUsage
	}
	if !wait.set {
		in, err := cmd.c.Instance(ctx, pos[0])
		if err != nil {
			return cmd.fail(err)
		}
		cmd.printInstance(ctx, in)
		return exitOK
	}
	start := a.now()
	stop := a.spinner(true, pos[0], start)
	in, err := cmd.await(ctx, start, wait.d, until.until, func(d time.Duration) (*apiv1.Instance, error) {
		return cmd.c.Await(ctx, pos[0], d, until.until)
	})
	stop()
	if err != nil {
		return cmd.fail(err)
	}
	cmd.printInstance(ctx, in)
	return cmd.waitExit(in, until.until)
}

func (a *app) instanceHistory(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance history")
	pos, ok := cmd.parse(args, 1, 1, "ID")
	if !ok {
		return cmd.usageExit()
	}
	// The whole history, page after page.
	var events []apiv1.HistoryEntry
	for opts := (client.ListOptions{Limit: 500}); ; {
		page, err := cmd.c.History(ctx, pos[0], opts)
		if err != nil {
			return cmd.fail(err)
		}
		events = append(events, page.Items...)
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	if cmd.output == "json" {
		// The API's document, with every page's items in one.
		cmd.json(apiv1.Page[apiv1.HistoryEntry]{Items: events})
		return exitOK
	}
	tw := cmd.table()
	fmt.Fprintln(tw, "SEQ\tTIME\tEVENT\tSTEP\tATTEMPT\tACTOR\tDATA")
	for _, e := range events {
		attempt := "-"
		if e.Attempt > 0 {
			attempt = fmt.Sprint(e.Attempt)
		}
		step := e.StepPath
		if step == "" {
			step = "-"
		}
		// Who asked, on an operator's action (docs/operations.md, "Audit").
		actor := e.Actor
		if actor == "" {
			actor = "-"
		}
		data, message := splitMessage(e.Data)
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Local().Format("15:04:05.000"), e.Type, step, attempt, printable(actor, false), printable(compactJSON(data, 80), false))
		if message != "" {
			// Whole, on lines of its own: a tabless line leaves the
			// columns as they are.
			fmt.Fprintf(tw, "    message: %s\n", strings.NewReplacer("\t", `\t`, "\n", "\n             ").Replace(printable(message, true)))
		}
	}
	tw.Flush()
	return exitOK
}

// splitMessage takes the message out of a history entry's data (a
// failure's, a cancellation's reason), for it to be printed whole beside
// the rest, which a table cuts.
func splitMessage(data json.RawMessage) (rest json.RawMessage, message string) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil || fields["message"] == nil {
		return data, ""
	}
	if json.Unmarshal(fields["message"], &message) != nil || message == "" {
		return data, ""
	}
	delete(fields, "message")
	rest, err := json.Marshal(fields)
	if err != nil {
		return data, message
	}
	return rest, message
}

// parseWhen reads a time given as RFC 3339 or as a duration before now;
// empty is the zero time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-11-25T10:00:00Z) nor a duration ago (90m)", s)
	}
	return now.Add(-d), nil
}

// logTimeLayout is how instance logs prints a line's time: in the local
// zone, to the millisecond, with the zone's offset, so that lines read
// beside other logs and from another zone are not misread.
const logTimeLayout = "2006-01-02 15:04:05.000 -07:00"

func (a *app) instanceLogs(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance logs")
	var f client.LogFilter
	cmd.fs.StringVar(&f.Step, "step", "", "only the lines of this step's attempts, by its `ID` or path (steps[1].then[0], as the history shows it); a step the workflow does not have is refused")
	cmd.fs.IntVar(&f.Attempt, "attempt", 0, "only the lines of attempt `N` (from 1)")
	pos, ok := cmd.parse(args, 1, 1, "ID [--step ID|PATH] [--attempt N]")
	if !ok {
		return cmd.usageExit()
	}
	if f.Attempt < 0 {
		cmd.errorf("--attempt must be 1 or more, got %d", f.Attempt)
		return exitUsage
	}
	// Every line, page after page; printed as each page comes, but for
	// JSON, which is one document.
	var lines []apiv1.LogEntry
	for f.Limit = 1000; ; {
		page, err := cmd.c.Logs(ctx, pos[0], f)
		if err != nil {
			return cmd.fail(err)
		}
		if cmd.output == "json" {
			lines = append(lines, page.Items...)
		} else {
			for _, l := range page.Items {
				printLogLine(cmd.stdout, l)
			}
		}
		if page.NextCursor == "" {
			break
		}
		f.Cursor = page.NextCursor
	}
	if cmd.output == "json" {
		// The API's document, with every page's items in one.
		cmd.json(apiv1.Page[apiv1.LogEntry]{Items: lines})
	}
	return exitOK
}

// printLogLine prints one log line: its time, step and attempt, level and
// message, which names its source when the guest did not log it through
// the log host function ("[stdout] ..."); a message's further lines are
// indented under it, and what a terminal would act on is escaped.
func printLogLine(w io.Writer, l apiv1.LogEntry) {
	msg := l.Message
	if l.Source != "log" {
		msg = "[" + l.Source + "] " + msg
	}
	msg = strings.ReplaceAll(printable(strings.TrimRight(msg, "\n"), true), "\n", "\n    ")
	fmt.Fprintf(w, "%s  %s #%d  %-5s  %s\n", l.Time.Local().Format(logTimeLayout), printable(l.StepPath, false), l.Attempt, printable(string(l.Level), false), msg)
}

func (a *app) instanceCancel(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance cancel")
	reason := cmd.fs.String("reason", "", "why, recorded with the instance")
	pos, ok := cmd.parse(args, 1, apiv1.MaxBulk, "ID... [--reason TEXT]")
	if !ok {
		return cmd.usageExit()
	}
	if len(pos) > 1 {
		return cmd.cancelMany(ctx, pos, *reason)
	}
	in, err := cmd.c.Cancel(ctx, pos[0], *reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(in)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "instance %s: cancellation requested (status %s)\n", in.ID, in.Status)
	return exitOK
}

// cancelMany cancels several instances in one request and prints what
// became of each; it fails when one could not be cancelled (an instance
// finished already is not a failure).
func (cmd *clientCmd) cancelMany(ctx context.Context, ids []string, reason string) int {
	outs, err := cmd.c.CancelMany(ctx, ids, reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(outs)
	}
	code := exitOK
	for _, o := range outs {
		if cmd.output != "json" {
			line := fmt.Sprintf("instance %s: %s", o.ID, strings.ReplaceAll(string(o.Outcome), "_", " "))
			if o.Detail != "" && o.Outcome != apiv1.OutcomeFinished {
				line += ": " + o.Detail
			}
			fmt.Fprintln(cmd.stdout, line)
		}
		if o.Outcome == "not_found" || o.Outcome == "error" {
			code = exitFailed
		}
	}
	return code
}

func (a *app) instanceRetry(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance retry")
	reason := cmd.fs.String("reason", "", "why, recorded in the instance's history")
	pos, ok := cmd.parse(args, 1, 1, "ID [--reason TEXT]")
	if !ok {
		return cmd.usageExit()
	}
	in, err := cmd.c.Retry(ctx, pos[0], *reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(in)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "instance %s: retry requested; it continues from %s when it next runs\n", in.ID, failedStep(in))
	return exitOK
}

func (a *app) instancePause(ctx context.Context, args []string) int {
	return a.pauseOrResume(ctx, args, "instance pause", "pause")
}

func (a *app) instanceResume(ctx context.Context, args []string) int {
	return a.pauseOrResume(ctx, args, "instance resume", "resume")
}

// pauseOrResume is weft instance pause and resume (docs/operations.md,
// "Pause and resume"): the action asked of each instance named, in turn,
// with a line each (-o json: the instances answered, one document for
// one, a list for several); it fails when one was refused.
func (a *app) pauseOrResume(ctx context.Context, args []string, name, action string) int {
	cmd := a.newClientCmd(name)
	reason := cmd.fs.String("reason", "", "why, recorded in the instance's history (and shown with the pause)")
	pos, ok := cmd.parse(args, 1, apiv1.MaxBulk, "ID... [--reason TEXT]")
	if !ok {
		return cmd.usageExit()
	}
	act := cmd.c.Pause
	if action == "resume" {
		act = cmd.c.Resume
	}
	if len(pos) == 1 {
		in, err := act(ctx, pos[0], *reason)
		if err != nil {
			return cmd.fail(err)
		}
		if cmd.output == "json" {
			cmd.json(in)
			return exitOK
		}
		fmt.Fprintln(cmd.stdout, printable(pauseOutcome(in, action), false))
		return exitOK
	}
	code := exitOK
	answered := []*apiv1.Instance{}
	for _, id := range pos {
		in, err := act(ctx, id, *reason)
		if err != nil {
			// What a request alone would say, under the instance's id.
			detail := err.Error()
			var p *client.Error
			if errors.As(err, &p) && p.Detail != "" {
				detail = p.Detail
			}
			if cmd.output == "json" {
				cmd.errorf("%s %s: %s", name, printable(id, false), printable(detail, false))
			} else {
				fmt.Fprintf(cmd.stdout, "instance %s: %s\n", printable(id, false), printable(detail, false))
			}
			code = exitFailed
			continue
		}
		answered = append(answered, in)
		if cmd.output != "json" {
			fmt.Fprintln(cmd.stdout, printable(pauseOutcome(in, action), false))
		}
	}
	if cmd.output == "json" {
		cmd.json(answered)
	}
	return code
}

// pauseOutcome says what a pause or a resume of in did, from the
// instance answered (as it was before the action applied).
func pauseOutcome(in *apiv1.Instance, action string) string {
	if action == "pause" && in.Paused != nil {
		return fmt.Sprintf("instance %s: paused already, %s", in.ID, pausedLine(in.Paused))
	}
	return fmt.Sprintf("instance %s: %s requested (status %s); it applies when the instance next runs", in.ID, action, in.Status)
}

// pausedLine says who paused an instance, when and why, and what it
// holds: "since 2026-11-29 12:47:38 by alice: bad rollout (2 held)".
func pausedLine(p *apiv1.Paused) string {
	line := "since " + formatTime(p.Since)
	if p.Actor != "" {
		line += " by " + p.Actor
	}
	if p.Reason != "" {
		line += ": " + p.Reason
	}
	if p.Batch != "" {
		line += " (batch " + p.Batch + ")"
	}
	return line + fmt.Sprintf(" (%d held)", p.Held)
}

// failedStep names the step a failed instance stopped at.
func failedStep(in *apiv1.Instance) string {
	if in.Error != nil && in.Error.Step != "" {
		return "step " + in.Error.Step
	}
	return "where it failed"
}

func (a *app) instanceCount(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance count")
	wf := cmd.fs.String("workflow", "", "count only this workflow's instances")
	if _, ok := cmd.parse(args, 0, 0, "[--workflow W]"); !ok {
		return cmd.usageExit()
	}
	counts, err := cmd.c.Counts(ctx, *wf)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(counts)
		return exitOK
	}
	tw := cmd.table()
	fmt.Fprintln(tw, "STATUS\tINSTANCES")
	for _, st := range weft.Statuses() {
		fmt.Fprintf(tw, "%s\t%d\n", st, counts.ByStatus[apiv1.Status(st)])
	}
	fmt.Fprintf(tw, "total\t%d\n", counts.Total)
	if err := tw.Flush(); err != nil {
		return cmd.fail(err)
	}
	return exitOK
}

func (a *app) instanceRemove(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance rm")
	pos, ok := cmd.parse(args, 1, 1, "ID")
	if !ok {
		return cmd.usageExit()
	}
	if err := cmd.c.DeleteInstance(ctx, pos[0]); err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(map[string]any{"deleted": pos[0]})
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "instance %s deleted\n", pos[0])
	return exitOK
}

func (a *app) instanceExport(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance export")
	file := cmd.fs.String("file", "", "write the state to `FILE` instead of stdout")
	pos, ok := cmd.parse(args, 1, 1, "ID [--file FILE]")
	if !ok {
		return cmd.usageExit()
	}
	state, err := cmd.c.ExportState(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	out := indentJSON(state, "") + "\n"
	if *file == "" {
		fmt.Fprint(cmd.stdout, out)
		return exitOK
	}
	if err := os.WriteFile(*file, []byte(out), 0o600); err != nil {
		cmd.errorf("%v", err)
		return exitInternal
	}
	fmt.Fprintf(cmd.stderr, "instance %s exported to %s\n", pos[0], *file)
	return exitOK
}

func (a *app) instanceImport(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance import")
	id := cmd.fs.String("id", "", "the instance `ID` (default: the one in the state; another makes a copy)")
	replace := cmd.fs.Bool("replace", false, "replace the instance if it exists (refused otherwise)")
	pos, ok := cmd.parse(args, 1, 1, "FILE|- [--id ID] [--replace]")
	if !ok {
		return cmd.usageExit()
	}
	arg := "@" + pos[0]
	state, err := a.readJSONArg("state", arg)
	if err != nil {
		cmd.errorf("%v", err)
		return exitUsage
	}
	if *id == "" {
		var s struct {
			Instance struct {
				ID string `json:"id"`
			} `json:"instance"`
		}
		if err := json.Unmarshal(state, &s); err != nil || s.Instance.ID == "" {
			cmd.errorf("instance import: the state names no instance id (instance.id); pass --id")
			return exitUsage
		}
		*id = s.Instance.ID
	}
	in, created, err := cmd.c.ImportState(ctx, *id, state, *replace)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(in)
		return exitOK
	}
	what := "replaced"
	if created {
		what = "created"
	}
	fmt.Fprintf(cmd.stdout, "instance %s %s (status %s)\n", in.ID, what, in.Status)
	return exitOK
}

func (a *app) eventSend(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("event send")
	var ev apiv1.EventRequest
	cmd.fs.StringVar(&ev.Key, "key", "", "the correlation `KEY` that waiting instances match")
	payload := cmd.fs.String("payload", "", "the payload: JSON, @FILE or @- for stdin")
	cmd.fs.StringVar(&ev.ID, "id", "", "an event `ID`, which makes sending it again harmless")
	var priority priorityFlag
	cmd.fs.Var(&priority, "priority", "the priority in the ready queue, `N` from 1 (served first) to 5 (served last), of the instances the event's triggers start; without it, the ones their definitions give (an instance the event resumes keeps its own)")
	pos, ok := cmd.parse(args, 1, 1, "NAME [--key KEY] [--payload JSON|@FILE] [--id ID] [--priority N]")
	if !ok {
		return cmd.usageExit()
	}
	ev.Name, ev.Priority = pos[0], int(priority)
	var err error
	if ev.Payload, err = a.readJSONArg("--payload", *payload); err != nil {
		cmd.errorf("%v", err)
		return exitUsage
	}
	res, err := cmd.c.SendEvent(ctx, ev)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(res)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "event %s (id %s)\n", ev.Name, res.ID)
	if len(res.Resumed) > 0 {
		fmt.Fprintf(cmd.stdout, "  resumed: %s\n", strings.Join(res.Resumed, ", "))
	}
	if len(res.Started) > 0 {
		fmt.Fprintf(cmd.stdout, "  started: %s\n", strings.Join(res.Started, ", "))
	}
	if res.Queued {
		fmt.Fprintln(cmd.stdout, "  queued: nothing waits for it yet; it is kept for an instance that will (weft event dead lists those that expire unclaimed)")
	}
	if res.Warning != "" {
		fmt.Fprintf(cmd.stderr, "weft: warning: %s\n", res.Warning)
	}
	return exitOK
}

// eventList is weft event ls: the queued events, sent with nothing waiting
// for them and kept until an instance waits for them or their TTL.
func (a *app) eventList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("event ls")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.QueuedEvents(ctx, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "ID\tNAME\tKEY\tSENT\tEXPIRES\tPAYLOAD", func(q apiv1.Stimulus) string {
		key := q.Key
		if key == "" {
			key = "-"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", q.ID, q.Name, key, formatTime(q.CreatedAt), formatTime(q.ExpiresAt), compactJSON(q.Payload, 60))
	})
}

func (a *app) eventDead(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("event dead")
	var opts client.ListOptions
	cmd.fs.IntVar(&opts.Limit, "limit", 50, "the most dead letters to list")
	cmd.fs.StringVar(&opts.Cursor, "cursor", "", "the cursor of the page to list, from a previous listing")
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.DeadLetters(ctx, opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "ID\tNAME\tKEY\tSENT\tDIED\tPAYLOAD", func(d apiv1.Stimulus) string {
		key := d.Key
		if key == "" {
			key = "-"
		}
		return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", d.ID, d.Name, key, formatTime(d.CreatedAt), formatTime(d.SettledAt), compactJSON(d.Payload, 60))
	})
}

// adminStatus is `weft admin status`: whether the host answers
// (/healthz) and can serve (/readyz: its store, and in a cluster Redis,
// reachable and sound). It exits 0 only when the host is ready, so that a
// script or a probe can wait on it.
func (a *app) adminStatus(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("admin status")
	if _, ok := cmd.parse(args, 0, 0, ""); !ok {
		return cmd.usageExit()
	}
	if err := cmd.c.Health(ctx); err != nil {
		return cmd.fail(err)
	}
	status := struct {
		Alive  bool   `json:"alive"`
		Ready  bool   `json:"ready"`
		Reason string `json:"reason,omitempty"`
	}{Alive: true, Ready: true}
	if err := cmd.c.Ready(ctx); err != nil {
		var p *client.Error
		if !errors.As(err, &p) {
			return cmd.fail(err)
		}
		status.Ready, status.Reason = false, p.Detail
	}
	code := exitOK
	if !status.Ready {
		code = exitFailed
	}
	if cmd.output == "json" {
		cmd.json(status)
		return code
	}
	if status.Ready {
		fmt.Fprintf(cmd.stdout, "%s is alive and ready\n", cmd.server)
	} else {
		fmt.Fprintf(cmd.stdout, "%s is alive but not ready: %s\n", cmd.server, status.Reason)
	}
	return code
}

func (a *app) adminRefresh(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("admin refresh")
	names, ok := cmd.parse(args, 0, -1, "[WORKFLOW...]")
	if !ok {
		return cmd.usageExit()
	}
	res, err := cmd.c.Refresh(ctx, names...)
	if err != nil {
		return cmd.fail(err)
	}
	code := exitOK
	for _, f := range res.Files {
		if len(f.Problems) > 0 || f.Error != "" {
			code = exitFailed
		}
	}
	if cmd.output == "json" {
		cmd.json(res)
		return code
	}
	if res.Status == apiv1.RefreshInProgress {
		fmt.Fprintln(cmd.stdout, "a refresh of these workflows is already in progress on some node; nothing done")
		return exitOK
	}
	tw := cmd.table()
	fmt.Fprintln(tw, "FILE\tWORKFLOW\tVERSION\tRESULT")
	for _, f := range res.Files {
		result := "unchanged"
		switch {
		case f.Error != "":
			result = "error: " + f.Error
		case len(f.Problems) > 0:
			result = fmt.Sprintf("%d problem(s)", len(f.Problems))
		case f.Created:
			result = "new version"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", f.File, f.Name, f.Version, result)
	}
	tw.Flush()
	for _, f := range res.Files {
		for _, p := range f.Problems {
			fmt.Fprintf(cmd.stderr, "%s: %s\n", f.File, p)
		}
	}
	return code
}
