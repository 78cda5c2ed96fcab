package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// TestRestartServesWhileCompiling: a host restarted with several plugins in
// its store and an empty compilation cache (a restored backup) serves at
// once: /healthz answers, /readyz answers 503 not-ready naming the
// loading until every stored plugin is compiled, then 200. A start that
// needs the plugin the warm-up would compile last compiles it at once
// (beside the warm-up, not after it) and completes.
func TestRestartServesWhileCompiling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	cfg := func(cache string) node.Config {
		return node.Config{
			DataDir: dir, Plugins: plugins.Config{CacheDir: cache},
			Engine: engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond},
		}
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))

	// The store: the warm-up loads in name order, so z-kit comes last.
	first, err := node.Open(ctx, cfg(testplugins.CacheDir(t)), log)
	if err != nil {
		t.Fatal(err)
	}
	for name, example := range map[string]string{"a-ckit": "ckit", "b-tally": "tally", "z-kit": "kit"} {
		if _, _, err := first.PutPlugin(ctx, name, testplugins.Bytes(t, example)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := first.SaveDefinition(ctx, []byte(`
name: greet
steps:
  - { id: up, activity: z-kit.upper, input: { text: "${ input.name }" }, output: up }
output: "${ vars.up.text }"
`)); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted with nothing compiled: every load compiles.
	n, err := node.Open(ctx, cfg(t.TempDir()), log)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { _ = n.Run(runCtx); close(ran) }()
	srv, err := api.New(api.Config{Logger: log, RequestTimeout: 3 * time.Minute}, n)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-served
		stopRun()
		<-ran
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	url := "http://" + ln.Addr().String()
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(b)
	}

	if status, body := get("/healthz"); status != http.StatusOK {
		t.Fatalf("/healthz while compiling: %d %s", status, body)
	}
	status, body := get("/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "urn:weft:problem:not-ready") || !strings.Contains(body, "still loading the stored plugins") {
		t.Fatalf("/readyz while compiling: %d %s; want 503 not-ready saying the plugins are loading", status, body)
	}
	t.Logf("/readyz while compiling: %s", body)

	// The start needs z-kit, which the warm-up would compile last. Its
	// compile under the race detector on a loaded machine (the whole
	// suite at once) may outlast one wait: the instance is then asked
	// for again, within ten minutes.
	res, err := http.Post(url+"/v1/workflows/greet/instances?wait=3m", "application/json", strings.NewReader(`{"input":{"name":"ada"}}`))
	if err != nil {
		t.Fatal(err)
	}
	var inst instance
	err = json.NewDecoder(res.Body).Decode(&inst)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("start needing a plugin not compiled yet: %d %+v %v", res.StatusCode, inst, err)
	}
	for deadline := time.Now().Add(10 * time.Minute); inst.Status == "pending" || inst.Status == "running"; {
		if time.Now().After(deadline) {
			t.Fatalf("the instance needing a plugin not compiled yet is still %s after ten minutes", inst.Status)
		}
		res, err := http.Get(url + "/v1/instances/" + inst.ID + "?wait=3m")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&inst)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("reading the instance again: %d %v", res.StatusCode, err)
		}
	}
	if inst.Status != "completed" || string(inst.Output) != `"ADA"` {
		t.Fatalf("start needing a plugin not compiled yet: %+v", inst)
	}
	select {
	case <-n.Warmed():
	case <-time.After(5 * time.Minute):
		t.Fatal("the stored plugins were not loaded within 5 minutes")
	}
	if status, body := get("/readyz"); status != http.StatusOK {
		t.Fatalf("/readyz once loaded: %d %s", status, body)
	}
}
