// Package node wires one Weft host from its configuration: the store, the
// plugin runtime with its blob store and compilation cache, the locker, the
// ready queue, the engine, and their metrics. It also keeps the plugin
// catalogue, because an upload touches two of those parts: the runtime
// validates, compiles and stores the module's bytes, the store records the
// version.
//
// # Data directory
//
// Embedded mode keeps everything under Config.DataDir:
//
//	store/             the store, a Pebble directory (instances, definitions, plugin records…)
//	blobs/             plugin modules by content hash
//	cache/             wazero's compilation cache (safe to delete)
//	weft.db.migrated   the bbolt store of an earlier version, once migrated (kept)
//
// Earlier versions kept the store in one bbolt file, DataDir/weft.db. Open
// migrates it: when DataDir/store does not exist and DataDir/weft.db does,
// it copies the file into a new DataDir/store (embedded.Migrate: built
// aside, checked, renamed, so a failed or interrupted migration leaves no
// store), logs it, and renames the file weft.db.migrated (or
// weft.db.migrated.N when that name is taken), which the host never reads
// nor deletes: it is the way back to an older binary. Restoring a backup
// (a bbolt file) is the same path: the backup placed as DataDir/weft.db,
// with no DataDir/store, is migrated at the next start. When both exist,
// Open uses DataDir/store and warns that weft.db is not read.
//
// # Cluster mode
//
// With Store "redis" every node shares, through the first of
// Config.RedisAddrs, the store (internal/store/redisstore), the plugin blobs
// (plugins/redisblobs), the ready queue (internal/queue/redisqueue) and the
// notification bus (internal/notify); the instance locks (lock/redislock) live
// on every address given, a Redlock quorum when there are several. With
// Config.RedisCluster instead, one cluster client of a Redis Cluster carries
// all of them, the locks included (one lock server from Redlock's view;
// the fencing tokens the store checks stay the guarantee). DataDir
// then holds only the node's compilation cache. A plugin uploaded or a
// definition saved on one node is usable on every node at once: versions
// are immutable and read from the shared store. The node that stores a
// version announces it on the bus, and every node compiles it in the
// background then; a node that missed the announcement compiles it at its
// next start or on its first call.
package node

import (
	"go.opentelemetry.io/otel/trace"

	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
)

// Store kinds for Config.Store.
const (
	StoreEmbedded = "embedded"
	StoreRedis    = "redis"
)

// Sentinels matched with errors.Is.
var (
	// ErrInvalidName: a plugin name breaks abi.ValidName's rules.
	ErrInvalidName = errors.New("invalid plugin name")
	// ErrRefreshDisabled: Refresh was called on a node without
	// Config.WorkflowsDir.
	ErrRefreshDisabled = errors.New("definition refresh is disabled: no workflows_dir configured")
	// ErrBackupUnsupported: Backup was called on a node whose store is
	// Redis, which is backed up as Redis is (docs/cluster.md).
	ErrBackupUnsupported = errors.New("backups are of the embedded store, and this node's store is redis: " +
		"back up the Redis server instead, its AOF or RDB files (see docs/cluster.md, \"Backups\")")
	// ErrWarming: Ready was called while the node still loads its stored
	// plugins after Open.
	ErrWarming = errors.New("still loading the stored plugins")
)

// Config configures a node.
type Config struct {
	// NodeID names the node in leases and history. Defaults to
	// Engine.NodeID, and to an id the engine generates when both are empty.
	NodeID string
	// DataDir holds the embedded store (DataDir/store), the plugin blobs
	// (DataDir/blobs) and the compilation cache (DataDir/cache); see "Data
	// directory" for the store file of earlier versions. Required.
	DataDir string
	// Store is "embedded" or "redis". Defaults to "embedded".
	Store string
	// RedisAddrs are the Redis servers of cluster mode (host:port): the
	// first holds the store, blobs, queue and bus; the locks live on all of
	// them (a Redlock quorum of len/2+1 when there are several).
	RedisAddrs []string
	// RedisCluster are seed addresses (host:port) of a Redis Cluster, the
	// other way to run cluster mode: one go-redis cluster client discovers
	// the slots' masters from any of them, follows MOVED and ASK, and
	// carries the store, blobs, queue, bus and locks, so that the cluster's
	// failover covers them all. The locks are then one Redlock vote: the
	// fencing tokens the store checks keep a lock lost in a failover from
	// letting a stale holder write (docs/cluster.md, "On a Redis
	// Cluster"). With Store "redis", set exactly one of RedisAddrs and
	// RedisCluster.
	RedisCluster []string
	// RedisWaitReplicas, when above 0, makes every write of the Redis
	// store wait until that many replicas of its master have it before it
	// is answered (Redis WAIT), so that a failover loses nothing the store
	// acknowledged; a write they do not confirm within RedisWaitTimeout
	// fails as not durable (weft.ErrUnavailable: the API answers 503, the
	// engine retries). 0 answers once the master applied a write.
	RedisWaitReplicas int
	// RedisWaitTimeout bounds a write's wait for the replicas, from 1ms to
	// a minute. Defaults to 1s.
	RedisWaitTimeout time.Duration
	// RedisShards divides the ready queue and the notifications about one
	// instance into that many shards, each under a hash tag of its own
	// (redisqueue.Config.Shards, notify.RedisConfig.Shards), so that the
	// masters of a Redis Cluster share them; an instance's items and
	// notifications go to its shard. Every node of a deployment must have
	// the same; more than 1 needs Redis 7.0. From 1 to partition.Max.
	// Defaults to 1: the queue under one tag, notifications on classic
	// pub/sub.
	RedisShards int
	// RedisPartitions divides the store into that many partitions, each
	// under a hash tag of its own, so that the masters of a Redis Cluster
	// share the commits (redisstore.OpenPartitioned; docs/cluster.md,
	// "Partitions"). It is fixed when the store is created: a node refuses
	// a store made with another number. 0 or 1, the default, keeps the
	// whole store under one tag (WithDefaults sets 1). Up to
	// partition.Max; more than 1 needs Redis 7.0.
	RedisPartitions int
	// redisHook, set by the node's own tests (export_test.go), sees every
	// command of the Redis Cluster client and of its nodes' clients.
	redisHook redis.Hook
	// WorkflowsDir is the directory Refresh reads definitions from. Empty
	// disables Refresh (ErrRefreshDisabled).
	WorkflowsDir string
	// QueueCapacity bounds the in-process ready queue; a full queue makes
	// pushes wait. Defaults to 10000.
	QueueCapacity int
	// Engine configures the engine; Open sets its Logger, its Observer
	// (the metrics, when Registerer is set) and, when NodeID is set, its
	// NodeID.
	Engine engine.Config
	// Plugins configures the plugin runtime. Its CacheDir defaults to
	// DataDir/cache and its Logger to the node's.
	Plugins plugins.Config
	// Registerer receives the node's metrics. Nil: no metrics.
	Registerer prometheus.Registerer
	// Tracing configures the node's traces (docs/observability.md,
	// "Traces"): Open builds the Tracer (none with the exporter "none",
	// the default) and hands it to the engine and the plugin runtime;
	// Close flushes it, within tracingShutdownTimeout.
	Tracing tracing.Config
}

// tracingShutdownTimeout bounds Close's flush of the spans still queued:
// a collector that is down must not hold a node's shutdown.
const tracingShutdownTimeout = 5 * time.Second

// WithDefaults returns c with every unset field set to its default.
func (c Config) WithDefaults() Config {
	if c.Store == "" {
		c.Store = StoreEmbedded
	}
	if c.QueueCapacity == 0 {
		c.QueueCapacity = 10000
	}
	if c.RedisWaitTimeout == 0 {
		c.RedisWaitTimeout = redisstore.DefaultWaitTimeout
	}
	if c.RedisShards == 0 {
		c.RedisShards = 1
	}
	if c.RedisPartitions == 0 {
		c.RedisPartitions = 1
	}
	if c.Plugins.CacheDir == "" && c.DataDir != "" {
		c.Plugins.CacheDir = filepath.Join(c.DataDir, "cache")
	}
	if c.NodeID != "" {
		c.Engine.NodeID = c.NodeID
	}
	return c
}

// ConfigError is a Config field with an impossible value. Field names it
// as Go does ("Store", "RedisAddrs[1]"), so that a caller that fills
// Config from settings of its own can name its setting (the host's
// configuration does). The engine's and the runtime's fields are theirs
// to judge (engine.ConfigError, plugins.ConfigError).
type ConfigError struct {
	// Field is the field's name.
	Field string
	// Message says what is wrong, naming fields as Field does.
	Message string
}

// Error is the message after the package's name.
func (e *ConfigError) Error() string { return "node: " + e.Message }

// Validate reports every field of c with an impossible value, each as a
// *ConfigError, joined. Open calls it on the result of WithDefaults; a
// caller that sets every field itself calls it on c as it is, so that a
// zero it chose is judged rather than replaced by a default.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.DataDir) == "" {
		bad("DataDir", "DataDir is required")
	}
	switch c.Store {
	case StoreEmbedded:
	case StoreRedis:
		switch {
		case len(c.RedisAddrs) > 0 && len(c.RedisCluster) > 0:
			bad("RedisCluster", "RedisAddrs and RedisCluster are both set: set RedisAddrs for independent Redis servers or RedisCluster for a Redis Cluster's seeds, not both")
		case len(c.RedisAddrs) == 0 && len(c.RedisCluster) == 0:
			bad("RedisAddrs", "Store %q needs at least one address in RedisAddrs or RedisCluster", c.Store)
		}
	default:
		bad("Store", "Store must be %q or %q, got %q", StoreEmbedded, StoreRedis, c.Store)
	}
	for i, a := range c.RedisAddrs {
		if err := checkHostPort(a); err != nil {
			bad(fmt.Sprintf("RedisAddrs[%d]", i), "RedisAddrs[%d] %v", i, err)
		}
	}
	for i, a := range c.RedisCluster {
		if err := checkHostPort(a); err != nil {
			bad(fmt.Sprintf("RedisCluster[%d]", i), "RedisCluster[%d] %v", i, err)
		}
	}
	if c.RedisWaitReplicas < 0 {
		bad("RedisWaitReplicas", "RedisWaitReplicas must not be negative, got %d", c.RedisWaitReplicas)
	}
	if c.RedisWaitReplicas > 0 && c.Store != StoreRedis {
		bad("RedisWaitReplicas", "RedisWaitReplicas is %d, but Store %q has no replicas to wait for (Store %q has)", c.RedisWaitReplicas, c.Store, StoreRedis)
	}
	// 0 is refused only where a wait would use it.
	if (c.RedisWaitReplicas > 0 || c.RedisWaitTimeout != 0) && (c.RedisWaitTimeout < time.Millisecond || c.RedisWaitTimeout > redisstore.MaxWaitTimeout) {
		bad("RedisWaitTimeout", "RedisWaitTimeout must be from 1ms to %s, got %s", redisstore.MaxWaitTimeout, c.RedisWaitTimeout)
	}
	if (c.Store == StoreRedis || c.RedisShards != 0) && (c.RedisShards < 1 || c.RedisShards > partition.Max) {
		bad("RedisShards", "RedisShards must be from 1 to %d, got %d", partition.Max, c.RedisShards)
	} else if c.RedisShards > 1 && c.Store != StoreRedis {
		bad("RedisShards", "RedisShards is %d, but Store %q has no Redis to divide (Store %q has)", c.RedisShards, c.Store, StoreRedis)
	}
	if c.RedisPartitions < 0 || c.RedisPartitions > partition.Max {
		bad("RedisPartitions", "RedisPartitions must be from 0 to %d, got %d", partition.Max, c.RedisPartitions)
	} else if c.RedisPartitions > 1 && c.Store != StoreRedis {
		bad("RedisPartitions", "RedisPartitions is %d, but Store %q has no Redis to divide (Store %q has)", c.RedisPartitions, c.Store, StoreRedis)
	}
	if c.QueueCapacity < 1 {
		bad("QueueCapacity", "QueueCapacity must be at least 1, got %d", c.QueueCapacity)
	}
	return errors.Join(errs...)
}

// checkHostPort accepts a Redis server's address, HOST:PORT.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be HOST:PORT, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("must have a port between 0 and 65535, got %q", port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("must have a host name or IP address, got %q", host)
	}
	return nil
}

// Node is one running host. Its methods are safe for concurrent use.
type Node struct {
	cfg   Config
	log   *slog.Logger
	bus   engine.Bus
	store store.Store
	// local is the store in embedded mode, nil in cluster mode.
	local *embedded.Store
	rt    *plugins.Runtime
	// tracer makes the node's spans; nil when tracing is off.
	tracer *tracing.Tracer
	// limiter keeps the rate limits' budgets: in process on the
	// embedded store, in Redis in a cluster, so that every node shares
	// them.
	limiter rateLimiter
	queue   queue.Queue
	engine  *engine.Engine
	// closers release the cluster parts, in order, after the store.
	closers []func() error
	// pings check the lock backends in Ready.
	pings   []func(context.Context) error
	metrics *metrics.Metrics
	// bg loads announced plugin versions until Close.
	bg background
	// warm is the loading of the stored plugins that Open starts.
	warm warmUp
	// candidates are the modules loaded for replays and shadow runs
	// without being stored.
	candidates candidates

	closeOnce sync.Once
	closeErr  error
}

// Open builds a node from cfg: it opens the store, the blob store and the
// plugin runtime, and creates the engine. It starts loading (compiling),
// in the background, every version that an unfinished instance pins and
// the current version of every stored plugin, and returns without waiting
// for them: compiling takes seconds per plugin, and a host that has many
// would not serve for as long. Until they are loaded, Ready says so
// (ErrWarming) and Warmed is open; a call that needs a version not loaded
// yet loads it itself, beside the warm-up, which loads one version at a
// time, so that the call waits at most for the one compile under way.
// In cluster mode it also loads in the background, from Open until Close,
// every version a node announces it stored. Run starts the engine; Close
// releases everything.
//
// A stored plugin whose module cannot be loaded (its blob is missing or
// corrupt) is logged as an error and does not stop Open: the instances that
// use it fail their attempts with a host error and retry, while the rest of
// the host serves.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (_ *Node, err error) {
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()

	var (
		blobs plugins.Blobs
		locks lock.Locker
	)
	switch cfg.Store {
	case StoreRedis:
		if blobs, locks, err = n.openRedis(ctx); err != nil {
			return nil, err
		}
	default:
		// Through a variable of the concrete type: a nil *Store in the
		// interface field would be a store that Close calls.
		var st *embedded.Store
		if st, err = n.openEmbedded(); err != nil {
			return nil, err
		}
		n.store, n.local = st, st
		if blobs, err = blobfile.New(filepath.Join(cfg.DataDir, "blobs")); err != nil {
			return nil, fmt.Errorf("node: opening the blob store: %w", err)
		}
		n.queue = memqueue.New(cfg.QueueCapacity)
		locks = local.New(local.Config{Logger: log})
		n.limiter = locallimit.New(locallimit.Config{})
	}
	if cfg.Registerer != nil {
		if n.metrics, err = metrics.New(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
	}
	// The engine and the API get the store timed by the metrics.
	if err := n.instrumentStore(); err != nil {
		return nil, err
	}
	// The steps' rate limits share the node's limiter with the host
	// rules' (their keys apart): in Redis, so a cluster shares them.
	var limiter plugins.RateLimiter = n.limiter
	if n.metrics != nil {
		limiter = metrics.RateLimiter(n.metrics, n.limiter)
	}
	// The engine's id names the node in the traces' resource, so it is
	// decided here when the configuration leaves it to the engine.
	if n.cfg.Engine.NodeID == "" {
		n.cfg.Engine.NodeID = n.cfg.Engine.WithDefaults().NodeID
	}
	if n.tracer, err = tracing.New(ctx, cfg.Tracing, []attribute.KeyValue{semconv.ServiceInstanceID(n.cfg.Engine.NodeID)}, log); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	pcfg := cfg.Plugins
	if pcfg.Logger == nil {
		pcfg.Logger = log
	}
	// Only a Tracer that is on: a nil *Tracer's Provider is a nil
	// interface, and the runtime then adds no header and no span.
	if pcfg.Tracer == nil && n.tracer != nil {
		pcfg.Tracer = n.tracer.Provider()
	}
	if pcfg.HTTP.RateLimiter == nil {
		pcfg.HTTP.RateLimiter = limiter
	}
	if n.rt, err = plugins.New(ctx, pcfg, blobs); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	// Loads outlive Open's context; Close stops them.
	n.bg.ctx, n.bg.cancel = context.WithCancel(context.WithoutCancel(ctx))
	n.bg.slots = make(chan struct{}, runtime.GOMAXPROCS(0))

	var invoker engine.Plugins = n.rt
	if n.metrics != nil {
		if err := n.metrics.WatchPools(n.rt); err != nil {
			return nil, fmt.Errorf("node: metrics: %w", err)
		}
		if err := n.metrics.WatchQueue(n.queue); err != nil {
			return nil, fmt.Errorf("node: metrics: %w", err)
		}
		invoker = metrics.Plugins(n.metrics, n.rt)
		locks = metrics.Locker(n.metrics, locks)
	}

	ecfg := n.cfg.Engine
	ecfg.Logger = log
	if ecfg.Tracer == nil {
		ecfg.Tracer = n.tracer
	}
	if ecfg.Limiter == nil {
		ecfg.Limiter = limiter
	}
	if n.bus != nil {
		ecfg.Bus = n.bus
	}
	if n.metrics != nil {
		ecfg.Observer = n.metrics
	}
	if n.engine, err = engine.New(ecfg, n.store, locks, n.queue, invoker); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if n.metrics != nil {
		if err := n.metrics.WatchHeartbeats(n.engine.HeartbeatStats); err != nil {
			return nil, fmt.Errorf("node: metrics: %w", err)
		}
		if err := n.metrics.WatchConcurrency(n.engine.ConcurrencyKeys); err != nil {
			return nil, fmt.Errorf("node: metrics: %w", err)
		}
	}
	// Listening first: a version stored while the stored ones are listed
	// is then loaded either way.
	if err := n.listen(ctx); err != nil {
		return nil, err
	}
	if err := n.startWarmUp(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// now is the engine's clock, for the node's logs.
func (n *Node) now() time.Time {
	if n.cfg.Engine.Now != nil {
		return n.cfg.Engine.Now()
	}
	return time.Now()
}

// TracerProvider is the provider of the node's spans, for the faces that
// make spans of their own (the API's requests); nil when tracing is off.
func (n *Node) TracerProvider() trace.TracerProvider {
	if n.tracer == nil {
		return nil
	}
	return n.tracer.Provider()
}

// JoinCallerTrace marks ctx so that an instance started under it is a
// child of ctx's span, in its caller's trace, rather than a trace of its
// own linked to it: what a request that carried a W3C traceparent asks
// (docs/observability.md, "Who is the parent").
func (n *Node) JoinCallerTrace(ctx context.Context) context.Context { return tracing.Join(ctx) }

// Run runs the engine until ctx ends and returns once its workers and
// background loops stopped.
func (n *Node) Run(ctx context.Context) error { return n.engine.Run(ctx) }

// Close stops the background loads, closes the plugin runtime (waiting for
// calls in flight) and the store. Call it after Run returned. Calling it
// again returns the first result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.stopBackground()
		var errs []error
		if n.rt != nil {
			errs = append(errs, n.rt.Close(context.Background()))
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
		for _, c := range n.closers {
			errs = append(errs, c())
		}
		// Last: the runtime's and the engine's last spans are queued by
		// now. A collector that does not take them in time loses them.
		if n.tracer != nil {
			ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
			if err := n.tracer.Shutdown(ctx); err != nil {
				n.log.Warn("tracing: the spans still queued were not all exported before the node closed", "node", n.cfg.Engine.NodeID, "err", err)
			}
			cancel()
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// ObserveHTTPRequest records one answered HTTP request in the node's
// metrics (nothing when Config.Registerer was nil). route is the
// registered pattern (such as /v1/instances/:id), or "unmatched" for
// requests that matched no route, so that scanners cannot grow the label
// set.
func (n *Node) ObserveHTTPRequest(method, route string, status int, d time.Duration) {
	if n.metrics != nil {
		n.metrics.HTTPRequest(method, route, status, d)
	}
}

// ProtectListener makes addr, an address the host serves its API on,
// unreachable by every plugin's outbound requests, whatever their grants
// (plugins.Runtime.ProtectListener). Call it once listening, before Run.
func (n *Node) ProtectListener(addr net.Addr) error { return n.rt.ProtectListener(addr) }

// Ready reports whether the node can serve: nil when it has loaded the
// stored plugins (ErrWarming until then), the store answers a read and,
// in cluster mode, a quorum of the lock servers answers (on a Redis
// Cluster, every master: each holds a share of the slots). An embedded store
// that a write found corrupt is not ready (it refuses every write;
// embedded.ErrBroken).
func (n *Node) Ready(ctx context.Context) error {
	if err := n.warm.err(); err != nil {
		return err
	}
	if _, _, err := n.store.ListDefinitions(ctx, "", 1); err != nil {
		return fmt.Errorf("node: store not ready: %w", err)
	}
	if n.local != nil {
		if err := n.local.Err(); err != nil {
			return fmt.Errorf("node: store not ready: %w", err)
		}
	}
	var failed []error
	for _, ping := range n.pings {
		if err := ping(ctx); err != nil {
			failed = append(failed, err)
		}
	}
	if len(n.pings) > 0 && len(failed) > len(n.pings)-(len(n.pings)/2+1) {
		what := "lock backend"
		if len(n.cfg.RedisCluster) > 0 {
			what = "redis cluster" // one ping for every master: store, queue and locks
		}
		return fmt.Errorf("node: %s not ready: %w", what, errors.Join(failed...))
	}
	return nil
}

// CheckBackup checks that the file at path, a backup taken with Backup
// say, is a store that a node would migrate when it finds it as
// DataDir/weft.db: a bbolt file whose pages are all consistent, of this
// build's schema. It opens nothing for writing; every error names the
// file.
func CheckBackup(path string) error { return embedded.CheckFile(path) }

// Backup is a copy of the embedded store as it was when Node.Backup began:
// a single bbolt file (embedded.Backup), which a node migrates when it
// finds it as DataDir/weft.db. It is written beside the store as the
// backup begins and removed by Close: close it promptly.
type Backup interface {
	// Size is the copy's length in bytes.
	Size() int64
	// Spool makes WriteTo read a file rather than hold the store (a
	// slow reader then holds no writer back). A backup of the Pebble
	// store is spooled from the start: Spool does nothing then.
	Spool() error
	io.WriterTo
	// Close removes the copy.
	Close() error
}

// Backup begins a backup of the embedded store as it is now. It fails with
// ErrBackupUnsupported in cluster mode.
func (n *Node) Backup(ctx context.Context) (Backup, error) {
	if n.local == nil {
		return nil, fmt.Errorf("node: %w", ErrBackupUnsupported)
	}
	b, err := n.local.Backup(ctx)
	if err != nil {
		return nil, fmt.Errorf("node: backup: %w", err)
	}
	return b, nil
}

// Refresh reloads definitions from Config.WorkflowsDir (engine.Refresh):
// all of them, or those named.
func (n *Node) Refresh(ctx context.Context, names []string) (*weft.RefreshResult, error) {
	if n.cfg.WorkflowsDir == "" {
		return nil, ErrRefreshDisabled
	}
	return n.engine.Refresh(ctx, n.cfg.WorkflowsDir, names)
}

// PutPlugin validates and compiles wasm, stores its bytes by content hash
// and records it as the current version of the plugin name. created is
// false when that content already was the current version. In cluster mode
// it then announces the version, and every node compiles it in the
// background (a node that misses the announcement compiles it at its next
// start or first call).
//
// # Errors
//
//   - An error matching ErrInvalidName for a name abi.ValidName refuses.
//   - A *plugins.ValidationError (matching plugins.ErrInvalid) listing every
//     reason the module was refused; nothing is stored then.
//   - Store errors, wrapped.
func (n *Node) PutPlugin(ctx context.Context, name string, wasm []byte) (rec *weft.PluginRecord, created bool, err error) {
	if !abi.ValidName(name) {
		return nil, false, fmt.Errorf("node: plugin name %q: %w: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter",
			name, ErrInvalidName, abi.MaxNameLen)
	}
	m, err := n.rt.Load(ctx, wasm)
	if err != nil {
		return nil, false, err
	}
	acts := make([]string, 0, len(m.Activities))
	for _, a := range m.Activities {
		acts = append(acts, a.Name)
	}
	created, err = n.store.PutPlugin(ctx, weft.PluginRecord{Name: name, Version: m.Version, Size: int64(m.Size), Activities: acts, Needs: m.Needs})
	if err != nil {
		return nil, false, fmt.Errorf("node: recording plugin %s version %s: %w", name, m.Version, err)
	}
	if n.metrics != nil {
		n.metrics.TrackPlugin(name, m.Version)
	}
	n.announce(ctx, name, m.Version)
	p, err := n.store.GetPlugin(ctx, name)
	if err != nil {
		return nil, false, fmt.Errorf("node: reading plugin %s back: %w", name, err)
	}
	if created {
		n.log.Info("plugin version stored", "plugin", name, "version", m.Version, "size", m.Size, "activities", len(acts))
	}
	return &p.Current, created, nil
}

// GetPlugin returns a plugin's current version and history, or an error
// matching weft.ErrNotFound.
func (n *Node) GetPlugin(ctx context.Context, name string) (*weft.Plugin, error) {
	return n.store.GetPlugin(ctx, name)
}

// ListPlugins returns a page of current plugin versions ordered by name and
// the next cursor ("" after the last page).
func (n *Node) ListPlugins(ctx context.Context, cursor string, limit int) ([]weft.PluginRecord, string, error) {
	return n.store.ListPlugins(ctx, cursor, limit)
}

// DeletePlugin removes a plugin and its history from the catalogue and
// unloads its versions. It fails with weft.ErrNotFound when there is no
// such plugin, and with a *weft.InUseError while a non-terminal instance
// pins one of its versions or, unless force is set, while a saved
// workflow calls one of its activities (it would fail at its next run).
//
// # Notes
//
// The module bytes stay in the blob store: blobs are shared by content
// hash, another plugin name may hold the same module, and an exported
// instance imported later may pin the version again. An unloaded version
// that is still used is loaded again from its blob on its next call.
func (n *Node) DeletePlugin(ctx context.Context, name string, force bool) error {
	p, err := n.store.GetPlugin(ctx, name)
	if err != nil {
		return err
	}
	if !force {
		users, err := n.workflowsUsing(ctx, name)
		if err != nil {
			return err
		}
		if len(users) > 0 {
			return &weft.InUseError{Plugin: name, Workflows: users}
		}
	}
	if err := n.store.DeletePlugin(ctx, name); err != nil {
		return err
	}
	for _, v := range p.Versions {
		n.rt.Unload(ctx, v.Version)
		if n.metrics != nil {
			n.metrics.UntrackPlugin(name, v.Version)
		}
	}
	n.log.Info("plugin deleted", "plugin", name, "versions", len(p.Versions))
	return nil
}

// workflowsUsing returns the saved workflows (their current versions) with
// a step that calls an activity of the plugin, at most
// weft.MaxInUseListed of them.
func (n *Node) workflowsUsing(ctx context.Context, plugin string) ([]string, error) {
	var users []string
	for cursor := ""; ; {
		defs, next, err := n.store.ListDefinitions(ctx, cursor, 100)
		if err != nil {
			return nil, err
		}
		for _, d := range defs {
			def, err := definition.ParseSaved(d.Source)
			if err != nil {
				continue // saved before a rule changed: it calls nothing that runs
			}
			uses := false
			def.Walk(func(_ string, s *definition.Step) bool {
				uses = s.Activity != nil && s.Activity.Plugin == plugin
				return !uses
			})
			if uses {
				if users = append(users, d.Name); len(users) == weft.MaxInUseListed {
					return users, nil
				}
			}
		}
		if next == "" {
			return users, nil
		}
		cursor = next
	}
}
