package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Config configures a Store. The zero value is usable: Open fills every
// unset field.
type Config struct {
	// Logger receives the store's logs (opening, closing). Defaults to
	// slog.Default().
	Logger *slog.Logger

	// Now is the clock for CreatedAt, UpdatedAt, stimulus times and the
	// expiry checks of RenewLeases, PendingStimuli and Commit's delivered
	// stimulus. It is called from concurrent writes and reads, so it must
	// be safe for concurrent use. Defaults to time.Now.
	Now func() time.Time

	// MaxBatchSize is how many writes share a transaction and fsync at
	// most (group commit, see doc.go). Defaults to 500.
	MaxBatchSize int

	// OpenTimeout bounds how long Open waits for the file lock held by
	// another process using the same file. Defaults to 5s.
	OpenTimeout time.Duration

	// DeliveredRetention is how long a delivered stimulus's id (and
	// outcome) is remembered for idempotency after delivery, at least
	// until its ExpiresAt. Defaults to 24h.
	DeliveredRetention time.Duration

	// DeadLetterRetention is how long a dead stimulus stays in the dead
	// letters (and its id is remembered) after it expired. Defaults to
	// 7 days.
	DeadLetterRetention time.Duration

	// Engine is the key-value engine Open uses at its path: EngineBolt (a
	// bbolt file) or EnginePebble (a Pebble directory). See "Engines" in
	// the package documentation. Defaults to EnginePebble, the host's
	// store; EngineBolt opens the files of older builds and backups.
	Engine Engine
}

// Engine names the key-value engine under the store: the store's logic
// and data are the same on both, the files are not (Migrate copies a bbolt
// file into a Pebble directory).
type Engine string

// Engines of Config.Engine.
const (
	// EngineBolt keeps the store in one bbolt file: two fdatasyncs a
	// commit.
	EngineBolt Engine = "bolt"
	// EnginePebble keeps the store in a Pebble directory: one WAL
	// fdatasync a commit.
	EnginePebble Engine = "pebble"
)

// Defaults of Config.
const (
	DefaultMaxBatchSize        = 500
	DefaultOpenTimeout         = 5 * time.Second
	DefaultDeliveredRetention  = 24 * time.Hour
	DefaultDeadLetterRetention = 7 * 24 * time.Hour
)

// WithDefaults returns a copy of c with every unset field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = DefaultOpenTimeout
	}
	if c.DeliveredRetention == 0 {
		c.DeliveredRetention = DefaultDeliveredRetention
	}
	if c.DeadLetterRetention == 0 {
		c.DeadLetterRetention = DefaultDeadLetterRetention
	}
	if c.Engine == "" {
		c.Engine = EnginePebble
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.MaxBatchSize < 0:
		return fmt.Errorf("embedded: MaxBatchSize must not be negative, got %d", c.MaxBatchSize)
	case c.OpenTimeout < 0:
		return fmt.Errorf("embedded: OpenTimeout must not be negative, got %s", c.OpenTimeout)
	case c.DeliveredRetention < 0:
		return fmt.Errorf("embedded: DeliveredRetention must not be negative, got %s", c.DeliveredRetention)
	case c.DeadLetterRetention < 0:
		return fmt.Errorf("embedded: DeadLetterRetention must not be negative, got %s", c.DeadLetterRetention)
	case c.Engine != EngineBolt && c.Engine != EnginePebble:
		return fmt.Errorf("embedded: Engine must be %q or %q, got %q", EngineBolt, EnginePebble, c.Engine)
	}
	return nil
}

// schemaVersion is stored in the meta bucket; Open refuses other values.
// Buckets added without changing what the others hold (the inbox, the
// grants, the delete-after index, the schedules, the slots, the search
// index and registry, the batches, the workflow pauses, the tapes) keep
// the version: Open creates them in a file written before they existed.
// (Instances finished before the delete-after index existed have no
// DeleteAfter, and instances written before search attributes have none,
// so an empty index is what such a file implies. The index of tapes by
// plugin is the exception: Open fills it from the tapes it finds.)
//
// Version 2 frames instance records (record.go): a build that reads only
// version 1 would find them corrupt, so it refuses the store (a backup of
// this build included) at Open. A store of version 1 opens here: its
// records are all JSON, read as they are, and Open marks it version 2.
//
// Version 3 writes the history entries of a commit under one key
// (history.go): a build of version 2 would find them corrupt. A store of
// version 1 or 2 opens here: its entries, one per key, are read as they
// are, and Open marks it version 3.
const schemaVersion = "3"

// readableSchema reports whether this build reads a store of version v.
func readableSchema(v string) bool { return v == schemaVersion || v == "2" || v == "1" }

// Bucket names. See doc.go for the layout.
var (
	bMeta       = []byte("meta")
	bInst       = []byte("instances")
	bState      = []byte("state")
	bHist       = []byte("history")
	bBookmarks  = []byte("bookmarks")
	bBmIndex    = []byte("bookmarks_by_event")
	bTimers     = []byte("timers")
	bTimersDue  = []byte("timers_by_due")
	bIxAll      = []byte("instances_by_created")
	bIxWf       = []byte("instances_by_workflow")
	bIxStatus   = []byte("instances_by_status")
	bIxWfStatus = []byte("instances_by_workflow_status")
	bLeases     = []byte("leases_by_expiry")
	bPins       = []byte("plugin_pins")
	bStim       = []byte("stimuli")
	bStimQueue  = []byte("stimuli_queued")
	bStimExp    = []byte("stimuli_by_expiry")
	bStimDead   = []byte("stimuli_dead")
	bStimForget = []byte("stimuli_by_forget")
	bDefs       = []byte("definitions")
	bDefLatest  = []byte("definitions_latest")
	bDefSeq     = []byte("definitions_seq")
	bPlugins    = []byte("plugins")
	bInbox      = []byte("inbox")
	bInboxIDs   = []byte("inbox_ids")
	bBeats      = []byte("heartbeats")
	bBeatsOf    = []byte("heartbeats_of") // instance id → nothing, instances with heartbeats only
	bLease      = []byte("leases")
	bInboxWait  = []byte("inbox_waiting") // instance id → since (8 bytes)
	bInboxWaitX = []byte("inbox_waiting_by_time")
	bGrants     = []byte("grants")     // plugin name → grants
	bGrantSeq   = []byte("grants_seq") // plugin name → highest revision ever
	bExpiry     = []byte("instances_by_delete_after")
	bSched      = []byte("schedules")         // id → schedule + last event seq
	bSchedWake  = []byte("schedules_by_wake") // (wake, id), schedules with a Wake only
	bSchedEvts  = []byte("schedule_events")   // (id, seq) → event

	// Concurrency slots (slots.go).
	bSlots       = []byte("slots")        // slot key → terms, holders, length of the line
	bSlotLine    = []byte("slot_line")    // (slot key, seq) → waiter
	bSlotWaiters = []byte("slot_waiters") // (slot key, waiter id) → seq

	// Recorded attempts (tapes.go).
	bTapes    = []byte("tapes")     // (id, step path, exec, attempt) → summary
	bTapeData = []byte("tape_data") // (id, step path, exec, attempt) → the tape's bytes
	// (plugin, recorded at, id, step path, exec, attempt) → the
	// instance's workflow: FindTapes.
	bTapesByPlugin = []byte("tapes_by_plugin")

	allBuckets = [][]byte{bMeta, bInst, bState, bHist, bBookmarks, bBmIndex, bTimers, bTimersDue,
		bIxAll, bIxWf, bIxStatus, bIxWfStatus, bLeases, bPins, bStim, bStimQueue, bStimExp,
		bStimDead, bStimForget, bDefs, bDefLatest, bDefSeq, bPlugins, bInbox, bInboxIDs, bBeats, bBeatsOf, bLease, bInboxWait, bInboxWaitX,
		bGrants, bGrantSeq, bExpiry,
		bSched, bSchedWake, bSchedEvts,
		bSlots, bSlotLine, bSlotWaiters,
		bSearch, bSearchAttrs,
		bBatch, bBatchDoc, bBatchDue, bBatchAll, bBatchItems, bBatchSeq, bBatchOutcome,
		bPauses, bTapes, bTapeData, bTapesByPlugin}
)

// ErrBroken is matched by the errors of writes to a store that a write
// found corrupt: bbolt panicked on a page of the file, in the write or in
// its commit; on Pebble, a write read a block whose checksum fails (an
// error marked as Pebble's corruption) or panicked. That write and every
// later one fail (Err says why); reads go on where the pages (blocks) they
// meet are sound. Nothing acknowledged is lost: a failed commit writes no
// meta page (on Pebble, no batch). Restore the store from a backup (on
// bbolt, or repair the file offline: `bbolt check`, `bbolt compact`), and
// restart.
var ErrBroken = errors.New("corrupt store file, writes refused")

// Store is the embedded: one bbolt file, or one Pebble directory
// (Config.Engine). It implements store.Store and is safe for concurrent
// use.
type Store struct {
	db    kvEngine
	path  string
	cfg   Config
	log   *slog.Logger
	batch batcher
	// catalog keeps what GetDefinition and GetPlugin decoded.
	catalog catalogCache
	// versions keeps the versions of the plugin records Commit checked
	// pins against.
	versions versionsMemo

	mu     sync.Mutex
	broken error // the first corruption a write met, wrapping ErrBroken
	// held: a panic left bbolt's writer lock held (it escaped the
	// rollback that releases it), so that closing the file would wait
	// for it forever. Never on Pebble, whose writer lock is the engine's
	// own mutex, released on the way out of a panic.
	held bool
}

var _ store.Store = (*Store)(nil)

// Open opens the store at path, creating it (and its directory) when
// missing: with EnginePebble (the default) the Pebble directory at path,
// with EngineBolt the bbolt file at path.
//
// # Errors
//
// Every error names the path: an invalid configuration, a path that is not
// a store of this version and engine (corrupt, truncated, another
// program's, a newer schema, a bbolt file given to Pebble or a directory
// given to bbolt), or a lock held by another process for longer than
// Config.OpenTimeout.
func Open(path string, cfg Config) (_ *Store, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var db kvEngine
	switch cfg.Engine {
	case EnginePebble:
		db, err = openPebble(path, cfg)
	default:
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("embedded: %w", err)
		}
		db, err = openBolt(path, bolt.Options{Timeout: cfg.OpenTimeout, FreelistType: bolt.FreelistMapType})
	}
	if err != nil {
		return nil, err
	}
	if err := initSchema(db, cfg.Now()); err != nil {
		return nil, errors.Join(fmt.Errorf("embedded: open %s: %w", path, err), db.close())
	}
	// Spooled backups a crash left behind (Backup.Spool); the lock says
	// no other process has this store open.
	if entries, err := os.ReadDir(filepath.Dir(path)); err == nil {
		spool := filepath.Base(path) + ".backup-"
		for _, e := range entries {
			if f := filepath.Join(filepath.Dir(path), e.Name()); strings.HasPrefix(e.Name(), spool) {
				if err := os.Remove(f); err != nil {
					cfg.Logger.Warn("embedded: removing a backup copy left by a crash", "file", f, "err", err)
				}
			}
		}
	}
	cfg.Logger.Debug("store opened", "path", path, "engine", cfg.Engine)
	s := &Store{db: db, path: path, cfg: cfg, log: cfg.Logger}
	s.batch = batcher{maxSize: cfg.MaxBatchSize, update: s.update}
	return s, nil
}

// initSchema checks that db holds a store of this schema, or nothing, and
// creates the buckets it lacks (now is when the inbox waits it adds
// begin). The engines may panic on some malformed files: that becomes an
// error.
func initSchema(db kvEngine, now time.Time) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not a valid store file: %v", r)
		}
	}()
	return db.update(func(tx kvTx) error {
		if err := checkSchema(tx); err != nil {
			return err
		}
		// A file of a build before the index of tapes by plugin has
		// tapes it does not index: they are indexed as it gets the
		// bucket.
		indexTapes := tx.Bucket(bTapes) != nil && tx.Bucket(bTapesByPlugin) == nil
		// A file of a build before the inbox waits has inboxes without
		// one, which the reads take as empty (undrained): each gets one.
		waitInboxes := tx.Bucket(bInboxIDs) != nil && tx.Bucket(bInboxWait) == nil
		// Likewise heartbeats without their instance's mark.
		markBeats := tx.Bucket(bBeats) != nil && tx.Bucket(bBeatsOf) == nil
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if indexTapes {
			if err := indexAllTapes(tx); err != nil {
				return fmt.Errorf("indexing the tapes by plugin: %w", err)
			}
		}
		if waitInboxes {
			if err := waitAllInboxes(tx, now); err != nil {
				return fmt.Errorf("recording the inboxes' waits: %w", err)
			}
		}
		if markBeats {
			if err := markAllHeartbeats(tx); err != nil {
				return fmt.Errorf("marking the instances with heartbeats: %w", err)
			}
		}
		return tx.Bucket(bMeta).Put([]byte("schema"), []byte(schemaVersion))
	})
}

// checkSchema refuses a store of another schema version, and anything but
// a store or nothing.
func checkSchema(tx kvTx) error {
	if m := tx.Bucket(bMeta); m != nil {
		if v := string(m.Get([]byte("schema"))); !readableSchema(v) {
			return fmt.Errorf("schema version %q, this build reads %q", v, schemaVersion)
		}
	} else if tx.Bucket(bInst) == nil && len(bucketNames(tx)) > 0 {
		return errors.New("not a weft store: it holds other buckets")
	}
	return nil
}

func bucketNames(tx kvTx) []string {
	var names []string
	_ = tx.ForEachBucket(func(name []byte) error {
		names = append(names, string(name))
		return nil
	})
	return names
}

// Path returns the file (EngineBolt) or directory (EnginePebble) the store
// is in.
func (s *Store) Path() string { return s.path }

// Err returns nil while the store takes writes, and once a write found
// the file corrupt, the error (naming the file, matching ErrBroken) that
// every write returns since.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// Close closes the store, after the transactions in progress. Calls after
// Close return weft.ErrClosed; closing twice does nothing. When a write's
// panic left bbolt's writer lock held (see Err), Close returns an error
// without closing: bbolt's Close would wait for that lock forever. The
// file then stays open, and locked, until the process exits.
func (s *Store) Close() error {
	s.mu.Lock()
	held, broken := s.held, s.broken
	s.mu.Unlock()
	if held {
		return fmt.Errorf("embedded: close %s: left open until the process exits, as a panic left bbolt's writer lock held: %w", s.path, broken)
	}
	if err := s.db.close(); err != nil {
		return fmt.Errorf("embedded: close %s: %w", s.path, err)
	}
	s.log.Debug("store closed", "path", s.path)
	return nil
}

// now is the configured clock in UTC, without its monotonic reading: what
// is stored is what a read returns.
func (s *Store) now() time.Time { return s.cfg.Now().UTC() }

// refusal marks an error that refuses a write: the function returning it
// wrote nothing, so its batch commits the other writes.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }

func refuse(err error) error { return refusal{err} }

// write runs fn in a batched, durable write transaction (group commit:
// concurrent writes share one fsync; see batcher). fn may run more than
// once (a batch is rerun without a write that failed), so it must only
// assign the caller's results, never accumulate into them. A refusal from
// fn is returned as its error without failing the batch; any other error
// rolls the batch back, and the others are retried. A panic, in fn or in
// bbolt's commit, breaks the store (see ErrBroken).
func (s *Store) write(ctx context.Context, fn func(tx kvTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.Err(); err != nil {
		return err
	}
	var refused error
	err := s.batch.run(func(tx kvTx) error {
		refused = nil
		err := fn(tx)
		var r refusal
		if errors.As(err, &r) {
			refused = r.err
			return nil
		}
		return err
	})
	if err != nil {
		return s.wrap(err)
	}
	return refused
}

// update runs fn in one read-write transaction, on this goroutine. bbolt
// panics on some corrupt pages, in fn or in the commit: update turns that
// (or any panic of a write) into an error naming the file, and breaks the
// store, which refuses every write from then on. It breaks it as well when
// the transaction fails on data Pebble finds corrupt (a block's checksum):
// a store known damaged takes no more writes, on either engine. A store
// that is broken already refuses fn.
func (s *Store) update(fn func(kvTx) error) (err error) {
	if err := s.Err(); err != nil {
		return err
	}
	var tx kvTx
	defer func() {
		if r := recover(); r != nil {
			err = s.breakDown(r, s.db.held(tx))
		}
	}()
	// A corrupt page can point outside the file's mapping: make that
	// fault a panic, recovered above, not a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = s.db.update(func(t kvTx) error {
		tx = t
		return fn(t)
	})
	if err != nil && pebble.IsCorruptionError(err) {
		return s.breakDown(err, false)
	}
	return err
}

// breakDown records the panic r of a write (or the corruption error it
// met), and whether it left the writer lock held, and returns its error.
func (s *Store) breakDown(r any, held bool) error {
	err := fmt.Errorf("embedded: %s: %w: a write met corrupt data: %v", s.path, ErrBroken, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = s.held || held
	if s.broken == nil {
		s.broken = err
		s.log.Error("store file corrupt: refusing every write from now on; restore it from a backup or repair it, and restart",
			"path", s.path, "err", err, "stack", string(debug.Stack()))
	}
	return err
}

// read runs fn in a read transaction. bbolt panics on some corrupt pages;
// read turns that into an error naming the file (as update does for
// writes).
func (s *Store) read(ctx context.Context, fn func(tx kvTx) error) error {
	return s.readWith(ctx, s.db.view, fn)
}

// readLazily is read for an fn that may run twice (kvEngine.viewLazily).
func (s *Store) readLazily(ctx context.Context, fn func(tx kvTx) error) error {
	return s.readWith(ctx, s.db.viewLazily, fn)
}

func (s *Store) readWith(ctx context.Context, view func(func(kvTx) error) error, fn func(tx kvTx) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("embedded: %s: corrupt file: %v", s.path, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = view(fn)
	if err != nil {
		var r refusal
		if errors.As(err, &r) {
			return r.err
		}
		return s.wrap(err)
	}
	return nil
}

// wrap names the store's path in errors from the engine and maps a closed
// database to weft.ErrClosed.
func (s *Store) wrap(err error) error {
	if errors.Is(err, ErrBroken) {
		return err // named the file already
	}
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("embedded: %s: %w", s.path, weft.ErrClosed)
	}
	if errors.Is(err, weft.ErrInvalid) || errors.Is(err, weft.ErrNotFound) {
		return err
	}
	return fmt.Errorf("embedded: %s: %w", s.path, err)
}
