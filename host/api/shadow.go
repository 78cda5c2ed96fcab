package api

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// shadowTimeout bounds a shadow run's request when the configured
// RequestTimeout is shorter. A run replays up to 2×weft.MaxShadowAttempts
// times, which takes longer than a store's read: it is bounded on its
// own, and ends sooner when its client hangs up or the host shuts down.
const shadowTimeout = 10 * time.Minute

// shadowPlugin runs a candidate module over the plugin's recorded
// attempts (POST /v1/plugins/{name}/shadow): the body is the module, as
// PUT /v1/plugins/{name} takes it, under the plugin upload's limit;
// ?last=, ?workflow= and ?since= select the attempts (weft.TapeQuery).
// It answers the report. Nothing is stored: promoting the candidate is
// the upload.
//
// A run may take minutes, so it does not run under RequestTimeout but
// under shadowTimeout (or RequestTimeout when longer), and stops when the
// client hangs up (nobody would read the report) or Shutdown starts (a
// shutdown does not wait for it: a 503 says to run it again).
func (s *Server) shadowPlugin(c *fiber.Ctx) error {
	if err := requireType(c, true, "application/wasm", fiber.MIMEOctetStream); err != nil {
		return err
	}
	name := param(c, "name")
	q, err := shadowQuery(c)
	if err != nil {
		return err
	}
	if len(c.Request().Body()) == 0 {
		return problemf(fiber.StatusBadRequest, "invalid-request",
			"the candidate module is required: send it as the body (Content-Type: application/wasm), as PUT /v1/plugins/%s takes it", name)
	}
	candidate := c.BodyRaw()

	ctx, hangUp, done := s.holdRequest(c, max(shadowTimeout, s.cfg.RequestTimeout))
	defer done()
	rep, err := s.node.Shadow(ctx, name, candidate, q)
	if err == nil {
		return c.JSON(ShadowDocument(rep))
	}
	select {
	case <-hangUp:
		return hungUp(c)
	default:
	}
	if ctx.Err() != nil && c.UserContext().Err() == nil {
		select {
		case <-s.draining:
			return problemf(fiber.StatusServiceUnavailable, "unavailable",
				"the host is shutting down and stopped the shadow run of plugin %q: run it again", name)
		default:
			return problemf(fiber.StatusServiceUnavailable, "busy",
				"the shadow run of plugin %q did not end within %s: replay fewer attempts (?last=)", name, max(shadowTimeout, s.cfg.RequestTimeout))
		}
	}
	if errors.Is(err, weft.ErrNotFound) {
		return notFoundf("no plugin %q", name)
	}
	return err
}

// shadowQuery reads a shadow run's selection from the query: ?last= (1
// to weft.MaxShadowAttempts, default weft.DefaultShadowAttempts),
// ?workflow= and ?since= (RFC 3339). Each bad value is a 400 naming its
// parameter.
func shadowQuery(c *fiber.Ctx) (weft.TapeQuery, error) {
	var q weft.TapeQuery
	n, err := intParam(c, "last", weft.DefaultShadowAttempts, 1, weft.MaxShadowAttempts)
	if err != nil {
		return q, err
	}
	q.Limit = n
	q.Workflow = c.Query("workflow")
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return q, invalidField("since", "must be an RFC 3339 time such as 2026-11-25T10:00:00Z, got %q", v)
		}
		q.Since = t
	}
	return q, nil
}

// ShadowDocument is a shadow run's report as the API answers it (the
// document `weft plugin shadow -o json` prints and the console shows):
// weft.ShadowReport's fields, with durations in milliseconds, and empty
// lists and counts as [] and {} rather than null.
func ShadowDocument(r *weft.ShadowReport) apiv1.ShadowReport {
	v := apiv1.ShadowReport{
		Plugin: r.Plugin, CandidateVersion: r.CandidateVersion,
		Query:      apiv1.TapeQuery{Plugin: r.Query.Plugin, Workflow: r.Query.Workflow, Since: r.Query.Since, Limit: r.Query.Limit},
		Attempts:   make([]apiv1.ShadowAttempt, 0, len(r.Attempts)),
		DurationMS: r.Duration.Milliseconds(),
		Summary: apiv1.ShadowSummary{
			Attempts: r.Summary.Attempts, Outcomes: make(map[string]int, len(r.Summary.Outcomes)),
			Slower: r.Summary.Slower, Faster: r.Summary.Faster, Alike: r.Summary.Alike,
			Fuel: r.Summary.Fuel, BaselineFuel: r.Summary.BaselineFuel,
		},
	}
	for o, n := range r.Summary.Outcomes {
		v.Summary.Outcomes[string(o)] = n
	}
	for _, a := range r.Attempts {
		v.Attempts = append(v.Attempts, viewShadowAttempt(a))
	}
	return v
}

func viewShadowAttempt(a weft.ShadowAttempt) apiv1.ShadowAttempt {
	return apiv1.ShadowAttempt{
		Key: viewTapeKey(a.Key), Workflow: a.Workflow, Activity: a.Activity, RecordedVersion: a.RecordedVersion, RecordedAt: a.RecordedAt,
		Outcome: string(a.Outcome), Error: a.Error, RecordedOutput: a.RecordedOutput, Output: a.Output, Diff: a.Diff, OutputsOmitted: a.OutputsOmitted,
		RecordedFailure: viewReplayFailure(a.RecordedFailure), Failure: viewReplayFailure(a.Failure), Divergence: viewDivergence(a.Divergence),
		Baseline: string(a.Baseline), Fuel: a.Fuel, BaselineFuel: a.BaselineFuel, Speed: string(a.Speed),
		DurationMS: a.Duration.Milliseconds(), BaselineDurationMS: a.BaselineDuration.Milliseconds(),
	}
}

func viewReplayFailure(f *weft.ReplayFailure) *apiv1.ReplayFailure {
	if f == nil {
		return nil
	}
	return &apiv1.ReplayFailure{Code: f.Code, Message: f.Message}
}

func viewDivergence(d *weft.ReplayDivergence) *apiv1.ReplayDivergence {
	if d == nil {
		return nil
	}
	return &apiv1.ReplayDivergence{Index: d.Index, Note: d.Note,
		Want: apiv1.ReplayCall{Kind: d.Want.Kind, Ask: d.Want.Ask}, Got: apiv1.ReplayCall{Kind: d.Got.Kind, Ask: d.Got.Ask}}
}
