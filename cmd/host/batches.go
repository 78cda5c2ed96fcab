package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// The weft batch commands: batch jobs (docs/operations.md, "Batch
// operations") over the API. A batch runs on the host; these start it,
// confirm it, follow it and stop it.

// batchPoll is how often a command that follows a batch asks for it.
const batchPoll = 250 * time.Millisecond

// batchLineEvery is how often at most --watch prints a plain line of a
// batch's progress, when it is not drawing a bar: one on each change of
// phase, and one at most this often while the counts change.
const batchLineEvery = 2 * time.Second

// batchStart is weft batch start. A batch of a query (not a dry run)
// starts with hold: once its instances are selected the command asks
// "N instances match; OP them? [y/N]" on a terminal and confirms the
// batch on y, cancelling it otherwise; without a terminal it confirms
// with --yes, and without --yes it leaves the batch held (nothing
// applied, the selection kept) and exits 1, saying how to confirm or
// cancel it. A batch of listed ids, and a dry run, start at once.
func (a *app) batchStart(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch start")
	query := cmd.fs.String("query", "", "the instances a `QUERY` matches (docs/operations.md#search)")
	idsFile := cmd.fs.String("ids", "", "the instances listed in `FILE` (- for stdin), one id a line")
	reason := cmd.fs.String("reason", "", "why, recorded in each instance's history")
	var rate *float64
	cmd.fs.Func("rate", "apply at most `N` instances a second (default 1000; 0: no limit)", func(s string) error {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("want a number of instances per second")
		}
		rate = &r
		return nil
	})
	dryRun := cmd.fs.Bool("dry-run", false, "migrate: say per instance whether it can move, move none")
	yes := cmd.fs.Bool("yes", false, "apply the batch of a query without asking")
	watch := cmd.fs.Bool("watch", false, "follow the batch until it ends: a progress bar on a terminal, lines otherwise")
	event := cmd.fs.String("event", "", "signal: the `EVENT` to send")
	key := cmd.fs.String("key", "", "signal: only to the waits with this `KEY`")
	payload := cmd.fs.String("payload", "", "signal: the event's payload, `JSON` or @FILE")
	toVersion := cmd.fs.Int("to-version", 0, "migrate: the workflow `VERSION` to move to (default: the latest)")
	plugins := newPairFlag("NAME=SHA256")
	cmd.fs.Var(plugins, "plugin", "migrate: pin the plugin `NAME=SHA256` (repeatable)")
	step := cmd.fs.String("step", "", "reset: the top-level `STEP` to run each instance again from")
	retry := cmd.fs.Bool("retry", false, "migrate: retry each moved instance that failed")
	resume := cmd.fs.Bool("resume", false, "migrate: resume each moved instance that was paused")
	pos, ok := cmd.parse(args, 1, 1, "OP (--query Q | --ids FILE|-) [flags]")
	if !ok {
		return cmd.usageExit()
	}
	req := apiv1.BatchRequest{Op: apiv1.BatchOp(pos[0]), Query: *query, Reason: *reason, Rate: rate, DryRun: *dryRun}
	switch {
	case *query != "" && *idsFile != "":
		cmd.errorf("batch start: give --query or --ids, not both")
		return exitUsage
	case *query == "" && *idsFile == "":
		cmd.errorf("batch start: give --query Q (the instances it matches) or --ids FILE (the instances listed)")
		return exitUsage
	case *idsFile != "":
		ids, err := a.readIDs(*idsFile)
		if err != nil {
			cmd.errorf("batch start: --ids: %v", err)
			return exitUsage
		}
		req.IDs = ids
	}
	bargs := apiv1.BatchArgs{Event: *event, Key: *key, ToVersion: *toVersion, Step: *step, Retry: *retry, Resume: *resume}
	if len(plugins.value) > 0 {
		bargs.Plugins = plugins.value
	}
	if *payload != "" {
		p, err := a.readJSONArg("--payload", *payload)
		if err != nil {
			cmd.errorf("batch start: %v", err)
			return exitUsage
		}
		bargs.Payload = p
	}
	if bargs.Event != "" || bargs.Key != "" || bargs.Payload != nil || bargs.ToVersion != 0 || bargs.Plugins != nil || bargs.Step != "" || bargs.Retry || bargs.Resume {
		req.Args = &bargs
	}
	confirm := req.Query != "" && !req.DryRun
	req.Hold = confirm
	b, err := cmd.c.StartBatch(ctx, req)
	if err != nil {
		return cmd.fail(err)
	}
	if confirm {
		var code int
		if b, code = cmd.confirmBatch(ctx, b, *yes); b == nil {
			return code
		}
	}
	if *watch {
		return cmd.watchBatch(ctx, b)
	}
	if cmd.output == "json" {
		cmd.json(b)
		return exitOK
	}
	fmt.Fprintln(cmd.stdout, printable(startedLine(b), false))
	return exitOK
}

// confirmBatch waits for a held batch's selection and asks for its
// confirmation (batchStart says how), and returns it confirmed; nil with
// the exit code when it is not.
func (cmd *clientCmd) confirmBatch(ctx context.Context, b *apiv1.Batch, yes bool) (*apiv1.Batch, int) {
	b, err := cmd.followBatch(ctx, b, func(b *apiv1.Batch) bool { return b.Phase != apiv1.PhaseSelecting })
	if err != nil {
		return nil, cmd.fail(err)
	}
	switch {
	case b.Phase == apiv1.PhaseFailed:
		cmd.errorf("batch %s failed: %s", b.ID, printable(b.Error, false))
		return nil, exitFailed
	case b.Phase != apiv1.PhaseSelected:
		// Cancelled meanwhile, by someone else.
		cmd.errorf("batch %s is %s", b.ID, b.Phase)
		return nil, exitFailed
	}
	match := plural(b.Matched, "instance matches", "instances match")
	switch {
	case yes || b.Matched == 0:
	case cmd.interactive:
		them := "them"
		if b.Matched == 1 {
			them = "it"
		}
		fmt.Fprintf(cmd.stderr, "%s; %s %s? [y/N] ", match, b.Op, them)
		answer, err := cmd.readLine(ctx)
		if err != nil || !isYes(answer) {
			if err != nil {
				fmt.Fprintln(cmd.stderr)
			}
			why := "not confirmed"
			if errors.Is(err, context.Canceled) {
				why = "interrupted before its confirmation"
			}
			// The answer is no: nothing of it is applied, and it is not
			// left waiting.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, cerr := cmd.c.CancelBatch(cctx, b.ID, why); cerr != nil {
				return nil, cmd.fail(cerr)
			}
			cmd.errorf("batch %s cancelled: %s; nothing was applied", b.ID, why)
			if errors.Is(err, context.Canceled) {
				return nil, exitInterrupted
			}
			return nil, exitFailed
		}
	default:
		cmd.errorf("batch %s: %s; nothing is applied without a confirmation: pass --yes, or confirm this selection with\n  weft batch confirm %s\nor drop it with\n  weft batch cancel %s", b.ID, match, b.ID, b.ID)
		if cmd.output == "json" {
			cmd.json(b)
		}
		return nil, exitFailed
	}
	b, err = cmd.c.ConfirmBatch(ctx, b.ID)
	if err != nil {
		return nil, cmd.fail(err)
	}
	return b, exitOK
}

// readLine reads a line from stdin, or ends with ctx.
func (cmd *clientCmd) readLine(ctx context.Context) (string, error) {
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(cmd.stdin).ReadString('\n')
		got <- line{s, err}
	}()
	select {
	case l := <-got:
		if l.err != nil && !(errors.Is(l.err, io.EOF) && l.s != "") {
			return "", l.err
		}
		return l.s, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// isYes reports whether an answer to a [y/N] question is yes.
func isYes(answer string) bool {
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true
	}
	return false
}

// readIDs reads instance ids, one a line, from a file or (-) stdin;
// blank lines and lines starting with # are skipped.
func (a *app) readIDs(file string) ([]string, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(a.stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		ids = append(ids, line)
	}
	switch {
	case len(ids) == 0:
		return nil, fmt.Errorf("%s lists no instance id", file)
	case len(ids) > apiv1.MaxBatchIDs:
		return nil, fmt.Errorf("%s lists %d ids, more than %d: select them with --query, or start several batches", file, len(ids), apiv1.MaxBatchIDs)
	}
	return ids, nil
}

// followBatch asks for a batch until done says so, and returns it then.
func (cmd *clientCmd) followBatch(ctx context.Context, b *apiv1.Batch, done func(*apiv1.Batch) bool) (*apiv1.Batch, error) {
	t := time.NewTicker(batchPoll)
	defer t.Stop()
	for !done(b) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		var err error
		if b, err = cmd.c.Batch(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// watchBatch follows a batch until it ends, drawing its progress
// (followProgress). Then it prints the batch (a line, or -o json the
// batch), and exits as batchExit says.
func (cmd *clientCmd) watchBatch(ctx context.Context, b *apiv1.Batch) int {
	b, err := cmd.followProgress(ctx, b)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(b)
	} else {
		fmt.Fprintln(cmd.stdout, printable(endedLine(b), true))
	}
	return cmd.batchExit(b)
}

// batchExit is the exit code of a command that followed b to its end: 0
// when it is done with no item failed, 1 otherwise (saying how to confirm
// one that waits for a confirmation).
func (cmd *clientCmd) batchExit(b *apiv1.Batch) int {
	switch {
	case b.Phase == apiv1.PhaseSelected:
		cmd.errorf("batch %s waits for a confirmation: weft batch confirm %s", b.ID, b.ID)
		return exitFailed
	case b.Phase != apiv1.PhaseDone || b.Counts[apiv1.ItemFailed] > 0:
		return exitFailed
	}
	return exitOK
}

// followProgress follows a batch until it ends or waits for a
// confirmation, and returns it then, drawing its progress meanwhile: a
// bar on stderr when it is a terminal, else a line on stdout when the
// phase changes and at most every batchLineEvery while the counts do
// (none with -o json).
func (cmd *clientCmd) followProgress(ctx context.Context, b *apiv1.Batch) (*apiv1.Batch, error) {
	start := cmd.now()
	var lastLine string
	var lastPhase apiv1.BatchPhase
	var lastAt time.Time
	draw := func(b *apiv1.Batch) {
		switch {
		case cmd.terminal:
			fmt.Fprintf(cmd.stderr, "\r%s \033[K", batchBar(b, cmd.now().Sub(start)))
		case cmd.output == "table":
			line := progressLine(b)
			now := cmd.now()
			if line != lastLine && (b.Phase != lastPhase || now.Sub(lastAt) >= batchLineEvery) {
				fmt.Fprintln(cmd.stdout, printable(line, false))
				lastLine, lastPhase, lastAt = line, b.Phase, now
			}
		}
	}
	b, err := cmd.followBatch(ctx, b, func(b *apiv1.Batch) bool {
		if !b.Phase.Finished() {
			draw(b)
		}
		return b.Phase.Finished() || b.Phase == apiv1.PhaseSelected
	})
	if cmd.terminal {
		if b != nil {
			draw(b)
		}
		fmt.Fprintln(cmd.stderr)
	}
	return b, err
}

// batchOutcomes are the outcomes of a batch item, in the order they are
// shown.
func batchOutcomes() []apiv1.BatchOutcome {
	return []apiv1.BatchOutcome{apiv1.ItemPending, apiv1.ItemDone, apiv1.ItemSkipped, apiv1.ItemFailed, apiv1.ItemCan, apiv1.ItemCannot}
}

// countsLine lists a batch's items by outcome, those it has:
// "done 3, skipped 1"; "none" for none.
func countsLine(counts map[apiv1.BatchOutcome]int) string {
	var parts []string
	for _, o := range batchOutcomes() {
		if n := counts[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// applied is how many of a batch's items have their outcome.
func applied(b *apiv1.Batch) int {
	return b.Matched - b.Counts[apiv1.ItemPending]
}

// progressLine says where a batch is, on one line:
// "batch b-…: applying 120/400 (done 100, skipped 20, pending 280)".
func progressLine(b *apiv1.Batch) string {
	if b.Phase == apiv1.PhaseSelecting {
		return fmt.Sprintf("batch %s: selecting, %d matched so far", b.ID, b.Matched)
	}
	return fmt.Sprintf("batch %s: %s %d/%d (%s)", b.ID, b.Phase, applied(b), b.Matched, countsLine(b.Counts))
}

// barWidth is the width of a progress bar, in cells.
const barWidth = 30

// batchBar draws a batch's progress for a terminal:
// "applying [███████·······]  42%  168/400  done 160, skipped 8  3.1s".
func batchBar(b *apiv1.Batch, elapsed time.Duration) string {
	if b.Phase == apiv1.PhaseSelecting {
		return fmt.Sprintf("selecting  %d matched so far  %.1fs", b.Matched, elapsed.Seconds())
	}
	done, total := applied(b), b.Matched
	frac := 1.0
	if total > 0 {
		frac = float64(done) / float64(total)
	}
	full := int(frac * barWidth)
	bar := strings.Repeat("█", full) + strings.Repeat("·", barWidth-full)
	counts := map[apiv1.BatchOutcome]int{}
	for o, n := range b.Counts {
		if o != apiv1.ItemPending {
			counts[o] = n
		}
	}
	line := fmt.Sprintf("%s [%s] %3.0f%%  %d/%d", b.Phase, bar, frac*100, done, total)
	if c := countsLine(counts); c != "none" {
		line += "  " + c
	}
	return line + fmt.Sprintf("  %.1fs", elapsed.Seconds())
}

// startedLine says what a batch just started does.
func startedLine(b *apiv1.Batch) string {
	what := fmt.Sprintf("%s of %s", b.Op, plural(b.Matched, "instance", "instances"))
	if b.Query != "" && b.Phase == apiv1.PhaseSelecting {
		what = fmt.Sprintf("%s of the instances matching %s", b.Op, b.Query)
	}
	if b.DryRun {
		what += " (dry run)"
	}
	return fmt.Sprintf("batch %s started: %s, %s; follow it with weft batch show %s --watch", b.ID, what, b.Phase, b.ID)
}

// endedLine says how a batch ended.
func endedLine(b *apiv1.Batch) string {
	line := fmt.Sprintf("batch %s %s: %s of %s: %s", b.ID, b.Phase, b.Op, plural(b.Matched, "instance", "instances"), countsLine(b.Counts))
	switch {
	case b.Error != "":
		line += "; " + b.Error
	case b.Cancelled != nil:
		line += "; " + cancelledLine(b.Cancelled)
	}
	if n := b.Counts[apiv1.ItemFailed] + b.Counts[apiv1.ItemSkipped] + b.Counts[apiv1.ItemCannot]; n > 0 {
		line += fmt.Sprintf("\n  (the items and why: weft batch items %s)", b.ID)
	}
	return line
}

// cancelledLine says who cancelled a batch, when and why.
func cancelledLine(c *apiv1.BatchCancellation) string {
	line := "cancelled " + formatTime(c.At) + " by " + c.Actor
	if c.Reason != "" {
		line += ": " + c.Reason
	}
	return line
}

// plural is "1 instance" or "3 instances".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// batchList is weft batch ls.
func (a *app) batchList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch ls")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.Batches(ctx, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "ID\tOP\tPHASE\tMATCHED\tPENDING\tDONE\tSKIPPED\tFAILED\tACTOR\tCREATED\tSELECTION", func(b apiv1.Batch) string {
		c := b.Counts
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s", b.ID, opCell(&b), b.Phase, b.Matched,
			c[apiv1.ItemPending], c[apiv1.ItemDone]+c[apiv1.ItemCan], c[apiv1.ItemSkipped]+c[apiv1.ItemCannot], c[apiv1.ItemFailed],
			b.Actor, formatTime(b.CreatedAt), selection(&b))
	})
}

// opCell is a batch's operation in a table, "migrate (dry run)" for a
// dry run (whose can and cannot are counted as done and skipped).
func opCell(b *apiv1.Batch) string {
	if b.DryRun {
		return string(b.Op) + " (dry run)"
	}
	return string(b.Op)
}

// selection says which instances a batch selects: its query, or how
// many ids it lists.
func selection(b *apiv1.Batch) string {
	if b.Query != "" {
		return b.Query
	}
	return plural(b.IDs, "id", "ids")
}

// batchShow is weft batch show: a batch, and with --watch its progress
// until it ends.
func (a *app) batchShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch show")
	watch := cmd.fs.Bool("watch", false, "follow the batch until it ends")
	pos, ok := cmd.parse(args, 1, 1, "ID [--watch]")
	if !ok {
		return cmd.usageExit()
	}
	b, err := cmd.c.Batch(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	if *watch {
		return cmd.watchBatch(ctx, b)
	}
	if cmd.output == "json" {
		cmd.json(b)
		return exitOK
	}
	var w strings.Builder
	writeBatch(&w, b)
	io.WriteString(cmd.stdout, printable(w.String(), true))
	return exitOK
}

// writeBatch writes a batch for people.
func writeBatch(w io.Writer, b *apiv1.Batch) {
	fmt.Fprintf(w, "id:         %s\n", b.ID)
	fmt.Fprintf(w, "op:         %s\n", opCell(b))
	if b.Query != "" {
		fmt.Fprintf(w, "query:      %s\n", b.Query)
	} else {
		fmt.Fprintf(w, "ids:        %d listed\n", b.IDs)
	}
	if b.Args != nil {
		fmt.Fprintf(w, "args:       %s\n", argsLine(b.Args))
	}
	if b.Reason != "" {
		fmt.Fprintf(w, "reason:     %s\n", b.Reason)
	}
	rate := "unlimited"
	if b.Rate > 0 {
		rate = strconv.FormatFloat(b.Rate, 'f', -1, 64) + " instances/s"
	}
	fmt.Fprintf(w, "rate:       %s\n", rate)
	fmt.Fprintf(w, "started by: %s\n", b.Actor)
	fmt.Fprintf(w, "phase:      %s\n", b.Phase)
	fmt.Fprintf(w, "matched:    %d\n", b.Matched)
	fmt.Fprintf(w, "items:      %s\n", countsLine(b.Counts))
	if b.Error != "" {
		fmt.Fprintf(w, "error:      %s\n", b.Error)
	}
	if b.Cancelled != nil {
		fmt.Fprintf(w, "cancelled:  %s by %s", formatTime(b.Cancelled.At), b.Cancelled.Actor)
		if b.Cancelled.Reason != "" {
			fmt.Fprintf(w, ": %s", b.Cancelled.Reason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "created:    %s\n", formatTime(b.CreatedAt))
	if !b.FinishedAt.IsZero() {
		fmt.Fprintf(w, "finished:   %s\n", formatTime(b.FinishedAt))
	}
	if b.Phase == apiv1.PhaseSelected {
		fmt.Fprintf(w, "waiting for a confirmation: weft batch confirm %s (or weft batch cancel %s)\n", b.ID, b.ID)
	}
}

// argsLine is a batch's arguments on one line, as flags of weft batch
// start say them.
func argsLine(a *apiv1.BatchArgs) string {
	var parts []string
	add := func(name, v string) { parts = append(parts, name+" "+v) }
	if a.Event != "" {
		add("event", a.Event)
	}
	if a.Key != "" {
		add("key", strconv.Quote(a.Key))
	}
	if a.Payload != nil {
		add("payload", compactJSON(a.Payload, 60))
	}
	if a.ToVersion != 0 {
		add("to version", strconv.Itoa(a.ToVersion))
	}
	for _, name := range slices.Sorted(maps.Keys(a.Plugins)) {
		add("plugin", name+"="+shortHash(a.Plugins[name]))
	}
	if a.Retry {
		parts = append(parts, "then retry")
	}
	if a.Resume {
		parts = append(parts, "then resume")
	}
	if a.Step != "" {
		add("step", a.Step)
	}
	return strings.Join(parts, ", ")
}

// batchItems is weft batch items.
func (a *app) batchItems(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch items")
	outcome := cmd.fs.String("outcome", "", "only the items with this `OUTCOME`: pending, done, skipped, failed, can, cannot")
	opts := cmd.listFlags()
	pos, ok := cmd.parse(args, 1, 1, "ID [--outcome O] [--limit N] [--cursor C]")
	if !ok {
		return cmd.usageExit()
	}
	f := client.BatchItemFilter{Outcome: apiv1.BatchOutcome(*outcome), Limit: opts.Limit}
	if opts.Cursor != "" {
		after, err := strconv.ParseUint(opts.Cursor, 10, 64)
		if err != nil {
			cmd.errorf("batch items: --cursor must be a listing's cursor, a sequence number, got %q", opts.Cursor)
			return exitUsage
		}
		f.After = after
	}
	page, err := cmd.c.BatchItems(ctx, pos[0], f)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "SEQ\tINSTANCE\tOUTCOME\tTIME\tREASON", func(it apiv1.BatchItem) string {
		reason := it.Reason
		if reason == "" {
			reason = "-"
		}
		return fmt.Sprintf("%d\t%s\t%s\t%s\t%s", it.Seq, it.InstanceID, it.Outcome, formatTime(it.Time), reason)
	})
}

// batchConfirm is weft batch confirm.
func (a *app) batchConfirm(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch confirm")
	watch := cmd.fs.Bool("watch", false, "follow the batch until it ends")
	pos, ok := cmd.parse(args, 1, 1, "ID [--watch]")
	if !ok {
		return cmd.usageExit()
	}
	b, err := cmd.c.ConfirmBatch(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	if *watch {
		return cmd.watchBatch(ctx, b)
	}
	if cmd.output == "json" {
		cmd.json(b)
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "batch %s: confirmed: %s of %s, %s\n", b.ID, b.Op, plural(b.Matched, "instance", "instances"), b.Phase)
	return exitOK
}

// batchCancel is weft batch cancel.
func (a *app) batchCancel(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("batch cancel")
	reason := cmd.fs.String("reason", "", "why, shown with the batch")
	pos, ok := cmd.parse(args, 1, 1, "ID [--reason R]")
	if !ok {
		return cmd.usageExit()
	}
	b, err := cmd.c.CancelBatch(ctx, pos[0], *reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(b)
		return exitOK
	}
	if b.Cancelled == nil {
		fmt.Fprintf(cmd.stdout, "batch %s: ended already, %s: %s\n", b.ID, b.Phase, countsLine(b.Counts))
		return exitOK
	}
	fmt.Fprintf(cmd.stdout, "batch %s: cancelled; %s not applied\n", b.ID, plural(b.Counts[apiv1.ItemPending], "item", "items"))
	return exitOK
}
