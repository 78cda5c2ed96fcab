package engine_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/notify"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/lock/redislock"
)

// benchSchedules is how many schedules BenchmarkSchedules10k saves: the
// issue's 10,000 unless a quicker look asks for fewer.
var benchSchedules = flag.Int("schedules.n", 10_000, "BenchmarkSchedules10k: how many schedules fire every minute")

// tickFlow is the scheduled workflow: one set step, so that a run
// completes in its first commit (lazy persistence) and the next minute's
// fire finds it ended, retires it and starts the next under the default
// overlap policy (skip): the steady state of a schedule whose runs are
// shorter than its interval. (A run that waits, as holdFlow's, would
// still be going a minute later: its schedule would skip the fire, or
// under allow_all keep a growing list of running runs.)
const tickFlow = "name: tick\nsteps: [{id: s, set: {x: 1}}]\n"

// BenchmarkSchedules10k is issue 34's benchmark: 10,000 schedules, each
// every minute, on one node, embedded (bbolt, in-process queue and locks)
// and on Redis (store, ready queue, locks and bus on one redis-server),
// with the host's defaults (ScheduleInterval 100ms, EagerStarts on, 256
// workers). The clock is fake: it stands still while the schedules are
// saved, then each iteration (a round) moves it to the next minute, from
// where it runs at real speed, so that every fire's lateness is real time
// (and the engine's own late, which Observer.ScheduleFired reports, is
// real lateness too).
//
// "at-once": every schedule is due at the minute, the worst case. A
// round measures, from the moment the clock moved, the real time until
// each fire has started its run (Observer.ScheduleFired: Start returned,
// the instance created), and the process's CPU (rusage, user+sys) until
// the last fire started and until the runs completed and every schedule
// was stepped (the minute's whole work: the sweep and the runs it
// started); on Redis also the commands redis-server ran (INFO
// commandstats: scripts, and the commands they ran) and its CPU. CPU and
// commands are net of what the node spends idle (its other sweeps, idle
// workers' blocking reads of the Redis queue), measured over idleWindow
// before each round.
//
// "jitter30s": the same schedules with jitter: 30s, so that their fires
// spread over half a minute; lateness is from each fire's due time
// (nominal plus jitter), as the engine's late reports it.
//
// A first minute, unmeasured, brings every schedule to the steady state
// (a fire finds the run of the minute before, ended). Each round's
// figures are logged (-v), with the sweep's turns (timed from its
// try-lock taken to released); the reported metrics are the medians of
// the rounds. Run as:
//
//	go test -run '^$' -bench BenchmarkSchedules10k -benchtime 3x -timeout 60m ./internal/engine/
func BenchmarkSchedules10k(b *testing.B) {
	for _, backend := range []string{"embedded", "redis"} {
		for _, spread := range []string{"at-once", "jitter30s"} {
			b.Run(backend+"/"+spread, func(b *testing.B) { benchSchedules10k(b, backend, spread == "jitter30s") })
		}
	}
}

// schedRound is what one round measured. The CPU and Redis figures are
// net of the node's idle rate (measured before the round, over idleWindow)
// times the time they took.
type schedRound struct {
	p50, p99, last time.Duration // lateness of the fires
	fireWall       time.Duration // from the clock's move to the last fire
	fireCPU        time.Duration // process CPU until the last fire started
	minute         usage         // until the runs completed and the schedules were stepped
	idle           usage         // the node idle, over idleWindow
	skipped        int64
	// The schedules sweep's turns that stepped schedules, the longest,
	// and how many outlasted their try-lock's TTL.
	turns, turnsOverTTL     int
	medianTurn, longestTurn time.Duration
}

// idleWindow is how long a round measures the node idle.
const idleWindow = 2 * time.Second

// usage is what the node and redis-server spent over secs seconds.
type usage struct {
	secs          float64
	cpu, redisCPU time.Duration
	cmds          map[string]int64 // Redis commands by name
}

// total is the number of Redis commands.
func (u usage) total() int64 {
	var n int64
	for _, c := range u.cmds {
		n += c
	}
	return n
}

// top lists the k commands most run, per one of n.
func (u usage) top(n, k int) string {
	names := slices.Collect(maps.Keys(u.cmds))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(u.cmds[b], u.cmds[a]) })
	var parts []string
	for _, name := range names[:min(k, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", strings.TrimPrefix(name, "cmdstat_"), float64(u.cmds[name])/float64(n)))
	}
	return strings.Join(parts, ", ")
}

// meter reads the node's and redis-server's counters.
type meter struct {
	b     *testing.B
	admin *redis.Client // nil when embedded
}

// reading is the counters at a moment.
type reading struct {
	at time.Time
	u  usage
}

// read returns the counters now.
func (m meter) read() reading {
	u := usage{cmds: redisCommands(m.b, m.admin), redisCPU: redisCPU(m.b, m.admin), cpu: processCPU()}
	return reading{at: time.Now(), u: u}
}

// since returns what was spent since r, less what the node spends idle
// (idle, scaled to the time it took; the zero usage subtracts nothing).
func (m meter) since(r reading, idle usage) usage {
	now := m.read()
	out := usage{secs: now.at.Sub(r.at).Seconds(), cmds: map[string]int64{}}
	f := 0.0
	if idle.secs > 0 {
		f = out.secs / idle.secs
	}
	out.cpu = now.u.cpu - r.u.cpu - time.Duration(f*float64(idle.cpu))
	out.redisCPU = now.u.redisCPU - r.u.redisCPU - time.Duration(f*float64(idle.redisCPU))
	for name, c := range now.u.cmds {
		out.cmds[name] = c - r.u.cmds[name] - int64(f*float64(idle.cmds[name]))
	}
	return out
}

// benchBackend opens the store, locks and ready queue of backend
// ("embedded" or "redis", where it also sets cfg.Bus and returns an
// admin client of the redis-server), as host/node would.
func benchBackend(b *testing.B, backend string, cfg *engine.Config) (store.Store, lock.Locker, queue.Queue, *redis.Client) {
	ctx := context.Background()
	var (
		st    store.Store
		locks lock.Locker
		q     queue.Queue
		admin *redis.Client
	)
	switch backend {
	case "embedded":
		st, locks, q = openStore(b), local.New(local.Config{Logger: cfg.Logger}), memqueue.New(10_000)
	case "redis":
		srv := redistest.Start(b)
		admin = srv.Client(b)
		// As host/node sizes it: idle workers each hold a connection in a
		// blocking read of the ready queue; the sweep's steppers need theirs.
		opts := srv.Options()
		opts.ContextTimeoutEnabled = true
		opts.PoolSize = 10*runtime.GOMAXPROCS(0) + cfg.WithDefaults().Workers + engine.ScheduleSteppers
		c := redis.NewClient(opts)
		b.Cleanup(func() { _ = c.Close() })
		rs, err := redisstore.Open(ctx, redisstore.Config{Client: c, Logger: cfg.Logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rs.Close() })
		rq, err := redisqueue.New(redisqueue.Config{Client: c, Consumer: cfg.NodeID, Capacity: 10_000, Logger: cfg.Logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = rq.Close() })
		bus, err := notify.NewRedis(notify.RedisConfig{Client: c, Logger: cfg.Logger})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = bus.Close() })
		if locks, err = redislock.New(redislock.Config{Clients: []redis.UniversalClient{c}, Logger: cfg.Logger}); err != nil {
			b.Fatal(err)
		}
		st, q, cfg.Bus = rs, rq, bus
	}
	return st, locks, q, admin
}

func benchSchedules10k(b *testing.B, backend string, jitter bool) {
	n := *benchSchedules
	ctx := context.Background()
	clock := &benchClock{base: t0}
	rec := &fireRecorder{}
	cfg := engine.Config{NodeID: "n1", EagerStarts: true, Now: clock.Now, Observer: rec, Logger: slog.New(slog.DiscardHandler)}
	st, locks, q, admin := benchBackend(b, backend, &cfg)
	turns := &turnTimer{Locker: locks}
	e, err := engine.New(cfg, st, turns, q, nil)
	if err != nil {
		b.Fatal(err)
	}
	runEngine(b, e)
	if _, _, err := e.SaveDefinition(ctx, []byte(tickFlow)); err != nil {
		b.Fatalf("saving the workflow: %v", err)
	}

	// The schedules, saved by many writers to share the store's commits;
	// the sweep then steps each once (a new schedule is due at once) and
	// finds its first fire at the next minute.
	spec := "{every: 1m}"
	if jitter {
		spec = "{every: 1m, jitter: 30s}"
	}
	saveStart := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 32 {
				doc := fmt.Sprintf("id: s%05d\nworkflow: tick\nspec: %s\n", i, spec)
				if _, _, _, err := e.SaveSchedule(ctx, []byte(doc), "", "bench"); err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("saving schedules: %v", err)
	default:
	}
	settle(b, "the first step of every schedule", func() bool { return nothingDue(b, st, clock.Now()) })
	b.Logf("%s: %d schedules saved and stepped in %v", backend, n, time.Since(saveStart).Round(time.Millisecond))

	m := meter{b: b, admin: admin}
	minute := func(round int) schedRound {
		var r schedRound
		// The node idle, for what the figures below leave out.
		before := m.read()
		time.Sleep(idleWindow) // measuring the idle node over a window
		r.idle = m.since(before, usage{})

		// The minute: every schedule fires.
		completed0 := rec.completed.Load()
		turns.reset()
		rec.reset(n)
		before = m.read()
		at := clock.Now().Truncate(time.Minute).Add(time.Minute)
		moved := clock.run(at)
		select {
		case <-rec.done:
		case <-time.After(15 * time.Minute):
			b.Fatalf("round %d: %d of %d fires after 15 minutes", round, rec.fires(), n)
		}
		late := rec.lateness(moved, jitter)
		r.skipped = rec.skipped.Load()
		r.fireWall = rec.at.Sub(moved)
		r.fireCPU = rec.cpu - before.u.cpu - time.Duration(rec.at.Sub(before.at).Seconds()/r.idle.secs*float64(r.idle.cpu))
		want := completed0 + int64(len(late))
		settle(b, "the minute's runs and steps", func() bool {
			return rec.completed.Load() >= want && nothingDue(b, st, clock.Now())
		})
		r.minute = m.since(before, r.idle)
		r.turns, r.medianTurn, r.longestTurn, r.turnsOverTTL = turns.summary(sweepTTL)
		clock.freeze()
		if len(late) != n {
			b.Errorf("round %d: %d fires started their run, %d skipped; want %d started", round, len(late), r.skipped, n)
		}
		if clock.Now().Sub(at) >= time.Minute {
			b.Logf("round %d: the minute's work outlasted the minute: the next minute's fires came due during it", round)
		}
		slices.Sort(late)
		if len(late) > 0 {
			r.p50, r.p99, r.last = late[len(late)/2], late[len(late)*99/100], late[len(late)-1]
		}

		b.Logf("round %d: lateness p50 %s p99 %s max %s (%.0f fires/s), skipped %d; %d sweep turns, median %s, longest %s, %d past the lock's TTL; CPU per fire %.0f µs to the last fire, %.0f µs with the runs; idle %.1f%% of a core; live heap %d MiB",
			round, ms(r.p50), ms(r.p99), ms(r.last), float64(n)/r.fireWall.Seconds(), r.skipped, r.turns, ms(r.medianTurn), ms(r.longestTurn), r.turnsOverTTL,
			perUnit(r.fireCPU, n), perUnit(r.minute.cpu, n), r.idle.cpu.Seconds()/r.idle.secs*100, liveHeap()>>20)
		if admin != nil {
			b.Logf("round %d: redis per fire %.1f commands, %.0f µs CPU (%s); idle %.0f commands/s",
				round, float64(r.minute.total())/float64(n), perUnit(r.minute.redisCPU, n), r.minute.top(n, 14), float64(r.idle.total())/r.idle.secs)
		}
		return r
	}
	// A first minute unmeasured: in the steady state every fire finds the
	// run of the minute before, retires it and records it ended.
	minute(0)
	var rounds []schedRound
	round := 0
	b.ResetTimer()
	for b.Loop() {
		round++
		rounds = append(rounds, minute(round))
	}
	b.StopTimer()

	med := func(f func(schedRound) float64) float64 {
		v := make([]float64, len(rounds))
		for i, r := range rounds {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r schedRound) float64 { return r.p50.Seconds() * 1000 }), "late-p50-ms")
	b.ReportMetric(med(func(r schedRound) float64 { return r.p99.Seconds() * 1000 }), "late-p99-ms")
	b.ReportMetric(med(func(r schedRound) float64 { return r.last.Seconds() * 1000 }), "late-max-ms")
	b.ReportMetric(med(func(r schedRound) float64 { return float64(n) / r.fireWall.Seconds() }), "fires/s")
	b.ReportMetric(med(func(r schedRound) float64 { return perUnit(r.fireCPU, n) }), "µs-CPU/fire-to-last")
	b.ReportMetric(med(func(r schedRound) float64 { return perUnit(r.minute.cpu, n) }), "µs-CPU/fire")
	// The share of one core that n fires a minute take: the minute's CPU
	// over the minute's 60 seconds.
	b.ReportMetric(med(func(r schedRound) float64 { return r.minute.cpu.Seconds() / 60 * 100 }), "%core")
	b.ReportMetric(med(func(r schedRound) float64 { return r.idle.cpu.Seconds() / r.idle.secs * 100 }), "%core-idle")
	if admin != nil {
		b.ReportMetric(med(func(r schedRound) float64 { return float64(r.minute.total()) / float64(n) }), "redis-cmds/fire")
		b.ReportMetric(med(func(r schedRound) float64 { return perUnit(r.minute.redisCPU, n) }), "µs-redis-CPU/fire")
	}
	b.ReportMetric(med(func(r schedRound) float64 { return float64(r.skipped) }), "skipped")
	b.ReportMetric(med(func(r schedRound) float64 { return r.longestTurn.Seconds() * 1000 }), "longest-turn-ms")
	b.ReportMetric(med(func(r schedRound) float64 { return float64(r.turnsOverTTL) }), "turns-over-ttl")
	b.ReportMetric(0, "ns/op")
}

// benchClock is a fake clock that stands still until run moves it, and
// from then runs at real speed until freeze stops it.
type benchClock struct {
	mu      sync.Mutex
	base    time.Time
	at      time.Time // the real instant of the last run
	running bool
}

// Now is the clock's time.
func (c *benchClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now()
}

func (c *benchClock) now() time.Time {
	if !c.running {
		return c.base
	}
	return c.base.Add(time.Since(c.at))
}

// run moves the clock to t and lets it run; it returns the real instant
// at which the clock read t.
func (c *benchClock) run(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.at, c.running = t, time.Now(), true
	return c.at
}

// freeze stops the clock where it is.
func (c *benchClock) freeze() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base, c.running = c.now(), false
}

// fireRecorder is an engine.Observer that records when each scheduled
// fire started its run, and signals done, with the process's CPU at that
// moment, when want fires have started or been skipped.
type fireRecorder struct {
	mu    sync.Mutex
	want  int
	real  []time.Time     // when each fire started its run
	late  []time.Duration // the engine's late of each
	at    time.Time       // when the want-th fire came
	cpu   time.Duration   // processCPU then
	done  chan struct{}
	ended bool

	skipped   atomic.Int64
	completed atomic.Int64 // instances that completed
}

// reset starts a round of want fires.
func (r *fireRecorder) reset(want int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.want, r.ended = want, false
	r.real, r.late = make([]time.Time, 0, want), make([]time.Duration, 0, want)
	r.done = make(chan struct{})
	r.skipped.Store(0)
}

// count ends the round when want fires have come; r.mu is held.
func (r *fireRecorder) count() {
	if !r.ended && r.done != nil && len(r.real)+int(r.skipped.Load()) >= r.want {
		r.at, r.cpu, r.ended = time.Now(), processCPU(), true
		close(r.done)
	}
}

// fires is how many fires started their run this round.
func (r *fireRecorder) fires() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.real)
}

// lateness returns the lateness of the round's fires: from the clock's
// move, or, with jitter, the engine's late (from each fire's own due
// time; the clock runs at real speed, so it is real time too).
func (r *fireRecorder) lateness(moved time.Time, jitter bool) []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if jitter {
		return slices.Clone(r.late)
	}
	late := make([]time.Duration, len(r.real))
	for i, t := range r.real {
		late[i] = t.Sub(moved)
	}
	return late
}

func (r *fireRecorder) ScheduleFired(kind string, started bool, late time.Duration) {
	now := time.Now()
	if kind != string(weft.FireScheduled) || !started {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.real, r.late = append(r.real, now), append(r.late, late)
	r.count()
}

func (r *fireRecorder) SchedulesSkipped(_ string, n int) {
	r.skipped.Add(int64(n))
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count()
}

func (r *fireRecorder) InstanceStatus(_ string, status weft.Status) {
	if status == weft.StatusCompleted {
		r.completed.Add(1)
	}
}

func (*fireRecorder) StepFinished(string, string, string, time.Duration)  {}
func (*fireRecorder) InstancesDeleted(string, int)                        {}
func (*fireRecorder) SlotWaited(string, time.Duration)                    {}
func (*fireRecorder) SlotCancelled(string, string)                        {}
func (*fireRecorder) BatchApplied(string, string, int)                    {}
func (*fireRecorder) InstanceFinished(string, weft.Status, time.Duration) {}
func (*fireRecorder) TimerFired(time.Duration)                            {}
func (*fireRecorder) InstanceTakenOver()                                  {}
func (*fireRecorder) AttemptAbandoned(string)                             {}

// sweepKey is the schedules sweep's try-lock, and sweepTTL its TTL with
// the default ScheduleInterval (engine's singletonTTL: four intervals, at
// least a second): a turn that outlasts it may, in a cluster, overlap
// the turn of the node that takes the lock next.
const (
	sweepKey = "weft-schedules-sweep"
	sweepTTL = time.Second
)

// turnTimer is a lock.Locker that times the schedules sweep's turns, from
// its try-lock taken to released; every other lock passes through.
type turnTimer struct {
	lock.Locker
	mu    sync.Mutex
	turns []time.Duration
}

// TryAcquire implements lock.Locker.
func (l *turnTimer) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, bool, error) {
	ls, ok, err := l.Locker.TryAcquire(ctx, key, ttl)
	if !ok || key != sweepKey {
		return ls, ok, err
	}
	return &timedLease{Lease: ls, l: l, at: time.Now()}, true, nil
}

// ExtendLeases implements lock.BatchExtender, so that the instance locks'
// batches reach the wrapped Locker's as they would unwrapped.
func (l *turnTimer) ExtendLeases(ctx context.Context, leases []lock.Lease, ttl time.Duration) []error {
	return lock.ExtendAll(ctx, l.Locker, leases, ttl)
}

// reset forgets the turns timed so far.
func (l *turnTimer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns = nil
}

// summary returns how many turns took longer than an idle one (10ms),
// the median and the longest of those, and how many took longer than ttl.
func (l *turnTimer) summary(ttl time.Duration) (busy int, median, longest time.Duration, over int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, d := range l.turns {
		if d > 10*time.Millisecond {
			ds = append(ds, d)
		}
		if d > ttl {
			over++
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0, over
	}
	slices.Sort(ds)
	return len(ds), ds[len(ds)/2], ds[len(ds)-1], over
}

// timedLease is a sweep turn's lease: its release ends the turn.
type timedLease struct {
	lock.Lease
	l  *turnTimer
	at time.Time
}

// Release implements lock.Lease.
func (s *timedLease) Release(ctx context.Context) {
	d := time.Since(s.at)
	s.Lease.Release(ctx)
	s.l.mu.Lock()
	s.l.turns = append(s.l.turns, d)
	s.l.mu.Unlock()
}

// nothingDue reports whether no schedule is due at now: the sweep has
// stepped every one.
func nothingDue(b *testing.B, st store.Store, now time.Time) bool {
	ids, err := st.DueSchedules(context.Background(), now, 1)
	if err != nil {
		b.Fatalf("due schedules: %v", err)
	}
	return len(ids) == 0
}

// settle polls cond until it holds, failing after a deadline.
func settle(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(15 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling, with a deadline
	}
}

// liveHeap is the heap the last garbage collection found live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCommands returns the calls of every command redis-server ran, by
// name (INFO commandstats: scripts, and the commands they ran), INFO
// itself aside; nil without a server.
func redisCommands(b *testing.B, c *redis.Client) map[string]int64 {
	if c == nil {
		return nil
	}
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatalf("INFO commandstats: %v", err)
	}
	calls := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") || name == "cmdstat_info" {
			continue
		}
		_, rest, _ = strings.Cut(rest, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		calls[name] = n
	}
	return calls
}

// redisCPU is redis-server's user and system CPU time so far (INFO cpu);
// 0 without a server.
func redisCPU(b *testing.B, c *redis.Client) time.Duration {
	if c == nil {
		return 0
	}
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, k := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("INFO cpu: %q: %v", line, err)
				}
				total += f
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

// ms is d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.0fms", d.Seconds()*1000) }

// perUnit is d in microseconds per one of n.
func perUnit(d time.Duration, n int) float64 { return d.Seconds() * 1e6 / float64(n) }

// BenchmarkStartBurst10k is the floor under BenchmarkSchedules10k's
// "at-once" lateness: no schedules, the same 10,000 starts of the same
// workflow released at once through Engine.Start by as many callers as
// the sweep has steppers (ScheduleSteppers), on the same backends with
// the same defaults. A round measures, from the release, the real time
// until each Start returned (the instance durably created and handed to
// a worker), and the process's CPU until the last one did and until
// every run completed. Whatever the scheduler does per fire, its fires
// cannot all start sooner than the engine starts the same instances
// with nothing else to do. Run as:
//
//	go test -run '^$' -bench BenchmarkStartBurst10k -benchtime 3x -timeout 60m ./internal/engine/
func BenchmarkStartBurst10k(b *testing.B) {
	for _, backend := range []string{"embedded", "redis"} {
		b.Run(backend, func(b *testing.B) { benchStartBurst(b, backend) })
	}
}

func benchStartBurst(b *testing.B, backend string) {
	n := *benchSchedules
	ctx := context.Background()
	rec := &fireRecorder{}
	cfg := engine.Config{NodeID: "n1", EagerStarts: true, Observer: rec, Logger: slog.New(slog.DiscardHandler)}
	st, locks, q, admin := benchBackend(b, backend, &cfg)
	e, err := engine.New(cfg, st, locks, q, nil)
	if err != nil {
		b.Fatal(err)
	}
	runEngine(b, e)
	if _, _, err := e.SaveDefinition(ctx, []byte(tickFlow)); err != nil {
		b.Fatalf("saving the workflow: %v", err)
	}
	m := meter{b: b, admin: admin}
	burst := func(round int) (late []time.Duration, toLast, all usage) {
		before := m.read()
		time.Sleep(idleWindow) // measuring the idle node over a window
		idle := m.since(before, usage{})

		completed0 := rec.completed.Load()
		late = make([]time.Duration, n)
		var next atomic.Int64
		errs := make(chan error, 1)
		var wg sync.WaitGroup
		before = m.read()
		released := time.Now()
		for range engine.ScheduleSteppers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					id := fmt.Sprintf("burst-%d-%05d", round, i)
					if _, _, err := e.Start(ctx, "tick", nil, id); err != nil {
						select {
						case errs <- fmt.Errorf("starting %s: %w", id, err):
						default:
						}
						return
					}
					late[i] = time.Since(released)
				}
			}()
		}
		wg.Wait()
		toLast = m.since(before, idle)
		select {
		case err := <-errs:
			b.Fatalf("round %d: %v", round, err)
		default:
		}
		settle(b, "the burst's runs", func() bool { return rec.completed.Load() >= completed0+int64(n) })
		all = m.since(before, idle)
		slices.Sort(late)
		b.Logf("round %d: start p50 %s p99 %s max %s (%.0f starts/s); CPU per start %.0f µs to the last, %.0f µs with the runs",
			round, ms(late[n/2]), ms(late[n*99/100]), ms(late[n-1]), float64(n)/late[n-1].Seconds(), perUnit(toLast.cpu, n), perUnit(all.cpu, n))
		if admin != nil {
			b.Logf("round %d: redis per start %.1f commands, %.0f µs CPU (%s)", round, float64(all.total())/float64(n), perUnit(all.redisCPU, n), all.top(n, 14))
		}
		return late, toLast, all
	}
	burst(0) // unmeasured: the store and the pools warm
	type result struct {
		p50, p99, last float64
		cpuToLast, cpu float64
	}
	var results []result
	round := 0
	b.ResetTimer()
	for b.Loop() {
		round++
		late, toLast, all := burst(round)
		results = append(results, result{
			p50: late[n/2].Seconds() * 1000, p99: late[n*99/100].Seconds() * 1000, last: late[n-1].Seconds() * 1000,
			cpuToLast: perUnit(toLast.cpu, n), cpu: perUnit(all.cpu, n),
		})
	}
	b.StopTimer()
	med := func(f func(result) float64) float64 {
		v := make([]float64, len(results))
		for i, r := range results {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r result) float64 { return r.p50 }), "start-p50-ms")
	b.ReportMetric(med(func(r result) float64 { return r.p99 }), "start-p99-ms")
	b.ReportMetric(med(func(r result) float64 { return r.last }), "start-max-ms")
	b.ReportMetric(med(func(r result) float64 { return float64(n) / r.last * 1000 }), "starts/s")
	b.ReportMetric(med(func(r result) float64 { return r.cpuToLast }), "µs-CPU/start-to-last")
	b.ReportMetric(med(func(r result) float64 { return r.cpu }), "µs-CPU/start")
	b.ReportMetric(0, "ns/op")
}
