package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/plugins/tape"
)

// weft attempt ls, replay and export (docs/http-api.md, "Tapes"): the
// recorded attempts of an instance, a replay of one against the version
// that recorded it or a candidate module, to see whether a fix would have
// behaved alike given the same world, and a bundle of one to replay
// offline. They call the client's tape methods (host/client/tapes.go)
// and, for a bundle's module, PluginModule.

// maxCandidateBytes bounds a --plugin module read from disk: the host's
// largest plugin body limit (http.plugin_body_limit's upper bound is what
// the host enforces; this only keeps the CLI from reading a huge file).
const maxCandidateBytes = 256 << 20

// attemptList is weft attempt ls INSTANCE_ID.
func (a *app) attemptList(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("attempt ls")
	pos, ok := cmd.parse(args, 1, 1, "INSTANCE_ID")
	if !ok {
		return cmd.usageExit()
	}
	items, err := cmd.c.Tapes(ctx, pos[0])
	if err != nil {
		return cmd.fail(err)
	}
	if items == nil {
		items = []apiv1.TapeSummary{}
	}
	return printPage(cmd, &apiv1.Page[apiv1.TapeSummary]{Items: items}, "STEP\tEXEC\tATTEMPT\tOUTCOME\tCODE\tSIZE\tTRUNCATED\tPLUGIN\tACTIVITY", func(s apiv1.TapeSummary) string {
		code := s.FailureCode
		if code == "" {
			code = "-"
		}
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%d\t%t\t%s@%s\t%s", s.Key.StepPath, s.Key.Exec, s.Key.Attempt, s.Outcome, code, s.Size, s.Truncated,
			s.Plugin, shortHash(s.PluginVersion), s.Activity)
	})
}

// attemptReplay is weft attempt replay INSTANCE_ID --step STEP --attempt
// N [--exec E] [--plugin FILE.wasm], STEP the step's id or path. It exits
// 0 when the replay ended as the recording did (outcome same), 1
// otherwise.
func (a *app) attemptReplay(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("attempt replay")
	step := cmd.fs.String("step", "", "the `STEP`: its id, or its path as weft attempt ls shows it (steps[0], steps[2].do#1[0])")
	attempt := cmd.fs.Int("attempt", 0, "the attempt number `N`, from 1")
	exec := cmd.fs.String("exec", "", "the step's execution `E` (weft attempt ls shows it); needed only when the attempt was recorded in several")
	plugin := cmd.fs.String("plugin", "", "a candidate module `FILE.wasm` to replay in place of the recorded version (admin)")
	pos, ok := cmd.parse(args, 1, 1, "INSTANCE_ID --step STEP --attempt N [--exec E] [--plugin FILE.wasm]")
	if !ok {
		return cmd.usageExit()
	}
	if *step == "" || *attempt < 1 {
		cmd.errorf("attempt replay: --step and --attempt (1 or more) are required (weft attempt ls %s lists them)", printable(pos[0], false))
		return exitUsage
	}
	var body []byte
	if *plugin != "" {
		b, err := readCandidate(*plugin)
		if err != nil {
			cmd.errorf("attempt replay: --plugin: %v", err)
			return exitFailed
		}
		body = b
	}
	r, err := cmd.c.ReplayAttempt(ctx, apiv1.TapeKey{InstanceID: pos[0], StepPath: *step, Exec: *exec, Attempt: *attempt}, body)
	if err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(r)
	} else {
		printReplay(cmd.stdout, r)
	}
	if r.Outcome != "same" {
		return exitFailed
	}
	return exitOK
}

// readCandidate reads a module file, bounded.
func readCandidate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCandidateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > maxCandidateBytes {
		return nil, fmt.Errorf("%s is more than %d bytes", path, maxCandidateBytes)
	}
	return b, nil
}

// printReplay writes a replay's report for people: the outcome, whether
// the outputs are equal, and the first call that differed.
func printReplay(w io.Writer, r *apiv1.ReplayReport) {
	if r.Key.StepPath != "" {
		fmt.Fprintf(w, "replay of %s %s attempt %d (%s.%s): %s\n", printable(r.Key.StepPath, false), printable(r.Key.Exec, false), r.Key.Attempt,
			printable(r.Plugin, false), printable(r.Activity, false), r.Outcome)
	} else {
		fmt.Fprintf(w, "replay of %s.%s: %s\n", printable(r.Plugin, false), printable(r.Activity, false), r.Outcome)
	}
	if r.ReplayedVersion != r.RecordedVersion {
		fmt.Fprintf(w, "  version:  %s (recorded %s)\n", shortHash(r.ReplayedVersion), shortHash(r.RecordedVersion))
	} else {
		fmt.Fprintf(w, "  version:  %s (the recorded one)\n", shortHash(r.ReplayedVersion))
	}
	fmt.Fprintf(w, "  recorded: %s\n", replayEnd(r.RecordedOutput, r.RecordedFailure))
	fmt.Fprintf(w, "  replayed: %s\n", replayEnd(r.Output, r.Failure))
	equal := r.RecordedFailure == nil && r.Failure == nil && bytes.Equal(r.RecordedOutput, r.Output)
	fmt.Fprintf(w, "  outputs equal: %t\n", equal)
	if d := r.Divergence; d != nil {
		fmt.Fprintf(w, "  first differing call: #%d: the tape has %s, the guest asked %s\n", d.Index, replayCall(d.Want), replayCall(d.Got))
	}
	if r.Left > 0 {
		fmt.Fprintf(w, "  calls on the tape never asked: %d\n", r.Left)
	}
}

func replayEnd(out json.RawMessage, f *apiv1.ReplayFailure) string {
	if f != nil {
		return "failed: " + printable(f.Code, false) + ": " + printable(f.Message, false)
	}
	const max = 200
	s := string(out)
	if len(s) > max {
		s = s[:max] + "…"
	}
	return "completed: " + printable(s, false)
}

func replayCall(c apiv1.ReplayCall) string {
	if c.Kind == "" {
		return "nothing (the tape's end)"
	}
	if c.Ask == "" {
		return printable(c.Kind, false)
	}
	return printable(c.Kind, false) + " " + strconv.Quote(c.Ask)
}

// attemptExport is weft attempt export INSTANCE_ID --step STEP --attempt
// N [--exec E] [--module FILE.wasm] --file FILE|-: it writes a bundle
// (plugins/tape.Bundle) of the recorded attempt's envelope and its
// module, which weft plugin call --replay runs offline. The host serves
// both (admin): the envelope, and the module of the version that recorded
// it, which the plugin keeps as its current version or in its history.
// --module supplies the module instead (a version the host no longer
// keeps), checked against the recorded version's hash, as the host's is.
func (a *app) attemptExport(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("attempt export")
	step := cmd.fs.String("step", "", "the `STEP`: its id, or its path as weft attempt ls shows it")
	attempt := cmd.fs.Int("attempt", 0, "the attempt number `N`, from 1")
	exec := cmd.fs.String("exec", "", "the step's execution `E`; needed only when the attempt was recorded in several")
	module := cmd.fs.String("module", "", "the recorded version's module, `FILE.wasm`, instead of the host's copy (its sha256 must be the recorded version)")
	file := cmd.fs.String("file", "", "where to write the bundle, `FILE`, or - for stdout")
	pos, ok := cmd.parse(args, 1, 1, "INSTANCE_ID --step STEP --attempt N [--exec E] [--module FILE.wasm] --file FILE|-")
	if !ok {
		return cmd.usageExit()
	}
	if *step == "" || *attempt < 1 || *file == "" {
		cmd.errorf("attempt export: --step, --attempt (1 or more) and --file are required")
		return exitUsage
	}
	var wasm []byte
	if *module != "" {
		b, err := readCandidate(*module)
		if err != nil {
			cmd.errorf("attempt export: --module: %v", err)
			return exitFailed
		}
		wasm = b
	}
	envelope, err := cmd.c.TapeEnvelope(ctx, apiv1.TapeKey{InstanceID: pos[0], StepPath: *step, Exec: *exec, Attempt: *attempt})
	if err != nil {
		return cmd.fail(err)
	}
	at, err := tape.UnmarshalAttempt(envelope)
	if err != nil {
		cmd.errorf("attempt export: the host's tape does not decode: %v", err)
		return exitFailed
	}
	if wasm == nil {
		// The client checks the bytes against the version.
		if wasm, err = cmd.c.PluginModule(ctx, at.Plugin, at.PluginVersion); err != nil {
			code := cmd.fail(err)
			if errors.Is(err, client.ErrNotFound) {
				fmt.Fprintf(cmd.stderr, "  (the host no longer keeps plugin %s version %s: pass that module with --module FILE.wasm)\n",
					printable(at.Plugin, false), shortHash(at.PluginVersion))
			}
			return code
		}
	}
	b := &tape.Bundle{Module: wasm, Attempt: envelope}
	if sum := b.ModuleSum(); sum != at.PluginVersion {
		cmd.errorf("attempt export: --module %s is version %s, the attempt ran %s version %s: pass that module", *module, shortHash(sum), at.Plugin, shortHash(at.PluginVersion))
		return exitFailed
	}
	data, err := b.Marshal()
	if err != nil {
		cmd.errorf("attempt export: %v", err)
		return exitFailed
	}
	if *file == "-" {
		_, err = cmd.stdout.Write(data)
	} else {
		err = os.WriteFile(*file, data, 0o600)
	}
	if err != nil {
		cmd.errorf("attempt export: writing the bundle: %v", err)
		return exitFailed
	}
	if *file != "-" {
		fmt.Fprintf(cmd.stderr, "wrote %s: %s.%s attempt %d, %d bytes (weft plugin call --replay %s runs it)\n", *file, at.Plugin, at.Activity, *attempt, len(data), *file)
	}
	return exitOK
}
