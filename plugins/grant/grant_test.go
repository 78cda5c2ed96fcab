package grant_test

import (
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/grant"
)

func TestAllow(t *testing.T) {
	set, err := grant.Parse([]byte(`{"hosts":[
		{"pattern":"api.example.com"},
		{"pattern":"*.hooks.example.org:8443"},
		{"pattern":"http://legacy.example.net:*"},
		{"pattern":"http://10.1.2.3:8080","private_networks":true},
		{"pattern":"[fd12::7]"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url  string
		rule string // "" when denied
	}{
		{"https://api.example.com/v1?x=1", "api.example.com"},
		{"https://API.Example.COM./v1", "api.example.com"},
		{"https://api.example.com:443/", "api.example.com"},
		{"https://api.example.com:8443/", ""},
		{"http://api.example.com/", ""},
		{"https://x.api.example.com/", ""},
		{"https://a.hooks.example.org:8443/", "*.hooks.example.org:8443"},
		{"https://a.b.hooks.example.org:8443/", "*.hooks.example.org:8443"},
		{"https://hooks.example.org:8443/", ""},
		{"https://evilhooks.example.org:8443/", ""},
		{"https://a.hooks.example.org/", ""},
		{"http://legacy.example.net:1/", "http://legacy.example.net:*"},
		{"https://legacy.example.net/", ""},
		{"http://10.1.2.3:8080/", "http://10.1.2.3:8080"},
		{"http://[::ffff:10.1.2.3]:8080/", "http://10.1.2.3:8080"},
		{"https://[fd12::7]/", "[fd12::7]"},
		{"https://[fd12::7]:444/", ""},
		{"ftp://api.example.com/", ""},
		{"https://user:pw@api.example.com/", ""},
		{"https://bücher.example/", ""},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		r, err := set.Allow(u)
		switch {
		case tc.rule == "" && err == nil:
			t.Errorf("%s: allowed by %s", tc.url, r.Pattern)
		case tc.rule == "" && !errors.Is(err, grant.ErrDenied):
			t.Errorf("%s: %v, want ErrDenied", tc.url, err)
		case tc.rule != "" && err != nil:
			t.Errorf("%s: %v, want %s", tc.url, err, tc.rule)
		case tc.rule != "" && r.Pattern != tc.rule:
			t.Errorf("%s: allowed by %s, want %s", tc.url, r.Pattern, tc.rule)
		}
	}
	var de *grant.DeniedError
	u, _ := url.Parse("http://other.example:8080/x")
	if _, err := set.Allow(u); !errors.As(err, &de) || de.Target() != "http://other.example:8080" {
		t.Errorf("denied: %v, target %q", err, de.Target())
	}
	var none *grant.Set
	if _, err := none.Allow(u); !errors.Is(err, grant.ErrDenied) {
		t.Errorf("a nil Set allowed %s", u)
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"hosts":[{"pattern":"ftp://x.example"}]}`, "hosts[0]"},
		{`{"hosts":[{"pattern":"a.*.example"}]}`, "'*'"},
		{`{"hosts":[{"pattern":"x.example/path"}]}`, "no path"},
		{`{"hosts":[{"pattern":"x.example:99999"}]}`, "port"},
		{`{"hosts":[{"pattern":"[zz]"}]}`, "IPv6"},
		{`{"hosts":[{"pattern":"under score.example"}]}`, "DNS name"},
		{`{"config":{"a b":"c"}}`, `config "a b"`},
		{`{"secrets":{"token":"sk_live_123"}}`, "env:NAME or file:/path"},
		{`{"secrets":{"token":"file:relative"}}`, "absolute"},
		{`{"secrets":{"token":"vault:x"}}`, "env:NAME or file:/path"},
		{`{"secrets":{"token":"env:A-B"}}`, "letters"},
		{`{"host":[]}`, "unknown field"},
		{`{}{}`, "more than one"},
	} {
		_, err := grant.Parse([]byte(tc.doc))
		if !errors.Is(err, grant.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", tc.doc, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "sk_live_123") {
			t.Errorf("the error quotes what may be a secret's value: %v", err)
		}
	}
	big := `{"config":{"k":"` + strings.Repeat("x", grant.MaxDocument) + `"}}`
	if _, err := grant.Parse([]byte(big)); !errors.Is(err, grant.ErrInvalid) {
		t.Errorf("an oversized document: %v", err)
	}
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr           string
		public, always bool // allowed without private networks; refused even with them
	}{
		{"93.184.216.34", true, false},
		{"2606:2800:220:1::1", true, false},
		{"127.0.0.1", false, false},
		{"::1", false, false},
		{"10.9.8.7", false, false},
		{"172.31.0.1", false, false},
		{"172.32.0.1", true, false},
		{"192.168.1.1", false, false},
		{"100.64.0.1", false, false},
		{"fd00::1", false, false},
		{"fe80::1", false, false},
		{"169.254.1.1", false, false},
		{"169.254.169.254", false, true},
		{"::ffff:169.254.169.254", false, true},
		{"64:ff9b::a9fe:a9fe", false, true}, // NAT64 of the metadata address
		{"64:ff9b::7f00:1", false, false},   // NAT64 of loopback
		{"2002:7f00:1::", false, false},     // 6to4 of loopback
		{"fd00:ec2::254", false, true},
		{"0.0.0.0", false, true},
		{"::", false, true},
		{"224.0.0.1", false, true},
		{"255.255.255.255", false, true},
		// SIIT (IPv4-translated, ::ffff:0:0/96) carries its IPv4
		// address as mapped addresses do.
		{"::ffff:0:a9fe:a9fe", false, true},
		{"::ffff:0:7f00:1", false, false},
		{"::ffff:0:a00:1", false, false},
		{"::ffff:0:5db8:d822", true, false},
		// Local-use NAT64 (64:ff9b:1::/48) translates to whatever its
		// operator says: never public, and the metadata address is refused
		// wherever RFC 6052 may have placed it.
		{"64:ff9b:1::5db8:d822", false, false},
		{"64:ff9b:1::a9fe:a9fe", false, true},       // /96
		{"64:ff9b:1:a9fe:a9:fe00::", false, true},   // /48
		{"64:ff9b:1:a9:fe:a9fe::", false, true},     // /56
		{"64:ff9b:1:0:a9:fea9:fe00:0", false, true}, // /64
		{"64:ff9b:1:7f00:0:100::", false, false},    // /48 of loopback
	} {
		a := netip.MustParseAddr(tc.addr)
		pub, priv := grant.CheckAddr(a, false), grant.CheckAddr(a, true)
		if (pub == nil) != tc.public {
			t.Errorf("%s without private networks: %v", a, pub)
		}
		if (priv != nil) != tc.always {
			t.Errorf("%s with private networks: %v", a, priv)
		}
		for _, err := range []error{pub, priv} {
			if err != nil && !errors.Is(err, grant.ErrAddress) {
				t.Errorf("%s: %v does not match ErrAddress", a, err)
			}
		}
	}
}

func TestNeeds(t *testing.T) {
	needs := &abi.Needs{Hosts: []string{"api.example.com", "a.hooks.example.org", "http://x.example"}, Config: []string{"url", "mode"}, Secrets: []string{"token"}}
	if p := grant.CheckNeeds(needs); p != nil {
		t.Fatalf("valid needs: %v", p)
	}
	set := &grant.Set{
		Hosts:   []grant.Host{{Pattern: "api.example.com"}, {Pattern: "*.hooks.example.org"}},
		Config:  map[string]string{"url": "https://api.example.com"},
		Secrets: map[string]string{"token": "env:TOKEN"},
	}
	m := grant.Missing(needs, set)
	if !slices.Equal(m.Hosts, []string{"http://x.example"}) || !slices.Equal(m.Config, []string{"mode"}) || len(m.Secrets) != 0 {
		t.Errorf("missing %+v", m)
	}
	if m := grant.Missing(needs, nil); len(m.Hosts) != 3 || len(m.Config) != 2 || len(m.Secrets) != 1 {
		t.Errorf("missing with nothing granted: %+v", m)
	}
	bad := grant.CheckNeeds(&abi.Needs{Hosts: []string{"ftp://x"}, Secrets: []string{""}})
	if len(bad) != 2 || !strings.Contains(bad[0], "needs.hosts[0]") || !strings.Contains(bad[1], "needs.secrets[0]") {
		t.Errorf("problems %q", bad)
	}
}
