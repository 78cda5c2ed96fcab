package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/node"
)

// adminBackup is `weft admin backup FILE|-`: a backup of the host's
// embedded store, taken while it runs, written to FILE atomically or to
// stdout.
func (a *app) adminBackup(ctx context.Context, args []string) int {
	cmd := a.newClientCmd("admin backup")
	pos, ok := cmd.parse(args, 1, 1, "FILE|-")
	if !ok {
		return cmd.usageExit()
	}
	file := pos[0]
	var (
		n   int64
		err error
	)
	if file == "-" {
		n, err = cmd.c.Backup(ctx, cmd.stdout)
	} else {
		n, err = writeBackup(ctx, cmd.c, file)
	}
	var te *client.TransportError
	switch {
	case errors.As(err, &te) && n > 0:
		// It began: the host is there, the answer was cut short.
		cmd.errorf("admin backup: the backup is incomplete, nothing was written to %s: %v", file, te.Err)
		return exitInternal
	case errors.As(err, &te), errors.As(err, new(*client.Error)), errors.Is(err, context.Canceled):
		return cmd.fail(err)
	case err != nil:
		cmd.errorf("admin backup: %v", err)
		return exitInternal
	}
	switch {
	case cmd.output == "json" && file != "-":
		cmd.json(map[string]any{"file": file, "bytes": n})
	case file == "-":
		fmt.Fprintf(cmd.stderr, "backup: %d bytes written to stdout\n", n)
	default:
		fmt.Fprintf(cmd.stdout, "backup written to %s: %d bytes\n", file, n)
	}
	return exitOK
}

// writeBackup takes a backup into file so that file is only ever a whole
// backup, the previous one or the new: into a temporary file beside it,
// synced and checked (node.CheckBackup), then renamed over file, and
// the directory synced so that the rename is durable too. The temporary
// file is removed when anything fails.
func writeBackup(ctx context.Context, c *client.Client, file string) (n int64, err error) {
	dir := filepath.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return 0, err
	}
	open := true
	defer func() {
		if err == nil {
			return
		}
		if open {
			if cerr := tmp.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		if rerr := os.Remove(tmp.Name()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}()
	if n, err = c.Backup(ctx, tmp); err != nil {
		return n, err
	}
	if err = tmp.Sync(); err != nil {
		return n, fmt.Errorf("syncing %s: %w", tmp.Name(), err)
	}
	open = false
	if err = tmp.Close(); err != nil {
		return n, fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err = node.CheckBackup(tmp.Name()); err != nil {
		return n, fmt.Errorf("the backup received is not a sound store, so %s was left as it was: %w", file, err)
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return n, err
	}
	if err = syncDir(dir); err != nil {
		return n, fmt.Errorf("the backup is in %s, but the rename may not survive a crash: %w", file, err)
	}
	return n, nil
}

// syncDir makes the entries of dir (a rename into it) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	if cerr := d.Close(); serr == nil {
		serr = cerr
	}
	if serr != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, serr)
	}
	return nil
}
