package plugins_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/retry/classify"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// turns is a RateLimiter that records what it was asked and the turns it
// gave, around another.
type turns struct {
	inner plugins.RateLimiter
	// reserved, when not nil, is told of each turn given with a wait.
	reserved chan time.Duration

	mu    sync.Mutex
	keys  []string
	given []time.Time // the earliest each turn may be used: now + wait
}

func (l *turns) Reserve(ctx context.Context, key string, lim ratelimit.Limit, maxWait time.Duration) (time.Duration, bool, error) {
	wait, ok, err := l.inner.Reserve(ctx, key, lim, maxWait)
	// Read after the limiter's own clock: never sooner than the turn.
	at := time.Now().Add(wait)
	l.mu.Lock()
	l.keys = append(l.keys, key)
	if ok && err == nil {
		l.given = append(l.given, at)
	}
	l.mu.Unlock()
	if ok && wait > 0 && l.reserved != nil {
		l.reserved <- wait
	}
	return wait, ok, err
}

func (l *turns) seen() (keys []string, given []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.keys), slices.Clone(l.given)
}

// failing is a limiter that cannot be reached.
type failing struct{}

func (failing) Reserve(context.Context, string, ratelimit.Limit, time.Duration) (time.Duration, bool, error) {
	return 0, false, errors.New("dial tcp 10.0.0.9:6379: connect: connection refused")
}

// arrivals is a server that answers 200 and keeps when each request
// arrived.
type arrivals struct {
	*httptest.Server
	mu sync.Mutex
	at []time.Time
}

func newArrivals(t *testing.T) *arrivals {
	a := &arrivals{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
	}))
	t.Cleanup(a.Close)
	return a
}

func (a *arrivals) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.at)
}

// limited grants plain HTTP to every port of 127.0.0.1 under rl.
func limited(rl grant.RateLimit) *grant.Set {
	return limitedAs("http://127.0.0.1:*", rl)
}

func limitedAs(pattern string, rl grant.RateLimit) *grant.Set {
	return &grant.Set{Hosts: []grant.Host{{Pattern: pattern, PrivateNetworks: true, RateLimit: &rl}}}
}

func perSecond(n, burst int) ratelimit.Limit {
	return ratelimit.Limit{Count: n, Per: time.Second, Burst: burst}
}

// checkSpacing checks the turns a limiter gave and the arrivals of the
// requests sent on them against one limit of burst 1: the turns are an
// interval apart; no request arrived before its turn; and in any window
// of the arrivals there are no more than the window's share of turns,
// plus the two that a stalled sender may bunch (a request delayed past
// the next one's turn arrives just before it).
func checkSpacing(t *testing.T, given, arrived []time.Time, interval time.Duration) {
	t.Helper()
	slices.SortFunc(given, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(arrived, func(a, b time.Time) int { return a.Compare(b) })
	if len(given) != len(arrived) {
		t.Fatalf("%d turns given, %d requests arrived", len(given), len(arrived))
	}
	// The turns are read with a clock after the limiter's: a little
	// later than the limiter set them.
	const clockSlack = 10 * time.Millisecond
	for i := 1; i < len(given); i++ {
		if gap := given[i].Sub(given[i-1]); gap < interval-clockSlack {
			t.Errorf("turns %d and %d are %s apart, want %s", i-1, i, gap, interval)
		}
	}
	for i := range arrived {
		if arrived[i].Before(given[i]) {
			t.Errorf("request %d arrived %s before its turn", i, given[i].Sub(arrived[i]))
		}
	}
	// No check of the arrivals' own spacing: a request the scheduler
	// delayed by more than the interval arrives close to the next one on
	// a loaded machine. The turns' spacing above, and no request before
	// its turn, are the limiter's guarantee.
	if span, want := given[len(given)-1].Sub(given[0]), time.Duration(len(given)-1)*interval; span < want-clockSlack {
		t.Errorf("the turns span %s, want at least %s", span, want)
	}
}

func TestRateLimitSpreadsTheRequestsOfAnAttempt(t *testing.T) {
	t.Parallel()
	srv := newArrivals(t)
	lim := &turns{inner: locallimit.New(locallimit.Config{})}
	p := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{RateLimiter: lim}})
	g := limited(grant.RateLimit{Limit: perSecond(20, 1), MaxWait: 5 * time.Second})
	rs, err := p.do(context.Background(), g, probeRequest{URL: srv.URL, Repeat: 30})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs {
		if r.Status != 200 {
			t.Fatalf("request %d: %+v, want 200: each waits for its turn", i, r)
		}
	}
	keys, given := lim.seen()
	if len(keys) != 30 || keys[0] != plugins.HostRateKeyPrefix+"http://127.0.0.1:*" {
		t.Errorf("%d reservations, the first of key %q; want 30 of the rule's pattern", len(keys), keys[0])
	}
	checkSpacing(t, given, srv.times(), 50*time.Millisecond)
}

// TestRateLimitSharedByKey: two plugins whose rules share a key (the
// same pattern without a key, or one key over two patterns) share one
// budget; another key does not.
func TestRateLimitSharedByKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a, b *grant.Set
		key  string // the limiter's key
		urlB func(srv *arrivals) string
	}{
		{"the same pattern", limited(grant.RateLimit{Limit: perSecond(20, 1), MaxWait: 5 * time.Second}),
			limited(grant.RateLimit{Limit: perSecond(20, 1), MaxWait: 5 * time.Second}),
			"http://127.0.0.1:*", func(srv *arrivals) string { return srv.URL }},
		{"one key over two patterns", limited(grant.RateLimit{Limit: perSecond(20, 1), MaxWait: 5 * time.Second, Key: "partner"}),
			limitedAs("http://localhost:*", grant.RateLimit{Limit: perSecond(20, 1), MaxWait: 5 * time.Second, Key: "partner"}),
			"partner", func(srv *arrivals) string { return strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newArrivals(t)
			lim := &turns{inner: locallimit.New(locallimit.Config{})}
			p := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{RateLimiter: lim}})
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, c := range []struct {
				plugin string
				g      *grant.Set
				url    string
			}{{"probe-a", tc.a, srv.URL}, {"probe-b", tc.b, tc.urlB(srv)}} {
				wg.Go(func() {
					rs, err := p.do(context.Background(), c.g, probeRequest{URL: c.url, Repeat: 10}, func(cl *call.Call) { cl.Info.Plugin = c.plugin })
					for _, r := range rs {
						if err == nil && r.Status != 200 {
							err = errors.New("a response of " + r.Headers)
						}
					}
					errs[i] = err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			keys, given := lim.seen()
			for _, k := range keys {
				if k != plugins.HostRateKeyPrefix+tc.key {
					t.Fatalf("a reservation of key %q, want %q", k, plugins.HostRateKeyPrefix+tc.key)
				}
			}
			// 20 requests on one budget of 20/s: one every 50ms.
			checkSpacing(t, given, srv.times(), 50*time.Millisecond)
		})
	}
}

// header returns the value of name in "Name: value\n" lines.
func header(lines, name string) string {
	for l := range strings.SplitSeq(lines, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok && k == name {
			return v
		}
	}
	return ""
}

func TestRateLimitRefusesAWaitTooLong(t *testing.T) {
	t.Parallel()
	srv := newArrivals(t)
	// No RateLimiter: the runtime's own, in process.
	p := newHTTPProbe(t, plugins.Config{})
	for _, tc := range []struct {
		name       string
		rl         grant.RateLimit
		timeout    time.Duration // the attempt's; 0 for none
		key        string
		retryAfter string
	}{
		{"no wait allowed", grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Hour}, Key: "hourly"}, 0, "hourly", "3600"},
		{"a turn further than max_wait", grant.RateLimit{Limit: ratelimit.Limit{Count: 2, Per: 3 * time.Minute}, MaxWait: 80 * time.Second}, 0, "http://127.0.0.1:*", "90"},
		// A turn after the attempt's deadline would be wasted: refused at
		// once, not waited for until the deadline stops the guest.
		{"a turn after the attempt's deadline", grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: 2 * time.Minute}, MaxWait: 5 * time.Minute, Key: "deadline"}, 30 * time.Second, "deadline", "120"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []call.Request
			var logs []call.Record
			before := len(srv.times())
			rs, err := p.do(context.Background(), limited(tc.rl), probeRequest{URL: srv.URL + "/charge?card=1", Repeat: 2}, func(c *call.Call) {
				c.Requested = func(r call.Request) { recs = append(recs, r) }
				c.Log = func(r call.Record) { logs = append(logs, r) }
				c.Timeout = tc.timeout
			})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(srv.times()) - before; n != 1 {
				t.Errorf("the server got %d requests, want the first alone", n)
			}
			if len(rs) != 2 || rs[0].Status != 200 {
				t.Fatalf("responses %+v, want 200 then 429", rs)
			}
			r := rs[1]
			if r.Status != 429 || r.Body != "" || r.Missing {
				t.Errorf("the refused request's response %+v, want a 429 with an empty body", r)
			}
			if got := header(r.Headers, "Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q (its turn, in seconds rounded up), in:\n%s", got, tc.retryAfter, r.Headers)
			}
			if got := header(r.Headers, plugins.RateLimitedHeader); got != tc.key {
				t.Errorf("%s %q, want %q", plugins.RateLimitedHeader, got, tc.key)
			}
			if len(recs) != 2 || recs[0].Error != "" || recs[1].Error != "rate_limited" || recs[1].Status != 429 ||
				recs[1].Path != "/charge" || recs[1].Rule != "http://127.0.0.1:*" || recs[1].Received != 0 {
				t.Errorf("records %+v, want the second rate_limited with its 429", recs)
			}
			var warned bool
			for _, l := range logs {
				warned = warned || l.Source == "http" && strings.Contains(l.Message, "/charge: not sent: the rate limit of host rule http://127.0.0.1:* (key "+tc.key)
			}
			if !warned {
				t.Errorf("no warning in the activity's log: %+v", logs)
			}
		})
	}
}

// TestRateLimitWaitEndsWithTheAttempt: a request waiting for its turn is
// cut by a cancellation (after the grace period), like a request on the
// wire, and the attempt ends promptly, not at the turn.
func TestRateLimitWaitEndsWithTheAttempt(t *testing.T) {
	t.Parallel()
	srv := newArrivals(t)
	lim := &turns{inner: locallimit.New(locallimit.Config{}), reserved: make(chan time.Duration, 1)}
	// A request's own timeout longer than the wait, which would otherwise
	// be refused.
	p := newHTTPProbe(t, plugins.Config{CancelGrace: 50 * time.Millisecond, HTTP: plugins.HTTPConfig{RateLimiter: lim, Timeout: 10 * time.Minute}})
	hb := call.NewHeartbeat(time.Now())
	cancelled := make(chan time.Time, 1)
	go func() {
		<-lim.reserved // the second request waits for its turn, a minute away
		cancelled <- time.Now()
		hb.RequestCancel()
	}()
	var recs []call.Request
	g := limited(grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Minute}, MaxWait: 5 * time.Minute})
	_, err := p.do(context.Background(), g, probeRequest{URL: srv.URL, Repeat: 2}, func(c *call.Call) {
		c.Heartbeat = hb
		c.Requested = func(r call.Request) { recs = append(recs, r) }
	})
	if !errors.Is(err, call.ErrCancelled) {
		t.Fatalf("%v, want the attempt cancelled", err)
	}
	if d := time.Since(<-cancelled); d > 20*time.Second {
		t.Errorf("the attempt ended %s after its cancellation, want promptly (the turn was a minute away)", d)
	}
	if n := len(srv.times()); n != 1 {
		t.Errorf("the server got %d requests, want 1", n)
	}
	if len(recs) != 2 || recs[1].Error != "cancelled" {
		t.Errorf("records %+v, want the waiting request cancelled", recs)
	}
}

// TestRateLimiterFailureFailsTheAttempt: a limiter that cannot be reached
// fails the attempt with the kind host (retried), and nothing is sent
// unlimited.
func TestRateLimiterFailureFailsTheAttempt(t *testing.T) {
	t.Parallel()
	srv := newArrivals(t)
	p := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{RateLimiter: failing{}}})
	var recs []call.Request
	g := limited(grant.RateLimit{Limit: perSecond(100, 100), Key: "partner"})
	_, err := p.do(context.Background(), g, probeRequest{URL: srv.URL}, func(c *call.Call) {
		c.Requested = func(r call.Request) { recs = append(recs, r) }
	})
	if err == nil {
		t.Fatal("the request was sent without a turn")
	}
	if c := classify.Cause(err); c.Kind != retry.KindHost || !c.Retryable {
		t.Errorf("%v is classified %+v, want the kind host, retried", err, c)
	}
	for _, want := range []string{"rate limiter failed", "host rule http://127.0.0.1:* (key partner)", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not say %q", err, want)
		}
	}
	if n := len(srv.times()); n != 0 {
		t.Errorf("the server got %d requests, want none", n)
	}
	if len(recs) != 1 || recs[0].Error != "rate_limiter_failed" {
		t.Errorf("records %+v, want one rate_limiter_failed", recs)
	}
}

// TestRateLimitPerHop: every hop takes a turn under the rule that allows
// it: a redirect to another rule's host waits for that rule's turn, and a
// rule without a rate limit takes none.
func TestRateLimitPerHop(t *testing.T) {
	t.Parallel()
	target := newArrivals(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/in", http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	_, rPort := hostPort(t, redirect)
	_, tPort := hostPort(t, target.Server)
	lim := &turns{inner: locallimit.New(locallimit.Config{})}
	p := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{RateLimiter: lim}})
	g := &grant.Set{Hosts: []grant.Host{
		{Pattern: "http://127.0.0.1:" + rPort, PrivateNetworks: true},
		{Pattern: "http://127.0.0.1:" + tPort, PrivateNetworks: true, RateLimit: &grant.RateLimit{Limit: ratelimit.Limit{Count: 1, Per: time.Hour}, Key: "target"}},
	}}
	var recs []call.Request
	rs, err := p.do(context.Background(), g, probeRequest{URL: redirect.URL + "/go", Repeat: 2}, func(c *call.Call) {
		c.Requested = func(r call.Request) { recs = append(recs, r) }
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Status != 200 || rs[1].Status != 429 || header(rs[1].Headers, plugins.RateLimitedHeader) != "target" {
		t.Fatalf("responses %+v, want 200, then 429 at the redirect's hop", rs)
	}
	if keys, _ := lim.seen(); !slices.Equal(keys, []string{plugins.HostRateKeyPrefix + "target", plugins.HostRateKeyPrefix + "target"}) {
		t.Errorf("reservations of %q, want the target rule's alone, at each call's second hop", keys)
	}
	if len(recs) != 2 || recs[1].Error != "rate_limited" || recs[1].Rule != "http://127.0.0.1:"+tPort {
		t.Errorf("records %+v, want the second rate_limited under the target's rule", recs)
	}
}
