package definition

import (
	"testing"
	"time"
)

// TestRetention: the optional top-level retention is a duration (days
// allowed) or a bare 0, and changes the hash only when present.
func TestRetention(t *testing.T) {
	t.Parallel()
	const steps = "\nsteps: [{id: a, delay: 1s}]\n"
	for _, tt := range []struct {
		src  string
		want *time.Duration
	}{
		{"name: wf", nil},
		{"name: wf\nretention: 72h", ptr(72 * time.Hour)},
		{"name: wf\nretention: 7d", ptr(7 * 24 * time.Hour)},
		{"name: wf\nretention: 0", ptr(time.Duration(0))},
		{"name: wf\nretention: 0s", ptr(time.Duration(0))},
		{`{"name": "wf", "retention": "30m", "steps": [{"id": "a", "delay": "1s"}]}`, ptr(30 * time.Minute)},
	} {
		src := tt.src
		if src[0] != '{' {
			src += steps
		}
		d := mustParse(t, src)
		switch {
		case (d.Retention == nil) != (tt.want == nil):
			t.Errorf("%q: Retention = %v, want %v", tt.src, d.Retention, tt.want)
		case d.Retention != nil && *d.Retention != *tt.want:
			t.Errorf("%q: Retention = %s, want %s", tt.src, *d.Retention, *tt.want)
		}
		// The canonical form keeps it.
		again := mustParse(t, string(d.Canonical()))
		if (again.Retention == nil) != (d.Retention == nil) || (d.Retention != nil && *again.Retention != *d.Retention) {
			t.Errorf("%q: Retention after the canonical round trip = %v", tt.src, again.Retention)
		}
	}

	hash := func(src string) string { return mustParse(t, src+steps).Hash() }
	if hash("name: wf\nretention: 3d") != hash("name: wf\nretention: 72h") {
		t.Error("3d and 72h hash differently")
	}
	if hash("name: wf\nretention: 0") != hash("name: wf\nretention: 0s") {
		t.Error("0 and 0s hash differently")
	}
	if hash("name: wf") == hash("name: wf\nretention: 72h") || hash("name: wf\nretention: 72h") == hash("name: wf\nretention: 48h") {
		t.Error("a retention does not change the hash")
	}
}

// TestRetentionProblems: a bad retention is one problem at its line and
// column, saying what is wrong and what would do.
func TestRetentionProblems(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ value, want string }{
		{"3 days", `retention: invalid duration "3 days": want a number and a unit, e.g. 500ms, 30s, 72h or 7d (line 2, column 12)`},
		{"72", `retention: got a number, want a duration such as 500ms, 30s, 72h or 7d (line 2, column 12)`},
		{"-1h", `retention: retention -1h0m0s must not be negative; 0 keeps finished instances forever (line 2, column 12)`},
		{"36600d", `retention: retention 878400h0m0s is longer than the limit of 100 years (876000h0m0s); 0 keeps finished instances forever (line 2, column 12)`},
		{"[1]", `retention: got a list, want a duration such as 500ms, 30s, 72h or 7d (line 2, column 12)`},
	} {
		_, err := Parse([]byte("name: wf\nretention: " + tt.value + "\nsteps: [{id: a, delay: 1s}]\n"))
		if got := problemLines(err); got != tt.want+"\n" {
			t.Errorf("retention: %s\ngot  %s\nwant %s", tt.value, got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
