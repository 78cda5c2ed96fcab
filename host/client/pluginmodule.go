package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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
	resp, target, err := c.send(ctx, r, "application/wasm")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("reading the answer: %w", err)}
	case len(data) > maxAnswer:
		return nil, &TransportError{Method: r.method, URL: target, Err: fmt.Errorf("the answer is larger than %d bytes", maxAnswer)}
	case resp.StatusCode >= 300:
		return nil, newError(resp, data)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != version {
		return nil, &TransportError{Method: r.method, URL: target,
			Err: fmt.Errorf("the module of plugin %s version %s that the host sent hashes to %x", name, version, sum)}
	}
	return data, nil
}
