package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
)

// copyBatchBytes bounds the keys and values that one write transaction of
// a copy (Migrate, a backup on Pebble) holds: a few MiB, so that a large
// store is never one giant batch in memory.
const copyBatchBytes = 4 << 20

// migratingSuffix names the directory Migrate builds before renaming it.
const migratingSuffix = ".migrating"

// Migrate copies the bbolt store file from (EngineBolt's, or a backup:
// Backup writes bbolt files on both engines) into a new Pebble store at
// directory to (EnginePebble's): every bucket, key and value, and each
// bucket's sequence, so that the store reads the same and numbers on past
// what it numbered. It is how a store moves to Pebble, and how a backup is
// restored on it.
//
// from is opened read-only and never changed; it must be a store of this
// schema (the same errors as Open's, waiting at most cfg.OpenTimeout for
// a process that has it open). Migrate refuses a to that exists. It builds
// the store in to+".migrating" (removing one a crash left), in write
// batches of a few MiB, checks that every bucket holds as many keys as
// in from, then renames it to to and syncs the parent directory: a crash
// leaves either no to or a complete one. cfg gives the logger and
// OpenTimeout; its Engine is not read. Every error names from (Open's
// errors for opening it), and to once from is open.
func Migrate(from, to string, cfg Config) (err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return err
	}
	fail := func(err error) error { return fmt.Errorf("embedded: migrate %s to %s: %w", from, to, err) }
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return fail(err)
	}
	// One migration at a time into to: two hosts started at once on one
	// data directory would otherwise remove each other's to+".migrating".
	// The lock's directory goes once the migration ends; one that waited
	// on it then finds to made, and refuses.
	lockDir := to + migratingSuffix + ".lock"
	if err := os.MkdirAll(lockDir, 0o700); err != nil {
		return fail(err)
	}
	lock, err := lockPebble(lockDir, cfg.OpenTimeout)
	if err != nil {
		return fail(err)
	}
	defer func() {
		err = errors.Join(err, lock.Close(), os.RemoveAll(lockDir))
	}()
	if _, err := os.Lstat(to); err == nil {
		return fail(errors.New("the destination exists"))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail(err)
	}
	src, err := openBolt(from, bolt.Options{ReadOnly: true, Timeout: cfg.OpenTimeout})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := src.close(); cerr != nil && err == nil {
			err = fail(cerr)
		}
	}()
	tmp := to + migratingSuffix
	if _, err := os.Lstat(tmp); err == nil {
		cfg.Logger.Warn("embedded: removing a migration a crash left", "dir", tmp)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fail(err)
	}
	dst, err := openPebble(tmp, cfg)
	if err != nil {
		return errors.Join(fail(err), os.RemoveAll(tmp))
	}
	defer func() {
		if dst != nil {
			err = errors.Join(err, dst.close(), os.RemoveAll(tmp))
		}
	}()
	counts, err := copyFromBolt(src, dst)
	if err != nil {
		return fail(err)
	}
	// Buckets of this build that from lacks, as Open adds them.
	if err := initSchema(dst, cfg.Now()); err != nil {
		return fail(err)
	}
	if err := checkCopy(dst, counts); err != nil {
		return fail(err)
	}
	// The batches are synced (their WAL); a flush spares the first Open
	// replaying it all.
	if err := dst.db.Flush(); err != nil {
		return fail(err)
	}
	err = dst.close()
	dst = nil
	if err != nil {
		return errors.Join(fail(err), os.RemoveAll(tmp))
	}
	if _, err := os.Lstat(to); err == nil {
		return errors.Join(fail(errors.New("the destination appeared while migrating")), os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, to); err != nil {
		return errors.Join(fail(err), os.RemoveAll(tmp))
	}
	if err := syncDir(filepath.Dir(to)); err != nil {
		return fail(err)
	}
	cfg.Logger.Info("store migrated to Pebble", "from", from, "to", to, "buckets", len(counts))
	return nil
}

// bucketCopy is what a copy found in one bucket of the source.
type bucketCopy struct {
	keys int
	seq  uint64
}

// copyFromBolt copies the store src into dst, under recover: bbolt panics
// on some corrupt pages.
func copyFromBolt(src *boltEngine, dst kvEngine) (counts map[string]bucketCopy, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("corrupt source file: %v", r)
		}
	}()
	err = src.view(func(tx kvTx) error {
		if err := checkSchema(tx); err != nil {
			return err
		}
		if tx.Bucket(bMeta) == nil {
			return fmt.Errorf("not a weft store: it has no %s bucket", bMeta)
		}
		var err error
		counts, err = copyBuckets(context.Background(), tx, dst)
		return err
	})
	return counts, err
}

// copyBuckets copies every bucket of src, its keys, values and sequence,
// into dst (which lacks them), in write transactions of copyBatchBytes or
// so. It returns what it copied of each bucket.
func copyBuckets(ctx context.Context, src kvTx, dst kvEngine) (map[string]bucketCopy, error) {
	var names [][]byte
	if err := src.ForEachBucket(func(name []byte) error {
		names = append(names, bytes.Clone(name))
		return nil
	}); err != nil {
		return nil, err
	}
	counts := make(map[string]bucketCopy, len(names))
	for _, name := range names {
		sb := src.Bucket(name)
		got := bucketCopy{seq: sb.Sequence()}
		c := sb.Cursor()
		k, v := c.First()
		for created := false; !created || k != nil; created = true {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			err := dst.update(func(tx kvTx) error {
				b, err := tx.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				if !created {
					if err := b.SetSequence(got.seq); err != nil {
						return err
					}
				}
				if bb, ok := b.(*boltBucket); ok {
					// Keys come in order: fill the pages, as `bbolt
					// compact` does.
					(*bolt.Bucket)(bb).FillPercent = 1
				}
				for size := 0; k != nil && size < copyBatchBytes; k, v = c.Next() {
					if err := b.Put(k, v); err != nil {
						return fmt.Errorf("key %x: %w", k, err)
					}
					size += len(k) + len(v)
					got.keys++
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("copying bucket %s: %w", name, err)
			}
		}
		counts[string(name)] = got
	}
	return counts, nil
}

// checkCopy checks that every bucket of counts holds as many keys in db,
// with the same sequence.
func checkCopy(db kvEngine, counts map[string]bucketCopy) error {
	return db.view(func(tx kvTx) error {
		var errs []error
		for name, want := range counts {
			b := tx.Bucket([]byte(name))
			if b == nil {
				errs = append(errs, fmt.Errorf("bucket %s: missing in the copy", name))
				continue
			}
			if n, seq := countKeys(b), b.Sequence(); n != want.keys || seq != want.seq {
				errs = append(errs, fmt.Errorf("bucket %s: %d keys and sequence %d in the copy, %d and %d in the source",
					name, n, seq, want.keys, want.seq))
			}
		}
		if len(errs) > 0 {
			return fmt.Errorf("the copy differs: %w", errors.Join(errs...))
		}
		return nil
	})
}

// syncDir makes the entries of directory dir (a rename in it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
