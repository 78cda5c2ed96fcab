package plugins

import (
	"fmt"
	"slices"
	"testing"
)

// TestSecretsSeenKeepsTheMostRecent: the values kept per plugin name and
// per version are bounded, the oldest going first, and a value added again
// is kept once.
func TestSecretsSeenKeepsTheMostRecent(t *testing.T) {
	t.Parallel()
	var s secretsSeen
	if p, v := s.get("p", "v1"); p != nil || v != nil {
		t.Fatalf("empty: %q %q", p, v)
	}
	for i := range maxSeenSecrets + 6 {
		s.add("p", "v1", map[string]string{"token": fmt.Sprintf("value-%03d", i), "short": "abc"})
		s.add("p", "v1", map[string]string{"token": fmt.Sprintf("value-%03d", i)})
	}
	byPlugin, byVersion := s.get("p", "v1")
	if len(byPlugin) != maxSeenSecrets || !slices.Equal(byPlugin, byVersion) {
		t.Fatalf("kept %d by plugin, %d by version; want %d each", len(byPlugin), len(byVersion), maxSeenSecrets)
	}
	if byPlugin[0] != "value-006" || byPlugin[maxSeenSecrets-1] != fmt.Sprintf("value-%03d", maxSeenSecrets+5) {
		t.Errorf("kept %s … %s, want the most recent", byPlugin[0], byPlugin[maxSeenSecrets-1])
	}
	if p, v := s.get("other", "v2"); p != nil || v != nil {
		t.Errorf("another plugin and version: %q %q", p, v)
	}
}

// TestMaskCut: a value is masked whole in every form, and from its start
// to a cut: an excerpt's `"…` or the end of a text cut short.
func TestMaskCut(t *testing.T) {
	t.Parallel()
	forms := secretForms([]string{`tok"en-12345678`, "https://hooks.example.com/services/T1/B2/xyz"})
	for _, tc := range []struct {
		in   string
		cut  bool
		want string
	}{
		{`a tok"en-12345678 b`, false, `a [secret] b`},
		{`{"v":"tok\"en-12345678"}`, false, `{"v":"[secret]"}`},
		{`"tok\"en-12345678"`, false, `"[secret]"`},
		{`line "Authorization tok\"en-123"… (90 bytes)`, false, `line "Authorization [secret]"… (90 bytes)`},
		{`stderr: tok"en-1`, true, `stderr: [secret]`},
		{`stderr: tok"en-1`, false, `stderr: tok"en-1`},
		{`POST /services/T1/B2/xyz`, false, `POST [secret]`},
		{`nothing here`, true, `nothing here`},
	} {
		if got := maskCutWith(forms, tc.in, tc.cut); got != tc.want {
			t.Errorf("maskCut(%q, %v) = %q, want %q", tc.in, tc.cut, got, tc.want)
		}
	}
}
