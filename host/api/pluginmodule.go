package api

import (
	"fmt"

	"github.com/gofiber/fiber/v2"
)

// pluginModule serves the module bytes of a version a plugin keeps (GET
// /v1/plugins/{name}/versions/{version}/module), its current one or one
// in its history, as application/wasm: what weft attempt export bundles
// with a recorded attempt so that it replays offline. The version is the
// module's sha256, so it is the answer's ETag; the attachment's file name
// is the plugin's name and the version's first 12 digits. It is an
// admin's: a module may be proprietary. An unknown plugin or version is
// a 404; a kept version whose blob is missing or corrupt a 500, logged.
func (s *Server) pluginModule(c *fiber.Ctx) error {
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	name, version := param(c, "name"), param(c, "version")
	wasm, err := s.node.PluginModule(ctx, name, version)
	if err != nil {
		return err
	}
	short := version
	if len(short) > 12 {
		short = short[:12]
	}
	c.Set(fiber.HeaderContentType, "application/wasm")
	c.Set(fiber.HeaderETag, `"`+version+`"`)
	// name is a stored plugin's (abi.ValidName: a-z, 0-9, '_', '-') and
	// version a sha256 in hex, so the file name needs no quoting rules.
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="%s-%s.wasm"`, name, short))
	return c.Send(wasm)
}
