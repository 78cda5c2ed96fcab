package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/tuple"
)

// Config configures a Store. Client is required; Open fills every other
// unset field.
type Config struct {
	// Client is the connection to Redis (a *redis.Client, or a
	// *redis.ClusterClient: every key of a store has one hash slot, see the
	// package doc). The caller owns it: Close does not close it. Required.
	Client redis.UniversalClient

	// Prefix starts every key of the store, so that several stores share
	// one Redis; it must not contain '{' or '}' (the store wraps it in a
	// hash tag). Defaults to "weft:".
	Prefix string

	// Now is the store's clock for CreatedAt, UpdatedAt, stimulus times
	// and the expiry checks of RenewLeases, PendingStimuli and Commit's
	// delivered stimulus. Scripts get its readings as arguments: Redis's
	// own TIME decides nothing. Safe for concurrent use. Defaults to
	// time.Now.
	Now func() time.Time

	// Logger receives the store's logs (opening, the AOF check). Defaults
	// to slog.Default().
	Logger *slog.Logger

	// DeliveredRetention is how long a delivered stimulus's id (and
	// outcome) is remembered for idempotency after delivery, at least
	// until its ExpiresAt. Defaults to 24h.
	DeliveredRetention time.Duration

	// DeadLetterRetention is how long a dead stimulus stays in the dead
	// letters (and its id is remembered) after it expired. Defaults to
	// 7 days.
	DeadLetterRetention time.Duration

	// WaitReplicas, when above 0, makes every write wait (Redis WAIT)
	// until that many replicas of the store's master have it before it is
	// answered; a write they do not all confirm within WaitTimeout fails
	// with an error matching store.ErrNotDurable (wait.go). 0, the
	// default, answers once the master has applied the write: a failover
	// may then lose writes already answered. Needs Client to be a
	// *redis.Client or a *redis.ClusterClient.
	WaitReplicas int

	// WaitTimeout bounds a write's wait for the replicas. Defaults to 1s.
	WaitTimeout time.Duration

	// tag, when set, is the whole hash tag of the store's keys (such as
	// "{weft:3~17}"), in place of "{" + Prefix + "}": a partition's
	// (role.go).
	tag string
	// role is what the store is to a partitioned store (role.go).
	role role
}

// Defaults of Config.
const (
	DefaultPrefix              = "weft:"
	DefaultDeliveredRetention  = 24 * time.Hour
	DefaultDeadLetterRetention = 7 * 24 * time.Hour
	DefaultWaitTimeout         = time.Second
	// MaxWaitTimeout bounds WaitTimeout: a write holds its connection
	// while it waits.
	MaxWaitTimeout = time.Minute
)

// WithDefaults returns a copy of c with every unset field but Client set
// to its default.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.DeliveredRetention == 0 {
		c.DeliveredRetention = DefaultDeliveredRetention
	}
	if c.DeadLetterRetention == 0 {
		c.DeadLetterRetention = DefaultDeadLetterRetention
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("redisstore: Client is required")
	case strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("redisstore: Prefix %q must not contain '{' or '}'", c.Prefix)
	case c.DeliveredRetention < 0:
		return fmt.Errorf("redisstore: DeliveredRetention must not be negative, got %s", c.DeliveredRetention)
	case c.DeadLetterRetention < 0:
		return fmt.Errorf("redisstore: DeadLetterRetention must not be negative, got %s", c.DeadLetterRetention)
	case c.WaitReplicas < 0:
		return fmt.Errorf("redisstore: WaitReplicas must not be negative, got %d", c.WaitReplicas)
	case c.WaitTimeout < time.Millisecond || c.WaitTimeout > MaxWaitTimeout:
		// WAIT counts in milliseconds; 0 would wait for ever.
		return fmt.Errorf("redisstore: WaitTimeout must be from 1ms to %s, got %s", MaxWaitTimeout, c.WaitTimeout)
	}
	if c.WaitReplicas > 0 {
		switch c.Client.(type) {
		case *redis.Client, *redis.ClusterClient:
		default:
			return fmt.Errorf("redisstore: WaitReplicas needs Client to be a *redis.Client or a *redis.ClusterClient, not a %T", c.Client)
		}
	}
	return nil
}

// schemaVersion is stored under the schema key; Open migrates a store of
// schema 1 or 2 and refuses other values.
//
// Schema 2 moved the leases out of the instance hashes into the l hash
// and the lz index, so that a renewal reads and writes one hash for a
// whole batch, and replaced the sets x:<id> of index memberships by the
// fields they follow from (pn, da). Schema 3 dropped the indexes of all
// instances and of each workflow's (ix:all, ix:w:<wf>), which are unions
// of the status indexes: a create writes two index entries fewer.
const schemaVersion = "3"

// migrateBatch is how many instances one call of a migration script
// (migrateScript, unionsScript) moves.
const migrateBatch = 1000

// Store is the Redis store. It implements store.Store and is safe for
// concurrent use.
type Store struct {
	c      redis.UniversalClient
	cfg    Config
	log    *slog.Logger
	p      string // key prefix with its hash tag: "{" + Prefix + "}"
	addr   string // for error messages
	closed atomic.Bool

	catalog catalogCache // latest definitions and current plugins, by generation

	slotLocks slotLocks // serializes UpdateSlots per key within the process (slots.go)
}

var _ store.Store = (*Store)(nil)

// Open checks the connection (PING), the AOF setting and the schema
// version of the store under cfg.Prefix, writing the version into an
// empty store.
//
// # Errors
//
// Every error names the Redis address: an invalid configuration, a server
// that does not answer, or keys under the prefix written by another schema
// version.
//
// # Upgrades
//
// Open migrates a store of an older schema (doc.go's layout names each)
// before it returns. Nodes of the older build must be stopped first: they
// check the schema only when they open the store, and would go on writing
// the older layout. Opened as the catalog of a partitioned store
// (OpenPartitioned), a whole store is marked as moving into partitions
// (its schema key holds movingSchema) before Open returns, and
// OpenPartitioned moves its instances (migratepartitions.go); a whole
// Open refuses a store so marked.
//
// # Notes
//
// The store assumes AOF (appendonly yes). When CONFIG GET says it is off,
// on the server or on any node of a Redis Cluster, Open logs a warning
// and goes on; when CONFIG is disabled (renamed, or refused by an ACL), it
// logs at debug level. A partition's Open skips the check: the catalog's,
// which OpenPartitioned opens first, asks the same servers.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{c: cfg.Client, cfg: cfg, log: cfg.Logger, p: "{" + cfg.Prefix + "}", addr: addrOf(cfg.Client)}
	if cfg.tag != "" {
		s.p = cfg.tag
	}
	if err := s.c.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: open %s: ping: %w", s.addr, err)
	}
	if cfg.role != rolePartition {
		s.checkAOF(ctx)
	}
	key := s.p + "schema"
	want := schemaVersion
	if cfg.role == roleCatalog {
		want = partitionedSchema
	}
	if err := s.c.SetNX(ctx, key, want, 0).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: open %s: writing %s: %w", s.addr, key, err)
	}
	v, err := s.c.Get(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("redisstore: open %s: reading %s: %w", s.addr, key, err)
	}
	switch {
	case v == partitionedSchema && want != v:
		return nil, fmt.Errorf("redisstore: open %s: the store under %s is divided into partitions: open it with them (redis.partitions)", s.addr, s.p)
	case v == movingSchema && want != partitionedSchema:
		return nil, fmt.Errorf("redisstore: open %s: the store under %s is being moved into partitions (schema %s): open it with them (redis.partitions), which finishes the move", s.addr, s.p, v)
	}
	if v == "1" || v == "2" {
		if err := s.migrate(ctx, v); err != nil {
			return nil, fmt.Errorf("redisstore: open %s: migrating schema %s to %s: %w", s.addr, v, schemaVersion, err)
		}
		v = schemaVersion
	}
	if want == partitionedSchema && v == schemaVersion {
		// A whole store opened as a partitioned store's catalog: its tag
		// becomes the catalog's, and OpenPartitioned moves its instances
		// into the partitions (migratepartitions.go). The mark makes every
		// whole Open refuse it from now on, this build's and older ones.
		if err := s.write(ctx, markSchemaScript, s.args(schemaVersion, movingSchema)).Err(); err != nil {
			return nil, fmt.Errorf("redisstore: open %s: marking %s as moving into partitions: %w", s.addr, key, err)
		}
		if v, err = s.c.Get(ctx, key).Result(); err != nil {
			return nil, fmt.Errorf("redisstore: open %s: reading %s: %w", s.addr, key, err)
		}
	}
	if want == partitionedSchema && v == movingSchema {
		v = want // OpenPartitioned finishes the move before it answers
	}
	if v != want {
		return nil, fmt.Errorf("redisstore: open %s: key %s holds schema version %q, this build reads %q", s.addr, key, v, want)
	}
	// A catalog generation for a store no catalog change has set one in
	// (catalogcache.go).
	if err := s.c.SetNX(ctx, s.p+"cg", newGeneration(), 0).Err(); err != nil {
		return nil, fmt.Errorf("redisstore: open %s: writing %scg: %w", s.addr, s.p, err)
	}
	s.log.Debug("store opened", "addr", s.addr, "prefix", cfg.Prefix)
	return s, nil
}

// migrate moves a store of schema from (1 or 2) to schemaVersion, a batch
// of instances per script call and schema, marking each schema reached.
// Each call is idempotent, so that nodes that open the store at once, or
// an Open that fails halfway and is run again, migrate it once.
func (s *Store) migrate(ctx context.Context, from string) error {
	s.log.Info("redisstore: migrating the store to schema "+schemaVersion, "addr", s.addr, "prefix", s.cfg.Prefix, "from", from)
	type step struct {
		from, to string
		page     *redis.Script
	}
	steps := []step{{"1", "2", migrateScript}, {"2", "3", unionsScript}}
	i := slices.IndexFunc(steps, func(st step) bool { return st.from == from })
	if i < 0 {
		return fmt.Errorf("no migration from schema %q", from)
	}
	for _, st := range steps[i:] {
		after := "-"
		for {
			last, err := s.write(ctx, st.page, s.args(after, migrateBatch)).Text()
			if err != nil {
				return fmt.Errorf("schema %s to %s: instances after %q: %w", st.from, st.to, after, err)
			}
			if last == "" {
				break
			}
			after = "(" + last
		}
		if err := s.write(ctx, markSchemaScript, s.args(st.from, st.to)).Err(); err != nil {
			return fmt.Errorf("schema %s to %s: marking: %w", st.from, st.to, err)
		}
	}
	return nil
}

// checkAOF logs a warning when a server the store writes to does not
// keep an append-only file: acknowledged writes would then not survive
// its restart. On a Redis Cluster it asks every node, masters and
// replicas: a keyless CONFIG GET goes to one node picked at random, a
// partitioned store's keys spread over every master, and a replica
// becomes a master on failover. One warning names every node without AOF.
func (s *Store) checkAOF(ctx context.Context) {
	var (
		mu  sync.Mutex
		off []string // addresses without AOF
	)
	check := func(ctx context.Context, c redis.Cmdable, addr string) {
		res, err := c.ConfigGet(ctx, "appendonly").Result()
		if err != nil {
			s.log.Debug("redisstore: cannot read appendonly (CONFIG disabled?); durability is not checked", "addr", addr, "err", err)
			return
		}
		if v, ok := res["appendonly"]; ok && v != "yes" {
			mu.Lock()
			off = append(off, addr)
			mu.Unlock()
		}
	}
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error {
			check(ctx, n, n.Options().Addr)
			return nil
		}); err != nil {
			s.log.Debug("redisstore: cannot list the cluster's nodes; durability is not checked", "addr", s.addr, "err", err)
		}
	} else {
		check(ctx, s.c, s.addr)
	}
	if len(off) > 0 {
		slices.Sort(off)
		s.log.Warn("redisstore: Redis runs without AOF (appendonly no): acknowledged writes are lost when it restarts", "addr", strings.Join(off, ","))
	}
}

func addrOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// Addr returns the Redis address the store names in its errors.
func (s *Store) Addr() string { return s.addr }

// Close marks the store closed: later calls return weft.ErrClosed. It
// does not close the client, which the caller owns. Closing twice does
// nothing.
func (s *Store) Close() error {
	if s.closed.CompareAndSwap(false, true) {
		s.log.Debug("store closed", "addr", s.addr, "prefix", s.cfg.Prefix)
	}
	return nil
}

// begin returns the error a call must return before doing anything: the
// context's, or ErrClosed.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("redisstore: %s: %w", s.addr, weft.ErrClosed)
	}
	return nil
}

// writeCtx is the context of a write that has begun: it is not abandoned
// when the caller's context ends, so that a failed call means nothing was
// written (store.Store's contract). The client's timeouts bound it.
func writeCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// fail wraps a Redis error of operation op on what (an id or name),
// naming the address; a closed client is weft.ErrClosed and a done
// context returns ctx.Err().
func (s *Store) fail(ctx context.Context, op, what string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return ctxErr
	}
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstore: %s %q on %s: %w", op, what, s.addr, weft.ErrClosed)
	}
	if unavailable(err) {
		return fmt.Errorf("redisstore: %s %q on %s: %w: %w", op, what, s.addr, weft.ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %s %q on %s: %w", op, what, s.addr, err)
}

// unavailable reports whether err says the server cannot be reached or
// cannot serve now, rather than that the call was wrong: a network error
// (a refused or lost connection, a timeout: syscall errors are net.Errors
// too), no free connection in the pool, a server loading its data,
// read-only, or out of clients, or a cluster's slot that moved or is
// moving (MOVED, ASK, TRYAGAIN, CLUSTERDOWN).
func unavailable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsMaxClientsError(err) ||
		// A cluster node's redirection, which reaches a caller only from
		// a connection of the store's own (wait.go): the slot moved.
		moved(err)
}

// now is the configured clock in UTC, without its monotonic reading.
func (s *Store) now() time.Time { return s.cfg.Now().UTC().Round(0) }

// Times in keys and sorted-set members are 16 lowercase hex digits of the
// Unix nanoseconds with the sign bit flipped: fixed width, so byte order
// is time order, and exact. Times outside what int64 nanoseconds hold
// (before 1678, after 2262) are clamped.
var (
	minTime = time.Unix(0, -1<<63).UTC()
	maxTime = time.Unix(0, 1<<63-1).UTC()
)

func hexTime(t time.Time) string {
	switch {
	case t.Before(minTime):
		t = minTime
	case t.After(maxTime):
		t = maxTime
	}
	return fmt.Sprintf("%016x", uint64(t.UnixNano())^(1<<63))
}

func parseHexTime(h string) (time.Time, error) {
	if len(h) != 16 {
		return time.Time{}, fmt.Errorf("bad time %q", h)
	}
	u, err := strconv.ParseUint(h, 16, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad time %q", h)
	}
	return time.Unix(0, int64(u^(1<<63))).UTC(), nil
}

// tup appends the encoding (internal/store/tuple) of the tuple strs to b.
func tup(b []byte, strs ...string) []byte {
	for _, s := range strs {
		b = tuple.AppendString(b, s)
	}
	return b
}

// untup decodes one tuple component at the front of b.
func untup(b string) (s, rest string, ok bool) { return tuple.ReadString(b) }

// prefixEnd returns the exclusive upper bound of the members that start
// with the tuple encoding p.
func prefixEnd(p []byte) string { return string(tuple.PrefixEnd(p)) }
