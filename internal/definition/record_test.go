package definition

import (
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestRecord: a workflow's record: and an activity step's are parsed
// into policies, the step's over the workflow's over the host's; the
// canonical form keeps them, and a definition without them keeps its hash.
func TestRecord(t *testing.T) {
	t.Parallel()
	host := weft.RecordPolicy{Mode: weft.RecordAll}
	for _, tt := range []struct {
		src        string
		wf, a, b   string // the workflow's and the steps' policies as written
		effA, effB string // the steps' effective policies
	}{
		{"name: wf\nsteps: [{id: a, activity: p.q}, {id: b, activity: p.q}]", "", "", "", "all", "all"},
		{"name: wf\nrecord: failed\nsteps: [{id: a, activity: p.q}, {id: b, activity: p.q, record: off}]", "failed", "", "off", "failed", "off"},
		{"name: wf\nrecord: off\nsteps: [{id: a, activity: p.q, record: 5%}, {id: b, activity: p.q, record: '0.5%'}]", "off", "5%", "0.5%", "5%", "0.5%"},
		{"name: wf\nrecord: 100%\nsteps: [{id: a, activity: p.q, record: all}, {id: b, activity: p.q}]", "100%", "all", "", "all", "100%"},
		{`{"name": "wf", "record": "2.5%", "steps": [{"id": "a", "activity": "p.q"}, {"id": "b", "activity": "p.q", "record": "failed"}]}`, "2.5%", "", "failed", "2.5%", "failed"},
	} {
		d := mustParse(t, tt.src)
		for _, def := range []*Definition{d, mustParse(t, string(d.Canonical()))} {
			a, b := def.Steps[0], def.Steps[1]
			got := []string{def.Record.String(), a.Activity.Record.String(), b.Activity.Record.String(),
				def.RecordPolicy(a, host).String(), def.RecordPolicy(b, host).String()}
			want := []string{tt.wf, tt.a, tt.b, tt.effA, tt.effB}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("%s:\npolicies (workflow, a, b, effective a, b) = %q, want %q", tt.src, got, want)
					break
				}
			}
		}
	}

	// A step that is not an activity keeps no tape.
	d := mustParse(t, "name: wf\nrecord: all\nsteps: [{id: a, delay: 1s}]")
	if p := d.RecordPolicy(d.Steps[0], host); p.Mode != weft.RecordOff {
		t.Errorf("a delay step's policy = %q, want off", p)
	}

	// Present, a policy changes the hash (absent, the canonical form
	// leaves it out, as before the field existed).
	small := "name: wf\nsteps: [{id: a, activity: p.q}]"
	hash := mustParse(t, small).Hash()
	if mustParse(t, "name: wf\nrecord: failed\nsteps: [{id: a, activity: p.q}]").Hash() == hash {
		t.Error("a workflow's record: does not change the hash")
	}
	if mustParse(t, "name: wf\nsteps: [{id: a, activity: p.q, record: all}]").Hash() == hash {
		t.Error("a step's record: does not change the hash")
	}
	if mustParse(t, "name: wf\nrecord: 5%\nsteps: [{id: a, activity: p.q}]").Hash() ==
		mustParse(t, "name: wf\nrecord: 6%\nsteps: [{id: a, activity: p.q}]").Hash() {
		t.Error("two sample rates hash alike")
	}
}
