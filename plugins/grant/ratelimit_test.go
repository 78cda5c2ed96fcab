package grant_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/plugins/grant"
)

func TestRateLimitParses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, rule string
		want       grant.RateLimit
		key        string // RateKey
		canonical  string // the rule's rate_limit as MarshalJSON writes it
	}{
		{"every field", `{"pattern":"api.partner.example","rate_limit":{"limit":10,"per":"1s","burst":20,"max_wait":"5s","key":"partner"}}`,
			grant.RateLimit{Limit: ratelimit.Limit{Count: 10, Per: time.Second, Burst: 20}, MaxWait: 5 * time.Second, Key: "partner"},
			"partner", `{"limit":10,"per":"1s","burst":20,"max_wait":"5s","key":"partner"}`},
		{"the defaults: burst 1, no wait, the pattern as written for a key", `{"pattern":"API.Partner.example:8443","rate_limit":{"limit":1,"per":"2m"}}`,
			grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: 2 * time.Minute}},
			"API.Partner.example:8443", `{"limit":1,"per":"2m0s"}`},
		{"durations as Go writes them, zeros as none", `{"pattern":"*","rate_limit":{"limit":1000000,"per":"1ms","burst":0,"max_wait":"0s","key":"k"}}`,
			grant.RateLimit{Limit: ratelimit.Limit{Count: 1_000_000, Per: time.Millisecond}, Key: "k"},
			"k", `{"limit":1000000,"per":"1ms","key":"k"}`},
		{"the longest wait and period", `{"pattern":"x.example","rate_limit":{"limit":5,"per":"24h","max_wait":"300s"}}`,
			grant.RateLimit{Limit: ratelimit.Limit{Count: 5, Per: 24 * time.Hour}, MaxWait: 5 * time.Minute},
			"x.example", `{"limit":5,"per":"24h0m0s","max_wait":"5m0s"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := grant.Parse([]byte(`{"hosts":[` + tc.rule + `]}`))
			if err != nil {
				t.Fatal(err)
			}
			h := &s.Hosts[0]
			got := h.RateLimit
			if got == nil || got.Limit != tc.want.Limit || got.MaxWait != tc.want.MaxWait || got.Key != tc.want.Key {
				t.Fatalf("rate limit %+v, want %+v", got, tc.want)
			}
			if k := h.RateKey(); k != tc.key {
				t.Errorf("RateKey() = %q, want %q", k, tc.key)
			}
			b, err := json.Marshal(got)
			if err != nil || string(b) != tc.canonical {
				t.Errorf("MarshalJSON = %s, %v; want %s", b, err, tc.canonical)
			}
		})
	}
	plain, err := grant.Parse([]byte(`{"hosts":[{"pattern":"x.example"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := plain.Hosts[0]; h.RateLimit != nil || h.RateKey() != "" {
		t.Errorf("a rule without rate_limit: %+v, key %q", h.RateLimit, h.RateKey())
	}
	if b, _ := json.Marshal(plain); strings.Contains(string(b), "rate_limit") {
		t.Errorf("a rule without a rate limit is written with one: %s", b)
	}
}

// TestRateLimitRefusals: every problem names the rule (its index and
// pattern) and the field, and says what is wanted.
func TestRateLimitRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		rate  string // the rate_limit's JSON, on hosts[1] "api.partner.example"
		field string // RateLimitError.Field
		want  string // in the message, after "hosts[1] (api.partner.example): "
	}{
		{`{"per":"1s"}`, "limit", "rate_limit.limit: missing"},
		{`{"limit":10}`, "per", `rate_limit.per: missing: the period, a duration such as "1s"`},
		{`{"limit":0,"per":"1s"}`, "limit", "rate_limit.limit: 0 is out of range: want 1 to 1000000"},
		{`{"limit":1000001,"per":"1s"}`, "limit", "rate_limit.limit: 1000001 is out of range"},
		{`{"limit":1.5,"per":"1s"}`, "limit", "rate_limit.limit: 1.5 is not an integer"},
		{`{"limit":"10","per":"1s"}`, "limit", `rate_limit.limit: "10" is not an integer`},
		{`{"limit":10,"per":"0s"}`, "per", "rate_limit.per: 0s is out of range: want 1ms to 24h0m0s"},
		{`{"limit":10,"per":"25h"}`, "per", "rate_limit.per: 25h0m0s is out of range"},
		{`{"limit":10,"per":"-1s"}`, "per", "rate_limit.per: -1s is out of range"},
		{`{"limit":10,"per":"1 second"}`, "per", `rate_limit.per: "1 second" is not a duration such as "1s"`},
		{`{"limit":10,"per":1000000000}`, "per", `rate_limit.per: 1000000000 is not a duration in a string`},
		{`{"limit":10,"per":"1s","burst":-1}`, "burst", "rate_limit.burst: -1 is out of range"},
		{`{"limit":10,"per":"1s","burst":2000000}`, "burst", "rate_limit.burst: 2000000 is out of range"},
		{`{"limit":10,"per":"1s","max_wait":"6m"}`, "max_wait", "rate_limit.max_wait: 6m0s is out of range: want 0 to 5m0s"},
		{`{"limit":10,"per":"1s","max_wait":"-1ms"}`, "max_wait", "rate_limit.max_wait: -1ms is out of range"},
		{`{"limit":10,"per":"1s","max_wait":true}`, "max_wait", "rate_limit.max_wait: true is not a duration in a string"},
		{`{"limit":10,"per":"1s","key":""}`, "key", "rate_limit.key: want 1 to 256 bytes of printable ASCII without spaces"},
		{`{"limit":10,"per":"1s","key":"a b"}`, "key", "rate_limit.key: want 1 to 256"},
		{`{"limit":10,"per":"1s","key":"` + strings.Repeat("k", 257) + `"}`, "key", "rate_limit.key: want 1 to 256"},
		{`{"limit":10,"per":"1s","key":7}`, "key", "rate_limit.key: want 1 to 256"},
		{`{"limit":10,"per":"1s","burts":20}`, "burts", "rate_limit.burts: unknown field; a rate limit has limit, per, burst, max_wait and key"},
		{`10`, "", `rate_limit: want an object such as {"limit": 10, "per": "1s"}`},
		{`[]`, "", "rate_limit: want an object"},
	} {
		doc := `{"hosts":[{"pattern":"x.example"},{"pattern":"api.partner.example","rate_limit":` + tc.rate + `}]}`
		_, err := grant.Parse([]byte(doc))
		if !errors.Is(err, grant.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.rate, err)
			continue
		}
		if want := "invalid grant: hosts[1] (api.partner.example): " + tc.want; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s:\n got %v\nwant %s…", tc.rate, err, want)
		}
		var re *grant.RateLimitError
		if !errors.As(err, &re) || re.Field != tc.field {
			t.Errorf("%s: %v names the field %q, want %q", tc.rate, err, re.Field, tc.field)
		}
	}
}

// TestRateLimitNull: a null rate limit is none, as an absent one.
func TestRateLimitNull(t *testing.T) {
	t.Parallel()
	s, err := grant.Parse([]byte(`{"hosts":[{"pattern":"x.example","rate_limit":null}]}`))
	if err != nil || s.Hosts[0].RateLimit != nil {
		t.Fatalf("%+v, %v", s, err)
	}
}

func TestHostString(t *testing.T) {
	t.Parallel()
	rl := &grant.RateLimit{Limit: ratelimit.Limit{Count: 10, Per: time.Second, Burst: 20}, MaxWait: 5 * time.Second, Key: "partner"}
	for _, tc := range []struct {
		h    grant.Host
		want string
	}{
		{grant.Host{Pattern: "api.example.com"}, "api.example.com"},
		{grant.Host{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}, "http://127.0.0.1:* (private networks)"},
		{grant.Host{Pattern: "api.partner.example", RateLimit: rl}, "api.partner.example (10/1s burst 20, max wait 5s, key partner)"},
		{grant.Host{Pattern: "10.0.0.7", PrivateNetworks: true, RateLimit: &grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Minute}}},
			"10.0.0.7 (private networks; 1/1m0s burst 1)"},
	} {
		if got := tc.h.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}
