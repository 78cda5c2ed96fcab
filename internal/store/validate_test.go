package store_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// completion is a commit as the engine makes one at the end of a three-step
// workflow: the instance with its vars and output, and the history of the
// run.
func completion() store.Commit {
	in := &weft.Instance{
		ID: "01a21e6a2e3b4c5d6e7f8091a2b3", Workflow: "seq3", Version: 1, Rev: 1, Status: weft.StatusCompleted,
		Input: json.RawMessage(`{"x":1}`), Output: json.RawMessage(`{"x":1}`),
		Vars:    json.RawMessage(`{"a":{"x":1},"b":{"x":1},"c":{"x":1}}`),
		Plugins: map[string]string{"kit": "6021d9854f4dc58f7587d2548f77b34926ac470ca762989c6ec2e478881d97d6"},
	}
	c := store.Commit{Instance: in, Fence: 1, Consumed: []string{"stimulus:1:w"}}
	for range 13 {
		c.History = append(c.History, weft.HistoryEntry{Type: "step_completed", StepPath: "steps[0]", Data: json.RawMessage(`{"kind":"activity","step":"a"}`)})
	}
	c.Timers = []weft.Timer{{ID: "t1", Due: time.Unix(1e9, 0), Data: json.RawMessage(`{}`)}}
	return c
}

// TestCommitValidateNamesTheField: a refused commit names the instance and
// the field, with its index in a list.
func TestCommitValidateNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spoil func(*store.Commit)
		want  string
	}{
		{"vars", func(c *store.Commit) { c.Instance.Vars = json.RawMessage(`{`) }, `instance "01a21e6a2e3b4c5d6e7f8091a2b3": vars is not valid JSON`},
		{"history", func(c *store.Commit) { c.History[7].Data = json.RawMessage(`nul`) }, `instance "01a21e6a2e3b4c5d6e7f8091a2b3": history[7].data is not valid JSON`},
		{"timer id", func(c *store.Commit) { c.Timers[0].ID = "" }, `instance "01a21e6a2e3b4c5d6e7f8091a2b3": timers[0].id must not be empty`},
		{"timer data", func(c *store.Commit) { c.Timers[0].Data = json.RawMessage(`[`) }, `instance "01a21e6a2e3b4c5d6e7f8091a2b3": timers[0].data is not valid JSON`},
		{"consumed", func(c *store.Commit) { c.Consumed[0] = strings.Repeat("m", store.MaxMessageIDLen+1) }, `instance "01a21e6a2e3b4c5d6e7f8091a2b3": consumed[0] is 1025 bytes, more than 1024`},
	} {
		c := completion()
		if err := c.Validate(); err != nil {
			t.Fatalf("the unspoilt commit: %v", err)
		}
		tc.spoil(&c)
		err := c.Validate()
		if !errors.Is(err, weft.ErrInvalid) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid ending %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkCommitValidate is the check every commit of either store makes
// before it writes.
func BenchmarkCommitValidate(b *testing.B) {
	c := completion()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzValidateJSON: a commit's documents are refused exactly when
// encoding/json says they are not JSON (the check is jsontext's, for
// speed, with json.Valid's leniency: duplicate names, bytes not UTF-8).
func FuzzValidateJSON(f *testing.F) {
	for _, s := range []string{`{"x":1}`, ` 1 `, `1 2`, "\"\xff\"", `{"a":1,"a":2}`, `[1,]`, `"\ud800"`, `01`, `1e400`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c := completion()
		c.Instance.Vars = doc
		err := c.Validate()
		if valid := len(doc) == 0 || json.Valid(doc); valid != (err == nil) {
			t.Fatalf("vars %q: Validate() = %v, json.Valid %v", doc, err, valid)
		}
	})
}
