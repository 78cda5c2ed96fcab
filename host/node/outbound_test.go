package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

const outboundSecret = "sk_live_0123456789abcdef"

// Grants and configuration set through one node of a cluster are used by
// an activity on the other at its next attempt; the attempt's record lists
// its requests; the secret's value reaches the remote server and nowhere
// else: not the logs, the history or the metrics of either node.
func TestGrantsAcrossACluster(t *testing.T) {
	// Not parallel: t.Setenv (both nodes resolve env:WEFT_NODE_TEST_TOKEN).
	t.Setenv("WEFT_NODE_TEST_TOKEN", outboundSecret)
	got := make(chan http.Header, 16)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(remote.Close)

	srv := redistest.Start(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a, logsA, _ := open(t, node.Config{NodeID: "a", DataDir: t.TempDir(), Store: node.StoreRedis, RedisAddrs: []string{srv.Addr()},
		Registerer: regA, Engine: engine.Config{TimerInterval: 10 * time.Millisecond, LockTTL: 2 * time.Second, Heartbeat: heartbeat.Config{Cycle: 500 * time.Millisecond}}})
	b, logsB, _ := open(t, node.Config{NodeID: "b", DataDir: t.TempDir(), Store: node.StoreRedis, RedisAddrs: []string{srv.Addr()},
		Registerer: regB, Engine: engine.Config{TimerInterval: 10 * time.Millisecond, LockTTL: 2 * time.Second, Heartbeat: heartbeat.Config{Cycle: 500 * time.Millisecond}}})
	ctx := context.Background()
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/httpprobe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutPlugin(ctx, "probe", wasm); err != nil {
		t.Fatal(err)
	}
	// The workflow reads the secret (the plugin logs it, carelessly) and
	// calls the remote server with a query the record must not keep.
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: outbound
steps:
  - { id: token, activity: probe.secret, input: token, retry: { max_attempts: 1 } }
  - id: call
    activity: probe.do
    input: { url: "${ input }", headers: "X-Trace: 1" }
    retry: { max_attempts: 1 }
    output: call
output: "${ vars.call }"
`)); err != nil {
		t.Fatal(err)
	}
	url, err := json.Marshal(remote.URL + "/in?sig=" + outboundSecret)
	if err != nil {
		t.Fatal(err)
	}

	run := func(on *node.Node) *weft.Instance {
		t.Helper()
		inst, _, err := on.Engine().Start(ctx, "outbound", url, "")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		done, err := on.Engine().WaitFinished(wctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		return done
	}

	// Nothing granted: the first step fails, naming the secret, and is not
	// retried.
	done := run(b)
	if done.Status != weft.StatusFailed {
		t.Fatalf("without grants: %s, want failed", done.Status)
	}
	hist, err := b.Store().History(ctx, done.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(hist, "activity_failed", `"code":"not_granted"`) {
		t.Errorf("history has no not_granted failure:\n%s", dump(hist))
	}

	// Granted through a; run through b (and whichever node picks it up).
	doc := `{"hosts":[{"pattern":"http://127.0.0.1:*","private_networks":true}],
		"config":{"greeting":"hej"},"secrets":{"token":"env:WEFT_NODE_TEST_TOKEN"}}`
	if _, _, err := a.PutGrants(ctx, "probe", []byte(doc), weft.AnyRevision); err != nil {
		t.Fatal(err)
	}
	// The instance that failed for want of them, retried through a, runs
	// on (in Redis, from failed back to running and its plugin pinned
	// again) and completes.
	failed := done.ID
	if err := a.Engine().Retry(ctx, failed, weft.Operation{Reason: "granted"}); err != nil {
		t.Fatal(err)
	}
	<-got
	retried := waitFor(t, func() (*weft.Instance, bool) {
		in, err := b.Store().GetInstance(ctx, failed)
		if err != nil {
			t.Fatal(err)
		}
		return in, in.Status == weft.StatusCompleted
	})
	if retried.Error != nil || !retried.DeleteAfter.IsZero() {
		t.Errorf("retried instance: error %+v, delete_after %s; want neither", retried.Error, retried.DeleteAfter)
	}
	if err := b.Engine().Retry(ctx, failed, weft.Operation{Reason: "again"}); !errors.Is(err, weft.ErrNotFailed) {
		t.Errorf("a retry of a completed instance: %v, want ErrNotFailed", err)
	}
	for range 2 {
		done = run(b)
		if done.Status != weft.StatusCompleted {
			t.Fatalf("with grants: %s", done.Status)
		}
		var out []struct {
			Status int `json:"status"`
		}
		if err := json.Unmarshal(done.Output, &out); err != nil || len(out) != 1 || out[0].Status != 200 {
			t.Fatalf("output %s: %v", done.Output, err)
		}
		if h := <-got; h.Get("X-Trace") != "1" || len(h.Get("Idempotency-Key")) != 32 {
			t.Errorf("the remote server saw %v", h)
		}
		hist, err = a.Store().History(ctx, done.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !hasEvent(hist, "activity_completed", `"requests":[{"method":"GET","host":"`+strings.TrimPrefix(remote.URL, "http://")+`","path":"/in","status":200`) {
			t.Errorf("the attempt's record does not list its request:\n%s", dump(hist))
		}
		if strings.Contains(dump(hist), outboundSecret) {
			t.Errorf("the secret is in the history:\n%s", dump(hist))
		}
	}

	// Revoked through b: a's next attempts are refused again.
	if err := b.DeleteGrants(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	if done = run(a); done.Status != weft.StatusFailed {
		t.Errorf("after revoking: %s, want failed", done.Status)
	}

	for name, logs := range map[string]string{"a": logsA.String(), "b": logsB.String()} {
		if strings.Contains(logs, outboundSecret) {
			t.Errorf("node %s logged the secret:\n%s", name, logs)
		}
	}
	var metricsText bytes.Buffer
	for _, reg := range []*prometheus.Registry{regA, regB} {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&metricsText, mf); err != nil {
				t.Fatal(err)
			}
		}
	}
	if strings.Contains(metricsText.String(), outboundSecret) {
		t.Errorf("the metrics carry the secret")
	}
	if !strings.Contains(metricsText.String(), `weft_plugin_http_requests_total{code="200",plugin="probe",rule="http://127.0.0.1:*"} `) {
		t.Errorf("no request counted:\n%s", grepLines(metricsText.String(), "plugin_http"))
	}
}

func hasEvent(hist []weft.HistoryEntry, typ weft.HistoryType, data string) bool {
	for _, ev := range hist {
		if ev.Type == typ && strings.Contains(string(ev.Data), data) {
			return true
		}
	}
	return false
}

func dump(hist []weft.HistoryEntry) string {
	var b strings.Builder
	for _, ev := range hist {
		fmt.Fprintf(&b, "%s %s %s\n", ev.Type, ev.StepPath, ev.Data)
	}
	return b.String()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
