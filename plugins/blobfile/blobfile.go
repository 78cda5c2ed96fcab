// Package blobfile stores plugin modules as files under a directory, named by
// their content hash. It is the embedded implementation of plugins.Blobs.
package blobfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weftworks/weft/plugins"
)

// store keeps blobs in dir/sha256/<first two hex digits>/<hash>.
type store struct {
	dir string
}

// New returns blobs kept in files under dir, creating it when missing.
func New(dir string) (plugins.Blobs, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("blobfile: %w", err)
	}
	return &store{dir: dir}, nil
}

func (s *store) path(hash string) (string, error) {
	if !plugins.IsHash(hash) {
		return "", fmt.Errorf("blobfile: %q is not a sha256 hex digest", hash)
	}
	return filepath.Join(s.dir, "sha256", hash[:2], hash), nil
}

// Put implements plugins.Blobs. The file is written beside its final name,
// synced, renamed into place and the directory synced, so that a crash
// leaves either no blob or the whole blob.
func (s *store) Put(ctx context.Context, hash string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(hash)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("blobfile: %w", err)
	}
	f, err := os.CreateTemp(dir, hash+".tmp-*")
	if err != nil {
		return fmt.Errorf("blobfile: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename this fails harmlessly
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("blobfile: writing %s: %w", hash, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("blobfile: syncing %s: %w", hash, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("blobfile: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("blobfile: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("blobfile: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("blobfile: syncing %s: %w", dir, err)
	}
	return nil
}

// Get implements plugins.Blobs.
func (s *store) Get(ctx context.Context, hash string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.path(hash)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", plugins.ErrNotFound, err)
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blobfile: %s: %w", hash, plugins.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("blobfile: %w", err)
	}
	return b, nil
}

// Delete implements plugins.Blobs.
func (s *store) Delete(ctx context.Context, hash string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := s.path(hash)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blobfile: %w", err)
	}
	return nil
}
