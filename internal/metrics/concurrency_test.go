package metrics_test

import (
	"context"
	"errors"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestConcurrency: the gauges sum the keys of each workflow over every
// page, and a read that fails leaves them out of the scrape.
func TestConcurrency(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	pages := map[string][]weft.ConcurrencyKey{
		"":   {{Workflow: "charge", Key: "a", Running: 2, Waiting: 5}, {Workflow: "charge", Key: "b", Running: 1}},
		"p2": {{Workflow: "export", Key: "", Running: 3, Waiting: 1}},
	}
	fail := false
	read := func(_ context.Context, workflow, cursor string, limit int) ([]weft.ConcurrencyKey, string, error) {
		if fail {
			return nil, "", errors.New("store down")
		}
		next := ""
		if cursor == "" {
			next = "p2"
		}
		return pages[cursor], next, nil
	}
	if err := m.WatchConcurrency(read); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		family, workflow string
		want             float64
	}{
		{"weft_concurrency_running", "charge", 3},
		{"weft_concurrency_waiting", "charge", 5},
		{"weft_concurrency_running", "export", 3},
		{"weft_concurrency_waiting", "export", 1},
	} {
		if v := value(t, reg, c.family, "workflow", c.workflow); v != c.want {
			t.Errorf("%s{workflow=%s} = %v, want %v", c.family, c.workflow, v, c.want)
		}
	}
	fail = true
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "weft_concurrency_running" {
			t.Fatalf("a failed read still reports %v", mf)
		}
	}
}
