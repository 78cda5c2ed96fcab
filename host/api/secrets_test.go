package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/internal/testplugins"
)

// apiSecret is the secret every plugin of TestSecretsReachNoReader is
// granted; no answer, log line, metric or byte of the store may hold it.
const apiSecret = "api-s3cr3t-0123456789-abcdefghijklmnopqrstuvwxyz-XYZ"

// The workflows of TestSecretsReachNoReader. Each reads the secret in its
// first step, which keeps the value in a global of the guest, and puts it
// in its next step from there: the read and the leak are two calls.
const (
	// spillFlow puts it in the output (the vars and the instance's
	// output), the log, stdout, a heartbeat and a URL's path.
	spillFlow = `
name: spill
steps:
  - { id: keep, activity: leak.leak, input: { read: token } }
  - id: spill
    activity: leak.leak
    input: { url: "${ input.url }", into: [log, stdout, heartbeat, path, output] }
    output: spilled
output: "${ vars.spilled }"
`
	// failFlow puts it in a failure's code, message and details, and in
	// the heartbeat details the failure keeps.
	failFlow = `
name: fail
steps:
  - { id: keep, activity: leak.leak, input: { read: token } }
  - { id: fail, activity: leak.leak, input: { into: [heartbeat, code, message, details] }, retry: { max_attempts: 1 } }
`
	// headerFlow sends a header line without a colon, which the host
	// refuses, quoting it.
	headerFlow = `
name: header
steps:
  - { id: keep, activity: leak.leak, input: { read: token } }
  - { id: send, activity: leak.leak, input: { url: "${ input.url }", into: [header] }, retry: { max_attempts: 1 } }
`
	// hookFlow delivers with the stock webhook plugin, under the name
	// its input gives.
	hookFlow = `
name: hook
steps:
  - { id: send, activity: webhook.deliver, input: { n: 1 }, output: sent, retry: { max_attempts: 1 } }
output: "${ vars.sent }"
`
	echoFlow2 = `
name: hookecho
steps:
  - { id: send, activity: hookecho.deliver, input: { n: 1 }, output: sent, retry: { max_attempts: 1 } }
output: "${ vars.sent }"
`
)

// TestSecretsReachNoReader: a plugin's secret, read in one call and put
// in the next from a global (in the output and so the vars, a failure's
// code, message and details, heartbeat details, a URL's path, log lines,
// a malformed header line the host quotes), and the stock webhook
// plugin's token quoted back by a receiver (a 401 that shows the request,
// a 200 that echoes it), appear nowhere a reader, an operator or a file
// can see: the instances, their list, history, logs and exported state
// (as admin and as reader), /metrics, the node's log and a backup of the
// store. The masked values are there, so the secret did reach each.
func TestSecretsReachNoReader(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, attemptDataLimit: 1 << 12})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(apiSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/deny": // a 401 that quotes the request
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, "refused Authorization: %s", r.Header.Get("Authorization"))
		case "/echo":
			fmt.Fprintf(w, `{"you sent": %q}`, r.Header.Get("Authorization"))
		}
	}))
	t.Cleanup(receiver.Close)

	leak, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/leak"))
	if err != nil {
		t.Fatal(err)
	}
	h.request("PUT", "/v1/plugins/leak", adminSecret, "application/wasm", leak).want(t, http.StatusCreated)
	h.request("PUT", "/v1/plugins/webhook", adminSecret, "application/wasm", testplugins.Bytes(t, "webhook")).want(t, http.StatusCreated)
	h.request("PUT", "/v1/plugins/hookecho", adminSecret, "application/wasm", testplugins.Bytes(t, "webhook")).want(t, http.StatusCreated)
	for plugin, url := range map[string]string{"leak": "", "webhook": receiver.URL + "/deny", "hookecho": receiver.URL + "/echo"} {
		grants := fmt.Sprintf(`{"hosts": [{"pattern": "http://127.0.0.1:*", "private_networks": true}], "config": {"url": %q}, "secrets": {"token": %q}}`, url, "file:"+tokenFile)
		h.request("PUT", "/v1/plugins/"+plugin+"/grants", adminSecret, "application/json", []byte(grants)).want(t, http.StatusOK)
	}
	for name, flow := range map[string]string{"spill": spillFlow, "fail": failFlow, "header": headerFlow, "hook": hookFlow, "hookecho": echoFlow2} {
		h.putWorkflow(name, flow)
	}

	// One at a time, so that the leak plugin's calls share its one
	// instance, and its global.
	for _, tc := range []struct {
		workflow, status string
		// masked is what the instance's document shows where the secret
		// was, when it shows it there.
		masked string
	}{
		{"spill", "completed", `{"kept":true,"value":"[secret]"}`},
		{"fail", "failed", `[secret]`},
		{"header", "failed", `Authorization Bearer [secret]`},
		{"hook", "failed", `Bearer [secret]`},
		{"hookecho", "completed", `"status":200`},
	} {
		var in instance
		h.do("POST", "/v1/workflows/"+tc.workflow+"/instances?wait=120s", map[string]any{"id": tc.workflow, "input": map[string]any{"url": receiver.URL + "/hook/"}}).
			want(t, http.StatusCreated).json(t, &in)
		doc, _ := json.Marshal(in)
		if in.Status != tc.status || !strings.Contains(string(doc), tc.masked) {
			t.Errorf("%s: instance %s, want %s showing %s", tc.workflow, doc, tc.status, tc.masked)
		}
	}

	// Everything a reader, an operator or a file can see.
	seen := map[string]string{}
	for _, token := range []string{adminSecret, readerSecret} {
		for _, path := range []string{"/v1/instances", "/metrics"} {
			seen[path] = string(h.request("GET", path, token, "", nil).want(t, http.StatusOK).body)
		}
		for _, id := range []string{"spill", "fail", "header", "hook", "hookecho"} {
			for _, path := range []string{"", "/history", "/logs", "/state"} {
				p := "/v1/instances/" + id + path
				seen[p+" as "+token[:6]] = string(h.request("GET", p, token, "", nil).want(t, http.StatusOK).body)
			}
		}
	}
	seen["backup"] = string(h.request("GET", "/v1/admin/backup", adminSecret, "", nil).want(t, http.StatusOK).body)
	seen["the node's log"] = h.logs.String()
	for where, text := range seen {
		if strings.Contains(text, apiSecret[:12]) {
			t.Errorf("%s holds the secret:\n%.4000s", where, text)
		}
	}
	for where, want := range map[string]string{
		"/v1/instances/spill/history as reader": `"path":"/hook/[secret]"`,
		"/v1/instances/spill/logs as reader":    `the secret is [secret]`,
		"/v1/instances/fail/history as reader":  `"last_heartbeat":{"secret":"[secret]"}`,
		"/v1/instances/fail as reader":          `"details":{"secret":"[secret]"}`,
	} {
		if !strings.Contains(seen[where], want) {
			t.Errorf("%s lacks %s:\n%.4000s", where, want, seen[where])
		}
	}
}
