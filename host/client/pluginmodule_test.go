package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// TestPluginModule: the client fetches the module bytes of a plugin's
// current version and of an older one it keeps, as uploaded; a reader
// may not (ErrForbidden); an unknown version is ErrNotFound; an answer
// that does not hash to the version asked for is a *TransportError.
func TestPluginModule(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	admin, reader := newClient(t, url, adminToken), newClient(t, url, readerToken)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kit, text := testplugins.Bytes(t, "kit"), testplugins.Bytes(t, "text")
	for _, wasm := range [][]byte{kit, text} {
		if _, _, err := admin.PutPlugin(ctx, "kit", wasm); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range [][]byte{text, kit} {
		if got, err := admin.PluginModule(ctx, "kit", plugins.Hash(want)); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("PluginModule(kit, %s): %d bytes, %v; want the %d uploaded", plugins.Hash(want)[:12], len(got), err, len(want))
		}
	}
	if _, err := reader.PluginModule(ctx, "kit", plugins.Hash(kit)); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("PluginModule as a reader: %v", err)
	}
	if _, err := admin.PluginModule(ctx, "kit", strings.Repeat("0", 64)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("PluginModule of an unknown version: %v", err)
	}

	// A server that answers other bytes than the version's.
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		_, _ = w.Write(text)
	}))
	defer liar.Close()
	var te *client.TransportError
	if _, err := newClient(t, liar.URL, adminToken).PluginModule(ctx, "kit", plugins.Hash(kit)); !errors.As(err, &te) || !strings.Contains(err.Error(), "hashes to "+plugins.Hash(text)) {
		t.Errorf("PluginModule from a server that sends other bytes: %v", err)
	}
}
