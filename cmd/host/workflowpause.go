package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/weftworks/weft/host/api/apiv1"
)

// weft workflow pause and resume: a whole workflow's pause
// (docs/operations.md, "Pause a workflow"). While it is paused its starts
// are held; its resume releases them through a batch job, which --watch
// follows as weft batch show --watch does.

func (a *app) workflowPause(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow pause")
	reason := cmd.fs.String("reason", "", "why, shown with the pause and recorded in each held start's history")
	pos, ok := cmd.parse(args, 1, 1, "NAME [--reason R]")
	if !ok {
		return cmd.usageExit()
	}
	p, err := cmd.c.PauseWorkflow(ctx, pos[0], *reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(p)
		return exitOK
	}
	fmt.Fprintln(cmd.stdout, printable(fmt.Sprintf("workflow %s paused %s; its new starts are held until weft workflow resume %s",
		p.Workflow, workflowPausedLine(p), p.Workflow), false))
	return exitOK
}

// workflowResume is weft workflow resume: the workflow resumed, and the
// id of the batch that releases its held starts (-o json: the API's
// answer); with --watch, that batch followed to its end, exiting as weft
// batch show --watch does.
func (a *app) workflowResume(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("workflow resume")
	reason := cmd.fs.String("reason", "", "why, the release batch's reason")
	var rate *float64
	cmd.fs.Func("rate", "release at most `N` held starts a second (default 1000; 0: no limit)", func(s string) error {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("want a number of starts per second")
		}
		rate = &r
		return nil
	})
	watch := cmd.fs.Bool("watch", false, "follow the release until it ends: a progress bar on a terminal, lines otherwise")
	pos, ok := cmd.parse(args, 1, 1, "NAME [--reason R] [--rate N] [--watch]")
	if !ok {
		return cmd.usageExit()
	}
	res, err := cmd.c.ResumeWorkflow(ctx, pos[0], apiv1.WorkflowResumeRequest{Reason: *reason, Rate: rate})
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output != "json" {
		fmt.Fprintln(cmd.stdout, printable(fmt.Sprintf("workflow %s resumed (paused %s); its held starts are released, oldest first, by batch %s",
			res.Pause.Workflow, workflowPausedLine(&res.Pause), res.Release.ID), false))
	}
	if !*watch {
		if cmd.output == "json" {
			cmd.json(res)
		} else {
			fmt.Fprintf(cmd.stdout, "follow it with weft batch show %s --watch\n", res.Release.ID)
		}
		return exitOK
	}
	b, err := cmd.followProgress(ctx, res.Release)
	if err != nil {
		return cmd.fail(err)
	}
	res.Release = b
	if cmd.output == "json" {
		cmd.json(res)
	} else {
		fmt.Fprintln(cmd.stdout, printable(endedLine(b), true))
	}
	return cmd.batchExit(b)
}

// workflowPausedLine says since when a workflow is paused, by whom and
// why, and how many starts it holds when they were counted: "since
// 2026-11-29 16:20:11 by alice: bad release (3 held starts)".
func workflowPausedLine(p *apiv1.WorkflowPause) string {
	line := "since " + formatTime(p.Since)
	if p.Actor != "" {
		line += " by " + p.Actor
	}
	if p.Reason != "" {
		line += ": " + p.Reason
	}
	if p.Held != nil {
		held := plural(*p.Held, "held start", "held starts")
		if p.HeldMore {
			held = "at least " + held
		}
		line += " (" + held + ")"
	}
	return line
}

// pausedCell is a workflow's pause in one cell of weft workflow ls: "-"
// when it is not paused.
func pausedCell(p *apiv1.WorkflowPause) string {
	if p == nil {
		return "-"
	}
	cell := "since " + formatTime(p.Since)
	if p.Actor != "" {
		cell += " by " + printable(p.Actor, false)
	}
	return cell
}
