package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

type pluginDoc struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Size       int      `json:"size"`
	Activities []string `json:"activities"`
	Versions   []struct {
		Version string `json:"version"`
	} `json:"versions"`
}

type pageDoc[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// TestPluginRoutes: upload (201, then 200 for the same content), show,
// list, delete.
func TestPluginRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	kit := testplugins.Bytes(t, "kit")

	var created pluginDoc
	h.request("PUT", "/v1/plugins/kit", adminSecret, "application/wasm", kit).want(t, http.StatusCreated).json(t, &created)
	if created.Name != "kit" || created.Version != plugins.Hash(kit) || created.Size != len(kit) || !contains(created.Activities, "echo") {
		t.Fatalf("created = %+v", created)
	}
	var again pluginDoc
	h.request("PUT", "/v1/plugins/kit", adminSecret, "application/octet-stream", kit).want(t, http.StatusOK).json(t, &again)
	if again.Version != created.Version {
		t.Fatalf("second upload: version %s, want %s", again.Version, created.Version)
	}
	// Another name with the same bytes is a plugin of its own.
	h.request("PUT", "/v1/plugins/kit2", adminSecret, "application/wasm", kit).want(t, http.StatusCreated)

	var shown pluginDoc
	h.do("GET", "/v1/plugins/kit", nil).want(t, http.StatusOK).json(t, &shown)
	if shown.Version != created.Version || len(shown.Versions) != 1 || shown.Versions[0].Version != created.Version {
		t.Fatalf("shown = %+v", shown)
	}

	var p1 pageDoc[pluginDoc]
	h.do("GET", "/v1/plugins?limit=1", nil).want(t, http.StatusOK).json(t, &p1)
	if len(p1.Items) != 1 || p1.Items[0].Name != "kit" || p1.NextCursor == nil || *p1.NextCursor == "" {
		t.Fatalf("page 1 = %+v", p1)
	}
	var p2 pageDoc[pluginDoc]
	h.do("GET", "/v1/plugins?limit=1&cursor="+*p1.NextCursor, nil).want(t, http.StatusOK).json(t, &p2)
	if len(p2.Items) != 1 || p2.Items[0].Name != "kit2" {
		t.Fatalf("page 2 = %+v", p2)
	}

	h.do("DELETE", "/v1/plugins/kit2", nil).want(t, http.StatusNoContent)
	h.do("GET", "/v1/plugins/kit2", nil).want(t, http.StatusNotFound).problem(t)
	// kit still runs: deleting kit2 did not take the shared module away.
	h.putWorkflow("greet", echoFlow)
	var in instance
	h.do("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"input": map[string]any{"name": "ada"}}).want(t, http.StatusCreated).json(t, &in)
	if in.Status != "completed" || string(in.Output) != `"ADA"` {
		t.Fatalf("instance = %+v, output %s", in, in.Output)
	}
}

type workflowDoc struct {
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Hash       string          `json:"hash"`
	Source     *string         `json:"source"`
	Definition json.RawMessage `json:"definition"`
	CreatedAt  time.Time       `json:"created_at"`
	Versions   []struct {
		Version   int       `json:"version"`
		CreatedAt time.Time `json:"created_at"`
	} `json:"versions"`
}

// numbers answers the versions listed, in their order.
func (w workflowDoc) numbers() []int {
	var ns []int
	for _, v := range w.Versions {
		ns = append(ns, v.Version)
	}
	return ns
}

// TestWorkflowRoutes: save (201, 200 unchanged, 201 changed, JSON too),
// show (latest and by version), list, delete.
func TestWorkflowRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()

	var v1 workflowDoc
	h.request("PUT", "/v1/workflows/greet", adminSecret, "application/yaml", []byte(echoFlow)).want(t, http.StatusCreated).json(t, &v1)
	if v1.Name != "greet" || v1.Version != 1 || v1.Hash == "" || v1.Source != nil {
		t.Fatalf("v1 = %+v", v1)
	}
	var same workflowDoc
	h.request("PUT", "/v1/workflows/greet", adminSecret, "text/yaml; charset=utf-8", []byte(echoFlow)).want(t, http.StatusOK).json(t, &same)
	if same.Version != 1 {
		t.Fatalf("unchanged save made version %d", same.Version)
	}
	changed := strings.Replace(echoFlow, "kit.upper", "kit.echo", 1)
	var v2 workflowDoc
	h.request("PUT", "/v1/workflows/greet", adminSecret, "application/yaml", []byte(changed)).want(t, http.StatusCreated).json(t, &v2)
	if v2.Version != 2 {
		t.Fatalf("changed save made version %d", v2.Version)
	}
	jsonDef := `{"name": "twice", "steps": [{"id": "a", "activity": "kit.echo", "input": 1}]}`
	h.request("PUT", "/v1/workflows/twice", adminSecret, "application/json", []byte(jsonDef)).want(t, http.StatusCreated)

	var latest, first workflowDoc
	h.do("GET", "/v1/workflows/greet", nil).want(t, http.StatusOK).json(t, &latest)
	h.do("GET", "/v1/workflows/greet?version=1", nil).want(t, http.StatusOK).json(t, &first)
	if latest.Version != 2 || latest.Source == nil || *latest.Source != changed || first.Version != 1 || *first.Source != echoFlow {
		t.Fatalf("latest = %+v, first = %+v", latest, first)
	}
	// The definition parsed: the source's steps, defaults filled in.
	var def struct {
		Name  string `json:"name"`
		Steps []struct {
			ID       string `json:"id"`
			Activity string `json:"activity"`
			Retry    struct {
				MaxAttempts int `json:"max_attempts"`
			} `json:"retry"`
		} `json:"steps"`
	}
	if err := json.Unmarshal(first.Definition, &def); err != nil || def.Name != "greet" || len(def.Steps) != 1 ||
		def.Steps[0].ID != "up" || def.Steps[0].Activity != "kit.upper" || def.Steps[0].Retry.MaxAttempts != 3 {
		t.Fatalf("definition %s (%v): want greet's one step up, kit.upper, with the default retry", first.Definition, err)
	}
	if v1.Definition != nil {
		t.Errorf("a save answered the definition %s; only a show does", v1.Definition)
	}
	h.do("GET", "/v1/workflows/greet?version=9", nil).want(t, http.StatusNotFound).problem(t)

	var list pageDoc[workflowDoc]
	h.do("GET", "/v1/workflows", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 2 || list.Items[0].Name != "greet" || list.Items[0].Version != 2 || list.Items[1].Name != "twice" || list.NextCursor == nil || *list.NextCursor != "" {
		t.Fatalf("list = %+v", list)
	}

	if !slices.Equal(latest.numbers(), []int{2, 1}) || !slices.Equal(first.numbers(), []int{2, 1}) {
		t.Fatalf("versions listed %v (latest) and %v (version 1), want [2 1]", latest.Versions, first.Versions)
	}
	if at := latest.Versions[1].CreatedAt; !at.Equal(first.CreatedAt) {
		t.Errorf("version 1 listed as saved at %v, shown as saved at %v", at, first.CreatedAt)
	}

	h.do("DELETE", "/v1/workflows/greet", nil).want(t, http.StatusNoContent)
	h.do("GET", "/v1/workflows/greet", nil).want(t, http.StatusNotFound).problem(t)
	h.do("DELETE", "/v1/workflows/greet", nil).want(t, http.StatusNotFound).problem(t)

	// Saved again after the deletion: versions 3, 4, 5, and only those
	// listed (1 and 2 are gone).
	for i, src := range []string{echoFlow, changed, strings.Replace(echoFlow, "kit.upper", "kit.work", 1)} {
		var v workflowDoc
		h.request("PUT", "/v1/workflows/greet", adminSecret, "application/yaml", []byte(src)).want(t, http.StatusCreated).json(t, &v)
		if v.Version != 3+i {
			t.Fatalf("saved again as version %d, want %d", v.Version, 3+i)
		}
	}
	var again workflowDoc
	h.do("GET", "/v1/workflows/greet?version=3", nil).want(t, http.StatusOK).json(t, &again)
	if !slices.Equal(again.numbers(), []int{5, 4, 3}) {
		t.Fatalf("versions listed %v after the deletion, want [5 4 3]", again.Versions)
	}
}

// TestInstanceRoutes: start (with and without wait, idempotent by id), show
// with waiting_on, list with filters, history with pagination, events
// resuming and queued, cancel, export, delete, import.
func TestInstanceRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	h.putWorkflow("approval", approvalFlow)

	// Start and wait for completion.
	var done instance
	h.do("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"input": map[string]any{"name": "ada"}, "id": "greet-1"}).
		want(t, http.StatusCreated).json(t, &done)
	if done.ID != "greet-1" || done.Status != "completed" || string(done.Output) != `"ADA"` || string(done.Input) != `{"name":"ada"}` || done.Workflow != "greet" || done.Version != 1 {
		t.Fatalf("done = %+v", done)
	}
	// The same client id again: 200 with the existing instance.
	var same instance
	h.do("POST", "/v1/workflows/greet/instances", map[string]any{"input": map[string]any{"name": "bob"}, "id": "greet-1"}).want(t, http.StatusOK).json(t, &same)
	if same.ID != "greet-1" || string(same.Input) != `{"name":"ada"}` {
		t.Fatalf("idempotent start = %+v", same)
	}
	// Concurrent starts with one new id: one 201, the rest 200.
	statuses := make(chan int, 6)
	var starts sync.WaitGroup
	for range cap(statuses) {
		starts.Add(1)
		go func() {
			defer starts.Done()
			statuses <- h.do("POST", "/v1/workflows/greet/instances", map[string]any{"input": map[string]any{"name": "cy"}, "id": "greet-race"}).status
		}()
	}
	starts.Wait()
	close(statuses)
	count := map[int]int{}
	for st := range statuses {
		count[st]++
	}
	if count[http.StatusCreated] != 1 || count[http.StatusOK] != cap(statuses)-1 {
		t.Fatalf("concurrent starts with one id answered %v, want one 201 and the rest 200", count)
	}
	// The id of an instance of another workflow: 409.
	h.do("POST", "/v1/workflows/approval/instances", map[string]any{"id": "greet-1"}).want(t, http.StatusConflict).problem(t)

	// Without wait: 201 at once; the instance suspends on its bookmark.
	var started instance
	h.do("POST", "/v1/workflows/approval/instances", map[string]any{"input": map[string]any{"id": "o-1"}}).want(t, http.StatusCreated).json(t, &started)
	if started.ID == "" || started.Workflow != "approval" {
		t.Fatalf("started = %+v", started)
	}
	sus := h.awaitStatus(started.ID, "suspended")
	if sus.WaitingOn == nil || len(sus.WaitingOn.Bookmarks) != 1 || len(sus.WaitingOn.Timers) != 1 {
		t.Fatalf("waiting_on = %+v", sus.WaitingOn)
	}
	if b := sus.WaitingOn.Bookmarks[0]; b.Event != "order.approved" || b.Key != "o-1" || b.StepPath == "" {
		t.Fatalf("bookmark = %+v", b)
	}
	// With wait until suspended on a workflow that suspends: answered
	// when it suspends.
	var waited instance
	h.do("POST", "/v1/workflows/approval/instances?wait=30s&until=suspended", map[string]any{"input": map[string]any{"id": "o-2"}}).want(t, http.StatusCreated).json(t, &waited)
	if waited.Status != "suspended" {
		t.Fatalf("wait on a suspending instance answered %s", waited.Status)
	}

	// List with filters and pagination, oldest first.
	var susp pageDoc[instance]
	h.do("GET", "/v1/instances?status=suspended&limit=1&order=oldest", nil).want(t, http.StatusOK).json(t, &susp)
	if len(susp.Items) != 1 || susp.Items[0].ID != started.ID || susp.NextCursor == nil || *susp.NextCursor == "" || susp.Items[0].WaitingOn == nil || len(susp.Items[0].WaitingOn.Bookmarks) != 1 {
		t.Fatalf("suspended page 1 = %+v", susp)
	}
	var susp2 pageDoc[instance]
	h.do("GET", "/v1/instances?status=suspended&limit=1&order=oldest&cursor="+*susp.NextCursor, nil).want(t, http.StatusOK).json(t, &susp2)
	if len(susp2.Items) != 1 || susp2.Items[0].ID != waited.ID {
		t.Fatalf("suspended page 2 = %+v", susp2)
	}
	var greets pageDoc[instance]
	h.do("GET", "/v1/instances?workflow=greet&order=oldest", nil).want(t, http.StatusOK).json(t, &greets)
	if len(greets.Items) != 2 || greets.Items[0].ID != "greet-1" || greets.Items[1].ID != "greet-race" {
		t.Fatalf("greet instances = %+v", greets)
	}

	// An event resumes the first approval.
	var out struct {
		ID      string   `json:"id"`
		Resumed []string `json:"resumed"`
		Started []string `json:"started"`
		Queued  bool     `json:"queued"`
	}
	h.do("POST", "/v1/events", map[string]any{"name": "order.approved", "key": "o-1", "payload": map[string]any{"by": "eve"}, "id": "ev-1"}).
		want(t, http.StatusAccepted).json(t, &out)
	if out.ID != "ev-1" || len(out.Resumed) != 1 || out.Resumed[0] != started.ID || out.Queued {
		t.Fatalf("event outcome = %+v", out)
	}
	fin := h.awaitStatus(started.ID, "completed")
	if string(fin.Output) != `"eve"` || len(fin.WaitingOn.Bookmarks) != 0 {
		t.Fatalf("resumed instance = %+v, output %s, waiting on %+v", fin, fin.Output, *fin.WaitingOn)
	}
	// An event nobody waits for is queued.
	h.do("POST", "/v1/events", map[string]any{"name": "order.approved", "key": "nobody"}).want(t, http.StatusAccepted).json(t, &out)
	if !out.Queued || len(out.Resumed) != 0 {
		t.Fatalf("unmatched event = %+v", out)
	}

	// History, whole and in pages.
	var all pageDoc[struct {
		Seq  uint64 `json:"seq"`
		Type string `json:"type"`
	}]
	h.do("GET", "/v1/instances/"+started.ID+"/history", nil).want(t, http.StatusOK).json(t, &all)
	if len(all.Items) < 3 || all.Items[0].Seq != 1 || all.Items[0].Type != "instance_created" {
		t.Fatalf("history = %+v", all)
	}
	var first, rest pageDoc[struct {
		Seq uint64 `json:"seq"`
	}]
	h.do("GET", "/v1/instances/"+started.ID+"/history?limit=2", nil).want(t, http.StatusOK).json(t, &first)
	if len(first.Items) != 2 || first.NextCursor == nil || *first.NextCursor != "2" {
		t.Fatalf("history page = %+v", first)
	}
	h.do("GET", "/v1/instances/"+started.ID+"/history?after=2", nil).want(t, http.StatusOK).json(t, &rest)
	if len(rest.Items) != len(all.Items)-2 || rest.Items[0].Seq != 3 {
		t.Fatalf("history after 2 = %+v", rest)
	}

	// Cancel the second approval; a finished instance cannot be cancelled.
	var cancelled instance
	h.do("POST", "/v1/instances/"+waited.ID+"/cancel", map[string]any{"reason": "customer left"}).want(t, http.StatusAccepted).json(t, &cancelled)
	if cancelled.ID != waited.ID {
		t.Fatalf("cancel answered %+v", cancelled)
	}
	h.awaitStatus(waited.ID, "cancelled")
	h.do("POST", "/v1/instances/"+waited.ID+"/cancel", nil).want(t, http.StatusConflict).problem(t)

	// Export, delete, import: the instance comes back as it was.
	r := h.do("GET", "/v1/instances/greet-1/state", nil).want(t, http.StatusOK)
	var state map[string]any
	r.json(t, &state)
	if state["format"] != float64(1) {
		t.Fatalf("state = %s", r.body)
	}
	h.do("DELETE", "/v1/instances/greet-1", nil).want(t, http.StatusNoContent)
	h.do("GET", "/v1/instances/greet-1", nil).want(t, http.StatusNotFound).problem(t)
	var imported instance
	h.request("PUT", "/v1/instances/greet-1/state", operatorSecret, "application/json", r.body).want(t, http.StatusCreated).json(t, &imported)
	if imported.ID != "greet-1" || imported.Status != "completed" || string(imported.Output) != `"ADA"` {
		t.Fatalf("imported = %+v", imported)
	}
	// Replacing it must be asked for (import_test.go has the rest).
	h.request("PUT", "/v1/instances/greet-1/state", operatorSecret, "application/json", r.body).want(t, http.StatusConflict)
	h.request("PUT", "/v1/instances/greet-1/state?replace=true", operatorSecret, "application/json", r.body).want(t, http.StatusOK)
}

// TestEventsStartTriggeredWorkflows: an event named by a trigger starts an
// instance; dead letters list the stimuli whose TTL ended.
func TestEventsAndDeadLetters(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}})
	h.pushKit()
	h.putWorkflow("on-order", `
name: on-order
triggers: [ { event: order.created } ]
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
output: "${ vars.a }"
`)
	var out struct {
		Started []string `json:"started"`
	}
	h.do("POST", "/v1/events", map[string]any{"name": "order.created", "payload": map[string]any{"n": 1}}).want(t, http.StatusAccepted).json(t, &out)
	if len(out.Started) != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	in := h.awaitStatus(out.Started[0], "completed")
	if string(in.Output) != `{"n":1}` {
		t.Fatalf("output = %s", in.Output)
	}
	var dead pageDoc[map[string]any]
	h.do("GET", "/v1/events/dead?limit=10", nil).want(t, http.StatusOK).json(t, &dead)
	if dead.Items == nil || dead.NextCursor == nil {
		t.Fatalf("dead letters = %+v", dead)
	}
}

// TestRefresh: definitions from workflows_dir, with the problems of a bad
// file listed and the others saved.
func TestRefresh(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.writeWorkflowFile("greet.yaml", echoFlow)
	h.writeWorkflowFile("broken.yaml", "name: broken\nsteps:\n  - { id: a, activity: kit.nope }\n")
	var res struct {
		Status string `json:"status"`
		Files  []struct {
			File     string `json:"file"`
			Name     string `json:"name"`
			Version  int    `json:"version"`
			Created  bool   `json:"created"`
			Problems []struct {
				Path string `json:"path"`
			} `json:"problems"`
		} `json:"files"`
	}
	h.do("POST", "/v1/admin/refresh", nil).want(t, http.StatusOK).json(t, &res)
	if res.Status != "refreshed" || len(res.Files) != 2 || res.Files[0].File != "broken.yaml" || len(res.Files[0].Problems) == 0 ||
		res.Files[1].Name != "greet" || res.Files[1].Version != 1 || !res.Files[1].Created {
		t.Fatalf("refresh = %+v", res)
	}
	h.do("GET", "/v1/workflows/greet", nil).want(t, http.StatusOK)
	h.do("POST", "/v1/admin/refresh", map[string]any{"workflows": []string{"greet"}}).want(t, http.StatusOK).json(t, &res)
	if res.Status != "refreshed" || len(res.Files) != 1 || res.Files[0].Created {
		t.Fatalf("second refresh = %+v", res)
	}
}

// TestProbes: healthz, readyz and the OpenAPI document need no token.
func TestProbes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for _, path := range []string{"/healthz", "/readyz", "/v1/openapi.json"} {
		r := h.request("GET", path, "", "", nil).want(t, http.StatusOK)
		if !json.Valid(r.body) {
			t.Fatalf("%s: %s", path, r.body)
		}
	}
}

// TestRequestID: a sane X-Request-Id is echoed and logged; an absent or
// insane one is replaced by a generated one; every line the request logs
// carries it.
func TestRequestID(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	req, _ := http.NewRequest("GET", h.url+"/v1/instances/nope", nil)
	req.Header.Set("Authorization", "Bearer "+readerSecret)
	req.Header.Set("X-Request-Id", "abc-123")
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("echoed %q", got)
	}
	req.Header.Set("X-Request-Id", strings.Repeat("x", 200))
	res, err = h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	gen := res.Header.Get("X-Request-Id")
	if len(gen) != 16 {
		t.Fatalf("generated %q", gen)
	}
	for _, id := range []string{"abc-123", gen} {
		found := false
		for _, line := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(line, `"msg":"http request"`) && strings.Contains(line, fmt.Sprintf(`"request_id":%q`, id)) {
				found = strings.Contains(line, `"status":404`) && strings.Contains(line, `"route":"/v1/instances/:id"`) && strings.Contains(line, `"token":"dash"`)
			}
		}
		if !found {
			t.Fatalf("no access log line for request %s with status, route and token:\n%s", id, h.logs.String())
		}
	}
}

func contains(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}

// TestWaitOutlastsTheRequestTimeout: a ?wait= longer than the request
// timeout, which ends before the instance does, still answers 201 with the
// instance as it is (read with a fresh context, not the expired one). The
// request timeout leaves a loaded machine time for the start itself (a
// stored instance, fsync'd), the wait is twice it, the work far longer.
func TestWaitOutlastsTheRequestTimeout(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), RequestTimeout: 3 * time.Second}})
	// The plugin and the workflow go in through the node, not over HTTP:
	// compiling the kit under -race on a slow machine takes longer than the
	// 3s request timeout this test is about.
	ctx := context.Background()
	if _, _, err := h.node.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.node.SaveDefinition(ctx, []byte(`
name: slow
steps: [ { id: w, activity: kit.work, input: { ms: 60000 }, output: w } ]
`)); err != nil {
		t.Fatal(err)
	}
	r := h.request("POST", "/v1/workflows/slow/instances?wait=6s", adminSecret, "application/json", []byte(`{}`))
	if r.status != http.StatusCreated || !strings.Contains(string(r.body), `"status":"`) || strings.Contains(string(r.body), `"status":"completed"`) {
		t.Fatalf("status %d: %s; want 201 with the instance still under way", r.status, r.body)
	}
}
