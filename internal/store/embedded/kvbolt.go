package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// boltEngine is the store in one bbolt file (EngineBolt). The adapters
// below are bbolt's own types under other names: no copies, bbolt's
// behaviour exactly.
type boltEngine struct{ db *bolt.DB }

// openBolt opens the bbolt file at path with options o. bbolt may panic on
// some malformed files instead of failing, or read outside the file's
// mapping: both become errors naming the file.
func openBolt(path string, o bolt.Options) (_ *boltEngine, err error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("embedded: open %s: a directory, not a bbolt file (a Pebble store? Config.Engine chooses the engine)", path)
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var db *bolt.DB
	defer func() {
		if r := recover(); r != nil {
			if db != nil {
				_ = db.Close()
			}
			err = fmt.Errorf("embedded: open %s: not a valid store file: %v", path, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &o)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("embedded: open %s: file is locked by another process (waited %s)", path, o.Timeout)
		}
		return nil, fmt.Errorf("embedded: open %s: %w", path, err)
	}
	return &boltEngine{db: db}, nil
}

func (e *boltEngine) view(fn func(kvTx) error) error {
	return e.db.View(func(tx *bolt.Tx) error { return fn((*boltTx)(tx)) })
}

func (e *boltEngine) viewLazily(fn func(kvTx) error) error { return e.view(fn) }

func (e *boltEngine) update(fn func(kvTx) error) error {
	return e.db.Update(func(tx *bolt.Tx) error { return fn((*boltTx)(tx)) })
}

// held: Update rolls back on the way out of a panic, which releases the
// writer lock, unless it panicked as well: then the transaction is still
// open (its DB is set).
func (e *boltEngine) held(tx kvTx) bool {
	t, _ := tx.(*boltTx)
	return t == nil || (*bolt.Tx)(t).DB() != nil
}

func (e *boltEngine) close() error { return e.db.Close() }

// backup holds a read transaction: the copy is the file as it is in it.
func (e *boltEngine) backup(_ context.Context, path string) (*Backup, error) {
	tx, err := e.db.Begin(false)
	if err != nil {
		return nil, err
	}
	return &Backup{tx: tx, path: path, size: tx.Size()}, nil
}

type (
	boltTx     bolt.Tx
	boltBucket bolt.Bucket
	boltCursor bolt.Cursor
)

func (t *boltTx) Bucket(name []byte) kvBucket {
	if b := (*bolt.Tx)(t).Bucket(name); b != nil {
		return (*boltBucket)(b)
	}
	return nil
}

func (t *boltTx) CreateBucketIfNotExists(name []byte) (kvBucket, error) {
	b, err := (*bolt.Tx)(t).CreateBucketIfNotExists(name)
	if err != nil {
		return nil, err
	}
	return (*boltBucket)(b), nil
}

func (t *boltTx) ForEachBucket(fn func(name []byte) error) error {
	return (*bolt.Tx)(t).ForEach(func(name []byte, _ *bolt.Bucket) error { return fn(name) })
}

func (t *boltTx) Writable() bool { return (*bolt.Tx)(t).Writable() }

func (b *boltBucket) Get(key []byte) []byte { return (*bolt.Bucket)(b).Get(key) }

// Has seeks rather than Gets: in a write transaction bbolt's Get answers
// nil for a key just put with an empty value.
func (b *boltBucket) Has(key []byte) bool {
	k, _ := (*bolt.Bucket)(b).Cursor().Seek(key)
	return k != nil && bytes.Equal(k, key)
}

func (b *boltBucket) Put(key, value []byte) error { return (*bolt.Bucket)(b).Put(key, value) }

func (b *boltBucket) Delete(key []byte) error { return (*bolt.Bucket)(b).Delete(key) }

func (b *boltBucket) Cursor() kvCursor { return (*boltCursor)((*bolt.Bucket)(b).Cursor()) }

func (b *boltBucket) ForEach(fn func(k, v []byte) error) error { return (*bolt.Bucket)(b).ForEach(fn) }

func (b *boltBucket) NextSequence() (uint64, error) { return (*bolt.Bucket)(b).NextSequence() }

func (b *boltBucket) Sequence() uint64 { return (*bolt.Bucket)(b).Sequence() }

func (b *boltBucket) SetSequence(v uint64) error { return (*bolt.Bucket)(b).SetSequence(v) }

func (c *boltCursor) First() ([]byte, []byte) { return (*bolt.Cursor)(c).First() }

func (c *boltCursor) Last() ([]byte, []byte) { return (*bolt.Cursor)(c).Last() }

func (c *boltCursor) Seek(seek []byte) ([]byte, []byte) { return (*bolt.Cursor)(c).Seek(seek) }

func (c *boltCursor) Next() ([]byte, []byte) { return (*bolt.Cursor)(c).Next() }

func (c *boltCursor) Prev() ([]byte, []byte) { return (*bolt.Cursor)(c).Prev() }
