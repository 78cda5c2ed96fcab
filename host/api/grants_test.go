package api_test

import (
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
)

// grantsDoc is the API's grants view.
type grantsDoc struct {
	Plugin    string     `json:"plugin"`
	Revision  uint64     `json:"revision"`
	UpdatedAt *time.Time `json:"updated_at"`
	Hosts     []struct {
		Pattern         string `json:"pattern"`
		PrivateNetworks bool   `json:"private_networks"`
	} `json:"hosts"`
	Config  map[string]string `json:"config"`
	Secrets map[string]string `json:"secrets"`
}

type needsDoc struct {
	Hosts   []string `json:"hosts"`
	Config  []string `json:"config"`
	Secrets []string `json:"secrets"`
}

const hookManifest = `{"activities":[{"name":"go"}],"needs":{"hosts":["hooks.example.com","http://10.0.0.7:8080"],"config":["url","retries"],"secrets":["token"]}}`

func (h *host) putGrants(token, doc string) response {
	h.t.Helper()
	return h.request("PUT", "/v1/plugins/hook/grants", token, "application/json", []byte(doc))
}

// TestGrantsRoundTrip: nothing granted is a 200 with revision 0; a PUT
// replaces everything and answers the view; an unchanged document keeps
// its revision; DELETE revokes, and 404s when nothing is granted.
func TestGrantsRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHost(t)

	var none grantsDoc
	h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).json(t, &none)
	if none.Plugin != "hook" || none.Revision != 0 || none.UpdatedAt != nil || none.Hosts == nil || len(none.Hosts) != 0 ||
		none.Config == nil || len(none.Config) != 0 || none.Secrets == nil || len(none.Secrets) != 0 {
		t.Fatalf("nothing granted: %+v", none)
	}

	doc := `{"hosts": [{"pattern": "hooks.example.com"}, {"pattern": "http://10.0.0.7:*", "private_networks": true}],
	         "config": {"url": "https://hooks.example.com/in", "retries": "3"},
	         "secrets": {"token": "env:HOOK_TOKEN"}}`
	var put grantsDoc
	h.putGrants(adminSecret, doc).want(t, http.StatusOK).json(t, &put)
	if put.Plugin != "hook" || put.Revision != 1 || put.UpdatedAt == nil || put.UpdatedAt.IsZero() ||
		len(put.Hosts) != 2 || put.Hosts[0].Pattern != "hooks.example.com" || put.Hosts[0].PrivateNetworks ||
		put.Hosts[1].Pattern != "http://10.0.0.7:*" || !put.Hosts[1].PrivateNetworks ||
		put.Config["url"] != "https://hooks.example.com/in" || put.Config["retries"] != "3" || put.Secrets["token"] != "env:HOOK_TOKEN" {
		t.Fatalf("PUT answered %+v", put)
	}
	var got grantsDoc
	h.request("GET", "/v1/plugins/hook/grants", readerSecret, "", nil).want(t, http.StatusOK).json(t, &got)
	if !reflect.DeepEqual(got, put) {
		t.Fatalf("GET %+v\nPUT %+v", got, put)
	}

	// The same document, written otherwise: unchanged, same revision.
	var same grantsDoc
	h.putGrants(adminSecret, `{"secrets":{"token":"env:HOOK_TOKEN"},"config":{"retries":"3","url":"https://hooks.example.com/in"},
		"hosts":[{"pattern":"hooks.example.com","private_networks":false},{"pattern":"http://10.0.0.7:*","private_networks":true}]}`).
		want(t, http.StatusOK).json(t, &same)
	if same.Revision != 1 {
		t.Fatalf("an unchanged document made revision %d", same.Revision)
	}

	// A PUT replaces everything: what it leaves out is revoked.
	var replaced grantsDoc
	h.putGrants(adminSecret, `{"config": {"url": "https://other.example.com"}}`).want(t, http.StatusOK).json(t, &replaced)
	if replaced.Revision != 2 || len(replaced.Hosts) != 0 || len(replaced.Secrets) != 0 || len(replaced.Config) != 1 {
		t.Fatalf("replaced: %+v", replaced)
	}

	h.do("DELETE", "/v1/plugins/hook/grants", nil).want(t, http.StatusNoContent)
	p := h.do("DELETE", "/v1/plugins/hook/grants", nil).want(t, http.StatusNotFound).problem(t)
	if !strings.Contains(p.Detail, `"hook"`) {
		t.Errorf("404 does not name the plugin: %q", p.Detail)
	}
	var after grantsDoc
	h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).json(t, &after)
	if after.Revision != 0 || len(after.Config) != 0 {
		t.Fatalf("after DELETE: %+v", after)
	}
	// Revisions are never reused.
	var again grantsDoc
	h.putGrants(adminSecret, `{}`).want(t, http.StatusOK).json(t, &again)
	if again.Revision <= 2 {
		t.Fatalf("a grant after a revoke has revision %d, want more than 2", again.Revision)
	}
}

// TestGrantsValidation: an invalid document is refused whole, every
// problem named by its field; malformed bodies are 400s as elsewhere.
func TestGrantsValidation(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	big := strings.Repeat("x", 60<<10)
	var bigConfig []string
	for i := range 10 {
		bigConfig = append(bigConfig, fmt.Sprintf(`"k%d": %q`, i, big))
	}
	for _, tc := range []struct {
		name, path, ctype, body string
		status                  int
		want                    map[string]string // path → part of its message
	}{
		{name: "bad host", body: `{"hosts": [{"pattern": "ok.example.com"}, {"pattern": "ftp://x.example.com"}]}`,
			status: 422, want: map[string]string{"hosts[1].pattern": "scheme"}},
		{name: "glob in the middle", body: `{"hosts": [{"pattern": "a.*.example.com"}]}`,
			status: 422, want: map[string]string{"hosts[0].pattern": "'*'"}},
		{name: "every problem at once", body: `{"hosts": [{"pattern": "x.example.com/path"}], "config": {"a b": "v", "ok": "v"}, "secrets": {"token": "HOOK_TOKEN", "other": "file:relative"}}`,
			status: 422, want: map[string]string{
				"hosts[0].pattern": "path", `config["a b"]`: "printable ASCII",
				"secrets.token": "env:NAME or file:/path", "secrets.other": "absolute",
			}},
		{name: "bad rate limits", body: `{"hosts": [{"pattern": "x.example.com", "rate_limit": {"limit": 10, "per": "0s"}}, {"pattern": "y.example.com", "rate_limit": {"limit": 10, "per": "1s", "burts": 2}}]}`,
			status: 422, want: map[string]string{"hosts[0].rate_limit.per": "out of range: want 1ms to 24h", "hosts[1].rate_limit.burts": "unknown field"}},
		{name: "a secret's value instead of a reference", body: `{"secrets": {"token": "hunter2-plain-value"}}`,
			status: 422, want: map[string]string{"secrets.token": "never stored"}},
		{name: "config value too long", body: `{"config": {"blob": "` + strings.Repeat("y", 65<<10) + `"}}`,
			status: 422, want: map[string]string{"config.blob": "more than"}},
		{name: "document too large", body: `{"config": {` + strings.Join(bigConfig, ",") + `}}`,
			status: 422, want: map[string]string{"$": "more than 524288"}},
		{name: "unknown field", body: `{"host": [{"pattern": "x.example.com"}]}`,
			status: 400, want: map[string]string{"host": "unknown field"}},
		{name: "wrong type", body: `{"hosts": "x.example.com"}`,
			status: 400, want: map[string]string{"hosts": "expected"}},
		{name: "malformed", body: `{"hosts": [`, status: 400, want: map[string]string{"$": "ends early"}},
		{name: "empty body", body: ``, status: 400, want: map[string]string{"$": "grant document is required"}},
		{name: "two documents", body: `{} {}`, status: 400, want: map[string]string{"$": "unexpected data"}},
		{name: "bad plugin name", path: "/v1/plugins/Bad.Name/grants", body: `{}`, status: 400, want: map[string]string{"name": "Bad.Name"}},
		{name: "yaml", ctype: "application/yaml", body: "hosts: []\n", status: 415},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path, ctype := tc.path, tc.ctype
			if path == "" {
				path = "/v1/plugins/hook/grants"
			}
			if ctype == "" {
				ctype = "application/json"
			}
			r := h.request("PUT", path, adminSecret, ctype, []byte(tc.body)).want(t, tc.status)
			p := r.problem(t)
			got := map[string]string{}
			for _, e := range p.Errors {
				got[e.Path] = e.Message
			}
			for path, msg := range tc.want {
				if !strings.Contains(got[path], msg) {
					t.Errorf("error at %s = %q, want it to contain %q (all: %+v)", path, got[path], msg, p.Errors)
				}
			}
			if len(tc.want) > 0 && len(got) != len(tc.want) {
				t.Errorf("errors %+v, want exactly the paths of %v", p.Errors, tc.want)
			}
		})
	}
	// Nothing of it was stored.
	var g grantsDoc
	h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).json(t, &g)
	if g.Revision != 0 {
		t.Fatalf("a refused document was stored: %+v", g)
	}
}

// TestGrantsAuth: any role reads grants; only an admin changes them.
func TestGrantsAuth(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putGrants(adminSecret, `{"config": {"url": "u"}}`).want(t, http.StatusOK)
	for _, tok := range []string{readerSecret, operatorSecret} {
		h.request("GET", "/v1/plugins/hook/grants", tok, "", nil).want(t, http.StatusOK)
		for _, r := range []response{
			h.putGrants(tok, `{"hosts": [{"pattern": "*"}]}`),
			h.request("DELETE", "/v1/plugins/hook/grants", tok, "", nil),
		} {
			if p := r.want(t, http.StatusForbidden).problem(t); !strings.Contains(p.Detail, "admin") {
				t.Errorf("403 does not name the role needed: %q", p.Detail)
			}
		}
	}
	h.request("GET", "/v1/plugins/hook/grants", "", "", nil).want(t, http.StatusUnauthorized)
	var g grantsDoc
	h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).json(t, &g)
	if g.Revision != 1 || len(g.Hosts) != 0 {
		t.Fatalf("a refused request changed the grants: %+v", g)
	}
	h.request("DELETE", "/v1/plugins/hook/grants", adminSecret, "", nil).want(t, http.StatusNoContent)
}

// TestPluginShowsNeedsGrantedMissing: GET /v1/plugins/{name} answers what
// the current version asks for, what is granted and what is missing.
func TestPluginShowsNeedsGrantedMissing(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.request("PUT", "/v1/plugins/hook", adminSecret, "application/wasm", testplugins.Manifested(t, hookManifest)).want(t, http.StatusCreated)
	type detail struct {
		Name    string    `json:"name"`
		Needs   needsDoc  `json:"needs"`
		Granted grantsDoc `json:"granted"`
		Missing needsDoc  `json:"missing"`
	}
	wantNeeds := needsDoc{Hosts: []string{"hooks.example.com", "http://10.0.0.7:8080"}, Config: []string{"url", "retries"}, Secrets: []string{"token"}}

	var d detail
	h.request("GET", "/v1/plugins/hook", readerSecret, "", nil).want(t, http.StatusOK).json(t, &d)
	if !reflect.DeepEqual(d.Needs, wantNeeds) || !reflect.DeepEqual(d.Missing, wantNeeds) || d.Granted.Revision != 0 || d.Granted.Plugin != "hook" {
		t.Fatalf("before any grant: %+v", d)
	}

	// A glob covers the named host; a port wildcard the other; the secret
	// stays missing.
	h.putGrants(adminSecret, `{"hosts": [{"pattern": "*.example.com"}, {"pattern": "http://10.0.0.7:*", "private_networks": true}],
		"config": {"url": "https://hooks.example.com/in", "retries": "2"}}`).want(t, http.StatusOK)
	h.request("GET", "/v1/plugins/hook", readerSecret, "", nil).want(t, http.StatusOK).json(t, &d)
	want := needsDoc{Hosts: []string{}, Config: []string{}, Secrets: []string{"token"}}
	if !reflect.DeepEqual(d.Missing, want) || d.Granted.Revision != 1 || len(d.Granted.Hosts) != 2 {
		t.Fatalf("after a grant: missing %+v, granted %+v", d.Missing, d.Granted)
	}

	// A plugin that asks nothing answers empty lists.
	h.pushKit()
	var kit detail
	h.do("GET", "/v1/plugins/kit", nil).want(t, http.StatusOK).json(t, &kit)
	empty := needsDoc{Hosts: []string{}, Config: []string{}, Secrets: []string{}}
	if !reflect.DeepEqual(kit.Needs, empty) || !reflect.DeepEqual(kit.Missing, empty) {
		t.Fatalf("kit: %+v", kit)
	}
}

// TestGrantsNeverAnswerASecretValue: a secret's reference is shown; the
// value behind it is in no answer and no log line.
func TestGrantsNeverAnswerASecretValue(t *testing.T) {
	const value = "s3cr3t-value-of-the-hook-token"
	t.Setenv("WEFT_API_TEST_HOOK_TOKEN", value)
	h := newHost(t)
	h.request("PUT", "/v1/plugins/hook", adminSecret, "application/wasm", testplugins.Manifested(t, hookManifest)).want(t, http.StatusCreated)
	var answers []response
	answers = append(answers,
		h.putGrants(adminSecret, `{"secrets": {"token": "env:WEFT_API_TEST_HOOK_TOKEN"}}`).want(t, http.StatusOK),
		h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK),
		h.do("GET", "/v1/plugins/hook", nil).want(t, http.StatusOK),
		h.do("GET", "/v1/plugins", nil).want(t, http.StatusOK),
		h.putGrants(adminSecret, `{"secrets": {"token": "env:WEFT_API_TEST_HOOK_TOKEN", "bad": "`+value+`"}}`).want(t, http.StatusUnprocessableEntity),
	)
	for i, r := range answers[:3] {
		if !strings.Contains(string(r.body), "env:WEFT_API_TEST_HOOK_TOKEN") {
			t.Errorf("answer %d does not show the reference: %s", i, r.body)
		}
	}
	if p := answers[4].problem(t); len(p.Errors) != 1 || p.Errors[0].Path != "secrets.bad" {
		t.Errorf("a value given as a reference: %+v", p)
	}
	for i, r := range answers {
		if strings.Contains(string(r.body), value) {
			t.Errorf("answer %d shows the secret's value: %s", i, r.body)
		}
	}
	if strings.Contains(h.logs.String(), value) {
		t.Errorf("the log shows the secret's value:\n%s", h.logs)
	}
}

// TestGrantsIfMatch: a read answers the revision as its ETag; a write with
// If-Match is refused (412, nothing changed) unless that revision is the
// stored one, 0 when nothing is granted; a malformed If-Match is a 400.
func TestGrantsIfMatch(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	put := func(ifMatch, doc string) response {
		t.Helper()
		req, err := http.NewRequest("PUT", h.url+"/v1/plugins/hook/grants", strings.NewReader(doc))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminSecret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("If-Match", ifMatch)
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	etag := func() string {
		t.Helper()
		return h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).header.Get("ETag")
	}
	if got := etag(); got != `"0"` {
		t.Fatalf("ETag of nothing granted = %q, want \"0\"", got)
	}
	p := put(`"1"`, `{"config":{"a":"1"}}`).want(t, http.StatusPreconditionFailed).problem(t)
	if !strings.Contains(p.Type, "precondition-failed") || !strings.Contains(p.Detail, "revision 0, not 1") {
		t.Errorf("412: %+v", p)
	}
	var g grantsDoc
	r := put(`"0"`, `{"config":{"a":"1"}}`).want(t, http.StatusOK)
	r.json(t, &g)
	if g.Revision != 1 || r.header.Get("ETag") != `"1"` || etag() != `"1"` {
		t.Fatalf("PUT for revision 0: %+v, ETag %q", g, r.header.Get("ETag"))
	}
	// Another writer's change in between: the stale edit is refused.
	put(`"1"`, `{"config":{"a":"1","b":"2"}}`).want(t, http.StatusOK)
	put(`"1"`, `{}`).want(t, http.StatusPreconditionFailed)
	h.do("GET", "/v1/plugins/hook/grants", nil).want(t, http.StatusOK).json(t, &g)
	if g.Revision != 2 || len(g.Config) != 2 {
		t.Fatalf("after a refused write: %+v", g)
	}
	for _, bad := range []string{`2`, `W/"2"`, `"two"`, `*`, `"2`, `"18446744073709551615"`} {
		p := put(bad, `{}`).want(t, http.StatusBadRequest).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Path != "If-Match" {
			t.Errorf("If-Match %s: %+v", bad, p)
		}
	}
}

// TestGrantsRateLimit: a host rule's rate limit is kept and answered as
// the document wrote it, durations as Go writes them.
func TestGrantsRateLimit(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	var g struct {
		Hosts []struct {
			Pattern   string         `json:"pattern"`
			RateLimit map[string]any `json:"rate_limit"`
		} `json:"hosts"`
	}
	h.putGrants(adminSecret, `{"hosts": [{"pattern": "api.partner.example", "rate_limit": {"limit": 10, "per": "1000ms", "burst": 20, "max_wait": "5s", "key": "partner"}}, {"pattern": "x.example.com"}]}`).
		want(t, http.StatusOK).json(t, &g)
	want := map[string]any{"limit": 10.0, "per": "1s", "burst": 20.0, "max_wait": "5s", "key": "partner"}
	if len(g.Hosts) != 2 || !reflect.DeepEqual(g.Hosts[0].RateLimit, want) || g.Hosts[1].RateLimit != nil {
		t.Fatalf("hosts %+v, want the first with %v, the second without", g.Hosts, want)
	}
}
