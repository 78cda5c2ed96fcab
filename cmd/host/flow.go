package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/weftworks/weft/host/api/apiv1"
)

// The weft flow commands: the keys of the workflows' concurrency limits
// and of the activity steps' (docs/flow-control.md) over the API, who
// holds their slots and who waits in their lines. They only read.

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
	opts := cmd.listFlags()
	pos, ok := cmd.parse(args, 1, 2, "WORKFLOW [KEY] [--limit N] [--cursor C]")
	if !ok {
		return cmd.usageExit()
	}
	key := ""
	if len(pos) == 2 {
		key = pos[1]
	}
	line, err := cmd.c.ConcurrencyKey(ctx, pos[0], key, *opts)
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
	fmt.Fprintf(w, "workflow:  %s\n", k.Workflow)
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
