package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/plugins/tape"
)

// weft attempt ls and replay (docs/http-api.md, "Tapes"): the recorded
// attempts of an instance, and a replay of one against the version that
// recorded it or a candidate module, to see whether a fix would have
// behaved alike given the same world. The client library has no methods
// for these routes yet, so the commands speak to them directly, with the
// same token, and read their problems into a client.Error so that
// cmd.fail prints them as every other command's.

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
	var page apiv1.Page[apiv1.TapeSummary]
	if err := cmd.tapeRequest(ctx, http.MethodGet, tapesPath(pos[0]), nil, nil, &page); err != nil {
		return cmd.fail(err)
	}
	return printPage(cmd, &page, "STEP\tEXEC\tATTEMPT\tOUTCOME\tCODE\tSIZE\tTRUNCATED\tPLUGIN\tACTIVITY", func(s apiv1.TapeSummary) string {
		code := s.FailureCode
		if code == "" {
			code = "-"
		}
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%s\t%d\t%t\t%s@%s\t%s", s.Key.StepPath, s.Key.Exec, s.Key.Attempt, s.Outcome, code, s.Size, s.Truncated,
			s.Plugin, shortHash(s.PluginVersion), s.Activity)
	})
}

// attemptReplay is weft attempt replay INSTANCE_ID --step STEP --attempt
// N [--exec E] [--plugin FILE.wasm]. It exits 0 when the replay ended as
// the recording did (outcome same), 1 otherwise.
func (a *app) attemptReplay(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("attempt replay")
	step := cmd.fs.String("step", "", "the `STEP`'s path as weft attempt ls shows it (steps[0], steps[2].do[1])")
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
	q := url.Values{"step": {*step}}
	if *exec != "" {
		q.Set("exec", *exec)
	}
	var r apiv1.ReplayReport
	if err := cmd.tapeRequest(ctx, http.MethodPost, tapesPath(pos[0])+"/"+strconv.Itoa(*attempt)+"/replay", q, body, &r); err != nil {
		return cmd.fail(err)
	}
	if cmd.output == "json" {
		cmd.json(r)
	} else {
		printReplay(cmd.stdout, &r)
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

// tapesPath is the path of an instance's tapes, its id escaped as one
// segment.
func tapesPath(id string) string {
	return "/v1/instances/" + url.PathEscape(id) + "/tapes"
}

// tapeRequest sends a request to a tape route and decodes its JSON answer
// into out, or, when out is a *[]byte, asks for and keeps the answer's
// bytes as they are; a problem answer is a *client.Error, a request that does not
// reach the host a *client.TransportError.
func (cmd *clientCmd) tapeRequest(ctx context.Context, method, path string, q url.Values, body []byte, out any) error {
	u := strings.TrimRight(cmd.server, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if len(body) > 0 {
		req.Header.Set("Content-Type", "application/wasm")
	}
	raw, wantRaw := out.(*[]byte)
	if wantRaw {
		req.Header.Set("Accept", "application/octet-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	req.Header.Set("User-Agent", "weft-cli")
	if cmd.token != "" {
		req.Header.Set("Authorization", "Bearer "+cmd.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &client.TransportError{Method: method, URL: u, Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &client.TransportError{Method: method, URL: u, Err: err}
	}
	if resp.StatusCode >= 300 {
		var p client.Error
		if json.Unmarshal(b, &p.Problem) != nil || p.Status == 0 {
			p.Problem = apiv1.Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(b))}
		}
		return &p
	}
	if wantRaw {
		*raw = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// attemptExport is weft attempt export INSTANCE_ID --step STEP --attempt
// N [--exec E] --module FILE.wasm --file FILE|-: it writes a bundle
// (plugins/tape.Bundle) of the recorded attempt's envelope and its
// module, which weft plugin call --replay runs offline. The host serves
// the envelope (admin); the module is the caller's copy of the recorded
// version, checked against its hash, since the API serves no module.
func (a *app) attemptExport(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("attempt export")
	step := cmd.fs.String("step", "", "the `STEP`'s path as weft attempt ls shows it")
	attempt := cmd.fs.Int("attempt", 0, "the attempt number `N`, from 1")
	exec := cmd.fs.String("exec", "", "the step's execution `E`; needed only when the attempt was recorded in several")
	module := cmd.fs.String("module", "", "the recorded version's module, `FILE.wasm` (its sha256 must be the recorded version)")
	file := cmd.fs.String("file", "", "where to write the bundle, `FILE`, or - for stdout")
	pos, ok := cmd.parse(args, 1, 1, "INSTANCE_ID --step STEP --attempt N [--exec E] --module FILE.wasm --file FILE|-")
	if !ok {
		return cmd.usageExit()
	}
	if *step == "" || *attempt < 1 || *module == "" || *file == "" {
		cmd.errorf("attempt export: --step, --attempt (1 or more), --module and --file are required")
		return exitUsage
	}
	wasm, err := readCandidate(*module)
	if err != nil {
		cmd.errorf("attempt export: --module: %v", err)
		return exitFailed
	}
	q := url.Values{"step": {*step}}
	if *exec != "" {
		q.Set("exec", *exec)
	}
	var envelope []byte
	if err := cmd.tapeRequest(ctx, http.MethodGet, tapesPath(pos[0])+"/"+strconv.Itoa(*attempt), q, nil, &envelope); err != nil {
		return cmd.fail(err)
	}
	at, err := tape.UnmarshalAttempt(envelope)
	if err != nil {
		cmd.errorf("attempt export: the host's tape does not decode: %v", err)
		return exitFailed
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
