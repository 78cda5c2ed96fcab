package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// Recorded attempts (docs/replay.md, docs/http-api.md "Tapes" and "Shadow
// runs"): an instance's tapes, one tape's contents, a replay of one, and
// a shadow run of a candidate module over a plugin's tapes. Listing is a
// reader's; the rest, which holds the attempts' inputs and outputs, an
// admin's.

// Tapes lists the recorded attempts of an instance, without their
// contents, in the order of its definition and executions (one page
// holds them all); an *Error matching ErrNotFound when there is no such
// instance.
func (c *Client) Tapes(ctx context.Context, instanceID string) ([]apiv1.TapeSummary, error) {
	var p apiv1.Page[apiv1.TapeSummary]
	if err := c.getJSON(ctx, tapesPath(instanceID), nil, &p); err != nil {
		return nil, err
	}
	return p.Items, nil
}

// Tape returns one recorded attempt with its contents: its input, its
// output or failure, and every answer the host gave it (admin). key
// names it as Tapes lists it; its StepPath may be the step's id instead
// of its path, and its Exec may be empty when the step's attempt was
// recorded in one execution (an *Error matching ErrConflict lists them
// otherwise).
func (c *Client) Tape(ctx context.Context, key apiv1.TapeKey) (*apiv1.Tape, error) {
	path, q, err := tapeRoute(key)
	if err != nil {
		return nil, err
	}
	var t apiv1.Tape
	if err := c.getJSON(ctx, path, q, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// TapeEnvelope returns the stored bytes of a recorded attempt (admin),
// its envelope (plugins/tape.Attempt's encoding), as weft attempt export
// bundles it with its module for an offline replay. key is as Tape
// takes it.
func (c *Client) TapeEnvelope(ctx context.Context, key apiv1.TapeKey) ([]byte, error) {
	path, q, err := tapeRoute(key)
	if err != nil {
		return nil, err
	}
	_, data, _, err := c.read(ctx, request{method: http.MethodGet, path: path, query: q}, "application/octet-stream")
	return data, err
}

// ReplayAttempt runs a recorded attempt again on the host, answered from
// its tape, and returns how the replay compares with the recording
// (admin). With a nil candidate the version that recorded it runs; with
// a module, that candidate runs in its place, without becoming a version
// of any plugin. The report's Outcome says how the guest fared; an error
// is about the replay: no such tape (ErrNotFound), a candidate that does
// not load or lacks the activity (ErrInvalid). key is as Tape takes it.
func (c *Client) ReplayAttempt(ctx context.Context, key apiv1.TapeKey, candidate []byte) (*apiv1.ReplayReport, error) {
	path, q, err := tapeRoute(key)
	if err != nil {
		return nil, err
	}
	r := request{method: http.MethodPost, path: path + "/replay", query: q}
	if len(candidate) > 0 {
		r.body, r.ctype = candidate, "application/wasm"
	}
	var rep apiv1.ReplayReport
	if _, err := c.do(ctx, r, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// ShadowQuery selects the recorded attempts a shadow run replays; the
// zero value selects the server's default, the newest
// 100 of every workflow's.
type ShadowQuery struct {
	// Last is how many, the newest: 1 to 1000; 0 lets the server choose
	// (100).
	Last int
	// Workflow, when set, keeps the attempts of that workflow's
	// instances.
	Workflow string
	// Since, when not zero, keeps the attempts recorded at or after it.
	Since time.Time
}

// Shadow runs candidate, a module, over the recorded attempts of
// plugin's activities that q selects, each replayed on its tape next to
// the version that recorded it, and returns the report (admin;
// docs/replay.md, "Shadow runs"). Nothing changes on the host: PutPlugin
// with the same module promotes it. The call lasts as long as the
// replays, up to minutes: bound it with ctx. An unknown plugin is an
// *Error matching ErrNotFound; a module that does not load one with
// Status 422 listing the reasons.
func (c *Client) Shadow(ctx context.Context, plugin string, candidate []byte, q ShadowQuery) (*apiv1.ShadowReport, error) {
	v := url.Values{}
	if q.Last != 0 {
		v.Set("last", strconv.Itoa(q.Last))
	}
	if q.Workflow != "" {
		v.Set("workflow", q.Workflow)
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	r := request{method: http.MethodPost, path: "/v1/plugins/" + seg(plugin) + "/shadow", query: v, body: candidate, ctype: "application/wasm"}
	var rep apiv1.ShadowReport
	if _, err := c.do(ctx, r, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// tapesPath is the path of an instance's tapes.
func tapesPath(instanceID string) string {
	return "/v1/instances/" + seg(instanceID) + "/tapes"
}

// tapeRoute returns the path and query that name the tape key: the
// attempt in the path, the step and exec in the query.
func tapeRoute(key apiv1.TapeKey) (string, url.Values, error) {
	if key.InstanceID == "" || key.StepPath == "" || key.Attempt < 1 {
		return "", nil, fmt.Errorf("client: tape %+v: the instance id, the step and an attempt from 1 are required", key)
	}
	q := url.Values{"step": {key.StepPath}}
	if key.Exec != "" {
		q.Set("exec", key.Exec)
	}
	return tapesPath(key.InstanceID) + "/" + strconv.Itoa(key.Attempt), q, nil
}
