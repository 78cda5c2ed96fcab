package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
)

// PluginModule returns the module bytes of a version the plugin name
// keeps, its current one or one in its history (admin: a module may be
// proprietary), so that a recorded attempt can be bundled with the module
// that ran it (weft attempt export). version is the module's sha256 in
// hex, as Plugin's versions and a tape's PluginVersion name it; the bytes
// are checked against it, and an answer that does not hash to it is a
// *TransportError. An unknown plugin or version is an *Error matching
// ErrNotFound.
func (c *Client) PluginModule(ctx context.Context, name, version string) ([]byte, error) {
	r := request{method: http.MethodGet, path: "/v1/plugins/" + seg(name) + "/versions/" + seg(version) + "/module"}
	_, data, target, err := c.read(ctx, r, "application/wasm")
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != version {
		return nil, &TransportError{Method: r.method, URL: target,
			Err: fmt.Errorf("the module of plugin %s version %s that the host sent hashes to %x", name, version, sum)}
	}
	return data, nil
}
