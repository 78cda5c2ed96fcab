package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestTapes: the tapes keys default to failed attempts and 1MiB, take
// every policy form from a file, a variable or a flag, and refuse bad
// values naming the key and saying what would do.
func TestTapes(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p, n := c.TapePolicy(), c.TapeMaxBytes(); p != weft.DefaultRecordPolicy || n != 1<<20 {
		t.Errorf("defaults: policy %q, max_bytes %d; want failed, 1MiB", p, n)
	}

	for _, tt := range []struct {
		name, file string
		env        []string
		flags      []Flag
		policy     weft.RecordPolicy
		max        int
	}{
		{name: "file", file: "tapes:\n  policy: off\n  max_bytes: 64MiB\n", policy: weft.RecordPolicy{Mode: weft.RecordOff}, max: 64 << 20},
		{name: "file percent", file: "tapes:\n  policy: 2.5%\n", policy: weft.RecordPolicy{Mode: weft.RecordSample, Percent: 2.5}, max: 1 << 20},
		{name: "env", env: []string{"WEFT_TAPES_POLICY=all", "WEFT_TAPES_MAX_BYTES=4KiB"}, policy: weft.RecordPolicy{Mode: weft.RecordAll}, max: 4 << 10},
		{name: "flag", flags: set("tapes.policy=100%", "tapes.max_bytes=1KiB"), policy: weft.RecordPolicy{Mode: weft.RecordSample, Percent: 100}, max: 1 << 10},
	} {
		c, err := load(t, tt.file, tt.env, tt.flags...)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if p, n := c.TapePolicy(), c.TapeMaxBytes(); p != tt.policy || n != tt.max {
			t.Errorf("%s: policy %q, max_bytes %d; want %q, %d", tt.name, p, n, tt.policy, tt.max)
		}
	}

	for _, tt := range []struct{ env, want string }{
		{"WEFT_TAPES_POLICY=failures", `tapes.policy (from env WEFT_TAPES_POLICY): record policy "failures": want off, failed, all or a percentage of attempts such as 5%`},
		{"WEFT_TAPES_POLICY=0.05", `tapes.policy (from env WEFT_TAPES_POLICY): record policy "0.05": a sample is a percentage of attempts: write 5%`},
		{"WEFT_TAPES_POLICY=0%", `tapes.policy (from env WEFT_TAPES_POLICY): record policy "0%": a sample is more than 0% and at most 100% of attempts (off records none)`},
		{"WEFT_TAPES_POLICY=", `tapes.policy (from env WEFT_TAPES_POLICY): record policy ""`},
		{"WEFT_TAPES_MAX_BYTES=0", `tapes.max_bytes (from env WEFT_TAPES_MAX_BYTES): want 1KiB to 64MiB, got 0 (tapes.policy off records nothing)`},
		{"WEFT_TAPES_MAX_BYTES=65MiB", `tapes.max_bytes (from env WEFT_TAPES_MAX_BYTES): want 1KiB to 64MiB, got 65MiB`},
	} {
		_, err := load(t, "", []string{tt.env})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v\nwant an invalid configuration saying %q", tt.env, err, tt.want)
		}
	}
}
