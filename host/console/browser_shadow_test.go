package console_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/weftworks/weft/internal/testplugins"
)

// pluginDoc is the part of the API's plugin document the test reads.
type pluginDoc struct {
	Version  string `json:"version"`
	Versions []struct {
		Version string `json:"version"`
	} `json:"versions"`
}

// plugin reads a plugin through the API: its current version and every
// version's hash.
func (h *host) plugin(name string) (current string, versions []string) {
	h.t.Helper()
	var p pluginDoc
	h.Do(h.t, "GET", "/v1/plugins/"+name, nil).Want(h.t, http.StatusOK).JSON(h.t, &p)
	for _, v := range p.Versions {
		versions = append(versions, v.Version)
	}
	slices.Sort(versions)
	return p.Version, versions
}

// TestBrowserShadowRunAndPromote: three recorded attempts of kit.upper
// (inputs hi, yo, hey); on kit's page an admin chooses a candidate
// module whose upper always answers {"text": "HI"} and runs a shadow run
// over the last 10: the summary counts 3 attempts, 2 of which differ
// (different output: yo's and hey's), hi's alike the recording; yo's
// row opens on its diff, a replace of /text by "HI". Promote opens a
// dialog naming the plugin, the candidate's hash (its sha256) and the
// sums; Cancel uploads nothing (the API lists the one version still);
// Promote again, confirmed, uploads it: the page is drawn again with the
// new version, which the API says is the current one.
func TestBrowserShadowRunAndPromote(t *testing.T) {
	h := newHost(t)
	h.PushPlugin(t, "kit")
	h.PutWorkflow(t, "greet", recordedGreet)
	for i, text := range []string{"hi", "yo", "hey"} {
		id := fmt.Sprintf("sh-%d", i+1)
		if in := h.start("greet", id, map[string]any{"text": text}, "ended"); in.Status != "completed" {
			t.Fatalf("%s is %s, want completed", id, in.Status)
		}
		if n := len(h.tapes(id)); n != 1 {
			t.Fatalf("%s has %d tapes, want 1", id, n)
		}
	}
	recorded, before := h.plugin("kit")
	if len(before) != 1 {
		t.Fatalf("kit has versions %v, want one", before)
	}
	cand := testplugins.Constant(t, "upper", `{"text":"HI"}`)
	sum := sha256.Sum256(cand)
	candVersion := hex.EncodeToString(sum[:])
	file := filepath.Join(t.TempDir(), "candidate.wasm")
	if err := os.WriteFile(file, cand, 0o644); err != nil {
		t.Fatal(err)
	}

	tb := openTab(t, h.url)
	tb.open("/plugins/kit", adminSecret, "admin")
	waitTrue(tb, "the shadow run's panel", q("[data-test=shadow-file]"))
	tb.do(
		chromedp.SetUploadFiles(chromedp.CSS("[data-test=shadow-file]"), []string{file}),
		chromedp.SetValue(chromedp.CSS("[data-test=shadow-last]"), "10"),
	)
	tb.click("[data-test=shadow-submit]")
	summary := q("[data-test=shadow-summary]")
	waitFor(tb, "the shadow run's summary", summary+"?.dataset.attempts ?? ''", func(s string) bool { return s != "" })
	if got := eval[string](tb, summary+".dataset.attempts + ' attempts, ' + "+summary+".dataset.differ + ' differ'"); got != "3 attempts, 2 differ" {
		t.Fatalf("the summary says %s, want 3 attempts, 2 differ: %s", got, eval[string](tb, summary+".textContent"))
	}
	counts := eval[map[string]string](tb, `Object.fromEntries([...document.querySelectorAll('[data-test=shadow-count]')].map((c) => [c.dataset.outcome, c.dataset.count]))`)
	if counts["different_output"] != "2" || len(counts) != 2 || (counts["same"] != "1" && counts["ended_early"] != "1") {
		t.Errorf("the summary counts %v, want 2 different_output and hi's same (or ended_early)", counts)
	}
	rows := eval[[]string](tb, `[...document.querySelectorAll('[data-test=shadow-row]')].map((r) => r.dataset.instance + '=' + r.dataset.outcome).sort()`)
	if len(rows) != 3 || rows[1] != "sh-2=different_output" || rows[2] != "sh-3=different_output" || !strings.HasPrefix(rows[0], "sh-1=") {
		t.Errorf("the attempts' rows are %v, want sh-1 alike, sh-2 and sh-3 different_output", rows)
	}

	// yo's row opens on its diff: /text replaced by "HI".
	yo := "[data-test=shadow-row][data-instance=sh-2]"
	tb.click(yo + " [data-test=shadow-toggle]")
	op := yo + " + tr [data-test=patch-op]"
	waitTrue(tb, "yo's diff shown", q(op)+"?.checkVisibility()")
	if got := eval[string](tb, q(op)+".dataset.op + ' ' + "+q(op+" [data-test=patch-path]")+".textContent + ' ' + "+q(op+" [data-test=patch-value]")+".textContent"); got != `replace /text "HI"` {
		t.Errorf("yo's diff shows %q, want replace /text \"HI\"", got)
	}

	// Promote, then Cancel: nothing is uploaded.
	dialog := "[data-test=promote-dialog]"
	tb.click("[data-test=promote]")
	waitTrue(tb, "the promote dialog", q(dialog)+"?.open")
	if got := eval[string](tb, q(dialog+" [data-test=promote-version]")+".textContent"); got != candVersion {
		t.Errorf("the dialog names version %q, want the candidate's sha256 %s", got, candVersion)
	}
	text := eval[string](tb, q(dialog)+".textContent")
	for _, want := range []string{"kit", "2 of 3 differ"} {
		if !strings.Contains(text, want) {
			t.Errorf("the promote dialog says %q; want it to say %q", text, want)
		}
	}
	tb.click("[data-test=promote-cancel]")
	waitTrue(tb, "the dialog closed", "!"+q(dialog))
	if cur, vs := h.plugin("kit"); cur != recorded || !slices.Equal(vs, before) {
		t.Fatalf("after Cancel kit is at %s with versions %v; want %s, %v: nothing uploaded", cur, vs, recorded, before)
	}

	// Promote, confirmed: the candidate becomes kit's current version.
	tb.click("[data-test=promote]")
	waitTrue(tb, "the promote dialog again", q(dialog)+"?.open")
	tb.click("[data-test=promote-confirm]")
	waitTrue(tb, "the new version listed", q("[data-test=plugin-version][data-version="+js(candVersion)+"]"))
	waitTrue(tb, "the dialog closed", "!"+q(dialog))
	cur, vs := h.plugin("kit")
	if cur != candVersion || len(vs) != 2 || !slices.Contains(vs, recorded) || !slices.Contains(vs, candVersion) {
		t.Errorf("after Promote kit is at %s with versions %v; want the candidate %s current, and %s kept", cur, vs, candVersion, recorded)
	}
	if got := eval[string](tb, q("[data-test=plugin-version][data-version="+js(candVersion)+"] h3")+".textContent"); !strings.HasPrefix(got, "current version") {
		t.Errorf("the candidate's version is headed %q, want current version", got)
	}
}
