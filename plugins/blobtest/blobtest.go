// Package blobtest is the conformance suite every plugins.Blobs
// implementation passes.
package blobtest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/weftworks/weft/plugins"
)

// Exercise runs the suite against stores made by newBlobs, one per subtest.
func Exercise(t *testing.T, newBlobs func(t *testing.T) plugins.Blobs) {
	t.Helper()
	ctx := context.Background()
	data := []byte("\x00asm a module")
	hash := plugins.Hash(data)

	t.Run("put then get", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		if err := b.Put(ctx, hash, data); err != nil {
			t.Fatal(err)
		}
		got, err := b.Get(ctx, hash)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get: %q, %v", got, err)
		}
	})
	t.Run("put is idempotent", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		for i := 0; i < 3; i++ {
			if err := b.Put(ctx, hash, data); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := b.Get(ctx, hash); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get: %q, %v", got, err)
		}
	})
	t.Run("missing is ErrNotFound", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		if _, err := b.Get(ctx, hash); !errors.Is(err, plugins.ErrNotFound) {
			t.Fatalf("Get of a missing blob: %v, want ErrNotFound", err)
		}
	})
	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		if err := b.Put(ctx, hash, data); err != nil {
			t.Fatal(err)
		}
		if err := b.Delete(ctx, hash); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, hash); !errors.Is(err, plugins.ErrNotFound) {
			t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
		}
		if err := b.Delete(ctx, hash); err != nil {
			t.Fatalf("deleting a missing blob: %v", err)
		}
	})
	t.Run("bad hash refused", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		for _, h := range []string{"", "../../etc/passwd", "ABCDEF", hash[:10]} {
			if err := b.Put(ctx, h, data); err == nil {
				t.Errorf("Put(%q) succeeded", h)
			}
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := b.Put(cctx, hash, data); !errors.Is(err, context.Canceled) {
			t.Errorf("Put with a cancelled context: %v", err)
		}
	})
	t.Run("concurrent puts of one blob", func(t *testing.T) {
		t.Parallel()
		b := newBlobs(t)
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := b.Put(ctx, hash, data); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got, err := b.Get(ctx, hash); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("Get: %q, %v", got, err)
		}
	})
}
