package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/internal/testplugins"
)

// pingFlow starts at most one attempt of its step an hour under the step
// rate limit key r; zzFlow one a day under zz.
const (
	pingFlow = `
name: ping
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: r, limit: 1, per: 1h } }
`
	zzFlow = `
name: zz
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: zz, limit: 2, per: 24h, burst: 3 } }
`
)

// rateLimits reads GET /v1/rate-limits?query.
func (h *host) rateLimits(query string) apiv1.RateLimits {
	h.t.Helper()
	var r apiv1.RateLimits
	h.do("GET", "/v1/rate-limits?"+query, nil).want(h.t, http.StatusOK).json(h.t, &r)
	if r.Items == nil {
		h.t.Fatalf("GET /v1/rate-limits?%s: items null, want a list", query)
	}
	return r
}

// awaitRateKey polls GET /v1/rate-limits until the key of kind is listed
// and done says it is as wanted, and fails the test after 30 seconds.
func (h *host) awaitRateKey(kind, key, what string, done func(apiv1.RateLimitKey) bool) apiv1.RateLimitKey {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.rateLimits("kind=" + kind + "&prefix=" + url.QueryEscape(key))
		for _, k := range r.Items {
			if k.Key == key && done(k) {
				return k
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s rate limit key %q: no %s after 30s: %+v", kind, key, what, r.Items)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// keysOf are the kinds and keys of a list, in order.
func keysOf(r apiv1.RateLimits) string {
	var out []string
	for _, k := range r.Items {
		out = append(out, string(k.Kind)+":"+k.Key)
	}
	return strings.Join(out, " ")
}

// TestRateLimitsSteps: three instances whose step starts one attempt an
// hour under the key r: the first's attempt runs, the others' are
// deferred, each holding its turn, so the key shows two turns ahead and
// its next turn three hours on, with its terms. A key of another step
// with its own terms is listed after it; the kind, the prefix and the
// limit select, the limit says it truncated. An unknown kind and a prefix
// longer than any key are 400s naming the parameter; a reader may read
// the list, nobody else.
func TestRateLimitsSteps(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("ping", pingFlow)
	h.putWorkflow("zz", zzFlow)
	if r := h.rateLimits(""); len(r.Items) != 0 || r.Truncated {
		t.Fatalf("before any turn GET /v1/rate-limits lists %+v, want nothing", r)
	}

	before := time.Now()
	for _, id := range []string{"ping-1", "ping-2", "ping-3"} {
		h.do("POST", "/v1/workflows/ping/instances", map[string]any{"id": id}).want(t, http.StatusCreated)
	}
	h.do("POST", "/v1/workflows/zz/instances?wait=30s", map[string]any{"id": "zz-1"}).want(t, http.StatusCreated)
	h.awaitStatus("ping-1", "completed")
	k := h.awaitRateKey("step", "r", "two turns ahead", func(k apiv1.RateLimitKey) bool { return k.Ahead == 2 })
	// Three turns granted an hour apart from about before: the next one
	// asked for would come three hours on.
	if k.Kind != apiv1.RateLimitStep || k.Limit != 1 || k.Per != "1h0m0s" || k.Burst != 1 ||
		k.NextTurn.Sub(before) < 3*time.Hour || k.NextTurn.Sub(before) > 3*time.Hour+time.Minute {
		t.Errorf("the key r is %+v; want a step key, 1 per 1h0m0s, burst 1, the next turn 3h after %s", k, before.Format(time.RFC3339Nano))
	}
	for _, id := range []string{"ping-2", "ping-3"} {
		var in instance
		h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusOK).json(t, &in)
		if in.Status == "completed" {
			t.Errorf("%s completed: its attempt's turn was an hour or two away", id)
		}
	}

	all := h.rateLimits("")
	if got := keysOf(all); got != "step:r step:zz" || all.Truncated {
		t.Fatalf("GET /v1/rate-limits lists %q (truncated %v), want step:r step:zz", got, all.Truncated)
	}
	// zz's one turn has come, of a burst of three: the next is free.
	if zz := all.Items[1]; zz.Limit != 2 || zz.Per != "24h0m0s" || zz.Burst != 3 || zz.Ahead != 0 || zz.NextTurn.After(time.Now()) {
		t.Errorf("the key zz is %+v; want 2 per 24h0m0s, burst 3, nothing ahead, a turn free now", zz)
	}
	for _, c := range []struct {
		query, keys string
		truncated   bool
	}{
		{"kind=step", "step:r step:zz", false},
		{"kind=host", "", false},
		{"prefix=z", "step:zz", false},
		{"kind=step&prefix=r", "step:r", false},
		{"prefix=nobody", "", false},
		{"limit=1", "step:r", true},
		{"kind=step&limit=2", "step:r step:zz", false},
	} {
		if r := h.rateLimits(c.query); keysOf(r) != c.keys || r.Truncated != c.truncated {
			t.Errorf("GET /v1/rate-limits?%s lists %q (truncated %v), want %q (truncated %v)", c.query, keysOf(r), r.Truncated, c.keys, c.truncated)
		}
	}

	for _, c := range []struct {
		query, field, detail string
	}{
		{"kind=queue", "kind", `"queue" is no kind of rate limit`},
		{"kind=STEP", "kind", `"STEP" is no kind`},
		{"prefix=" + strings.Repeat("p", 257), "prefix", "257 bytes, longer than any key"},
		{"prefix=%ff", "prefix", "not valid UTF-8"},
		{"limit=0", "limit", "must be an integer from 1 to"},
		{"limit=1001", "limit", "must be an integer from 1 to"},
	} {
		p := h.do("GET", "/v1/rate-limits?"+c.query, nil).want(t, http.StatusBadRequest).problem(t)
		if !strings.Contains(p.Detail, c.detail) || len(p.Errors) != 1 || p.Errors[0].Path != c.field {
			t.Errorf("GET /v1/rate-limits?%s: %+v, want a 400 naming %s that says %q", c.query, p, c.field, c.detail)
		}
	}
	h.request("GET", "/v1/rate-limits", readerSecret, "", nil).want(t, http.StatusOK)
	h.request("GET", "/v1/rate-limits", "", "", nil).want(t, http.StatusUnauthorized).problem(t)
}

// TestRateLimitsHostRule: a grant's host rule lets the webhook plugin send
// one request every 10 seconds under the key partner, and a request wait
// up to 15 s for its turn. Of two deliveries started together, the first
// is sent at once and the second waits within max_wait: the host key
// shows it, one turn ahead, with the rule's terms, apart from the steps'
// keys; then it is sent, and both instances complete.
func TestRateLimitsHostRule(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.request("PUT", "/v1/plugins/webhook", adminSecret, "application/wasm", testplugins.Bytes(t, "webhook")).want(t, http.StatusCreated)
	h.putWorkflow("deliver", deliverFlow)
	var (
		mu   sync.Mutex
		sent []time.Time
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, time.Now())
		mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	grants := fmt.Sprintf(`{"hosts": [{"pattern": %q, "private_networks": true,
		"rate_limit": {"limit": 1, "per": "10s", "max_wait": "15s", "key": "partner"}}],
		"config": {"url": %q}, "secrets": {"token": %q}}`, hook.URL, hook.URL+"/in", "file:"+tokenFile)
	h.request("PUT", "/v1/plugins/webhook/grants", adminSecret, "application/json", []byte(grants)).want(t, http.StatusOK)

	for _, id := range []string{"d-1", "d-2"} {
		h.do("POST", "/v1/workflows/deliver/instances", map[string]any{"id": id, "input": map[string]any{"n": id}}).want(t, http.StatusCreated)
	}
	k := h.awaitRateKey("host", "partner", "request waiting for its turn", func(k apiv1.RateLimitKey) bool { return k.Ahead == 1 })
	mu.Lock()
	first := sent
	mu.Unlock()
	if k.Kind != apiv1.RateLimitHost || k.Limit != 1 || k.Per != "10s" || k.Burst != 1 || len(first) != 1 ||
		k.NextTurn.Sub(first[0]) < 19*time.Second || k.NextTurn.Sub(first[0]) > 21*time.Second {
		t.Errorf("the host key is %+v with the requests sent at %v; want 1 per 10s, burst 1, one ahead, the next turn 20s after the first request", k, first)
	}
	if r := h.rateLimits("kind=step"); len(r.Items) != 0 {
		t.Errorf("GET /v1/rate-limits?kind=step lists %+v, want no step key", r.Items)
	}
	h.awaitStatus("d-1", "completed")
	h.awaitStatus("d-2", "completed")
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 2 || sent[1].Sub(sent[0]) < 9*time.Second {
		t.Errorf("the requests were sent at %v, want two, 10s apart", sent)
	}
}
