package grant_test

import (
	"encoding/json"
	"net/netip"
	"net/url"
	"testing"

	"github.com/weftworks/weft/plugins/grant"
)

// FuzzParse: a document either is refused or parses to a Set whose
// canonical form parses to the same Set; Allow and CheckAddr never panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"hosts":[{"pattern":"api.example.com"},{"pattern":"http://*.example.com:*","private_networks":true}],"config":{"url":"https://x"},"secrets":{"token":"env:TOKEN"}}`,
		`{"hosts":[{"pattern":"[fd12::7]:8443"}],"secrets":{"k":"file:/run/secrets/k"}}`,
		`{"hosts":[{"pattern":"*"}]}`,
		`{"hosts":[{"pattern":"api.partner.example","rate_limit":{"limit":10,"per":"1s","burst":20,"max_wait":"5s","key":"partner"}}]}`,
		`{"hosts":[{"pattern":"x.example","rate_limit":{"limit":1,"per":"1500ms","max_wait":"0s"}},{"pattern":"y.example","rate_limit":{"limit":1,"per":"1h","key":"<&>"}}]}`,
		`{"hosts":[{"pattern":"x.example","rate_limit":{"limit":10,"per":"1s","burts":2}}]}`,
		`{"hosts":[{"pattern":"x.example","rate_limit":null}]}`,
		`{"hosts":[{"pattern":"ftp://x"}]}`,
		`{"secrets":{"a":"literal"}}`,
		`{"config":{"a=b":"c"}}`,
		`{} {}`,
	} {
		f.Add([]byte(s), "https://api.example.com/x", "10.0.0.1")
	}
	f.Fuzz(func(t *testing.T, doc []byte, rawURL, addr string) {
		s, err := grant.Parse(doc)
		if err != nil {
			return
		}
		canon, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		again, err := grant.Parse(canon)
		if err != nil {
			t.Fatalf("the canonical form %s of an accepted document is refused: %v", canon, err)
		}
		if c2, _ := json.Marshal(again); string(c2) != string(canon) {
			t.Fatalf("canonical forms differ:\n%s\n%s", canon, c2)
		}
		if u, err := url.Parse(rawURL); err == nil {
			r, err := s.Allow(u)
			if (r == nil) == (err == nil) {
				t.Fatalf("Allow(%q) = %v, %v", rawURL, r, err)
			}
		}
		if a, err := netip.ParseAddr(addr); err == nil {
			if grant.CheckAddr(a, true) != nil && grant.CheckAddr(a, false) == nil {
				t.Fatalf("%s is refused with private networks and allowed without", a)
			}
		}
	})
}
