package boltstore

// Issue 40 measurement only (added to internal/store/boltstore through `go
// test -overlay`, see build.sh; never in the package's directory): bbolt's
// options from the environment, and access to the store's bolt.DB and group
// commit for the harness in zz_h40j_test.go.

import (
	"os"

	bolt "go.etcd.io/bbolt"
)

// h40jEnv reports whether the environment variable name is "1".
func h40jEnv(name string) bool { return os.Getenv(name) == "1" }

// H40JStats returns bbolt's statistics of the store's file.
func (s *Store) H40JStats() bolt.Stats { return s.db.Stats() }

// H40JTxID returns the id of the last committed write transaction.
func (s *Store) H40JTxID() (id int) {
	_ = s.db.View(func(tx *bolt.Tx) error { id = tx.ID(); return nil })
	return id
}

// H40JRun runs fn through the store's group commit (batch.go), as every
// write of the store does.
func (s *Store) H40JRun(fn func(*bolt.Tx) error) error { return s.batch.run(fn) }
