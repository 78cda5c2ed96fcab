package node_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// TestPluginModule: the module bytes of a plugin's current version and of
// an older one it keeps are served as uploaded; an unknown plugin or
// version is weft.ErrNotFound naming both; a kept version whose blob is
// gone, or corrupt, is an error that says so and is not ErrNotFound.
func TestPluginModule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n, _, _ := open(t, config(dir))
	ctx := context.Background()
	kit, text := testplugins.Bytes(t, "kit"), testplugins.Bytes(t, "text")
	for _, wasm := range [][]byte{kit, text} {
		if _, _, err := n.PutPlugin(ctx, "kit", wasm); err != nil {
			t.Fatal(err)
		}
	}
	old, cur := plugins.Hash(kit), plugins.Hash(text)
	for v, want := range map[string][]byte{cur: text, old: kit} {
		if got, err := n.PluginModule(ctx, "kit", v); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("PluginModule(kit, %s): %d bytes, %v; want the %d uploaded", v[:12], len(got), err, len(want))
		}
	}

	for _, c := range []struct{ plugin, version string }{{"nope", cur}, {"kit", strings.Repeat("0", 64)}, {"kit", "not-a-hash"}} {
		_, err := n.PluginModule(ctx, c.plugin, c.version)
		if !errors.Is(err, weft.ErrNotFound) || !strings.Contains(err.Error(), c.plugin) || !strings.Contains(err.Error(), c.version) {
			t.Errorf("PluginModule(%s, %s) = %v, want ErrNotFound naming both", c.plugin, c.version, err)
		}
	}

	blob := filepath.Join(dir, "blobs", "sha256", old[:2], old)
	if err := os.WriteFile(blob, append(bytes.Clone(kit), 0), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PluginModule(ctx, "kit", old); err == nil || errors.Is(err, weft.ErrNotFound) || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), old) {
		t.Errorf("corrupt blob: %v", err)
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	if _, err := n.PluginModule(ctx, "kit", old); err == nil || errors.Is(err, weft.ErrNotFound) || !strings.Contains(err.Error(), "missing from the blob store") {
		t.Errorf("missing blob: %v", err)
	}
}

// TestPluginModuleOnRedis: in cluster mode a module uploaded through one
// node is served by another, from the blob store in Redis.
func TestPluginModuleOnRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := clusterNode(t, "a", srv.Addr())
	b := clusterNode(t, "b", srv.Addr())
	ctx := context.Background()
	kit := testplugins.Bytes(t, "kit")
	if _, _, err := a.PutPlugin(ctx, "kit", kit); err != nil {
		t.Fatal(err)
	}
	if got, err := b.PluginModule(ctx, "kit", plugins.Hash(kit)); err != nil || !bytes.Equal(got, kit) {
		t.Fatalf("PluginModule on the other node: %d bytes, %v", len(got), err)
	}
}
