package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// weft plugin shadow (docs/replay.md, "Shadow runs"): a candidate module
// replayed over a plugin's recorded attempts on the host, next to the
// versions that recorded them, before anyone uploads it.

// pluginShadow is weft plugin shadow NAME FILE.wasm [--last N]
// [--workflow W] [--since T]. It prints a line per attempt and a summary
// (-o json: the API's report), and exits 0 when the candidate replayed
// every attempt to the same end as the recording (outcome same), 1
// otherwise: as weft attempt replay does for one attempt, so that a
// script can gate an upload on it.
func (a *app) pluginShadow(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("plugin shadow")
	last := cmd.fs.Int("last", 0, "replay the newest `N` recorded attempts, 1 to 1000 (default: the host's, 100)")
	workflow := cmd.fs.String("workflow", "", "only the attempts of instances of workflow `W`")
	since := cmd.fs.String("since", "", "only the attempts recorded since `T`: RFC 3339 (2026-11-25T10:00:00Z) or a duration ago (24h)")
	const what = "NAME FILE.wasm [--last N] [--workflow W] [--since T]"
	pos, ok := cmd.parse(args, 2, 2, what)
	if !ok {
		return cmd.usageExit()
	}
	if *last < 0 || *last > 1000 {
		cmd.errorf("plugin shadow: --last must be from 1 to 1000, got %d", *last)
		return exitUsage
	}
	q := client.ShadowQuery{Last: *last, Workflow: *workflow}
	var err error
	if q.Since, err = parseWhen(*since, a.now()); err != nil {
		cmd.errorf("plugin shadow: --since: %v", err)
		return exitUsage
	}
	wasm, err := readCandidate(pos[1])
	if err != nil {
		cmd.errorf("plugin shadow: %v", err)
		return exitFailed
	}
	rep, err := cmd.c.Shadow(ctx, pos[0], wasm, q)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(rep)
	} else {
		printShadow(cmd.stdout, rep)
	}
	if rep.Summary.Attempts == 0 {
		fmt.Fprintf(cmd.stderr, "weft: no recorded attempt of plugin %s matched: nothing was compared (docs/replay.md says which attempts are recorded)\n", printable(pos[0], false))
	}
	if rep.Summary.Outcomes["same"] != rep.Summary.Attempts {
		return exitFailed
	}
	return exitOK
}

// shadowOutcomes is the order in which the summary counts outcomes: from
// the most alike to not run; others, which a newer host may answer,
// follow by name.
var shadowOutcomes = []string{"same", "ended_early", "different_output", "failed", "diverged", "truncated", "not_run"}

// printShadow writes a shadow run's report for people: what ran, a table
// of the attempts, and the summary.
func printShadow(w io.Writer, r *apiv1.ShadowReport) {
	sel := []string{fmt.Sprintf("the newest %d", r.Query.Limit)}
	if r.Query.Workflow != "" {
		sel = append(sel, "of workflow "+printable(r.Query.Workflow, false))
	}
	if !r.Query.Since.IsZero() {
		sel = append(sel, "since "+r.Query.Since.Local().Format(time.RFC3339))
	}
	fmt.Fprintf(w, "shadow run of plugin %s, candidate %s: %d attempts (%s), %s\n", printable(r.Plugin, false), shortHash(r.CandidateVersion),
		r.Summary.Attempts, strings.Join(sel, ", "), (time.Duration(r.DurationMS) * time.Millisecond).String())
	if len(r.Attempts) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INSTANCE\tSTEP\tATTEMPT\tACTIVITY\tOUTCOME\tSPEED\tFUEL\tDETAIL")
		for _, at := range r.Attempts {
			speed := at.Speed
			if speed == "" {
				speed = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", printable(at.Key.InstanceID, false), printable(at.Key.StepPath, false), at.Key.Attempt,
				printable(at.Activity, false), printable(at.Outcome, false), printable(speed, false), fuelRatio(at.Fuel, at.BaselineFuel), shadowDetail(at))
		}
		tw.Flush()
	}
	var counts []string
	for _, o := range shadowOutcomes {
		if n := r.Summary.Outcomes[o]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, o))
		}
	}
	var others []string
	for o := range r.Summary.Outcomes {
		if !slices.Contains(shadowOutcomes, o) {
			others = append(others, o)
		}
	}
	slices.Sort(others)
	for _, o := range others {
		counts = append(counts, fmt.Sprintf("%d %s", r.Summary.Outcomes[o], printable(o, false)))
	}
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	fmt.Fprintf(w, "summary: %s; speed: %d slower, %d faster, %d alike; fuel %s the baseline's\n",
		strings.Join(counts, ", "), r.Summary.Slower, r.Summary.Faster, r.Summary.Alike, fuelRatio(r.Summary.Fuel, r.Summary.BaselineFuel))
}

// fuelRatio is the candidate's guest work over the baseline's, as
// "1.08x"; "-" when either did not run.
func fuelRatio(fuel, baseline uint64) string {
	if fuel == 0 || baseline == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(fuel)/float64(baseline), 'f', 2, 64) + "x"
}

// maxDetail bounds a table row's detail, in runes.
const maxDetail = 120

// shadowDetail says in a few words why an attempt is not the same: the
// diff of a different output, the failure, the divergence's note, why it
// did not run; and that the baseline did not replay the tape either.
func shadowDetail(at apiv1.ShadowAttempt) string {
	var d string
	switch {
	case at.Outcome == "not_run":
		d = at.Error
	case at.Diff != nil:
		d = compactPatch(at.Diff)
	case at.Divergence != nil:
		d = at.Divergence.Note
	case at.Failure != nil && at.Outcome != "same":
		d = at.Failure.Code + ": " + at.Failure.Message
	case at.Outcome == "different_output" && at.OutputsOmitted:
		d = "outputs over 16 KiB left out: weft attempt replay shows them"
	case at.Outcome == "different_output":
		d = "output " + compactJSON(at.Output, maxDetail)
	}
	if at.Baseline != "" && at.Baseline != "same" {
		d = strings.TrimPrefix(d+"; baseline "+at.Baseline, "; ")
	}
	if d == "" {
		return "-"
	}
	if r := []rune(d); len(r) > maxDetail {
		d = string(r[:maxDetail-1]) + "…"
	}
	return printable(d, false)
}

// compactPatch writes a JSON Patch on one line, an operation after
// another: replace /total 12; remove /note; move /a from /b. A patch
// that does not decode is written as its JSON.
func compactPatch(raw json.RawMessage) string {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		From  string          `json:"from"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &ops); err != nil {
		return compactJSON(raw, maxDetail)
	}
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		p := op.Path
		if p == "" {
			p = "/" // the whole document
		}
		s := op.Op + " " + p
		switch {
		case op.From != "":
			s += " from " + op.From
		case string(op.Value) == "null":
			s += " null"
		case op.Op != "remove" && op.Value != nil:
			s += " " + compactJSON(op.Value, 40)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
