package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// The weft flow commands: the keys of the workflows' concurrency limits
// and of the activity steps' (docs/flow-control.md) over the API, who
// holds their slots and who waits in their lines; and the rate limits'
// keys with the turns they have granted. They only read.

// flowKey is a concurrency key as the tables show it: quoted, so that the
// workflow-wide key "" is seen, and a key with spaces reads as one.
func flowKey(key string) string { return strconv.Quote(key) }

// flowWorkflow is the workflow column of a key: "(steps)" for a key of
// activity steps' limits, which steps of any workflow share.
func flowWorkflow(k apiv1.ConcurrencyKey) string {
	if k.Step {
		return "(steps)"
	}
	return k.Workflow
}

// flowRunning is a key's running count against its limit, with those
// being cancelled (which keep their slot until they end).
func flowRunning(k apiv1.ConcurrencyKey) string {
	s := fmt.Sprintf("%d/%d", k.Running, k.Limit)
	if k.Cancelling > 0 {
		s += fmt.Sprintf(" (%d cancelling)", k.Cancelling)
	}
	return s
}

func (a *app) flowList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("flow ls")
	workflow := cmd.fs.String("workflow", "", "only the keys of the workflow `W`")
	opts := cmd.listFlags()
	if _, ok := cmd.parse(args, 0, 0, "[--workflow W] [--limit N] [--cursor C]"); !ok {
		return cmd.usageExit()
	}
	page, err := cmd.c.ConcurrencyKeys(ctx, *workflow, *opts)
	if err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, page, "WORKFLOW\tKEY\tRUNNING/LIMIT\tWAITING\tOLDEST WAIT\tPOLICY", func(k apiv1.ConcurrencyKey) string {
		return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", flowWorkflow(k), flowKey(k.Key), flowRunning(k), k.Waiting, formatTime(k.OldestWait), k.Policy)
	})
}

func (a *app) flowShow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("flow show")
	step := cmd.fs.String("step", "", "show the key `KEY` of the activity steps' concurrency limits, which the steps of any workflow share, instead of a workflow's")
	opts := cmd.listFlags()
	const what = "WORKFLOW [KEY] | --step KEY [--limit N] [--cursor C]"
	pos, ok := cmd.parse(args, 0, 2, what)
	if !ok {
		return cmd.usageExit()
	}
	stepSet := false
	cmd.fs.Visit(func(f *flag.Flag) { stepSet = stepSet || f.Name == "step" })
	switch {
	case stepSet && *step == "":
		cmd.errorf("flow show: --step needs a KEY: a step's key is never empty\nusage: weft flow show %s", what)
		return exitUsage
	case stepSet && len(pos) > 0:
		cmd.errorf("flow show: unexpected argument %q: --step shows a key of the steps, not a workflow's\nusage: weft flow show %s", pos[0], what)
		return exitUsage
	case !stepSet && len(pos) == 0:
		cmd.errorf("flow show: missing WORKFLOW [KEY]\nusage: weft flow show %s", what)
		return exitUsage
	}
	var (
		line *apiv1.ConcurrencyLine
		err  error
	)
	if stepSet {
		line, err = cmd.c.StepConcurrencyKey(ctx, *step, *opts)
	} else {
		key := ""
		if len(pos) == 2 {
			key = pos[1]
		}
		line, err = cmd.c.ConcurrencyKey(ctx, pos[0], key, *opts)
	}
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(line)
		return exitOK
	}
	var w strings.Builder
	writeFlowKey(&w, line, opts.Cursor != "")
	io.WriteString(cmd.stdout, printable(w.String(), true))
	cmd.nextPage(line.NextCursor)
	return exitOK
}

// writeFlowKey writes a concurrency key for people: its terms, its
// holders, and a page of its line (a later one when later is set, whose
// places are not counted from the front).
func writeFlowKey(w io.Writer, line *apiv1.ConcurrencyLine, later bool) {
	k := line.Key
	fmt.Fprintf(w, "workflow:  %s\n", flowWorkflow(k))
	fmt.Fprintf(w, "key:       %s\n", flowKey(k.Key))
	fmt.Fprintf(w, "limit:     %d, policy %s\n", k.Limit, k.Policy)
	running := fmt.Sprintf("%d", k.Running)
	if k.Cancelling > 0 {
		running += fmt.Sprintf(", %d being cancelled", k.Cancelling)
	}
	fmt.Fprintf(w, "running:   %s\n", running)
	waiting := fmt.Sprintf("%d", k.Waiting)
	if k.Waiting > 0 {
		waiting += ", the first since " + formatTime(k.OldestWait)
	}
	fmt.Fprintf(w, "waiting:   %s\n", waiting)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(k.Holders) == 0 {
		fmt.Fprintln(tw, "holders:   none")
	} else {
		fmt.Fprintln(tw, "holders:")
		fmt.Fprintln(tw, "  INSTANCE\tSINCE\tCANCELLING")
		for _, h := range k.Holders {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", printable(h.InstanceID, false), formatTime(h.Since), yesNo(h.Cancelling))
		}
	}
	switch {
	case len(line.Waiting) == 0 && !later:
		fmt.Fprintln(tw, "line:      empty")
	case len(line.Waiting) == 0:
		fmt.Fprintln(tw, "line:      no more")
	default:
		fmt.Fprintln(tw, "line:      first in line first")
		if later {
			fmt.Fprintln(tw, "  INSTANCE\tSINCE")
		} else {
			fmt.Fprintln(tw, "  #\tINSTANCE\tSINCE")
		}
		for i, wt := range line.Waiting {
			if later {
				fmt.Fprintf(tw, "  %s\t%s\n", printable(wt.InstanceID, false), formatTime(wt.Since))
			} else {
				fmt.Fprintf(tw, "  %d\t%s\t%s\n", i+1, printable(wt.InstanceID, false), formatTime(wt.Since))
			}
		}
	}
	tw.Flush()
}

func (a *app) flowRates(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("flow rates")
	kind := cmd.fs.String("kind", "", "only the keys of `KIND`: step (activity steps' rate_limit) or host (grants' host rules)")
	prefix := cmd.fs.String("prefix", "", "only the keys that start with `P`")
	limit := cmd.fs.Int("limit", 0, "at most `N` keys (default 100, at most 1000)")
	if _, ok := cmd.parse(args, 0, 0, "[--kind step|host] [--prefix P] [--limit N]"); !ok {
		return cmd.usageExit()
	}
	rates, err := cmd.c.RateLimits(ctx, client.RateLimitFilter{Kind: apiv1.RateLimitKind(*kind), Prefix: *prefix, Limit: *limit})
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(rates)
		return exitOK
	}
	now := a.now()
	tw := cmd.table()
	fmt.Fprintln(tw, "KIND\tKEY\tLIMIT\tAHEAD\tNEXT TURN")
	for _, k := range rates.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", printable(string(k.Kind), false), printable(flowKey(k.Key), false),
			rateTerms(k.Limit, k.Per, k.Burst), k.Ahead, nextTurn(k.NextTurn, now))
	}
	tw.Flush()
	if rates.Truncated {
		fmt.Fprintln(cmd.stderr, "(more: narrow with --prefix, or raise --limit)")
	}
	return exitOK
}

// rateTerms is a rate limit's terms for people: "10 per 1s, burst 20",
// the period as short as it goes ("1h", not "1h0m0s").
func rateTerms(limit int, per string, burst int) string {
	return fmt.Sprintf("%d per %s, burst %d", limit, shortDuration(per), burst)
}

// shortDuration drops the zero units a Go duration string ends with:
// "1h0m0s" is "1h", "2m0s" "2m"; anything else stays as it is.
func shortDuration(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil || d == 0 {
		return s
	}
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// nextTurn is when a rate limit's next turn comes: "now" when it has
// come, else the time and how far it is from now.
func nextTurn(at, now time.Time) string {
	d := at.Sub(now)
	if d <= 0 {
		return "now"
	}
	if d < time.Second {
		d = d.Round(time.Millisecond)
	} else {
		d = d.Round(time.Second)
	}
	return fmt.Sprintf("%s (in %s)", formatTime(at), shortDuration(d.String()))
}
