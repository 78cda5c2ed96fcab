package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// TestPluginModuleRoute: GET /v1/plugins/{name}/versions/{version}/module
// answers the module as uploaded, application/wasm, with the version as
// its ETag and an attachment's file name; a version the plugin keeps in
// its history after another upload is still served; HEAD answers the
// headers. A reader's or an operator's token is a 403 (modules may be
// proprietary), an unknown version or plugin a 404.
func TestPluginModuleRoute(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	kit := testplugins.Bytes(t, "kit")
	old := plugins.Hash(kit)
	next := testplugins.Bytes(t, "text")
	h.request("PUT", "/v1/plugins/kit", adminSecret, "application/wasm", next).want(t, http.StatusCreated)
	cur := plugins.Hash(next)
	path := func(name, version string) string { return "/v1/plugins/" + name + "/versions/" + version + "/module" }

	for version, want := range map[string][]byte{cur: next, old: kit} {
		r := h.request("GET", path("kit", version), adminSecret, "", nil).want(t, http.StatusOK)
		if !bytes.Equal(r.body, want) {
			t.Errorf("version %s: %d bytes, want the %d uploaded", version[:12], len(r.body), len(want))
		}
		if ct, etag, cd := r.header.Get("Content-Type"), r.header.Get("ETag"), r.header.Get("Content-Disposition"); ct != "application/wasm" ||
			etag != `"`+version+`"` || cd != `attachment; filename="kit-`+version[:12]+`.wasm"` {
			t.Errorf("version %s: Content-Type %q, ETag %q, Content-Disposition %q", version[:12], ct, etag, cd)
		}
	}
	if r := h.request("HEAD", path("kit", old), adminSecret, "", nil).want(t, http.StatusOK); r.header.Get("ETag") != `"`+old+`"` || len(r.body) != 0 {
		t.Errorf("HEAD: ETag %q, %d bytes of body", r.header.Get("ETag"), len(r.body))
	}

	for _, token := range []string{readerSecret, operatorSecret} {
		h.request("GET", path("kit", cur), token, "", nil).want(t, http.StatusForbidden)
	}
	h.request("GET", path("kit", cur), "", "", nil).want(t, http.StatusUnauthorized)
	unknown := strings.Repeat("0", 64)
	if p := h.request("GET", path("kit", unknown), adminSecret, "", nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, unknown) || !strings.Contains(p.Detail, "kit") {
		t.Errorf("unknown version: %+v", p)
	}
	if p := h.request("GET", path("nope", cur), adminSecret, "", nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, "nope") {
		t.Errorf("unknown plugin: %+v", p)
	}
}
