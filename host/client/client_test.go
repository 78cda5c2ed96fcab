package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/testplugins"
)

const (
	adminToken  = hosttest.AdminToken
	readerToken = hosttest.ReaderToken
)

// startHost runs a test host (internal/hosttest) with the test tokens
// (hosttest.Tokens), whose node is named client-test, and returns its URL.
func startHost(t *testing.T) string {
	t.Helper()
	return hosttest.New(t, hosttest.Options{
		API:  api.Config{Tokens: hosttest.Tokens()},
		Node: node.Config{NodeID: "client-test"},
	}).URL
}

func newClient(t *testing.T, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(client.Config{Server: url, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClient walks the API through the client: a plugin, a workflow, an
// instance that waits for an event, its history, export and import.
func TestClient(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()

	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	p, created, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit"))
	if err != nil || !created || p.Name != "kit" || len(p.Version) != 64 {
		t.Fatalf("PutPlugin: %+v, %v, %v", p, created, err)
	}
	if _, created, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil || created {
		t.Fatalf("PutPlugin again: created %v, %v", created, err)
	}
	if pd, err := c.Plugin(ctx, "kit"); err != nil || len(pd.Versions) != 1 || pd.Version != p.Version {
		t.Fatalf("Plugin: %+v, %v", pd, err)
	}
	if pp, err := c.Plugins(ctx, client.ListOptions{Limit: 10}); err != nil || len(pp.Items) != 1 {
		t.Fatalf("Plugins: %+v, %v", pp, err)
	}

	src := []byte("name: shout\nsteps:\n  - id: up\n    activity: kit.upper\n    input: \"${ input }\"\n    output: up\n  - id: ok\n    wait: { event: shout.ok, key: \"${ input.text }\" }\noutput: \"${ vars.up.text }\"\n")
	w, created, err := c.PutWorkflow(ctx, "shout", src)
	if err != nil || !created || w.Version != 1 {
		t.Fatalf("PutWorkflow: %+v, %v, %v", w, created, err)
	}
	if w, err := c.Workflow(ctx, "shout", 0); err != nil || (w.Source == nil || *w.Source != string(src) || len(w.Definition) == 0 || len(w.Versions) != 1) {
		t.Fatalf("Workflow: %+v, %v", w, err)
	}
	if wp, err := c.Workflows(ctx, client.ListOptions{}); err != nil || len(wp.Items) != 1 {
		t.Fatalf("Workflows: %+v, %v", wp, err)
	}

	in, created, err := c.StartUntil(ctx, "shout", apiv1.StartRequest{Input: json.RawMessage(`{"text":"hey"}`), ID: "shout-1"}, time.Minute, apiv1.UntilSuspended)
	if err != nil || !created || in.ID != "shout-1" || in.Status != apiv1.StatusSuspended {
		t.Fatalf("Start with wait until suspended: %+v, %v, %v", in, created, err)
	}
	// A wait until it ends runs out: the instance as it is.
	if in, err := c.Await(ctx, "shout-1", 100*time.Millisecond, ""); err != nil || in.Status != apiv1.StatusSuspended {
		t.Fatalf("Await that runs out: %+v, %v", in, err)
	}
	if in.WaitingOn == nil || len(in.WaitingOn.Bookmarks) != 1 || in.WaitingOn.Bookmarks[0].Key != "hey" {
		t.Fatalf("waiting on %+v", in.WaitingOn)
	}
	res, err := c.SendEvent(ctx, apiv1.EventRequest{Name: "shout.ok", Key: "hey", ID: "ev-1"})
	if err != nil || len(res.Resumed) != 1 || res.Resumed[0] != "shout-1" || res.ID != "ev-1" {
		t.Fatalf("SendEvent: %+v, %v", res, err)
	}
	// The server's wait answers when the instance ends.
	if in, err = c.Await(ctx, "shout-1", time.Minute, apiv1.UntilEnded); err != nil || in.Status != apiv1.StatusCompleted {
		t.Fatalf("Await: %+v, %v", in, err)
	}
	if string(in.Output) != `"HEY"` || !in.Terminal() {
		t.Errorf("output %s", in.Output)
	}
	h, err := c.History(ctx, "shout-1", client.ListOptions{Limit: 3})
	if err != nil || len(h.Items) != 3 || h.Items[0].Seq != 1 || h.NextCursor == "" {
		t.Fatalf("History page 1: %+v, %v", h, err)
	}
	h2, err := c.History(ctx, "shout-1", client.ListOptions{Cursor: h.NextCursor})
	if err != nil || len(h2.Items) == 0 || h2.Items[0].Seq != 4 || h2.Items[len(h2.Items)-1].Type != "instance_completed" {
		t.Fatalf("History page 2: %+v, %v", h2, err)
	}
	ip, err := c.Instances(ctx, client.InstanceFilter{Workflow: "shout", Status: apiv1.StatusCompleted})
	if err != nil || len(ip.Items) != 1 {
		t.Fatalf("Instances: %+v, %v", ip, err)
	}

	state, err := c.ExportState(ctx, "shout-1")
	if err != nil || !json.Valid(state) {
		t.Fatalf("ExportState: %v", err)
	}
	if err := c.DeleteInstance(ctx, "shout-1"); err != nil {
		t.Fatal(err)
	}
	if back, created, err := c.ImportState(ctx, "shout-1", state, false); err != nil || !created || back.Status != apiv1.StatusCompleted {
		t.Fatalf("ImportState: %+v, %v, %v", back, created, err)
	}

	// Suspended on its event, so that the cancel finds it alive however
	// fast it ran.
	if _, _, err := c.StartUntil(ctx, "shout", apiv1.StartRequest{Input: json.RawMessage(`{"text":"two"}`), ID: "shout-2"}, time.Minute, apiv1.UntilSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "shout-2", "test"); err != nil {
		t.Fatal(err)
	}
	if in, err := c.Await(ctx, "shout-2", time.Minute, apiv1.UntilEnded); err != nil || in.Status != apiv1.StatusCancelled {
		t.Fatalf("Await the cancelled instance: %+v, %v", in, err)
	}
	if r, err := c.Refresh(ctx); err != nil || r.Status != apiv1.RefreshDone {
		t.Fatalf("Refresh: %+v, %v", r, err)
	}
	if err := c.DeleteWorkflow(ctx, "shout"); err != nil {
		t.Fatal(err)
	}
}

// TestClientErrors checks that each kind of failure is reported as the
// error a caller can test for.
func TestClientErrors(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	ctx := context.Background()
	admin := newClient(t, url, adminToken)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name       string
		call       func() error
		want       error
		wantStatus int
		wantText   string
	}{
		{name: "not found", call: func() error { _, err := admin.Instance(ctx, "nope"); return err }, want: client.ErrNotFound, wantStatus: 404, wantText: `no instance "nope"`},
		{name: "no token", call: func() error { _, err := newClient(t, url, "").Plugins(ctx, client.ListOptions{}); return err }, want: client.ErrUnauthorized, wantStatus: 401},
		{name: "wrong token", call: func() error {
			_, err := newClient(t, url, "not-a-token-at-all").Plugins(ctx, client.ListOptions{})
			return err
		}, want: client.ErrUnauthorized, wantStatus: 401},
		{name: "role may not", call: func() error {
			_, _, err := newClient(t, url, readerToken).PutWorkflow(ctx, "x", []byte("name: x\n"))
			return err
		}, want: client.ErrForbidden, wantStatus: 403},
		{name: "invalid definition", call: func() error {
			_, _, err := admin.PutWorkflow(ctx, "x", []byte("name: x\nsteps:\n  - id: a\n    delay: 1x\n"))
			return err
		}, want: client.ErrInvalid, wantStatus: 422, wantText: "steps[0].delay"},
		{name: "junk plugin", call: func() error { _, _, err := admin.PutPlugin(ctx, "junk", []byte("junk")); return err }, want: client.ErrInvalid, wantStatus: 422, wantText: "module"},
		{name: "cancel an unknown instance", call: func() error { _, err := admin.Cancel(ctx, "nope", ""); return err }, want: client.ErrNotFound, wantStatus: 404},
		{name: "context cancelled", call: func() error { return admin.Health(cancelled) }, want: context.Canceled},
		{name: "unreachable", call: func() error { return newClient(t, "http://127.0.0.1:1", "").Health(ctx) }, wantText: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call()
			if err == nil {
				t.Fatal("no error")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v does not match %v", err, tt.want)
			}
			var p *client.Error
			if errors.As(err, &p) != (tt.wantStatus != 0) || (p != nil && p.Status != tt.wantStatus) {
				t.Errorf("error %v: want a problem with status %d", err, tt.wantStatus)
			}
			// The problem document itself, for a caller that knows apiv1
			// only.
			var doc *apiv1.Problem
			if errors.As(err, &doc) != (tt.wantStatus != 0) || (doc != nil && (doc.Status != tt.wantStatus || doc.Type == "" || doc.RequestID == "")) {
				t.Errorf("error %v: want a problem document with status %d, a type and a request id, got %+v", err, tt.wantStatus, doc)
			}
			if tt.name == "unreachable" {
				var te *client.TransportError
				if !errors.As(err, &te) {
					t.Errorf("error %T, want a *TransportError", err)
				}
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not contain %q", err, tt.wantText)
			}
		})
	}
}

func TestNewRefusesBadServers(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "127.0.0.1:8080", "ftp://host", "http://"} {
		if _, err := client.New(client.Config{Server: s}); err == nil {
			t.Errorf("New(%q): no error", s)
		}
	}
}

// TestMaxWaitIsTheServers: apiv1.MaxWait is what the server accepts, so
// that a caller waiting longer asks again rather than getting a 400. The
// instance has ended, so a wait that is accepted is answered at once.
func TestMaxWaitIsTheServers(t *testing.T) {
	t.Parallel()
	c := newClient(t, startHost(t), adminToken)
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "setter", []byte("name: setter\nsteps: [{id: s, set: {x: 1}}]\n")); err != nil {
		t.Fatal(err)
	}
	if in, _, err := c.Start(ctx, "setter", apiv1.StartRequest{ID: "done"}, time.Minute); err != nil || in.Status != apiv1.StatusCompleted {
		t.Fatalf("Start: %+v, %v", in, err)
	}
	if in, err := c.Await(ctx, "done", apiv1.MaxWait, apiv1.UntilEnded); err != nil || in.ID != "done" {
		t.Fatalf("Await for apiv1.MaxWait: %+v, %v", in, err)
	}
	var p *client.Error
	if _, err := c.Await(ctx, "done", apiv1.MaxWait+time.Second, ""); !errors.As(err, &p) || !errors.Is(err, client.ErrInvalid) || p.Errors[0].Path != "wait" {
		t.Fatalf("Await for more than apiv1.MaxWait: %v, want a 400 about wait", err)
	}
}

// TestClientRoundTripsIDsThatNeedEscaping: every call that puts an id in
// the path escapes it as one segment, and the server decodes it, so an
// instance started with an id holding a space, a '/', a '%', a '+' or a
// non-ASCII letter is read, listed, exported, imported and deleted by
// that id.
func TestClientRoundTripsIDsThatNeedEscaping(t *testing.T) {
	t.Parallel()
	c := newClient(t, startHost(t), adminToken)
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "setter", []byte("name: setter\nsteps: [{id: s, set: {x: 1}}]\noutput: \"${ vars.x }\"\n")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a b", "orders/1001", "x/state", "50%+tax", "café?#"} {
		in, created, err := c.Start(ctx, "setter", apiv1.StartRequest{ID: id}, time.Minute)
		if err != nil || !created || in.ID != id || in.Status != apiv1.StatusCompleted {
			t.Fatalf("Start with id %q: %+v, %v, %v", id, in, created, err)
		}
		if in, err := c.Instance(ctx, id); err != nil || in.ID != id || string(in.Output) != "1" {
			t.Fatalf("Instance(%q): %+v, %v", id, in, err)
		}
		if in, err := c.Await(ctx, id, time.Minute, ""); err != nil || in.ID != id {
			t.Fatalf("Await(%q): %+v, %v", id, in, err)
		}
		if h, err := c.History(ctx, id, client.ListOptions{}); err != nil || len(h.Items) == 0 {
			t.Fatalf("History(%q): %+v, %v", id, h, err)
		}
		if _, err := c.Cancel(ctx, id, "late"); !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), `"`+id+`"`) {
			t.Fatalf("Cancel(%q) of a finished instance: %v, want a conflict naming it", id, err)
		}
		state, err := c.ExportState(ctx, id)
		if err != nil {
			t.Fatalf("ExportState(%q): %v", id, err)
		}
		if _, _, err := c.ImportState(ctx, id, state, false); !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), `"`+id+`"`) {
			t.Fatalf("ImportState(%q) over it: %v, want a conflict naming it", id, err)
		}
		if in, created, err := c.ImportState(ctx, id, state, true); err != nil || created || in.ID != id {
			t.Fatalf("ImportState(%q): %+v, %v, %v", id, in, created, err)
		}
		if err := c.DeleteInstance(ctx, id); err != nil {
			t.Fatalf("DeleteInstance(%q): %v", id, err)
		}
		if _, err := c.Instance(ctx, id); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("Instance(%q) after delete: %v, want not found", id, err)
		}
	}
}

// TestClientLogs: Logs reads an instance's attempts' log lines, filtered
// by step and attempt and page by page; an unknown instance is
// ErrNotFound.
func TestClientLogs(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()
	if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	src := []byte("name: talk\nsteps:\n  - id: t\n    activity: kit.log\n    input: { lines: [a, b], fail_attempts: 1 }\n    retry: { max_attempts: 2, initial_interval: 10ms }\n")
	if _, _, err := c.PutWorkflow(ctx, "talk", src); err != nil {
		t.Fatal(err)
	}
	if in, _, err := c.Start(ctx, "talk", apiv1.StartRequest{ID: "talk-1"}, time.Minute); err != nil || in.Status != apiv1.StatusCompleted {
		t.Fatalf("Start: %+v, %v", in, err)
	}
	reader := newClient(t, url, readerToken)
	var got []string
	f := client.LogFilter{StepPath: "steps[0]", ListOptions: client.ListOptions{Limit: 3}}
	for pages := 0; ; pages++ {
		p, err := reader.Logs(ctx, "talk-1", f)
		if err != nil || pages > 4 {
			t.Fatalf("Logs page %d: %+v, %v", pages, p, err)
		}
		for _, l := range p.Items {
			got = append(got, fmt.Sprintf("%d %s %s", l.Attempt, l.Level, l.Message))
		}
		if p.NextCursor == "" {
			break
		}
		f.Cursor = p.NextCursor
	}
	want := "1 info a (attempt 1)|1 info b (attempt 1)|2 info a (attempt 2)|2 info b (attempt 2)"
	if strings.Join(got, "|") != want {
		t.Errorf("Logs: %s, want %s", strings.Join(got, "|"), want)
	}
	p, err := c.Logs(ctx, "talk-1", client.LogFilter{Attempt: 2})
	if err != nil || len(p.Items) != 2 || p.Items[0].Attempt != 2 || p.Items[0].Node != "client-test" || p.Items[0].Source != "log" {
		t.Fatalf("Logs of attempt 2: %+v, %v", p, err)
	}
	if _, err := c.Logs(ctx, "nope", client.LogFilter{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("Logs of an unknown instance: %v, want ErrNotFound", err)
	}
}

// TestClientPriority: the priority of a start and of an event reaches the
// instances they start, and the instances show it with their fairness
// key.
func TestClientPriority(t *testing.T) {
	t.Parallel()
	c := newClient(t, startHost(t), adminToken)
	ctx := context.Background()
	if _, _, err := c.PutWorkflow(ctx, "tenant-job", []byte(`
name: tenant-job
triggers: [ { event: job.submitted } ]
fairness: { key: "${ input.tenant }", weight: 2 }
steps:
  - { id: s, set: { n: 1 } }
`)); err != nil {
		t.Fatal(err)
	}
	in, _, err := c.Start(ctx, "tenant-job", apiv1.StartRequest{Input: json.RawMessage(`{"tenant": "acme"}`), Priority: 2}, time.Minute)
	if err != nil || in.Priority != 2 || in.FairnessKey != "acme" || in.FairnessWeight != 2 {
		t.Fatalf("Start with priority 2: %+v, %v", in, err)
	}
	res, err := c.SendEvent(ctx, apiv1.EventRequest{Name: "job.submitted", Payload: json.RawMessage(`{"tenant": "initech"}`), Priority: 5})
	if err != nil || len(res.Started) != 1 {
		t.Fatalf("SendEvent with priority 5: %+v, %v", res, err)
	}
	if in, err = c.Instance(ctx, res.Started[0]); err != nil || in.Priority != 5 || in.FairnessKey != "initech" {
		t.Fatalf("the instance the event started: %+v, %v", in, err)
	}
	_, err = c.SendEvent(ctx, apiv1.EventRequest{Name: "job.submitted", Priority: 6})
	var e *client.Error
	if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || len(e.Errors) != 1 || e.Errors[0].Path != "priority" {
		t.Fatalf("SendEvent with priority 6: %v, want ErrInvalid naming priority", err)
	}
}
