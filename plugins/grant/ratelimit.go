package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// Bounds of a host rule's rate limit, beyond those of its ratelimit.Limit.
const (
	// MaxRateWait bounds RateLimit.MaxWait: a request that waits holds its
	// guest's instance and its attempt's time (docs/outbound-http.md,
	// "Rate limits"); a longer wait belongs to the plugin's retry policy.
	MaxRateWait = 5 * time.Minute
	// MaxRateKeyLen bounds RateLimit.Key.
	MaxRateKeyLen = 256
)

// RateLimit is a host rule's limit on the requests sent under it: Limit
// per Per, Burst at once, on a budget that every rule with the same key
// shares, across plugins and nodes. A request that would have to wait
// longer than MaxWait for its turn is not sent: the plugin gets a
// synthetic 429 (abi/README.md §13).
//
// In a grant document it is written with durations as Go writes them:
//
//	{"limit": 10, "per": "1s", "burst": 20, "max_wait": "5s", "key": "partner"}
type RateLimit struct {
	// Limit is the rate: Limit.Count requests per Limit.Per, and up to
	// Limit.Burst at once after a quiet period (0 is read as 1).
	Limit ratelimit.Limit
	// MaxWait is the longest a request waits for its turn before it is
	// answered 429 instead: 0 (the default) to MaxRateWait.
	MaxWait time.Duration
	// Key names the budget: the rules of every plugin's grants with the
	// same key share one. Empty means the rule's pattern as written (see
	// Host.RateKey).
	Key string

	// problem is what decoding found wrong, reported by Check, so that
	// the error names the rule (UnmarshalJSON does not know it).
	problem *RateLimitError
}

// RateLimitError is a problem with one field of a host rule's rate limit.
// The API names the field's path with it (hosts[2].rate_limit.per).
type RateLimitError struct {
	// Field is the field's name in the grant document ("per",
	// "max_wait"); empty when the problem is the whole object's.
	Field string
	// Problem says what is wrong and what is expected.
	Problem string
}

// Error implements error: rate_limit.FIELD: PROBLEM.
func (e *RateLimitError) Error() string {
	if e.Field == "" {
		return "rate_limit: " + e.Problem
	}
	return "rate_limit." + e.Field + ": " + e.Problem
}

// rateFields are the fields of a rate limit, in the order they are
// written and checked.
var rateFields = []string{"limit", "per", "burst", "max_wait", "key"}

// UnmarshalJSON reads the object of a grant document. It refuses nothing
// itself: what it finds wrong (an unknown field, a value of the wrong
// type, a duration that does not parse) waits for Check, which names the
// rule as well as the field.
func (r *RateLimit) UnmarshalJSON(b []byte) error {
	*r = RateLimit{}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		r.problem = &RateLimitError{Problem: `want an object such as {"limit": 10, "per": "1s"}`}
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(rateFields, k) {
			r.problem = &RateLimitError{Field: k, Problem: "unknown field; a rate limit has limit, per, burst, max_wait and key"}
			return nil
		}
	}
	for _, k := range rateFields {
		v, ok := fields[k]
		if !ok {
			continue
		}
		var err error
		switch k {
		case "limit":
			r.Limit.Count, err = jsonInt(v)
		case "per":
			r.Limit.Per, err = jsonDuration(v)
		case "burst":
			r.Limit.Burst, err = jsonInt(v)
		case "max_wait":
			r.MaxWait, err = jsonDuration(v)
		case "key":
			if json.Unmarshal(v, &r.Key) != nil || r.Key == "" {
				// An empty key is a mistake (a template's empty value),
				// not the default: the default is no key at all.
				err = fmt.Errorf("want 1 to %d bytes of printable ASCII without spaces; without a key, the rule's pattern is the key", MaxRateKeyLen)
			}
		}
		if err != nil {
			r.problem = &RateLimitError{Field: k, Problem: err.Error()}
			return nil
		}
	}
	if _, ok := fields["limit"]; !ok {
		r.problem = &RateLimitError{Field: "limit", Problem: "missing: how many requests per period, 1 to " + strconv.Itoa(ratelimit.MaxCount)}
	} else if _, ok := fields["per"]; !ok {
		r.problem = &RateLimitError{Field: "per", Problem: `missing: the period, a duration such as "1s" or "1m"`}
	}
	return nil
}

// jsonInt reads a JSON integer.
func jsonInt(v json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, fmt.Errorf("%s is not an integer", excerptJSON(v))
	}
	return n, nil
}

// jsonDuration reads a duration written as Go writes it, in a JSON
// string: "1s", "500ms", "1m30s".
func jsonDuration(v json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf(`%s is not a duration in a string, such as "1s" or "500ms"`, excerptJSON(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf(`%q is not a duration such as "1s" or "500ms"`, excerptString(s))
	}
	return d, nil
}

func excerptJSON(v json.RawMessage) string { return excerptString(string(bytes.TrimSpace(v))) }

func excerptString(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}

// MarshalJSON writes r as a grant document has it, each field only when
// it is not its default, durations as Go writes them.
func (r RateLimit) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"limit":%d,"per":%q`, r.Limit.Count, r.Limit.Per)
	if r.Limit.Burst != 0 {
		fmt.Fprintf(&b, `,"burst":%d`, r.Limit.Burst)
	}
	if r.MaxWait != 0 {
		fmt.Fprintf(&b, `,"max_wait":%q`, r.MaxWait)
	}
	if r.Key != "" {
		k, err := json.Marshal(r.Key)
		if err != nil {
			return nil, err
		}
		b.WriteString(`,"key":`)
		b.Write(k)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Check returns a *RateLimitError naming the first field of r that is
// wrong, or nil.
func (r *RateLimit) Check() error {
	if r.problem != nil {
		return r.problem
	}
	bad := func(field, format string, args ...any) error {
		return &RateLimitError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	l := r.Limit
	switch {
	case l.Count < 1 || l.Count > ratelimit.MaxCount:
		return bad("limit", "%d is out of range: want 1 to %d requests per period", l.Count, ratelimit.MaxCount)
	case l.Per < ratelimit.MinPer || l.Per > ratelimit.MaxPer:
		return bad("per", "%s is out of range: want %s to %s", l.Per, ratelimit.MinPer, ratelimit.MaxPer)
	case l.Burst < 0 || l.Burst > ratelimit.MaxCount:
		return bad("burst", "%d is out of range: want 1 to %d (0 or none is 1)", l.Burst, ratelimit.MaxCount)
	case r.MaxWait < 0 || r.MaxWait > MaxRateWait:
		return bad("max_wait", "%s is out of range: want 0 to %s", r.MaxWait, MaxRateWait)
	case r.Key != "" && !validRateKey(r.Key):
		return bad("key", "want 1 to %d bytes of printable ASCII without spaces", MaxRateKeyLen)
	}
	if err := l.Check(); err != nil {
		return bad("", "%v", err) // the checks above cover Limit's: kept in step
	}
	return nil
}

// String writes r as the command line shows it: "10/1s burst 20, max
// wait 5s, key partner".
func (r *RateLimit) String() string {
	s := r.Limit.String()
	if r.MaxWait > 0 {
		s += ", max wait " + r.MaxWait.String()
	}
	if r.Key != "" {
		s += ", key " + r.Key
	}
	return s
}

func validRateKey(k string) bool {
	if k == "" || len(k) > MaxRateKeyLen {
		return false
	}
	return !strings.ContainsFunc(k, func(c rune) bool { return c <= ' ' || c >= 0x7f })
}

// RateKey returns the key of h's rate limit: its Key, or else the rule's
// pattern as written, so that one pattern in two plugins' grants shares
// one budget. Empty when h has no rate limit.
func (h *Host) RateKey() string {
	switch {
	case h.RateLimit == nil:
		return ""
	case h.RateLimit.Key != "":
		return h.RateLimit.Key
	}
	return h.Pattern
}
