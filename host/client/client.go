// Package client is a Go client for Weft's HTTP API (host/api). The weft
// command-line client is built on it, and so are tests that drive a real
// host over HTTP.
//
// The documents it sends and decodes are those of host/api/apiv1, the
// API's wire contract, which the API encodes: the client imports that
// package and the standard library, nothing else of the host.
//
// Every method returns the decoded answer, or an error that is either an
// *Error (the server answered with an error status; its Problem is the
// answer's problem document, and errors.Is matches it against ErrNotFound,
// ErrUnauthorized, ErrForbidden, ErrConflict, ErrStale, ErrInvalid,
// ErrUnavailable, and a search's ErrInvalidQuery) or a *TransportError (no answer: the server could not be
// reached, or the answer could not be read). A method returns ctx.Err()
// when ctx ends first.
//
//	c, err := client.New(client.Config{Server: "http://127.0.0.1:8080", Token: token})
//	inst, _, err := c.Start(ctx, "hello", apiv1.StartRequest{Input: json.RawMessage(`{"name":"Ada"}`)}, 10*time.Second)
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// Config configures a Client.
type Config struct {
	// Server is the host's base URL, e.g. http://127.0.0.1:8080. Required.
	Server string
	// Token is the bearer token; empty sends none.
	Token string
	// HTTPClient sends the requests. Defaults to a client without an
	// overall timeout (a start with ?wait= may take minutes): bound calls
	// with their context.
	HTTPClient *http.Client
	// UserAgent is sent with every request. Defaults to "weft-client".
	UserAgent string
}

// Client calls one Weft host. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	ua    string
}

// New returns a Client for cfg.Server.
func New(cfg Config) (*Client, error) {
	if cfg.Server == "" {
		return nil, errors.New("client: Config.Server is required")
	}
	u, err := url.Parse(strings.TrimRight(cfg.Server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server %q: want an http:// or https:// URL such as http://127.0.0.1:8080", cfg.Server)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "weft-client"
	}
	return &Client{base: u, token: cfg.Token, hc: cfg.HTTPClient, ua: cfg.UserAgent}, nil
}

// Server returns the base URL the client calls.
func (c *Client) Server() string { return c.base.String() }

// request is one API call.
type request struct {
	method string
	path   string // escaped, from the root: /v1/plugins/x
	query  url.Values
	body   []byte
	ctype  string
	// ifMatch is the If-Match header, when set.
	ifMatch string
}

// send sends r, accepting accept (and problems), and returns the answer
// and the URL it went to.
func (c *Client) send(ctx context.Context, r request, accept string) (*http.Response, string, error) {
	target := c.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, target, &TransportError{Method: r.method, URL: target, Err: err}
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	if r.ifMatch != "" {
		req.Header.Set("If-Match", r.ifMatch)
	}
	req.Header.Set("Accept", accept+", "+apiv1.ProblemContentType)
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, target, ctx.Err()
		}
		return nil, target, &TransportError{Method: r.method, URL: target, Err: err}
	}
	return resp, target, nil
}

// read sends r asking for accept and returns the answer's status and
// body, at most maxAnswer bytes, and the URL it went to; a problem answer
// (3xx and up) is an *Error, a body that cannot be read a
// *TransportError.
func (c *Client) read(ctx context.Context, r request, accept string) (status int, data []byte, target string, err error) {
	resp, target, err := c.send(ctx, r, accept)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return resp.StatusCode, nil, target, ctx.Err()
	case err != nil:
		return resp.StatusCode, nil, target, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("reading the answer: %w", err)}
	case len(data) > maxAnswer:
		return resp.StatusCode, nil, target, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("the answer is larger than %d bytes", maxAnswer)}
	case resp.StatusCode >= 300:
		return resp.StatusCode, nil, target, newError(resp, data)
	}
	return resp.StatusCode, data, target, nil
}

// do sends r and decodes a 2xx JSON answer into out (unless out is nil or
// the answer has no body). It returns the status.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	status, data, target, err := c.read(ctx, r, "application/json")
	if err != nil {
		return status, err
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = append((*raw)[:0], data...)
			return status, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return status, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("decoding the answer: %w", err)}
		}
	}
	return status, nil
}

// maxAnswer bounds what the client reads of one answer: an exported
// instance state with its history is the largest.
const maxAnswer = 256 << 20

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, out any) error {
	_, err := c.do(ctx, request{method: http.MethodGet, path: path, query: q}, out)
	return err
}

func jsonBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the request: %w", err)
	}
	return b, nil
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

// pageQuery returns the query of a list call.
func pageQuery(p ListOptions) url.Values {
	q := url.Values{}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	return q
}

// ListOptions selects a page of a list.
type ListOptions struct {
	// Cursor is a previous page's NextCursor; empty for the first page.
	Cursor string
	// Limit is the most items; 0 lets the server choose.
	Limit int
}

// Health calls GET /healthz: nil when the host is alive.
func (c *Client) Health(ctx context.Context) error {
	return c.getJSON(ctx, "/healthz", nil, nil)
}

// Ready calls GET /readyz: nil when the host can serve.
func (c *Client) Ready(ctx context.Context) error {
	return c.getJSON(ctx, "/readyz", nil, nil)
}

// PutPlugin uploads a module as the plugin name. created is false when
// that exact content already was the current version. A refused module is
// an *Error with Status 422 listing the reasons in Errors.
func (c *Client) PutPlugin(ctx context.Context, name string, wasm []byte) (p *apiv1.Plugin, created bool, err error) {
	p = &apiv1.Plugin{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/plugins/" + seg(name), body: wasm, ctype: "application/wasm"}, p)
	if err != nil {
		return nil, false, err
	}
	return p, status == http.StatusCreated, nil
}

// Plugins lists a page of plugins, their current versions, by name.
func (c *Client) Plugins(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Plugin], error) {
	var p apiv1.Page[apiv1.Plugin]
	if err := c.getJSON(ctx, "/v1/plugins", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Plugin returns a plugin with its versions.
func (c *Client) Plugin(ctx context.Context, name string) (*apiv1.PluginDetail, error) {
	var p apiv1.PluginDetail
	if err := c.getJSON(ctx, "/v1/plugins/"+seg(name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeletePlugin deletes a plugin; an *Error with Status 409 while a
// non-terminal instance uses one of its versions, or, unless force, while
// a saved workflow calls it (the problem names them).
func (c *Client) DeletePlugin(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/plugins/" + seg(name), query: q}, nil)
	return err
}

// Grants returns what is granted to a plugin name; Revision 0 and empty
// lists when nothing is. The plugin need not be uploaded.
func (c *Client) Grants(ctx context.Context, name string) (*apiv1.Grants, error) {
	var g apiv1.Grants
	if err := c.getJSON(ctx, "/v1/plugins/"+seg(name)+"/grants", nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// PutGrants replaces everything granted to a plugin name with doc and
// returns the grants as stored. Every node uses them from the next
// activity call it starts. An invalid document is an *Error with Status
// 422 whose Errors name each field (hosts[0].pattern, config.url,
// secrets.token).
func (c *Client) PutGrants(ctx context.Context, name string, doc apiv1.GrantDocument) (*apiv1.Grants, error) {
	body, err := jsonBody(doc)
	if err != nil {
		return nil, err
	}
	return c.PutGrantsDocument(ctx, name, body)
}

// PutGrantsAt is PutGrants for an edit of the grants read at revision
// (Grants.Revision; 0 when nothing was granted): the server refuses it
// with an *Error matching ErrStale if the grants changed since, so that
// an edit never undoes another made meanwhile. Read again and redo it.
func (c *Client) PutGrantsAt(ctx context.Context, name string, doc apiv1.GrantDocument, revision uint64) (*apiv1.Grants, error) {
	body, err := jsonBody(doc)
	if err != nil {
		return nil, err
	}
	return c.putGrants(ctx, name, body, `"`+strconv.FormatUint(revision, 10)+`"`)
}

// PutGrantsDocument is PutGrants with the grant document as JSON, sent as
// it is: the server refuses unknown fields (400) and invalid entries (422).
func (c *Client) PutGrantsDocument(ctx context.Context, name string, doc json.RawMessage) (*apiv1.Grants, error) {
	return c.putGrants(ctx, name, doc, "")
}

func (c *Client) putGrants(ctx context.Context, name string, doc json.RawMessage, ifMatch string) (*apiv1.Grants, error) {
	var g apiv1.Grants
	r := request{method: http.MethodPut, path: "/v1/plugins/" + seg(name) + "/grants", body: doc, ctype: "application/json", ifMatch: ifMatch}
	if _, err := c.do(ctx, r, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// DeleteGrants revokes everything granted to a plugin name; an *Error
// matching ErrNotFound when nothing was granted.
func (c *Client) DeleteGrants(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/plugins/" + seg(name) + "/grants"}, nil)
	return err
}

// PutWorkflow saves a definition (YAML or JSON source) as the workflow
// name. created is false when it did not change. A refused definition is
// an *Error with Status 422 listing every problem with its path.
func (c *Client) PutWorkflow(ctx context.Context, name string, source []byte) (w *apiv1.Workflow, created bool, err error) {
	ctype := "application/yaml"
	if t := bytes.TrimSpace(source); len(t) > 0 && t[0] == '{' {
		ctype = "application/json"
	}
	w = &apiv1.Workflow{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/workflows/" + seg(name), body: source, ctype: ctype}, w)
	if err != nil {
		return nil, false, err
	}
	return w, status == http.StatusCreated, nil
}

// Workflows lists a page of workflows, their latest versions, by name.
func (c *Client) Workflows(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Workflow], error) {
	var p apiv1.Page[apiv1.Workflow]
	if err := c.getJSON(ctx, "/v1/workflows", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Workflow returns a version of a workflow with its source, its canonical
// form and the versions kept; version 0 is the latest.
func (c *Client) Workflow(ctx context.Context, name string, version int) (*apiv1.Workflow, error) {
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	var w apiv1.Workflow
	if err := c.getJSON(ctx, "/v1/workflows/"+seg(name), q, &w); err != nil {
		return nil, err
	}
	return &w, nil
}

// DeleteWorkflow deletes every version of a workflow.
func (c *Client) DeleteWorkflow(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/workflows/" + seg(name)}, nil)
	return err
}

// Start starts an instance of workflow. With wait > 0 the server answers
// when the instance has ended (completed, failed or cancelled), or when
// wait runs out with the instance as it is then (wait is at most
// apiv1.MaxWait). created is false when req.ID named an instance that
// already existed.
func (c *Client) Start(ctx context.Context, workflow string, req apiv1.StartRequest, wait time.Duration) (inst *apiv1.Instance, created bool, err error) {
	return c.StartUntil(ctx, workflow, req, wait, "")
}

// StartUntil is Start with what the wait waits for; "" is the server's
// default, apiv1.UntilEnded. until is not sent without a wait.
func (c *Client) StartUntil(ctx context.Context, workflow string, req apiv1.StartRequest, wait time.Duration, until apiv1.Until) (inst *apiv1.Instance, created bool, err error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, false, err
	}
	inst = &apiv1.Instance{}
	status, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/workflows/" + seg(workflow) + "/instances", query: waitQuery(wait, until), body: body, ctype: "application/json"}, inst)
	if err != nil {
		return nil, false, err
	}
	return inst, status == http.StatusCreated, nil
}

// Instance returns an instance with what it waits on.
func (c *Client) Instance(ctx context.Context, id string) (*apiv1.Instance, error) {
	return c.Await(ctx, id, 0, "")
}

// Await returns an instance with what it waits on once it has ended (or,
// with apiv1.UntilSuspended, suspended or ended), or when wait runs out,
// as it is then: a long poll (GET /v1/instances/{id}?wait=). wait is at
// most apiv1.MaxWait; 0 answers at once, as Instance does. An instance
// that has already ended is answered at once.
func (c *Client) Await(ctx context.Context, id string, wait time.Duration, until apiv1.Until) (*apiv1.Instance, error) {
	var in apiv1.Instance
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id), waitQuery(wait, until), &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// waitQuery is ?wait= and ?until=, or nothing without a wait.
func waitQuery(wait time.Duration, until apiv1.Until) url.Values {
	q := url.Values{}
	if wait > 0 {
		q.Set("wait", wait.String())
		if until != "" {
			q.Set("until", string(until))
		}
	}
	return q
}

// InstanceFilter selects instances; empty fields select all.
type InstanceFilter struct {
	Workflow string
	Status   apiv1.Status
	// CreatedAfter and CreatedBefore, when not zero, keep instances
	// created at or after, and before, them.
	CreatedAfter, CreatedBefore time.Time
	// Oldest lists the oldest first; the newest come first otherwise.
	Oldest bool
	// ID, when set, keeps the one instance with that id.
	ID string
	// Event, when set, keeps the instances waiting for that event with
	// correlation key Key; Key alone, those waiting with it under any
	// event the saved workflows wait for.
	Event, Key string
	// Plugin, when set, keeps the instances that pin the plugin, at
	// PluginVersion when it is set too.
	Plugin, PluginVersion string
	// Query, when set, keeps the instances it matches (docs/operations.md,
	// "Search"), such as `customer = "acme" AND amount > 1000`; the
	// fields above apply too, but ID, Event, Key and Plugin, which it
	// takes none of. A page may then hold fewer than Limit instances,
	// even none, with a NextCursor to read on from; and when the query
	// reads a search attribute's index, the instances come by the
	// attribute's value. A query that does not parse or type is an
	// *Error matching ErrInvalidQuery, whose Position and Token say where.
	Query string
	ListOptions
}

// Instances lists a page of instances, newest first unless f.Oldest.
func (c *Client) Instances(ctx context.Context, f InstanceFilter) (*apiv1.Page[apiv1.Instance], error) {
	q := pageQuery(f.ListOptions)
	for name, v := range map[string]string{"workflow": f.Workflow, "status": string(f.Status), "id": f.ID, "event": f.Event,
		"plugin": f.Plugin, "plugin_version": f.PluginVersion, "q": f.Query} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if f.Event != "" || f.Key != "" {
		q.Set("key", f.Key)
	}
	if !f.CreatedAfter.IsZero() {
		q.Set("created_after", f.CreatedAfter.Format(time.RFC3339Nano))
	}
	if !f.CreatedBefore.IsZero() {
		q.Set("created_before", f.CreatedBefore.Format(time.RFC3339Nano))
	}
	if f.Oldest {
		q.Set("order", "oldest")
	}
	var p apiv1.Page[apiv1.Instance]
	if err := c.getJSON(ctx, "/v1/instances", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// History returns a page of an instance's history, in order; the cursor is
// the sequence number of the last entry of the previous page.
func (c *Client) History(ctx context.Context, id string, opts ListOptions) (*apiv1.Page[apiv1.HistoryEntry], error) {
	var p apiv1.Page[apiv1.HistoryEntry]
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id)+"/history", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// LogFilter selects the log lines Logs returns: those of one step's
// attempts (its path, such as steps[1].then[0]) and of one attempt, when
// set, and a page of them.
type LogFilter struct {
	StepPath string
	// Step is a step's id or path, resolved against the instance's
	// definition: the server refuses a step it does not have.
	Step string
	// Attempt counts from 1; 0 selects every attempt.
	Attempt int
	ListOptions
}

// Logs returns a page of the log lines of an instance's activity attempts,
// oldest first, as its history keeps them; the cursor is a history seq, or
// a previous page's NextCursor.
func (c *Client) Logs(ctx context.Context, id string, f LogFilter) (*apiv1.Page[apiv1.LogEntry], error) {
	q := pageQuery(f.ListOptions)
	if f.StepPath != "" {
		q.Set("step_path", f.StepPath)
	}
	if f.Step != "" {
		q.Set("step", f.Step)
	}
	if f.Attempt != 0 {
		q.Set("attempt", strconv.Itoa(f.Attempt))
	}
	var p apiv1.Page[apiv1.LogEntry]
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id)+"/logs", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Cancel cancels an instance and returns it as it is after the request;
// an *Error with Status 409 when it has already ended.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*apiv1.Instance, error) {
	return c.instanceAction(ctx, id, "cancel", reason != "", apiv1.CancelRequest{Reason: reason})
}

// instanceAction POSTs to /v1/instances/{id}/{action}, with req as the
// body when send (none otherwise: the server's default reason), and
// returns the instance answered.
func (c *Client) instanceAction(ctx context.Context, id, action string, send bool, req any) (*apiv1.Instance, error) {
	r := request{method: http.MethodPost, path: "/v1/instances/" + seg(id) + "/" + action}
	if send {
		body, err := jsonBody(req)
		if err != nil {
			return nil, err
		}
		r.body, r.ctype = body, "application/json"
	}
	var in apiv1.Instance
	if _, err := c.do(ctx, r, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Counts counts instances by status, of one workflow when workflow is not
// empty.
func (c *Client) Counts(ctx context.Context, workflow string) (*apiv1.Counts, error) {
	q := url.Values{}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	var out apiv1.Counts
	if err := c.getJSON(ctx, "/v1/counts/instances", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Retry asks a failed instance to continue from the step that failed and
// returns it as it is after the request (still failed until it runs); an
// *Error with Status 409 when it has not failed.
func (c *Client) Retry(ctx context.Context, id, reason string) (*apiv1.Instance, error) {
	return c.instanceAction(ctx, id, "retry", reason != "", apiv1.RetryRequest{Reason: reason})
}

// Pause pauses an instance (docs/operations.md, "Pause and resume"):
// applied when it next runs, it begins no step until resumed, and keeps
// the timers and events that come meanwhile. It returns the instance as
// it was before the pause applied (Paused set when it was paused
// already); an *Error matching ErrConflict when it has ended, ErrNotFound
// when there is none. An empty reason leaves the server's default.
func (c *Client) Pause(ctx context.Context, id, reason string) (*apiv1.Instance, error) {
	return c.instanceAction(ctx, id, "pause", reason != "", apiv1.InstancePauseRequest{Reason: reason})
}

// Resume resumes a paused instance, as Pause pauses it; an *Error
// matching ErrConflict when it is not paused (nor has a pause on its way)
// or has ended.
func (c *Client) Resume(ctx context.Context, id, reason string) (*apiv1.Instance, error) {
	return c.instanceAction(ctx, id, "resume", reason != "", apiv1.InstanceResumeRequest{Reason: reason})
}

// CancelMany cancels the instances named (at most apiv1.MaxBulk) and says
// what became of each, in order.
func (c *Client) CancelMany(ctx context.Context, ids []string, reason string) ([]apiv1.BulkOutcome, error) {
	body, err := jsonBody(apiv1.BulkCancelRequest{IDs: ids, Reason: reason})
	if err != nil {
		return nil, err
	}
	var p apiv1.Page[apiv1.BulkOutcome]
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/instances/cancel", body: body, ctype: "application/json"}, &p); err != nil {
		return nil, err
	}
	return p.Items, nil
}

// DeleteInstance deletes an instance with its history.
func (c *Client) DeleteInstance(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/instances/" + seg(id)}, nil)
	return err
}

// ExportState returns an instance's full state, a JSON document that
// ImportState takes back (on this host or another).
func (c *Client) ExportState(ctx context.Context, id string) (json.RawMessage, error) {
	var raw json.RawMessage
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id)+"/state", nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// ImportState writes an exported state as the instance id: the instance
// it was exported from, or a copy of it when id is another. An existing
// instance id is replaced only with replace; without it the answer is an
// *Error with Status 409 (type urn:weft:problem:instance-exists) that
// matches ErrConflict. created is false when it replaced one.
func (c *Client) ImportState(ctx context.Context, id string, state json.RawMessage, replace bool) (inst *apiv1.Instance, created bool, err error) {
	var q url.Values
	if replace {
		q = url.Values{"replace": {"true"}}
	}
	inst = &apiv1.Instance{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/instances/" + seg(id) + "/state", query: q, body: state, ctype: "application/json"}, inst)
	if err != nil {
		return nil, false, err
	}
	return inst, status == http.StatusCreated, nil
}

// QueuedEvents returns a page of the queued stimuli, those that found
// nothing waiting for them and started nothing, soonest to expire first:
// each waits for an instance to wait for it until its ExpiresAt.
func (c *Client) QueuedEvents(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Stimulus], error) {
	var p apiv1.Page[apiv1.Stimulus]
	if err := c.getJSON(ctx, "/v1/events/queued", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeadLetters returns a page of dead stimuli, those that found no waiting
// instance before their TTL, in the order they died (SettledAt).
func (c *Client) DeadLetters(ctx context.Context, opts ListOptions) (*apiv1.Page[apiv1.Stimulus], error) {
	var p apiv1.Page[apiv1.Stimulus]
	if err := c.getJSON(ctx, "/v1/events/dead", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SendEvent sends a stimulus and returns what it did, once durable.
func (c *Client) SendEvent(ctx context.Context, ev apiv1.EventRequest) (*apiv1.EventOutcome, error) {
	body, err := jsonBody(ev)
	if err != nil {
		return nil, err
	}
	var res apiv1.EventOutcome
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/events", body: body, ctype: "application/json"}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Refresh reloads definitions from the host's workflows_dir: those named,
// or all.
func (c *Client) Refresh(ctx context.Context, workflows ...string) (*apiv1.RefreshResult, error) {
	var body []byte
	if len(workflows) > 0 {
		var err error
		if body, err = jsonBody(apiv1.RefreshRequest{Workflows: workflows}); err != nil {
			return nil, err
		}
	}
	r := request{method: http.MethodPost, path: "/v1/admin/refresh", body: body}
	if body != nil {
		r.ctype = "application/json"
	}
	var res apiv1.RefreshResult
	if _, err := c.do(ctx, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Backup writes a backup of the host's embedded store to w (GET
// /v1/admin/backup) and returns its size: the store as it was when the
// request arrived, a single file (bbolt's format) that a host migrates into
// its store when it finds it as its data_dir's weft.db (docs/operations.md,
// "The data directory"). A host whose store is Redis answers an *Error
// with Status 409 (back up Redis instead). An answer cut short (the host
// failed or shut down, or dropped a stream that stalled) is a
// *TransportError, and an error writing to w is returned wrapped: what w
// got then is no backup.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	r := request{method: http.MethodGet, path: "/v1/admin/backup"}
	resp, target, err := c.send(ctx, r, "application/octet-stream")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			if ctx.Err() != nil {
				return 0, ctx.Err()
			}
			return 0, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("reading the answer: %w", err)}
		}
		return 0, newError(resp, data)
	}
	cw := &checkedWriter{w: w}
	n, err := io.Copy(cw, resp.Body)
	switch {
	case cw.err != nil:
		return n, fmt.Errorf("client: writing the backup: %w", cw.err)
	case err != nil && ctx.Err() != nil:
		return n, ctx.Err()
	case err != nil:
		return n, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("the backup ended after %d of %d bytes: %w", n, resp.ContentLength, err)}
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return n, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("the backup ended after %d of %d bytes", n, resp.ContentLength)}
	}
	return n, nil
}

// checkedWriter keeps the error of its writer, to tell it from the
// reader's in io.Copy.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}
