package api_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDeletingAPluginThatWorkflowsUseIsRefused: deleting a plugin that a
// saved workflow calls would break the workflow at its next run; it is
// refused, naming the workflow, unless forced.
func TestDeletingAPluginThatWorkflowsUseIsRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)

	p := h.do("DELETE", "/v1/plugins/kit", nil).want(t, http.StatusConflict).problem(t)
	if !slices.Equal(p.Workflows, []string{"greet"}) || !strings.Contains(p.Detail, `plugin "kit" in use by workflow(s) greet`) {
		t.Fatalf("problem = %+v", p)
	}
	p = h.do("DELETE", "/v1/plugins/kit?force=yes", nil).want(t, http.StatusBadRequest).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "force" {
		t.Fatalf("bad force: %+v", p)
	}
	h.do("DELETE", "/v1/plugins/kit?force=true", nil).want(t, http.StatusNoContent)
	h.do("GET", "/v1/plugins/kit", nil).want(t, http.StatusNotFound)
}
