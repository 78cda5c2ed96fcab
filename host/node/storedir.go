package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/weftworks/weft/internal/store/embedded"
)

// The embedded store's names in the data directory (see "Data directory"
// in the package documentation).
const (
	// StoreDir is the Pebble directory of the embedded store, in DataDir.
	StoreDir = "store"
	// LegacyStoreFile is the bbolt store file of earlier versions, in
	// DataDir, and where a backup is put to be restored: Open migrates it
	// into StoreDir when StoreDir does not exist.
	LegacyStoreFile = "weft.db"
	// MigratedSuffix is added to LegacyStoreFile's name once migrated: the
	// file is kept, never read nor deleted by the host, as the way back to
	// an older binary.
	MigratedSuffix = ".migrated"
)

// openEmbedded opens the embedded store, DataDir/store, migrating
// DataDir/weft.db into it first when only the file exists (see "Data
// directory").
func (n *Node) openEmbedded() (*embedded.Store, error) {
	dir := filepath.Join(n.cfg.DataDir, StoreDir)
	file := filepath.Join(n.cfg.DataDir, LegacyStoreFile)
	dirExists, err := exists(dir)
	if err != nil {
		return nil, fmt.Errorf("node: opening the store: %w", err)
	}
	fileExists, err := exists(file)
	if err != nil {
		return nil, fmt.Errorf("node: opening the store: %w", err)
	}
	switch {
	case fileExists && dirExists:
		n.log.Warn("node: the data directory holds a bbolt store file that is not read, as the store directory exists; "+
			"to restore the file instead, stop the host, move the store directory aside and start again",
			"file", file, "store", dir)
	case fileExists:
		if err := n.migrate(file, dir); err != nil {
			return nil, err
		}
	}
	st, err := embedded.Open(dir, embedded.Config{Logger: n.log, Engine: embedded.EnginePebble})
	if err != nil {
		return nil, fmt.Errorf("node: opening the store: %w", err)
	}
	return st, nil
}

// migrate copies the bbolt store file into the new Pebble directory dir,
// then renames file out of the way, keeping it.
func (n *Node) migrate(file, dir string) error {
	n.log.Info("node: migrating the bbolt store file to the store directory (it needs room for a second copy)",
		"from", file, "to", dir)
	start := n.now()
	if err := embedded.Migrate(file, dir, embedded.Config{Logger: n.log}); err != nil {
		return fmt.Errorf("node: migrating the store %s to %s (nothing was changed; fix the cause and start again): %w", file, dir, err)
	}
	took := n.now().Sub(start).Round(time.Millisecond)
	kept, err := keepMigrated(file)
	if err != nil {
		// The store is whole: the next start opens it and warns that the
		// file is not read.
		return fmt.Errorf("node: the store %s was migrated to %s, but renaming the file: %w", file, dir, err)
	}
	n.log.Info("node: store migrated; the bbolt file is kept, never read again (the way back to an older version)",
		"from", file, "to", dir, "took", took, "kept", kept)
	return nil
}

// keepMigrated renames file to file+MigratedSuffix, or, when that is
// taken (an earlier migration's), to the first free file+MigratedSuffix+".N",
// and syncs the directory. It returns the new name.
func keepMigrated(file string) (string, error) {
	kept := file + MigratedSuffix
	for i := 2; ; i++ {
		ok, err := exists(kept)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		kept = file + MigratedSuffix + "." + strconv.Itoa(i)
	}
	if err := os.Rename(file, kept); err != nil {
		return "", err
	}
	d, err := os.Open(filepath.Dir(file))
	if err != nil {
		return "", err
	}
	if err := errors.Join(d.Sync(), d.Close()); err != nil {
		return "", fmt.Errorf("syncing %s: %w", filepath.Dir(file), err)
	}
	return kept, nil
}

// exists reports whether path exists (as anything: a file, a directory, a
// link).
func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, err
	}
}
