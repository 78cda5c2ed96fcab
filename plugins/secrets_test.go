package plugins_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// leakSecret is longer than the host's 64-byte excerpts of guest bytes
// minus a header name, so that an excerpt cuts it.
const leakSecret = "leak-s3cr3t-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"

// leakRun is one call of the leak test plugin, with everything it handed
// back.
type leakRun struct {
	out      string
	err      error
	requests []call.Request
	beat     string
}

// all is everything a reader could be shown of the call: its output, its
// error (and a failure's fields), its heartbeat details and its request
// records.
func (r leakRun) all() string {
	b, _ := json.Marshal(r.requests)
	s := r.out + "\n" + r.beat + "\n" + string(b)
	if r.err != nil {
		s += "\n" + r.err.Error()
		var ce *call.Error
		if errors.As(r.err, &ce) {
			s += "\n" + ce.Stderr
		}
		var ge *call.GuestError
		if errors.As(r.err, &ge) {
			s += "\n" + ge.Code + "\n" + ge.Message + "\n" + string(ge.Details)
		}
	}
	return s
}

// leakPlugin is the leak test plugin in a runtime of one instance per
// version, so that one call's globals are the next call's, and whose log
// is logs.
type leakPlugin struct {
	rt      *plugins.Runtime
	version string
	logs    *logtest.Buffer
	grants  *grant.Set
}

func newLeakPlugin(t *testing.T, secret string) *leakPlugin {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	rt := testplugins.Runtime(t, plugins.Config{PoolSize: 1, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	return &leakPlugin{
		rt: rt, version: loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/leak")), logs: logs,
		grants: &grant.Set{
			Hosts:   []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}},
			Secrets: map[string]string{"token": "file:" + f},
		},
	}
}

// call runs the leak activity as plugin with input; the call's log goes to
// the runtime's.
func (p *leakPlugin) call(t *testing.T, plugin string, input map[string]any) leakRun {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	var r leakRun
	var mu sync.Mutex
	hb := call.NewHeartbeat(time.Now())
	out, err := p.rt.Invoke(context.Background(), p.version, call.Call{
		Activity: "leak", Input: in, Grants: p.grants, Heartbeat: hb,
		Info: abi.Info{Plugin: plugin, Activity: "leak", Attempt: 1, IdempotencyKey: "i/s/1"},
		Requested: func(rq call.Request) {
			mu.Lock()
			defer mu.Unlock()
			r.requests = append(r.requests, rq)
		},
	})
	details, _, _ := hb.Last()
	r.out, r.err, r.beat = string(out), err, string(details)
	return r
}

// receiver is a loopback server that answers 200 to every request.
func receiver(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	return srv
}

// TestSecretsMaskedInAllACallHandsBack: a secret a guest read, in this
// call or in an earlier one and kept in a global (on the same instance,
// under the same plugin name or another name of the same version), is
// masked in everything the call hands back — its output, its failure's
// code, message and details, its heartbeat details, the paths of its
// request records, its log lines in the host's log, and the host's own
// message quoting a malformed header line, where the excerpt cuts the
// value.
func TestSecretsMaskedInAllACallHandsBack(t *testing.T) {
	t.Parallel()
	p := newLeakPlugin(t, leakSecret)
	srv := receiver(t)
	var seen []string
	check := func(name string, r leakRun) {
		t.Helper()
		seen = append(seen, name+": "+r.all())
		if strings.Contains(r.all(), leakSecret[:12]) {
			t.Errorf("%s: the secret is in what the call handed back:\n%s", name, r.all())
		}
	}

	// The value read now, and kept.
	r := p.call(t, "leak", map[string]any{"read": "token", "url": srv.URL + "/hook/", "into": []string{"log", "output", "path"}})
	check("read now", r)
	if r.err != nil || r.out != `{"kept":false,"value":"[secret]"}` {
		t.Fatalf("read now: output %s, error %v", r.out, r.err)
	}

	// The value kept from the earlier call, in every place a success can
	// put it.
	r = p.call(t, "leak", map[string]any{"url": srv.URL + "/hook/", "into": []string{"log", "stdout", "heartbeat", "path", "output"}})
	check("kept", r)
	if r.err != nil || r.out != `{"kept":true,"value":"[secret]"}` {
		t.Fatalf("kept: output %s, error %v; want the kept value masked", r.out, r.err)
	}
	if r.beat != `{"secret":"[secret]"}` {
		t.Errorf("kept: heartbeat details %s", r.beat)
	}
	if len(r.requests) != 1 || r.requests[0].Path != "/hook/[secret]" {
		t.Errorf("kept: requests %+v, want one to /hook/[secret]", r.requests)
	}

	// Under another plugin name of the same version: the same instance
	// holds the value.
	r = p.call(t, "another-name", map[string]any{"into": []string{"output"}})
	check("another name", r)
	if r.out != `{"kept":true,"value":"[secret]"}` {
		t.Errorf("another name: output %s, error %v", r.out, r.err)
	}

	// A failure: the code, the message and the details.
	r = p.call(t, "leak", map[string]any{"into": []string{"code", "message", "details", "log"}})
	check("failure", r)
	var ge *call.GuestError
	if !errors.As(r.err, &ge) || ge.Code != "[secret]" || ge.Message != "the secret is [secret]" || string(ge.Details) != `{"secret":"[secret]"}` {
		t.Errorf("failure: %v (details %s), want every field masked", r.err, r.all())
	}

	// The host's own message quoting the malformed header line, cut in
	// the middle of the value.
	r = p.call(t, "leak", map[string]any{"url": srv.URL + "/hook", "into": []string{"header"}})
	check("header", r)
	if !errors.Is(r.err, call.ErrProtocol) || !strings.Contains(r.err.Error(), "Authorization Bearer [secret]") {
		t.Errorf("header: error %v, want an ABI violation quoting the masked line", r.err)
	}

	// A panic, read in the same call (the header's violation discarded
	// the instance).
	r = p.call(t, "leak", map[string]any{"read": "token", "into": []string{"panic"}})
	check("panic", r)
	if r.err == nil {
		t.Error("panic: no error")
	}

	if logged := p.logs.String(); strings.Contains(logged, leakSecret[:12]) || !strings.Contains(logged, "the secret is [secret]") {
		t.Errorf("the host's log holds the secret, or lacks the masked lines:\n%s", logged)
	}
	t.Logf("handed back:\n%s", strings.Join(seen, "\n"))
}

// TestSecretURLMaskedInRequestPath: a secret that is a whole webhook URL
// (as Slack's and Discord's are) is masked in the path of the request's
// record, where the URL's secret part is.
func TestSecretURLMaskedInRequestPath(t *testing.T) {
	t.Parallel()
	srv := receiver(t)
	secret := srv.URL + "/services/T0001/B0002/XyZsecretPart42"
	p := newLeakPlugin(t, secret)
	r := p.call(t, "leak", map[string]any{"read": "token", "into": []string{"path", "log"}})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.requests) != 1 || r.requests[0].Path != "[secret]" {
		t.Errorf("requests %+v, want one whose path is masked", r.requests)
	}
	if all := r.all() + p.logs.String(); strings.Contains(all, "XyZsecretPart42") {
		t.Errorf("the URL's secret part was handed back:\n%s", all)
	}
}
