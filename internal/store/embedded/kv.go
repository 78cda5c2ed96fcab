package embedded

import "context"

// The seam between the store's logic and its key-value engine: buckets of
// ordered byte keys, read in transactions that see one consistent state,
// written in transactions that commit atomically. bbolt (kvbolt.go) has
// them natively; on Pebble (kvpebble.go) a bucket is a key prefix. The
// interfaces hold what the store uses, no more.

// kvEngine is an open store file or directory.
type kvEngine interface {
	// view runs fn in a read transaction: every read sees the state of
	// one moment, whatever is written meanwhile.
	view(fn func(kvTx) error) error
	// viewLazily is view for an fn that may run twice, which sets what
	// it returns and changes nothing else: the engine may then answer it
	// from memory without its snapshot, and run it again when that
	// could not be exact.
	viewLazily(fn func(kvTx) error) error
	// update runs fn in a read-write transaction, one at a time, and
	// commits it durably (fsync) when fn returns nil; an error from fn
	// rolls it back. Reads in fn see its own writes.
	update(fn func(kvTx) error) error
	// held reports, after update panicked, whether the panic left the
	// engine's writer lock held; tx is the transaction fn was given, nil
	// when fn had not run.
	held(tx kvTx) bool
	// backup begins a Backup of the store at path (for the names of
	// errors and of the spooled copy).
	backup(ctx context.Context, path string) (*Backup, error)
	// close waits for the transactions in progress and closes the engine;
	// every later transaction fails with an error matching
	// weft.ErrClosed (bbolt's: berrors.ErrDatabaseNotOpen).
	close() error
}

// kvTx is a transaction.
type kvTx interface {
	// Bucket returns the bucket name, or nil when it does not exist.
	Bucket(name []byte) kvBucket
	// CreateBucketIfNotExists returns the bucket name, creating it when
	// missing.
	CreateBucketIfNotExists(name []byte) (kvBucket, error)
	// ForEachBucket calls fn with the name of every bucket, in byte order
	// of the names on bbolt, of their prefixes on Pebble.
	ForEachBucket(fn func(name []byte) error) error
	// Writable reports whether this is a read-write transaction.
	Writable() bool
}

// kvBucket is a bucket of a transaction. Keys are never empty. Get and the
// cursors return slices valid until the transaction ends, that the caller
// must not modify; an existing key's value is never nil, even when empty.
type kvBucket interface {
	Get(key []byte) []byte
	// Has reports whether key exists, without reading its value out
	// (Pebble's Get copies it: an instance record may hold megabytes).
	Has(key []byte) bool
	Put(key, value []byte) error
	// Delete deletes key; a missing key is no error.
	Delete(key []byte) error
	Cursor() kvCursor
	// ForEach calls fn for every key in order, stopping at its first
	// error. fn must not change the bucket.
	ForEach(fn func(k, v []byte) error) error
	// NextSequence increments the bucket's sequence and returns it.
	NextSequence() (uint64, error)
	// Sequence and SetSequence read and set the sequence (Migrate and
	// backups copy it).
	Sequence() uint64
	SetSequence(v uint64) error
}

// kvCursor walks a bucket in key order. Each method returns the key and
// value it lands on, or a nil key past either end. A write to the bucket
// while a cursor is positioned may or may not show in its next moves (bbolt
// may even skip keys): the store collects keys first and writes after.
type kvCursor interface {
	First() (key, value []byte)
	Last() (key, value []byte)
	// Seek lands on the first key at or after seek.
	Seek(seek []byte) (key, value []byte)
	Next() (key, value []byte)
	Prev() (key, value []byte)
}

// countKeys returns how many keys b holds, reading them all.
func countKeys(b kvBucket) int {
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n
}

// knownAbsent tells an engine that remembers values (Pebble's, recent.go)
// that key is absent from b, which the store knows without reading it; b
// must be a write transaction's. On bbolt, whose reads cost little, it
// does nothing.
func knownAbsent(b kvBucket, key []byte) {
	if p, ok := b.(*pebbleBucket); ok {
		p.knownAbsent(key)
	}
}
