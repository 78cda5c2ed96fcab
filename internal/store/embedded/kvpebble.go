package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	bolt "go.etcd.io/bbolt"

	"github.com/weftworks/weft/host/weft"
)

// pebbleCacheSize is the block cache of a Pebble store: 64 MiB for blocks
// and the memtables' memory, which Pebble reserves from it (with 64 MiB
// and two 32 MiB memtables nothing was left for blocks, and nearly every
// read went to the file).
const pebbleCacheSize = 64<<20 + 2*pebbleMemTableSize

// pebbleMemTableSize bounds a Pebble store's memtable: up to two of them
// (one flushing) are in memory under a steady load of writes.
const pebbleMemTableSize = 32 << 20

// pebbleLockFile is the lock file Pebble keeps in its directory.
const pebbleLockFile = "LOCK"

// pebbleEngine is the store in a Pebble directory (EnginePebble). A bucket
// is a key prefix: one byte with the length of the bucket's name, then the
// name; its keys follow the prefix. A bucket exists once its sequence key
// exists: 0x00 (no name is empty, so no bucket's prefix starts so), the
// name's length, the name, holding the bucket's sequence as 8 big-endian
// bytes.
type pebbleEngine struct {
	db    *pebble.DB
	lock  *pebble.Lock
	cache *pebble.Cache
	// fsCloser stops the disk-health checks of the DB's file system.
	fsCloser io.Closer
	path     string

	// mu is held shared by every transaction and exclusively by close:
	// close waits for the transactions in progress, and none starts
	// after it.
	mu     sync.RWMutex
	closed bool
	// wmu serializes the write transactions, as bbolt does.
	wmu sync.Mutex
	// known are the names of the buckets known to exist (committed).
	// Buckets are never deleted, so the set only grows; it is replaced,
	// never changed.
	known atomic.Pointer[map[string]bool]
	// ranges are the key ranges of the store's buckets (allBuckets),
	// computed once; read only.
	ranges map[string]*bucketRange
	// recent are the values last written to or read from recentBuckets,
	// and their keys known absent.
	recent *recent
}

// bucketRange is a bucket's keys on Pebble: [lo, hi), lo its prefix.
type bucketRange struct {
	name   []byte
	lo, hi []byte
	seq    []byte // the key of its sequence, whose presence creates it
	// recent: the engine remembers the values written (recentBuckets).
	recent bool
}

func newBucketRange(name []byte) *bucketRange {
	lo := append([]byte{byte(len(name))}, name...)
	return &bucketRange{name: name, lo: lo, hi: prefixEnd(lo), seq: append([]byte{0}, lo...)}
}

// seqLo and seqHi bound the sequence keys: the buckets.
var seqLo, seqHi = []byte{0}, []byte{1}

// openPebble opens the Pebble store in directory path, creating the
// directory when missing. It waits at most cfg.OpenTimeout for the lock of
// another process (or of another Open in this one), and refuses a
// directory holding anything but a Pebble store, or a Pebble store that is
// not a weft store.
func openPebble(path string, cfg Config) (_ *pebbleEngine, err error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(path, 0o700); err != nil {
			return nil, fmt.Errorf("embedded: open %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("embedded: open %s: not a directory, as a Pebble store is (a bbolt store file? Migrate copies one into a Pebble directory)", path)
	}
	// Looked at before the lock, whose file would stay in a directory
	// that is not a store.
	desc, err := pebble.Peek(path, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: not a Pebble store: %w", path, err)
	}
	if !desc.Exists {
		entries, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("embedded: open %s: %w", path, err)
		}
		for _, e := range entries {
			if e.Name() != pebbleLockFile {
				return nil, fmt.Errorf("embedded: open %s: not a Pebble store: the directory holds other files (%s)", path, e.Name())
			}
		}
	}
	lock, err := lockPebble(path, cfg.OpenTimeout)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = lock.Close()
		}
	}()
	// An existing store keeps its format until it is known to be a weft
	// store: another program's must stay readable by its Pebble.
	format := pebble.FormatNewest
	if desc.Exists {
		format = desc.FormatMajorVersion
	}
	log := cfg.Logger.With("path", path)
	// Pebble's default file system, with its disk-health checks; made
	// here, as Pebble closes the one it makes when the DB closes but not
	// when Open fails, leaving its goroutine behind.
	diskFS, fsCloser := vfs.WithDiskHealthChecks(vfs.Default, 5*time.Second, nil, func(info vfs.DiskSlowInfo) {
		log.Warn("pebble: " + info.String())
	})
	cache := pebble.NewCache(pebbleCacheSize)
	db, err := openPebbleDB(path, &pebble.Options{
		Cache:              cache,
		FS:                 diskFS,
		FormatMajorVersion: format,
		Logger:             pebbleLogger{log: log, exit: os.Exit},
		Lock:               lock,
		// Measured with seq3 at 50 in flight (BENCHMARKS.md, "After: the
		// store's settings and the commit's encodings"): with Pebble's
		// defaults (4 MiB memtables, a compaction of L0 from four files)
		// flushing and compacting a workflow's few KiB again and again
		// took 12% of the host's CPU (a fifth in process); larger
		// memtables flush less often, in larger files, and L0 is
		// compacted sooner, as CockroachDB configures it. A memtable
		// starts small and grows to this size only under writes.
		MemTableSize:          pebbleMemTableSize,
		L0CompactionThreshold: 2,
		// Bloom filters answer most point reads of a missing key (a state
		// or lease record that is not there) without reading a data
		// block.
		Levels: [7]pebble.LevelOptions{0: {FilterPolicy: bloom.FilterPolicy(10)}},
		// A corrupt block fails the read or write that found it (the
		// store breaks on a write, as on bbolt) instead of Pebble's
		// default, Fatalf: a process exit on any read of it.
		EventListener: &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
			log.Error("pebble: " + info.String())
		}},
	})
	if err != nil {
		cache.Unref()
		_ = fsCloser.Close()
		return nil, err
	}
	e := &pebbleEngine{db: db, lock: lock, cache: cache, fsCloser: fsCloser, path: path,
		ranges: make(map[string]*bucketRange, len(allBuckets)), recent: newRecent()}
	for _, name := range allBuckets {
		e.ranges[string(name)] = newBucketRange(name)
	}
	for _, name := range recentBuckets {
		e.ranges[string(name)].recent = true
	}
	e.known.Store(&map[string]bool{})
	err = e.checkForeign()
	if err == nil && db.FormatMajorVersion() < pebble.FormatNewest {
		err = db.RatchetFormatMajorVersion(pebble.FormatNewest)
	}
	if err != nil {
		err = errors.Join(fmt.Errorf("embedded: open %s: %w", path, err), db.Close(), fsCloser.Close())
		cache.Unref()
		return nil, err
	}
	return e, nil
}

// openPebbleDB is pebble.Open, with its panics (on some corrupt files)
// turned into errors naming the directory.
func openPebbleDB(path string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("embedded: open %s: not a valid Pebble store: %v", path, r)
		}
	}()
	db, err = pebble.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	return db, nil
}

// checkForeign refuses a Pebble store of another program: one with keys
// but no meta bucket (a weft store writes its buckets and schema in one
// batch, its first).
func (e *pebbleEngine) checkForeign() error {
	return e.view(func(tx kvTx) error {
		if tx.Bucket(bMeta) != nil {
			return nil
		}
		t := tx.(*pebbleTx)
		it, err := t.reader().NewIter(nil)
		if err != nil {
			return err
		}
		defer it.Close()
		if it.First() {
			return fmt.Errorf("not a weft store: it holds other keys (%q)", it.Key())
		}
		return it.Error()
	})
}

// lockPebble takes Pebble's lock of directory path, waiting at most
// timeout for another holder to release it.
func lockPebble(path string, timeout time.Duration) (*pebble.Lock, error) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := pebble.LockDirectory(path, vfs.Default)
		if err == nil {
			return l, nil
		}
		// Not a lock held, but no lock file (permissions, say).
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			return nil, fmt.Errorf("embedded: open %s: %w", path, err)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("embedded: open %s: directory is locked by another process (waited %s): %w", path, timeout, err)
		}
		time.Sleep(min(left, 20*time.Millisecond))
	}
}

// pebbleLogger routes Pebble's messages to the store's logger: its infos
// (routine: the WALs it replays at open, say) at Debug, its errors at
// Error. Fatalf must not return (Pebble goes on as if the process had
// stopped): it logs at Error and calls exit, os.Exit but in tests, and
// panics if exit returns.
type pebbleLogger struct {
	log  *slog.Logger
	exit func(code int)
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: fatal: " + fmt.Sprintf(format, args...)
	l.log.Error(msg)
	l.exit(1)
	panic(msg)
}

// rangeOf returns the key range of bucket name.
func (e *pebbleEngine) rangeOf(name []byte) *bucketRange {
	if r := e.ranges[string(name)]; r != nil {
		return r
	}
	return newBucketRange(name)
}

// learn adds names to the buckets known to exist; the caller holds wmu or
// the name is in a snapshot (committed).
func (e *pebbleEngine) learn(names ...[]byte) {
	for {
		old := e.known.Load()
		m := make(map[string]bool, len(*old)+len(names))
		for k := range *old {
			m[k] = true
		}
		for _, n := range names {
			m[string(n)] = true
		}
		if e.known.CompareAndSwap(old, &m) {
			return
		}
	}
}

func (e *pebbleEngine) view(fn func(kvTx) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return weft.ErrClosed
	}
	return e.viewNow(fn)
}

// viewNow is view, under e.mu.
func (e *pebbleEngine) viewNow(fn func(kvTx) error) error {
	gen, _ := e.recent.generation() // before the snapshot: see recent
	snap := e.db.NewSnapshot()
	defer snap.Close()
	tx := &pebbleTx{e: e, r: snap, gen: gen}
	defer tx.closeIters() // before the snapshot's Close, when fn panics (below otherwise)
	err := fn(tx)
	if cerr := tx.closeIters(); tx.err != nil || cerr != nil {
		return errors.Join(tx.err, cerr) // what fn did rests on a failed read
	}
	return err
}

// viewLazily is view for an fn that may run twice: it takes Pebble's
// snapshot only at fn's first read that the engine's recent values cannot
// answer, so that a read they answer whole (an instance that a run reads
// right after its start wrote it) costs no snapshot, whose making and
// closing take the DB's lock that commits take too.
//
// The late snapshot sees what an early one would have: it is taken only
// if no commit has begun since fn began (recent.snapshot), so every value
// fn took from memory is still the stored one, and the commits that were
// in progress when fn began had their keys refused by memory. When a
// commit has begun since, fn runs again, on a snapshot taken first.
func (e *pebbleEngine) viewLazily(fn func(kvTx) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return weft.ErrClosed
	}
	gen, begun := e.recent.generation()
	tx := &pebbleTx{e: e, gen: gen, lazy: true, begun: begun}
	defer func() {
		if tx.snap != nil {
			tx.snap.Close()
		}
	}()
	defer tx.closeIters() // before the snapshot's Close, when fn panics (below otherwise)
	err := fn(tx)
	cerr := tx.closeIters()
	if errors.Is(tx.err, errLate) {
		return e.viewNow(fn)
	}
	if tx.err != nil || cerr != nil {
		return errors.Join(tx.err, cerr)
	}
	return err
}

// errLate fails the reads of a lazy view that found a commit begun since
// it began (viewLazily).
var errLate = errors.New("a commit began since the view began")

// reader returns what the transaction reads Pebble through, or nil after
// a failure; a lazy view's first call takes its snapshot (viewLazily).
func (t *pebbleTx) reader() pebble.Reader {
	if t.lazy {
		t.lazy = false
		t.snap = t.e.recent.snapshot(t.begun, t.e.db.NewSnapshot)
		if t.snap == nil {
			t.fail(errLate)
			return nil
		}
		t.r = t.snap
	}
	return t.r
}

func (e *pebbleEngine) update(fn func(kvTx) error) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.closed {
		return weft.ErrClosed
	}
	e.wmu.Lock()
	defer e.wmu.Unlock()
	b := e.db.NewIndexedBatch()
	defer b.Close()
	tx := &pebbleTx{e: e, r: b, batch: b, gen: exactGen}
	defer tx.closeIters()
	err := fn(tx)
	if cerr := tx.closeIters(); tx.err != nil || cerr != nil {
		return errors.Join(tx.err, cerr)
	}
	if err != nil || b.Empty() {
		return err
	}
	if len(tx.recent) > 0 {
		e.recent.begin(tx.recent)
	}
	err = b.Commit(pebble.Sync)
	if len(tx.recent) > 0 {
		e.recent.end(tx.recent, err == nil)
	}
	if err != nil {
		return err
	}
	if len(tx.created) > 0 {
		e.learn(tx.created...)
	}
	return nil
}

// backup writes the store, as one snapshot has it, to a bbolt file spooled
// beside the store (Backup.Spool's), in transactions of copyBatchBytes,
// not synced: the copy lives as long as the Backup, and Open removes one
// that a crash left.
func (e *pebbleEngine) backup(ctx context.Context, path string) (_ *Backup, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".backup-*")
	if err != nil {
		return nil, err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		return nil, errors.Join(err, os.Remove(name))
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, os.Remove(name))
		}
	}()
	copyTo, err := openBolt(name, bolt.Options{NoSync: true, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	err = e.view(func(tx kvTx) error {
		_, err := copyBuckets(ctx, tx, copyTo)
		return err
	})
	if err = errors.Join(err, copyTo.close()); err != nil {
		if errors.Is(err, weft.ErrClosed) {
			return nil, weft.ErrClosed
		}
		return nil, fmt.Errorf("spooling to %s: %w", name, err)
	}
	if f, err = os.Open(name); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &Backup{path: path, size: fi.Size(), spool: f}, nil
}

// held: update's mutex is released on the way out of a panic.
func (e *pebbleEngine) held(kvTx) bool { return false }

func (e *pebbleEngine) close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := errors.Join(e.db.Close(), e.lock.Close(), e.fsCloser.Close())
	e.cache.Unref()
	return err
}

// pebbleTx is a transaction: a snapshot (view) or an indexed batch
// (update), whose reads see its own writes. A read that fails sets err,
// which the transaction returns, whatever fn returned.
type pebbleTx struct {
	e *pebbleEngine
	// r is what the transaction reads Pebble through: a snapshot or the
	// write's batch; nil in a lazy view until reader takes its snapshot
	// (snap), or after it could not.
	r     pebble.Reader
	snap  *pebble.Snapshot
	lazy  bool
	begun uint64        // a lazy view's: the commits begun when it began
	batch *pebble.Batch // nil in a read transaction
	iters []*pebble.Iterator
	// created are the buckets this transaction created.
	created [][]byte
	err     error
	buf     []byte // scratch for keys that Pebble does not keep
	// gen is the generation of the engine's recent values this
	// transaction may read (exactGen in a write transaction); recent are
	// its writes to their buckets, and wrote their keys.
	gen    uint64
	recent []recentWrite
	wrote  map[string]struct{}
}

var errReadOnly = errors.New("write in a read-only transaction")

func (t *pebbleTx) fail(err error) {
	if t.err == nil {
		t.err = err
	}
}

// closeIters closes the iterators of the transaction's cursors.
func (t *pebbleTx) closeIters() error {
	var errs []error
	for _, it := range t.iters {
		errs = append(errs, it.Close())
	}
	t.iters = nil
	return errors.Join(errs...)
}

// key returns prefix+k in the scratch buffer, valid until the next call.
func (t *pebbleTx) key(prefix, k []byte) []byte {
	t.buf = append(append(t.buf[:0], prefix...), k...)
	return t.buf
}

// get returns a copy of the value of k, nil when missing.
func (t *pebbleTx) get(k []byte) []byte {
	r := t.reader()
	if r == nil {
		return nil
	}
	v, closer, err := r.Get(k)
	if err != nil {
		if !errors.Is(err, pebble.ErrNotFound) {
			t.fail(fmt.Errorf("reading key %x: %w", k, err))
		}
		return nil
	}
	out := append(make([]byte, 0, len(v)), v...)
	if err := closer.Close(); err != nil {
		t.fail(err)
	}
	return out
}

func (t *pebbleTx) Bucket(name []byte) kvBucket {
	r := t.e.rangeOf(name)
	if !(*t.e.known.Load())[string(name)] {
		if t.get(r.seq) == nil {
			if errors.Is(t.err, errLate) {
				// A lazy view that will run again: its reads fail, and
				// a bucket, not nil, keeps fn to the path it took.
				return &pebbleBucket{t: t, r: r}
			}
			return nil
		}
		if !t.createdHere(name) {
			t.e.learn(name)
		}
	}
	return &pebbleBucket{t: t, r: r}
}

func (t *pebbleTx) createdHere(name []byte) bool {
	for _, n := range t.created {
		if string(n) == string(name) {
			return true
		}
	}
	return false
}

func (t *pebbleTx) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	if b := t.Bucket(name); b != nil {
		return b, nil
	}
	if t.batch == nil {
		return nil, errReadOnly
	}
	if len(name) == 0 || len(name) > 255 {
		return nil, fmt.Errorf("bucket name %q: want 1 to 255 bytes", name)
	}
	r := t.e.rangeOf(name)
	if err := t.batch.Set(r.seq, make([]byte, 8), nil); err != nil {
		return nil, err
	}
	t.created = append(t.created, append([]byte(nil), name...))
	return &pebbleBucket{t: t, r: r}, nil
}

func (t *pebbleTx) ForEachBucket(fn func(name []byte) error) error {
	r := t.reader()
	if r == nil {
		return t.err
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: seqLo, UpperBound: seqHi})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 2 || int(k[1]) != len(k)-2 {
			return fmt.Errorf("corrupt bucket key %x", k)
		}
		if err := fn(append([]byte(nil), k[2:]...)); err != nil {
			return err
		}
	}
	return it.Error()
}

func (t *pebbleTx) Writable() bool { return t.batch != nil }

// pebbleBucket is a bucket of a transaction.
type pebbleBucket struct {
	t *pebbleTx
	r *bucketRange
}

func (b *pebbleBucket) Get(key []byte) []byte {
	k := b.t.key(b.r.lo, key)
	if v, ok := b.remembered(k); ok {
		return v
	}
	v := b.t.get(k)
	b.fill(k, v) // a copy, never changed (kvBucket.Get)
	return v
}

// fill remembers v (nil: absent) as the value of whole key k that a write
// transaction read from Pebble, when k is not its own write.
func (b *pebbleBucket) fill(k, v []byte) {
	if !b.r.recent || b.t.gen != exactGen || b.t.err != nil {
		return
	}
	if _, own := b.t.wrote[string(k)]; !own {
		b.t.e.recent.fill(k, v)
	}
}

// knownAbsent tells the engine that key is absent, which the store knows
// without a read (a new instance has no inbox wait): once the transaction
// commits, later ones take it from memory. key must be absent unless the
// transaction writes it (its write wins).
func (b *pebbleBucket) knownAbsent(key []byte) {
	if !b.r.recent || b.t.batch == nil {
		return
	}
	k := b.t.key(b.r.lo, key)
	if _, own := b.t.wrote[string(k)]; own {
		return
	}
	b.note(k, nil)
}

// remembered returns the value of whole key k from the engine's recent
// values, when it holds it for this transaction.
func (b *pebbleBucket) remembered(k []byte) ([]byte, bool) {
	if !b.r.recent {
		return nil, false
	}
	if _, own := b.t.wrote[string(k)]; own {
		return nil, false // in the batch, which Pebble reads
	}
	return b.t.e.recent.get(k, b.t.gen)
}

// note records a write of whole key k for the engine's recent values; v
// is nil for a delete, and is copied (the caller's may change after).
func (b *pebbleBucket) note(k, v []byte) {
	if !b.r.recent {
		return
	}
	w := recentWrite{key: string(k)}
	switch {
	case len(v) > recentMaxValue:
		w.forget = true
	case v != nil:
		w.v = append(make([]byte, 0, len(v)), v...)
	}
	b.t.recent = append(b.t.recent, w)
	if b.t.wrote == nil {
		b.t.wrote = map[string]struct{}{}
	}
	b.t.wrote[w.key] = struct{}{}
}

func (b *pebbleBucket) Has(key []byte) bool {
	k := b.t.key(b.r.lo, key)
	if v, ok := b.remembered(k); ok {
		return v != nil
	}
	r := b.t.reader()
	if r == nil {
		return false
	}
	_, closer, err := r.Get(k)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			b.fill(k, nil)
		} else {
			b.t.fail(fmt.Errorf("reading key %x: %w", k, err))
		}
		return false
	}
	if err := closer.Close(); err != nil {
		b.t.fail(err)
	}
	return true
}

func (b *pebbleBucket) Put(key, value []byte) error {
	if b.t.batch == nil {
		return errReadOnly
	}
	if len(key) == 0 {
		return errors.New("key required")
	}
	k := b.t.key(b.r.lo, key)
	if err := b.t.batch.Set(k, value, nil); err != nil {
		return err
	}
	if value == nil {
		value = []byte{} // an existing key's value is never nil
	}
	b.note(k, value)
	return nil
}

func (b *pebbleBucket) Delete(key []byte) error {
	if b.t.batch == nil {
		return errReadOnly
	}
	k := b.t.key(b.r.lo, key)
	if err := b.t.batch.Delete(k, nil); err != nil {
		return err
	}
	b.note(k, nil)
	return nil
}

func (b *pebbleBucket) Cursor() kvCursor { return &pebbleCursor{t: b.t, r: b.r} }

func (b *pebbleBucket) ForEach(fn func(k, v []byte) error) error {
	c := b.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (b *pebbleBucket) Sequence() uint64 {
	if v := b.t.get(b.r.seq); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (b *pebbleBucket) SetSequence(v uint64) error {
	if b.t.batch == nil {
		return errReadOnly
	}
	return b.t.batch.Set(b.r.seq, binary.BigEndian.AppendUint64(nil, v), nil)
}

func (b *pebbleBucket) NextSequence() (uint64, error) {
	if b.t.batch == nil {
		return 0, errReadOnly
	}
	n := b.Sequence() + 1
	return n, b.SetSequence(n)
}

// pebbleCursor is a bucket's cursor: an iterator bounded to the bucket,
// made at the first move and closed with the transaction. It returns
// copies, as an iterator's slices change at its next move.
type pebbleCursor struct {
	t  *pebbleTx
	r  *bucketRange
	it *pebble.Iterator
	// off is +1 once a move went past the last key, -1 past the first.
	// As on bbolt, Prev from past the end lands on the last key, and Next
	// from past the start on the second (bbolt's cursor stays on the
	// first).
	off  int8
	seek []byte
}

func (c *pebbleCursor) iter() *pebble.Iterator {
	if c.it == nil {
		r := c.t.reader()
		if r == nil {
			return nil
		}
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: c.r.lo, UpperBound: c.r.hi})
		if err != nil {
			c.t.fail(fmt.Errorf("iterating bucket %s: %w", c.r.name, err))
			return nil
		}
		c.t.iters = append(c.t.iters, it)
		c.it = it
	}
	return c.it
}

// at returns a copy of the key (without the bucket's prefix) and value
// the iterator is on when ok; else nil, setting off to dir.
func (c *pebbleCursor) at(ok bool, dir int8) ([]byte, []byte) {
	if !ok {
		c.off = dir
		if err := c.it.Error(); err != nil {
			c.t.fail(fmt.Errorf("iterating bucket %s: %w", c.r.name, err))
		}
		return nil, nil
	}
	c.off = 0
	k := c.it.Key()[len(c.r.lo):]
	v, err := c.it.ValueAndErr()
	if err != nil {
		c.t.fail(fmt.Errorf("bucket %s: reading key %x: %w", c.r.name, k, err))
		return nil, nil
	}
	buf := make([]byte, len(k)+len(v))
	copy(buf, k)
	copy(buf[len(k):], v)
	return buf[:len(k):len(k)], buf[len(k):]
}

func (c *pebbleCursor) First() ([]byte, []byte) {
	if c.iter() == nil {
		return nil, nil
	}
	return c.at(c.it.First(), 1)
}

func (c *pebbleCursor) Last() ([]byte, []byte) {
	if c.iter() == nil {
		return nil, nil
	}
	return c.at(c.it.Last(), -1)
}

func (c *pebbleCursor) Seek(seek []byte) ([]byte, []byte) {
	if c.iter() == nil {
		return nil, nil
	}
	c.seek = append(append(c.seek[:0], c.r.lo...), seek...)
	return c.at(c.it.SeekGE(c.seek), 1)
}

func (c *pebbleCursor) Next() ([]byte, []byte) {
	if c.iter() == nil {
		return nil, nil
	}
	switch {
	case c.off < 0:
		if k, _ := c.First(); k == nil {
			return nil, nil
		}
	case c.off > 0:
		return nil, nil
	}
	return c.at(c.it.Next(), 1)
}

func (c *pebbleCursor) Prev() ([]byte, []byte) {
	if c.iter() == nil {
		return nil, nil
	}
	switch {
	case c.off > 0:
		return c.Last()
	case c.off < 0:
		return nil, nil
	}
	return c.at(c.it.Prev(), -1)
}
