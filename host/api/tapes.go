package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/tape"
)

// Recorded attempts (docs/http-api.md, "Tapes"): GET .../tapes lists an
// instance's tapes for any reader, without their contents; a tape's
// contents and its replays are an admin's, since they hold the attempt's
// input, output and the answers the host gave it. A tape is addressed by
// its attempt number in the path and its step (path or id) and exec in
// the query (step paths hold brackets and dots, which a query carries as
// they are); the exec may be left out when the step's attempt has one
// recording.

// listTapes answers the summaries of an instance's tapes, in the order of
// its definition and executions.
func (s *Server) listTapes(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	id := param(c, "id")
	if _, err := s.instance(ctx, id); err != nil {
		return err
	}
	recs, err := s.node.Tapes(ctx, id)
	if err != nil {
		return err
	}
	items := make([]apiv1.TapeSummary, len(recs))
	for i, r := range recs {
		items[i] = viewTapeSummary(r)
	}
	return c.JSON(newPage(items, ""))
}

// getTape answers one tape with its contents: as JSON, or its stored
// bytes (the envelope, plugins/tape.Attempt) when asked for
// application/octet-stream.
func (s *Server) getTape(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	key, err := s.tapeKey(c)
	if err != nil {
		return err
	}
	rec, data, err := s.node.Tape(ctx, key)
	if err != nil {
		return err
	}
	if wantsEnvelope(c) {
		c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
		return c.Send(data)
	}
	a, err := tape.UnmarshalAttempt(data)
	if err != nil {
		return fmt.Errorf("api: tape %s does not decode: %w", key, err)
	}
	return c.JSON(viewTape(*rec, a))
}

// wantsEnvelope reports whether the request asks for a tape's stored
// bytes (Accept: application/octet-stream), as weft attempt export
// bundles them, rather than the JSON view.
func wantsEnvelope(c *fiber.Ctx) bool {
	for _, part := range strings.Split(c.Get(fiber.HeaderAccept), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == fiber.MIMEOctetStream {
			return true
		}
	}
	return false
}

// replayTape replays a tape against the version that recorded it (an
// empty body) or a candidate module (an application/wasm body, under the
// plugin upload's limit), and answers the report. The report's outcome
// says how the guest fared; an error is about the replay itself.
func (s *Server) replayTape(c *fiber.Ctx) error {
	if err := requireType(c, true, "application/wasm", fiber.MIMEOctetStream); err != nil {
		return err
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	key, err := s.tapeKey(c)
	if err != nil {
		return err
	}
	var candidate []byte
	if len(c.Request().Body()) > 0 {
		candidate = c.BodyRaw()
	}
	r, err := s.node.ReplayAttempt(ctx, key, candidate)
	if err != nil {
		return err
	}
	return c.JSON(ReplayDocument(r))
}

// tapeKey reads a tape's key from the request: the instance and attempt
// from the path, ?step= and ?exec= from the query. The step is its path
// as the history names it (steps[2].do#1[0]) or its id: an id names the
// step whose tapes of that attempt are at one path (none is a 404,
// several — iterations of a loop — a 409 listing them). Without exec,
// the step's attempt must have exactly one recording: none is a 404,
// several a 409 listing their execs.
func (s *Server) tapeKey(c *fiber.Ctx) (weft.TapeKey, error) {
	key := weft.TapeKey{InstanceID: param(c, "id"), StepPath: c.Query("step"), Exec: c.Query("exec")}
	n, err := strconv.Atoi(param(c, "attempt"))
	if err != nil || n < 1 {
		return key, invalidField("attempt", "must be an attempt number, 1 or more, got %q", param(c, "attempt"))
	}
	key.Attempt = n
	if key.StepPath == "" {
		return key, invalidField("step", "is required: the step's id, or its path as the history names it (GET /v1/instances/{id}/tapes lists them)")
	}
	// A path has brackets (steps[0]); an id never has (abi.ValidName).
	isPath := strings.Contains(key.StepPath, "[")
	if key.Exec != "" && isPath {
		if err := key.Check(); err != nil {
			return key, err
		}
		return key, nil
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	inst, err := s.instance(ctx, key.InstanceID)
	if err != nil {
		return key, err
	}
	recs, err := s.node.Tapes(ctx, key.InstanceID)
	if err != nil {
		return key, err
	}
	if !slices.ContainsFunc(recs, func(r weft.TapeRecord) bool { return r.Key.StepPath == key.StepPath }) && !isPath {
		if key.StepPath, err = s.tapeStepByID(ctx, inst, recs, key); err != nil {
			return key, err
		}
	}
	if key.Exec != "" {
		if err := key.Check(); err != nil {
			return key, err
		}
		return key, nil
	}
	var execs []string
	for _, r := range recs {
		if r.Key.StepPath == key.StepPath && r.Key.Attempt == key.Attempt && !slices.Contains(execs, r.Key.Exec) {
			execs = append(execs, r.Key.Exec)
		}
	}
	switch len(execs) {
	case 0:
		return key, notFoundf("instance %q has no tape of attempt %d of step %q", key.InstanceID, key.Attempt, key.StepPath)
	case 1:
		key.Exec = execs[0]
		return key, nil
	}
	return key, conflictf("attempt %d of step %q of instance %q was recorded in %d executions (%s): say which with ?exec=",
		key.Attempt, key.StepPath, key.InstanceID, len(execs), strings.Join(execs, ", "))
}

// tapeStepByID resolves key.StepPath as a step id against the definition
// inst runs, and returns the one path at which recs (the instance's
// tapes) hold that step's attempt key.Attempt (of execution key.Exec,
// when set). A step that is not in the definition, or has no such tape,
// is a 404; a step whose attempt was recorded at several paths (each
// iteration of a foreach has its own) a 409 listing them.
func (s *Server) tapeStepByID(ctx context.Context, inst *weft.Instance, recs []weft.TapeRecord, key weft.TapeKey) (string, error) {
	id := key.StepPath
	d, err := s.node.Definition(ctx, inst.Workflow, inst.Version)
	if errors.Is(err, weft.ErrNotFound) {
		return "", notFoundf("instance %q has no tape at step path %q, and workflow %q version %d, which it runs, is deleted, so %q cannot be resolved as a step id: pass the step's path (GET /v1/instances/{id}/tapes lists them)",
			inst.ID, id, inst.Workflow, inst.Version, id)
	}
	if err != nil {
		return "", err
	}
	steps, err := node.DefinitionSteps(d)
	if err != nil {
		return "", fmt.Errorf("instance %s: workflow %s version %d: %w", inst.ID, inst.Workflow, inst.Version, err)
	}
	i := slices.IndexFunc(steps, func(st node.StepRef) bool { return st.ID == id })
	if i < 0 {
		return "", notFoundf("instance %q has no tape of step %q: no tape has that step path, and workflow %q version %d has no step with that id",
			inst.ID, id, inst.Workflow, inst.Version)
	}
	var paths []string
	for _, r := range recs {
		if definitionPath(r.Key.StepPath) == steps[i].Path && r.Key.Attempt == key.Attempt && (key.Exec == "" || r.Key.Exec == key.Exec) &&
			!slices.Contains(paths, r.Key.StepPath) {
			paths = append(paths, r.Key.StepPath)
		}
	}
	switch len(paths) {
	case 0:
		return "", notFoundf("instance %q has no tape of attempt %d of step %q (%s)", inst.ID, key.Attempt, id, steps[i].Path)
	case 1:
		return paths[0], nil
	}
	return "", conflictf("attempt %d of step %q of instance %q was recorded at %d step paths (%s): say which with ?step= and the path",
		key.Attempt, id, inst.ID, len(paths), strings.Join(paths, ", "))
}

func viewTapeKey(k weft.TapeKey) apiv1.TapeKey {
	return apiv1.TapeKey{InstanceID: k.InstanceID, StepPath: k.StepPath, Exec: k.Exec, Attempt: k.Attempt}
}

func viewTapeSummary(r weft.TapeRecord) apiv1.TapeSummary {
	return apiv1.TapeSummary{
		Key: viewTapeKey(r.Key), Size: r.Size, Truncated: r.Truncated, Outcome: string(r.Outcome), FailureCode: r.FailureCode,
		RecordedAt: r.RecordedAt, Plugin: r.Plugin, PluginVersion: r.PluginVersion, Activity: r.Activity,
	}
}

// viewTape is a tape with its contents. Nothing is masked beyond what the
// recording masked: a tape holds no secret's value.
func viewTape(r weft.TapeRecord, a *tape.Attempt) apiv1.Tape {
	v := apiv1.Tape{TapeSummary: viewTapeSummary(r), Input: jsonOrNull(a.Input), Output: jsonOrNull(a.Output), Entries: []apiv1.TapeEntry{}}
	if a.FailureCode != "" {
		v.Failure = &apiv1.ReplayFailure{Code: a.FailureCode, Message: a.FailureMessage}
		v.Output = jsonOrNull(nil)
	}
	if a.Tape != nil {
		v.Fresh = a.Tape.Fresh
		for _, e := range a.Tape.Entries {
			te := apiv1.TapeEntry{Kind: string(e.Kind), Value: e.Value}
			te.Ask, te.AskBase64 = textOrBase64(e.Ask)
			te.Answer, te.AnswerBase64 = textOrBase64(e.Answer)
			v.Entries = append(v.Entries, te)
		}
	}
	return v
}

// jsonOrNull returns b, or null when b is empty or not JSON (an output the
// guest returned malformed).
func jsonOrNull(b []byte) []byte {
	if len(b) == 0 || !json.Valid(b) {
		return []byte("null")
	}
	return b
}

// textOrBase64 returns b as a string when it is UTF-8, else its base64
// and true.
func textOrBase64(b []byte) (string, bool) {
	if utf8.Valid(b) {
		return string(b), false
	}
	return base64.StdEncoding.EncodeToString(b), true
}

// ReplayDocument is a replay's report as the API answers it: the document
// `weft attempt replay` and `weft plugin call --replay` print alike.
func ReplayDocument(r *weft.ReplayReport) apiv1.ReplayReport {
	v := apiv1.ReplayReport{
		Key: viewTapeKey(r.Key), Activity: r.Activity, Plugin: r.Plugin, RecordedVersion: r.RecordedVersion,
		ReplayedVersion: r.ReplayedVersion, Outcome: string(r.Outcome), RecordedOutput: r.RecordedOutput, Output: r.Output,
		Left: r.Left, DurationMS: r.Duration.Milliseconds(), Fuel: r.Fuel,
	}
	if f := r.RecordedFailure; f != nil {
		v.RecordedFailure = &apiv1.ReplayFailure{Code: f.Code, Message: f.Message}
	}
	if f := r.Failure; f != nil {
		v.Failure = &apiv1.ReplayFailure{Code: f.Code, Message: f.Message}
	}
	if d := r.Divergence; d != nil {
		v.Divergence = &apiv1.ReplayDivergence{Index: d.Index, Note: d.Note,
			Want: apiv1.ReplayCall{Kind: d.Want.Kind, Ask: d.Want.Ask}, Got: apiv1.ReplayCall{Kind: d.Got.Kind, Ask: d.Got.Ask}}
	}
	return v
}
