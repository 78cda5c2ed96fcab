// Package client is a Go client for Weft's HTTP API (host/api). The weft
// command-line client is built on it, and so are tests that drive a real
// host over HTTP.
//
// Every method returns the decoded answer, or an error that is either a
// *Problem (the server answered with an error status; errors.Is matches it
// against ErrNotFound, ErrUnauthorized, ErrForbidden, ErrConflict,
// ErrInvalid, ErrUnavailable) or a *TransportError (no answer: the server
// could not be reached, or the answer could not be read). A method returns
// ctx.Err() when ctx ends first.
//
//	c, err := client.New(client.Config{Server: "http://127.0.0.1:8080", Token: token})
//	inst, _, err := c.Start(ctx, "hello", client.StartRequest{Input: json.RawMessage(`{"name":"Ada"}`)}, 10*time.Second)
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

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
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
	req.Header.Set("Accept", accept+", application/problem+json")
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

// do sends r and decodes a 2xx JSON answer into out (unless out is nil or
// the answer has no body). It returns the status.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	resp, target, err := c.send(ctx, r, "application/json")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		if ctx.Err() != nil {
			return resp.StatusCode, ctx.Err()
		}
		return resp.StatusCode, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("reading the answer: %w", err)}
	}
	if len(data) > maxAnswer {
		return resp.StatusCode, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("the answer is larger than %d bytes", maxAnswer)}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, newProblem(resp, data)
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if raw, ok := out.(*json.RawMessage); ok {
			*raw = append((*raw)[:0], data...)
			return resp.StatusCode, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("decoding the answer: %w", err)}
		}
	}
	return resp.StatusCode, nil
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

// Page is one page of a list. NextCursor is empty after the last page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// Health calls GET /healthz: nil when the host is alive.
func (c *Client) Health(ctx context.Context) error {
	return c.getJSON(ctx, "/healthz", nil, nil)
}

// Ready calls GET /readyz: nil when the host can serve.
func (c *Client) Ready(ctx context.Context) error {
	return c.getJSON(ctx, "/readyz", nil, nil)
}

// Plugin is one version of a plugin.
type Plugin struct {
	Name string `json:"name"`
	// Version is the sha256 of the module, hex.
	Version    string    `json:"version"`
	Size       int64     `json:"size"`
	Activities []string  `json:"activities"`
	CreatedAt  time.Time `json:"created_at"`
}

// PluginDetail is a plugin's current version and every version kept,
// current first, with what the current version asks an operator to grant
// (Needs, from its manifest), what is granted to the name (Granted) and
// what of Needs no grant covers (Missing).
type PluginDetail struct {
	Plugin
	Versions []Plugin  `json:"versions"`
	Needs    abi.Needs `json:"needs"`
	Granted  Grants    `json:"granted"`
	Missing  abi.Needs `json:"missing"`
}

// Grants is what is granted to a plugin name: the hosts its HTTP requests
// may reach, its configuration values and its secrets, as references
// (env:NAME, file:/path) that each node resolves. The API never answers
// a secret's value.
type Grants struct {
	Plugin string `json:"plugin"`
	// Revision is 1 for the first grant of a name and +1 for each change;
	// 0 when nothing is granted.
	Revision uint64 `json:"revision"`
	// UpdatedAt is zero when nothing is granted.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Set is the grant document: Hosts, Config and Secrets.
	grant.Set
}

// PutPlugin uploads a module as the plugin name. created is false when
// that exact content already was the current version. A refused module is
// a *Problem with Status 422 listing the reasons in Errors.
func (c *Client) PutPlugin(ctx context.Context, name string, wasm []byte) (p *Plugin, created bool, err error) {
	p = &Plugin{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/plugins/" + seg(name), body: wasm, ctype: "application/wasm"}, p)
	if err != nil {
		return nil, false, err
	}
	return p, status == http.StatusCreated, nil
}

// Plugins lists a page of plugins, their current versions, by name.
func (c *Client) Plugins(ctx context.Context, opts ListOptions) (*Page[Plugin], error) {
	var p Page[Plugin]
	if err := c.getJSON(ctx, "/v1/plugins", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Plugin returns a plugin with its versions.
func (c *Client) Plugin(ctx context.Context, name string) (*PluginDetail, error) {
	var p PluginDetail
	if err := c.getJSON(ctx, "/v1/plugins/"+seg(name), nil, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeletePlugin deletes a plugin; a *Problem with Status 409 while a
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

// Grants returns what is granted to a plugin name; Revision 0 and an
// empty Set when nothing is. The plugin need not be uploaded.
func (c *Client) Grants(ctx context.Context, name string) (*Grants, error) {
	var g Grants
	if err := c.getJSON(ctx, "/v1/plugins/"+seg(name)+"/grants", nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// PutGrants replaces everything granted to a plugin name with set and
// returns the grants as stored. Every node uses them from the next
// activity call it starts. An invalid set is a *Problem with Status 422
// whose Errors name each field (hosts[0].pattern, config.url,
// secrets.token).
func (c *Client) PutGrants(ctx context.Context, name string, set grant.Set) (*Grants, error) {
	body, err := jsonBody(set)
	if err != nil {
		return nil, err
	}
	return c.PutGrantsDocument(ctx, name, body)
}

// PutGrantsAt is PutGrants for an edit of the grants read at revision
// (Grants.Revision; 0 when nothing was granted): the server refuses it
// with a *Problem matching ErrStale if the grants changed since, so that
// an edit never undoes another made meanwhile. Read again and redo it.
func (c *Client) PutGrantsAt(ctx context.Context, name string, set grant.Set, revision uint64) (*Grants, error) {
	body, err := jsonBody(set)
	if err != nil {
		return nil, err
	}
	return c.putGrants(ctx, name, body, `"`+strconv.FormatUint(revision, 10)+`"`)
}

// PutGrantsDocument is PutGrants with the grant document as JSON, sent as
// it is: the server refuses unknown fields (400) and invalid entries (422).
func (c *Client) PutGrantsDocument(ctx context.Context, name string, doc json.RawMessage) (*Grants, error) {
	return c.putGrants(ctx, name, doc, "")
}

func (c *Client) putGrants(ctx context.Context, name string, doc json.RawMessage, ifMatch string) (*Grants, error) {
	var g Grants
	r := request{method: http.MethodPut, path: "/v1/plugins/" + seg(name) + "/grants", body: doc, ctype: "application/json", ifMatch: ifMatch}
	if _, err := c.do(ctx, r, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// DeleteGrants revokes everything granted to a plugin name; a *Problem
// matching ErrNotFound when nothing was granted.
func (c *Client) DeleteGrants(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/plugins/" + seg(name) + "/grants"}, nil)
	return err
}

// Workflow is one version of a workflow definition. Source is set by
// Workflow, not by Workflows or PutWorkflow.
type Workflow struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	Source    string    `json:"source,omitempty"`
}

// PutWorkflow saves a definition (YAML or JSON source) as the workflow
// name. created is false when it did not change. A refused definition is a
// *Problem with Status 422 listing every problem with its path.
func (c *Client) PutWorkflow(ctx context.Context, name string, source []byte) (w *Workflow, created bool, err error) {
	ctype := "application/yaml"
	if t := bytes.TrimSpace(source); len(t) > 0 && t[0] == '{' {
		ctype = "application/json"
	}
	w = &Workflow{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/workflows/" + seg(name), body: source, ctype: ctype}, w)
	if err != nil {
		return nil, false, err
	}
	return w, status == http.StatusCreated, nil
}

// Workflows lists a page of workflows, their latest versions, by name.
func (c *Client) Workflows(ctx context.Context, opts ListOptions) (*Page[Workflow], error) {
	var p Page[Workflow]
	if err := c.getJSON(ctx, "/v1/workflows", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Workflow returns a version of a workflow with its source; version 0 is
// the latest.
func (c *Client) Workflow(ctx context.Context, name string, version int) (*Workflow, error) {
	q := url.Values{}
	if version > 0 {
		q.Set("version", strconv.Itoa(version))
	}
	var w Workflow
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

// Instance is a workflow instance. Error is set when it failed or was
// cancelled.
type Instance struct {
	ID        string            `json:"id"`
	Workflow  string            `json:"workflow"`
	Version   int               `json:"version"`
	Status    weft.Status       `json:"status"`
	Input     json.RawMessage   `json:"input"`
	Output    json.RawMessage   `json:"output"`
	Vars      json.RawMessage   `json:"vars"`
	Error     *weft.Failure     `json:"error"`
	Plugins   map[string]string `json:"plugins,omitempty"`
	Parent    *Parent           `json:"parent,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	// DeleteAfter is when a finished instance will be deleted; zero while
	// it runs, and when it is kept forever.
	DeleteAfter time.Time `json:"delete_after,omitzero"`
	// WaitingOn is set by Instance and Start, and by Instances for a
	// suspended instance.
	WaitingOn *WaitingOn `json:"waiting_on,omitempty"`
}

// Terminal reports whether the instance is completed, failed or cancelled.
func (i *Instance) Terminal() bool { return i.Status.Terminal() }

// Parent names the parent instance and step of a child workflow.
type Parent struct {
	InstanceID string `json:"instance_id"`
	StepID     string `json:"step_id"`
}

// WaitingOn is what a suspended instance waits for.
type WaitingOn struct {
	Bookmarks []Bookmark `json:"bookmarks"`
	Timers    []Timer    `json:"timers"`
}

// Bookmark is a wait for an event with a correlation key.
type Bookmark struct {
	Event    string `json:"event"`
	Key      string `json:"key"`
	StepPath string `json:"step_path"`
}

// Timer is a durable timer.
type Timer struct {
	ID   string    `json:"id"`
	Due  time.Time `json:"due"`
	Kind string    `json:"kind,omitempty"`
}

// StartRequest is the body of a start.
type StartRequest struct {
	// Input is the instance's input, a JSON document; nil is null.
	Input json.RawMessage `json:"input,omitempty"`
	// ID is an optional client-chosen id that makes the start idempotent.
	ID string `json:"id,omitempty"`
}

// MaxWait is the longest wait the server accepts in one request (its
// ?wait=); ask again to wait longer.
const MaxWait = 5 * time.Minute

// Until says what a wait on an instance waits for.
type Until string

const (
	// UntilEnded waits until the instance has completed, failed or been
	// cancelled: through its delays and retry backoffs, during which it
	// is suspended. The server's default.
	UntilEnded Until = "ended"
	// UntilSuspended waits until the instance suspends (waiting for an
	// event or a timer) or ends.
	UntilSuspended Until = "suspended"
)

// Start starts an instance of workflow. With wait > 0 the server answers
// when the instance has ended (completed, failed or cancelled), or when
// wait runs out with the instance as it is then (wait is at most
// MaxWait). created is false when req.ID named an instance that already
// existed.
func (c *Client) Start(ctx context.Context, workflow string, req StartRequest, wait time.Duration) (inst *Instance, created bool, err error) {
	return c.StartUntil(ctx, workflow, req, wait, "")
}

// StartUntil is Start with what the wait waits for; "" is the server's
// default, UntilEnded. until is not sent without a wait.
func (c *Client) StartUntil(ctx context.Context, workflow string, req StartRequest, wait time.Duration, until Until) (inst *Instance, created bool, err error) {
	body, err := jsonBody(req)
	if err != nil {
		return nil, false, err
	}
	inst = &Instance{}
	status, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/workflows/" + seg(workflow) + "/instances", query: waitQuery(wait, until), body: body, ctype: "application/json"}, inst)
	if err != nil {
		return nil, false, err
	}
	return inst, status == http.StatusCreated, nil
}

// Instance returns an instance with what it waits on.
func (c *Client) Instance(ctx context.Context, id string) (*Instance, error) {
	return c.Await(ctx, id, 0, "")
}

// Await returns an instance with what it waits on once it has ended (or,
// with UntilSuspended, suspended or ended), or when wait runs out, as it
// is then: a long poll (GET /v1/instances/{id}?wait=). wait is at most
// MaxWait; 0 answers at once, as Instance does. An instance that has
// already ended is answered at once.
func (c *Client) Await(ctx context.Context, id string, wait time.Duration, until Until) (*Instance, error) {
	var in Instance
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id), waitQuery(wait, until), &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// waitQuery is ?wait= and ?until=, or nothing without a wait.
func waitQuery(wait time.Duration, until Until) url.Values {
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
	Status   weft.Status
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
	ListOptions
}

// Instances lists a page of instances, newest first unless f.Oldest.
func (c *Client) Instances(ctx context.Context, f InstanceFilter) (*Page[Instance], error) {
	q := pageQuery(f.ListOptions)
	for name, v := range map[string]string{"workflow": f.Workflow, "status": string(f.Status), "id": f.ID, "event": f.Event,
		"plugin": f.Plugin, "plugin_version": f.PluginVersion} {
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
	var p Page[Instance]
	if err := c.getJSON(ctx, "/v1/instances", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// History returns a page of an instance's history, in order; the cursor is
// the sequence number of the last event of the previous page.
func (c *Client) History(ctx context.Context, id string, opts ListOptions) (*Page[weft.HistoryEntry], error) {
	var p Page[weft.HistoryEntry]
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
func (c *Client) Logs(ctx context.Context, id string, f LogFilter) (*Page[weft.LogEntry], error) {
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
	var p Page[weft.LogEntry]
	if err := c.getJSON(ctx, "/v1/instances/"+seg(id)+"/logs", q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Cancel cancels an instance and returns it as it is after the request; a
// *Problem with Status 409 when it has already ended.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*Instance, error) {
	return c.instanceAction(ctx, id, "cancel", reason)
}

// instanceAction POSTs to /v1/instances/{id}/{action} with the reason
// (none when empty) and returns the instance answered.
func (c *Client) instanceAction(ctx context.Context, id, action, reason string) (*Instance, error) {
	var body []byte
	if reason != "" {
		var err error
		if body, err = jsonBody(map[string]string{"reason": reason}); err != nil {
			return nil, err
		}
	}
	r := request{method: http.MethodPost, path: "/v1/instances/" + seg(id) + "/" + action, body: body}
	if body != nil {
		r.ctype = "application/json"
	}
	var in Instance
	if _, err := c.do(ctx, r, &in); err != nil {
		return nil, err
	}
	return &in, nil
}

// Counts are the counts of instances by status.
type Counts struct {
	Total    int                 `json:"total"`
	ByStatus map[weft.Status]int `json:"by_status"`
}

// Counts counts instances by status, of one workflow when workflow is not
// empty.
func (c *Client) Counts(ctx context.Context, workflow string) (*Counts, error) {
	q := url.Values{}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	var out Counts
	if err := c.getJSON(ctx, "/v1/counts/instances", q, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Retry asks a failed instance to continue from the step that failed and
// returns it as it is after the request (still failed until it runs); a
// *Problem with Status 409 when it has not failed.
func (c *Client) Retry(ctx context.Context, id, reason string) (*Instance, error) {
	return c.instanceAction(ctx, id, "retry", reason)
}

// MaxBulk bounds the ids of one bulk request (CancelMany).
const MaxBulk = 1000

// BulkOutcome is what a bulk request did to one instance: Outcome is
// cancelled, finished, not_found or error.
type BulkOutcome struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
}

// CancelMany cancels the instances named (at most 1000) and says what
// became of each, in order.
func (c *Client) CancelMany(ctx context.Context, ids []string, reason string) ([]BulkOutcome, error) {
	body, err := jsonBody(map[string]any{"ids": ids, "reason": reason})
	if err != nil {
		return nil, err
	}
	var p Page[BulkOutcome]
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
// instance id is replaced only with replace; without it the answer is a
// *Problem with Status 409 (type urn:weft:problem:instance-exists) that
// matches ErrConflict. created is false when it replaced one.
func (c *Client) ImportState(ctx context.Context, id string, state json.RawMessage, replace bool) (inst *Instance, created bool, err error) {
	var q url.Values
	if replace {
		q = url.Values{"replace": {"true"}}
	}
	inst = &Instance{}
	status, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/instances/" + seg(id) + "/state", query: q, body: state, ctype: "application/json"}, inst)
	if err != nil {
		return nil, false, err
	}
	return inst, status == http.StatusCreated, nil
}

// EventRequest is a stimulus.
type EventRequest struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// Payload is a JSON document; nil is null.
	Payload json.RawMessage `json:"payload,omitempty"`
	// ID makes the event idempotent; empty lets the server choose one.
	ID string `json:"id,omitempty"`
}

// EventResult is what an event did, once durable.
type EventResult struct {
	ID      string   `json:"id"`
	Resumed []string `json:"resumed"`
	Started []string `json:"started"`
	// Queued is true when nothing waited for the event and nothing
	// started: it waits for a bookmark until its TTL.
	Queued bool `json:"queued"`
	// Warning, with Queued, says when no workflow waits for or is
	// triggered by the event's name: a misspelt name, say.
	Warning string `json:"warning,omitempty"`
}

// DeadLetter is a stimulus that found no waiting instance before its TTL.
type DeadLetter struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// SettledAt is when it was dead-lettered.
	SettledAt time.Time `json:"settled_at"`
}

// QueuedEvent is a stimulus that found nothing waiting for it and started
// nothing: it waits for an instance to wait for it until ExpiresAt.
type QueuedEvent struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// QueuedEvents returns a page of the queued stimuli, soonest to expire
// first.
func (c *Client) QueuedEvents(ctx context.Context, opts ListOptions) (*Page[QueuedEvent], error) {
	var p Page[QueuedEvent]
	if err := c.getJSON(ctx, "/v1/events/queued", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DeadLetters returns a page of dead stimuli, in the order they died.
func (c *Client) DeadLetters(ctx context.Context, opts ListOptions) (*Page[DeadLetter], error) {
	var p Page[DeadLetter]
	if err := c.getJSON(ctx, "/v1/events/dead", pageQuery(opts), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// SendEvent sends a stimulus.
func (c *Client) SendEvent(ctx context.Context, ev EventRequest) (*EventResult, error) {
	body, err := jsonBody(ev)
	if err != nil {
		return nil, err
	}
	var res EventResult
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/events", body: body, ctype: "application/json"}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Refresh statuses.
const (
	RefreshDone       = "refreshed"
	RefreshInProgress = "already_in_progress"
)

// RefreshResult is what a definition refresh did.
type RefreshResult struct {
	// Status is RefreshDone or RefreshInProgress.
	Status string          `json:"status"`
	Files  []RefreshedFile `json:"files"`
}

// RefreshedFile is one definition file of a refresh.
type RefreshedFile struct {
	File     string       `json:"file"`
	Name     string       `json:"name,omitempty"`
	Version  int          `json:"version,omitempty"`
	Created  bool         `json:"created"`
	Problems []FieldError `json:"problems,omitempty"`
	Error    string       `json:"error,omitempty"`
}

// Refresh reloads definitions from the host's workflows_dir: those named,
// or all.
func (c *Client) Refresh(ctx context.Context, workflows ...string) (*RefreshResult, error) {
	var body []byte
	if len(workflows) > 0 {
		var err error
		if body, err = jsonBody(map[string][]string{"workflows": workflows}); err != nil {
			return nil, err
		}
	}
	r := request{method: http.MethodPost, path: "/v1/admin/refresh", body: body}
	if body != nil {
		r.ctype = "application/json"
	}
	var res RefreshResult
	if _, err := c.do(ctx, r, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Backup writes a backup of the host's embedded store to w (GET
// /v1/admin/backup) and returns its size: the store as it was when the
// request arrived, a bbolt file that the host opens as its data_dir's
// weft.db once restored. A host whose store is Redis answers a *Problem
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
		return 0, newProblem(resp, data)
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
