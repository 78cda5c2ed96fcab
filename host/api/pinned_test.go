package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
)

// TestListInstancesPinningAPlugin: ?plugin= lists the instances that pin
// the plugin (?plugin_version=, that version of it), in the list's order
// and with its other filters, paged by its cursor; a version without its
// plugin, or a plugin beside an event or key, is a 400 naming itself.
func TestListInstancesPinningAPlugin(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.request("PUT", "/v1/plugins/text", adminSecret, "application/wasm", testplugins.Bytes(t, "text")).want(t, http.StatusCreated)
	h.putWorkflow("greet", echoFlow)
	h.putWorkflow("slug", "name: slug\nsteps: [{id: s, activity: text.slugify, input: {text: \"A b\"}}]\n")
	// start starts an instance by id and waits for it to complete. On a
	// machine loaded by a whole test run, its plugin's first compile can
	// outlast a request (503 busy): the start is asked again, by its id,
	// within ten minutes.
	start := func(workflow, id string) {
		var in instance
		for deadline := time.Now().Add(10 * time.Minute); ; {
			r := h.do("POST", "/v1/workflows/"+workflow+"/instances?wait=30s", map[string]any{"id": id, "input": map[string]any{"name": "x"}})
			if r.status == http.StatusServiceUnavailable && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond) // polling with a deadline
				continue
			}
			if r.status != http.StatusOK {
				r.want(t, http.StatusCreated)
			}
			r.json(t, &in)
			if in.Status == "completed" || time.Now().After(deadline) {
				break
			}
		}
		if in.Status != "completed" {
			t.Fatalf("%s is %s", id, in.Status)
		}
	}
	start("greet", "k-1")
	start("slug", "t-1")
	start("greet", "k-2")
	start("greet", "k-3")
	var kit struct {
		Version string `json:"version"`
	}
	h.do("GET", "/v1/plugins/kit", nil).want(t, http.StatusOK).json(t, &kit)

	// pages follows the cursors of a list and answers its ids, page by page.
	pages := func(query string) [][]string {
		t.Helper()
		var out [][]string
		cursor := ""
		for range 10 {
			var page pageDoc[instance]
			h.do("GET", "/v1/instances?"+query+"&cursor="+cursor, nil).want(t, http.StatusOK).json(t, &page)
			var ids []string
			for _, in := range page.Items {
				ids = append(ids, in.ID)
			}
			out = append(out, ids)
			if page.NextCursor == nil || *page.NextCursor == "" {
				return out
			}
			cursor = *page.NextCursor
		}
		t.Fatalf("%s: more than 10 pages", query)
		return nil
	}
	for _, tt := range []struct {
		query string
		want  [][]string
	}{
		{"plugin=kit", [][]string{{"k-3", "k-2", "k-1"}}},
		{"plugin=kit&limit=2", [][]string{{"k-3", "k-2"}, {"k-1"}}},
		{"plugin=kit&order=oldest&limit=2", [][]string{{"k-1", "k-2"}, {"k-3"}}},
		{"plugin=kit&plugin_version=" + kit.Version, [][]string{{"k-3", "k-2", "k-1"}}},
		{"plugin=kit&plugin_version=0000", [][]string{nil}},
		{"plugin=text", [][]string{{"t-1"}}},
		{"plugin=text&workflow=greet", [][]string{nil}},
		{"plugin=thumbnail", [][]string{nil}},
	} {
		if got := pages(tt.query); !slices.EqualFunc(got, tt.want, func(a, b []string) bool { return slices.Equal(a, b) }) {
			t.Errorf("GET /v1/instances?%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	for query, param := range map[string]string{
		"plugin_version=" + kit.Version: "plugin_version",
		"plugin=kit&key=fixed":          "plugin",
		"plugin=kit&id=k-1":             "id",
		"plugin=kit&cursor=!!":          "cursor",
	} {
		p := h.do("GET", "/v1/instances?"+query, nil).want(t, http.StatusBadRequest).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Path != param {
			t.Errorf("GET /v1/instances?%s: errors %+v, want one on %s", query, p.Errors, param)
		}
	}
}
