package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/doctest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/grant"
)

// fetchManifest asks for what the fetch plugin uses.
const fetchManifest = `{"activities":[{"name":"fetch"}],"needs":{"hosts":["http://127.0.0.1:*"],"config":["url"],"secrets":["token"]}}`

// fetchPlugin writes a plugin whose activity "fetch" GETs the URL of its
// config value "url" with the header "Authorization: Bearer " and its
// secret "token", and returns the response's body as its output. It
// traps when no response arrived.
func fetchPlugin(t *testing.T) string {
	t.Helper()
	const auth = "Authorization: Bearer "
	wasm := testplugins.WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "config" (func $config (param i32 i32 i32 i32) (result i32)))
  (import "weft" "secret" (func $secret (param i32 i32 i32 i32) (result i32)))
  (import "weft" "http_request" (func $request (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "weft" "http_response_body" (func $body (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "%s")
  (data (i32.const 512) "url")
  (data (i32.const 520) "token")
  (data (i32.const 528) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 0) (i32.const %d)) (i32.const 0))
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    (local $url i32) (local $secret i32) (local $n i32)
    (local.set $url (call $config (i32.const 512) (i32.const 3) (i32.const 1024) (i32.const 1024)))
    (if (i32.lt_s (local.get $url) (i32.const 0)) (then unreachable))
    (local.set $secret (call $secret (i32.const 520) (i32.const 5) (i32.const %d) (i32.const 512)))
    (if (i32.lt_s
          (call $request (i32.const 0) (i32.const 0) (i32.const 1024) (local.get $url)
                         (i32.const 528) (i32.add (i32.const %d) (local.get $secret)) (i32.const 0) (i32.const 0))
          (i32.const 0))
      (then unreachable))
    (local.set $n (call $body (i32.const 8192) (i32.const 8192)))
    (call $result (i32.const 8192) (local.get $n))
    (i32.const 0)))`, strings.ReplaceAll(fetchManifest, `"`, `\"`), auth, len(fetchManifest), 528+len(auth), len(auth)))
	path := filepath.Join(t.TempDir(), "fetch.wasm")
	writeFile(t, filepath.Dir(path), "fetch.wasm", string(wasm))
	return path
}

// tokenServer answers {"auth":"ok"} to a request that carries the bearer
// token, {"auth":"refused"} with 401 to others.
func tokenServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"auth":"refused"}`)
			return
		}
		io.WriteString(w, `{"auth":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestPluginCallGrants: weft plugin call builds the plugin's grants from
// -host, -private-networks, -config and -secret.
func TestPluginCallGrants(t *testing.T) {
	const secret = "local-call-secret-0123"
	t.Setenv("WEFT_CALL_TEST_TOKEN", secret)
	srv := tokenServer(t, secret)
	wasm := fetchPlugin(t)
	base := []string{"plugin", "call", wasm, "fetch", "-config", "url=" + srv.URL + "/hook"}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{name: "granted", args: []string{"-host", "http://127.0.0.1:*", "-private-networks", "-secret", "token=env:WEFT_CALL_TEST_TOKEN"},
			wantCode: exitOK, wantStdout: `{"auth":"ok"}`},
		{name: "two host rules", args: []string{"-host", "api.example.com", "-host", "http://127.0.0.1:*", "-private-networks", "-secret", "token=env:WEFT_CALL_TEST_TOKEN"},
			wantCode: exitOK, wantStdout: `{"auth":"ok"}`},
		{name: "the wrong secret", args: []string{"-host", "http://127.0.0.1:*", "-private-networks", "-secret", "token=env:WEFT_CALL_TEST_NONE_SET"},
			wantCode: exitFailed, wantStderr: []string{"WEFT_CALL_TEST_NONE_SET"}},
		{name: "no private networks", args: []string{"-host", "http://127.0.0.1:*", "-secret", "token=env:WEFT_CALL_TEST_TOKEN"},
			wantCode: exitFailed, wantStderr: []string{"not_granted", "127.0.0.1", "--private-networks"}},
		{name: "no host", args: []string{"-secret", "token=env:WEFT_CALL_TEST_TOKEN"},
			wantCode: exitFailed, wantStderr: []string{"not_granted", "weft plugin grant fetch --host http://127.0.0.1:"}},
		{name: "no secret", args: []string{"-host", "http://127.0.0.1:*", "-private-networks"},
			wantCode: exitFailed, wantStderr: []string{"not_granted", `secret "token" is not granted to plugin fetch`, "weft plugin grant fetch --secret"}},
		{name: "bad host", args: []string{"-host", "ftp://x"}, wantCode: exitUsage, wantStderr: []string{"hosts[0]", "http or https"}},
		{name: "bad secret", args: []string{"-secret", "token"}, wantCode: exitUsage, wantStderr: []string{"NAME=REF"}},
		{name: "private networks alone", args: []string{"-private-networks"}, wantCode: exitUsage, wantStderr: []string{"-host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, now: time.Now}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := a.run(ctx, append(append([]string{}, base...), tt.args...))
			if code != tt.wantCode || !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("exit %d (want %d)\nstdout: %s\nstderr: %s", code, tt.wantCode, &stdout, &stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
			if strings.Contains(stdout.String()+stderr.String(), secret) {
				t.Errorf("the secret's value was printed:\n%s\n%s", &stdout, &stderr)
			}
		})
	}
}

// TestCLIGrants walks an operator through a plugin that calls a service:
// it fails not granted, show says what is missing and how to grant it,
// grant makes it work, revoke takes entries back. No command prints the
// secret's value.
func TestCLIGrants(t *testing.T) {
	const secret = "cli-grant-secret-0123456789"
	t.Setenv("WEFT_CLI_TEST_TOKEN", secret)
	srv := tokenServer(t, secret)
	ts := startServer(t)
	var printed strings.Builder
	run := func(t *testing.T, stdin string, args ...string) result {
		t.Helper()
		r := ts.weftIn(t, nil, stdin, args...)
		printed.WriteString(r.stdout + r.stderr)
		return r
	}
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		r := run(t, "", args...)
		if r.code != exitOK {
			t.Fatalf("weft %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	ok(t, "plugin", "push", fetchPlugin(t))
	flow := writeFile(t, t.TempDir(), "fetcher.yaml", "name: fetcher\nsteps:\n  - { id: f, activity: fetch.fetch, output: r }\noutput: \"${ vars.r }\"\n")
	ok(t, "workflow", "put", flow)

	// Nothing granted: show says what is missing and how to grant it.
	out := ok(t, "plugin", "show", "fetch")
	for _, want := range []string{
		"host    http://127.0.0.1:*  MISSING", "config  url", "secret  token", "granted:  nothing",
		"to grant what is missing:",
		"weft plugin grant fetch --config url=VALUE --secret token=env:VARIABLE\n",
		"weft plugin grant fetch --host http://127.0.0.1:* --private-networks\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("plugin show lacks %q:\n%s", want, out)
		}
	}

	// Grant piece by piece: entries add up.
	out = ok(t, "plugin", "grant", "fetch", "--config", "url="+srv.URL+"/hook", "--secret", "token=env:WEFT_CLI_TEST_TOKEN")
	if !strings.Contains(out, "plugin fetch: grants revision 1") || !strings.Contains(out, "secret  token = env:WEFT_CLI_TEST_TOKEN") {
		t.Errorf("grant: %s", out)
	}
	// No host granted yet: the run fails not granted, and is not retried.
	r := run(t, "", "run", "fetcher", "--wait", "-o", "json")
	if r.code != exitFailed || !strings.Contains(r.stdout, `"code": "not_granted"`) || !strings.Contains(r.stdout, "weft plugin grant fetch --host") {
		t.Fatalf("a run without a host granted: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	out = ok(t, "plugin", "grant", "fetch", "--host", "http://127.0.0.1:*", "--private-networks", "--host", "api.example.com")
	for _, want := range []string{"revision 2", "host    http://127.0.0.1:* (private networks)", "host    api.example.com (private networks)", "config  url = " + srv.URL, "secret  token"} {
		if !strings.Contains(out, want) {
			t.Errorf("second grant lacks %q:\n%s", want, out)
		}
	}
	// The same pattern again replaces its rule.
	out = ok(t, "plugin", "grant", "fetch", "--host", "api.example.com")
	if !strings.Contains(out, "host    api.example.com\n") || !strings.Contains(out, "http://127.0.0.1:* (private networks)") {
		t.Errorf("a rule replaced: %s", out)
	}
	out = ok(t, "plugin", "show", "fetch")
	if strings.Contains(out, "MISSING") || strings.Contains(out, "to grant") || !strings.Contains(out, "granted (revision 3):") {
		t.Errorf("plugin show after the grants:\n%s", out)
	}
	var in instanceJSON
	r = run(t, "", "run", "fetcher", "--wait", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &in); r.code != exitOK || err != nil || compactJSON(in.Output, 0) != `{"auth":"ok"}` {
		t.Fatalf("a run with grants: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	// The attempt's record names its request; neither it nor the metrics
	// carry the secret.
	if out := ok(t, "instance", "history", in.ID, "-o", "json"); !strings.Contains(out, `"requests"`) || !strings.Contains(out, `"path": "/hook"`) {
		t.Errorf("the history does not record the request:\n%s", out)
	}
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	printed.Write(metrics) // searched for the secret below
	if !strings.Contains(string(metrics), `weft_plugin_http_requests_total{code="200"`) {
		t.Errorf("/metrics counts no request:\n%s", metrics)
	}

	// Revoke entries; one that is not granted changes nothing.
	out = ok(t, "plugin", "revoke", "fetch", "--host", "api.example.com", "--config", "url")
	if strings.Contains(out, "api.example.com") || strings.Contains(out, "config") || !strings.Contains(out, "revision 4") {
		t.Errorf("revoke: %s", out)
	}
	if r := run(t, "", "plugin", "revoke", "fetch", "--secret", "token", "--secret", "nope"); r.code != exitNotFound || !strings.Contains(r.stderr, "secret nope") {
		t.Errorf("revoking what is not granted: exit %d, %s", r.code, r.stderr)
	}
	if out := ok(t, "plugin", "show", "fetch"); !strings.Contains(out, "config  url                 MISSING") || !strings.Contains(out, "secret  token               granted") {
		t.Errorf("plugin show after the revoke:\n%s", out)
	}

	// -f replaces everything with a document, from a file or stdin.
	doc := writeFile(t, t.TempDir(), "grants.json", `{"config": {"url": "`+srv.URL+`/hook"}, "hosts": [{"pattern": "http://127.0.0.1:*", "private_networks": true}]}`)
	var g apiv1.Grants
	if err := json.Unmarshal([]byte(ok(t, "plugin", "grant", "fetch", "-f", doc, "-o", "json")), &g); err != nil ||
		g.Revision != 5 || len(g.Secrets) != 0 || len(g.Hosts) != 1 || !g.Hosts[0].PrivateNetworks || g.Config["url"] == "" {
		t.Errorf("grant -f: %+v, %v", g, err)
	}
	r = run(t, `{"secrets": {"token": "env:WEFT_CLI_TEST_TOKEN"}}`, "plugin", "grant", "fetch", "-f", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, "revision 6") || strings.Contains(r.stdout, "config") {
		t.Errorf("grant -f -: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}

	// Refusals name the field, and do not repeat a value given as a
	// reference.
	for _, tc := range []struct {
		args      []string
		stdin     string
		code      int
		want      []string
		forbidden string
	}{
		{args: []string{"--secret", "token=" + secret}, code: exitFailed, want: []string{"secrets.token", "env:NAME or file:/path"}, forbidden: secret},
		{args: []string{"--host", "ftp://x.example.com"}, code: exitFailed, want: []string{"hosts[", "pattern", "http or https"}},
		{args: []string{"-f", "-"}, stdin: `{"hostz": []}`, code: exitFailed, want: []string{"hostz", "unknown field"}},
		{args: []string{"-f", "/nonexistent/grants.json"}, code: exitUsage, want: []string{"-f", "no such file"}},
		{args: []string{}, code: exitUsage, want: []string{"nothing to grant"}},
		{args: []string{"--private-networks", "--config", "a=b"}, code: exitUsage, want: []string{"--private-networks applies to the --host rules"}},
		{args: []string{"-f", doc, "--host", "x.example.com"}, code: exitUsage, want: []string{"not both"}},
		{args: []string{"--secret", "token"}, code: exitUsage, want: []string{"NAME=REF"}},
	} {
		r := run(t, tc.stdin, append([]string{"plugin", "grant", "fetch"}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("grant %q: exit %d, want %d\n%s", tc.args, r.code, tc.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("grant %q: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
		if tc.forbidden != "" && strings.Contains(r.stdout+r.stderr, tc.forbidden) {
			t.Errorf("grant %q printed %q", tc.args, tc.forbidden)
		}
	}
	if r := run(t, "", "plugin", "grant", "fetch", "--config", "a=b", "--config"); r.code != exitUsage {
		t.Errorf("a flag without its value: exit %d", r.code)
	}

	// --all revokes everything; again, there is nothing to revoke.
	for _, args := range [][]string{{"--all", "--host", "x"}, {}} {
		if r := run(t, "", append([]string{"plugin", "revoke", "fetch"}, args...)...); r.code != exitUsage {
			t.Errorf("revoke %q: exit %d, want usage", args, r.code)
		}
	}
	if out := ok(t, "plugin", "revoke", "fetch", "--all"); !strings.Contains(out, "everything revoked") {
		t.Errorf("revoke --all: %s", out)
	}
	if r := run(t, "", "plugin", "revoke", "fetch", "--all"); r.code != exitNotFound || !strings.Contains(r.stderr, `nothing is granted to plugin "fetch"`) {
		t.Errorf("revoke --all twice: exit %d, %s", r.code, r.stderr)
	}
	// Grants belong to the name: one can be set before the plugin exists.
	if out := ok(t, "plugin", "grant", "later", "--config", "k=v"); !strings.Contains(out, "plugin later: grants revision") {
		t.Errorf("grant before upload: %s", out)
	}

	if strings.Contains(printed.String(), secret) {
		t.Errorf("a command printed the secret's value:\n%s", &printed)
	}
	if strings.Contains(ts.logs.String(), secret) {
		t.Errorf("the host logged the secret's value:\n%s", ts.logs)
	}
}

// TestReadmeGrantsExample reads the README's example grants file, and
// checks that the commands the Grants section shows parse.
func TestReadmeGrantsExample(t *testing.T) {
	t.Parallel()
	section := doctest.Section(t, "README.md", "## Configuration")
	start := strings.Index(section, "```yaml\n# grants.yaml")
	if start < 0 {
		t.Fatal("the README's configuration section has no grants.yaml example")
	}
	example := section[start+len("```yaml\n"):]
	example = example[:strings.Index(example, "```")]
	cfg, err := config.Load(parseHostFlags(t, "--set", "grants_file="+writeFile(t, t.TempDir(), "grants.yaml", example)).sources(t.TempDir(), nil))
	if err != nil || len(cfg.Grants()["hook"]) == 0 {
		t.Fatalf("the README's grants example: %v\n%s", err, example)
	}
	for _, line := range strings.Split(section, "\n") {
		rest, ok := strings.CutPrefix(line, "bin/weft plugin grant ")
		if !ok {
			continue
		}
		cmd := (&app{stderr: io.Discard, env: nil}).newClientCmd("plugin grant")
		var f grantFlags
		f.add(cmd.fs)
		pos, err := parseInterleaved(cmd.fs, strings.Fields(rest))
		if err != nil || len(pos) != 1 {
			t.Errorf("README: %s: %v %q", line, err, pos)
			continue
		}
		if err := f.set().Check(); err != nil {
			t.Errorf("README: %s: %v", line, err)
		}
	}
}

// TestEditGrantsRedoesAnEditOverAChangeMadeMeanwhile: a revoke and a grant
// made at once both take effect. The grant lands between the revoke's
// read and its write; the revoke's write, made for the revision it read,
// is refused, and the revoke is redone on what the grant left.
func TestEditGrantsRedoesAnEditOverAChangeMadeMeanwhile(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	c, err := client.New(client.Config{Server: ts.url})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutGrants(ctx, "hook", apiv1.GrantDocument{Config: map[string]string{"a": "1", "old": "x"}}); err != nil {
		t.Fatal(err)
	}
	reads := 0
	g, err := editGrants(ctx, c, "hook", func(cur grant.Set) (grant.Set, error) {
		reads++
		if reads == 1 { // another writer, between this read and its write
			if _, err := c.PutGrants(ctx, "hook", apiv1.GrantDocument{Config: map[string]string{"a": "1", "old": "x", "b": "2"}}); err != nil {
				t.Fatal(err)
			}
		}
		set := grant.Set{Config: maps.Clone(cur.Config)}
		delete(set.Config, "old")
		return set, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if reads != 2 || g.Revision != 3 || !maps.Equal(g.Config, map[string]string{"a": "1", "b": "2"}) {
		t.Fatalf("after %d reads: %+v; want the revoke and the grant both, at revision 3", reads, g)
	}
}
