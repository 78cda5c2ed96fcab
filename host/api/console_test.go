package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
)

// TestConsoleFiles: the console's page and assets need no token, carry
// their content type, the CSP and nosniff, are revalidated by an ETag
// that a matching If-None-Match turns into a 304, and nothing outside
// the assets is served.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	h := newHost(t) // with tokens: the files are public all the same
	for path, ct := range map[string]string{
		"/":                 "text/html; charset=utf-8",
		"/assets/app.css":   "text/css; charset=utf-8",
		"/assets/js/app.js": "text/javascript; charset=utf-8",
	} {
		r := h.request("GET", path, "", "", nil).want(t, http.StatusOK)
		if got := r.header.Get("Content-Type"); got != ct {
			t.Errorf("%s: Content-Type %q, want %q", path, got, ct)
		}
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		etag := r.header.Get("ETag")
		if len(etag) < 10 || etag[0] != '"' {
			t.Fatalf("%s: ETag %q", path, etag)
		}
		req, _ := http.NewRequest("GET", h.url+path, nil)
		req.Header.Set("If-None-Match", `"other", `+etag)
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match: %d, want 304", path, res.StatusCode)
		}
		h.request("HEAD", path, "", "", nil).want(t, http.StatusOK)
	}
	for _, path := range []string{"/assets/nope.js", "/assets/../console.go", "/assets/%2e%2e/console.go", "/assets/", "/assets/js"} {
		if p := h.request("GET", path, "", "", nil).want(t, http.StatusNotFound).problem(t); p.Type != "urn:weft:problem:not-found" {
			t.Errorf("%s: %+v", path, p)
		}
	}
	r := h.request("POST", "/assets/app.css", adminSecret, "", nil).want(t, http.StatusMethodNotAllowed)
	if r.header.Get("Allow") != "GET" {
		t.Errorf("405 Allow %q", r.header.Get("Allow"))
	}
}

// TestConsoleWithoutTokens: a host without tokens serves the console under
// the same loopback rules as the API.
func TestConsoleWithoutTokens(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{}})
	h.request("GET", "/", "", "", nil).want(t, http.StatusOK)
	req, _ := http.NewRequest("GET", h.url+"/", nil)
	req.Host = "example.com"
	res, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("Host: example.com: %d, want 403", res.StatusCode)
	}
}
