package plugins

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/plugins/call"
)

// pool keeps the instances of one plugin version. At most size instances
// exist at once: slots holds a token per live instance and idle holds the
// ones not in a call. An instance that failed in any way other than a clean
// guest error is closed and its slot freed, never returned to idle: a guest
// that trapped or panicked can look healthy and still be corrupt.
type pool struct {
	rt      *Runtime
	version string
	cm      wazero.CompiledModule
	idle    chan *instance
	slots   chan struct{}

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup

	// initialMemory is the size of a new instance's memory, in bytes.
	initialMemory int64

	created   atomic.Int64
	discarded atomic.Int64
	evicted   atomic.Int64
}

func newPool(rt *Runtime, version string, cm wazero.CompiledModule) *pool {
	p := &pool{
		rt:      rt,
		version: version,
		cm:      cm,
		idle:    make(chan *instance, rt.cfg.PoolSize),
		slots:   make(chan struct{}, rt.cfg.PoolSize),
	}
	if m, ok := cm.ExportedMemories()[abi.ExportMemory]; ok {
		p.initialMemory = int64(m.Min()) * 65536
	}
	return p
}

// get returns an idle instance, creating one while there is a free slot, or
// waits for one until ctx ends. recording, when not nil, is a call that
// records: an instance made for it records its _initialize on the call's
// tape, which is then fresh (exactness for free; call.Call.RecordExact).
func (p *pool) get(ctx context.Context, recording *call.Call) (*instance, error) {
	select {
	case in := <-p.idle:
		return in, nil
	default:
	}
	select {
	case in := <-p.idle:
		return in, nil
	case p.slots <- struct{}{}:
		in, err := p.instantiateTaped(ctx, recording)
		if err != nil {
			<-p.slots
			return nil, err
		}
		return in, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// create makes an instance in a free slot, failing when none is free.
func (p *pool) create(ctx context.Context) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		return nil, errors.New("plugins: pool is full")
	}
	in, err := p.instantiate(ctx)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return in, nil
}

// put returns a healthy instance to the pool after a call.
func (p *pool) put(in *instance) {
	in.lastUsed = p.rt.cfg.Now()
	p.restore(in)
}

// takeIdle removes the pool's idle instances and returns them; the caller
// closes each one with evict or returns it with restore.
func (p *pool) takeIdle(into []*instance) []*instance {
	for {
		select {
		case in := <-p.idle:
			into = append(into, in)
		default:
			return into
		}
	}
}

// restore makes an instance idle again (one put after a call, or one
// takeIdle removed), or closes it when the pool was closed meanwhile.
func (p *pool) restore(in *instance) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		p.discard(context.Background(), in)
		return
	}
	p.idle <- in // never blocks: an instance holds a slot, and idle has a place per slot
}

// evict closes an idle instance takeIdle removed, to give its memory back.
func (p *pool) evict(in *instance) {
	in.close(context.Background())
	<-p.slots
	p.evicted.Add(1)
}

// discard closes an instance and frees its slot.
func (p *pool) discard(ctx context.Context, in *instance) {
	p.discarded.Add(1)
	in.close(ctx)
	<-p.slots
}

// PoolStats describes the instance pool of one plugin version.
type PoolStats struct {
	// Live instances exist now; Idle of them wait for a call.
	Live, Idle int
	// Created, Discarded and Evicted count instances since the version was
	// loaded. Discarded counts instances closed after a failure, Evicted
	// idle ones closed to give their memory back (see Config.IdleTimeout
	// and Config.MaxMemory); neither counts those closed at shutdown.
	Created, Discarded, Evicted int64
}

func (p *pool) stats() PoolStats {
	return PoolStats{Live: len(p.slots), Idle: len(p.idle), Created: p.created.Load(), Discarded: p.discarded.Load(), Evicted: p.evicted.Load()}
}

// close waits for calls in flight, then closes every idle instance and the
// compiled module.
func (p *pool) close(ctx context.Context) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	p.calls.Wait()
	for {
		select {
		case in := <-p.idle:
			in.close(ctx)
			<-p.slots
		default:
			_ = p.cm.Close(ctx)
			return
		}
	}
}

// begin registers a call, failing when the pool is closing.
func (p *pool) begin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.calls.Add(1)
	return true
}

// instance is one instantiated module with its exports resolved.
type instance struct {
	pool       *pool
	mod        api.Module
	mem        api.Memory
	abiVersion api.Function
	alloc      api.Function
	manifest   api.Function
	invoke     api.Function
	// budget is the instrumentation's stack budget, set before each call
	// into the guest (see package instrument).
	budget api.MutableGlobal
	// fuel is the instrumentation's fuel counter, read by a call that
	// measures its guest's work (call.Call.Fuel).
	fuel api.MutableGlobal
	// stack is the parameter/result stack reused by every call.
	stack [3]uint64
	// cur is the call into the guest in progress (begin), whose state the
	// stdout/stderr writers read.
	cur    callContext
	stdout *guestWriter
	stderr *guestWriter
	// cs is the state of the call in progress, reused from call to call.
	cs callState
	// invoked is the Call in progress, which cs.call points to.
	invoked call.Call
	// lastUsed is when the instance last went back to the idle pool.
	lastUsed time.Time
}

// instantiate makes an instance for the pool.
func (p *pool) instantiate(ctx context.Context) (*instance, error) {
	return p.instantiateTaped(ctx, nil)
}

// fresh returns a new instance for a call that records exactly or
// replays. With taped not nil, its _initialize is recorded or replayed on
// taped's tape too: a guest's state after its initialisation (a runtime's
// random seeds, the clock readings its timers count from) and after
// earlier calls is part of what it observes, so only a new instance,
// initialised from the tape, runs the call again byte for byte. With nil
// (the replay of a tape that is not fresh), it initialises live. It takes
// a free slot, or the slot of an idle instance, which it closes;
// otherwise it waits for one.
func (p *pool) fresh(ctx context.Context, taped *call.Call) (*instance, error) {
	select {
	case p.slots <- struct{}{}:
	default:
		select {
		case p.slots <- struct{}{}:
		case in := <-p.idle: // its slot becomes the new instance's
			in.close(ctx)
			p.evicted.Add(1)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	in, err := p.instantiateTaped(ctx, taped)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return in, nil
}

// instantiateTaped makes an instance, recording or replaying its
// _initialize on taped's tape when taped is not nil; a recorded tape is
// marked fresh.
func (p *pool) instantiateTaped(ctx context.Context, taped *call.Call) (*instance, error) {
	in := &instance{pool: p}
	in.stdout = &guestWriter{in: in, source: "stdout"}
	in.stderr = &guestWriter{in: in, source: "stderr"}
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous, so that a version can have many instances
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(in.stdout).
		WithStderr(in.stderr).
		WithSysWalltime().
		WithSysNanotime().
		WithSysNanosleep().
		WithRandSource(rand.Reader)
	// Output of _initialize has no call to belong to; it goes to the
	// runtime's log, and a failing initialiser's stderr into the error.
	adm, err := p.rt.budget.admit(p.initialMemory)
	if err != nil {
		return nil, err
	}
	init := &callState{rt: p.rt, initialising: true}
	if taped != nil {
		init.rec, init.play = taped.Record, taped.Replay
	}
	// _initialize may log; what it writes sees the call's deadline.
	mod, err := p.rt.rt.InstantiateModule(experimental.WithMemoryAllocator(in.begin(ctx, init), adm), p.cm, mc)
	in.end()
	init.flushLogs()
	if err == nil && mod.IsClosed() {
		// proc_exit from _initialize closes the module and wazero
		// answers without an error.
		err = errors.New("_initialize called proc_exit")
	}
	if err != nil {
		// wazero frees nothing of an instantiation that failed.
		adm.abort()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if init.violation != nil { // a divergence from the tape, say
			return nil, fmt.Errorf("instantiating: %w", init.violation)
		}
		if serr := stopped(err); serr != nil {
			return nil, fmt.Errorf("instantiating: %w", serr)
		}
		return nil, fmt.Errorf("%w: instantiating: %v%s", call.ErrTrap, err, stderrSuffix(init.stderrTail()))
	}
	adm.done()
	p.created.Add(1)
	if init.rec != nil {
		init.rec.MarkFresh()
	}
	in.mod = mod
	in.mem = mod.Memory()
	in.abiVersion = mod.ExportedFunction(abi.ExportABIVersion)
	in.alloc = mod.ExportedFunction(abi.ExportAlloc)
	in.manifest = mod.ExportedFunction(abi.ExportManifest)
	in.invoke = mod.ExportedFunction(abi.ExportInvoke)
	in.budget, _ = mod.ExportedGlobal(stackExport).(api.MutableGlobal)
	in.fuel, _ = mod.ExportedGlobal(fuelExport).(api.MutableGlobal)
	if in.mem == nil || in.abiVersion == nil || in.alloc == nil || in.manifest == nil || in.invoke == nil || in.budget == nil || in.fuel == nil {
		_ = mod.Close(ctx)
		return nil, invalid("instance lacks the exports checked at validation")
	}
	return in, nil
}

// resetStack gives the next call into the guest its whole stack budget:
// the export the host calls charges its frame and nobody gives it back.
func (in *instance) resetStack() {
	in.budget.Set(uint64(uint32(stackBudget(in.pool.rt.cfg))))
}

func (in *instance) close(ctx context.Context) {
	if in.mod != nil {
		_ = in.mod.Close(ctx)
	}
}

func stderrSuffix(tail string) string {
	if tail == "" {
		return ""
	}
	return fmt.Sprintf("; guest stderr: %s", tail)
}
