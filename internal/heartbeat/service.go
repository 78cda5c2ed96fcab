package heartbeat

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Renewer renews a batch in one pipelined round trip: instance leases with
// store.Store.RenewLeases, attempt leases with their latest details, lock
// extensions. The engine provides one per backend (bbolt, Redis).
type Renewer interface {
	// Renew renews batch and returns outcomes[i] for batch[i]; missing
	// outcomes count as Error. It must return when ctx is done, whose
	// deadline is one cycle: a renewal slower than that is useless.
	Renew(ctx context.Context, batch []Renewal) (outcomes []Outcome)
}

// Actions is what the engine does on the scheduler's behalf. Its methods
// are called from the service's goroutines, possibly concurrently, and
// must return quickly (hand the work to the engine's own queue): a slow
// action delays ticks or the routing of outcomes.
type Actions interface {
	// HeartbeatTimeout: stop the guest (cancel it) and fail the attempt as
	// heartbeat_timeout with details; the retry policy schedules the next
	// attempt, which sees details as its last heartbeat details.
	HeartbeatTimeout(ctx context.Context, it Item, details []byte, lastBeat time.Time)
	// CancelActivity: the attempt is gone, cancelled or superseded; stop
	// its guest. Its completion, if any, will be refused by the store.
	CancelActivity(ctx context.Context, it Item, why Outcome)
	// LeaseLost: this node no longer holds the instance lease or lock;
	// stop working under it.
	LeaseLost(ctx context.Context, it Item, why Outcome)
}

// Clock is where the service gets the time and its ticker. Tests inject a
// fake one.
type Clock interface {
	Now() time.Time
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks on C until stopped.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// SystemClock returns the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) NewTicker(d time.Duration) Ticker {
	return systemTicker{time.NewTicker(d)}
}

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }

// Env is what the service receives from the host.
type Env struct {
	// Clock gives the time and the ticker. Defaults to SystemClock().
	Clock Clock
	// Logger receives warnings and overruns. Defaults to discarding.
	Logger *slog.Logger
}

// Service is the thin shell around a Scheduler: Run ticks it, sends each
// batch through the Renewer and reports the outcomes back, and hands
// actions to Actions. Track, Untrack, Check and Stats are safe for
// concurrent use, before and during Run.
type Service struct {
	renewer Renewer
	actions Actions
	clock   Clock
	log     *slog.Logger

	mu      sync.Mutex
	core    *Scheduler
	running bool
}

// NewService returns a service for cfg (after defaults).
func NewService(cfg Config, r Renewer, a Actions, env Env) (*Service, error) {
	if r == nil || a == nil {
		return nil, errors.New("heartbeat: NewService needs a Renewer and Actions")
	}
	core, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if env.Clock == nil {
		env.Clock = SystemClock()
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{renewer: r, actions: a, clock: env.Clock, log: env.Logger, core: core}, nil
}

// Track starts keeping it alive (see Scheduler.Track); warnings are logged
// and returned.
func (s *Service) Track(it Item) ([]Warning, error) {
	s.mu.Lock()
	warns, err := s.core.Track(it)
	s.mu.Unlock()
	s.warn(warns)
	return warns, err
}

// Untrack stops keeping the item alive (see Scheduler.Untrack).
func (s *Service) Untrack(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Untrack(id)
}

// Check returns the current warnings (see Scheduler.Check) and the one for
// each named TTL (see Scheduler.CheckTTL), and logs them.
func (s *Service) Check(ttls map[string]time.Duration) []Warning {
	s.mu.Lock()
	warns := s.core.Check()
	for what, d := range ttls {
		warns = append(warns, s.core.CheckTTL(what, d)...)
	}
	s.mu.Unlock()
	s.warn(warns)
	return warns
}

// Stats returns the scheduler's metrics.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.Stats()
}

func (s *Service) warn(warns []Warning) {
	for _, w := range warns {
		s.log.Warn(w.Message, "code", string(w.Code), "item", w.ID)
	}
}

// Run ticks the scheduler until ctx is done, then waits for the renewals in
// flight and returns nil. A batch's round trip runs on its own goroutine,
// so ticks overlap with slow round trips; each has a deadline of one cycle.
// Run may be called once at a time.
func (s *Service) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("heartbeat: Service.Run is already running")
	}
	s.running = true
	cfg := s.core.Config()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()

	t := s.clock.NewTicker(cfg.Tick)
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
		now := s.clock.Now()
		s.mu.Lock()
		r := s.core.Tick(now)
		s.mu.Unlock()
		if r.Overrun {
			s.log.Warn("heartbeat: tick overrun (the process was starved); took one batch", "at", now)
		}
		s.act(ctx, r.Actions)
		if len(r.Renew) == 0 {
			continue
		}
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, cfg.Cycle)
			out := s.renewer.Renew(rctx, r.Renew)
			cancel()
			s.mu.Lock()
			acts := s.core.Report(r.Seq, out)
			s.mu.Unlock()
			s.act(ctx, acts)
		})
	}
}

func (s *Service) act(ctx context.Context, acts []Action) {
	for _, a := range acts {
		switch a.Kind {
		case TimeOut:
			s.actions.HeartbeatTimeout(ctx, a.Item, a.Details, a.LastBeat)
		case CancelActivity:
			s.actions.CancelActivity(ctx, a.Item, a.Outcome)
		case LoseLease:
			s.actions.LeaseLost(ctx, a.Item, a.Outcome)
		}
	}
}
