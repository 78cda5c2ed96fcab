package embedded

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestVersionsMemo: the versions of a plugin record are decoded again as
// soon as its bytes change (a version added or deleted), a corrupt record
// is an error naming the plugin, and the memo keeps a bounded number of
// plugins.
func TestVersionsMemo(t *testing.T) {
	t.Parallel()
	var v versionsMemo
	for _, c := range []struct {
		raw  string
		want []string
	}{
		{`{"name":"kit","versions":[{"version":"1.0.0"},{"version":"1.1.0"}]}`, []string{"1.0.0", "1.1.0"}},
		{`{"name":"kit","versions":[{"version":"1.0.0"},{"version":"1.1.0"}]}`, []string{"1.0.0", "1.1.0"}},
		{`{"name":"kit","versions":[{"version":"1.1.0"}]}`, []string{"1.1.0"}},
		{`{"name":"kit","versions":[]}`, []string{}},
	} {
		raw := []byte(c.raw)
		got, err := v.of("kit", raw)
		if err != nil || !slices.Equal(got, c.want) {
			t.Fatalf("of(kit, %s) = %v, %v; want %v", c.raw, got, err, c.want)
		}
		raw[0] = 'X' // the caller's bytes change after: the memo kept its own
	}
	if _, err := v.of("bad", []byte(`{"versions":`)); err == nil || !strings.Contains(err.Error(), `plugin "bad"`) {
		t.Errorf("a corrupt record: %v, want an error naming the plugin", err)
	}
	for i := range versionsMemoMax + 10 {
		if _, err := v.of(fmt.Sprint("p", i), []byte(`{"versions":[{"version":"1"}]}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(v.m); n > versionsMemoMax {
		t.Errorf("the memo keeps %d plugins, want at most %d", n, versionsMemoMax)
	}
}
