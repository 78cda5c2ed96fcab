package main

import (
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// TestGrantRateFlags: --rate, --burst, --max-wait and --rate-key give the
// command's --host rules one rate limit; what is wrong names the flag.
func TestGrantRateFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string // every rule's rate limit, as the grant document writes it; "" for none
		err  string // from parsing or check; "" for none
	}{
		{args: []string{"--host", "a.example"}},
		{args: []string{"--host", "a.example", "--host", "b.example", "--rate", "10/1s", "--burst", "20", "--max-wait", "5s", "--rate-key", "partner"},
			want: `{"limit":10,"per":"1s","burst":20,"max_wait":"5s","key":"partner"}`},
		{args: []string{"--host", "a.example", "--rate", "10/s"}, want: `{"limit":10,"per":"1s"}`},
		{args: []string{"--host", "a.example", "--rate", "600/m"}, want: `{"limit":600,"per":"1m0s"}`},
		{args: []string{"--host", "a.example", "--rate", "1/1h30m"}, want: `{"limit":1,"per":"1h30m0s"}`},
		{args: []string{"--host", "a.example", "--rate", "10"}, err: "want N/PERIOD, such as 10/1s"},
		{args: []string{"--host", "a.example", "--rate", "ten/1s"}, err: "want N/PERIOD"},
		{args: []string{"--host", "a.example", "--rate", "10/fortnight"}, err: `"1fortnight" is not a period`},
		{args: []string{"--host", "a.example", "--rate", "0/1s"}, err: "--rate 0/1s: N 0 is out of range: want 1 to 1000000"},
		{args: []string{"--host", "a.example", "--rate", "10/48h"}, err: "--rate 10/48h: per 48h0m0s is out of range: want 1ms to 24h"},
		{args: []string{"--host", "a.example", "--rate", "10/1s", "--burst", "-2"}, err: "--burst: -2 is out of range"},
		{args: []string{"--host", "a.example", "--rate", "10/1s", "--max-wait", "10m"}, err: "--max-wait: 10m0s is out of range: want 0 to 5m0s"},
		{args: []string{"--host", "a.example", "--rate", "10/1s", "--rate-key", "two words"}, err: "--rate-key: want 1 to 256 bytes of printable ASCII"},
		{args: []string{"--host", "a.example", "--burst", "5"}, err: "--burst, --max-wait and --rate-key go with --rate"},
		{args: []string{"--host", "a.example", "--rate-key", "k"}, err: "go with --rate"},
		{args: []string{"--config", "a=b", "--rate", "10/1s"}, err: "--rate applies to the --host rules of the same command"},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f grantFlags
		f.add(fs)
		err := fs.Parse(tc.args)
		if err == nil {
			err = f.check()
		}
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want an error saying %q", tc.args, err, tc.err)
			continue
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
			continue
		case tc.err != "":
			continue
		}
		s := f.set()
		if err := s.Check(); err != nil {
			t.Errorf("%q: the grant document is refused: %v", tc.args, err)
		}
		for _, h := range s.Hosts {
			got := ""
			if h.RateLimit != nil {
				b, err := json.Marshal(h.RateLimit)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if got != tc.want {
				t.Errorf("%q: rule %s has the rate limit %s, want %s", tc.args, h.Pattern, got, tc.want)
			}
		}
	}
}

// TestCLIGrantRateLimit: a rate limit granted with flags is kept through
// the API, shown by grant and plugin show, replaced with its rule, and
// refused with the field named when a document is wrong.
func TestCLIGrantRateLimit(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ok := func(t *testing.T, args ...string) string {
		t.Helper()
		r := ts.weft(t, nil, args...)
		if r.code != exitOK {
			t.Fatalf("weft %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	ok(t, "plugin", "push", fetchPlugin(t))
	out := ok(t, "plugin", "grant", "fetch", "--host", "api.partner.example", "--host", "eu.partner.example",
		"--rate", "10/1s", "--burst", "20", "--max-wait", "5s", "--rate-key", "partner")
	for _, want := range []string{
		"host  api.partner.example (10/1s burst 20, max wait 5s, key partner)\n",
		"host  eu.partner.example (10/1s burst 20, max wait 5s, key partner)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("grant lacks %q:\n%s", want, out)
		}
	}
	// Another command's rules, with their own limit: the first keep theirs.
	out = ok(t, "plugin", "grant", "fetch", "--host", "http://10.0.0.7:8080", "--private-networks", "--rate", "2/m")
	if !strings.Contains(out, "host  http://10.0.0.7:8080 (private networks; 2/1m0s burst 1)\n") || !strings.Contains(out, "api.partner.example (10/1s burst 20") {
		t.Errorf("a second grant:\n%s", out)
	}
	if out := ok(t, "plugin", "show", "fetch"); !strings.Contains(out, "host  eu.partner.example (10/1s burst 20, max wait 5s, key partner)\n") {
		t.Errorf("plugin show does not show the rate limit:\n%s", out)
	}
	var g apiv1.Grants
	if err := json.Unmarshal([]byte(ok(t, "plugin", "grant", "fetch", "--host", "eu.partner.example", "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	// The pattern given again replaces its rule, rate limit and all.
	want := apiv1.GrantRateLimit{Limit: 10, Per: "1s", Burst: 20, MaxWait: "5s", Key: "partner"}
	if len(g.Hosts) != 3 || g.Hosts[0].RateLimit == nil || *g.Hosts[0].RateLimit != want || g.Hosts[1].RateLimit != nil ||
		g.Hosts[2].RateLimit == nil || *g.Hosts[2].RateLimit != (apiv1.GrantRateLimit{Limit: 2, Per: "1m0s"}) {
		t.Errorf("grants %+v", g.Hosts)
	}

	for _, tc := range []struct {
		args  []string
		stdin string
		code  int
		want  []string
	}{
		{args: []string{"--host", "x.example", "--rate", "10/1s", "--max-wait", "6m"}, code: exitUsage, want: []string{"--max-wait: 6m0s is out of range"}},
		{args: []string{"--host", "x.example", "--max-wait", "1s"}, code: exitUsage, want: []string{"go with --rate"}},
		{args: []string{"-f", "-"}, stdin: `{"hosts": [{"pattern": "x.example", "rate_limit": {"limit": 10, "per": "1 s"}}]}`,
			code: exitFailed, want: []string{"hosts[0].rate_limit.per", `"1 s" is not a duration`}},
	} {
		r := ts.weftIn(t, nil, tc.stdin, append([]string{"plugin", "grant", "fetch"}, tc.args...)...)
		if r.code != tc.code {
			t.Errorf("grant %q: exit %d, want %d\n%s", tc.args, r.code, tc.code, r.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("grant %q: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
	}
}
