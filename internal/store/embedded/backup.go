package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Backup is a copy of the store being taken: the store as it was when
// Store.Backup began it, which later writes do not change. It is a bbolt
// file on both engines (CheckFile checks one; Migrate makes a Pebble store
// of one).
//
// On EngineBolt, until it is spooled or closed it holds a bbolt read
// transaction, and writes go on meanwhile but for two costs of bbolt's:
// the pages it sees are not reused, so the file may grow, and a write that
// must enlarge the file's memory map (when the file outgrows it; the map
// doubles up to 1 GiB, then grows by 1 GiB) waits for it to end. Spool
// copies the store to a file beside it and ends the transaction, so that a
// copy sent to a slow reader never holds writes back.
//
// On EnginePebble, Store.Backup writes the bbolt file from one snapshot,
// beside the store, before it returns: the backup is spooled from the
// start, and holds nothing of the store's.
type Backup struct {
	tx    *bolt.Tx // nil once spooled or closed
	path  string
	size  int64
	spool *os.File // the copy, once spooled
}

// Backup begins a backup of the store as it is now. Write it with WriteTo
// (after Spool, for a reader that may be slow) and close it. On
// EnginePebble it writes the copy beside the store first (see Backup),
// which needs room for it; ctx cancels that.
func (s *Store) Backup(ctx context.Context) (*Backup, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := s.db.backup(ctx, s.path)
	if err != nil {
		return nil, s.wrap(err)
	}
	return b, nil
}

// Size is the size of the copy in bytes: what WriteTo writes.
func (b *Backup) Size() int64 { return b.size }

// Spool copies the backup to a temporary file in the store's directory
// (which needs room for it) and ends its read transaction: WriteTo then
// reads the file. An error names the store's file and leaves nothing
// behind. A backup spooled already (every backup on EnginePebble) stays
// as it is.
func (b *Backup) Spool() error {
	if b.tx == nil {
		return nil
	}
	f, err := os.CreateTemp(filepath.Dir(b.path), filepath.Base(b.path)+".backup-*")
	if err != nil {
		return fmt.Errorf("embedded: backup of %s: %w", b.path, err)
	}
	n, err := b.tx.WriteTo(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("embedded: backup of %s: spooling to %s after %d of %d bytes: %w", b.path, f.Name(), n, b.size, err),
			f.Close(), os.Remove(f.Name()))
	}
	b.spool = f
	return b.endTx()
}

// WriteTo writes the copy to w: a bbolt file that Open opens as the
// store it was (restore it, the host stopped, as the data directory's
// bbolt file, or for EnginePebble as its directory with Migrate). It
// returns the bytes written; an error names the store's path.
func (b *Backup) WriteTo(w io.Writer) (int64, error) {
	var n int64
	var err error
	switch {
	case b.spool != nil:
		n, err = io.Copy(w, b.spool)
	case b.tx != nil:
		n, err = b.tx.WriteTo(w)
	default:
		err = berrors.ErrTxClosed
	}
	if err != nil {
		return n, fmt.Errorf("embedded: backup of %s: after %d of %d bytes: %w", b.path, n, b.size, err)
	}
	return n, nil
}

// Close ends the backup, releasing what it holds (the transaction, or the
// spooled copy, which it removes). Closing twice does nothing.
func (b *Backup) Close() error {
	err := b.endTx()
	if f := b.spool; f != nil {
		b.spool = nil
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
	}
	return err
}

func (b *Backup) endTx() error {
	tx := b.tx
	b.tx = nil
	if tx == nil {
		return nil
	}
	if err := tx.Rollback(); err != nil && !errors.Is(err, berrors.ErrTxClosed) {
		return fmt.Errorf("embedded: backup of %s: %w", b.path, err)
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
			err = fmt.Errorf("embedded: check %s: corrupt file: %v", path, r)
		}
	}()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultOpenTimeout})
	if err != nil {
		return fmt.Errorf("embedded: check %s: %w", path, err)
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("embedded: check %s: %w", path, cerr)
		}
	}()
	return db.View(func(tx *bolt.Tx) error {
		m := tx.Bucket(bMeta)
		if m == nil {
			return fmt.Errorf("embedded: check %s: not a weft store: it has no %s bucket", path, bMeta)
		}
		if v := string(m.Get([]byte("schema"))); !readableSchema(v) {
			return fmt.Errorf("embedded: check %s: schema version %q, this build reads %q", path, v, schemaVersion)
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
			return fmt.Errorf("embedded: check %s: inconsistent, %d problem(s): %w", path, n, errors.Join(errs...))
		}
		return nil
	})
}
