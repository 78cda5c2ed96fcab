package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/config"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// TestServeGrantsFile: grants_file is applied at start; a restart with
// the same file changes no revision; an invalid entry stops the start,
// naming the plugin and the field.
func TestServeGrantsFile(t *testing.T) {
	t.Parallel()
	data, dir := t.TempDir(), t.TempDir()
	grants := writeFile(t, dir, "grants.yaml", `
# plugin name → grant document
hook:
  hosts:
    - pattern: hooks.example.com
    - { pattern: "http://10.0.0.7:*", private_networks: true }
    - { pattern: api.partner.example, rate_limit: { limit: 10, per: 1s, burst: 20, max_wait: 5s, key: partner } }
  config: { url: "https://hooks.example.com/in", retries: 3 }
  secrets: { token: "env:HOOK_TOKEN" }
other: {}
`)
	start := func(t *testing.T, file string) (*server, *logtest.Buffer, error) {
		t.Helper()
		cfg, err := config.Load(parseHostFlags(t, "--listen", "127.0.0.1:0", "--data-dir", data,
			"--set", "plugins.cache_dir="+testplugins.CacheDir(t), "--set", "grants_file="+file).sources(t.TempDir(), nil))
		if err != nil {
			return nil, nil, err
		}
		logs := &logtest.Buffer{}
		s, err := openServer(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err != nil {
			return nil, logs, err
		}
		s.start()
		return s, logs, nil
	}
	read := func(t *testing.T, s *server, name string) *apiv1.Grants {
		t.Helper()
		c, err := client.New(client.Config{Server: "http://" + s.addr()})
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.Grants(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	stop := func(t *testing.T, s *server) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.shutdown(ctx); err != nil {
			t.Error(err)
		}
	}

	s, logs, err := start(t, grants)
	if err != nil {
		t.Fatal(err)
	}
	g := read(t, s, "hook")
	if g.Revision != 1 || len(g.Hosts) != 3 || g.Hosts[0].PrivateNetworks || !g.Hosts[1].PrivateNetworks ||
		g.Hosts[2].RateLimit == nil || *g.Hosts[2].RateLimit != (apiv1.GrantRateLimit{Limit: 10, Per: "1s", Burst: 20, MaxWait: "5s", Key: "partner"}) ||
		g.Config["retries"] != "3" || g.Config["url"] != "https://hooks.example.com/in" || g.Secrets["token"] != "env:HOOK_TOKEN" {
		t.Fatalf("hook: %+v", g)
	}
	if o := read(t, s, "other"); o.Revision != 1 || len(o.Hosts)+len(o.Config)+len(o.Secrets) != 0 {
		t.Fatalf("other: %+v", o)
	}
	if !strings.Contains(logs.String(), "changed=hook,other") {
		t.Errorf("log:\n%s", logs)
	}
	stop(t, s)

	// The same file again: nothing changes.
	s, logs, err = start(t, grants)
	if err != nil {
		t.Fatal(err)
	}
	if g := read(t, s, "hook"); g.Revision != 1 {
		t.Errorf("a restart with the same file made revision %d", g.Revision)
	}
	if !strings.Contains(logs.String(), "unchanged=hook,other") {
		t.Errorf("log:\n%s", logs)
	}
	stop(t, s)

	// Invalid entries: every problem, each naming the plugin and field;
	// a value written as a secret reference is not repeated.
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"bad pattern", "hook:\n  hosts: [{pattern: 'ftp://x'}]\n", []string{"line 2: plugin hook: hosts[0]: pattern", "http or https"}},
		{"bare pattern", "hook:\n  hosts: [x.example.com]\n", []string{"plugin hook: hosts[0]: want {pattern, private_networks}"}},
		{"unknown field", "hook:\n  hostz: []\n", []string{"plugin hook: unknown field \"hostz\""}},
		{"unknown host field", "hook:\n  hosts: [{pattern: x.example.com, private: true}]\n", []string{"plugin hook: hosts[0]: unknown field \"private\""}},
		{"bad key", "hook:\n  config: {'a b': v}\n", []string{"plugin hook: config \"a b\""}},
		{"bad rate limit", "hook:\n  hosts: [{pattern: x.example.com, rate_limit: {limit: 10, per: 2d}}]\n", []string{"line 2: plugin hook: hosts[0].rate_limit.per: \"2d\" is not a duration"}},
		{"unknown rate limit field", "hook:\n  hosts: [{pattern: x.example.com, rate_limit: {limit: 10, per: 1s, wait: 1s}}]\n", []string{"plugin hook: hosts[0].rate_limit.wait: unknown field"}},
		{"secret value", "hook:\n  secrets: {token: hunter2-in-the-file}\n", []string{"plugin hook: secrets.token: not a reference"}},
		{"bad name", "Hook.X: {}\n", []string{"plugin Hook.X: not a plugin name"}},
		{"not a mapping", "- hook\n", []string{"want a mapping of plugin names"}},
		{"two at once", "a:\n  hosts: [{pattern: 'ftp://x'}]\nb:\n  config: [x]\n", []string{"plugin a: hosts[0]", "plugin b: config: want a mapping"}},
		{"missing file", filepath.Join(dir, "none.yaml"), []string{"none.yaml", "no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if !strings.HasPrefix(file, "/") {
				file = writeFile(t, t.TempDir(), "grants.yaml", tc.file)
			}
			_, _, err := start(t, file)
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("start: %v, want an invalid configuration", err)
			}
			for _, w := range append(tc.want, "grants_file (from flag --set grants_file)") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error repeats the value: %v", err)
			}
		})
	}
	// A JSON file works too.
	s, _, err = start(t, writeFile(t, dir, "grants.json", `{"hook": {"config": {"url": "https://hooks.example.com/v2"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer stop(t, s)
	if g := read(t, s, "hook"); g.Revision != 2 || g.Config["url"] != "https://hooks.example.com/v2" || len(g.Hosts) != 0 {
		t.Errorf("from JSON: %+v", g)
	}
}

// testCA writes a PEM file holding a new CA certificate, and returns its
// path and a leaf certificate it signed.
func testCA(t *testing.T) (string, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weft test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hooks.internal"}, DNSNames: []string{"hooks.internal"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leafCert, _ := x509.ParseCertificate(leafDER)
	path := writeFile(t, t.TempDir(), "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	return path, leafCert
}

// TestConfigPluginsHTTP: the plugins.http keys map onto the runtime's
// HTTPConfig, default to its defaults, and are checked.
func TestConfigPluginsHTTP(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(parseHostFlags(t).sources(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	got, want := cfg.Node(nil).Plugins.HTTP, plugins.Config{}.WithDefaults().HTTP
	if got != want {
		t.Errorf("defaults: %+v, want the runtime's %+v", got, want)
	}

	caFile, leaf := testCA(t)
	dir := t.TempDir()
	writeFile(t, dir, "weft.yaml", "plugins:\n  http:\n    max_response_bytes: 8MiB\n    timeout: 5s\n    ca_file: "+caFile+"\n")
	cfg, err = config.Load(parseHostFlags(t, "--set", "plugins.http.max_headers=20").sources(dir, []string{
		"WEFT_PLUGINS_HTTP_MAX_REQUEST_BYTES=1MiB", "WEFT_PLUGINS_HTTP_MAX_HEADER_BYTES=16KiB",
		"WEFT_PLUGINS_HTTP_MAX_REQUESTS=7", "WEFT_PLUGINS_HTTP_CONNECT_TIMEOUT=2s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	h := cfg.Node(nil).Plugins.HTTP
	if h.MaxResponseBytes != 8<<20 || h.MaxRequestBytes != 1<<20 || h.MaxHeaders != 20 || h.MaxHeaderBytes != 16<<10 ||
		h.MaxRequests != 7 || h.ConnectTimeout != 2*time.Second || h.Timeout != 5*time.Second || h.RootCAs == nil {
		t.Errorf("mapped: %+v", h)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: h.RootCAs, DNSName: "hooks.internal"}); err != nil {
		t.Errorf("a certificate of the ca_file's CA does not verify: %v", err)
	}
	if cfg.Source["plugins.http.ca_file"] == "" || cfg.Source["plugins.http.max_requests"] != "env WEFT_PLUGINS_HTTP_MAX_REQUESTS" {
		t.Errorf("sources: %v", cfg.Source)
	}
	var out strings.Builder
	if err := cfg.Print(&out); err != nil {
		t.Fatal(err)
	}
	if want := "  http:\n    max_response_bytes: 8MiB # from file"; !strings.Contains(out.String(), want) {
		t.Errorf("printed configuration lacks %q:\n%s", want, &out)
	}

	notPEM := writeFile(t, t.TempDir(), "ca.pem", "not a certificate\n")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--set", "plugins.http.max_headers=0"}, []string{"plugins.http.max_headers (from flag --set", "between 1 and 10000"}},
		{[]string{"--set", "plugins.http.timeout=0s"}, []string{"plugins.http.timeout", "must be positive"}},
		{[]string{"--set", "plugins.http.max_response_bytes=2GiB"}, []string{"plugins.http.max_response_bytes", "between 1KiB and 1GiB"}},
		{[]string{"--set", "plugins.http.max_requests=0"}, []string{"plugins.http.max_requests", "must be at least 1, got 0"}},
		{[]string{"--set", "plugins.http.ca_file=/nonexistent/ca.pem"}, []string{"plugins.http.ca_file (from flag --set", "no such file"}},
		{[]string{"--set", "plugins.http.ca_file=" + notPEM}, []string{"plugins.http.ca_file", "holds no PEM certificate"}},
		{[]string{"--set", "plugins.http.retries=3"}, []string{"plugins.http.retries", "no such setting"}},
	} {
		_, err := config.Load(parseHostFlags(t, tc.args...).sources(t.TempDir(), nil))
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%q: %v, want an invalid configuration", tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error lacks %q: %v", tc.args, w, err)
			}
		}
	}
}
