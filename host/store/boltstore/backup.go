package boltstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup is a copy of the store being taken: the store as it was when
// Store.Backup began it, which later writes do not change. It holds a
// bbolt read transaction until Close. Writes go on meanwhile, but for
// two costs of bbolt's: the pages it sees are not reused, so the file
// may grow, and a write that must enlarge the file's memory map (when
// the file outgrows it; the map doubles up to 1 GiB, then grows by 1 GiB)
// waits for it to close. So close it as soon as it is written.
type Backup struct {
	tx   *bolt.Tx
	path string
}

// Backup begins a backup of the store as it is now. Write it with WriteTo
// and close it.
func (s *Store) Backup(ctx context.Context) (*Backup, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tx, err := s.db.Begin(false)
	if err != nil {
		return nil, s.wrap(err)
	}
	return &Backup{tx: tx, path: s.path}, nil
}

// Size is the size of the copy in bytes: what WriteTo writes.
func (b *Backup) Size() int64 { return b.tx.Size() }

// WriteTo writes the copy to w: a bbolt file that Open opens as the
// store it was (restore it as the data directory's weft.db, the host
// stopped). It returns the bytes written; an error names the store's
// file.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	n, err := b.tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("boltstore: backup of %s: after %d of %d bytes: %w", b.path, n, b.Size(), err)
	}
	return n, nil
}

// Close ends the backup, releasing what it holds. Closing twice does
// nothing.
func (b *Backup) Close() error {
	if err := b.tx.Rollback(); err != nil && !errors.Is(err, berrors.ErrTxClosed) {
		return fmt.Errorf("boltstore: backup of %s: %w", b.path, err)
	}
	return nil
}

// CheckFile checks that the file at path, a backup say, is a store that
// Open would open, without opening it for writing: a bbolt file whose
// pages are all consistent (bbolt's Check, which reads every page), of
// this build's schema. Every error names the file.
func CheckFile(path string) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("boltstore: check %s: corrupt file: %v", path, r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultOpenTimeout})
	if err != nil {
		return fmt.Errorf("boltstore: check %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("boltstore: check %s: %w", path, cerr)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			return fmt.Errorf("boltstore: check %s: not a weft store: it has no %s bucket", path, bMeta)
		}
		if v := string(m.Get([]byte("schema"))); v != schemaVersion {
			return fmt.Errorf("boltstore: check %s: schema version %q, this build reads %q", path, v, schemaVersion)
		}
		// Read to the end: Check's goroutine waits on every error it
		// reports, holding the transaction.
		var errs []error
		n := 0
		for err := range tx.Check() {
			if n++; len(errs) < 10 {
				errs = append(errs, err)
			}
		}
		if n > 0 {
			return fmt.Errorf("boltstore: check %s: inconsistent, %d problem(s): %w", path, n, errors.Join(errs...))
		}
		return nil
	})
}
