// Package plugins is the host side of Weft's activity plugins: it validates
// WebAssembly modules against the ABI (abi/README.md), stores them by content
// hash, rewrites each version so that its guest code can be stopped and its
// stack and tables are bounded (package instrument), compiles it once (with a
// compilation cache on disk), keeps a bounded pool of instances per version
// whose memories live outside the Go heap under a host-wide budget, and
// invokes activities in wazero's sandbox under limits: deadline, memory,
// stack, output size, log volume and heartbeat size (abi/README.md §10).
//
// A guest can compute, log, heartbeat and read what the host gives it. It
// has no filesystem, network, environment or arguments, and nothing it does
// can stop the host process: a trap, a runaway loop, a memory blow-up or
// garbage at the boundary fails that one call, and the instance involved is
// discarded.
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"github.com/tetratelabs/wazero"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/instrument"
)

// Blobs stores plugin modules by content hash (lower-case sha256 hex).
type Blobs interface {
	// Put stores data under hash; storing the same hash again is a no-op.
	// It returns once data is durable.
	Put(ctx context.Context, hash string, data []byte) error
	// Get returns the data stored under hash, or an error matching
	// ErrNotFound.
	Get(ctx context.Context, hash string) ([]byte, error)
	// Delete removes hash; deleting a missing hash is not an error.
	Delete(ctx context.Context, hash string) error
}

// Module describes a validated plugin version.
type Module struct {
	// Version is the sha256 of the module's bytes, lower-case hex.
	Version string
	// Size is the module's size in bytes.
	Size int
	// Activities is the plugin's manifest.
	Activities []abi.Activity
	// Needs is what the manifest asks an operator to grant, or nil.
	Needs *abi.Needs
}

// Has reports whether the manifest lists activity.
func (m *Module) Has(activity string) bool {
	for _, a := range m.Activities {
		if a.Name == activity {
			return true
		}
	}
	return false
}

// Runtime hosts plugin versions. It is safe for concurrent use.
type Runtime struct {
	cfg   Config
	log   *slog.Logger
	blobs Blobs
	rt    wazero.Runtime
	cache wazero.CompilationCache
	// rewrites caches the instrumentation's output beside cache; nil
	// without a CacheDir.
	rewrites *rewriteCache

	// budget holds the guests' memories within MaxMemory; compiles holds
	// a token per compilation in progress.
	budget *memoryBudget
	// outbound sends the guests' HTTP requests.
	outbound *outbound
	compiles chan struct{}
	// stopJanitor and janitorDone stop and wait for expireIdle.
	stopJanitor chan struct{}
	janitorDone chan struct{}

	// seen is the secret values this node's guests read, masked in every
	// later call of the same plugin or version (mask.go).
	seen secretsSeen

	mu     sync.Mutex
	closed bool
	loaded map[string]*loading
}

// loading is a version being loaded or loaded; ready closes when p or err is
// set, so that concurrent callers compile a version only once.
type loading struct {
	ready chan struct{}
	p     *plugin
	err   error
}

// plugin is a loaded version: its compiled module and its instance pool.
type plugin struct {
	module *Module
	pool   *pool
}

// wazeroVersionOnce works around wazero issue #2532 (fixed upstream after
// v1.12.0): the first calls of wazero's internal GetWazeroVersion, made by
// NewRuntimeWithConfig and NewCompilationCacheWithDir, write a package
// variable without synchronisation, so two runtimes created concurrently
// race. Creating one runtime once, under a sync.Once, fills that variable
// before any concurrent use. Remove it when upgrading wazero.
var wazeroVersionOnce sync.Once

// New returns a Runtime that keeps modules in blobs. It fails when cfg has an
// impossible value or the compilation cache directory cannot be used.
func New(ctx context.Context, cfg Config, blobs Blobs) (*Runtime, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wazeroVersionOnce.Do(func() { _ = wazero.NewRuntime(context.Background()).Close(context.Background()) })
	if blobs == nil {
		return nil, errors.New("plugins: New needs a blob store")
	}
	// No WithCloseOnContextDone: it makes compiled code leave for Go at
	// every loop header, which costs up to ten times the guest's speed, and
	// still misses code without loops. The instrumentation (package
	// instrument) stops guests instead.
	rc := wazero.NewRuntimeConfig().WithMemoryLimitPages(cfg.MemoryLimitPages)
	var cache wazero.CompilationCache
	var rewrites *rewriteCache
	if cfg.CacheDir != "" {
		var err error
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("plugins: compilation cache in %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
		rewrites = newRewriteCache(filepath.Join(cfg.CacheDir, rewriteCacheDir), instrumentOptions(cfg), cfg.Logger)
	}
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if err := instantiateWASI(ctx, rt); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiating WASI: %w", err)
	}
	r := &Runtime{
		cfg: cfg, log: cfg.Logger, blobs: blobs, rt: rt, cache: cache, rewrites: rewrites, loaded: map[string]*loading{},
		budget:      &memoryBudget{log: cfg.Logger, limit: cfg.MaxMemory},
		outbound:    newOutbound(cfg.HTTP),
		compiles:    make(chan struct{}, cfg.MaxCompiles),
		stopJanitor: make(chan struct{}),
		janitorDone: make(chan struct{}),
	}
	r.budget.evict = r.evictIdle
	if err := r.instantiateHostModule(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiating host module: %w", err)
	}
	if err := r.instantiateInstrumentModule(ctx); err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("plugins: instantiating the instrumentation's host module: %w", err)
	}
	go r.expireIdle(r.stopJanitor, r.janitorDone)
	return r, nil
}

// freeAfterCompile is how much a compile must allocate for the freed
// memory to be given back to the system at once.
const freeAfterCompile = 64 << 20

// allocatedBytes is how much the process has allocated on the heap since
// it started; reading it does not stop the world.
func allocatedBytes() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}

// Hash returns the version (sha256, lower-case hex) of a module's bytes.
func Hash(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// IsHash reports whether h has the form of a Hash: 64 lower-case hex
// digits. Blob stores refuse any other key, which could name a path or a
// key outside their own.
func IsHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if (h[i] < '0' || h[i] > '9') && (h[i] < 'a' || h[i] > 'f') {
			return false
		}
	}
	return true
}

// Load validates wasm, stores it in the blob store and makes it ready to
// invoke. A module that fails validation returns a *ValidationError listing
// every problem found, and nothing is stored. Loading a version that is
// already loaded returns its description at once.
func (r *Runtime) Load(ctx context.Context, wasm []byte) (*Module, error) {
	if len(wasm) > r.cfg.MaxModuleBytes {
		return nil, invalid("module is %d bytes, larger than the limit of %d", len(wasm), r.cfg.MaxModuleBytes)
	}
	version := Hash(wasm)
	p, err := r.plugin(ctx, version, func(context.Context) ([]byte, error) { return wasm, nil })
	if err != nil {
		return nil, err
	}
	if err := r.blobs.Put(ctx, version, wasm); err != nil {
		return nil, fmt.Errorf("plugins: storing %s: %w", version, err)
	}
	return p.module, nil
}

// LoadUnstored does what Load does — the same checks, compilation, limits
// and errors — without putting wasm in the blob store: for a candidate
// module that replays and shadow runs try on recorded attempts before an
// operator decides to upload it. The version stays loaded until Unload,
// and Invoke of it works meanwhile; after Unload a call to it fails as for
// an unknown version (ErrNotFound), unless it was stored meanwhile (Load
// of the same bytes, see Stored). A version already loaded is returned at
// once, stored or not.
func (r *Runtime) LoadUnstored(ctx context.Context, wasm []byte) (*Module, error) {
	if len(wasm) > r.cfg.MaxModuleBytes {
		return nil, invalid("module is %d bytes, larger than the limit of %d", len(wasm), r.cfg.MaxModuleBytes)
	}
	p, err := r.plugin(ctx, Hash(wasm), func(context.Context) ([]byte, error) { return wasm, nil })
	if err != nil {
		return nil, err
	}
	return p.module, nil
}

// Stored reports whether the blob store holds version, so that a caller
// that loaded a candidate with LoadUnstored knows whether to Unload it
// afterwards (a stored version may be in use by others). The blob store
// has no lighter question than Get: it reads the module's bytes.
func (r *Runtime) Stored(ctx context.Context, version string) (bool, error) {
	_, err := r.fetch(version)(ctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	}
	return false, err
}

// ModuleBytes returns the stored bytes of version, read from the blob
// store and checked against the version's hash: an error matching
// ErrNotFound when the store does not hold it. A candidate loaded with
// LoadUnstored is not stored.
func (r *Runtime) ModuleBytes(ctx context.Context, version string) ([]byte, error) {
	return r.fetch(version)(ctx)
}

// Module returns the description of a version, loading it from the blob
// store when it is not loaded yet.
func (r *Runtime) Module(ctx context.Context, version string) (*Module, error) {
	p, err := r.plugin(ctx, version, r.fetch(version))
	if err != nil {
		return nil, err
	}
	return p.module, nil
}

// Unload closes a version's instances and forgets its compiled code; the
// blob stays stored and the next call loads it again. Calls in flight finish
// first.
func (r *Runtime) Unload(ctx context.Context, version string) {
	r.mu.Lock()
	l := r.loaded[version]
	delete(r.loaded, version)
	r.mu.Unlock()
	if l == nil {
		return
	}
	<-l.ready
	if l.p != nil {
		l.p.pool.close(ctx)
	}
}

// Close stops the runtime: it waits for calls in flight, closes every
// instance and releases the compiled code.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	loaded := r.loaded
	r.loaded = map[string]*loading{}
	r.mu.Unlock()
	close(r.stopJanitor)
	<-r.janitorDone
	for _, l := range loaded { // each pool waits for its calls in flight
		<-l.ready
		if l.p != nil {
			l.p.pool.close(ctx)
		}
	}
	r.outbound.close()
	err := r.rt.Close(ctx)
	if r.cache != nil {
		if cerr := r.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	return err
}

func (r *Runtime) fetch(version string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		wasm, err := r.blobs.Get(ctx, version)
		if err != nil {
			return nil, fmt.Errorf("plugins: reading %s from the blob store: %w", version, err)
		}
		if Hash(wasm) != version {
			return nil, fmt.Errorf("plugins: blob %s is corrupt: its content hashes to %s", version, Hash(wasm))
		}
		return wasm, nil
	}
}

// plugin returns the loaded version, loading it with source when needed.
// Concurrent callers for one version share one load; a failed load is
// forgotten so that the next call tries again.
func (r *Runtime) plugin(ctx context.Context, version string, source func(context.Context) ([]byte, error)) (*plugin, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	l, ok := r.loaded[version]
	if !ok {
		l = &loading{ready: make(chan struct{})}
		r.loaded[version] = l
		r.mu.Unlock()
		l.p, l.err = r.load(ctx, version, source)
		if l.err != nil {
			r.mu.Lock()
			delete(r.loaded, version)
			r.mu.Unlock()
		}
		close(l.ready)
		return l.p, l.err
	}
	r.mu.Unlock()
	select {
	case <-l.ready: // loaded long ago, as a rule: cheaper alone than in the select below
		return l.p, l.err
	default:
	}
	select {
	case <-l.ready:
		return l.p, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *Runtime) load(ctx context.Context, version string, source func(context.Context) ([]byte, error)) (*plugin, error) {
	wasm, err := source(ctx)
	if err != nil {
		return nil, err
	}
	key := r.rewrites.key(version)
	rewritten, cached := r.rewrites.get(version, key)
	if !cached {
		if err := precheck(wasm, limits{functionBytes: r.cfg.MaxFunctionBytes, tableElements: r.cfg.MaxTableElements}); err != nil {
			return nil, invalid("not a valid WebAssembly module: %v", err)
		}
		if rewritten, err = instrument.Rewrite(wasm, instrumentOptions(r.cfg)); err != nil {
			return nil, invalid("not a valid WebAssembly module: %v", err)
		}
	}
	cm, err := r.compile(ctx, rewritten.Wasm, cached)
	if err != nil {
		return nil, err
	}
	if verr := checkShape(cm, rewritten.Imports); verr != nil {
		_ = cm.Close(ctx)
		return nil, verr
	}
	pl := newPool(r, version, cm)
	// The first instance proves the module links and initialises, and
	// reads the ABI version and the manifest; it then serves calls. The
	// guest code run here is bounded by LoadTimeout, whoever waits.
	lctx, cancel := context.WithTimeout(ctx, r.cfg.LoadTimeout)
	defer cancel()
	inst, err := pl.create(lctx)
	if err == nil {
		var module *Module
		if module, err = inst.describe(lctx, version, len(wasm)); err == nil {
			pl.put(inst)
			p, err := r.warm(ctx, pl, module, cached)
			if err == nil && !cached {
				// Only a version that loaded is cached: an invalid module
				// is refused in full at every upload.
				r.rewrites.put(version, key, rewritten)
			}
			return p, err
		}
		inst.close(ctx)
	}
	pl.close(ctx)
	var verr *ValidationError
	var berr *BudgetError
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(lctx.Err(), context.DeadlineExceeded):
		return nil, invalid("loading took longer than %s: _initialize, %s and %s must return promptly (%v)", r.cfg.LoadTimeout, abi.ExportABIVersion, abi.ExportManifest, err)
	case errors.As(err, &verr), errors.As(err, &berr):
		// Invalid, or no room in the host's memory budget now: a
		// condition of the host, not of the module.
		return nil, err
	}
	// A module that traps or breaks a limit while it loads is invalid.
	return nil, invalid("%v", err)
}

// compile compiles a rewritten module, or finds its machine code in
// wazero's cache. A module whose rewrite was cached loaded before with
// this cache directory and this wazero, so wazero reads its machine code
// instead of compiling: it takes no compile token, which lets a restarting
// host load its versions in parallel, and allocates too little to give
// memory back for. (Should wazero's cache have been removed on its own,
// those loads compile at once, unbounded by MaxCompiles, and once.)
// wazero still decodes and validates every function body of a cached
// module; its API has no way around that.
func (r *Runtime) compile(ctx context.Context, wasm []byte, cached bool) (wazero.CompiledModule, error) {
	if cached {
		cm, err := r.rt.CompileModule(ctx, wasm)
		if err != nil {
			return nil, invalid("not a valid WebAssembly module: %v", err)
		}
		return cm, nil
	}
	// The compilation cache is keyed by the bytes compiled: a change to
	// the instrumentation never reuses code compiled without it.
	release, err := r.acquireCompile(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	before := allocatedBytes()
	cm, err := r.rt.CompileModule(ctx, wasm)
	if allocatedBytes()-before >= freeAfterCompile {
		// Compiling (not loading from the cache) took memory in proportion
		// to the module, now garbage that the Go runtime would give back
		// to the system only slowly (a 5.7 MB module left 115 MiB resident
		// for 14 MiB in use).
		debug.FreeOSMemory()
	}
	if err != nil {
		return nil, invalid("not a valid WebAssembly module: %v", err)
	}
	return cm, nil
}

// warm creates the instances PoolWarm asks for beyond the first.
func (r *Runtime) warm(ctx context.Context, pl *pool, module *Module, cached bool) (*plugin, error) {
	version := pl.version
	for i := 1; i < r.cfg.PoolWarm; i++ {
		inst, err := pl.create(ctx)
		if err != nil {
			pl.close(ctx)
			return nil, fmt.Errorf("plugins: pre-warming %s: %w", version, err)
		}
		pl.put(inst)
	}
	r.log.Debug("plugin loaded", "version", version, "size", module.Size, "activities", len(module.Activities), "rewrite_cached", cached)
	return &plugin{module: module, pool: pl}, nil
}

// Stats returns the pool statistics of a loaded version; a version that is
// not loaded has none.
func (r *Runtime) Stats(version string) PoolStats {
	r.mu.Lock()
	l := r.loaded[version]
	r.mu.Unlock()
	if l == nil {
		return PoolStats{}
	}
	select {
	case <-l.ready:
	default:
		return PoolStats{}
	}
	if l.p == nil {
		return PoolStats{}
	}
	return l.p.pool.stats()
}
