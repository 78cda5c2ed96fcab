package heartbeat_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/heartbeat"
)

// fakeClock is a Clock whose ticker ticks when the test says so. Its
// ticker channel is unbuffered: a tick is delivered only when Run takes
// it, and the next tick only once Run has handled the previous one.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
	c   chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: epoch, c: make(chan time.Time)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTicker(time.Duration) heartbeat.Ticker { return c }
func (c *fakeClock) C() <-chan time.Time                      { return c.c }
func (c *fakeClock) Stop()                                    {}

// tickAt sets the time to epoch+at and delivers a tick.
func (c *fakeClock) tickAt(t *testing.T, at time.Duration) {
	t.Helper()
	c.mu.Lock()
	c.now = epoch.Add(at)
	c.mu.Unlock()
	select {
	case c.c <- epoch.Add(at):
	case <-t.Context().Done():
		t.Fatal("tick not taken")
	}
}

// fakeRenewer hands each round trip to the test, which answers it.
type fakeRenewer struct{ calls chan renewCall }

type renewCall struct {
	batch []heartbeat.Renewal
	reply chan []heartbeat.Outcome
}

func (r *fakeRenewer) Renew(ctx context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	c := renewCall{batch, make(chan []heartbeat.Outcome, 1)}
	select {
	case r.calls <- c:
	case <-ctx.Done():
		return nil
	}
	select {
	case o := <-c.reply:
		return o
	case <-ctx.Done():
		return nil
	}
}

func (r *fakeRenewer) next(t *testing.T) renewCall {
	t.Helper()
	select {
	case c := <-r.calls:
		return c
	case <-t.Context().Done():
		t.Fatal("no renewal")
		return renewCall{}
	}
}

func ids(batch []heartbeat.Renewal) string {
	s := make([]string, len(batch))
	for i, rn := range batch {
		s[i] = rn.ID
	}
	return fmt.Sprint(s)
}

// fakeActions records actions as strings.
type fakeActions struct{ got chan string }

func (a *fakeActions) HeartbeatTimeout(_ context.Context, it heartbeat.Item, details []byte, _ time.Time) {
	a.got <- fmt.Sprintf("heartbeat-timeout %s %s", it.ID, details)
}

func (a *fakeActions) CancelActivity(_ context.Context, it heartbeat.Item, why heartbeat.Outcome) {
	a.got <- fmt.Sprintf("cancel-activity %s %s", it.ID, why)
}

func (a *fakeActions) LeaseLost(_ context.Context, it heartbeat.Item, why heartbeat.Outcome) {
	a.got <- fmt.Sprintf("lease-lost %s %s", it.ID, why)
}

func (a *fakeActions) want(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-a.got:
		if got != want {
			t.Errorf("action %q, want %q", got, want)
		}
	case <-t.Context().Done():
		t.Fatalf("no action, want %q", want)
	}
}

type shell struct {
	svc     *heartbeat.Service
	clock   *fakeClock
	renewer *fakeRenewer
	actions *fakeActions
}

func newShell(t *testing.T, cfg heartbeat.Config) *shell {
	t.Helper()
	sh := &shell{clock: newFakeClock(), renewer: &fakeRenewer{calls: make(chan renewCall)}, actions: &fakeActions{got: make(chan string, 100)}}
	svc, err := heartbeat.NewService(cfg, sh.renewer, sh.actions, heartbeat.Env{Clock: sh.clock})
	if err != nil {
		t.Fatal(err)
	}
	sh.svc = svc
	return sh
}

// run starts Run and returns a function that stops it and checks that it
// returned nil.
func (sh *shell) run(t *testing.T) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sh.svc.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
}

func TestServiceFlow(t *testing.T) {
	t.Parallel()
	sh := newShell(t, heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 10, Cycle: time.Second})
	live := &pulse{at: epoch}
	live.beat(epoch, "working")
	stalled := &pulse{at: epoch.Add(-10 * time.Second), details: []byte("stuck-at-3")}
	for _, it := range []heartbeat.Item{
		{ID: "a", Kind: heartbeat.Activity, TTL: 8 * time.Second, HeartbeatTimeout: 5 * time.Second, Pulse: live},
		{ID: "b", Kind: heartbeat.InstanceLease, TTL: 8 * time.Second},
		{ID: "c", Kind: heartbeat.Activity, TTL: 8 * time.Second, HeartbeatTimeout: 5 * time.Second, Pulse: stalled},
		{ID: "d", Kind: heartbeat.Activity, TTL: 8 * time.Second},
	} {
		if ws, err := sh.svc.Track(it); err != nil || len(ws) > 0 {
			t.Fatalf("Track(%s) = %v, %v", it.ID, ws, err)
		}
	}
	stop := sh.run(t)

	// First tick: c has been silent for 10s and times out; the others go
	// out in one round trip, with a's details.
	sh.clock.tickAt(t, 0)
	sh.actions.want(t, "heartbeat-timeout c stuck-at-3")
	call := sh.renewer.next(t)
	if got := ids(call.batch); got != "[a b d]" {
		t.Fatalf("batch %s, want [a b d]", got)
	}
	if rn := call.batch[0]; string(rn.Details) != "working" || !rn.Changed || rn.Beats != 1 {
		t.Errorf("renewal of a = %+v, want its details", rn)
	}
	call.reply <- []heartbeat.Outcome{heartbeat.OK, heartbeat.Superseded, heartbeat.Cancelled}
	sh.actions.want(t, "lease-lost b superseded")
	sh.actions.want(t, "cancel-activity d cancelled")

	// Next cycle: a goes out again; while its round trip is in flight the
	// ticks that follow do not send it again.
	sh.clock.tickAt(t, 100*time.Millisecond)
	sh.clock.tickAt(t, time.Second)
	call = sh.renewer.next(t)
	if got := ids(call.batch); got != "[a]" {
		t.Fatalf("batch %s, want [a]", got)
	}
	sh.clock.tickAt(t, 1100*time.Millisecond)
	sh.clock.tickAt(t, 1200*time.Millisecond) // Run has handled the 1.1s tick
	if st := sh.svc.Stats(); st.InFlight != 1 || st.Main != 0 {
		t.Errorf("Stats = %+v, want a in flight only", st)
	}
	call.reply <- []heartbeat.Outcome{heartbeat.NotFound}
	sh.actions.want(t, "cancel-activity a not-found")

	stop()
	st := sh.svc.Stats()
	if st.Tracked != 0 || st.Timeouts != 1 || st.Renewals[heartbeat.OK] != 1 || st.Renewals[heartbeat.NotFound] != 1 {
		t.Errorf("Stats = %+v", st)
	}
}

// TestServiceStopsWithRenewalInFlight: Run returns once the round trip in
// flight has seen the cancellation, and reports it as an error.
func TestServiceStopsWithRenewalInFlight(t *testing.T) {
	t.Parallel()
	sh := newShell(t, heartbeat.Config{MaxRetries: heartbeat.DefaultMaxRetries})
	sh.svc.Track(heartbeat.Item{ID: "x", Kind: heartbeat.LockLease})
	stop := sh.run(t)
	sh.clock.tickAt(t, 0)
	sh.renewer.next(t) // never answered
	stop()
	st := sh.svc.Stats()
	if st.Renewals[heartbeat.Error] != 1 || st.Main != 1 || st.InFlight != 0 {
		t.Errorf("Stats = %+v, want x back in the main deque after an error", st)
	}
}

func TestServiceRunOnce(t *testing.T) {
	t.Parallel()
	sh := newShell(t, heartbeat.Config{})
	stop := sh.run(t)
	sh.clock.tickAt(t, 0) // Run is running
	if err := sh.svc.Run(t.Context()); err == nil {
		t.Error("second Run = nil, want an error")
	}
	stop()
	if _, err := heartbeat.NewService(heartbeat.Config{}, nil, sh.actions, heartbeat.Env{}); err == nil {
		t.Error("NewService without a Renewer = nil error")
	}
	if _, err := heartbeat.NewService(heartbeat.Config{Batch: -1}, sh.renewer, sh.actions, heartbeat.Env{}); err == nil {
		t.Error("NewService with a bad Config = nil error")
	}
}

func TestServiceCheck(t *testing.T) {
	t.Parallel()
	sh := newShell(t, heartbeat.Config{Tick: 100 * time.Millisecond, Batch: 1, Cycle: time.Second})
	for i := range 12 {
		sh.svc.Track(heartbeat.Item{ID: strconv.Itoa(i), Kind: heartbeat.InstanceLease})
	}
	ws := sh.svc.Check(map[string]time.Duration{"lease.ttl": 2 * time.Second, "lock.ttl": 30 * time.Second})
	var codes []string
	for _, w := range ws {
		codes = append(codes, string(w.Code))
	}
	slices.Sort(codes)
	if want := []string{"over_capacity", "short_timeout"}; !slices.Equal(codes, want) {
		t.Errorf("Check codes = %v, want %v (%v)", codes, want, ws)
	}
}

// TestServiceHammer: the engine tracks and untracks from many goroutines
// while Run ticks; the bookkeeping stays consistent.
func TestServiceHammer(t *testing.T) {
	t.Parallel()
	const P, N = 8, 200
	clock := newFakeClock()
	svc, err := heartbeat.NewService(heartbeat.Config{Tick: time.Millisecond, Batch: 50, Cycle: 10 * time.Millisecond},
		okRenewer{}, &fakeActions{got: make(chan string, P*N)}, heartbeat.Env{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()

	var wg sync.WaitGroup
	for p := range P {
		wg.Go(func() {
			for i := range N {
				id := fmt.Sprintf("%d-%d", p, i%20)
				if i%3 == 2 {
					svc.Untrack(id)
				} else {
					svc.Track(heartbeat.Item{ID: id, Kind: heartbeat.InstanceLease})
				}
			}
		})
	}
	ticking := make(chan struct{})
	go func() {
		defer close(ticking)
		for {
			select {
			case clock.c <- epoch:
			case <-ctx.Done():
				return
			}
			clock.mu.Lock()
			clock.now = clock.now.Add(time.Millisecond)
			clock.mu.Unlock()
		}
	}()
	wg.Wait()
	cancel()
	<-ticking
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := svc.Stats()
	if st.Main+st.Backup+st.InFlight != st.Tracked || st.InFlight != 0 {
		t.Errorf("Stats = %+v: places do not add up to Tracked", st)
	}
}

type okRenewer struct{}

func (okRenewer) Renew(_ context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	out := make([]heartbeat.Outcome, len(batch))
	for i := range out {
		out[i] = heartbeat.OK
	}
	return out
}
