package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// weft instance reset, reset-points and migrate (docs/operations.md,
// "Reset" and "Migrate"): an instance run again from an earlier step, or
// moved to another version of its workflow or plugins.

// instanceResetPoints is weft instance reset-points: the steps an
// instance can be reset to.
func (a *app) instanceResetPoints(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance reset-points")
	pos, ok := cmd.parse(args, 1, 1, "ID")
	if !ok {
		return cmd.usageExit()
	}
	points, err := cmd.c.ResetPoints(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	page := &apiv1.Page[apiv1.ResetPoint]{Items: points}
	return printPage(cmd, page, "STEP\tINDEX\tSEQ\tBEGAN\tVARS\tWHY NOT", func(p apiv1.ResetPoint) string {
		why := p.Reason
		if why == "" {
			why = "-"
		}
		return fmt.Sprintf("%s\t%d\t%d\t%s\t%s\t%s", p.Step, p.Index, p.Seq, formatTime(p.Time), yesNo(p.Vars), why)
	})
}

// instanceReset is weft instance reset.
func (a *app) instanceReset(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance reset")
	step := cmd.fs.String("step", "", "the top-level `STEP` to run the instance again from (weft instance reset-points lists them)")
	reason := cmd.fs.String("reason", "", "why, recorded in the instance's history")
	pos, ok := cmd.parse(args, 1, 1, "ID --step S [--reason R]")
	if !ok {
		return cmd.usageExit()
	}
	if *step == "" {
		cmd.errorf("instance reset: --step is required: the top-level step to run the instance again from (weft instance reset-points %s lists them)", printable(pos[0], false))
		return exitUsage
	}
	in, err := cmd.c.Reset(ctx, pos[0], *step, *reason)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(in)
		return exitOK
	}
	fmt.Fprintln(cmd.stdout, printable(fmt.Sprintf("instance %s: reset to step %s requested (status %s); it applies when the instance next runs", in.ID, *step, in.Status), false))
	return exitOK
}

// instanceMigrate is weft instance migrate: the plan of a move as a
// table, then the move sent (or, with --dry-run, not). An instance that
// cannot move is shown with its problems, and the command exits 1.
func (a *app) instanceMigrate(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("instance migrate")
	version := cmd.fs.Int("to-version", 0, "the workflow `VERSION` to move to (default: the latest)")
	plugins := newPairFlag("NAME=SHA256")
	cmd.fs.Var(plugins, "plugin", "pin the plugin `NAME=SHA256` (repeatable)")
	dryRun := cmd.fs.Bool("dry-run", false, "say whether it can move, and how; send nothing")
	retry := cmd.fs.Bool("retry", false, "once moved, retry the instance (it failed) from its failed step")
	resume := cmd.fs.Bool("resume", false, "once moved, resume the instance (it was paused)")
	reason := cmd.fs.String("reason", "", "why, recorded in the instance's history")
	pos, ok := cmd.parse(args, 1, 1, "ID [--to-version N] [--plugin NAME=SHA256]... [--dry-run] [--retry|--resume] [--reason R]")
	if !ok {
		return cmd.usageExit()
	}
	req := apiv1.MigrateRequest{Version: *version, DryRun: *dryRun, Reason: *reason}
	if len(plugins.value) > 0 {
		req.Plugins = plugins.value
	}
	switch {
	case *retry && *resume:
		cmd.errorf("instance migrate: --retry or --resume, not both: a moved instance is retried (it failed) or resumed (it was paused)")
		return exitUsage
	case *retry:
		req.Then = apiv1.ThenRetry
	case *resume:
		req.Then = apiv1.ThenResume
	}
	plan, err := cmd.c.Migrate(ctx, pos[0], req)
	var p *client.Error
	if errors.As(err, &p) && p.Migration != nil {
		// Refused: the plan says why.
		if cmd.output == "json" {
			cmd.json(p.Migration)
		} else {
			var w strings.Builder
			writePlan(&w, p.Migration)
			io.WriteString(cmd.stdout, printable(w.String(), true))
		}
		cmd.errorf("instance %s: not migrated: %s", printable(pos[0], false), printable(p.Detail, false))
		return exitFailed
	}
	if err != nil {
		return cmd.fail(err)
	}
	code := exitOK
	if *dryRun && !plan.CanMove {
		code = exitFailed
	}
	if cmd.output == "json" {
		cmd.json(plan)
		return code
	}
	var w strings.Builder
	writePlan(&w, plan)
	switch {
	case *dryRun:
		fmt.Fprintln(&w, "dry run: nothing was sent")
	default:
		then := ""
		if req.Then != "" {
			then = ", then a " + string(req.Then)
		}
		fmt.Fprintf(&w, "migration requested%s; it applies when the instance is at rest (weft instance history %s shows instance_migrated)\n", then, plan.Instance)
	}
	io.WriteString(cmd.stdout, printable(w.String(), true))
	return code
}

// writePlan writes a migration's plan for people: whether the instance
// can move, where it is in both versions (a table), the pins that change,
// the notes and the problems.
func writePlan(w io.Writer, p *apiv1.MigrationPlan) {
	can := "can move"
	if !p.CanMove {
		can = "cannot move"
	}
	fmt.Fprintf(w, "instance %s %s from version %d to %d\n", p.Instance, can, p.FromVersion, p.ToVersion)
	if len(p.At) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "STEP\tKIND\tFROM\tTO")
		for _, at := range p.At {
			to := at.To
			if to == "" {
				to = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", at.Step, at.Kind, at.From, to)
		}
		tw.Flush()
	}
	for _, name := range slices.Sorted(maps.Keys(p.Plugins)) {
		pc := p.Plugins[name]
		from := "(not pinned)"
		if pc.From != "" {
			from = shortHash(pc.From)
		}
		fmt.Fprintf(w, "plugin %s: %s → %s\n", name, from, shortHash(pc.To))
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, pr := range p.Problems {
		// The message names the step; the path says where it is.
		line := "problem: " + pr.Message
		if pr.Path != "" {
			line += " (" + pr.Path + ")"
		}
		fmt.Fprintln(w, line)
	}
}
